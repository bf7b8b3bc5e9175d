"""Claims moved in bulk: ``claim_rows.move_claims`` against the bare UPDATE it checks and runs.

Run with ``python benchmarks/claim_moves.py`` (``--rows N``, ``--rounds R``). Each round
claims N keys in two fresh SQLite ledgers, then moves every row to ``done`` with its answer
in one transaction: in one ledger through ``move_claims`` (the transition function every
status change goes through: the allowed sources in the WHERE clause and a check of the
count of rows changed), in the other with the bare ``executemany`` UPDATE the claims store
ran before it (no check). The two alternate within each round so a change in machine load
hits both alike. Prints rows/s for each and the ratio (goal: the check costs at most a few
percent, ratio >= 0.9).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from x402lab.ledger import Claims, ClaimStatus, Ledger, in_sql  # noqa: E402
from x402lab.ledger.claim_rows import move_claims  # noqa: E402 (the internal it measures)

DONE = in_sql("status", (ClaimStatus.DONE,))
SETS = "answer = ?, ledger_id = COALESCE(?, ledger_id), error = NULL"


def _claimed(folder: Path, name: str, rows: int) -> tuple[Ledger, list[int]]:
    ledger = Ledger(folder / f"{name}.sqlite", user="bench")
    got = Claims(ledger.db).claim("bench", [f"k{i}" for i in range(rows)])
    return ledger, [c.record.id for c in got.values()]


def _checked(ledger: Ledger, ids: list[int]) -> float:
    rows = [(row_id, b"answer", None) for row_id in ids]
    start = time.perf_counter()
    with ledger.db.transaction() as tx:
        move_claims(tx, rows, ClaimStatus.DONE, 1, sets=SETS)
    return time.perf_counter() - start


def _bare(ledger: Ledger, ids: list[int]) -> float:
    start = time.perf_counter()
    with ledger.db.transaction() as tx:
        tx.executemany(
            f"UPDATE claims SET status = ?, {SETS}, updated_us = ? WHERE id = ?",
            [(str(ClaimStatus.DONE), b"answer", None, 1, row_id) for row_id in ids],
        )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    checked: list[float] = []
    bare: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            folder = Path(tmp) / str(round_)
            folder.mkdir()
            first, first_ids = _claimed(folder, "checked", args.rows)
            second, second_ids = _claimed(folder, "bare", args.rows)
            if round_ % 2:
                bare.append(_bare(second, second_ids))
                checked.append(_checked(first, first_ids))
            else:
                checked.append(_checked(first, first_ids))
                bare.append(_bare(second, second_ids))
            done = first.query(f"SELECT COUNT(*) FROM claims WHERE {DONE}")[0][0]
            assert done == args.rows, done
            first.close()
            second.close()
    best_checked, best_bare = min(checked), min(bare)
    print(f"{args.rows} claim rows to done, best of {args.rounds} rounds:")
    print(f"  move_claims (checked): {args.rows / best_checked:>10,.0f} rows/s")
    print(f"  bare executemany:      {args.rows / best_bare:>10,.0f} rows/s")
    print(f"  ratio checked / bare:  {best_bare / best_checked:.2f}")


if __name__ == "__main__":
    main()

"""Budget reservations from many processes: one PostgreSQL budget against one SQLite file.

Run with ``python benchmarks/budget_reservations.py`` (``--processes P``, ``--each N``,
``--admin-url URL``, ``--unsigned``). P processes (8 by default) share one named budget and
reserve N times each at random prices, all starting together; the cap is about half of what
they ask for, so about half the reservations are refused. Each reservation is what a paid
call does before it leaves: the cap checked and the signed row written ahead with a durable
commit (``--unsigned``: the reservation alone, an ordinary commit).

The same run goes against a throwaway PostgreSQL database (created from ``--admin-url``,
default ``X402LAB_TEST_POSTGRES_URL`` or ``postgresql:///postgres``, dropped at the end) and
against one SQLite file on this machine. For each it prints reservations/s and the checks,
which must hold exactly:

- overshoot 0: the counted rows sum to at most the cap;
- 0 refused with room: replayed in commit order (writers are serialized, so row ids are in
  commit order), every refusal came when the amount would have passed the cap, and every
  reservation fitted;
- the budget's running total equals the sum of its counted rows.

Then the ratio of PostgreSQL's rate to SQLite's. The worker is this script's ``_worker``,
spawned.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BUDGET = "bench"
LOW, HIGH = 1_000, 50_000  # prices in atomic units (0.001 to 0.05 USD)


@dataclass
class Run:
    """What one backend's run shows."""

    backend: str
    processes: int
    reservations: int
    seconds: float
    granted: int
    refused: int
    counted_atomic: int
    cap_atomic: int
    overshoot_atomic: int
    refused_with_room: int
    running_total_agrees: bool

    @property
    def rate(self) -> float:
        return self.reservations / self.seconds if self.seconds > 0 else float("nan")

    @property
    def exact(self) -> bool:
        return (
            self.overshoot_atomic == 0
            and self.refused_with_room == 0
            and self.running_total_agrees
            and self.granted + self.refused == self.reservations
        )


def _worker(
    url: str, cap: int, prices: list[int], signed: bool, ready: Any, start: Any, out: Any
) -> None:
    """One process: open the ledger, wait for the start, reserve every price; report the
    wall clock of its first and last reservation."""
    import x402lab as xl
    from x402lab.ledger import PaymentMeta, SignedAuthorization

    ledger = xl.Ledger(url, user=f"bench-{os.getpid()}")
    budget = xl.Budget(usd=cap / 1_000_000, name=BUDGET).bind(ledger)
    meta = PaymentMeta(service="gateway", method="POST", path="/api/v1/chat/completions")
    pid = os.getpid()

    def sign(number: int) -> Any:
        nonce = "0x" + f"{pid:016x}{number:048x}"
        return lambda: SignedAuthorization(nonce, "0xPayer", 2**40, "signed-payload")

    ready.put(pid)
    start.wait(120)
    began = time.time()
    for number, price in enumerate(prices):
        try:
            budget.reserve(price, meta, sign(number) if signed else None)
        except xl.BudgetExceeded:
            pass
    out.put((began, time.time()))
    ledger.close()


def run(backend: str, url: str, processes: int, each: int, signed: bool, seed: int) -> Run:
    """P processes reserving from one budget of the ledger at ``url``; the checked figures."""
    import x402lab as xl

    draw = random.Random(seed)
    prices = [[draw.randint(LOW, HIGH) for _ in range(each)] for _ in range(processes)]
    cap = sum(map(sum, prices)) // 2
    xl.Ledger(url).close()  # the schema, before the race
    spawn = multiprocessing.get_context("spawn")
    ready, out, start = spawn.Queue(), spawn.Queue(), spawn.Event()
    procs = [
        spawn.Process(target=_worker, args=(url, cap, chunk, signed, ready, start, out))
        for chunk in prices
    ]
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.get(timeout=300)  # every process imported x402lab and opened the ledger
    start.set()
    spans = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(60)
        if proc.exitcode != 0:
            raise SystemExit(f"a worker of {backend} stopped with exit code {proc.exitcode}")
    seconds = max(end for _, end in spans) - min(began for began, _ in spans)
    return _check(backend, url, processes, seconds, cap)


def _check(backend: str, url: str, processes: int, seconds: float, cap: int) -> Run:
    import x402lab as xl

    ledger = xl.Ledger(url)
    rows = ledger.query(
        "SELECT id, status, amount_atomic FROM payments WHERE budget = ? ORDER BY id", (BUDGET,)
    )
    [total] = ledger.query("SELECT counted_atomic FROM budgets WHERE name = ?", (BUDGET,))
    ledger.close()
    counted = granted = refused = with_room = 0
    for _, status, amount in rows:
        if status == "refused":
            refused += 1
            with_room += counted + amount <= cap  # refused though it fitted
        else:
            granted += 1
            counted += amount
    return Run(
        backend=backend,
        processes=processes,
        reservations=len(rows),
        seconds=seconds,
        granted=granted,
        refused=refused,
        counted_atomic=counted,
        cap_atomic=cap,
        overshoot_atomic=max(0, counted - cap),
        refused_with_room=with_room,
        running_total_agrees=int(total[0]) == counted,
    )


def _print(result: Run) -> None:
    print(
        f"{result.backend:<10} {result.processes} processes, {result.reservations} reservations"
        f" in {result.seconds:.2f} s: {result.rate:,.0f} reservations/s;"
        f" granted {result.granted}, refused {result.refused};"
        f" counted {result.counted_atomic} of cap {result.cap_atomic} atomic;"
        f" overshoot {result.overshoot_atomic}; refused with room {result.refused_with_room};"
        f" running total agrees: {result.running_total_agrees}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--each", type=int, default=250, help="reservations per process")
    parser.add_argument(
        "--admin-url",
        default=os.environ.get("X402LAB_TEST_POSTGRES_URL", "postgresql:///postgres"),
        help="a PostgreSQL role that may create databases",
    )
    parser.add_argument("--unsigned", action="store_true", help="reservations alone")
    parser.add_argument("--seed", type=int, default=402)
    args = parser.parse_args(argv)
    import psycopg

    name = f"x402lab_bench_{secrets.token_hex(4)}"
    with psycopg.connect(args.admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
    base = args.admin_url.rsplit("/", 1)[0]
    signed = not args.unsigned
    what = "signed rows written ahead (durable)" if signed else "reservations alone"
    print(f"{args.processes} processes x {args.each} reservations each: {what}")
    try:
        postgres = run("postgresql", f"{base}/{name}", args.processes, args.each, signed, args.seed)
        _print(postgres)
    finally:
        with psycopg.connect(args.admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory(prefix="x402lab-bench-") as folder:
        sqlite = run(
            "sqlite", str(Path(folder) / "ledger.sqlite"), args.processes, args.each, signed,
            args.seed,
        )  # fmt: skip
    _print(sqlite)
    print(f"postgresql / sqlite: {postgres.rate / sqlite.rate:.2f}x reservations/s")
    exact = postgres.exact and sqlite.exact
    print("exact: overshoot 0 and no refusal with room on both" if exact else "NOT EXACT")
    return 0 if exact else 1


if __name__ == "__main__":
    raise SystemExit(main())

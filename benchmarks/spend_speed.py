"""``spend()`` per call on ledgers of 10 to 100,000 rows, against a bare pandas groupby.

Run with ``python benchmarks/spend_speed.py`` (``--rows 10,1000,100000``, ``--repeat R``).
Each ledger is a synthetic Arrow table with the ledger's schema (services, routes with query
strings, models with nulls, budgets, payers, days and every status), built in this process;
no emulator runs. For each size it times, with ``time.process_time`` (the best of R runs):

- x402lab: ``spend(table, ("service", "path", "model"), atomic=True)``, the default grouping:
  the route cut from the path, per-status counts and sums, the exact USD columns, the
  declared schema, a pandas frame out;
- bare: the same table to pandas, one boolean column per status group and a
  ``groupby(...).sum()`` of counts and amounts: no route cut, no USD columns, no schema.

Prints milliseconds per call and the ratio x402lab / bare (lower is better; a notebook user
calls ``lab.spend()`` again and again while reading a ledger, so a small ledger's call should
cost about what the bare groupby does).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa

from x402lab.analysis.spend import STATUS_GROUPS, spend
from x402lab.ledger import PaymentStatus, ledger_schema
from x402lab.tables.usd import usd_array

KEYS = ("service", "path", "model")


def synthetic_ledger(rows: int, seed: int = 402) -> pa.Table:
    """``rows`` ledger rows with the ledger's schema, drawn from a fixed seed."""
    rng = np.random.default_rng(seed)
    schema = ledger_schema()

    def pick(options: list[object]) -> list[object]:
        return [options[i] for i in rng.integers(0, len(options), rows)]

    start = datetime(2026, 1, 1, tzinfo=UTC)
    amount = rng.integers(1_000, 2_000_000, rows)
    columns: dict[str, object] = {name: [None] * rows for name in schema.names}
    columns.update(
        id=list(range(1, rows + 1)),
        ts=[start + timedelta(minutes=int(m)) for m in rng.integers(0, 60 * 24 * 90, rows)],
        service=pick(["gateway", "reports"]),
        method=["POST"] * rows,
        path=pick(["/api/v1/chat/completions", "/api/v1/embeddings", "/api/intel/reports?x=1"]),
        model=pick(["model-a", "model-b", "model-c", None]),
        budget=pick(["main", "research", "ops"]),
        amount_atomic=amount,
        amount_usd=usd_array(pa.array(amount, pa.int64())),
        status=pick([str(status) for status in PaymentStatus]),
        held=[bool(h) for h in rng.random(rows) < 0.01],
        payer=pick(["0xaaa", "0xbbb"]),
        resends=[0] * rows,
        prepaid=[False] * rows,
    )
    return pa.table(columns, schema=schema)


def bare(table: pa.Table) -> pd.DataFrame:
    """The baseline: pandas' own groupby of per-status counts and amounts."""
    frame = table.to_pandas()
    parts = pd.DataFrame({key: frame[key] for key in KEYS})
    parts["payments"] = 1
    for group, statuses in STATUS_GROUPS.items():
        member = frame["status"].isin([str(status) for status in statuses])
        parts[f"{group}_count"] = member.astype("int64")
        parts[f"{group}_atomic"] = frame["amount_atomic"].where(member, 0)
    return parts.groupby(list(KEYS), dropna=False, sort=True).sum().reset_index()


def best_ms(function: Callable[[], object], repeat: int) -> float:
    function()  # warm-up: first-call imports and caches
    times = []
    for _ in range(repeat):
        begun = time.process_time()
        function()
        times.append(time.process_time() - begun)
    return min(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="10,1000,100000", help="ledger sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=20, help="timed runs per size (best kept)")
    args = parser.parse_args()
    print(f"{'rows':>8} {'x402lab ms':>11} {'bare ms':>9} {'ratio':>6}")
    for rows in (int(text) for text in args.rows.split(",")):
        table = synthetic_ledger(rows)
        ours = best_ms(lambda table=table: spend(table, KEYS, atomic=True), args.repeat)
        theirs = best_ms(lambda table=table: bare(table), args.repeat)
        print(f"{rows:>8} {ours:>11.2f} {theirs:>9.2f} {ours / theirs:>6.2f}")


if __name__ == "__main__":
    main()

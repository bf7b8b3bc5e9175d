"""Packing: money per row of a typed classification, one row per request against packs.

Run with ``python benchmarks/packing.py`` (``--rows N``, ``--model ID``,
``--violation-rate R``, ``--constraint-violation-rate R``). On the embedded emulator (its
prices are the gateway's: a 0.01 USD minimum charge a request), the same N one-line reviews
are classified with ``labels=`` twice, each on a fresh ledger so nothing is reused: once at
one row per request, once with ``rows_per_request="auto"``. It prints USD paid per row for
each, the ratio, and the share of rows answered. Then the packed run again with structured
answers broken on purpose (``schema_violation_rate``), and an extraction (the label and a
nullable ``stars`` bounded to 1..5, as a JSON Schema) with values put outside the schema's
constraints on purpose (``constraint_violation_rate``): under both, every row must end typed
(``ok``) or ``invalid``, and the rows' ``paid_usd`` (exact decimals) must add up to the
chain's transfers to the atomic unit (re-asks included). At one row per request every short
request pays the minimum charge, label or extraction alike, so the first run is the
baseline of all.

Goals (issues of typed, packed batches and of enforced schemas): at least 20x less paid per
row with ``"auto"`` and at least 99% of rows answered, also under constraint violations, and
the sums exact.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

import x402lab as xl
from x402lab.emulator.settings import EmulatorSettings, Faults

LABELS = ["positive", "negative", "neutral", "mixed"]
OPENINGS = [
    "Great battery, love it",
    "Arrived broken, want a refund",
    "The screen is fine for reading",
    "Fast delivery but the support was rude",
    "Overpriced for what it does",
    "Decent price, average sound",
]


def reviews(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"review": [f"{OPENINGS[i % len(OPENINGS)]} (order {i})" for i in range(n)]}
    )


#: The extraction of the constraint run: a label, and stars only where the review gives a number.
EXTRACTION = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": LABELS},
        "stars": {"type": ["integer", "null"], "minimum": 1, "maximum": 5},
    },
    "required": ["label", "stars"],
}


def run(
    rows: int, model: str, size: int | str, faults: Faults | None = None, schema: Any = None
) -> dict[str, Any]:
    settings = EmulatorSettings(faults=faults or Faults(), seed=7)
    folder = Path(tempfile.mkdtemp(prefix="x402lab-packing-"))
    lab = xl.connect(
        ledger=folder / "ledger.sqlite", budget=xl.Budget(usd=rows * 0.02 + 5),
        emulator_settings=settings,
    )  # fmt: skip
    try:
        started = time.perf_counter()
        frame = lab.batch_chat(
            reviews(rows), prompt="Sentiment of this review: {review}", model=model,
            labels=None if schema else LABELS, schema=schema, rows_per_request=size,
            concurrency=16, progress=None,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        emulator = lab.emulator
        assert emulator is not None
        chain = sum(t.amount_atomic for t in emulator.chain.transfers())
        paid = int(frame["paid_usd"].sum().scaleb(6))  # an exact Decimal sum
        statuses = frame["status"].value_counts().to_dict()
        return {
            "rows": rows,
            "requests": len(emulator.chain.transfers()),
            "paid_usd": paid / 1_000_000,
            "usd_per_row": paid / 1_000_000 / rows,
            "answered": statuses.get("ok", 0) / rows,
            "invalid": statuses.get("invalid", 0),
            "other": rows - statuses.get("ok", 0) - statuses.get("invalid", 0),
            "shares_match_chain": paid == chain,
            "pack_size": int(frame["pack_size"].max()),
            "seconds": seconds,
        }
    finally:
        lab.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--model", default="zai-org-glm-4.7-flash")
    parser.add_argument("--violation-rate", type=float, default=0.05)
    parser.add_argument("--constraint-violation-rate", type=float, default=0.05)
    args = parser.parse_args()

    single = run(args.rows, args.model, 1)
    packed = run(args.rows, args.model, "auto")
    broken = run(args.rows, args.model, "auto", Faults(schema_violation_rate=args.violation_rate))
    outside = run(
        args.rows, args.model, "auto",
        Faults(constraint_violation_rate=args.constraint_violation_rate), EXTRACTION,
    )  # fmt: skip
    table = pd.DataFrame(
        [single, packed, broken, outside],
        index=[
            "1 row per request",
            '"auto"',
            f'"auto", {args.violation_rate:.0%} broken answers',
            f'"auto" extraction, {args.constraint_violation_rate:.0%} constraint violations',
        ],
    )
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(table.round(6))
    ratio = single["usd_per_row"] / packed["usd_per_row"]
    print(f"\npaid per row: {ratio:.1f}x less with rows_per_request='auto' (goal: >= 20x)")
    print(f"rows answered with 'auto': {packed['answered']:.1%} (goal: >= 99%)")
    outside_ratio = single["usd_per_row"] / outside["usd_per_row"]
    print(
        f"under constraint violations: {outside_ratio:.1f}x less, {outside['answered']:.1%}"
        " answered (goals: >= 20x, >= 99%)"
    )
    ended = broken["other"] == 0 and outside["other"] == 0
    exact = broken["shares_match_chain"] and outside["shares_match_chain"]
    print(
        f"with violations: every row ok or invalid: {ended};"
        f" rows' paid_usd == chain transfers: {exact}"
    )
    met = (
        ratio >= 20
        and packed["answered"] >= 0.99
        and outside_ratio >= 20
        and outside["answered"] >= 0.99
        and ended
        and exact
    )
    print("goals met" if met else "GOALS NOT MET")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())

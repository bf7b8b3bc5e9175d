"""Packing: money per row of a typed classification, one row per request against packs.

Run with ``python benchmarks/packing.py`` (``--rows N``, ``--model ID``,
``--violation-rate R``). On the embedded emulator (its prices are the gateway's: a 0.01 USD
minimum charge a request), the same N one-line reviews are classified with ``labels=`` twice,
each on a fresh ledger so nothing is reused: once at one row per request, once with
``rows_per_request="auto"``. It prints USD paid per row for each, the ratio, and the share of
rows answered. Then the packed run again with structured answers broken on purpose
(``schema_violation_rate``): every row must end typed (``ok``) or ``invalid``, and the rows'
``paid_usd`` must add up to the chain's transfers to the atomic unit (re-asks included).

Goals (issue of typed, packed batches): at least 20x less paid per row with ``"auto"``, at
least 99% of rows answered, and the sum exact under violations.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

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


def run(rows: int, model: str, size: int | str, violation_rate: float = 0.0) -> dict[str, float]:
    settings = EmulatorSettings(faults=Faults(schema_violation_rate=violation_rate), seed=7)
    folder = Path(tempfile.mkdtemp(prefix="x402lab-packing-"))
    lab = xl.connect(
        ledger=folder / "ledger.sqlite", budget=xl.Budget(usd=rows * 0.02 + 5),
        emulator_settings=settings,
    )  # fmt: skip
    try:
        started = time.perf_counter()
        frame = lab.batch_chat(
            reviews(rows), prompt="Sentiment of this review: {review}", model=model,
            labels=LABELS, rows_per_request=size, concurrency=16, progress=None,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        emulator = lab.emulator
        assert emulator is not None
        chain = sum(t.amount_atomic for t in emulator.chain.transfers())
        paid = int(round(frame["paid_usd"].sum() * 1_000_000))
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
    args = parser.parse_args()

    single = run(args.rows, args.model, 1)
    packed = run(args.rows, args.model, "auto")
    broken = run(args.rows, args.model, "auto", args.violation_rate)
    table = pd.DataFrame(
        [single, packed, broken],
        index=["1 row per request", '"auto"', f'"auto", {args.violation_rate:.0%} violations'],
    )
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(table.round(6))
    ratio = single["usd_per_row"] / packed["usd_per_row"]
    print(f"\npaid per row: {ratio:.1f}x less with rows_per_request='auto' (goal: >= 20x)")
    print(f"rows answered with 'auto': {packed['answered']:.1%} (goal: >= 99%)")
    ended = broken["other"] == 0
    print(
        f"with violations: every row ok or invalid: {ended};"
        f" rows' paid_usd == chain transfers: {broken['shares_match_chain']}"
    )
    met = ratio >= 20 and packed["answered"] >= 0.99 and ended and broken["shares_match_chain"]
    print("goals met" if met else "GOALS NOT MET")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())

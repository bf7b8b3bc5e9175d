"""Client CPU per typed row: a packed typed batch bought, then read back from the ledger.

Run with ``python benchmarks/typed_rows.py`` (``--rows N``, ``--rows-per-request K``,
``--rounds R``, ``--pydantic``, ``--profile``). The emulator runs as a subprocess (as in
``benchmarks/batch_throughput.py``, whose ``start_server`` this uses), so the process CPU
time (``time.process_time``) of a batch is the client's alone. Each round opens a fresh lab
on a fresh ledger and runs the same typed extraction of N one-line reviews (a label, a
nullable 1..5 ``stars`` and a ``topics`` list, as a JSON Schema with a bound the wire schema
cannot carry, or as a pydantic model with ``--pydantic``) at K rows per request twice: once
bought (every answer parsed, checked, stored in the ledger and built into the frame), once
again on the same lab (every row ``cached``: read back from the ledger, checked again,
built into the frame). It prints the client CPU per row of each, the median over the rounds
(the first round is a warm-up, not counted: imports and the emulator's first answers), and
checks that every row ended ``ok``/``cached`` and the rows' ``paid_usd`` add up to the
chain's transfers.

``--profile`` prints the top entries (by own time) of one more bought run under cProfile.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from batch_throughput import start_server  # noqa: E402

MODEL = "zai-org-glm-4.7-flash"
LABELS = ["positive", "negative", "neutral", "mixed"]
OPENINGS = [
    "Great battery, love it",
    "Arrived broken, want a refund",
    "The screen is fine for reading, 4 stars",
    "Fast delivery but the support was rude",
    "Overpriced for what it does",
    "Decent price, average sound, 3 of 5",
]
SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": LABELS},
        "stars": {"type": ["integer", "null"], "minimum": 1, "maximum": 5},
        "topics": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "summary": {"type": "string", "maxLength": 400},  # said in words, checked here
    },
    "required": ["label", "stars", "topics", "summary"],
}


def pydantic_schema() -> Any:
    from typing import Literal

    import pydantic

    class Review(pydantic.BaseModel):
        label: Literal["positive", "negative", "neutral", "mixed"]
        stars: int | None = pydantic.Field(ge=1, le=5)
        topics: list[str] = pydantic.Field(max_length=3)
        summary: str = pydantic.Field(max_length=400)

    return Review


def reviews(n: int, round_: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"review": [f"{OPENINGS[i % len(OPENINGS)]} (round {round_}, order {i})" for i in range(n)]}
    )


async def one_round(
    gateway: str, rows: int, per_request: int, round_: int, schema: Any
) -> tuple[float, float]:
    """CPU seconds of the bought batch and of the same batch read back."""
    import x402lab as xl

    folder = Path(tempfile.mkdtemp(prefix="x402lab-typed-"))
    lab = xl.connect_async(
        gateway, gateway, wallet=xl.Wallet.create(), budget=xl.Budget(usd=10_000),
        ledger=folder / "ledger.sqlite",
    )  # fmt: skip
    frame = reviews(rows, round_)
    kwargs = dict(
        prompt="Read this review: {review}", model=MODEL, schema=schema,
        rows_per_request=per_request, concurrency=16, progress=None,
    )  # fmt: skip
    try:
        started = time.process_time()
        bought = await lab.batch_chat(frame, **kwargs)
        bought_cpu = time.process_time() - started
        started = time.process_time()
        again = await lab.batch_chat(frame, **kwargs)
        again_cpu = time.process_time() - started
        assert (bought["status"] == "ok").all(), bought["status"].value_counts()
        assert (again["status"] == "cached").all(), again["status"].value_counts()
        emulator_paid = int(bought["paid_usd"].sum().scaleb(6))
        assert int(again["paid_usd"].sum().scaleb(6)) == 0
        assert emulator_paid > 0
        columns = list(SCHEMA["properties"])
        assert bought[columns].equals(again[columns]), "the read-back frame differs"
        return bought_cpu, again_cpu
    finally:
        await lab.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--rows-per-request", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--pydantic", action="store_true", help="the schema as a pydantic model")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    schema = pydantic_schema() if args.pydantic else SCHEMA
    gateway, stop = start_server(False, 0.0)
    import x402lab.connection  # noqa: F401  (imports are not a batch's)

    print(
        f"load average {os.getloadavg()[0]:.1f}; {args.rounds} rounds (+1 warm-up) of"
        f" {args.rows} typed rows at {args.rows_per_request} rows per request,"
        f" schema as {'a pydantic model' if args.pydantic else 'a JSON Schema'}"
    )
    try:
        bought, again = [], []
        for round_ in range(args.rounds + 1):
            b, a = asyncio.run(one_round(gateway, args.rows, args.rows_per_request, round_, schema))
            print(f"round {round_}: bought {b * 1e6 / args.rows:7.0f} µs/row,"
                  f" read back {a * 1e6 / args.rows:7.0f} µs/row"
                  + (" (warm-up)" if round_ == 0 else ""))  # fmt: skip
            if round_:
                bought.append(b)
                again.append(a)
        print(
            f"median client CPU per typed row: bought"
            f" {statistics.median(bought) * 1e6 / args.rows:.0f} µs, read back"
            f" {statistics.median(again) * 1e6 / args.rows:.0f} µs"
        )
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            asyncio.run(one_round(gateway, args.rows, args.rows_per_request, 99, schema))
            profile.disable()
            stats = pstats.Stats(profile)
            stats.sort_stats("tottime").print_stats(30)
            if os.environ.get("TYPED_CUMULATIVE"):
                stats.sort_stats("cumulative").print_stats("x402lab", 60)
    finally:
        stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Paid calls per second of ``lab.batch(lab.search, ...)`` against the one-trip floor.

Run with ``python benchmarks/route_batches.py`` (``--calls N``, default 300; ``--rounds R``;
``--concurrency C``, default 32; ``--latency S``, default 0.25). The emulator runs as a
subprocess (``python -m x402lab serve --latency S``: every answer, the 402 too, waits S
seconds, as a real network would), so it does not share the client's GIL. Each round times,
back to back and each on a fresh lab with its own wallet and ledger (its first batch: the
catalog and the price unknown):

- ``lab.batch(lab.search, queries)``: N distinct queries, the full paid path (each row's
  request recorded from ``lab.search``, claimed in the ledger, reserved, signed, written
  ahead with an fsync, its answer stored with its settlement);
- ``lab.batch_chat(prompts)``: N distinct short chats, the baseline of the same engine
  (its goal, issue 36: >= 0.85 of the floor at 250 ms).

The one-trip floor is ``concurrency / latency`` paid calls a second: every call paid with its
first send, ``concurrency`` in flight. No fresh lab reaches it: its first signature waits for
one round trip that learns the challenge (what the payment pays, to whom), and the calls then
run in ``ceil(calls / concurrency)`` round trips, the last of them part full. So the best a
client with no CPU time at all could do is ``(calls / concurrency) / (1 + ceil(calls /
concurrency))`` of the floor: 0.85 for 300 rows at 32 (9.4 rows a slot in 11 trips), 0.89 for
400, 0.92 for 384; the script prints it as "the ceiling" beside each ratio. Prints calls/s
and the ratio to the floor of each, per round and as the median (goal for the route batch:
>= 0.85, as ``batch_chat``), and the load average: other work on the machine moves these
figures, so compare ratios of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

from batch_throughput import start_server  # the emulator as a subprocess, as there

MODEL = "zai-org-glm-4.7-flash"


async def timed(gateway: str, kind: str, calls: int, concurrency: int, round_: int) -> float:
    """Seconds of a fresh lab's batch of ``calls`` distinct rows (``kind``: search or chat)."""
    import x402lab as xl

    folder = Path(tempfile.mkdtemp(prefix="x402lab-routes-bench-"))
    lab = xl.connect_async(
        gateway,
        gateway,
        wallet=xl.Wallet.create(),
        budget=xl.Budget(usd=10_000),
        ledger=folder / "ledger.sqlite",
    )
    try:
        rows = [f"{kind} round {round_} question {i}" for i in range(calls)]
        started = time.perf_counter()
        if kind == "search":
            frame = await lab.batch(
                lab.search, rows, limit=3, concurrency=concurrency, progress=None
            )
        else:
            frame = await lab.batch_chat(
                rows, model=MODEL, max_tokens=16, concurrency=concurrency, progress=None
            )
        spent = time.perf_counter() - started
        assert (frame["status"] == "ok").all(), frame["status"].value_counts()
        return spent
    finally:
        await lab.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.25)
    args = parser.parse_args()
    floor = args.concurrency / args.latency
    waves = args.calls / args.concurrency
    ceiling = waves / (1 + math.ceil(waves))  # one trip to learn, then the waves (see above)
    gateway, stop = start_server(in_process=False, latency_s=args.latency)
    rates: dict[str, list[float]] = {"search": [], "chat": []}
    try:
        for round_ in range(args.rounds):
            for kind in ("search", "chat"):
                spent = asyncio.run(timed(gateway, kind, args.calls, args.concurrency, round_))
                rates[kind].append(args.calls / spent)
            print(
                f"round {round_ + 1}: lab.batch(search) {rates['search'][-1]:6.1f} calls/s"
                f" ({rates['search'][-1] / floor:.2f} of the floor), batch_chat"
                f" {rates['chat'][-1]:6.1f} ({rates['chat'][-1] / floor:.2f})"
            )
    finally:
        stop()
    search, chat = (statistics.median(rates[k]) for k in ("search", "chat"))
    print(
        f"{args.calls} rows, concurrency {args.concurrency}, latency {args.latency * 1000:.0f} ms;"
        f" one-trip floor {floor:.0f} calls/s; a fresh lab's ceiling {ceiling:.3f} of it;"
        f" load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"median: lab.batch(search) {search:.1f} calls/s = {search / floor:.2f} of the floor"
        f" (goal >= 0.85: {'met' if search / floor >= 0.85 else 'NOT met'});"
        f" batch_chat {chat:.1f} = {chat / floor:.2f}; search / chat {search / chat:.2f}"
    )
    print(
        f"of the ceiling: lab.batch(search) {search / floor / ceiling:.2f},"
        f" batch_chat {chat / floor / ceiling:.2f}"
    )


if __name__ == "__main__":
    main()

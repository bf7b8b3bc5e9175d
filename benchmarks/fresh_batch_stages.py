"""Where a fresh lab's batch spends its time at a given latency, stage by stage.

Run with ``python benchmarks/fresh_batch_stages.py`` (``--calls N``, default 400;
``--concurrency C``, default 32; ``--latency S``, default 0.25). The emulator runs as a
subprocess (``python -m x402lab serve --latency S``), and one fresh lab (its own wallet and
ledger, the catalog and the price unknown) runs one ``batch_chat`` of N distinct rows.
Timestamps are taken around four of the paid path's steps by wrapping them in this process
only (the code itself is not changed): aiohttp's request (``transport.direct.answer_of``: a
request's send and its answer's headers), the batch's send turn (``SendTurn.take`` and
``Held.release``: how long a request waits for it and holds it), the write-ahead fsync
(``WriteAhead.durable_now``) and each request's return to the batch (``Buyer.send``). A task
that sleeps 1 ms over and over measures how long the event loop runs without a turn for it;
``gc.callbacks`` times CPython's collections.

Prints the batch's wall time against the one-trip floor and against a fresh lab's ceiling
(``benchmarks/route_batches.py`` says why), each wave's send times, and the stages' medians.
Answers and sends are paired by their order (the k-th answer with the k-th return, the k-th
answer with the send ``concurrency`` places later), so those two figures are close ones, not
exact. The figures move with the machine's load: compare runs of one sitting.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import math
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from batch_throughput import start_server  # the emulator as a subprocess, as there

MODEL = "zai-org-glm-4.7-flash"
now = time.perf_counter


class Stages:
    """Timestamps and durations gathered while the batch runs."""

    def __init__(self) -> None:
        self.sends: list[float] = []  # a paid request handed to aiohttp
        self.answers: list[float] = []  # its answer's headers in (status 200)
        self.returns: list[float] = []  # its call back in the batch
        self.turn_waits: list[float] = []
        self.turn_holds: list[float] = []
        self.fsyncs: list[float] = []
        self.stretches: list[tuple[float, float]] = []  # (start, length) of loop stretches
        self.collections: list[tuple[int, float]] = []  # (generation, seconds)


def instrument(stages: Stages) -> None:
    """Wrap the four steps (see the module docstring) to record into ``stages``."""
    from x402lab.batch.run import _buying
    from x402lab.ledger import sqlite
    from x402lab.transport import turn, wire

    answer_of = wire.answer_of

    async def timed_answer_of(session: Any, request: Any, proxy: Any) -> Any:
        sent = now()
        answer = await answer_of(session, request, proxy)
        if answer.status == 200 and request.url.path.startswith("/api/v1/chat"):
            stages.sends.append(sent)
            stages.answers.append(now())
        return answer

    wire.answer_of = timed_answer_of  # type: ignore[assignment]

    take = turn.SendTurn.take

    @contextlib.asynccontextmanager
    async def timed_take(self: Any) -> AsyncIterator[Any]:
        asked = now()
        async with take(self) as held:
            stages.turn_waits.append(now() - asked)
            if held is not None:
                held.taken_at = now()
            yield held

    turn.SendTurn.take = timed_take  # type: ignore[method-assign]

    release = turn.Held.release

    def timed_release(self: Any) -> None:
        if self.held and hasattr(self, "taken_at"):
            stages.turn_holds.append(now() - self.taken_at)
        release(self)

    turn.Held.release = timed_release  # type: ignore[method-assign]

    durable_now = sqlite.WriteAhead.durable_now

    def timed_durable_now(self: Any) -> None:
        started = now()
        durable_now(self)
        stages.fsyncs.append(now() - started)

    sqlite.WriteAhead.durable_now = timed_durable_now  # type: ignore[method-assign]

    send = _buying.Buyer.send

    async def timed_send(self: Any, *args: Any, **kwargs: Any) -> Any:
        reply = await send(self, *args, **kwargs)
        stages.returns.append(now())
        return reply

    _buying.Buyer.send = timed_send  # type: ignore[method-assign]


async def stretches(stages: Stages) -> None:
    """Record how long each 1 ms sleep overran: the loop was busy with other tasks."""
    while True:
        started = now()
        await asyncio.sleep(0.001)
        stages.stretches.append((started, now() - started - 0.001))


def collections_timer(stages: Stages) -> Callable[[str, dict[str, Any]], None]:
    began = [0.0]

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began[0] = now()
        else:
            stages.collections.append((info["generation"], now() - began[0]))

    return callback


async def run(gateway: str, calls: int, concurrency: int, stages: Stages) -> tuple[float, float]:
    """The fresh lab's batch; returns its start and end times."""
    import x402lab as xl

    lab = xl.connect_async(
        gateway,
        gateway,
        wallet=xl.Wallet.create(),
        budget=xl.Budget(usd=10_000),
        ledger=Path(tempfile.mkdtemp(prefix="x402lab-stages-")) / "ledger.sqlite",
    )
    watcher = asyncio.create_task(stretches(stages))
    timer = collections_timer(stages)
    gc.callbacks.append(timer)
    try:
        started = now()
        frame = await lab.batch_chat(
            [f"stages question {i}" for i in range(calls)],
            model=MODEL, max_tokens=16, concurrency=concurrency, progress=None,
        )  # fmt: skip
        ended = now()
    finally:
        gc.callbacks.remove(timer)
        watcher.cancel()
        await lab.aclose()
    assert (frame["status"] == "ok").all(), frame["status"].value_counts()
    return started, ended


def ms(values: list[float]) -> str:
    if not values:
        return "none"
    median, mean = statistics.median(values) * 1000, statistics.mean(values) * 1000
    return f"median {median:.2f} ms, mean {mean:.2f}"


def report(stages: Stages, started: float, ended: float, args: argparse.Namespace) -> None:
    wall = ended - started
    floor = args.concurrency / args.latency
    waves = args.calls / args.concurrency
    ceiling = waves / (1 + math.ceil(waves))
    rate = args.calls / wall
    print(
        f"{args.calls} rows at concurrency {args.concurrency}, latency {args.latency * 1000:.0f}"
        f" ms: {wall:.3f} s = {wall / args.latency:.2f} round trips; {rate:.1f} calls/s ="
        f" {rate / floor:.3f} of the floor, {rate / floor / ceiling:.3f} of the ceiling"
        f" ({ceiling:.3f})"
    )
    sends = sorted(t - started for t in stages.sends)
    for first in range(0, len(sends), args.concurrency):
        wave = sends[first : first + args.concurrency]
        number, start, end = first // args.concurrency, wave[0] * 1000, wave[-1] * 1000
        print(f"  wave {number:2d}: sent {start:7.1f} .. {end:7.1f} ms")
    answers, returns = sorted(stages.answers), sorted(stages.returns)
    trips = [a - s for s, a in zip(sorted(stages.sends), answers, strict=False)]
    print(f"send to answer's headers: {ms(trips)}")
    back = [r - a for a, r in zip(answers, returns, strict=False)]
    print(f"answer's headers to the call's return: {ms(back)}")
    turnaround = [
        sends[k + args.concurrency] - (answers[k] - started)
        for k in range(len(answers) - args.concurrency)
    ]
    print(f"answer to the next send on its slot: {ms(turnaround)}")
    print(f"send turn: waited {ms(stages.turn_waits)}; held {ms(stages.turn_holds)}")
    print(f"write-ahead commit and fsync: {ms(stages.fsyncs)} ({len(stages.fsyncs)} of them)")
    long = [length for _, length in stages.stretches if length > 0.005]
    print(
        f"loop stretches over 5 ms: {len(long)}, {sum(long):.3f} s together, the longest"
        f" {max((length for _, length in stages.stretches), default=0) * 1000:.1f} ms"
    )
    by_generation: dict[int, list[float]] = {}
    for generation, seconds in stages.collections:
        by_generation.setdefault(generation, []).append(seconds)
    print(
        "collections: "
        + (
            ", ".join(
                f"generation {g}: {len(v)} in {sum(v) * 1000:.1f} ms"
                for g, v in sorted(by_generation.items())
            )
            or "none"
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.25)
    args = parser.parse_args()
    stages = Stages()
    instrument(stages)
    gateway, stop = start_server(in_process=False, latency_s=args.latency)
    try:
        started, ended = asyncio.run(run(gateway, args.calls, args.concurrency, stages))
    finally:
        stop()
    report(stages, started, ended, args)


if __name__ == "__main__":
    main()

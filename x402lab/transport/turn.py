"""A batch's requests leave one at a time, each as soon as it is ready, not in bursts.

asyncio runs the tasks that are ready one after another, each until it next waits. When many
of a batch's requests become ready together (its first wave; the answers of a wave that
arrive together), each does its own work (reserve in the budget, sign, make its ledger row
durable, build the HTTP request), and its bytes reach the socket only in a later loop
iteration: aiohttp writes a request's body from a task of its own (on Python below 3.12 that
task first runs an iteration later), and a shared fsync of the write-ahead rows runs in a
callback of the next iteration. So none of them leaves before all of them have done their
work, and they leave in a burst. A server answers a burst one request after another, the
answers come back bunched, the client works through them one after another, and the next wave
leaves in a burst again: each wave's requests wait for the work of those ahead of them.

A batch holds a ``SendTurn``: one of its requests at a time goes from its reservation to the
moment aiohttp has taken it (``send_in_turn``, in the wire), then the next one starts. The
holder makes its row durable with an fsync of its own at once (no other request can share it
in that iteration), and its bytes leave before the next request's work begins: requests
leave one by one, each as soon as its own work is done. The turn a request holds goes with it
explicitly: on its call (``CallInfo.turn``) and, below httpx, in the request's extensions
(``TURN``), never in a context variable.

``benchmarks/batch_throughput.py`` (concurrency 32; the code before the turn run right after
on the same machine): a fresh lab's 400 rows at 250 ms, 0.86 of the one-trip floor against
0.80 (the first waves' answers come back 254-261 ms after they left, not 262-285);
a warm lab at 50 ms, 387.5 paid calls/s against 324.4; on loopback, where the turn steps
aside, 525.7 against 523.3 (``docs/rate-limits.md``, "The first paid wave").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

from x402lab.busy import Busy
from x402lab.payments import HeldTurn

T = TypeVar("T")

#: Above this share of wall time spent on the event loop's thread, the turn steps aside.
BUSY_MAX = 0.9
#: The key of a request's extensions that carries the turn it holds (``Held``).
TURN = "x402lab.send_turn"


class Held:
    """The turn one request holds until aiohttp has taken it (or it ends without sending)."""

    def __init__(self, lock: asyncio.Lock) -> None:
        self._lock = lock
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._lock.release()


class SendTurn:
    """One request at a time from its reservation to its socket; waiters in arrival order.

    The order costs CPU (an fsync per request rather than one shared by the requests of an
    iteration, a task and an iteration per hand-off) and buys latency. When the event loop's
    thread is busy nearly all the time (fast answers: the batch is bound by the client's
    work, not by the round trip), requests go without the turn, as before it existed, until
    the thread is less busy (``busy``: its CPU time over wall time, ``x402lab.busy``; above
    ``busy_max`` the turn steps aside).
    """

    def __init__(self, *, busy_max: float = BUSY_MAX) -> None:
        self._lock = asyncio.Lock()  # fair: released to the first waiter
        self._busy = Busy()
        self.busy_max = busy_max

    @property
    def busy(self) -> float:
        """The loop thread's share of wall time on the CPU, as last measured."""
        return self._busy.last

    @contextlib.asynccontextmanager
    async def take(self) -> AsyncIterator[Held | None]:
        """Hold the turn while sending one request, which carries the ``Held`` turn this
        yields (None: no turn): the wire releases it once the request is handed to aiohttp;
        leaving the block releases it if that never happened."""
        if self._busy.share() > self.busy_max:
            yield None  # bound by the client's work: no turn (see the class docstring)
            return
        await self._lock.acquire()
        held = Held(self._lock)
        try:
            yield held
        finally:
            held.release()


def holding(turn: HeldTurn | None) -> bool:
    """Whether a request's ``turn`` (``CallInfo.turn``) is still held, not handed on yet."""
    return turn is not None and turn.held


def hand_on(turn: HeldTurn | None) -> None:
    """Pass a request's ``turn`` on before the request is handed over (its row waits for a
    slow disk's shared fsync, which the next requests may join meanwhile)."""
    if turn is not None:
        turn.release()


def carrying(turn: HeldTurn | None) -> dict[str, HeldTurn]:
    """The extensions of an httpx request that carries ``turn`` to the wire (none without)."""
    return {TURN: turn} if turn is not None else {}


async def send_in_turn(send: Coroutine[Any, Any, T], turn: HeldTurn | None) -> T:
    """Await ``send`` (the request's whole exchange); when its request holds ``turn``, pass
    the turn on once ``send`` has handed the request to aiohttp (its first step)."""
    if turn is None or not turn.held:
        return await send
    task = asyncio.ensure_future(send)
    try:
        # The task's first step runs before this one resumes: it hands the request over
        # (aiohttp schedules its write, which runs before whatever the next holder does).
        await asyncio.sleep(0)
    except BaseException:
        task.cancel()
        raise
    finally:
        turn.release()
    return await task

"""How many requests a batch keeps in flight, and how fast it starts them.

``concurrency=N`` (an int) is a fixed limit: at most N requests between "reserve" and
"answer" (``FixedLimit``, a semaphore). ``concurrency="auto"`` (the default) or
``AutoConcurrency(ceiling=...)`` learns the service's limit (``AdaptiveLimit``): the
``_rate`` controller paces request starts and bounds the requests in flight, hears of
every 429 through the slot each request carries (``CallInfo.pacer``) and, with a
``RateShare``, shares what it learned with every process paying from the same wallet through
the ledger.

The runner uses either the same way::

    async with limit.running():           # for the whole run
        ...
        async with limit.slot() as pacer:  # around each request (None: a fixed limit)
            await send(..., pacer=pacer)
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from x402lab.batch.concurrency._rate import DEFAULT_CEILING, MEASURE_S, RateController
from x402lab.batch.concurrency._rate_share import RateShare, share_for
from x402lab.errors import ConfigError

if TYPE_CHECKING:
    from x402lab.payments import Pacer
    from x402lab.session import Session

#: The most requests a batch may keep in flight, fixed or learned.
MAX_CONCURRENCY = 1024


@dataclass(frozen=True)
class AutoConcurrency:
    """``concurrency="auto"`` with a ceiling other than the default: the batch learns the
    request rate and the requests in flight, never above ``ceiling`` in flight."""

    ceiling: int = DEFAULT_CEILING

    def __post_init__(self) -> None:
        value = self.ceiling
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"ceiling must be an int in 1..{MAX_CONCURRENCY}, got {value!r}")
        if not 1 <= value <= MAX_CONCURRENCY:
            raise ConfigError(f"ceiling must be an int in 1..{MAX_CONCURRENCY}, got {value!r}")


Concurrency = int | AutoConcurrency


def concurrency_of(value: Any) -> Concurrency:
    """``value`` ("auto", an AutoConcurrency or an int in 1..1024) checked; ConfigError
    naming what is accepted otherwise."""
    if value == "auto" and isinstance(value, str):
        return AutoConcurrency()
    if isinstance(value, AutoConcurrency):
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CONCURRENCY:
        raise ConfigError(
            f'concurrency must be "auto", xl.AutoConcurrency(ceiling=N) or an int in'
            f" 1..{MAX_CONCURRENCY}, got {value!r}"
        )
    return value


def ceiling_of(concurrency: Concurrency) -> int:
    """The most requests ``concurrency`` may keep in flight."""
    return concurrency.ceiling if isinstance(concurrency, AutoConcurrency) else concurrency


@dataclass(frozen=True)
class Pace:
    """What the progress bar and the summary show: the current rate (None: no limit
    known), the requests in flight, the highest rate reached and the 429s met."""

    rate: float | None = None
    in_flight: int = 0
    peak_rate: float | None = None
    limited: int = 0


class Limit(Protocol):
    ceiling: int

    def running(self) -> contextlib.AbstractAsyncContextManager[None]: ...

    def slot(self) -> contextlib.AbstractAsyncContextManager[Pacer | None]: ...

    def pace(self) -> Pace: ...


class FixedLimit:
    """At most ``ceiling`` requests in flight, started as fast as they come."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self._sem = asyncio.Semaphore(ceiling)
        self._in_flight = 0

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        yield

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[Pacer | None]:
        async with self._sem:
            self._in_flight += 1
            try:
                yield None  # a 429 is retried as the transport's own backoff says
            finally:
                self._in_flight -= 1

    def pace(self) -> Pace:
        return Pace(in_flight=self._in_flight)


class _Slot:
    """One request's place: tells the controller of its 429s (the ``Pacer`` its call carries)."""

    def __init__(self, controller: RateController, share: RateShare | None) -> None:
        self._controller = controller
        self._share = share
        self.started = controller.start()

    def limited(self, retry_after_s: float | None) -> float:
        sent = None
        controller = self._controller
        if self._share is not None and math.isinf(controller.wallet_rate):
            sent = self._share.sent_times(MEASURE_S)  # the first limit met: what we sent
        controller.limited_429(self.started, retry_after_s, wallet_sent=sent)
        if self._share is not None:
            self._share.poke()  # others hear of the cut at once, not a period later
        return self._controller.retry_in(retry_after_s or 0.0)

    def resending(self) -> None:
        self.started = self._controller.resend()


class AdaptiveLimit:
    """The learned limit: ``_rate``'s controller on the event loop."""

    def __init__(
        self,
        ceiling: int = DEFAULT_CEILING,
        *,
        share: RateShare | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ceiling = ceiling
        self.controller = RateController(ceiling=ceiling, clock=clock)
        self._share = share
        self._changed = asyncio.Event()
        self._turn = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Share the limit with other processes while the run lasts (with a RateShare)."""
        if self._share is None:
            yield
            return
        self._share.sync(self.controller)  # start from what the others learned
        task = asyncio.create_task(self._share.keep(self.controller, self._changed.set))
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            self._share.leave(self.controller)

    async def _acquire(self) -> _Slot:
        # One waiter at a time, in arrival order (asyncio.Lock is fair): requests start in
        # the order they asked, none starves behind later ones.
        async with self._turn:
            controller = self.controller
            while True:
                delay = controller.delay()
                if delay == 0:
                    return _Slot(controller, self._share)
                self._changed.clear()
                if delay is None:  # the window is full: an answer frees a place
                    await self._changed.wait()
                else:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), delay)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[Pacer | None]:
        slot = await self._acquire()
        answered = False
        try:
            yield slot
            answered = True
        finally:
            if answered:
                self.controller.answered(slot.started)
            else:
                self.controller.released()
            self._changed.set()

    def pace(self) -> Pace:
        controller = self.controller
        rate = controller.rate if math.isfinite(controller.rate) else None
        return Pace(
            rate=rate,
            in_flight=controller.in_flight,
            peak_rate=controller.peak_rate or rate,
            limited=controller.limited,
        )


def limit_for(concurrency: Any, session: Session | None = None) -> Limit:
    """The limit a batch runs under: fixed for an int, learned for "auto" (shared through
    ``session``'s ledger by the processes paying from its wallet)."""
    checked = concurrency_of(concurrency)
    if isinstance(checked, AutoConcurrency):
        share = share_for(session) if session is not None else None
        return AdaptiveLimit(checked.ceiling, share=share)
    return FixedLimit(checked)

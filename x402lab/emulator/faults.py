"""The failures the emulator causes on purpose (``EmulatorSettings.faults``).

``FaultDice`` rolls them for one service from a generator seeded with the emulator's seed and
the service name, so a fault schedule is the same on every run with that seed. A 429 or 503
answers before any payment is looked at (nothing settles); ``LatencyMiddleware`` delays every
answer of a service, ``AnswerDelayMiddleware`` the body of a settled one. Every such wait is a
``Hold``: it ends early once released, when a test that needed answers held on the wire wants
the rest at once, or when the emulator stops (nothing is left to hold them for).
"""

from __future__ import annotations

import asyncio
import random
import threading

from starlette.middleware import Middleware
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from x402lab.emulator.settings import Faults

_RELEASE_POLL_S = 0.02


class Hold:
    """The delay faults' waits, all ended by ``release()`` (from any thread, for good)."""

    def __init__(self) -> None:
        self._released = threading.Event()

    @property
    def released(self) -> bool:
        return self._released.is_set()

    def release(self) -> None:
        self._released.set()

    async def wait(self, seconds: float) -> None:
        """Sleep ``seconds``, or less once released."""
        # Polled rather than awaited: release() comes from another thread, and the app may
        # run on any event loop (a server's, or a client's through an ASGI transport).
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while not self.released and (left := end - loop.time()) > 0:
            await asyncio.sleep(min(left, _RELEASE_POLL_S))


class FaultDice:
    """Seeded, thread-safe rolls of one service's faults."""

    def __init__(self, faults: Faults, *, seed: int, service: str) -> None:
        self.faults = faults
        self._rng = random.Random(f"{seed}:{service}")
        self._lock = threading.Lock()
        self.hold = Hold()

    def fires(self, rate: float) -> bool:
        """True with probability ``rate`` (never for 0, without using up a roll)."""
        if rate <= 0.0:
            return False
        with self._lock:
            return self._rng.random() < rate

    def request_fault(self) -> tuple[str, Response] | None:
        """(counter name, 429 or 503 answer) when a fault fires for this request, else None."""
        if self.fires(self.faults.rate_429):
            return "faults_429", JSONResponse(
                {"error": "rate_limited", "message": "too many requests (emulated fault)"},
                status_code=429,
                headers={"Retry-After": f"{self.faults.retry_after_s:g}"},
            )
        if self.fires(self.faults.rate_5xx):
            return "faults_5xx", JSONResponse(
                {"error": "service_unavailable", "message": "upstream unavailable (emulated)"},
                status_code=503,
            )
        return None

    def middleware(self) -> list[Middleware]:
        """Starlette middleware adding ``faults.latency_s`` before every answer and
        ``faults.answer_delay_s`` between a settled answer's headers and its body."""
        return [
            Middleware(LatencyMiddleware, seconds=self.faults.latency_s, hold=self.hold),
            Middleware(AnswerDelayMiddleware, seconds=self.faults.answer_delay_s, hold=self.hold),
        ]


class LatencyMiddleware:
    """Pure ASGI middleware that waits ``seconds`` (or until ``hold`` is released) before
    handling each HTTP request."""

    def __init__(self, app: ASGIApp, seconds: float = 0.0, hold: Hold | None = None) -> None:
        self.app = app
        self.seconds = seconds
        self.hold = hold or Hold()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.seconds > 0:
            await self.hold.wait(self.seconds)
        await self.app(scope, receive, send)


class AnswerDelayMiddleware:
    """Pure ASGI middleware that sends the body of an answer carrying a receipt (a
    ``PAYMENT-RESPONSE`` header) ``seconds`` after its headers (or once ``hold`` is released)."""

    def __init__(self, app: ASGIApp, seconds: float = 0.0, hold: Hold | None = None) -> None:
        self.app = app
        self.seconds = seconds
        self.hold = hold or Hold()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.seconds <= 0 or self.hold.released:
            await self.app(scope, receive, send)
            return
        delay = False

        async def delayed(message: Message) -> None:
            nonlocal delay
            if message["type"] == "http.response.start":
                delay = any(name.lower() == b"payment-response" for name, _ in message["headers"])
            elif message["type"] == "http.response.body" and delay:
                delay = False
                await self.hold.wait(self.seconds)
            await send(message)

        await self.app(scope, receive, delayed)

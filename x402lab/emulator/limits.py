"""Rate limits as a real inference service has them: token buckets per payer.

Two buckets per key (``rate_limit_rpm`` requests and ``rate_limit_tpm`` tokens a minute), each
holding one second's worth of its rate (rpm/60, at least 1) and refilled continuously. The key
is the payment's ``from`` address on a paid request, and the client's address for an unpaid
request to a paid route. A request is admitted when every bucket holds what it needs (a
request larger than a bucket waits for a full one and leaves it in debt); otherwise the
answer is 429 with ``Retry-After`` (whole seconds, as HTTP has it) and ``retry-after-ms`` (the
exact wait, as OpenAI's and Azure's services send it). The gate asks before it looks at a
payment, so a limited paid request is never verified nor settled.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.responses import JSONResponse, Response


@dataclass
class _Bucket:
    level: float
    at: float


class _Buckets:
    """One kind of bucket (requests or tokens), one per key."""

    def __init__(self, per_minute: int) -> None:
        self.refill = per_minute / 60.0
        self.capacity = max(1.0, self.refill)
        self._by_key: dict[str, _Bucket] = {}

    def wait(self, key: str, need: float, now: float) -> float:
        """Seconds until ``need`` fits in ``key``'s bucket (0: it fits now)."""
        bucket = self._by_key.get(key)
        if bucket is None:
            bucket = self._by_key[key] = _Bucket(self.capacity, now)
        bucket.level = min(self.capacity, bucket.level + (now - bucket.at) * self.refill)
        bucket.at = now
        missing = min(need, self.capacity) - bucket.level
        return max(0.0, missing / self.refill)

    def take(self, key: str, amount: float) -> None:
        self._by_key[key].level -= amount


class RateLimits:
    """The buckets of one service; thread-safe. ``rpm``/``tpm`` None: that limit is off."""

    def __init__(
        self,
        rpm: int | None,
        tpm: int | None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._requests = _Buckets(rpm) if rpm else None
        self._tokens = _Buckets(tpm) if tpm else None
        self._clock = clock
        self._lock = threading.Lock()
        self.limited = 0

    @property
    def active(self) -> bool:
        return self._requests is not None or self._tokens is not None

    def admit(self, key: str, tokens: int = 0) -> float | None:
        """None when the request may go (its request and tokens are taken from ``key``'s
        buckets), else the seconds until it could (nothing is taken)."""
        with self._lock:
            now = self._clock()
            wait = 0.0
            if self._requests is not None:
                wait = self._requests.wait(key, 1, now)
            if self._tokens is not None and tokens > 0:
                wait = max(wait, self._tokens.wait(key, tokens, now))
            if wait > 0:
                self.limited += 1
                return wait
            if self._requests is not None:
                self._requests.take(key, 1)
            if self._tokens is not None and tokens > 0:
                self._tokens.take(key, tokens)
            return None

    def stats(self) -> dict[str, int]:
        """``rateLimited``: requests answered 429 by a bucket (the 429 fault is counted apart)."""
        with self._lock:
            return {"rateLimited": self.limited}


def limited_response(wait_s: float) -> Response:
    """The 429 a limited request gets: ``Retry-After`` rounded up to whole seconds, and the
    exact wait in ``retry-after-ms``."""
    return JSONResponse(
        {
            "error": "rate_limited",
            "message": f"rate limit reached for this payer; retry in {wait_s:.3f} s",
        },
        status_code=429,
        headers={
            "Retry-After": str(max(1, math.ceil(wait_s))),
            "retry-after-ms": str(max(1, math.ceil(wait_s * 1000))),
        },
    )

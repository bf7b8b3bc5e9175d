"""How the unpaid phase retries, and how long to wait before sending again (also between
sends of the same signed payload): ``Retry-After`` when the server gives it, else
exponential backoff."""

from __future__ import annotations

import email.utils
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long the unpaid phase retries."""

    attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    retry_statuses: frozenset[int] = frozenset({429, 500, 502, 503, 504})


#: The policy a client gets when none is given.
DEFAULT_RETRY = RetryPolicy()


def retry_delay(policy: RetryPolicy, attempt: int, retry_after: str | None, now: float) -> float:
    """Seconds to wait before try ``attempt + 1``: ``Retry-After`` (seconds or HTTP date)
    when given, else exponential backoff; never more than ``policy.max_delay_s``."""
    if retry_after:
        text = retry_after.strip()
        try:
            delay = float(text)
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(text) if text else None
            delay = parsed.timestamp() - now if parsed is not None else policy.base_delay_s
        return min(max(delay, 0.0), policy.max_delay_s)
    return min(policy.base_delay_s * (2**attempt), policy.max_delay_s)


def retry_after_of(headers: Mapping[str, str]) -> str | None:
    """The wait a 429 or 503 asks for: ``retry-after-ms`` (OpenAI's and Azure's exact wait,
    as seconds) when sent, else ``Retry-After``."""
    exact = headers.get("retry-after-ms")
    if exact:
        try:
            return f"{float(exact) / 1000:g}"
        except ValueError:
            pass
    return headers.get("retry-after")


def seconds_of(retry_after: str | None, now: float) -> float | None:
    """``Retry-After`` (seconds or an HTTP date) as seconds from ``now``; None if absent or
    unreadable."""
    if not retry_after or not retry_after.strip():
        return None
    text = retry_after.strip()
    try:
        return max(float(text), 0.0)
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        return max(parsed.timestamp() - now, 0.0)

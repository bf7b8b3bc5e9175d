"""Bounds on what a service may make a lab read: the body of an answer, by what it is, and the
nesting of its JSON. A hostile or broken server cannot make a lab hold a gigabyte, recurse
without end, or hand it a 402 so large it is read whole before anything is checked.

``Limits`` is a lab's (``connect(limits=...)``); the transport counts every answer's bytes as
they arrive (``wire``) and stops at the limit of its kind: a 402 or any other answer that is
not a success (``error_bytes``: small, it is read before anything is signed), a media file
(``media_bytes``: generous), anything else (``json_bytes``). ``parse_json`` refuses JSON nested
deeper than ``json_depth`` before the parser recurses into it. Each breach is a
``LimitExceeded`` (a ProtocolError) naming the limit and the way to raise it. The time a whole
request may take is ``connect(timeout_s=...)``, the deadline the transport keeps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from x402lab.errors import ConfigError, LimitExceeded
from x402lab.x402.codec import deeper_than

MIB = 1 << 20
#: The request extension that says an answer is a media file (``Limits.media_bytes``).
MEDIA = "x402lab.media"


@dataclass(frozen=True)
class Limits:
    """The most a lab reads of one answer. ``json_bytes``: a JSON (or any non-media) answer;
    ``error_bytes``: a 402 or another answer that is not a success; ``media_bytes``: a media
    file (a finished job's retrieve or its ``download_url``); ``json_depth``: how deeply a
    JSON answer may nest. Raises ConfigError for a limit that is not a whole number ≥ 1."""

    json_bytes: int = 128 * MIB
    error_bytes: int = 1 * MIB
    media_bytes: int = 512 * MIB
    json_depth: int = 256

    def __post_init__(self) -> None:
        for name in ("json_bytes", "error_bytes", "media_bytes", "json_depth"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"Limits({name}=...) must be a whole number ≥ 1, got {value!r}")

    def body_bytes(self, status: int, media: bool) -> tuple[int, str]:
        """The limit of an answer of ``status`` (``media``: a media file) and its name."""
        if status >= 300:
            return self.error_bytes, "error_bytes"
        if media:
            return self.media_bytes, "media_bytes"
        return self.json_bytes, "json_bytes"


DEFAULT_LIMITS = Limits()


def too_large(limit: int, name: str, what: str) -> LimitExceeded:
    return LimitExceeded(
        f"{what} is larger than the limit of {limit:,} bytes (Limits.{name}); nothing more was"
        f" read. If the service is trusted and its answers are this large, raise it:"
        f" connect(..., limits=xl.Limits({name}=...))",
        limit=name,
    )


def parse_json(content: bytes | str, limits: Limits = DEFAULT_LIMITS, what: str = "answer") -> Any:
    """``json.loads(content)``, refusing (LimitExceeded) JSON nested deeper than
    ``limits.json_depth`` before the parser recurses into it. Raises ValueError for text that
    is not JSON, as ``json.loads`` does."""
    raw = content.encode() if isinstance(content, str) else content
    depth = deeper_than(raw, limits.json_depth)
    if depth is not None:
        raise LimitExceeded(
            f"the {what} is JSON nested {depth:,} levels deep, more than the limit of"
            f" {limits.json_depth} (Limits.json_depth); it was not parsed",
            limit="json_depth",
        )
    try:
        return json.loads(raw)
    except RecursionError:  # never a raw RecursionError
        raise LimitExceeded(
            f"the {what} is JSON nested too deeply to parse (Limits.json_depth)",
            limit="json_depth",
        ) from None

"""What the rehearsal answered, to tell when a later request was built from an answer.

A rehearsed answer comes from a local emulator, not from the target: a request whose body
holds a piece of such an answer (a prompt quoting an earlier reply, a loop over its lines)
is priced with text the real run will not send, so its price is not exact. Pieces are the
answer's strings split at line and sentence ends, kept when long enough to mean something
(``MIN_PIECE``) and not an echo of the request that produced them.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

MIN_PIECE = 16
MAX_PIECES = 200_000  # a bound on memory for very long notebooks; later answers are not kept
_SPLIT = re.compile(r"[\n\r]+|(?<=[.!?])\s+")


def strings(value: Any) -> Iterator[str]:
    """Every string inside a decoded JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def body_text(content: bytes) -> str:
    """The strings of a JSON request body joined (the raw text when it is not JSON)."""
    try:
        decoded = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return content.decode("utf-8", "replace")
    return "\x00".join(strings(decoded))


@dataclass(frozen=True)
class Source:
    """The paid request an answer piece came from: its order among the rehearsal's paid
    requests, and its ``max_tokens`` when it set one (the longest answer it can get)."""

    call: int
    max_tokens: int | None


class Answers:
    """The pieces of every answer the rehearsal gave, and which request each came from."""

    def __init__(self) -> None:
        self._pieces: dict[str, Source] = {}
        self._lock = threading.Lock()

    def add(self, answer: Any, request_text: str, source: Source) -> None:
        """Keep the pieces of ``answer`` (decoded JSON) that ``request_text`` did not hold."""
        with self._lock:
            for text in strings(answer):
                for piece in {text, *_SPLIT.split(text)}:
                    piece = piece.strip()
                    if len(piece) < MIN_PIECE or piece in request_text:
                        continue
                    if len(self._pieces) >= MAX_PIECES:
                        return
                    self._pieces.setdefault(piece, source)

    def found_in(self, request_text: str) -> dict[str, Source]:
        """The pieces of earlier answers that ``request_text`` holds, with their sources."""
        if not request_text:
            return {}
        with self._lock:
            items = list(self._pieces.items())
        return {piece: source for piece, source in items if piece in request_text}

"""Plain chat batches: one row's prompt (or message list) per request, its answer's fields
per row, stored as JSON (``_codec``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from x402lab.batch.kinds._codec import Answer, JsonRequests, Reask
from x402lab.gateway.results import ChatResult
from x402lab.gateway.text import chat_body
from x402lab.routes import CHAT

#: The answer columns of a chat row.
CHAT_COLUMNS = ("response", "reasoning", "finish_reason", "prompt_tokens", "completion_tokens")


def encode_json(answer: Answer) -> bytes:
    """A chat row's answer as stored in the ledger."""
    return json.dumps(answer).encode()


def decode_json(blob: bytes) -> Answer:
    return tuple(json.loads(blob))


@dataclass(frozen=True)
class ChatCodec(JsonRequests):
    """A chat completion per item; an item is a prompt text or a list of messages."""

    model: str
    system: str | None = None
    max_tokens: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    unchecked: frozenset[str] = frozenset()

    kind = "chat"
    path = CHAT
    columns = CHAT_COLUMNS
    #: Every answer is kept as it came.
    reask: ClassVar[Reask | None] = None

    def body(self, items: Sequence[Any]) -> dict[str, Any]:
        (messages,) = items  # a plain chat request carries one row
        return chat_body(
            messages,
            model=self.model,
            system=self.system,
            max_tokens=self.max_tokens,
            **self.params,
        )

    def split(self, answer: Any, n: int) -> list[Answer]:
        result = ChatResult.from_response(CHAT, answer, None)
        fields = (result.text, result.reasoning, result.finish_reason)
        return [(*fields, result.prompt_tokens, result.completion_tokens)]

    def encode(self, answer: Answer) -> bytes:
        return encode_json(answer)

    def decode(self, blob: bytes) -> Answer:
        return decode_json(blob)

    def empty(self) -> Answer:
        return (None,) * len(self.columns)

"""Result objects of paid calls: the parsed answer plus ``.cost``."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from x402lab.money import format_usd
from x402lab.transport import Cost


@dataclass
class Result:
    """A paid call's answer: ``data`` (parsed JSON, or bytes for media) and its ``cost``."""

    path: str
    data: Any
    cost: Cost | None
    model: str | None = None
    content_type: str | None = None

    @property
    def paid_usd(self) -> float | None:
        return self.cost.amount_usd if self.cost else None

    def _cost_text(self) -> str:
        return str(self.cost) if self.cost else "free"

    def __repr__(self) -> str:
        size = (
            f"{len(self.data)} bytes" if isinstance(self.data, bytes) else type(self.data).__name__
        )
        name = type(self).__name__
        return f"<{name} {self.path} model={self.model} {size}, cost {self._cost_text()}>"


@dataclass(repr=False)
class ChatResult(Result):
    """A chat completion. A thinking model's empty ``text`` with ``reasoning`` is a success."""

    text: str = ""
    reasoning: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_response(cls, path: str, body: dict[str, Any], cost: Cost | None) -> ChatResult:
        choice = (body.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        return cls(
            path=path,
            data=body,
            cost=cost,
            model=body.get("model"),
            content_type="application/json",
            text=message.get("content") or "",
            reasoning=message.get("reasoning_content"),
            finish_reason=choice.get("finish_reason"),
            usage=dict(body.get("usage") or {}),
        )

    @property
    def truncated(self) -> bool:
        """True when the answer stopped at ``max_tokens`` (finish_reason ``length``)."""
        return self.finish_reason == "length"

    @property
    def prompt_tokens(self) -> int | None:
        return self.usage.get("prompt_tokens")

    @property
    def completion_tokens(self) -> int | None:
        return self.usage.get("completion_tokens")

    def __repr__(self) -> str:
        shown = self.text if self.text else f"(reasoning) {self.reasoning or ''}"
        if len(shown) > 200:
            shown = shown[:200] + "…"
        cut = " [cut at max_tokens]" if self.truncated else ""
        return f"<ChatResult {self.model}: {shown!r}{cut} cost {self._cost_text()}>"

    def __str__(self) -> str:
        return self.text


@dataclass(repr=False)
class EmbeddingResult(Result):
    """Embedding vectors as a float32 array of shape (n, dim)."""

    vectors: Any = None

    @property
    def vector(self) -> Any:
        """The first (or only) vector."""
        return self.vectors[0]

    def __repr__(self) -> str:
        shape = getattr(self.vectors, "shape", None)
        return f"<EmbeddingResult {self.model} shape={shape} cost {self._cost_text()}>"


@dataclass(repr=False)
class MediaResult(Result):
    """Binary media (image, audio, video): shows inline in Jupyter, ``save(path)`` writes it."""

    def save(self, path: str | Path) -> Path:
        """Write the bytes to ``path``; returns the path."""
        target = Path(path).expanduser()
        target.write_bytes(self.bytes)
        return target

    @property
    def bytes(self) -> bytes:
        if not isinstance(self.data, bytes):
            raise TypeError(f"{self.path} answered JSON, not media bytes")
        return self.data

    def _repr_png_(self) -> bytes | None:
        if self.content_type == "image/png" and isinstance(self.data, bytes):
            return self.data
        return None

    def _repr_html_(self) -> str | None:
        if not isinstance(self.data, bytes) or not self.content_type:
            return None
        kind = self.content_type.split("/")[0]
        if kind not in ("audio", "video", "image") or self.content_type == "image/png":
            return None
        encoded = base64.b64encode(self.data).decode("ascii")
        source = f"data:{html.escape(self.content_type)};base64,{encoded}"
        caption = html.escape(f"{self.model} · {self._cost_text()}")
        if kind == "image":
            return f'<figure><img src="{source}"/><figcaption>{caption}</figcaption></figure>'
        return (
            f'<figure><{kind} controls src="{source}"></{kind}>'
            f"<figcaption>{caption}</figcaption></figure>"
        )


def describe_cost(cost: Cost | None) -> str:
    """One line for a cost: amount, status and transaction."""
    if cost is None:
        return "free"
    return f"{format_usd(cost.amount_atomic)} {cost.status} tx={cost.tx_hash}"

"""Result objects of paid calls: the parsed answer plus ``.cost``.

``cost`` is the ``Cost`` of the payment (amount, tx hash, receipt, quoted vs paid). Binary
answers (images, audio) keep their bytes and display inline in Jupyter. A streamed chat is
an ``AsyncChatStream`` (``x402lab.gateway.chat_stream``).
"""

from __future__ import annotations

import base64
import builtins
import html
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from x402lab.payments import Cost
from x402lab.private import private_folder, write_private
from x402lab.reprs import card, text_block


@dataclass
class Result:
    """A paid call's answer: ``data`` (parsed JSON, or bytes for media) and its ``cost``."""

    path: str
    data: Any
    cost: Cost | None
    model: str | None = None
    content_type: str | None = None

    @property
    def paid_usd(self) -> Decimal | None:
        """What this call paid, exact (a Decimal: sums of many are exact); 0 for a stored
        answer (``cost`` says what bought it)."""
        if self.cached:
            return Decimal(0)
        return self.cost.amount_usd if self.cost else None

    @property
    def cached(self) -> bool:
        """True when this is a stored answer given again: nothing was paid for it now;
        ``cost`` is the payment that bought it (amount, tx hash, ``paid_at``)."""
        return bool(self.cost and self.cost.cached)

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
            reasoning=_reasoning_of(message),
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

    def _repr_html_(self) -> str:
        """Jupyter: the answer, its tokens and what it cost."""
        below = text_block(self.text or "(no text: see the reasoning)")
        if self.reasoning:
            below += f"<details><summary>reasoning</summary>{text_block(self.reasoning)}</details>"
        tokens = f"{self.prompt_tokens} in, {self.completion_tokens} out"
        finish = f"{self.finish_reason} (cut at max_tokens)" if self.truncated else None
        rows: list[tuple[str, object]] = [
            ("model", self.model),
            ("tokens", tokens if self.usage else None),
            ("finish", finish or self.finish_reason),
            ("cost", self._cost_text()),
        ]
        return card("ChatResult", rows, below=below)

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
        """Write the bytes to ``path`` (a file private to its owner); returns the path."""
        return write_private(Path(path).expanduser(), self.bytes)

    @property
    def bytes(self) -> bytes:
        if not isinstance(self.data, bytes):
            raise TypeError(f"{self.path} answered JSON, not media bytes")
        return self.data

    def _repr_png_(self) -> builtins.bytes | None:
        if self.content_type == "image/png" and isinstance(self.data, builtins.bytes):
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


@dataclass(repr=False)
class ImageResult(MediaResult):
    """Generated images: ``images`` (PNG bytes each); ``bytes`` and the inline view show the
    first; ``save_all(folder)`` writes every one."""

    images: list[builtins.bytes] = field(default_factory=list)

    @classmethod
    def from_json(
        cls, path: str, body: dict[str, Any], cost: Cost | None, model: str | None
    ) -> ImageResult:
        """From the native (``images``: base64) or OpenAI-style (``data[].b64_json``) body."""
        encoded: list[str] = []
        if isinstance(body.get("images"), list):
            encoded = [i for i in body["images"] if isinstance(i, str)]
        elif isinstance(body.get("data"), list):
            for item in body["data"]:
                value = item.get("b64_json") or item.get("url") or ""
                if value.startswith("data:"):
                    value = value.split(",", 1)[-1]
                if value and not value.startswith("http"):
                    encoded.append(value)
        images = [base64.b64decode(e) for e in encoded]
        return cls(
            path=path,
            data=images[0] if images else b"",
            cost=cost,
            model=model,
            content_type="image/png",
            images=images,
        )

    def save_all(self, folder: str | Path, stem: str = "image") -> list[Path]:
        """Write every image as ``folder/stem-N.png`` (private to their owner); returns the
        paths."""
        target = private_folder(Path(folder).expanduser())
        paths = [target / f"{stem}-{index}.png" for index in range(len(self.images))]
        for path, data in zip(paths, self.images, strict=True):
            write_private(path, data)
        return paths

    def _repr_png_(self) -> builtins.bytes | None:
        return self.images[0] if len(self.images) == 1 else None

    def _repr_html_(self) -> str | None:
        if len(self.images) <= 1:
            return None
        caption = html.escape(f"{self.model} · {len(self.images)} images · {self._cost_text()}")
        tags = "".join(
            f'<img src="data:image/png;base64,{base64.b64encode(i).decode()}"/>'
            for i in self.images
        )
        return f"<figure>{tags}<figcaption>{caption}</figcaption></figure>"

    def __repr__(self) -> str:
        return f"<ImageResult {self.model}: {len(self.images)} image(s), cost {self._cost_text()}>"


@dataclass(repr=False)
class TextResult(Result):
    """A paid answer that is mostly text (a transcription, a scraped page, a parsed document)."""

    text: str = ""

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        shown = self.text if len(self.text) <= 120 else self.text[:120] + "…"
        return f"<{type(self).__name__} {self.path}: {shown!r} cost {self._cost_text()}>"


@dataclass(repr=False)
class ResponsesResult(TextResult):
    """A responses-API answer: ``text`` (output text), ``reasoning``, ``status``."""

    reasoning: str | None = None
    status: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_response(cls, path: str, body: dict[str, Any], cost: Cost | None) -> ResponsesResult:
        texts: list[str] = []
        reasoning: list[str] = []
        for item in body.get("output") or []:
            if item.get("type") == "message":
                texts += [
                    c.get("text", "")
                    for c in item.get("content") or []
                    if c.get("type") == "output_text"
                ]
            elif item.get("type") == "reasoning":
                reasoning += [s.get("text", "") for s in item.get("summary") or []]
        return cls(
            path=path,
            data=body,
            cost=cost,
            model=body.get("model"),
            content_type="application/json",
            text="".join(texts),
            reasoning="".join(reasoning) or None,
            status=body.get("status"),
            usage=dict(body.get("usage") or {}),
        )

    @property
    def truncated(self) -> bool:
        """True when the answer stopped at ``max_output_tokens``."""
        details = self.data.get("incomplete_details") if isinstance(self.data, dict) else None
        return self.status == "incomplete" and bool(details)


@dataclass(repr=False)
class SearchResult(Result):
    """Web search results: ``results`` (title, url, content, date) and ``to_pandas()``."""

    @property
    def results(self) -> list[dict[str, Any]]:
        found = self.data.get("results") if isinstance(self.data, dict) else None
        return list(found or [])

    def to_pandas(self) -> Any:
        """The results as a DataFrame (title, url, content, date)."""
        import pandas as pd

        columns = ["title", "url", "content", "date"]
        return pd.DataFrame(
            [{c: r.get(c) for c in columns} for r in self.results], columns=columns, dtype="str"
        )

    def __repr__(self) -> str:
        return f"<SearchResult {len(self.results)} results, cost {self._cost_text()}>"


@dataclass(repr=False)
class RpcResult(Result):
    """A JSON-RPC answer: ``result`` or ``error`` (a JSON-RPC error is paid for too)."""

    credits: int | None = None

    @property
    def result(self) -> Any:
        return self.data.get("result") if isinstance(self.data, dict) else None

    @property
    def error(self) -> Any:
        return self.data.get("error") if isinstance(self.data, dict) else None

    def __repr__(self) -> str:
        shown = f"error {self.error}" if self.error is not None else f"result {self.result!r}"
        if len(shown) > 120:
            shown = shown[:120] + "…"
        return f"<RpcResult {self.path}: {shown}, cost {self._cost_text()}>"


@dataclass(repr=False)
class VoiceResult(Result):
    """A cloned voice: ``voice_id`` (a ``vv_`` handle to pass as ``voice`` with ``model``)."""

    @property
    def voice_id(self) -> str | None:
        return self.data.get("id") if isinstance(self.data, dict) else None

    def __repr__(self) -> str:
        return f"<VoiceResult {self.voice_id} for {self.model}, cost {self._cost_text()}>"


def _reasoning_of(message: dict[str, Any]) -> str | None:
    reasoning = message.get("reasoning_content")
    if reasoning:
        return str(reasoning)
    details = message.get("reasoning_details")
    if isinstance(details, list):
        text = "".join(d.get("text", "") for d in details if isinstance(d, dict))
        return text or None
    return None

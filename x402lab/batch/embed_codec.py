"""Embedding batches: ``per_request`` texts per request, a float32 vector per text, stored as
raw little-endian bytes (``batch.codec``)."""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from x402lab.batch.codec import Answer, JsonRequests, Reask
from x402lab.errors import ConfigError
from x402lab.routes import EMBEDDINGS

if TYPE_CHECKING:
    from x402lab.gateway import Catalog

#: Texts per request of ``batch_embed(per_request="auto")`` where the gateway takes a list: at
#: the minimum charge of 0.01 USD and embedding prices of cents per million tokens, a request
#: of 256 one-line texts is still under the minimum, yet its body stays small (tens of kB)
#: and one failed request holds back few rows.
EMBED_AUTO_TEXTS = 256
#: The most texts one request may carry.
MAX_PER_REQUEST = 2048


@dataclass(frozen=True)
class EmbedCodec(JsonRequests):
    """The embeddings of some texts per request; an item is a text."""

    model: str
    params: Mapping[str, Any] = field(default_factory=dict)
    unchecked: frozenset[str] = frozenset()

    kind = "embed"
    path = EMBEDDINGS
    columns = ("vector", "prompt_tokens")
    #: Every answer is kept as it came.
    reask: ClassVar[Reask | None] = None

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise ConfigError(
                "model is required: an embedding model id from lab.models('embedding')"
            )

    def body(self, items: Sequence[Any]) -> dict[str, Any]:
        # One text goes as a string (the gateway's shape); several as a list (OpenAI's shape).
        texts = items[0] if len(items) == 1 else list(items)
        return {"model": self.model, "input": texts, **self.params}

    def split(self, answer: Any, n: int) -> list[Answer]:
        data = sorted(answer["data"], key=lambda d: d.get("index", 0))
        if len(data) != n:
            raise ValueError(f"the answer holds {len(data)} embeddings for {n} texts")
        tokens = (answer.get("usage") or {}).get("prompt_tokens") if n == 1 else None
        return [(_vector(entry["embedding"]), tokens) for entry in data]

    def encode(self, answer: Answer) -> bytes:
        vector, tokens = answer
        head = struct.pack("<q", -1 if tokens is None else int(tokens))
        return head + np.asarray(vector, dtype="<f4").tobytes()

    def decode(self, blob: bytes) -> Answer:
        (tokens,) = struct.unpack_from("<q", blob)
        vector = np.frombuffer(blob, dtype="<f4", offset=8).astype(np.float32)
        return vector, None if tokens < 0 else tokens

    def empty(self) -> Answer:
        return (None, None)


def _vector(value: Any) -> np.ndarray:
    if isinstance(value, str):  # encoding_format="base64"
        return np.frombuffer(base64.b64decode(value), dtype="<f4").astype(np.float32)
    return np.asarray(value, dtype=np.float32)


async def texts_per_request(catalog: Catalog, per_request: int | str, model: str) -> int:
    """``per_request`` of ``batch_embed`` checked (an int in 1..``MAX_PER_REQUEST``, or
    ``"auto"``: ``EMBED_AUTO_TEXTS`` texts per request when the gateway's published request
    schema takes a list ``input``, the minimum charge then buying many texts, else one, the
    gateway's own shape); ConfigError otherwise."""
    if per_request == "auto":
        published = await catalog.request_schema("POST", EMBEDDINGS)
        if published is None:
            return 1
        try:
            published.check({"model": model, "input": ["a", "b"]}, caller="batch_embed()")
        except (TypeError, ConfigError):
            return 1
        return EMBED_AUTO_TEXTS
    if isinstance(per_request, bool) or not isinstance(per_request, int):
        raise ConfigError(f"per_request must be an int or 'auto', got {per_request!r}")
    if not 1 <= per_request <= MAX_PER_REQUEST:
        raise ConfigError(
            f"per_request must be an int in 1..{MAX_PER_REQUEST}, got {per_request!r}"
        )
    return per_request

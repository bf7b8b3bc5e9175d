"""Embedding batches: ``per_request`` texts per request, a float32 vector per text, stored as
raw little-endian bytes (``_codec``).

The vectors arrive as base64 where the route takes it (``gateway.embeddings``: the batch asks
for it unless told otherwise) and are decoded with numpy into one float32 buffer per answer;
the ledger keeps each vector's float32 bytes behind an 8-byte token count, and a stored
answer is read back with ``frombuffer``, never re-encoded.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from x402lab.batch.kinds._codec import Answer, JsonRequests, Reask
from x402lab.errors import ConfigError
from x402lab.gateway.embeddings import vectors_of
from x402lab.routes import EMBEDDINGS

if TYPE_CHECKING:
    from x402lab.gateway import Catalog

#: Texts per request of ``batch_embed(rows_per_request="auto")`` where the gateway takes a
#: list: at the minimum charge of 0.01 USD and embedding prices of cents per million tokens,
#: a request of 256 one-line texts is still under the minimum, yet its body stays small (tens
#: of kB) and one failed request holds back few rows.
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
        vectors = vectors_of(answer["data"])
        if len(vectors) != n:
            raise ValueError(f"the answer holds {len(vectors)} embeddings for {n} texts")
        tokens = (answer.get("usage") or {}).get("prompt_tokens") if n == 1 else None
        return [(vector, tokens) for vector in vectors]

    def encode(self, answer: Answer) -> bytes:
        vector, tokens = answer
        head = struct.pack("<q", -1 if tokens is None else int(tokens))
        return head + np.asarray(vector, dtype="<f4").tobytes()

    def decode(self, blob: bytes) -> Answer:
        (tokens,) = struct.unpack_from("<q", blob)
        # A view of the stored bytes (read-only): the sink copies it into its column.
        vector = np.frombuffer(blob, dtype="<f4", offset=8)
        return vector, None if tokens < 0 else tokens

    def empty(self) -> Answer:
        return (None, None)


async def texts_per_request(catalog: Catalog, per_request: int | str, model: str) -> int:
    """``rows_per_request`` of ``batch_embed`` checked (an int in 1..``MAX_PER_REQUEST``, or
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
        raise ConfigError(f"rows_per_request must be an int or 'auto', got {per_request!r}")
    if not 1 <= per_request <= MAX_PER_REQUEST:
        raise ConfigError(
            f"rows_per_request must be an int in 1..{MAX_PER_REQUEST}, got {per_request!r}"
        )
    return per_request

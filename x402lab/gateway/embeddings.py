"""Embedding answers, compact on the wire: the request asks for base64 where the route takes it,
and vectors are read back with numpy.

A JSON float list costs about 20 bytes of text and one Python float per element to write,
send and parse; the same vector as base64 is 5.3 bytes per element and one ``frombuffer``.
So ``lab.embed``, ``batch_embed`` and ``lab.nearest`` ask for ``encoding_format="base64"``
whenever the gateway's published request schema takes it and the caller did not choose
(``encoding_format="float"`` still asks for floats). Either way the vectors are float32.
"""

from __future__ import annotations

import binascii
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from x402lab.errors import ConfigError, X402LabError
from x402lab.routes import EMBEDDINGS

if TYPE_CHECKING:
    from x402lab.gateway.catalog import Catalog

COMPACT = "base64"


async def compact_params(catalog: Catalog, model: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with ``encoding_format="base64"`` added when the caller set none and the
    route's published request schema takes it (free: the schema is cached per lab)."""
    chosen = dict(params)
    if "encoding_format" in chosen:
        return chosen
    published = await catalog.request_schema("POST", EMBEDDINGS)
    if published is None:
        return chosen
    try:
        published.check(
            {"model": model, "input": "a", "encoding_format": COMPACT}, caller="embed()"
        )
    except (TypeError, ConfigError):
        return chosen
    chosen["encoding_format"] = COMPACT
    return chosen


async def published_width(catalog: Catalog, model: str, params: Mapping[str, Any]) -> int | None:
    """The vector width a request of ``model`` with ``params`` answers: ``dimensions`` when
    given, else the catalog's ``embeddingDimensions`` of the model; None when unknown."""
    asked = params.get("dimensions")
    if isinstance(asked, int) and not isinstance(asked, bool):
        return asked
    try:
        entries = await catalog.entries("embedding")
    except X402LabError:  # the width is a hint: a missing catalog never blocks a batch
        return None
    spec = (entries.get(model) or {}).get("model_spec")
    width = spec.get("embeddingDimensions") if isinstance(spec, Mapping) else None
    return width if isinstance(width, int) and width > 0 else None


def vectors_of(entries: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """The float32 matrix (one row per entry, in ``index`` order) of an answer's ``data``:
    base64 entries decoded into one buffer, float lists converted once. Raises ValueError
    when the entries are not vectors of one width."""
    ordered = sorted(entries, key=lambda entry: entry.get("index", 0))
    values = [entry["embedding"] for entry in ordered]
    if not values:
        return np.zeros((0, 0), dtype=np.float32)
    if all(isinstance(value, str) for value in values):
        try:
            raw = bytearray()  # writable, so the vectors are too
            for value in values:
                raw += binascii.a2b_base64(value)
        except binascii.Error as exc:
            raise ValueError(f"an embedding is not valid base64: {exc}") from None
        if len(raw) % (4 * len(values)):
            raise ValueError("the base64 embeddings are not float32 vectors of one width")
        flat = np.frombuffer(raw, dtype="<f4")
        return flat.reshape(len(values), -1).astype(np.float32, copy=False)
    matrix = np.asarray(values, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError("the embeddings are not vectors of one width")
    return matrix

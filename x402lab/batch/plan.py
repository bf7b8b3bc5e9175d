"""What a batch will send: its rows, their distinct requests, and the paid requests.

A row's *item* is the request that row needs on its own; identical rows share one item, so
they are paid once. Items are grouped into *units*, the requests actually paid: one item each
for chat, ``per_request`` texts each for embeddings. Units are cut from the distinct items in
first-seen order. A unit some of whose items need no buying pays for the rest in a smaller
request. Each item is claimed in the store under its own key (with the key of the request
that carries it), so a re-run finds earlier payments and answers whatever the grouping.

A plan with a ``namespace`` (``lab.compare``'s configurations) keys every request by that name,
its grouping and its whole list of items as well: the same requests are sent, but no other
batch (a plain one, another pack size, another sample) shares a key with it, so answers it
stores are found only by the same plan run again.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from x402lab.errors import ConfigError
from x402lab.gateway.paid import request_key
from x402lab.gateway.results import ChatResult
from x402lab.gateway.text import chat_body
from x402lab.routes import CHAT as CHAT_PATH
from x402lab.routes import EMBEDDINGS as EMBED_PATH


@dataclass
class Plan:
    """Rows, distinct items and paid units of one batch."""

    kind: str
    path: str
    model: str
    row_items: np.ndarray  # item index of every row
    item_keys: list[str]  # request key of each item's own request
    item_payloads: list[Any]  # chat: the request body; embed: the text
    first_row: np.ndarray  # first row of each item
    last_row: np.ndarray  # last row of each item
    per_request: int
    unit_keys: list[str]  # request key of each paid unit
    params: Mapping[str, Any]
    #: The body of a request carrying some items' payloads (``grouped_plan``).
    build: Callable[[list[Any]], dict[str, Any]]
    #: Keys of this plan's own (see the module docstring); None: a request's plain key.
    namespace: str | None = None

    def key_of(self, body: Mapping[str, Any]) -> str:
        """The key of a request of this plan carrying ``body``."""
        return namespaced_key(self.path, body, self.namespace)

    @property
    def rows(self) -> int:
        return len(self.row_items)

    @property
    def units(self) -> int:
        return len(self.unit_keys)

    def unit_items(self, unit: int) -> range:
        start = unit * self.per_request
        return range(start, min(start + self.per_request, len(self.item_keys)))

    def unit_body(self, unit: int) -> dict[str, Any]:
        return self.body_for(list(self.unit_items(unit)))

    def body_for(self, items: list[int]) -> dict[str, Any]:
        """The body of one request carrying ``items``."""
        return self.build([self.item_payloads[i] for i in items])

    def request_for(self, unit: int, items: list[int]) -> tuple[str, dict[str, Any]]:
        """The key and body of the request that pays for ``items`` of ``unit``: the unit's own
        request, or a smaller one when some of its items need no buying (stored, paid).
        A single item's request key is its own item key."""
        if list(items) == list(self.unit_items(unit)):
            return self.unit_keys[unit], self.unit_body(unit)
        body = self.body_for(items)
        return self.key_of(body), body


def _embed_body(model: str, texts: list[str], *, params: Mapping[str, Any]) -> dict[str, Any]:
    # One text goes as a string (the gateway's shape); several as a list (OpenAI's shape).
    return {"model": model, "input": texts[0] if len(texts) == 1 else texts, **params}


def _index(keys: Iterable[str]) -> tuple[np.ndarray, list[str], list[int]]:
    """Item index per row, the distinct keys in first-seen order, and each one's first row."""
    seen: dict[str, int] = {}
    rows: list[int] = []
    firsts: list[int] = []
    for row, key in enumerate(keys):
        item = seen.get(key)
        if item is None:
            item = seen[key] = len(seen)
            firsts.append(row)
        rows.append(item)
    return np.asarray(rows, dtype=np.int64), list(seen), firsts


def _last_rows(row_items: np.ndarray, items: int) -> np.ndarray:
    last = np.zeros(items, dtype=np.int64)
    last[row_items] = np.arange(len(row_items), dtype=np.int64)  # later rows win
    return last


# -- chat ------------------------------------------------------------------------------------


def chat_messages(inputs: pd.DataFrame, prompt: str | None) -> list[Any]:
    """Each row's prompt text (or message list), checked once for the whole batch.

    Raises ConfigError naming what is missing: a template field that names no column (or is
    malformed), or rows whose used column is None, NaN or empty (``batch.templates``).
    """
    from x402lab.batch.templates import check_filled, fill_template

    if prompt is not None:
        return fill_template(prompt, inputs)
    for column in ("prompt", "messages"):
        if column in inputs.columns:
            check_filled(inputs, column, what="the batch sends")
            values = inputs[column].tolist()
            bad = [i for i, v in enumerate(values) if not isinstance(v, str | list | tuple)]
            if bad:
                raise ConfigError(
                    f"row {inputs.index[bad[0]]!r} has no {column}: {values[bad[0]]!r}"
                )
            return values
    raise ConfigError(
        "rows need a 'prompt' (or 'messages') column, or pass prompt='... {column} ...'"
    )


def chat_plan(
    messages: list[Any],
    *,
    model: str,
    system: str | None,
    max_tokens: int | None,
    params: Mapping[str, Any],
) -> Plan:
    """The plan of a chat batch: one paid request per distinct body."""
    bodies = [
        chat_body(m, model=model, system=system, max_tokens=max_tokens, **params) for m in messages
    ]
    return grouped_plan("chat", CHAT_PATH, model, bodies, _own_body, 1, params)


def _own_body(bodies: list[dict[str, Any]]) -> dict[str, Any]:
    # A plain chat request carries one item: its own body.
    (body,) = bodies
    return dict(body)


def grouped_plan(
    kind: str,
    path: str,
    model: str,
    payloads: list[Any],
    build: Callable[[list[Any]], dict[str, Any]],
    per_request: int,
    params: Mapping[str, Any],
    namespace: str | None = None,
) -> Plan:
    """The plan of ``payloads`` paid ``per_request`` distinct items at a time, each item keyed
    by its request alone (so a re-run with any grouping finds it again); ``build`` makes the
    body of a request carrying some items. ``namespace``: keys of the plan's own, derived
    from it, the grouping and every item's plain key (the module docstring)."""
    keys = [request_key("POST", path, build([p])) for p in payloads]
    row_items, item_keys, firsts = _index(keys)
    distinct = [payloads[row] for row in firsts]
    if namespace is not None:
        whole = hashlib.sha256("\n".join(item_keys).encode()).hexdigest()[:32]
        namespace = f"{namespace}:{per_request}:{whole}"
        item_keys = [namespaced_key(path, build([p]), namespace) for p in distinct]
    unit_keys = (
        item_keys
        if per_request == 1
        else [
            namespaced_key(path, build(distinct[i : i + per_request]), namespace)
            for i in range(0, len(distinct), per_request)
        ]
    )
    return Plan(
        kind=kind,
        path=path,
        model=model,
        row_items=row_items,
        item_keys=item_keys,
        item_payloads=distinct,
        first_row=np.asarray(firsts, dtype=np.int64),
        last_row=_last_rows(row_items, len(item_keys)),
        per_request=per_request,
        unit_keys=unit_keys,
        params=dict(params),
        build=build,
        namespace=namespace,
    )


def namespaced_key(path: str, body: Mapping[str, Any], namespace: str | None) -> str:
    """The request key of ``body``, or with a ``namespace`` a key of that namespace alone."""
    if namespace is None:
        return request_key("POST", path, body)
    return request_key("POST", path, {"namespace": namespace, "body": body})


class ChatCodec:
    """Chat answers: parsed fields per item, stored as JSON."""

    kind = "chat"
    columns: tuple[str, ...] = (
        "response",
        "reasoning",
        "finish_reason",
        "prompt_tokens",
        "completion_tokens",
    )

    def split(self, body: Any, n: int) -> list[tuple[Any, ...]]:
        result = ChatResult.from_response(CHAT_PATH, body, None)
        return [
            (
                result.text,
                result.reasoning,
                result.finish_reason,
                result.prompt_tokens,
                result.completion_tokens,
            )
        ]

    def encode(self, data: tuple[Any, ...]) -> bytes:
        return json.dumps(data).encode()

    def decode(self, blob: bytes) -> tuple[Any, ...]:
        return tuple(json.loads(blob))

    def empty(self) -> tuple[Any, ...]:
        return (None,) * len(self.columns)


# -- embeddings ------------------------------------------------------------------------------


def embed_plan(
    texts: list[str], *, model: str, per_request: int, params: Mapping[str, Any]
) -> Plan:
    """The plan of an embedding batch: ``per_request`` distinct texts per paid request."""
    if not isinstance(model, str) or not model:
        raise ConfigError("model is required: an embedding model id from lab.models('embedding')")
    if not isinstance(per_request, int) or not 1 <= per_request <= 2048:
        raise ConfigError(f"per_request must be an int in 1..2048, got {per_request!r}")
    build = functools.partial(_embed_body, model, params=dict(params))
    return grouped_plan("embed", EMBED_PATH, model, texts, build, per_request, params)


class EmbedCodec:
    """Embedding vectors: float32 per item, stored as raw little-endian bytes."""

    kind = "embed"
    columns = ("vector", "prompt_tokens")

    def split(self, body: Any, n: int) -> list[tuple[Any, ...]]:
        data = sorted(body["data"], key=lambda d: d.get("index", 0))
        if len(data) != n:
            raise ValueError(f"the answer holds {len(data)} embeddings for {n} texts")
        tokens = (body.get("usage") or {}).get("prompt_tokens") if n == 1 else None
        return [(_vector(entry["embedding"]), tokens) for entry in data]

    def encode(self, data: tuple[Any, ...]) -> bytes:
        vector, tokens = data
        head = struct.pack("<q", -1 if tokens is None else int(tokens))
        return head + np.asarray(vector, dtype="<f4").tobytes()

    def decode(self, blob: bytes) -> tuple[Any, ...]:
        (tokens,) = struct.unpack_from("<q", blob)
        vector = np.frombuffer(blob, dtype="<f4", offset=8).astype(np.float32)
        return vector, None if tokens < 0 else tokens

    def empty(self) -> tuple[Any, ...]:
        return (None, None)


def _vector(value: Any) -> np.ndarray:
    if isinstance(value, str):  # encoding_format="base64"
        return np.frombuffer(base64.b64decode(value), dtype="<f4").astype(np.float32)
    return np.asarray(value, dtype=np.float32)

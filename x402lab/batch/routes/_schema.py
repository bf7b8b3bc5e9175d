"""Declared Arrow schemas of route batches (``lab.batch``), one per kind of answer, and the
search hits exploded into one row per hit.

A route batch adds its route's answer columns (``ANSWERS``: a search's hits as a list of
structs, a page's or a document's text, a saved media file's path, type and size, a JSON-RPC
result) and the cost columns of every batch (``batch.output._schema``), with ``cost_usd`` beside
``paid_usd``: the row's share of the payment its answer came from, whichever run paid it.
Money arrives as int atomic units and leaves as exact decimals (``tables.usd``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from x402lab.batch.output import cost_fields, declared_table, join_inputs
from x402lab.tables.usd import USD, usd_array

_TEXT = pa.string()

#: One search hit, as the gateway's search answers it.
HIT = pa.struct(
    [
        pa.field("title", _TEXT),
        pa.field("url", _TEXT),
        pa.field("content", _TEXT),
        pa.field("date", _TEXT),
    ]
)

#: The answer columns of each kind of route (``_calls`` says which route is which).
ANSWERS: dict[str, tuple[pa.Field, ...]] = {
    "hits": (pa.field("hits", pa.list_(HIT)), pa.field("n_hits", pa.int64())),
    "text": (pa.field("text", _TEXT),),
    "media": (
        pa.field("path", _TEXT),
        pa.field("media_type", _TEXT),
        pa.field("size_bytes", pa.int64()),
    ),
    "voice": (pa.field("voice_id", _TEXT),),
    "rpc": (pa.field("result", _TEXT), pa.field("rpc_error", _TEXT)),
    "any": (
        pa.field("result", _TEXT),
        pa.field("path", _TEXT),
        pa.field("media_type", _TEXT),
        pa.field("size_bytes", pa.int64()),
    ),
}


def answer_names(kind: str) -> tuple[str, ...]:
    """The answer columns of a route of ``kind``, in order."""
    return tuple(f.name for f in ANSWERS[kind])


def route_batch_schema(kind: str) -> pa.Schema:
    """The columns ``lab.batch`` adds to its input for a route of ``kind``: the answer's,
    then the cost columns, ``cost_usd`` after ``paid_usd``."""
    costs = cost_fields()
    names = [f.name for f in costs]
    if "cost_usd" not in names:  # the batch schema may carry it already
        costs.insert(names.index("paid_usd") + 1, pa.field("cost_usd", USD))
    return pa.schema([*ANSWERS[kind], *costs])


def route_table(kind: str, columns: Mapping[str, Sequence[Any]]) -> pa.Table:
    """A ``route_batch_schema(kind)`` table from column lists (money as ``*_atomic``)."""
    money = {f"{w}_usd": usd_array(columns[f"{w}_atomic"]) for w in ("quoted", "paid", "cost")}
    return declared_table(route_batch_schema(kind), columns, **money)


def route_frame(inputs: pd.DataFrame, kind: str, columns: Mapping[str, Sequence[Any]]) -> Any:
    """The input frame with the route's answer and cost columns after it."""
    return join_inputs(inputs, route_table(kind, columns))


def explode_hits(frame: pd.DataFrame) -> pd.DataFrame:
    """A search batch's frame with one row per hit, keeping the frame's index (a query's
    label repeated once per hit): the row's other columns, then the hit's ``rank`` (1 for
    the top hit), ``title``, ``url``, ``content`` and ``date``. Rows without hits (failed,
    skipped) are left out. The cost columns are the query's, repeated: sum them over
    ``frame`` (one row per query), not over the hits."""
    if "hits" not in frame.columns:
        raise KeyError("explode_hits() takes the frame of lab.batch(lab.search, ...)")
    positions: list[int] = []
    pieces: list[dict[str, Any]] = []
    for position, hits in enumerate(frame["hits"].tolist()):
        found = [] if hits is None or isinstance(hits, float) else list(hits)  # NaN: no hits
        for rank, hit in enumerate(found, start=1):
            positions.append(position)
            pieces.append({"rank": rank, **dict(hit)})
    base = frame.drop(columns=["hits", "n_hits"], errors="ignore").iloc[positions]
    hits = pd.DataFrame(pieces, columns=["rank", "title", "url", "content", "date"])
    hits = hits.astype({"rank": "int64"})
    hits.index = base.index
    return pd.concat([base, hits], axis=1)

"""Declared Arrow schemas of batch results (docs/design.md, "Seams"), and
the frames derived from them.

Every batch result is built as an Arrow table of one of these schemas and only then turned
into pandas (``x402lab.ledger.arrow_to_pandas``), so an empty batch and a full one have the
same columns and dtypes. Money arrives here as int atomic units; the ``quoted_usd``,
``paid_usd`` and ``cost_usd`` columns are exact decimals derived from them (``tables.usd``; an
unknown amount stays null, never 0). ``paid_usd`` is what *this run* paid for the row (0 for
a row answered by an earlier run or by an identical row); ``cost_usd`` is the row's exact
share of the payment its answer came from, whichever run bought it (a pack's rows share its
payment; a row asked again carries every request it was in), so a re-run shows the same
``cost_usd`` as the run that paid. A duplicate row's answer is its first identical row's, whose
``cost_usd`` carries it: the duplicate shows 0, so ``cost_usd`` sums to what the answers cost,
each once. Null where nothing was paid (skipped, refused, failed before paying) or where the
payment's outcome is unknown. ``upstream_usd`` (the provider's cost) and ``estimate_usd`` (the price
list's estimate) are float64: figures to read, not amounts paid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from x402lab.errors import ConfigError
from x402lab.tables.ledger import arrow_to_pandas
from x402lab.tables.usd import USD, usd_array

# Row statuses. ``cached``: the result came from an earlier payment (a duplicate in the batch
# or an answer an earlier run stored in the ledger). ``paid_not_stored``: an earlier payment
# settled and its answer was lost before it was stored. ``unknown``: a payment left and
# whether it settled is not known. Neither is bought again without ``rebuy=True``.
# ``invalid`` (typed batches): the answer did not validate against the schema, asked again
# and still not; its raw text and the reason are kept, never coerced into the columns.
STATUSES = (
    "ok",
    "invalid",
    "cached",
    "skipped_budget",
    "refused",
    "failed",
    "unknown",
    "paid_not_stored",
)

_TEXT = pa.string()
#: The Parquet schema metadata key of a ``batch_embed`` file: JSON of the model and the body
#: fields it was asked with (``{"model": ..., "params": {...}}``).
EMBED_METADATA = b"x402lab.embed"
_FLOAT_USD = pa.float64()  # a figure in USD that is not an amount paid


def cost_fields() -> list[pa.Field]:
    return [
        pa.field("quoted_usd", USD),
        pa.field("paid_usd", USD),
        pa.field("cost_usd", USD),
        pa.field("upstream_usd", _FLOAT_USD),
        pa.field("tx_hash", _TEXT),
        pa.field("status", _TEXT, nullable=False),
        pa.field("error", _TEXT),
        pa.field("latency_s", pa.float64()),
        pa.field("request_key", _TEXT, nullable=False),
    ]


def batch_chat_schema() -> pa.Schema:
    """The columns ``batch_chat`` adds to its input."""
    return pa.schema(
        [
            pa.field("response", _TEXT),
            pa.field("reasoning", _TEXT),
            pa.field("finish_reason", _TEXT),
            pa.field("prompt_tokens", pa.int64()),
            pa.field("completion_tokens", pa.int64()),
            *cost_fields(),
        ]
    )


def batch_embed_schema(dim: int) -> pa.Schema:
    """The columns of ``batch_embed``: ``text``, ``vector`` (float32 × ``dim``) and costs."""
    return pa.schema(
        [
            pa.field("text", _TEXT),
            pa.field("vector", pa.list_(pa.float32(), dim)),
            pa.field("prompt_tokens", pa.int64()),
            *cost_fields(),
        ]
    )


def estimate_schema() -> pa.Schema:
    """The columns ``estimate`` adds to its input: the exact quote beside the local estimate."""
    return pa.schema(
        [
            pa.field("request_key", _TEXT, nullable=False),
            pa.field("quoted_atomic", pa.int64()),
            pa.field("quoted_usd", USD),
            pa.field("upstream_usd", _FLOAT_USD),
            pa.field("price_mult", pa.float64()),
            pa.field("estimate_usd", _FLOAT_USD),
            pa.field("duplicate", pa.bool_(), nullable=False),
            pa.field("status", _TEXT, nullable=False),
            pa.field("error", _TEXT),
        ]
    )


def vector_array(vectors: Sequence[np.ndarray | None], dim: int) -> pa.FixedSizeListArray:
    """float32 vectors (None where a row has none) as ``fixed_size_list<float32>[dim]``.

    ``dim`` 0 is the width of a result without any vector (all null).
    """
    if dim == 0:
        return pa.nulls(len(vectors), pa.list_(pa.float32(), 0))
    flat = np.zeros((len(vectors), dim), dtype=np.float32)
    mask = np.zeros(len(vectors), dtype=bool)
    for row, vector in enumerate(vectors):
        if vector is None:
            mask[row] = True
        else:
            flat[row] = vector
    values = pa.array(flat.reshape(-1), type=pa.float32())
    return pa.FixedSizeListArray.from_arrays(
        values, dim, mask=pa.array(mask) if mask.any() else None
    )


def declared_table(
    schema: pa.Schema, columns: Mapping[str, Sequence[Any]], **derived: pa.Array
) -> pa.Table:
    """A ``schema`` table from column lists, each cast to its declared type; the ``derived``
    columns (USD from atomic amounts, vectors) as given."""
    arrays = [
        derived[f.name] if f.name in derived else pa.array(columns[f.name], type=f.type)
        for f in schema
    ]
    return pa.table(arrays, schema=schema)


def _cost_usd(columns: Mapping[str, Sequence[Any]]) -> dict[str, pa.Array]:
    """``quoted_usd``, ``paid_usd`` and ``cost_usd`` of the cost columns, from their atomic
    inputs."""
    return {f"{w}_usd": usd_array(columns[f"{w}_atomic"]) for w in ("quoted", "paid", "cost")}


def chat_table(columns: Mapping[str, Sequence[Any]]) -> pa.Table:
    """A ``batch_chat_schema`` table from column lists (money as ``*_atomic``)."""
    return declared_table(batch_chat_schema(), columns, **_cost_usd(columns))


def embed_table(columns: Mapping[str, Sequence[Any]], dim: int) -> pa.Table:
    """A ``batch_embed_schema(dim)`` table from column lists (vectors as float32 arrays)."""
    vectors = vector_array(columns["vector"], dim)
    return declared_table(batch_embed_schema(dim), columns, vector=vectors, **_cost_usd(columns))


def estimate_table(columns: Mapping[str, Sequence[Any]]) -> pa.Table:
    """An ``estimate_schema`` table from column lists (the quote as ``quoted_atomic``)."""
    quoted_usd = usd_array(columns["quoted_atomic"])
    return declared_table(estimate_schema(), columns, quoted_usd=quoted_usd)


def join_inputs(inputs: pd.DataFrame, results: pa.Table) -> pd.DataFrame:
    """The input frame (its columns, dtypes and index kept) with the result columns after it.

    Raises ConfigError when an input column has the name of a result column.
    """
    clash = [name for name in results.column_names if name in inputs.columns]
    if clash:
        raise ConfigError(f"input columns clash with result columns: {', '.join(clash)}")
    frame = arrow_to_pandas(results)
    frame.index = inputs.index
    return pd.concat([inputs, frame], axis=1)

"""Declared Arrow schemas of corpus searches (``x402lab.search``): the leading columns of
``lab.nearest`` and ``xl.duplicates``; the corpus's own columns (an ``id``, ``text``) follow
with the types they have in the corpus."""

from __future__ import annotations

import pyarrow as pa


def nearest_fields() -> list[pa.Field]:
    """``query`` (its text), ``rank`` (1 is the nearest) and ``score`` (the cosine)."""
    return [
        pa.field("query", pa.string(), nullable=False),
        pa.field("rank", pa.int64(), nullable=False),
        pa.field("score", pa.float32(), nullable=False),
    ]


def duplicates_fields() -> list[pa.Field]:
    """``a`` < ``b`` (the two rows' positions in the corpus, 0-based) and ``score``."""
    return [
        pa.field("a", pa.int64(), nullable=False),
        pa.field("b", pa.int64(), nullable=False),
        pa.field("score", pa.float32(), nullable=False),
    ]

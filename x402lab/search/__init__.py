"""Search where embedded corpora land: ``lab.nearest`` (the rows nearest to some queries) and
``xl.duplicates`` (the pairs of rows nearly the same), exact cosines with numpy.

A corpus is a ``batch_embed`` frame or the Parquet file or folder it wrote (``search.corpus``
reads it a block, or a row group, at a time). ``nearest`` embeds its queries through the lab
with the model and parameters the corpus's batch recorded, as a batch: each query is claimed
and its vector stored like any paid row, so a re-run pays nothing for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from x402lab.errors import ConfigError
from x402lab.search.approximate import pairs_near, top_k_near
from x402lab.search.corpus import asked, blocks, corpus_rows, rows_at, unit_rows
from x402lab.search.exact import pairs_at_least, top_k
from x402lab.tables.ledger import arrow_to_pandas
from x402lab.tables.search import duplicates_fields, nearest_fields

if TYPE_CHECKING:
    from x402lab.batch.api import Batches

__all__ = ["Search", "duplicates"]


class Search:
    """``nearest``: queries embedded through the lab's batches, searched in a corpus."""

    def __init__(self, batches: Batches) -> None:
        self._batches = batches

    async def nearest(
        self,
        corpus: Any,
        queries: str | Sequence[str],
        *,
        k: int = 5,
        model: str | None = None,
        exact: bool = True,
    ) -> pd.DataFrame:
        """Spends money (the queries' embeddings, once): each query's ``k`` nearest rows.

        The rows of ``corpus`` nearest to each query, by exact cosine.

        ``corpus``: a ``batch_embed`` frame, or the Parquet file or folder it wrote (read a
        row group at a time, so memory stays bounded). ``queries``: a text or a list of
        texts, embedded with the corpus's model and parameters (``model=`` when the corpus
        does not say) in one batch: claimed and stored in the ledger, so asking again pays
        nothing. Returns one row per (query, rank): ``query``, ``rank`` (1 the nearest),
        ``score`` (the cosine) and the corpus's own columns (``text``, an ``id``...). A
        query whose embedding failed has no rows (the batch warns). ``exact=False``: an
        approximate HNSW index (the optional ``usearch`` extra) built over the corpus, for
        corpora in the millions; a true neighbour may be missed (docs/embeddings.md).
        Raises ConfigError for a bad corpus, ``k`` or a corpus without a model and no
        ``model=``, and for ``exact=False`` without usearch installed.
        """
        texts = [queries] if isinstance(queries, str) else list(queries)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"k must be a positive int (rows per query), got {k!r}")
        recorded = asked(corpus) or {}
        model = model or recorded.get("model")
        if not model:
            raise ConfigError(
                "the corpus does not say which model embedded it: pass model='...' (the"
                " model of its batch_embed)"
            )
        params = dict(recorded.get("params") or {}) if model == recorded.get("model") else {}
        embedded = await self._batches.batch_embed(texts, model=model, progress=None, **params)
        return nearest_frame(corpus, embedded, k, exact=exact)


def nearest_frame(
    corpus: Any, embedded: pd.DataFrame, k: int, *, exact: bool = True
) -> pd.DataFrame:
    """``Search.nearest``'s table from the queries' ``batch_embed`` frame (free)."""
    answered = embedded[embedded["vector"].map(lambda v: v is not None and len(v) > 0)]
    queries = list(answered["text"])
    if not queries:
        return arrow_to_pandas(pa.schema(nearest_fields()).empty_table())
    vectors = unit_rows(np.stack(answered["vector"].to_numpy()).astype(np.float32))
    scores, positions = (top_k if exact else top_k_near)(vectors, blocks(corpus), k)
    rows = rows_at(corpus, positions.reshape(-1))
    per = scores.shape[1]
    lead = [
        pa.array(np.repeat(np.asarray(queries, dtype=object), per), pa.string()),
        pa.array(np.tile(np.arange(1, per + 1, dtype=np.int64), len(queries))),
        pa.array(scores.reshape(-1), pa.float32()),
    ]
    names = [f.name for f in nearest_fields()]
    table = pa.Table.from_arrays([*lead, *rows.columns], names=names + rows.column_names)
    return arrow_to_pandas(table)


def duplicates(corpus: Any, *, threshold: float = 0.95, exact: bool = True) -> pd.DataFrame:
    """Free: the pairs of rows of ``corpus`` (a ``batch_embed`` frame, or the Parquet file
    or folder it wrote) whose cosine is at least ``threshold``, best first.

    One row per pair: ``a`` < ``b`` (the rows' positions in the corpus), ``score``, and each
    row's own columns suffixed ``_a`` and ``_b`` (``text_a``, ``id_b``...). Exact: no pair
    is missed, scored in tiles, never the whole square, so 100,000 rows fit in memory
    (their unit vectors, 4 × dim bytes a row, and one 64 MB tile). ``exact=False``: each
    row's pairs among its 16 nearest in an HNSW index (the optional ``usearch`` extra), for
    corpora in the millions. Raises ConfigError for a bad corpus or threshold, and for
    ``exact=False`` without usearch installed.
    """
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise ConfigError(f"threshold must be a number in [-1, 1], got {threshold!r}")
    if not -1.0 <= threshold <= 1.0:
        raise ConfigError(f"threshold must be a cosine in [-1, 1], got {threshold!r}")
    vectors, positions = _gathered(corpus)
    if not len(vectors):
        return arrow_to_pandas(pa.schema(duplicates_fields()).empty_table())
    a, b, scores = (pairs_at_least if exact else pairs_near)(vectors, float(threshold))
    del vectors  # before the rows' own columns are read
    names = [f.name for f in duplicates_fields()]
    columns = [pa.array(positions[a]), pa.array(positions[b]), pa.array(scores, pa.float32())]
    for side, picked in (("a", a), ("b", b)):
        chosen = rows_at(corpus, positions[picked])
        columns += chosen.columns
        names += [f"{name}_{side}" for name in chosen.column_names]
    return arrow_to_pandas(pa.Table.from_arrays(columns, names=names))


def _gathered(corpus: Any) -> tuple[np.ndarray, np.ndarray]:
    """Every unit vector of ``corpus`` in one matrix (filled block by block, so the corpus
    is held once) and the rows' positions."""
    total = len(corpus) if isinstance(corpus, pd.DataFrame) else corpus_rows(corpus)
    vectors: np.ndarray | None = None
    positions: list[np.ndarray] = []
    filled = 0
    for block in blocks(corpus):
        if vectors is None:
            vectors = np.empty((total, block.vectors.shape[1]), dtype=np.float32)
        vectors[filled : filled + len(block.vectors)] = block.vectors
        filled += len(block.vectors)
        positions.append(block.positions)
    if vectors is None:
        return np.zeros((0, 0), dtype=np.float32), np.zeros(0, dtype=np.int64)
    pa.default_memory_pool().release_unused()  # the row groups' read buffers, before the tiles
    return vectors[:filled], np.concatenate(positions)

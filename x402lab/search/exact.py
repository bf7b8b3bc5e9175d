"""Exact cosine search over a corpus read in blocks (``search.corpus``), with numpy alone.

``top_k`` keeps, per unit query, the ``k`` best rows seen so far and their own columns: each
block's scores are one matrix product (queries × block), its winners are merged with the
kept ones, and the block is dropped, so memory is one block and ``queries × k`` rows.
``duplicates`` compares every pair of rows in tiles of ``TILE`` × ``TILE`` scores (64 MB),
never the whole square: the corpus's unit vectors (4 × dim bytes a row) and one tile are
what it holds.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from x402lab.errors import ConfigError
from x402lab.search.corpus import Block

#: Rows per side of a tile of pair scores in ``duplicates``.
TILE = 4096


def _width_check(block: Block, width: int) -> None:
    if block.vectors.shape[1] != width:
        raise ConfigError(
            f"the corpus's vectors have {block.vectors.shape[1]} dimensions and the queries"
            f" {width}: embed the queries with the corpus's model and dimensions"
        )


def top_k(queries: np.ndarray, blocks: Iterable[Block], k: int) -> tuple[np.ndarray, pa.Table]:
    """The ``k`` best rows of ``blocks`` for each unit query: scores (queries × kept, best
    first) and the kept rows' own columns, query by query in rank order (fewer than ``k``
    when the corpus is smaller)."""
    count = len(queries)
    scores = np.zeros((count, 0), dtype=np.float32)
    picks = np.zeros((count, 0), dtype=np.int64)  # into ``kept``
    kept: pa.Table | None = None
    for block in blocks:
        _width_check(block, queries.shape[1])
        block_scores = queries @ block.vectors.T
        block_scores /= block.norms  # cosines: the queries are unit already
        take = min(k, block_scores.shape[1])
        winners = np.argpartition(-block_scores, take - 1, axis=1)[:, :take]
        distinct, where = np.unique(winners, return_inverse=True)
        rows = block.rows.take(pa.array(distinct))
        offset = kept.num_rows if kept is not None else 0
        joined = (
            pa.concat_tables([kept, rows], promote_options="permissive")
            if kept is not None
            else rows
        )
        scores = np.hstack([scores, np.take_along_axis(block_scores, winners, axis=1)])
        picks = np.hstack([picks, offset + where.reshape(winners.shape)])
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        scores = np.take_along_axis(scores, order, axis=1)
        picks = np.take_along_axis(picks, order, axis=1)
        distinct, where = np.unique(picks, return_inverse=True)  # drop the rows that lost
        kept, picks = joined.take(pa.array(distinct)), where.reshape(picks.shape)
    if kept is None:
        return scores, pa.table({})
    return scores, kept.take(pa.array(picks.reshape(-1)))


def pairs_at_least(
    vectors: np.ndarray, threshold: float, *, tile: int = TILE
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair ``a < b`` of rows of the unit ``vectors`` whose cosine is at least
    ``threshold``: ``a``, ``b`` and the scores, best first (ties in row order); scored in
    tiles of ``tile`` × ``tile``."""
    found_a: list[np.ndarray] = []
    found_b: list[np.ndarray] = []
    found_s: list[np.ndarray] = []
    total = len(vectors)
    for start in range(0, total, tile):
        left = vectors[start : start + tile]
        for other in range(start, total, tile):
            scores = left @ vectors[other : other + tile].T
            a, b = np.nonzero(scores >= threshold)
            if other == start:  # the diagonal tile: each pair once, no row with itself
                a, b = a[a < b], b[a < b]
            if len(a):
                found_a.append(start + a)
                found_b.append(other + b)
                found_s.append(scores[a, b])
    if not found_a:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.float32)
    a, b, s = np.concatenate(found_a), np.concatenate(found_b), np.concatenate(found_s)
    order = np.lexsort((b, a, -s))
    return a[order], b[order], s[order]

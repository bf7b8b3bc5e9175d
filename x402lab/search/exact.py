"""Exact cosine search over a corpus read in blocks of unit vectors (``search.corpus``), with
numpy alone.

``top_k`` keeps, per unit query, the ``k`` best rows seen so far (their scores and
positions): each block's scores are one matrix product (queries × block), its winners are
merged with the kept ones, and the block is dropped, so memory is one block and
``queries × k`` numbers.

``pairs_at_least`` compares every pair of rows in tiles of ``TILE`` × ``TILE`` (the upper
triangle only), never the whole square, and skips most of the work without missing a pair:
the vectors are turned (an orthogonal rotation, which keeps every cosine) so their leading
eighth of dimensions carries most of their length, each tile is scored on those dimensions
first, and a pair whose partial score plus the most the other dimensions could add (the
product of its rows' remaining lengths, by Cauchy-Schwarz) stays below the threshold cannot
reach it. Only the pairs left are scored on the other dimensions.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from x402lab.errors import ConfigError
from x402lab.search.corpus import Block

#: Rows per side of a tile of pair scores in ``pairs_at_least`` (64 MB of float32).
TILE = 4096
#: Below the threshold by this much, a bound still counts as reaching it: float32 rounding
#: of a partial score (1,024 terms of unit vectors) stays well under it.
ROUNDING = 1e-4
#: Pairs of a tile left after the bound above which the whole tile is scored instead (a
#: gather per pair costs more than a matrix product past this share).
DENSE_SHARE = 1 / 64


def _width_check(block: Block, width: int) -> None:
    if block.vectors.shape[1] != width:
        raise ConfigError(
            f"the corpus's vectors have {block.vectors.shape[1]} dimensions and the queries"
            f" {width}: embed the queries with the corpus's model and dimensions"
        )


def top_k(queries: np.ndarray, blocks: Iterable[Block], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best rows of ``blocks`` for each unit query: their scores and positions
    (queries × kept, best first, ties in position order; fewer than ``k`` when the corpus
    is smaller)."""
    count = len(queries)
    scores = np.zeros((count, 0), dtype=np.float32)
    positions = np.zeros((count, 0), dtype=np.int64)
    # A few queries against a block is one pass over its memory: BLAS's second thread only
    # waits for it (measured on 100,000 x 1024, 10 queries, load 24 on 2 cores: 0.38 s of
    # CPU with one thread, 0.90 s with two).
    # Imported here: threadpoolctl takes 0.2 s to import, paid by every lab otherwise.
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        for block in blocks:
            _width_check(block, queries.shape[1])
            block_scores = queries @ block.vectors.T
            take = min(k, block_scores.shape[1])
            winners = np.argpartition(-block_scores, take - 1, axis=1)[:, :take]
            scores = np.hstack([scores, np.take_along_axis(block_scores, winners, axis=1)])
            positions = np.hstack([positions, block.positions[winners]])
            order = np.lexsort((positions, -scores))[:, :k]
            scores = np.take_along_axis(scores, order, axis=1)
            positions = np.take_along_axis(positions, order, axis=1)
    return scores, positions


def pairs_at_least(
    vectors: np.ndarray, threshold: float, *, tile: int = TILE
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair ``a < b`` of rows of the unit ``vectors`` whose cosine is at least
    ``threshold``: ``a``, ``b`` and the scores, best first (ties in row order); scored in
    tiles of ``tile`` × ``tile``. ``vectors`` is turned in place (its rows keep their
    cosines, not their coordinates)."""
    head = max(1, vectors.shape[1] // 8)
    _principal_axes_first(vectors)
    rest = np.sqrt(np.einsum("ij,ij->i", vectors[:, head:], vectors[:, head:]))
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    total = len(vectors)
    for start in range(0, total, tile):
        left = vectors[start : start + tile]
        for other in range(start, total, tile):
            right = vectors[other : other + tile]
            partial = left[:, :head] @ right[:, :head].T
            # A row of the left side can gain at most its rest length times the longest
            # rest on the right: one comparison per score sorts out almost every pair.
            longest = rest[other : other + tile].max()
            reach = threshold - ROUNDING - rest[start : start + tile] * longest
            hot = np.flatnonzero(partial.max(axis=1) >= reach)  # one read of the tile
            a, b = np.nonzero(partial[hot] >= reach[hot, None])
            a = hot[a]
            if other == start:  # the diagonal tile: each pair once, no row with itself
                a, b = a[a < b], b[a < b]
            if len(a) > DENSE_SHARE * partial.size:
                partial += left[:, head:] @ right[:, head:].T
                a, b = np.nonzero(partial >= threshold)
                if other == start:
                    a, b = a[a < b], b[a < b]
                scores = partial[a, b]
            else:
                scores = partial[a, b] + np.einsum("ij,ij->i", left[a, head:], right[b, head:])
            keep = scores >= threshold
            if keep.any():
                found.append((start + a[keep], other + b[keep], scores[keep]))
    if not found:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.float32)
    a, b, s = (np.concatenate(parts) for parts in zip(*found, strict=True))
    order = np.lexsort((b, a, -s))
    return a[order], b[order], s[order].astype(np.float32)


def _principal_axes_first(vectors: np.ndarray, *, block: int = 8192) -> None:
    """Turn ``vectors`` in place onto the axes of their second moment, the axis that
    carries most of their squared length first (an orthogonal rotation: cosines kept)."""
    if len(vectors) == 0:
        return
    moment = vectors.T @ vectors
    _, axes = np.linalg.eigh(moment.astype(np.float64))
    basis = np.ascontiguousarray(axes[:, ::-1], dtype=np.float32)
    for start in range(0, len(vectors), block):
        vectors[start : start + block] = vectors[start : start + block] @ basis

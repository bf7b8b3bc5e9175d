"""Approximate search for corpora in the millions: usearch's HNSW graph (the optional
``search`` extra, a plain wheel) behind ``lab.nearest(..., exact=False)`` and
``xl.duplicates(..., exact=False)``.

The trade: the graph is built over the corpus's unit vectors (inner product, float32) in
each call, which costs more than one exact pass over a small corpus, and a search walks a
part of it, so a true neighbour can be missed (usearch's recall is high, not 1). Scores
are the same cosines the exact search gives. ``pairs_near`` looks for each row's pairs
among its ``NEIGHBOURS`` nearest rows only: a row with more near copies than that has some
of its pairs left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from x402lab.errors import ConfigError
from x402lab.search.corpus import Block

#: How many nearest rows of each row ``pairs_near`` looks at.
NEIGHBOURS = 16


def _index(dim: int) -> Any:
    try:
        from usearch.index import Index
    except ImportError:
        raise ConfigError(
            "exact=False needs the optional usearch package: pip install 'x402lab[search]'"
        ) from None
    return Index(ndim=dim, metric="ip", dtype="f32")


def top_k_near(
    queries: np.ndarray, blocks: Iterable[Block], k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Like ``exact.top_k``: each unit query's ``k`` best rows found in an HNSW graph of
    ``blocks`` (scores and positions, best first)."""
    index = None
    for block in blocks:
        if index is None:
            index = _index(block.vectors.shape[1])
        if block.vectors.shape[1] != queries.shape[1]:
            raise ConfigError(
                f"the corpus's vectors have {block.vectors.shape[1]} dimensions and the"
                f" queries {queries.shape[1]}: embed the queries with the corpus's model"
            )
        index.add(block.positions.astype(np.uint64), block.vectors)  # copied: blocks reuse
    if index is None or len(index) == 0:
        empty = np.zeros((len(queries), 0))
        return empty.astype(np.float32), empty.astype(np.int64)
    matches = index.search(queries, min(k, len(index)))
    found = int(np.min(matches.counts))
    scores = (1.0 - matches.distances[:, :found]).astype(np.float32)
    return scores, matches.keys[:, :found].astype(np.int64)


def pairs_near(vectors: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Like ``exact.pairs_at_least``: the pairs ``a < b`` of unit ``vectors`` at or above
    ``threshold`` among each row's ``NEIGHBOURS`` nearest (best first, ties in row order)."""
    index = _index(vectors.shape[1])
    index.add(np.arange(len(vectors), dtype=np.uint64), vectors)
    matches = index.search(vectors, min(NEIGHBOURS + 1, len(vectors)))
    keys = matches.keys.astype(np.int64)
    scores = (1.0 - matches.distances).astype(np.float32)
    rows = np.repeat(np.arange(len(vectors)), keys.shape[1]).reshape(keys.shape)
    valid = np.arange(keys.shape[1])[None, :] < matches.counts[:, None]
    keep = valid & (scores >= threshold) & (keys != rows)
    a, b = np.minimum(rows, keys)[keep], np.maximum(rows, keys)[keep]
    s = scores[keep]
    _, first = np.unique(a * len(vectors) + b, return_index=True)  # each pair once
    a, b, s = a[first], b[first], s[first]
    order = np.lexsort((b, a, -s))
    return a[order], b[order], s[order]

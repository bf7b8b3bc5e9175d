"""Embedded corpora end to end: compact vectors, the input's id kept, search where they land.

One corpus on the emulator (over its socket), embedded into a frame and into a Parquet file;
``lab.nearest`` from both pays for its queries once; ``xl.duplicates`` finds exact copies.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.batch import EMBED

import x402lab as xl
from x402lab.search.corpus import Block
from x402lab.search.exact import pairs_at_least, top_k

DIM = 64
TOPICS = "rivers markets copper lanterns harbors meadows winters signals".split()


def _corpus() -> pd.DataFrame:
    texts = [f"note {i} on {TOPICS[i % len(TOPICS)]} and {TOPICS[(i * 3) % 8]}" for i in range(60)]
    texts[41] = texts[7]  # an exact copy under another id
    return pd.DataFrame({"id": [1000 + i for i in range(60)], "text": texts})


def test_nearest_and_duplicates_from_a_frame_and_its_parquet_file(
    emulator_factory, lab_factory, tmp_path
):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    corpus = _corpus()
    frame = lab.batch_embed(corpus, model=EMBED, dimensions=DIM, progress=None)
    out = tmp_path / "corpus.parquet"
    lab.batch_embed(corpus, model=EMBED, dimensions=DIM, out=out, row_group_size=16, progress=None)

    # The input's id stays beside its vector, in the frame and in the file.
    assert frame["id"].tolist() == corpus["id"].tolist()
    table = pq.read_table(out)
    assert table.column_names[:2] == ["id", "text"]
    assert table.column("id").to_pylist() == corpus["id"].tolist()
    assert table.schema.field("vector").type == pa.list_(pa.float32(), DIM)
    assert set(table.column("status").to_pylist()) == {"cached"}  # stored by the first run

    # Compact on the wire by default: base64 where the route takes it, float32 either way.
    single = lab.embed("a new text", model=EMBED, dimensions=DIM)
    assert isinstance(single.data["data"][0]["embedding"], str)
    floats = lab.embed("a new text", model=EMBED, dimensions=DIM, encoding_format="float")
    assert isinstance(floats.data["data"][0]["embedding"], list)
    np.testing.assert_array_equal(single.vector, floats.vector)
    assert single.vectors.dtype == np.float32 and single.vectors.flags.writeable

    paid = len(emulator.chain.transfers())
    # A corpus text (its vector already stored by the batch) and a new one (paid once).
    queries = [corpus["text"][3], "copper lanterns in a winter harbor"]
    hits = lab.nearest(frame, queries, k=3)
    assert len(emulator.chain.transfers()) == paid + 1
    assert list(hits.columns) == ["query", "rank", "score", "id", "text"]
    assert hits["rank"].tolist() == [1, 2, 3, 1, 2, 3]
    assert hits["query"].tolist() == [queries[0]] * 3 + [queries[1]] * 3
    first = hits.iloc[0]
    assert first["id"] == 1003 and first["text"] == queries[0] and first["score"] > 0.999
    assert (hits["score"].iloc[3:] < 0.999).all()
    assert (
        hits.groupby("query", sort=False)["score"].apply(lambda s: s.is_monotonic_decreasing)
    ).all()

    from_file = lab.nearest(out, queries, k=3)  # read a row group at a time
    assert len(emulator.chain.transfers()) == paid + 1  # the queries were paid once
    pd.testing.assert_frame_equal(from_file, hits)

    # Exact copies are found, from the frame and from the file, under their own ids.
    for source in (frame, out):
        pairs = xl.duplicates(source, threshold=0.95)
        copy = pairs[(pairs["id_a"] == 1007) & (pairs["id_b"] == 1041)]
        assert len(copy) == 1 and copy["score"].iloc[0] > 0.999
        assert (copy["a"].iloc[0], copy["b"].iloc[0]) == (7, 41)
        assert (pairs["score"] >= 0.95).all() and (pairs["a"] < pairs["b"]).all()

    with pytest.raises(xl.ConfigError, match="model"):
        lab.nearest(corpus, queries)  # no vectors: not a corpus
    with pytest.raises(xl.ConfigError, match="k must be"):
        lab.nearest(frame, queries, k=0)


def test_blocked_search_equals_the_whole_product():
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((500, 24)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors[300] = vectors[12]
    queries = vectors[[5, 12, 499]]
    blocks = [Block(vectors[i : i + 64], np.arange(i, min(i + 64, 500))) for i in range(0, 500, 64)]
    scores, found = top_k(queries, blocks, 4)
    whole = queries @ vectors.T
    np.testing.assert_allclose(scores, -np.sort(-whole, axis=1)[:, :4], rtol=1e-5)
    np.testing.assert_array_equal(found, np.argsort(-whole, axis=1, kind="stable")[:, :4])
    whole_pairs = vectors @ vectors.T
    for tile in (64, 4096):  # tiles across the square, and one tile for it all
        a, b, s = pairs_at_least(vectors.copy(), 0.999, tile=tile)
        assert (a.tolist(), b.tolist()) == ([12], [300]) and s[0] > 0.999
        for threshold in (0.3, 0.6):  # many pairs (every tile scored whole), and few
            a, b, s = pairs_at_least(vectors.copy(), threshold, tile=tile)
            upper = np.argwhere(np.triu(whole_pairs, 1) >= threshold)
            assert sorted(zip(a.tolist(), b.tolist(), strict=True)) == sorted(
                map(tuple, upper.tolist())
            )
            np.testing.assert_allclose(s, whole_pairs[a, b], atol=1e-5)
            assert (np.diff(s) <= 0).all()


def test_pairs_of_clustered_vectors_match_the_whole_square():
    """Vectors that share most of their length (like real embeddings, not random ones), so
    the bound on the leading dimensions prunes less: the same pairs as the whole product."""
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((5, 96)).astype(np.float32)
    vectors = centres[rng.integers(0, 5, 700)] + 0.25 * rng.standard_normal((700, 96))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    vectors[650:] = vectors[:50] + 1e-3 * rng.standard_normal((50, 96)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    whole = vectors @ vectors.T
    for threshold in (0.9, 0.97, 0.999):
        a, b, s = pairs_at_least(vectors.copy(), threshold, tile=128)
        upper = np.argwhere(np.triu(whole, 1) >= threshold)
        assert len(upper) >= 50
        assert sorted(zip(a.tolist(), b.tolist(), strict=True)) == sorted(
            map(tuple, upper.tolist())
        )


def test_the_usearch_index_finds_the_exact_top_1(tmp_path):
    """exact=False (the optional usearch extra, installed with dev): on a corpus of 3,000
    unit vectors each query's first row is the exact search's, and the copies are paired."""
    from x402lab.search.approximate import pairs_near, top_k_near

    rng = np.random.default_rng(11)
    vectors = rng.standard_normal((3000, 48)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors[2000:2020] = vectors[:20]
    queries = vectors[[30, 700, 2999]] + 0.05 * rng.standard_normal((3, 48)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    blocks = [
        Block(vectors[i : i + 512], np.arange(i, min(i + 512, 3000))) for i in range(0, 3000, 512)
    ]
    exact_scores, exact_rows = top_k(queries, blocks, 5)
    near_scores, near_rows = top_k_near(queries, blocks, 5)
    np.testing.assert_array_equal(near_rows[:, 0], exact_rows[:, 0])
    np.testing.assert_allclose(near_scores[:, 0], exact_scores[:, 0], atol=1e-5)
    a, b, s = pairs_near(vectors, 0.999)
    assert set(zip(a.tolist(), b.tolist(), strict=True)) >= {(i, 2000 + i) for i in range(20)}
    assert (s >= 0.999).all() and (a < b).all()


def _vector_file(path, vectors: np.ndarray, missing: int) -> None:
    """A file shaped as batch_embed writes one (id, text, vector), row ``missing`` without a
    vector, in row groups of 16 rows."""
    dim = vectors.shape[1]
    mask = np.zeros(len(vectors), dtype=bool)
    mask[missing] = True
    column = pa.FixedSizeListArray.from_arrays(
        pa.array(vectors.reshape(-1)), dim, mask=pa.array(mask)
    )
    table = pa.table(
        {
            "id": np.arange(100, 100 + len(vectors)),
            "text": [f"t{i}" for i in range(len(vectors))],
            "vector": column,
        }
    )
    pq.write_table(table, path, row_group_size=16)


def test_a_files_unit_vectors_are_kept_beside_it_and_remade_when_it_changes(tmp_path):
    from x402lab.search.corpus import blocks, rows_at
    from x402lab.search.sidecar import sidecar_path

    rng = np.random.default_rng(5)
    path = tmp_path / "corpus.parquet"
    first = rng.standard_normal((50, 8)).astype(np.float32)
    _vector_file(path, first, missing=20)
    unit = first / np.linalg.norm(first, axis=1, keepdims=True)
    present = np.delete(np.arange(50), 20)

    def read() -> tuple[np.ndarray, np.ndarray]:
        found = [(b.vectors.copy(), b.positions) for b in blocks(path)]
        return np.concatenate([v for v, _ in found]), np.concatenate([p for _, p in found])

    vectors, positions = read()  # from Parquet, the copy written meanwhile
    copy = sidecar_path(path)
    assert copy.exists() and copy.name.startswith(".")
    assert pq.read_table(tmp_path).num_rows == 50  # the folder's reader skips the copy
    np.testing.assert_allclose(vectors, unit[present], rtol=1e-6)
    np.testing.assert_array_equal(positions, present)
    again, positions = read()  # from the copy
    np.testing.assert_array_equal(again, vectors)
    np.testing.assert_array_equal(positions, present)

    second = rng.standard_normal((50, 8)).astype(np.float32)  # same size, new content
    _vector_file(path, second, missing=20)
    vectors, _ = read()
    np.testing.assert_allclose(
        vectors, (second / np.linalg.norm(second, axis=1, keepdims=True))[present], rtol=1e-6
    )
    with copy.open("r+b") as file:  # a torn copy is made anew
        file.truncate(copy.stat().st_size - 8)
    np.testing.assert_array_equal(read()[0], vectors)
    assert copy.stat().st_size == 4096 + 49 * (8 * 4 + 8)

    rows = rows_at(path, np.array([33, 0, 33, 49]))  # the own columns, in the order asked
    assert rows.column_names == ["id", "text"]
    assert rows.column("id").to_pylist() == [133, 100, 133, 149]

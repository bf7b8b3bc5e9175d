"""batch_embed on the emulator: vectors, costs, Parquet streaming, inputs, resume."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from support.batch import EMBED, chain_atomic, settled_atomic, transfers_per_key

import x402lab as xl
from x402lab.batch.output import BatchSummary, batch_embed_schema
from x402lab.batch.run import one_vector_width
from x402lab.money import usd_to_atomic


def test_vectors_costs_and_dedup_in_memory(emulator_factory, lab_factory):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    texts = ["the cat sat", "a dog ran", "the cat sat", "birds sing at dawn"]
    frame = lab.batch_embed(texts, model=EMBED, dimensions=32, rows_per_request=1, progress=None)
    assert frame["text"].tolist() == texts
    assert frame["status"].tolist() == ["ok", "ok", "cached", "ok"]
    assert all(v.dtype == np.float32 and v.shape == (32,) for v in frame["vector"])
    np.testing.assert_array_equal(frame["vector"][0], frame["vector"][2])
    single = lab.embed("a dog ran", model=EMBED, dimensions=32)
    np.testing.assert_allclose(frame["vector"][1], single.vector, rtol=1e-6)
    assert len(emulator.chain.transfers()) == 4  # three in the batch, one single call
    assert usd_to_atomic(frame["paid_usd"].sum()) == 30_000
    assert frame.attrs["batch"]["saved_atomic"] == 10_000


def test_stream_to_parquet_in_row_groups_and_resume(emulator_factory, lab_factory, tmp_path):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    texts = [f"document {i} about topic {i % 7}" for i in range(300)]
    texts.append("document 5 about topic 5")
    out = tmp_path / "vectors.parquet"
    args = dict(model=EMBED, rows_per_request=8, dimensions=16, encoding_format="base64")
    estimate = lab.estimate(texts, kind="embed", **args)
    summary = lab.batch_embed(
        texts,
        out=out,
        row_group_size=64,
        concurrency=6,
        progress=None,
        **args,
    )
    assert isinstance(summary, BatchSummary)
    assert summary.requests == 38 and summary.duplicates == 1  # 300 distinct texts / 8
    assert not (tmp_path / "vectors.parquet.partial").exists()
    meta = pq.ParquetFile(out)
    assert meta.metadata.num_rows == 301 and meta.metadata.num_row_groups == 5
    assert meta.schema_arrow.field("vector").type == pa.list_(pa.float32(), 16)
    table = pq.read_table(out)
    assert table.column("text").to_pylist() == texts
    frame = summary.to_pandas()
    assert (frame["status"].iloc[:300] == "ok").all() and frame["status"].iloc[300] == "cached"
    # Eight texts share one request, its key and its cost (split in whole base units).
    assert frame["request_key"].iloc[:8].nunique() == 1 and frame["request_key"].nunique() == 38
    assert usd_to_atomic(frame["paid_usd"].sum()) == settled_atomic(lab) == chain_atomic(emulator)
    assert estimate.total_atomic == settled_atomic(lab)
    assert (estimate.rows["quoted_usd"] == frame["quoted_usd"]).all()

    # Run again with no checkpoint of any kind: every text is answered by the stored vectors.
    again = lab.batch_embed(texts, out=tmp_path / "again.parquet", progress=None, **args)
    assert again.paid_atomic == 0 and again.counts == {"cached": 301}
    assert again.requests == 0 and again.from_store == 300
    assert max(transfers_per_key(lab, emulator).values()) == 1
    second = again.to_pandas()
    assert all(np.array_equal(a, b) for a, b in zip(frame["vector"], second["vector"], strict=True))
    # The rows name the request that paid for them, and their shares of it.
    assert (second["request_key"] == frame["request_key"]).all()
    assert (second["quoted_usd"] == frame["quoted_usd"]).all()


@pytest.mark.parametrize("kind", ["series", "arrow", "dataset"])
def test_inputs_from_series_arrow_and_datasets(emulator_factory, lab_factory, tmp_path, kind):
    lab = lab_factory(emulator_factory())
    texts = ["red", "green", "blue"]
    if kind == "series":
        source, column = pd.Series(texts, index=[10, 20, 30]), None
    elif kind == "arrow":
        source, column = pa.chunked_array([texts[:1], texts[1:]]), None
    else:
        pq.write_table(pa.table({"body": texts, "n": [1, 2, 3]}), tmp_path / "in.parquet")
        source, column = ds.dataset(tmp_path / "in.parquet"), "body"
    frame = lab.batch_embed(source, model=EMBED, column=column, dimensions=8, progress=None)
    assert frame["text"].tolist() == texts and (frame["status"] == "ok").all()
    if kind == "series":
        assert frame.index.tolist() == [10, 20, 30]
    with pytest.raises(xl.ConfigError, match="not a string"):
        lab.batch_embed(["ok", None], model=EMBED, progress=None)


def test_empty_embed_batch_keeps_its_schema(emulator_factory, lab_factory, tmp_path):
    lab = lab_factory(emulator_factory())
    empty = lab.batch_embed([], model=EMBED, progress=None)
    full = lab.batch_embed(["one"], model=EMBED, dimensions=4, progress=None)
    assert len(empty) == 0 and empty.dtypes.to_dict() == full.dtypes.to_dict()
    summary = lab.batch_embed([], model=EMBED, out=tmp_path / "none.parquet", progress=None)
    assert summary.to_pandas().columns.tolist() == full.columns.tolist()
    # A file without any vector has the model's published width (1536), not 0, ...
    folder = tmp_path / "parts"
    lab.batch_embed([], model=EMBED, out=folder / "part-00000.parquet", progress=None)
    assert pq.read_schema(folder / "part-00000.parquet").field("vector").type.list_size == 1536
    # ... and where no width is known, a folder's vectorless file takes the others' width.
    lab.batch_embed(["one"], model=EMBED, dimensions=4, out=folder / "part-00001.parquet")
    pq.write_table(
        empty.iloc[:0].pipe(pa.Table.from_pandas, preserve_index=False).cast(batch_embed_schema(0)),
        folder / "part-00000.parquet",
    )
    one_vector_width(sorted(folder.glob("*.parquet")))
    table = pq.read_table(folder)
    assert table.num_rows == 1 and table.schema.field("vector").type.list_size == 4


def test_auto_packs_texts_when_the_gateway_takes_a_list(emulator_factory, lab_factory):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    texts = [f"text number {i}" for i in range(600)]
    quote = lab.estimate(texts, model=EMBED, kind="embed", rows_per_request="auto")
    assert quote.requests == 3  # 256 + 256 + 88: the emulator's schema takes a list input
    frame = lab.batch_embed(texts, model=EMBED, rows_per_request="auto", progress=None)
    assert len(emulator.chain.transfers()) == 3 and set(frame["status"]) == {"ok"}
    assert round(frame["paid_usd"].sum() * 1_000_000) == chain_atomic(emulator)
    with pytest.raises(xl.ConfigError, match="per_request"):
        lab.batch_embed(texts, model=EMBED, rows_per_request="many")


def test_batch_embed_packs_texts_by_default(emulator, lab_factory):
    # The README's own call, with no per_request: the emulator's published schema takes a
    # list input, so texts share paid requests (a text's vector does not depend on the others).
    lab = lab_factory(emulator)
    texts = [f"short text number {i}" for i in range(300)]
    frame = lab.batch_embed(texts, model=EMBED, progress=None)
    transfers = emulator.chain.transfers()
    assert set(frame["status"]) == {"ok"}
    assert 1 <= len(transfers) < len(texts)
    assert len(transfers) == -(-len(texts) // 256)  # EMBED_AUTO_TEXTS a request
    assert frame["paid_usd"].sum() == Decimal(chain_atomic(emulator)).scaleb(-6)
    one_each = lab.estimate(texts, model=EMBED, kind="embed", rows_per_request=1, rebuy=True)
    assert one_each.requests == len(texts)  # the old default, still one keyword away

"""Any input an analyst has (lists, pandas, polars, Arrow, generators, files), the rendered
``prompt`` column, and progress as a tqdm bar."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from support.batch import CHEAP, EMBED, chain_atomic
from tqdm import tqdm

import x402lab as xl
from x402lab.batch.inputs import _sources as inputs
from x402lab.batch.inputs import chat_frame, embed_source
from x402lab.batch.output._progress import INCOMPLETE_COLOUR
from x402lab.money import usd_to_atomic

TEXTS = ["alpha text", "beta text", "gamma text"]


def _write_files(folder):
    frame = pd.DataFrame({"body": TEXTS, "n": [1, 2, 3]})
    paths = {
        "csv": folder / "t.csv",
        "parquet": folder / "t.parquet",
        "jsonl": folder / "t.jsonl",
        "txt": folder / "t.txt",
    }
    frame.to_csv(paths["csv"], index=False)
    frame.to_parquet(paths["parquet"])
    paths["jsonl"].write_text("".join(json.dumps({"body": t}) + "\n" for t in TEXTS))
    paths["txt"].write_text("\n".join(TEXTS) + "\n")
    return paths


def test_every_input_kind_gives_the_same_texts(tmp_path):
    paths = _write_files(tmp_path)
    table = pa.table({"body": TEXTS})
    sources = {
        "list": lambda: TEXTS,
        "tuple": lambda: tuple(TEXTS),
        "pandas Series": lambda: pd.Series(TEXTS),
        "pandas DataFrame": lambda: pd.DataFrame({"body": TEXTS}),
        "polars Series": lambda: pl.Series("body", TEXTS),
        "polars DataFrame": lambda: pl.DataFrame({"body": TEXTS}),
        "polars LazyFrame": lambda: pl.DataFrame({"body": TEXTS}).lazy(),
        "Arrow array": lambda: pa.array(TEXTS),
        "Arrow chunked array": lambda: pa.chunked_array([TEXTS[:1], TEXTS[1:]]),
        "Arrow table": lambda: table,
        "Arrow dataset": lambda: ds.dataset(table),
        "generator": lambda: (t for t in TEXTS),
        "iterator": lambda: iter(TEXTS),
        "CSV": lambda: paths["csv"],
        "Parquet": lambda: str(paths["parquet"]),
        "JSON Lines": lambda: paths["jsonl"],
    }
    for name, make in sources.items():
        texts = embed_source(make(), column="body")
        chunks = list(texts.chunks) if texts.chunks is not None else []
        got = texts.values if texts.values is not None else [t for c, _ in chunks for t in c]
        assert got == TEXTS, name
        # A file's other columns come with its texts, chunk by chunk (an id kept).
        if name in ("CSV", "Parquet"):
            assert [n for _, o in chunks for n in o.column("n").to_pylist()] == [1, 2, 3]
        assert chat_frame(make(), column="body")["prompt"].tolist() == TEXTS, name
    lines = embed_source(paths["txt"])  # a text file: one text a line
    assert [t for c, others in lines.chunks for t in c if others is None] == TEXTS
    kept = embed_source(pd.DataFrame({"id": [7, 8, 9], "text": TEXTS}, index=[3, 4, 5]))
    assert kept.others is not None and kept.others["id"].tolist() == [7, 8, 9]
    assert list(kept.index) == [3, 4, 5]
    assert chat_frame(paths["txt"], column="text")["prompt"].tolist() == TEXTS


def test_bad_inputs_say_what_is_accepted(tmp_path):
    with pytest.raises(xl.ConfigError, match="a path to a CSV, Parquet"):
        embed_source(42)
    with pytest.raises(xl.ConfigError, match="no column 'text'"):
        embed_source(pd.DataFrame({"body": TEXTS}))
    with pytest.raises(xl.ConfigError, match="no such file"):
        embed_source(tmp_path / "missing.parquet")
    with pytest.raises(xl.ConfigError, match="text 1 is not a string"):
        list(embed_source(iter(["ok", 3])).chunks)


def test_batch_chat_from_polars_with_a_template_shows_the_prompt_sent(
    emulator_factory, lab_factory
):
    lab = lab_factory(emulator_factory())
    rows = pl.DataFrame({"city": ["Lyon", "Oslo"], "days": [2, 3]})
    args = dict(model=CHEAP, prompt="Plan {days} days in {city}", max_tokens=16)
    estimate = lab.estimate(rows, **args)
    assert estimate.to_pandas()["prompt"].tolist() == ["Plan 2 days in Lyon", "Plan 3 days in Oslo"]
    frame = lab.batch_chat(rows, progress=None, **args)
    assert frame["prompt"].tolist() == ["Plan 2 days in Lyon", "Plan 3 days in Oslo"]
    assert frame.columns[:3].tolist() == ["city", "days", "prompt"]
    assert set(frame["status"]) == {"ok"}
    messages = [[{"role": "user", "content": "hi"}], [{"role": "user", "content": "bye"}]]
    chats = lab.batch_chat(
        pd.DataFrame({"messages": messages}), model=CHEAP, max_tokens=8, progress=None
    )
    assert chats["prompt"].tolist() == ["user: hi", "user: bye"]


def test_batch_chat_from_a_csv_file_with_column(emulator_factory, lab_factory, tmp_path):
    lab = lab_factory(emulator_factory())
    paths = _write_files(tmp_path)
    frame = lab.batch_chat(paths["csv"], column="body", model=CHEAP, max_tokens=8, progress=None)
    assert frame["prompt"].tolist() == TEXTS and frame["n"].tolist() == [1, 2, 3]


def test_a_generator_streams_in_chunks_and_repeats_are_not_paid_again(
    emulator_factory, lab_factory, tmp_path, monkeypatch
):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    monkeypatch.setattr(inputs, "CHUNK_ROWS", 7)
    texts = [f"doc {i % 20}" for i in range(45)]  # 20 distinct, repeated across chunks
    out = tmp_path / "v.parquet"
    bar = tqdm(file=io.StringIO(), mininterval=0)
    summary = lab.batch_embed(
        (t for t in texts), model=EMBED, dimensions=8, out=out, rows_per_request=3, progress=bar
    )
    written = pq.read_table(out)
    assert written.column("text").to_pylist() == texts
    assert summary.rows == 45 and sum(summary.counts.values()) == 45
    assert summary.paid_atomic == chain_atomic(emulator)
    assert usd_to_atomic(pd.Series(written.column("paid_usd").to_pylist()).sum()) == (
        chain_atomic(emulator)
    )
    assert summary.counts.get("ok") == 20  # each distinct text paid once
    assert bar.n == 45 and bar.total == 45  # the generator's count is known at the end
    assert "paid 0.0" in str(bar.postfix) and "; budget 0.0" in str(bar.postfix)
    # In memory too, with the same answers (now all from the store).
    again = lab.batch_embed(iter(texts), model=EMBED, dimensions=8, progress=None)
    assert again["text"].tolist() == texts and set(again["status"]) == {"cached"}


def test_progress_is_a_tqdm_bar_with_spend_as_its_postfix(emulator_factory, lab_factory):
    lab = lab_factory(emulator_factory(), usd=2.0)
    stream = io.StringIO()
    bar = tqdm(file=stream, mininterval=0, desc="mine")
    lab.batch_chat([f"q{i}" for i in range(6)], model=CHEAP, max_tokens=8, progress=bar)
    assert bar.n == bar.total == 6
    text = stream.getvalue()
    assert "mine" in text and "6/6" in text
    # This run's payments apart from the budget's spend of its cap.
    assert "paid 0.06 USD; budget 0.06 of 2.00 USD" in text
    bar.close()
    # "text": one terminal line updated in place (carriage returns, not new lines).
    import contextlib

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        lab.batch_chat([f"t{i}" for i in range(4)], model=CHEAP, max_tokens=8, progress="text")
    line = err.getvalue()
    assert "4/4" in line and "row/s" in line and "budget 0.10 of 2.00 USD" in line
    assert line.count("\n") <= 1
    # A re-run that pays nothing says so: this run paid 0, the budget has spent 0.10.
    again = tqdm(file=io.StringIO(), mininterval=0)
    lab.batch_chat([f"q{i}" for i in range(6)], model=CHEAP, max_tokens=8, progress=again)
    assert again.postfix == "paid 0.00 USD; budget 0.10 of 2.00 USD"
    assert again.colour is None  # every row answered: the bar's own colour


def test_a_bar_of_rows_not_answered_ends_in_another_colour(emulator_factory, lab_factory):
    lab = lab_factory(emulator_factory(), usd=0.03)
    bar = tqdm(file=io.StringIO(), mininterval=0, desc="mine")
    with pytest.warns(xl.IncompleteBatchWarning, match="2 skipped_budget"):
        lab.batch_chat([f"c{i}" for i in range(5)], model=CHEAP, progress=bar, partial=True)
    assert bar.n == bar.total == 5
    assert bar.colour == INCOMPLETE_COLOUR and bar.desc == "mine (incomplete): "


def test_a_series_of_any_name_is_the_texts_and_keeps_its_index(emulator_factory, lab_factory):
    lab = lab_factory(emulator_factory())
    reviews = pd.DataFrame({"text": ["good tea", "bad coffee"]}, index=["r1", "r7"])
    frame = lab.batch_chat(reviews["text"], model=CHEAP, max_tokens=8, progress=None)
    assert list(frame.index) == ["r1", "r7"] and frame["prompt"].tolist() == [
        "good tea",
        "bad coffee",
    ]
    assert set(frame["status"]) == {"ok"}
    # A template may name the Series: its column keeps the name, the prompt shows what was sent.
    named = lab.estimate(reviews["text"], model=CHEAP, prompt="Rate: {text}", max_tokens=8)
    assert named.rows["text"].tolist() == ["good tea", "bad coffee"]
    assert named.rows["prompt"].tolist() == ["Rate: good tea", "Rate: bad coffee"]
    assert list(named.rows.index) == ["r1", "r7"]


def test_a_list_of_prompts_does_not_load_pyarrow_dataset():
    # Loading it took the first batch of a session about 0.4 s; a Dataset input loads it.
    code = (
        "import sys\n"
        "from x402lab.batch.inputs import chat_frame\n"
        "assert chat_frame(['a', 'b'])['prompt'].tolist() == ['a', 'b']\n"
        "print('pyarrow.dataset' in sys.modules)\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "False"

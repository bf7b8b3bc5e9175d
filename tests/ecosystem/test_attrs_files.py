"""Every frame x402lab returns can be written to Parquet and Feather and converted to polars:
its ``attrs`` are plain JSON data, and ``pd.read_parquet`` gives them back (the batch's
summary too, rebuilt with ``BatchSummary.of``)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pytest

import x402lab as xl
from x402lab.batch import BatchSummary
from x402lab.errors import ConfigError
from x402lab.tables.attrs import json_safe, set_attrs

CHAT_MODEL = "zai-org-glm-4.7-flash"
EMBED_MODEL = "text-embedding-3-small"


def frames_of(lab: Any) -> dict[str, pd.DataFrame]:
    """One frame of every kind an analyst gets back, each with attrs set."""
    chat = lab.batch_chat(["one", "two", "one"], model=CHAT_MODEL, max_tokens=8, progress=None)
    embed = lab.batch_embed(["a", "b", "a"], model=EMBED_MODEL, dimensions=8, progress=None)
    lazy = lab.batch_embed(iter(["c", "d"]), model=EMBED_MODEL, dimensions=8, progress=None)
    bought = lab.reports.buy("solarmoth", select="all")
    return {
        "batch_chat": chat,
        "batch_embed": embed,
        "batch_embed of a generator": lazy,
        "estimate": lab.estimate(["one", "two"], model=CHAT_MODEL, max_tokens=8).rows,
        "models": lab.models(),
        "prices": lab.prices(),
        "route_prices": lab.route_prices(),
        "rpc_networks": lab.rpc_networks(),
        "shelf": lab.reports.shelf(),
        "menu": lab.reports.menu("solarmoth"),
        "report purchase": bought.to_pandas(),
        "library": lab.reports.library(),
        "spend": lab.spend(),
    }


def test_every_frame_round_trips_its_attrs_through_parquet_and_feather(
    emulator_factory, lab_factory, tmp_path: Path
):
    lab = lab_factory(emulator_factory())
    frames = frames_of(lab)
    assert frames["models"].attrs and frames["batch_chat"].attrs  # there is something to keep
    for name, frame in frames.items():
        assert json_safe(frame.attrs) == frame.attrs, name  # plain data as it is
        json.dumps(frame.attrs)
        path = tmp_path / f"{name}.parquet"
        frame.to_parquet(path)
        back = pd.read_parquet(path)
        assert back.attrs == frame.attrs, name
        assert back.columns.tolist() == frame.columns.tolist(), name
        assert len(pl.from_pandas(frame)) == len(frame), name
    # Feather keeps attrs too (vectors are fixed-size lists: Feather takes them).
    for name in ("models", "batch_chat", "batch_embed", "shelf"):
        path = tmp_path / f"{name}.feather"
        frames[name].to_feather(path)
        assert pd.read_feather(path).attrs == frames[name].attrs, name


def test_fetched_at_is_an_iso_utc_string_that_matches_the_column(emulator_factory, lab_factory):
    lab = lab_factory(emulator_factory())
    models = lab.models()
    stamp = models.attrs["fetched_at"]
    assert isinstance(stamp, str) and stamp.endswith("+00:00") and len(stamp) == 32
    assert pd.Timestamp(stamp) == models["fetched_at"].iloc[0]
    assert models.attrs["source"].startswith("http://127.0.0.1:")
    shelf = lab.reports.shelf()
    assert pd.Timestamp(shelf.attrs["fetched_at"]) == shelf["fetched_at"].iloc[0]


def test_batch_summary_is_a_dict_in_attrs_and_of_rebuilds_it(
    emulator_factory, lab_factory, tmp_path: Path
):
    lab = lab_factory(emulator_factory())
    frame = lab.batch_chat(["one", "two", "one"], model=CHAT_MODEL, max_tokens=8, progress=None)
    plain = frame.attrs["batch"]
    assert plain["kind"] == "chat" and plain["rows"] == 3 and plain["duplicates"] == 1
    assert plain["counts"] == {"ok": 2, "cached": 1}
    assert plain["paid_usd"] == pytest.approx(float(frame["paid_usd"].sum()))
    summary = BatchSummary.of(frame)
    assert summary.paid_atomic == plain["paid_atomic"] and summary.requests == 2
    assert "saved by duplicates" in summary._repr_html_()
    assert summary.to_dict() == plain
    frame.to_parquet(tmp_path / "chat.parquet")
    back = pd.read_parquet(tmp_path / "chat.parquet")
    assert xl.BatchSummary.of(back) == summary  # the same numbers from the file
    assert BatchSummary.of(back.attrs["batch"]) == summary and BatchSummary.of(summary) is summary
    embed = lab.batch_embed(["a", "b", "a"], model=EMBED_MODEL, dimensions=8, progress=None)
    embed.to_parquet(tmp_path / "embed.parquet")
    assert BatchSummary.of(pd.read_parquet(tmp_path / "embed.parquet")).saved_atomic > 0
    vectors = pd.read_parquet(tmp_path / "embed.parquet")["vector"]
    assert [len(v) for v in vectors] == [8, 8, 8]


def test_batch_summary_of_a_frame_without_one_says_why(emulator_factory, lab_factory):
    lab = lab_factory(emulator_factory())
    with pytest.raises(ConfigError, match=r"attrs\[.batch.\].*BatchSummary.of"):
        BatchSummary.of(lab.models())
    with pytest.raises(ConfigError, match="missing: kind"):
        BatchSummary.of({"rows": 3})
    with pytest.raises(ConfigError, match="a pandas DataFrame"):
        BatchSummary.of(42)


def test_set_attrs_stores_plain_data_and_refuses_what_json_cannot_hold():
    import datetime as dt

    import numpy as np

    frame = set_attrs(
        pd.DataFrame({"a": [1]}),
        at=pd.Timestamp("2026-05-01 12:00:00.5", tz="Europe/Paris"),
        naive=dt.datetime(2026, 5, 1, 10, 0),
        count=np.int64(3),
        share=np.float32(0.5),
        nested={"path": Path("/tmp/x.parquet"), "days": (dt.date(2026, 5, 1),)},
    )
    assert frame.attrs == {
        "at": "2026-05-01T10:00:00.500000+00:00",
        "naive": "2026-05-01T10:00:00.000000+00:00",  # x402lab's times are UTC
        "count": 3,
        "share": 0.5,
        "nested": {"path": "/tmp/x.parquet", "days": ["2026-05-01"]},
    }
    assert type(frame.attrs["count"]) is int
    with pytest.raises(TypeError, match=r"attrs 'lock'\['inner'\] is a lock.*to_parquet"):
        set_attrs(frame, lock={"inner": threading.Lock()})

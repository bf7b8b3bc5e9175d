"""Batches of Dask collections on a real LocalCluster (two worker processes) against the
emulator: each worker connects its own lab from the driver lab's settings and loads the key
from the environment itself; request keys and the budget live in the one ledger."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pandas as pd
import pyarrow.parquet as pq
import pytest
from support.dask_cluster import CHEAP, EMBED, KEY_VARIABLE, require, texts, transfers_per_key

import x402lab as xl
from x402lab.batch import BatchSummary
from x402lab.batch.cluster._worker import refuse_other_machine
from x402lab.errors import ConfigError

require("dask.dataframe")
require("distributed")
import dask.bag as db  # noqa: E402
import dask.dataframe as dd  # noqa: E402

EMBED_COLUMNS = [
    "text",
    "vector",
    "prompt_tokens",
    "quoted_usd",
    "paid_usd",
    "cost_usd",
    "upstream_usd",
    "tx_hash",
    "status",
    "error",
    "latency_s",
    "request_key",
]


def test_every_row_is_answered_once_and_a_rerun_pays_nothing(cluster, emulator, team_lab):
    lab = team_lab(emulator, user="alice")
    words = texts(120, "once")
    series = dd.from_pandas(pd.Series(words, name="text"), npartitions=4)

    result = lab.batch_embed(series, model=EMBED, dimensions=8, progress=None)
    assert isinstance(result, dd.DataFrame) and list(result.columns) == EMBED_COLUMNS
    frame = result.compute()
    assert list(frame.columns) == EMBED_COLUMNS
    assert frame["text"].tolist() == words  # every text once, in the input's order and index
    assert set(frame["status"]) == {"ok"}
    assert all(len(vector) == 8 for vector in frame["vector"])
    per_key = transfers_per_key(lab, emulator)
    assert set(per_key) == set(frame["request_key"]) and set(per_key.values()) == {1}
    # The workers' payments name the analyst who ran the batch, and come from one budget.
    assert {(row["user"], row["budget"]) for row in lab.ledger.rows()} == {
        ("alice", lab.budget.name)
    }
    assert lab.budget.state().settled_atomic == sum(
        t.amount_atomic for t in emulator.chain.transfers()
    )

    again = lab.batch_embed(series, model=EMBED, dimensions=8, progress=None).compute()
    assert set(again["status"]) == {"cached"} and again["paid_usd"].sum() == 0
    # Each row's cost is the share its first run paid, whichever partition reads it back.
    assert again["cost_usd"].tolist() == frame["paid_usd"].tolist()
    assert transfers_per_key(lab, emulator) == per_key  # nothing paid again
    assert [list(v) for v in again["vector"]] == [list(v) for v in frame["vector"]]


def test_chat_rows_of_a_dask_frame_and_a_bag_of_texts(cluster, emulator, team_lab, tmp_path):
    lab = team_lab(emulator)
    topics = dd.from_pandas(
        pd.DataFrame({"topic": [f"topic {i}" for i in range(12)]}), npartitions=3
    )
    chats = lab.batch_chat(
        rows=topics, model=CHEAP, prompt="One word on {topic}", max_tokens=8, progress=None
    )
    chat_frame = chats.compute()
    assert chat_frame["topic"].tolist() == [f"topic {i}" for i in range(12)]
    assert chat_frame["prompt"].tolist() == [f"One word on topic {i}" for i in range(12)]
    assert set(chat_frame["status"]) == {"ok"} and chat_frame["response"].notna().all()

    bag = db.from_sequence(texts(30, "bag"), npartitions=3)
    summary = lab.batch_embed(
        bag, model=EMBED, rows_per_request=1, out=tmp_path / "vectors", progress=None
    )
    assert isinstance(summary, BatchSummary) and summary.rows == 30
    assert summary.counts == {"ok": 30} and summary.paid_requests == 30
    files = sorted((tmp_path / "vectors").glob("*.parquet"))
    assert [f.name for f in files] == [f"part-{i:05d}.parquet" for i in range(3)]
    assert sum(pq.ParquetFile(f).metadata.num_rows for f in files) == 30
    assert sorted(summary.to_pandas()["text"]) == sorted(texts(30, "bag"))
    assert set(transfers_per_key(lab, emulator).values()) == {1}
    assert len(emulator.chain.transfers()) == 12 + 30

    # lab.batch of a route: the method travels by name, each partition a batch of its own.
    searches = lab.batch(lab.search, topics, query="news of {topic}", limit=2, progress=None)
    found = searches.compute()
    assert found["topic"].tolist() == [f"topic {i}" for i in range(12)]
    assert set(found["status"]) == {"ok"} and found["n_hits"].eq(2).all()
    assert list(found.columns) == list(searches.columns)
    assert len(emulator.chain.transfers()) == 12 + 30 + 12


def test_a_batch_that_does_not_fit_is_refused_whole_or_spends_what_is_left(
    cluster, emulator, team_lab, tmp_path
):
    lab = team_lab(emulator, usd=0.5)  # 50 texts at the 0.01 USD minimum charge
    words = texts(160, "cap")
    series = dd.from_pandas(pd.Series(words, name="text"), npartitions=8)
    args = dict(model=EMBED, rows_per_request=1, progress=None)
    # Without partial=True: the whole batch's quote (160 requests), refused before any
    # partition starts; nothing signed, nothing moved, no file written.
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning either
        with pytest.raises(xl.BudgetExceeded) as refused:
            lab.batch_embed(series, out=tmp_path / "refused", **args)
    message = str(refused.value)
    assert "whole batch's exact quote is 1.60 USD (160 requests over 8 partitions" in message
    assert "0.50 USD left" in message and "partial=True" in message
    assert emulator.chain.transfers() == [] and lab.ledger.rows() == []
    assert not (tmp_path / "refused").exists()

    # partial=True: each partition spends what the shared budget has left, then skips; the
    # driver gets one summary of the whole batch and one warning.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = lab.batch_embed(series, out=tmp_path / "vectors", partial=True, **args)
    incomplete = [w for w in caught if issubclass(w.category, xl.IncompleteBatchWarning)]
    assert len(incomplete) == 1, [str(w.message) for w in caught]
    assert "of 160 rows not answered" in str(incomplete[0].message)
    assert isinstance(summary, BatchSummary) and summary.rows == 160
    spent = sum(t.amount_atomic for t in emulator.chain.transfers())
    assert spent <= 500_000  # never past the cap, whichever worker reserved
    assert summary.counts["ok"] == len(emulator.chain.transfers()) >= 40
    assert summary.counts["ok"] + summary.counts["skipped_budget"] == 160
    assert summary.paid_atomic == spent == lab.budget.state().committed_atomic
    files = sorted((tmp_path / "vectors").glob("*.parquet"))
    assert [f.name for f in files] == [f"part-{i:05d}.parquet" for i in range(8)]
    assert sum(pq.ParquetFile(f).metadata.num_rows for f in files) == 160


@pytest.mark.parametrize("make", ["from_key", "create"])
def test_a_wallet_workers_cannot_load_is_refused(cluster, emulator, tmp_path, make):
    wallet = xl.Wallet.from_key("0x" + "11" * 32) if make == "from_key" else xl.Wallet.create()
    lab = xl.connect(
        emulator.gateway_url, emulator.reports_url, wallet=wallet, ledger=tmp_path / "l.sqlite"
    )
    try:
        series = dd.from_pandas(pd.Series(texts(4, make), name="text"), npartitions=2)
        with pytest.raises(ConfigError, match=r"Wallet.from_env\('VAR'\)") as caught:
            lab.batch_embed(series, model=EMBED, progress=None)
        assert f"Wallet.{make}()" in str(caught.value)
        assert emulator.chain.transfers() == [] and lab.ledger.rows() == []
    finally:
        lab.close()


def test_a_keyfile_with_its_password_in_the_environment_is_loaded_by_the_workers(
    cluster, emulator, tmp_path, wallet_key, monkeypatch
):
    from eth_account import Account

    keyfile = tmp_path / "key.json"
    keyfile.write_text(
        __import__("json").dumps(Account.encrypt(wallet_key, "pw", kdf="scrypt", iterations=2**10))
    )
    # Workers read the password from their environment: the variable they inherited.
    literal = xl.Wallet.from_keyfile(keyfile, "pw")
    lab = xl.connect(
        emulator.gateway_url, emulator.reports_url, wallet=literal, ledger=tmp_path / "l.sqlite"
    )
    try:
        series = dd.from_pandas(pd.Series(texts(4, "keyfile"), name="text"), npartitions=2)
        with pytest.raises(ConfigError, match="password_env"):
            lab.batch_embed(series, model=EMBED, progress=None)
    finally:
        lab.close()
    assert literal.source.password_env is None and "pw" not in repr(literal.source)


def test_another_machine_is_refused_for_an_sqlite_ledger_and_local_services(emulator, team_lab):
    from x402lab.batch.cluster import recipe_of

    lab = team_lab(emulator)
    recipe = recipe_of(lab.async_.session, lab.async_.batches.connection, "batch_embed()")
    refuse_other_machine(recipe, recipe.host)  # this machine: fine
    with pytest.raises(ConfigError, match="PostgreSQL ledger"):
        refuse_other_machine(recipe, "elsewhere")
    remote_ledger = type(recipe)(**{**recipe.__dict__, "sqlite": False})
    with pytest.raises(ConfigError, match="x402lab serve"):
        refuse_other_machine(remote_ledger, "elsewhere")
    assert KEY_VARIABLE in repr(recipe) and os.environ[KEY_VARIABLE] not in repr(recipe)


def test_without_a_cluster_the_error_says_to_create_a_client(emulator, tmp_path):
    script = textwrap.dedent(
        f"""
        import pandas as pd, dask.dataframe as dd, x402lab as xl
        lab = xl.connect({emulator.gateway_url!r}, {emulator.reports_url!r},
                         wallet=xl.Wallet.from_env({KEY_VARIABLE!r}),
                         ledger={str(tmp_path / "l.sqlite")!r})
        series = dd.from_pandas(pd.Series(["a", "b"], name="text"), npartitions=1)
        try:
            lab.batch_embed(series, model={EMBED!r}, progress=None)
        except xl.ConfigError as exc:
            print(exc)
        """
    )
    env = {**os.environ, KEY_VARIABLE: "0x" + "22" * 32}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert "no dask.distributed cluster is running" in done.stdout, done.stderr
    assert "distributed.Client(" in done.stdout
    assert emulator.chain.transfers() == []


def test_estimate_refuses_a_dask_collection_instead_of_reading_its_column_names(emulator, team_lab):
    # Iterated, a Dask DataFrame gives its column names: estimate() once quoted one row
    # named "text" for a corpus of ten. It is refused before anything is sent.
    import httpx

    lab = team_lab(emulator)
    frame = dd.from_pandas(pd.DataFrame({"text": [f"q {i}" for i in range(10)]}), npartitions=2)
    stats = f"{emulator.gateway_url}/api/x402/stats"
    before = httpx.get(stats).json()["payments"]["requests"]
    collections = [
        ("chat", frame),
        ("chat", frame["text"]),
        ("embed", frame["text"]),
        ("embed", db.from_sequence(["a", "b"])),
    ]
    for kind, collection in collections:
        model = CHEAP if kind == "chat" else EMBED
        with pytest.raises(ConfigError, match=r"ddf\.head\(1000\)"):
            lab.estimate(collection, model=model, kind=kind)
    assert httpx.get(stats).json()["payments"]["requests"] == before

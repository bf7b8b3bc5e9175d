"""Batch results in the cost report: cost per row and per 1k documents, drift, cache savings.

Each figure is checked against the ledger rows of the batch's own request keys.
"""

from __future__ import annotations

import pandas as pd
import pytest

import x402lab as xl
from x402lab.emulator.settings import EmulatorSettings

PROMPTS = ["What is a ledger?", "What is a budget?", "What is a ledger?", "Name a colour."]
DOCUMENTS = [f"note {i}" for i in range(20)] + ["note 3"]


@pytest.fixture
def lab(tmp_path):
    lab = xl.connect(ledger=tmp_path / "ledger.sqlite", emulator_settings=EmulatorSettings())
    yield lab
    lab.close()


def paid_for(lab, keys) -> int:
    rows = lab.ledger.to_pandas()
    mine = rows[rows["request_key"].isin(set(keys)) & (rows["status"] == "settled")]
    return int(mine["amount_atomic"].sum())


def test_batch_costs_drift_and_savings(lab, tmp_path):
    models = lab.models()
    text = models[models["type"] == "text"].dropna(subset=["input_usd_per_1m"])
    text = text.sort_values("input_usd_per_1m")["id"].iloc[0]
    embedder = models[models["type"] == "embedding"]["id"].iloc[0]
    chats = lab.batch_chat(PROMPTS, model=text, max_tokens=16, progress=None)
    docs = lab.batch_embed(DOCUMENTS, model=embedder, rows_per_request=5, progress=None)
    streamed = tmp_path / "docs.parquet"
    # Texts of their own: texts embedded before come back from the store, unpaid.
    fresh = [f"memo {i}" for i in range(10)]
    lab.batch_embed(fresh, model=embedder, out=streamed, progress=None)
    report = lab.cost_report(batches={"chats": chats, "docs": docs, "file": streamed})

    answered = chats["status"] == "ok"
    assert (chats.loc[answered, "cost_usd"] == chats.loc[answered, "paid_usd"]).all()
    assert (chats.loc[~answered, "cost_usd"] == 0).all()  # its first identical row carries it
    status = report.tables["batch_status"].set_index("batch")
    assert status.loc["chats", "rows"] == 4
    assert status.loc["chats", "cached_rows"] == 1  # the repeated prompt is paid once
    assert status.loc["docs", "cached_rows"] == 1
    for name, frame in (("chats", chats), ("docs", docs)):
        assert status.loc[name, "paid_atomic"] == paid_for(lab, frame["request_key"]) > 0
    file_keys = pd.read_parquet(streamed, columns=["request_key"])["request_key"]
    assert status.loc["file", "paid_atomic"] == paid_for(lab, file_keys) > 0

    units = report.tables["unit_costs"]
    rows = units[units["source"] == "batch"].set_index("batch")
    assert rows.loc["chats", "path"] == "/api/v1/chat/completions"
    assert rows.loc["chats", "model"] == text
    assert rows.loc["docs", "path"] == "/api/v1/embeddings"
    assert rows.loc["docs", "units"] == len(DOCUMENTS)
    docs_paid = status.loc["docs", "paid_atomic"]
    assert rows.loc["docs", "usd_per_1k"] == pytest.approx(docs_paid / 1e6 / len(DOCUMENTS) * 1000)

    drift = report.tables["drift"].set_index("source")
    assert drift.loc["chats", "compared"] == 3  # ok rows with a quote and a payment
    assert drift.loc["chats", "drift_atomic"] == 0  # the emulator charges what it quoted

    savings = report.tables["savings"].set_index("source")
    repeated = chats[chats["status"] == "cached"]["quoted_usd"].sum()
    assert savings.loc["batch cache: chats", "items"] == 1
    assert savings.loc["batch cache: chats", "saved_atomic"] == int(repeated.scaleb(6)) > 0
    assert report.settled_atomic == paid_for(lab, lab.ledger.to_pandas()["request_key"])

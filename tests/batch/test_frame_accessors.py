"""df.x402 on pandas and polars: batch_chat, batch_embed and batch of the current lab."""

from __future__ import annotations

import pandas as pd
import polars as pl
import pytest
from support.batch import CHEAP, EMBED

import x402lab as xl


def test_pandas_and_polars_front_doors_match_the_lab(emulator, lab_factory):
    other = lab_factory(emulator, usd=5.0)
    lab = lab_factory(emulator, usd=5.0)  # connected last: the current lab
    df = pd.DataFrame({"word": ["owl", "kettle", "owl"]}, index=[10, 20, 30])
    chat = dict(model=CHEAP, prompt="Say {word}", max_tokens=8, progress=None)

    through_lab = lab.batch_chat(df, **chat)
    by_frame = df.x402.chat(**chat)  # the same rows again: answered from the ledger
    assert by_frame.index.tolist() == [10, 20, 30]
    assert by_frame["response"].tolist() == through_lab["response"].tolist()
    assert by_frame["status"].eq("cached").all()

    queries = pd.DataFrame({"query": ["x402 ledgers", "usdc on base"]}, index=["a", "b"])
    searched = queries.x402.batch(lab.search, limit=2, progress=None)
    again = lab.batch("search", queries, limit=2, progress=None)
    assert searched.index.tolist() == ["a", "b"] and searched["status"].eq("ok").all()
    assert again["status"].eq("cached").all()
    assert again["request_key"].tolist() == searched["request_key"].tolist()
    texts = pd.DataFrame({"text": ["a ledger", "a budget"]})
    embedded = texts.x402.embed(model=EMBED, progress=None)
    assert embedded["vector"].map(len).gt(0).all()

    # polars: the same rows, a polars frame back with exact decimals.
    xl.register_accessors()  # polars was imported after the first lab was made
    polar = pl.from_pandas(df.reset_index(drop=True))
    pchat = polar.x402.chat(**chat)
    assert isinstance(pchat, pl.DataFrame)
    assert pchat["response"].to_list() == through_lab["response"].tolist()
    assert pchat["paid_usd"].dtype == pl.Decimal(18, 6)
    psearch = pl.from_pandas(queries.reset_index(drop=True)).x402.batch("search", limit=2)
    assert psearch["status"].to_list() == ["cached", "cached"]
    assert [len(hits) for hits in psearch["hits"].to_list()] == [2, 2]

    # using(): another lab (its own wallet, the same ledger file): nothing paid twice.
    estimate = df.x402.using(other).batch("search", dry_run=True, query="x402 ledgers", limit=2)
    assert estimate.total_atomic == 0 and len(estimate.rows) == 3

    lab.close()
    assert df.x402.lab is other  # the last one still open
    other.close()
    with pytest.raises(xl.ConfigError, match="no lab is open"):
        df.x402.chat(**chat)

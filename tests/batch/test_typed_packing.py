"""Typed batch chat (``labels=``, ``schema=``) and packed requests (``rows_per_request=``),
end to end against the emulator's chain: what is paid, how the shares add up, what a re-run
pays, what is refused before anything is signed."""

from __future__ import annotations

import asyncio
import math
import secrets
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pytest
from support.batch import CHEAP, chain_atomic, transfers_per_key

import x402lab as xl
from x402lab.batch.kinds import output_spec
from x402lab.errors import BatchInterrupted, ConfigError

LABELS = ["positive", "negative", "neutral"]
REVIEWS = [
    "Great battery, love it",
    "Arrived broken, want a refund",
    "It is okay, nothing special",
    "Screen cracked after a week",
    "Fast delivery and great support",
    "Terrible support, never again",
    "Decent price for what you get",
]
SCHEMA = {
    "topic": ["battery", "delivery", "price", "screen", "support"],
    "rating": int,
    "score": float,
    "mentions_price": bool,
    "keywords": list[str],
}


def reviews(n: int) -> pd.DataFrame:
    return pd.DataFrame({"review": [f"{REVIEWS[i % len(REVIEWS)]} (#{i})" for i in range(n)]})


def classify(lab, frame, **kwargs):
    kwargs.setdefault("labels", LABELS)
    return lab.batch_chat(
        frame, prompt="Sentiment of this review: {review}", model=CHEAP, progress=None, **kwargs
    )


@pytest.mark.parametrize("n", [1, 4, 10])
def test_packs_of_n_rows_make_ceil_rows_over_n_payments_whose_shares_add_up(
    emulator_factory, lab_factory, n
):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    frame = classify(lab, reviews(23), rows_per_request=n)
    assert len(emulator.chain.transfers()) == math.ceil(23 / n)
    assert set(frame["status"]) == {"ok"}
    assert set(frame["label"]) <= set(LABELS)
    assert set(frame["pack_size"]) == ({n, 23 % n} - {0} if n > 1 else {1})
    # Each row carries its share of its pack's payment; the shares add up to the atomic unit.
    paid_atomic = (frame["paid_usd"] * 1_000_000).round().astype(int)
    assert paid_atomic.sum() == chain_atomic(emulator)
    per_pack = paid_atomic.groupby(frame["request_key"]).sum()
    assert sorted(per_pack) == sorted(t.amount_atomic for t in emulator.chain.transfers())
    # A re-run, with another pack size, pays nothing and shows the same labels.
    again = classify(lab, reviews(23), rows_per_request=7)
    assert set(again["status"]) == {"cached"} and again["paid_usd"].sum() == 0
    assert list(again["label"]) == list(frame["label"])
    assert len(emulator.chain.transfers()) == math.ceil(23 / n)


def test_typed_columns_have_the_declared_dtypes_empty_and_full(emulator, lab_factory):
    lab = lab_factory(emulator)
    full = lab.batch_chat(
        reviews(5), prompt="Review: {review}", model=CHEAP, schema=SCHEMA,
        rows_per_request=5, progress=None,
    )  # fmt: skip
    empty = lab.batch_chat(
        reviews(0), prompt="Review: {review}", model=CHEAP, schema=SCHEMA, progress=None
    )
    results = [c for c in full.columns if c not in ("review", "prompt")]  # the input's own
    assert list(full[results].dtypes.items()) == list(empty[results].dtypes.items())
    assert str(full["rating"].dtype) == "Int64" and str(full["score"].dtype) == "float64"
    assert str(full["mentions_price"].dtype) == "boolean"
    assert full["topic"].isin(SCHEMA["topic"]).all()
    assert all(isinstance(v, list | tuple) or hasattr(v, "tolist") for v in full["keywords"])
    # The row's raw JSON stays in response; the columns come from it.
    assert full["response"].str.startswith("{").all()
    spec = output_spec(schema=SCHEMA)
    assert spec is not None and spec.arrow_schema().field("keywords").type == pa.list_(pa.string())


def test_the_same_item_gets_the_same_answer_alone_or_in_a_pack(emulator_factory, lab_factory):
    # The most expensive model errs least; the sample is small enough to see no mistake.
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    alone = classify(lab, reviews(7), rows_per_request=1)
    lab2 = lab_factory(emulator, ledger=None)
    packed = classify(lab2, reviews(7), rows_per_request=7, rebuy=True)
    assert (alone["label"] == packed["label"]).mean() >= 6 / 7


def test_broken_answers_are_asked_again_then_invalid_and_every_share_is_counted(
    emulator_factory, lab_factory
):
    emulator = emulator_factory(schema_violation_rate=0.3, seed=5)
    lab = lab_factory(emulator)
    frame = classify(lab, reviews(60), rows_per_request=10)
    assert set(frame["status"]) <= {"ok", "invalid"}
    assert frame.loc[frame["status"] == "ok", "label"].isin(LABELS).all()
    invalid = frame[frame["status"] == "invalid"]
    assert invalid["label"].isna().all() and invalid["error"].notna().all()
    # More payments than packs: rows were asked again, and every re-ask's share is on a row.
    assert len(emulator.chain.transfers()) > 6
    paid_atomic = (frame["paid_usd"] * 1_000_000).round().astype(int)
    assert paid_atomic.sum() == chain_atomic(emulator)
    # A re-run pays nothing, invalid rows included (they are stored with their raw text).
    before = len(emulator.chain.transfers())
    again = classify(lab, reviews(60), rows_per_request=10)
    assert len(emulator.chain.transfers()) == before
    assert list(again["status"] == "invalid") == list(frame["status"] == "invalid")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"labels": []}, ConfigError, "labels is empty"),
        ({"labels": ["a", "a"]}, ConfigError, "twice"),
        ({"labels": "positive"}, TypeError, "list of strings"),
        ({"labels": ["a", 1]}, ConfigError, "non-empty strings"),
        ({"labels": None, "schema": {"topic": dict}}, TypeError, "not supported"),
        ({"labels": None, "schema": {"topic": "str"}}, TypeError, "not a type"),
        ({"labels": None, "schema": {"review": str}}, ConfigError, "clash"),
        ({"labels": None, "schema": {"status": str}}, ConfigError, "clash"),
        ({"labels": None, "schema": {}}, ConfigError, "empty"),
        ({"labels": None, "schema": {"rating": [1, 2]}}, ConfigError, "non-empty strings"),
        (
            {"labels": None, "schema": {"type": "object", "properties": {}}},
            ConfigError,
            "no properties",
        ),
        ({"schema": {"x": str}}, TypeError, "not both"),
        ({"rows_per_request": 0}, ConfigError, "rows_per_request"),
        ({"labels": None, "rows_per_request": 5}, ConfigError, "labels="),
        ({"response_format": {"type": "json_object"}}, TypeError, "response_format"),
    ],
)
def test_malformed_labels_or_schema_pay_nothing(emulator, lab_factory, kwargs, error, match):
    lab = lab_factory(emulator)
    with pytest.raises(error, match=match):
        classify(lab, reviews(3), **kwargs)
    assert emulator.chain.transfers() == [] and lab.ledger.rows() == []


def test_a_model_without_structured_output_pays_nothing_and_names_models_that_have_it(
    emulator, lab_factory
):
    lab = lab_factory(emulator)
    with pytest.raises(ConfigError, match="supportsResponseSchema: false.*zai-org-glm-4.7-flash"):
        lab.batch_chat(reviews(3), prompt="{review}", model="llama-3.2-3b", labels=LABELS)
    assert emulator.chain.transfers() == [] and lab.ledger.rows() == []
    models = lab.models("text").set_index("id")
    assert not models.loc["llama-3.2-3b", "supports_response_schema"]
    assert models.loc[CHEAP, "supports_response_schema"]


def test_auto_packs_to_the_minimum_charge_and_estimate_shows_the_saving(emulator, lab_factory):
    lab = lab_factory(emulator)
    estimate = lab.estimate(
        reviews(100), prompt="Sentiment of this review: {review}", model=CHEAP, labels=LABELS,
        rows_per_request="auto",
    )  # fmt: skip
    assert emulator.chain.transfers() == []  # free
    assert estimate.rows_per_request > 1 and estimate.one_per_request_atomic == 100 * 10_000
    assert estimate.total_atomic * 20 <= estimate.one_per_request_atomic
    assert "less" in estimate.describe()
    frame = classify(lab, reviews(100), rows_per_request="auto")
    assert frame["paid_usd"].sum() == Decimal(estimate.total_atomic).scaleb(-6)
    assert len(emulator.chain.transfers()) == estimate.requests


def test_a_cancelled_packed_batch_then_a_rerun_pays_no_row_twice(
    emulator_factory, lab_factory, tmp_path
):
    emulator = emulator_factory(paid_latency_s=0.05)
    key = "0x" + secrets.token_hex(32)
    ledger = tmp_path / "ledger.sqlite"
    frame = reviews(120)

    async def interrupted() -> BaseException:
        lab = xl.connect_async(
            emulator.gateway_url, emulator.reports_url, wallet=xl.Wallet.from_key(key),
            ledger=ledger, budget=xl.Budget(usd=5, name="typed"),
        )  # fmt: skip
        done: list[int] = []
        task = asyncio.create_task(
            lab.batch_chat(
                frame, prompt="{review}", model=CHEAP, labels=LABELS, rows_per_request=4,
                concurrency=2, progress=lambda p: done.append(p.done),
            )
        )  # fmt: skip
        while not done or done[-1] < 8:
            await asyncio.sleep(0.01)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError as exc:
            caught: BaseException = exc
        await lab.aclose()
        return caught

    caught = asyncio.run(interrupted())
    assert isinstance(caught.args[0], BatchInterrupted)
    paid_before = len(emulator.chain.transfers())
    assert 2 <= paid_before < 30
    lab = lab_factory(emulator, key=key, ledger=ledger)
    again = lab.batch_chat(
        frame, prompt="{review}", model=CHEAP, labels=LABELS, rows_per_request=6, progress=None
    )
    # Packs on the wire when the cell was interrupted may have settled: those rows show
    # paid_not_stored or unknown and are never bought again on their own.
    counts = again["status"].value_counts().to_dict()
    assert set(counts) <= {"ok", "cached", "paid_not_stored", "unknown"}
    assert counts.get("cached", 0) >= 4 and counts.get("ok", 0) >= 1
    assert counts.get("unknown", 0) + counts.get("paid_not_stored", 0) <= 2 * 4  # concurrency
    # Every request was paid once, and only this run's requests were paid now.
    assert max(transfers_per_key(lab, emulator).values()) == 1
    assert again.loc[again["status"] != "ok", "paid_usd"].fillna(0).sum() == 0
    third = lab.batch_chat(
        frame, prompt="{review}", model=CHEAP, labels=LABELS, rows_per_request=1, progress=None
    )
    assert "ok" not in set(third["status"])
    assert max(transfers_per_key(lab, emulator).values()) == 1


def test_the_summary_says_what_packing_saved(emulator, lab_factory):
    lab = lab_factory(emulator)
    frame = classify(lab, reviews(45), rows_per_request=10)
    summary = xl.BatchSummary.of(frame)
    assert summary.rows_per_request == 10 and summary.paid_atomic == 5 * 10_000
    assert summary.one_per_request_atomic == 45 * 10_000
    assert summary.packing_saved_atomic == 40 * 10_000
    assert "10 rows per request saved 0.40 USD" in summary.describe()


def test_a_pydantic_model_and_a_json_schema_give_the_same_columns(emulator, lab_factory):
    from typing import Literal

    import pydantic

    class Review(pydantic.BaseModel):
        topic: Literal["battery", "delivery", "price", "screen", "support"]
        rating: int
        score: float
        mentions_price: bool
        keywords: list[str]

    from_model = output_spec(schema=Review)
    from_dict = output_spec(schema=SCHEMA)
    from_json = output_spec(schema=Review.model_json_schema())
    assert from_model is not None and from_dict is not None and from_json is not None
    assert from_model.fields == from_dict.fields == from_json.fields
    # The same request whatever form the schema took (pydantic's titles are not sent).
    assert from_model.response_format() == from_dict.response_format()
    assert from_json.response_format() == from_dict.response_format()
    lab = lab_factory(emulator)
    frame = lab.batch_chat(
        reviews(4), prompt="Review: {review}", model=CHEAP, schema=Review, rows_per_request=4,
        progress=None,
    )  # fmt: skip
    assert set(frame["status"]) == {"ok"} and str(frame["rating"].dtype) == "Int64"

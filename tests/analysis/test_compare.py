"""``lab.compare``: configurations of a typed batch on a sample, by cost and agreement, paid
within the budget and checked on the emulator's chain."""

from __future__ import annotations

import secrets
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pytest

import x402lab as xl
from x402lab.analysis.comparison import ComparisonQuote
from x402lab.analysis.plots import comparison
from x402lab.errors import BudgetExceeded, ConfigError

CHEAP = "zai-org-glm-4.7-flash"
MID = "kimi-k3"
DEAR = "openai-gpt-54-pro"
LABELS = ["positive", "negative", "neutral"]
PROMPT = "Sentiment of this review: {review}"
REVIEWS = [
    "Great battery, love it",
    "Arrived broken, want a refund",
    "It is okay, nothing special",
    "Screen cracked after a week",
    "Fast delivery and great support",
]


def sample(n: int) -> pd.DataFrame:
    return pd.DataFrame({"review": [f"{REVIEWS[i % len(REVIEWS)]} (#{i})" for i in range(n)]})


@pytest.fixture
def lab_on(tmp_path):
    labs = []

    def make(emulator, usd=20.0):
        lab = xl.connect(
            emulator.gateway_url, emulator.reports_url,
            wallet=xl.Wallet.from_key("0x" + secrets.token_hex(32)),
            budget=xl.Budget(usd=usd), ledger=tmp_path / "ledger.sqlite",
        )  # fmt: skip
        labs.append(lab)
        return lab

    yield make
    for lab in labs:
        lab.close()


def compare(lab, frame, **kwargs):
    kwargs.setdefault("labels", LABELS)
    kwargs.setdefault("models", [CHEAP, DEAR])
    kwargs.setdefault("rows_per_request", [1, 10])
    return lab.compare(frame, prompt=PROMPT, **kwargs)


def chain_atomic(emulator) -> int:
    return sum(t.amount_atomic for t in emulator.chain.transfers())


def atomic(column) -> int:
    """An exact USD column's sum in atomic units (it must be exact: Decimal, not float)."""
    total = sum(column.dropna(), start=Decimal(0))
    assert isinstance(total, Decimal)
    return int(total * 1_000_000)


def test_paid_adds_up_to_the_chain_and_a_second_run_pays_nothing(emulator, lab_on):
    lab = lab_on(emulator)
    result = compare(lab, sample(20), total_rows=10_000)
    table = result.to_pandas()
    assert list(zip(table["model"], table["rows_per_request"], strict=True)) == [
        (CHEAP, 1), (CHEAP, 10), (DEAR, 1), (DEAR, 10),
    ]  # fmt: skip
    chain = chain_atomic(emulator)
    for name in ("quoted_usd", "paid_usd", "cost_usd"):
        assert table[name].dtype == pd.ArrowDtype(pa.decimal128(18, 6))
        assert atomic(table[name]) == chain, name
    # The reference: the dearest model at one row per request, and it agrees with itself.
    assert result.reference == (DEAR, 1)
    ref = table[table["reference"]]
    assert len(ref) == 1 and ref["agreement"].iloc[0] == 1.0
    assert table["agreement"].between(0, 1).all()
    assert (table["agreement_low"] <= table["agreement"]).all()
    assert (table["agreement"] <= table["agreement_high"]).all()
    assert (table["rows"] == 20).all() and (table["answered"] <= 20).all()
    assert table["requests"].tolist() == [20, 2, 20, 2]
    assert table["median_latency_s"].gt(0).all()
    # Packing is cheaper per row; the projection scales the per-row cost.
    cheap = table.set_index(["model", "rows_per_request"])
    assert cheap.loc[(CHEAP, 10), "usd_per_1k_rows"] < cheap.loc[(CHEAP, 1), "usd_per_1k_rows"]
    assert table["projected_usd"].tolist() == pytest.approx(
        (table["usd_per_1k_rows"] * 10).tolist()
    )
    assert table["frontier"].any()

    # The same comparison again: nothing paid, nothing quoted, the same figures.
    again = compare(lab, sample(20), total_rows=10_000).to_pandas()
    assert atomic(again["paid_usd"]) == atomic(again["quoted_usd"]) == 0
    assert chain_atomic(emulator) == chain
    same = ["cost_usd", "usd_per_1k_rows", "agreement", "agreement_low", "median_latency_s"]
    pd.testing.assert_frame_equal(again[same], table[same])


def test_a_dry_run_signs_nothing_and_quotes_what_the_run_pays(emulator, lab_on):
    lab = lab_on(emulator)
    quote = compare(lab, sample(20), dry_run=True)
    assert isinstance(quote, ComparisonQuote)
    assert emulator.chain.transfers() == [] and lab.ledger.rows() == []
    table = quote.to_pandas()
    assert list(table.columns) == ["model", "rows_per_request", "rows", "requests", "quoted_usd"]
    assert table["requests"].tolist() == [20, 2, 20, 2]
    assert atomic(table["quoted_usd"]) == quote.total_atomic > 0
    assert "nothing signed" in quote._repr_html_()

    result = compare(lab, sample(20))
    assert chain_atomic(emulator) == quote.total_atomic  # to the atomic unit
    run = result.to_pandas()
    assert run["quoted_usd"].tolist() == table["quoted_usd"].tolist()
    assert atomic(run["paid_usd"]) == quote.total_atomic
    assert result.quote.total_atomic == quote.total_atomic
    # Priced again once answered: nothing left to pay.
    assert compare(lab, sample(20), dry_run=True).total_atomic == 0


def test_max_usd_below_the_quote_refuses_before_any_transfer(emulator, lab_on):
    lab = lab_on(emulator)
    quote = compare(lab, sample(20), dry_run=True)
    below = (quote.total_atomic - 1) / 1_000_000
    with pytest.raises(BudgetExceeded, match="above max_usd") as caught:
        compare(lab, sample(20), max_usd=below)
    assert caught.value.details["quote"].total_atomic == quote.total_atomic
    assert caught.value.details["amount_atomic"] == quote.total_atomic
    assert emulator.chain.transfers() == [] and lab.ledger.rows() == []
    compare(lab, sample(20), max_usd=quote.total_atomic / 1_000_000)  # exactly the quote: paid
    assert chain_atomic(emulator) == quote.total_atomic


def test_one_row_per_request_pays_its_own_requests_after_a_packed_batch(emulator, lab_on):
    # A packed batch of the sample stores an answer under every row's own key; a comparison
    # must not count those as its one-row-per-request configuration's answers.
    lab = lab_on(emulator)
    frame = sample(20)
    packed = lab.batch_chat(frame, prompt=PROMPT, model=CHEAP, labels=LABELS,
                            rows_per_request=10, progress=None)  # fmt: skip
    assert (packed["status"] == "ok").all()
    before = len(emulator.chain.transfers())
    result = compare(lab, frame, models=[CHEAP], rows_per_request=[1, 10], reference=(CHEAP, 1))
    single = result.to_pandas().set_index("rows_per_request").loc[1]
    assert single["requests"] == 20
    assert result.answers[(CHEAP, 1)]["paid_usd"].astype(float).gt(0).all()
    assert (result.answers[(CHEAP, 1)]["status"] == "ok").all()  # none "cached"
    assert single["median_latency_s"] > 0
    assert len(emulator.chain.transfers()) == before + 20 + 2  # its own requests, and the packs'
    # ... and a later batch does not take the comparison's answers as its own either.
    again = lab.batch_chat(frame, prompt=PROMPT, model=CHEAP, labels=LABELS, progress=None)
    assert (again["status"] == "cached").all()  # the first batch's rows, under the plain keys
    assert len(emulator.chain.transfers()) == before + 22


def test_several_columns_have_an_agreement_each(emulator, lab_on):
    lab = lab_on(emulator)
    schema = {"topic": ["battery", "delivery", "price", "screen", "support"], "rating": int}
    table = compare(lab, sample(10), labels=None, schema=schema, models=[CHEAP, MID],
                    rows_per_request=[1, 5]).to_pandas()  # fmt: skip
    assert {"agreement_topic", "agreement_rating"} <= set(table.columns)
    assert (table["agreement"] <= table[["agreement_topic", "agreement_rating"]].min(axis=1)).all()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"rows_per_request": [1, 25]}, ConfigError, "fewer than the largest pack size 25"),
        ({"models": [CHEAP, "no-such-model"]}, xl.ModelNotFound, "no-such-model"),
        ({"models": [CHEAP, "llama-3.2-3b"]}, ConfigError, "supportsResponseSchema"),
        ({"labels": None}, ConfigError, "labels="),
    ],
)
def test_bad_comparisons_sign_nothing(emulator, lab_on, kwargs, error, match):
    lab = lab_on(emulator)
    with pytest.raises(error, match=match):
        compare(lab, sample(10), **kwargs)
    assert emulator.chain.transfers() == [] and lab.ledger.rows() == []


def test_a_comparison_over_the_budget_signs_nothing(emulator, lab_on):
    lab = lab_on(emulator, usd=0.05)
    with pytest.raises(BudgetExceeded, match="the comparison costs .* budget has") as caught:
        compare(lab, sample(10))
    assert caught.value.details["quote"].fits_budget is False
    assert emulator.chain.transfers() == [] and lab.ledger.rows() == []


def test_the_plot_labels_every_configuration_without_overlap():
    table = pd.DataFrame(
        {
            "model": ["m-cheap", "m-cheap", "m-cheap", "m-mid", "m-mid", "m-dear", "m-dear"],
            "rows_per_request": [1, 10, 25, 1, 10, 1, 10],
            "usd_per_1k_rows": [10.0, 1.0, 0.4, 10.0, 1.0, 10.0, 2.3],
            "agreement": [0.96, 0.92, 0.88, 0.96, 0.96, 1.0, 0.98],
            "reference": [False, False, False, False, False, True, False],
            "frontier": [False, True, True, False, True, True, True],
        }
    )
    figure = comparison(table)
    assert_labels_apart(figure, table)
    assert figure.axes[0].get_xscale() == "log"


def test_labels_of_points_that_coincide_are_apart():
    # Two configurations at the same cost and agreement (as the emulator often gives), and a
    # crowd at the lower right where the legend is.
    table = pd.DataFrame(
        {
            "model": ["a-model", "b-model", "c-model", "c-model", "d-model", "d-model"],
            "rows_per_request": [1, 1, 1, 25, 1, 25],
            "usd_per_1k_rows": [10.0, 10.0, 10.0, 0.46, 10.0, 0.46],
            "agreement": [1.0, 1.0, 0.96, 0.96, 0.95, 0.96],
            "reference": [True, False, False, False, False, False],
            "frontier": [False, False, False, True, False, False],
        }
    )
    assert_labels_apart(comparison(table), table)


def assert_labels_apart(figure, table):
    """Every configuration labelled once; no label box meets another, the legend, or the edge
    of the figure (boxes from matplotlib's own renderer)."""
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    axes = figure.axes[0]
    texts = [t for t in axes.texts if t.get_text()]  # leader lines are annotations without text
    assert sorted(t.get_text() for t in texts) == sorted(
        f"{m} ×{n}" for m, n in zip(table["model"], table["rows_per_request"], strict=True)
    )
    boxes = [t.get_window_extent(renderer) for t in texts]
    legend = axes.get_legend().get_window_extent(renderer)
    for i, a in enumerate(boxes):
        assert not a.overlaps(legend), texts[i].get_text()
        assert figure.bbox.contains(a.x0, a.y0) and figure.bbox.contains(a.x1, a.y1)
        for j, b in enumerate(boxes[i + 1 :], start=i + 1):
            assert not a.overlaps(b), (texts[i].get_text(), texts[j].get_text())

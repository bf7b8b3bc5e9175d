"""``lab.compare``: configurations of a typed batch on a sample, by cost and agreement, paid
within the budget and checked on the emulator's chain."""

from __future__ import annotations

import secrets

import pandas as pd
import pytest

import x402lab as xl
from x402lab.analysis.plots import comparison
from x402lab.errors import BudgetExceeded, ConfigError

CHEAP = "zai-org-glm-4.7-flash"
MID = "kimi-k3"
DEAR = "openai-gpt-54-pro"
LABELS = ["positive", "negative", "neutral"]
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
    return lab.compare(frame, prompt="Sentiment of this review: {review}", **kwargs)


def test_paid_adds_up_to_the_chain_and_a_second_run_pays_nothing(emulator, lab_on):
    lab = lab_on(emulator)
    result = compare(lab, sample(20), total_rows=10_000)
    table = result.to_pandas()
    assert list(zip(table["model"], table["rows_per_request"], strict=True)) == [
        (CHEAP, 1), (CHEAP, 10), (DEAR, 1), (DEAR, 10),
    ]  # fmt: skip
    chain = sum(t.amount_atomic for t in emulator.chain.transfers())
    assert round(table["paid_usd"].sum() * 1_000_000) == chain
    # The reference: the dearest model at one row per request, and it agrees with itself.
    assert result.reference == (DEAR, 1)
    ref = table[table["reference"]]
    assert len(ref) == 1 and ref["agreement"].iloc[0] == 1.0
    assert table["agreement"].between(0, 1).all()
    assert (table["rows"] == 20).all() and (table["answered"] <= 20).all()
    # Packing is cheaper per row; the projection scales the per-row cost.
    cheap = table.set_index(["model", "rows_per_request"])
    assert cheap.loc[(CHEAP, 10), "usd_per_1k_rows"] < cheap.loc[(CHEAP, 1), "usd_per_1k_rows"]
    assert table["projected_usd"].tolist() == pytest.approx(
        (table["usd_per_1k_rows"] * 10).tolist()
    )
    assert table["cheapest_at_agreement"].any()

    again = compare(lab, sample(20), total_rows=10_000).to_pandas()
    assert again["paid_usd"].sum() == 0
    assert sum(t.amount_atomic for t in emulator.chain.transfers()) == chain
    assert again["agreement"].tolist() == table["agreement"].tolist()
    assert again["usd_per_1k_rows"].tolist() == pytest.approx(table["usd_per_1k_rows"].tolist())


def test_the_full_batch_reuses_the_rows_of_the_sample(emulator, lab_on):
    lab = lab_on(emulator)
    frame = sample(12)
    compare(lab, frame, models=[CHEAP], rows_per_request=[1, 4], reference=(CHEAP, 1))
    before = len(emulator.chain.transfers())
    full = lab.batch_chat(
        pd.concat([frame, sample(30).iloc[12:]]), prompt="Sentiment of this review: {review}",
        model=CHEAP, labels=LABELS, rows_per_request=4, progress=None,
    )  # fmt: skip
    assert (full["status"].iloc[:12] == "cached").all()
    assert len(emulator.chain.transfers()) == before + 18 // 4 + 1  # only the new rows


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
    with pytest.raises(BudgetExceeded, match="the comparison costs"):
        compare(lab, sample(10))
    assert emulator.chain.transfers() == [] and lab.ledger.rows() == []


def test_the_plot_labels_every_configuration_without_overlap():
    table = pd.DataFrame(
        {
            "model": ["m-cheap", "m-cheap", "m-cheap", "m-mid", "m-mid", "m-dear", "m-dear"],
            "rows_per_request": [1, 10, 25, 1, 10, 1, 10],
            "usd_per_1k_rows": [10.0, 1.0, 0.4, 10.0, 1.0, 10.0, 2.3],
            "agreement": [0.96, 0.92, 0.88, 0.96, 0.96, 1.0, 0.98],
            "reference": [False, False, False, False, False, True, False],
            "cheapest_at_agreement": [False, True, True, False, True, True, True],
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
            "cheapest_at_agreement": [False, False, False, True, False, False],
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

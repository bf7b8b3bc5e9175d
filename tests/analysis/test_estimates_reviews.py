"""Estimates on reviews the emulator classified (a real paid batch over its sockets), against
the reference implementation ``ppi_py``; and ``lab.compare`` without a target: its rule,
its warning about labels no gold row has, and what its card says on the emulator."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import x402lab as xl
from x402lab.emulator.server import start_emulator
from x402lab.emulator.settings import EmulatorSettings

REPO = Path(__file__).resolve().parents[2]
CHEAP = "zai-org-glm-4.7-flash"
MID = "kimi-k3"
DEAR = "openai-gpt-54-pro"
LABELS = ["positive", "negative", "neutral", "mixed"]
PROMPT = "Sentiment of this product review: {review}"


@dataclass
class Classified:
    lab: Any
    frame: pd.DataFrame  # the model's label, the data's gold label (truth) of each row


@pytest.fixture(scope="module")
def classified(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Classified]:
    """600 reviews (the data's 200, each three times with its number, so that each is a text
    of its own) classified by the cheapest model in packs of 25, paid on the emulator."""
    emulator = start_emulator(EmulatorSettings())
    lab = xl.connect(emulator.gateway_url, emulator.reports_url, wallet=xl.Wallet.create(),
                     budget=xl.Budget(usd=20),
                     ledger=tmp_path_factory.mktemp("estimates") / "ledger.sqlite")  # fmt: skip
    try:
        data = pd.read_csv(REPO / "data" / "reviews.csv")
        rows = pd.concat(
            [data.assign(review=data["review"] + f" (#{k})") for k in range(3)], ignore_index=True
        )
        answers = lab.batch_chat(rows[["id", "review"]], prompt=PROMPT, model=CHEAP,
                                 labels=LABELS, rows_per_request=25, progress=None)  # fmt: skip
        frame = answers[["review", "label"]].assign(truth=rows["label"])
        yield Classified(lab, frame)
    finally:
        lab.close()
        emulator.stop()


def test_shares_and_means_equal_ppi_py_for_every_value(classified):
    from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate

    frame = classified.frame
    assert 0.75 < (frame["label"] == frame["truth"]).mean() < 0.98  # a model that errs

    def reference(y, yhat, yhat_u, w=None):
        point = ppi_mean_pointestimate(y, yhat, yhat_u, w=w)
        low, high = ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, w=w)
        return float(np.squeeze(point)), float(np.squeeze(low)), float(np.squeeze(high))

    uniform = xl.gold_sample(frame, 120, seed=11)
    stratified = xl.gold_sample(frame, 100, seed=11, by="label")
    for sample, weighted in ((uniform, False), (stratified, True)):
        weights = sample["sample_weight"] if weighted else None
        result = xl.shares(frame, "label", sample["truth"], weights=weights)
        table = result.to_pandas()
        assert sorted(table["value"]) == sorted(LABELS)
        labelled = frame.index.isin(sample.index)
        for row in table.itertuples():
            said = (frame["label"] == row.value).to_numpy(dtype=float)
            y = (sample["truth"] == row.value).to_numpy(dtype=float)
            w = sample["sample_weight"].to_numpy() if weighted else None
            others = said if weighted else said[~labelled]
            point, low, high = reference(y, said[labelled], others, w)
            assert (row.share, row.low, row.high) == pytest.approx((point, low, high), abs=1e-6)
            gold_low, gold_high = (
                classical_mean_ci(y, alpha=0.05)
                if not weighted
                else (ppi_mean_ci(y, np.zeros_like(y), np.zeros(1), alpha=0.05, lam=0, w=w))
            )
            assert (row.gold_low, row.gold_high) == pytest.approx(
                (float(np.squeeze(gold_low)), float(np.squeeze(gold_high))), abs=1e-6
            )
            assert row.model_share == pytest.approx(said.mean())
            assert row.n_gold == int(y.sum())
            ratio = (row.gold_high - row.gold_low) / (row.high - row.low)
            assert row.worth_gold == pytest.approx(len(sample) * ratio**2)
        # With a good model the intervals are narrower than the gold rows' own.
        assert ((table["high"] - table["low"]) < (table["gold_high"] - table["gold_low"])).all()
        assert result.weighted is weighted and result.n_gold == len(sample)

    # A boolean field's mean, the same way.
    frame = frame.assign(negative=frame["label"] == "negative")
    gold = uniform["truth"] == "negative"
    row = xl.mean(frame, "negative", gold).to_pandas().iloc[0]
    said = frame["negative"].to_numpy(dtype=float)
    labelled = frame.index.isin(gold.index)
    expected = reference(gold.to_numpy(dtype=float), said[labelled], said[~labelled])
    assert (row["mean"], row["low"], row["high"]) == pytest.approx(expected, abs=1e-6)


def test_the_card_and_the_plot_show_the_three_figures_and_a_missing_value_warns(classified):
    frame = classified.frame
    sample = xl.gold_sample(frame, 120, seed=3)
    result = xl.shares(frame, "label", sample["truth"])
    page = result._repr_html_()
    image = '<img alt="share estimates" src="data:image/png;base64,'
    for words in ("PPI++", "model_share", "no interval", "worth_gold", "120 gold labels",
                  "600 rows", image):  # fmt: skip
        assert words in page
    figure = result.plot()
    assert figure._repr_png_().startswith(b"\x89PNG\r\n\x1a\n")  # shown with no magic
    axes = figure.axes[0]
    assert [t.get_text() for t in axes.get_yticklabels()] == result.to_pandas()["value"].tolist()
    assert {t.get_text() for t in figure.legends[0].get_texts()} == {
        "PPI++ (95% interval)",
        "gold labels only (95%)",
        "model's labels only (no interval)",
    }
    png = base64.b64decode(page.split("base64,")[1].split('"')[0])
    assert png.startswith(b"\x89PNG")

    # Gold rows that hold no "mixed" (not a random sample any more): named in a warning
    # and on the card.
    thin = sample["truth"][sample["truth"] != "mixed"]
    with pytest.warns(xl.GoldWarning, match="no gold row has the value\\(s\\) 'mixed'"):
        warned = xl.shares(frame, "label", thin)
    assert "&#x27;mixed&#x27;" in warned._repr_html_()
    assert warned.to_pandas().set_index("value").loc["mixed", "n_gold"] == 0


def test_compare_without_target_takes_the_cheapest_that_overlaps_the_best(classified):
    data = pd.read_csv(REPO / "data" / "reviews.csv").head(80)
    sample = data[data["label"] != "mixed"]  # a sample with no "mixed" review
    with pytest.warns(xl.GoldWarning, match="no gold row has the label\\(s\\) 'mixed'"):
        result = classified.lab.compare(sample, prompt=PROMPT, labels=LABELS,
                                        models=[CHEAP, MID, DEAR], rows_per_request=[1, 20],
                                        reference="label")  # fmt: skip
    table = result.to_pandas()
    top = table.sort_values(["accuracy", "usd_per_1k_rows"], ascending=[False, True]).iloc[0]
    overlapping = table[table["accuracy_high"] >= top["accuracy_low"]]
    cheapest = overlapping.sort_values(["usd_per_1k_rows", "accuracy"], ascending=[True, False])
    assert result.best == (cheapest["model"].iloc[0], int(cheapest["rows_per_request"].iloc[0]))
    # The rule chose a cheaper configuration than the most accurate one, not the same.
    best = table[(table["model"] == result.best[0])
                 & (table["rows_per_request"] == result.best[1])].iloc[0]  # fmt: skip
    assert best["usd_per_1k_rows"] < top["usd_per_1k_rows"]
    assert best["accuracy_high"] >= top["accuracy_low"]
    assert f"best: {result.best[0]} at {result.best[1]}" in result.verdict
    assert "overlaps that of the highest accuracy" in result.verdict
    page = result._repr_html_()
    assert "overlaps that of the highest accuracy" in result.rule and "rule" in page
    assert "simulated by the emulator" in page
    assert "no gold row has the label(s) &#x27;mixed&#x27;" in page

"""Estimates: how much narrower PPI++ intervals are than the gold labels' own, and whether
both still cover the truth.

Run with ``python benchmarks/estimates.py`` (``--copies K``, ``--draws D``, ``--model ID``,
``--gold 100 200 400``). On the embedded emulator, ``data/reviews.csv`` taken ``K`` times
(each review with its copy's number, so each is a text of its own: 200 × K rows) is
classified once with ``labels=`` in packs of 25. Then, for each gold-sample size, ``D``
uniform gold samples are drawn (seeds 0..D-1), labelled from the data's own gold column,
and ``xl.shares`` gives each label's PPI++ interval and the gold-only interval of the same
rows (the baseline, measured in the same run on the same draws). It prints per size and
label the mean half-width of each, their ratio, ``worth_gold`` (the gold labels a gold-only
interval would need to be as narrow) and how often each interval covered the true share
(known here: every row has a gold label). The shares themselves are free; only the one
classification is paid (emulated money).

Goal (issue of population estimates): at every size, PPI++ intervals narrower than the
gold-only ones for every label, both covering the truth about 95% of the time.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd

import x402lab as xl

DATA = Path(__file__).resolve().parents[1] / "data" / "reviews.csv"
LABELS = ["positive", "negative", "neutral", "mixed"]


def classify(copies: int, model: str) -> tuple[pd.DataFrame, pd.Series]:
    """The corpus classified by ``model`` on a fresh emulator and ledger, and its truth."""
    reviews = pd.read_csv(DATA)
    corpus = pd.concat(
        [reviews.assign(review=reviews["review"] + f" (#{k})") for k in range(copies)],
        ignore_index=True,
    )
    truth = corpus.pop("label")
    with tempfile.TemporaryDirectory() as folder:
        lab = xl.connect(ledger=Path(folder) / "ledger.sqlite", budget=xl.Budget(usd=50))
        try:
            labelled = lab.batch_chat(corpus, prompt="Sentiment of this product review: {review}",
                                      model=model, labels=LABELS, rows_per_request=25,
                                      progress=None)  # fmt: skip
        finally:
            lab.close()
    return labelled, truth


def widths(labelled: pd.DataFrame, truth: pd.Series, gold: int, draws: int) -> pd.DataFrame:
    """Per label, over ``draws`` gold samples of ``gold`` rows: mean half-widths, coverage."""
    actual = truth.value_counts(normalize=True)
    rows = []
    for seed in range(draws):
        sample = xl.gold_sample(labelled, gold, seed=seed)
        table = xl.shares(labelled, "label", truth.loc[sample.index], values=LABELS).to_pandas()
        true = table["value"].map(actual).to_numpy()
        table["ppi_half"] = (table["high"] - table["low"]) / 2
        table["gold_half"] = (table["gold_high"] - table["gold_low"]) / 2
        table["ppi_covers"] = (table["low"] <= true) & (true <= table["high"])
        table["gold_covers"] = (table["gold_low"] <= true) & (true <= table["gold_high"])
        table["model_error"] = (table["model_share"] - true).abs()
        rows.append(table)
    every = pd.concat(rows)
    summary = every.groupby("value", sort=False).agg(
        ppi_half=("ppi_half", "mean"),
        gold_half=("gold_half", "mean"),
        worth_gold=("worth_gold", "median"),
        ppi_covers=("ppi_covers", "mean"),
        gold_covers=("gold_covers", "mean"),
        model_error=("model_error", "mean"),
    )
    summary["width_ratio"] = summary["ppi_half"] / summary["gold_half"]
    summary.insert(0, "gold", gold)
    return summary.reset_index()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20, help="copies of the 200 reviews")
    parser.add_argument("--draws", type=int, default=100, help="gold samples per size")
    parser.add_argument("--model", default="zai-org-glm-4.7-flash")
    parser.add_argument("--gold", type=int, nargs="+", default=[100, 200, 400])
    args = parser.parse_args()
    started = time.perf_counter()
    labelled, truth = classify(args.copies, args.model)
    print(f"{len(labelled)} rows classified by {args.model} in"
          f" {time.perf_counter() - started:.1f} s; accuracy against the gold column"
          f" {(labelled['label'] == truth).mean():.3f}")  # fmt: skip
    table = pd.concat([widths(labelled, truth, n, args.draws) for n in args.gold])
    with pd.option_context("display.width", 120, "display.precision", 3):
        print(table.to_string(index=False))
    narrower = bool((table["width_ratio"] < 1).all())
    print(f"PPI++ narrower than gold-only for every label and size: {narrower}")


if __name__ == "__main__":
    main()

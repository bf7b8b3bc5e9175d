"""``xl.shares``, ``xl.mean`` and ``xl.gold_sample`` without paid calls: the intervals cover
the truth over many simulated populations labelled by a biased model (uniform and
stratified gold samples), where intervals on the model's labels miss it; bad gold input is
refused with a message naming the problem and the fix."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import x402lab as xl
from x402lab.analysis.intervals import wilson

VALUES = ["a", "b", "c", "d"]
TRUE_SHARES = [0.45, 0.30, 0.15, 0.10]
SEEDS = 150
ROWS = 2000
GOLD = 200


def populations(seeds: int = SEEDS, rows: int = ROWS) -> tuple[np.ndarray, np.ndarray]:
    """Truth and a biased model's labels for ``seeds`` populations at once (seeds × rows):
    the model is right 75% of the time and its mistakes are systematic (an "a" taken for a
    "c", anything else for an "a"), so its shares of "a" and "c" are too high and those of
    "b" and "d" too low."""
    rng = np.random.default_rng(2026)
    truth = rng.choice(4, size=(seeds, rows), p=TRUE_SHARES)
    mistaken = np.array([2, 0, 0, 0])[truth]
    model = np.where(rng.random((seeds, rows)) < 0.75, truth, mistaken)
    names = np.array(VALUES, dtype=object)
    return names[truth], names[model]


def coverage(stratified: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per seed and value: whether the PPI++ interval and a Wilson interval on the model's
    labels (the naive one) cover the population's true share."""
    truth, model = populations()
    names = np.array(VALUES, dtype=object)[:, None, None]
    actual = pd.DataFrame((truth == names).mean(axis=2).T, columns=VALUES)
    counts = (model == names).sum(axis=2).T
    naive = pd.DataFrame(
        [[lo <= a <= hi for a, (lo, hi) in zip(shares, map(wilson, row, [ROWS] * 4), strict=True)]
         for shares, row in zip(actual.to_numpy(), counts, strict=True)], columns=VALUES
    )  # fmt: skip
    covered = []
    for seed in range(SEEDS):
        frame = pd.DataFrame({"truth": truth[seed], "label": model[seed]})
        sample = xl.gold_sample(frame, GOLD, seed=seed, by="label" if stratified else None)
        weights = sample["sample_weight"] if stratified else None
        table = xl.shares(frame, "label", sample["truth"], values=VALUES, weights=weights)
        found = table.to_pandas()
        assert found["value"].tolist() == VALUES
        true = actual.loc[seed].to_numpy()
        covered.append((found["low"].to_numpy() <= true) & (true <= found["high"].to_numpy()))
    return pd.DataFrame(covered, columns=VALUES), naive


def test_ppi_intervals_cover_the_true_shares_where_the_models_labels_miss_them():
    covered, naive = coverage(stratified=False)
    assert len(covered) == SEEDS
    rates = covered.mean()
    assert (rates >= 0.92).all(), rates.to_dict()
    # Intervals on the model's own labels are intervals on the model, not on the world.
    assert (naive.mean() < 0.5).all(), naive.mean().to_dict()


def test_a_stratified_gold_sample_with_its_weights_covers_as_well():
    covered, _ = coverage(stratified=True)
    rates = covered.mean()
    assert (rates >= 0.92).all(), rates.to_dict()
    # Stratified by the model's label: every value got its equal part of the gold rows.
    truth, model = populations(seeds=1)
    frame = pd.DataFrame({"truth": truth[0], "label": model[0]})
    sample = xl.gold_sample(frame, 202, seed=5, by="label")
    counts = sample["label"].value_counts()
    assert sorted(counts.tolist()) == [50, 50, 51, 51]
    for value, rows in sample.groupby("label"):
        assert np.allclose(rows["sample_weight"], (frame["label"] == value).sum() / len(rows))
    assert sample.index.isin(frame.index).all() and sample.index.is_monotonic_increasing
    again = xl.gold_sample(frame, 202, seed=5, by="label")
    assert again.index.equals(sample.index)  # the same seed draws the same rows
    assert not xl.gold_sample(frame, 202, seed=6, by="label").index.equals(sample.index)
    # A stratum smaller than its share gives all its rows; the others share what it leaves.
    small = frame.assign(label=np.where(np.arange(ROWS) < 10, "tiny", "big"))
    drawn = xl.gold_sample(small, 60, seed=1, by="label")["label"].value_counts()
    assert drawn.to_dict() == {"big": 50, "tiny": 10}


def test_a_mean_covers_the_truth_of_a_numeric_field_a_biased_model_overstates():
    rng = np.random.default_rng(7)
    hits = 0
    for seed in range(60):
        truth = rng.gamma(2.0, 10.0, size=ROWS)
        model = truth * 1.15 + rng.normal(0, 4, size=ROWS)  # 15% too high, noisy
        frame = pd.DataFrame({"truth": truth, "amount": model})
        sample = xl.gold_sample(frame, GOLD, seed=seed)
        row = xl.mean(frame, "amount", sample["truth"]).to_pandas().iloc[0]
        hits += row["low"] <= truth.mean() <= row["high"]
        assert row["model_mean"] > truth.mean()  # the model alone is off
        assert row["worth_gold"] > GOLD  # a good model is worth more gold labels than it used
    assert hits / 60 >= 0.9


def _refused(match: str, call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(xl.ConfigError, match=match):
        call()


def test_bad_gold_input_is_refused_with_the_problem_and_the_fix():
    truth, model = populations(seeds=1, rows=300)
    frame = pd.DataFrame({"truth": truth[0], "label": model[0], "amount": np.arange(300.0)},
                         index=np.arange(300) + 1000)  # fmt: skip
    sample = xl.gold_sample(frame, 60, seed=1)
    gold = sample["truth"]
    cases = {
        "a Series of true values indexed by the frame": lambda: xl.shares(
            frame, "label", list(gold)
        ),
        r"2 rows the frame does not have \(index 0, 1\).*frame's own index": lambda: xl.shares(
            frame, "label", pd.concat([gold, pd.Series(["a", "b"], index=[0, 1])])
        ),
        r"3 gold labels are missing.*gold.dropna\(\)": lambda: xl.shares(
            frame, "label", gold.mask(gold.index.isin(gold.index[:3]))
        ),
        r"only 10 gold labels: an interval needs at least 20": lambda: xl.shares(
            frame, "label", gold.iloc[:10]
        ),
        r"gold values 'z' are not among the labels .*values=": lambda: xl.shares(
            frame, "label", gold.where(gold != "a", "z")
        ),
        r"model's labels in 'label' hold 'd', not among values": lambda: xl.shares(
            frame, "label", gold, values=["a", "b", "c"]
        ),
        "duplicate labels: one gold label per row": lambda: xl.shares(
            frame, "label", pd.concat([gold, gold.iloc[:1]])
        ),
        "every row of the frame has a gold label": lambda: xl.shares(
            frame, "label", frame["truth"]
        ),
        r"no column 'lable'; it has truth, label, amount": lambda: xl.shares(frame, "lable", gold),
        r"level is the interval's coverage in \(0, 1\)": lambda: xl.shares(
            frame, "label", gold, level=95
        ),
        r"weights has no value for 60 gold rows": lambda: xl.shares(
            frame, "label", gold, weights=pd.Series(1.0, index=[1])
        ),
        "weights must be positive numbers": lambda: xl.shares(
            frame, "label", gold, weights=sample["sample_weight"] * -1
        ),
        r"stratified by 'label'.*weights=sample\['sample_weight'\]": lambda: xl.shares(
            frame, "label", xl.gold_sample(frame, 60, seed=1, by="label")["truth"]
        ),
        r"mean\(\) takes a numeric or boolean field; 'label' is .*xl.shares": lambda: xl.mean(
            frame, "label", gold
        ),
        r"gold values must be numbers or booleans for mean\(\)": lambda: xl.mean(
            frame, "amount", gold
        ),
        r"2 rows have no value of 'amount'.*notna": lambda: xl.mean(
            frame.assign(amount=frame["amount"].where(frame["amount"] > 1)),
            "amount",
            frame.loc[gold.index, "amount"],
        ),
        r"n is the number of rows to draw, 1 to 300": lambda: xl.gold_sample(frame, 301),
        "n=3 is fewer than the 4 values of 'label'": lambda: xl.gold_sample(frame, 3, by="label"),
        "by='lable' is no column": lambda: xl.gold_sample(frame, 30, by="lable"),
        "already has a 'sample_weight' column": lambda: xl.gold_sample(sample, 10),
    }
    for match, call in cases.items():
        _refused(match, call)
    # The same gold, well formed, is accepted: the refusals above are about the input.
    assert len(xl.shares(frame, "label", gold).to_pandas()) == 4

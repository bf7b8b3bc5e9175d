"""Population figures an analyst can defend: ``xl.shares`` and ``xl.mean`` estimate, over all
the rows of a frame a model labelled, a label's share or a field's mean with a valid
interval, from a few rows labelled by hand (the gold rows, drawn by ``xl.gold_sample``).

The model's labels alone are biased and their errors do not average out: an interval on
them covers the model's share, not the world's. The gold rows alone give a valid but wide
interval. Prediction-powered inference (PPI++, ``estimates_math``) uses both: the model's
figure on every row, corrected by its errors on the gold rows, with the model's weight tuned
to make the interval narrowest. The intervals are valid when the gold rows are a random
sample of the frame's rows (uniform, or stratified with the weights ``gold_sample`` gives);
see docs/estimates.md. Pure functions: nothing is paid.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from x402lab.analysis.estimates_gold import (
    GoldRows,
    check_frame,
    check_level,
    gold_rows,
    preview,
)
from x402lab.analysis.estimates_math import Intervals, gold_means, ppi_means, worth
from x402lab.analysis.estimates_result import Estimates
from x402lab.analysis.estimates_sample import gold_sample
from x402lab.errors import ConfigError, GoldWarning

__all__ = ["gold_sample", "mean", "shares"]


def shares(
    frame: pd.DataFrame,
    column: str,
    gold: pd.Series,
    *,
    values: Sequence[Any] | None = None,
    weights: pd.Series | None = None,
    level: float = 0.95,
) -> Estimates:
    """Free: each value's share of ``frame``'s rows, with its PPI++ interval at ``level``.

    ``column``: the model's label of every row (a null counts as none of the values).
    ``gold``: the true labels of the rows labelled by hand, a Series indexed by the frame's
    index (``xl.gold_sample`` draws the rows). ``values``: every possible label (the
    ``labels=`` of the batch), by default the ones the model gave. ``weights``: the gold
    rows' inclusion weights (``sample["sample_weight"]`` of a stratified ``gold_sample``);
    None for a uniform sample.

    Returns an Estimates; ``to_pandas()`` has one row per value: ``value``, ``share``,
    ``low``, ``high`` (PPI++), ``model_share`` (the model's labels alone; no interval),
    ``gold_share``, ``gold_low``, ``gold_high`` (the gold rows alone), ``n_gold`` (gold rows
    of that value) and ``worth_gold`` (the gold labels a gold-only interval would need to be
    as narrow). Bounds are not clipped to [0, 1]. Equal to ``ppi_py``'s ``ppi_mean_ci`` with
    ``Y = gold == v``, ``Yhat`` the model's labels on the gold rows and ``Yhat_unlabeled`` on
    the others; with weights, ``w=weights`` and ``Yhat_unlabeled`` on every row.

    Warns (GoldWarning) naming a value no gold row has: its interval leans on the model.
    Raises ConfigError for gold that does not fit the frame (see ``gold_rows``), gold
    values outside ``values``, or a bad ``level``.
    """
    frame = check_frame(frame, column, "shares")
    level = check_level(level)
    rows = gold_rows(frame, gold, weights)
    model = frame[column]
    labels = _labels(model, rows.truth, values, column)
    predicted = _one_hot(model, labels).astype(float)
    truth = _one_hot(rows.truth, labels)
    ppi, gold_only = _intervals(truth.astype(float), predicted, rows, level)
    table = pd.DataFrame(
        {
            "value": labels,
            "share": ppi.estimate,
            "low": ppi.low,
            "high": ppi.high,
            "model_share": predicted.mean(axis=0),
            "gold_share": gold_only.estimate,
            "gold_low": gold_only.low,
            "gold_high": gold_only.high,
            "n_gold": truth.sum(axis=0).astype("int64"),
            "worth_gold": worth(rows.n, gold_only, ppi),
        }
    )
    notes = []
    unseen = [v for v, count in zip(labels, table["n_gold"], strict=True) if count == 0]
    if unseen:
        notes.append(
            f"no gold row has the value(s) {preview(unseen)}: their intervals lean on the"
            f" model alone and may be too narrow; label rows of them too (xl.gold_sample(frame,"
            f" n, by={column!r}) draws from every value)"
        )
        warnings.warn(GoldWarning(notes[-1]), stacklevel=2)
    unlabelled = int(model.isna().sum())
    if unlabelled:
        notes.append(
            f"{unlabelled} rows have no model label: they count as none of the values (the"
            " estimates stay valid; the model_share column adds up to less than 1)"
        )
    return Estimates(table, "share", column, len(frame), rows.n, level, rows.weights is not None,
                     notes)  # fmt: skip


def mean(
    frame: pd.DataFrame,
    column: str,
    gold: pd.Series,
    *,
    weights: pd.Series | None = None,
    level: float = 0.95,
) -> Estimates:
    """Free: the mean of a numeric or boolean field over ``frame``'s rows, with its PPI++
    interval at ``level`` (booleans: the share of true).

    ``column``: the model's value of every row; ``gold``: the true values of the rows
    labelled by hand, indexed by the frame's index; ``weights`` as for ``shares``. Returns an
    Estimates of one row: ``field``, ``mean``, ``low``, ``high``, ``model_mean``,
    ``gold_mean``, ``gold_low``, ``gold_high``, ``n_gold``, ``worth_gold``.

    Raises ConfigError for a column that is not numeric or boolean or has nulls (rows the
    model did not answer), non-numeric gold values, or gold that does not fit the frame.
    """
    frame = check_frame(frame, column, "mean")
    level = check_level(level)
    rows = gold_rows(frame, gold, weights)
    model = frame[column]
    if not (pd.api.types.is_numeric_dtype(model) or pd.api.types.is_bool_dtype(model)):
        raise ConfigError(
            f"mean() takes a numeric or boolean field; {column!r} is {model.dtype}: for labels"
            " use xl.shares"
        )
    if model.isna().any():
        raise ConfigError(
            f"{int(model.isna().sum())} rows have no value of {column!r} (the model did not"
            f" answer them): estimate over the answered rows, frame[frame[{column!r}].notna()]"
        )
    predicted = model.astype("float64").to_numpy()[:, None]
    truth = pd.to_numeric(rows.truth.astype(object), errors="coerce").astype("float64")
    if truth.isna().any():
        bad = rows.truth[truth.isna()].tolist()
        raise ConfigError(f"gold values must be numbers or booleans for mean(): {preview(bad)}")
    ppi, gold_only = _intervals(truth.to_numpy()[:, None], predicted, rows, level)
    table = pd.DataFrame(
        {
            "field": [column],
            "mean": ppi.estimate,
            "low": ppi.low,
            "high": ppi.high,
            "model_mean": predicted.mean(axis=0),
            "gold_mean": gold_only.estimate,
            "gold_low": gold_only.low,
            "gold_high": gold_only.high,
            "n_gold": [rows.n],
            "worth_gold": worth(rows.n, gold_only, ppi),
        }
    )
    return Estimates(table, "mean", column, len(frame), rows.n, level, rows.weights is not None)


def _intervals(
    truth: np.ndarray, predicted: np.ndarray, rows: GoldRows, level: float
) -> tuple[Intervals, Intervals]:
    """PPI++ and gold-only intervals. A uniform sample: the model's figure over the rows not
    labelled. A weighted one: the model's figure over every row (each once: its sample is
    not uniform, so the rows left over are not either), the gold rows weighted."""
    on_gold = predicted[rows.labelled]
    others = predicted if rows.weights is not None else predicted[~rows.labelled]
    ppi = ppi_means(truth, on_gold, others, weights=rows.weights, level=level)
    return ppi, gold_means(truth, weights=rows.weights, level=level)


def _one_hot(values: pd.Series, labels: list[Any]) -> np.ndarray:
    """One column per label: whether each of ``values`` is it (a null is none of them)."""
    codes = pd.Categorical(values, categories=labels).codes
    return np.asarray(codes)[:, None] == np.arange(len(labels))


def _labels(model: pd.Series, truth: pd.Series, values: Sequence[Any] | None, column: str) -> list:
    """The values to estimate: ``values``, or the model's labels (most frequent first)."""
    given = model.dropna()
    if values is None:
        labels = list(given.value_counts(sort=True).index)
        fix = "pass values=[...] with every possible label (the labels= of the batch)"
    else:
        labels = list(dict.fromkeys(values))
        strays = sorted({str(v) for v in given.unique() if v not in set(labels)})
        if strays:
            raise ConfigError(
                f"the model's labels in {column!r} hold {preview(strays)}, not among values"
                f" {labels}: add them to values"
            )
        fix = "add them to values, or correct the gold labels"
    wrong = sorted({str(v) for v in truth.unique() if v not in set(labels)})
    if wrong:
        raise ConfigError(f"gold values {preview(wrong)} are not among the labels {labels}: {fix}")
    if not labels:
        raise ConfigError(f"{column!r} holds no label: nothing to estimate")
    return labels

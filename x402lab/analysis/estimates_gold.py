"""The gold rows of an estimate: a Series of true values indexed by the frame's index (the
rows labelled by hand), with their inclusion weights when the sample was not uniform,
checked against the frame before anything is computed. Every refusal names the problem and
the fix."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from x402lab.analysis.estimates_math import MIN_GOLD
from x402lab.errors import ConfigError

#: The attr ``gold_sample`` sets on its sample (and pandas carries to its columns).
SAMPLE_ATTR = "gold_sample"
#: The column of each sampled row's inclusion weight.
WEIGHT = "sample_weight"


@dataclass(frozen=True)
class GoldRows:
    """The gold labels in the frame's row order: ``labelled`` marks the frame's rows that
    have one, ``truth`` holds them (in that order), ``weights`` their inclusion weights
    (None for a uniform sample)."""

    labelled: np.ndarray
    truth: pd.Series
    weights: np.ndarray | None

    @property
    def n(self) -> int:
        return len(self.truth)


def preview(labels: Sequence[Any]) -> str:
    shown = ", ".join(repr(v) for v in list(labels)[:3])
    return shown + (", ..." if len(labels) > 3 else "")


def check_frame(frame: Any, column: str, what: str) -> pd.DataFrame:
    """``frame`` as a DataFrame holding ``column``, with a unique index."""
    if not isinstance(frame, pd.DataFrame):
        raise ConfigError(f"{what}() takes a DataFrame of every row, got {type(frame).__name__}")
    if column not in frame.columns:
        raise ConfigError(
            f"the frame has no column {column!r}; it has {', '.join(map(str, frame.columns))}"
        )
    if not frame.index.is_unique:
        raise ConfigError(
            "the frame's index has duplicate labels, so gold rows cannot be matched to it:"
            " frame.reset_index(drop=True) first (and draw the gold sample after)"
        )
    return frame


def check_level(level: Any) -> float:
    if not (isinstance(level, int | float) and 0 < level < 1):
        raise ConfigError(f"level is the interval's coverage in (0, 1), e.g. 0.95; got {level!r}")
    return float(level)


def gold_rows(frame: pd.DataFrame, gold: Any, weights: Any) -> GoldRows:
    """The gold labels ``gold`` (a Series indexed by ``frame``'s index) and their weights
    (a Series covering ``gold``'s index, or None), checked against the frame.

    Raises ConfigError for a gold that is no Series, has missing values, duplicate or
    foreign index labels, fewer than ``MIN_GOLD`` rows or covers every row; for weights that
    miss gold rows or are not positive numbers; and for a stratified ``gold_sample`` given
    without its weights."""
    if not isinstance(gold, pd.Series):
        raise ConfigError(
            "gold is a Series of true values indexed by the frame's index (the labelled rows),"
            f" e.g. sample['truth'] for sample = xl.gold_sample(frame, n); got"
            f" {type(gold).__name__}"
        )
    if not gold.index.is_unique:
        raise ConfigError("gold's index has duplicate labels: one gold label per row")
    if gold.isna().any():
        raise ConfigError(
            f"{int(gold.isna().sum())} gold labels are missing: leave the rows not labelled"
            " out (gold.dropna())"
        )
    foreign = gold.index.difference(frame.index)
    if len(foreign):
        raise ConfigError(
            f"gold has {len(foreign)} rows the frame does not have (index {preview(foreign)}):"
            " gold is indexed by the frame's own index (xl.gold_sample keeps it)"
        )
    if len(gold) < MIN_GOLD:
        raise ConfigError(
            f"only {len(gold)} gold labels: an interval needs at least {MIN_GOLD} (label more"
            " rows: xl.gold_sample(frame, n) draws them)"
        )
    if len(gold) >= len(frame):
        raise ConfigError(
            "every row of the frame has a gold label: nothing is left to estimate, the gold"
            " values are the answer (gold.value_counts(normalize=True), gold.mean())"
        )
    labelled = frame.index.isin(gold.index)
    truth = gold.loc[frame.index[labelled]]
    return GoldRows(labelled, truth, _weights(gold, weights, truth.index))


def _weights(gold: pd.Series, weights: Any, order: pd.Index) -> np.ndarray | None:
    sample = gold.attrs.get(SAMPLE_ATTR)
    if weights is None:
        if isinstance(sample, dict) and sample.get("by") is not None:
            raise ConfigError(
                f"gold comes from a sample stratified by {sample['by']!r}, whose rows stand for"
                f" different numbers of rows: pass weights=sample[{WEIGHT!r}]"
            )
        return None
    if not isinstance(weights, pd.Series):
        raise ConfigError(
            f"weights is a Series indexed like gold (sample[{WEIGHT!r}] of xl.gold_sample);"
            f" got {type(weights).__name__}"
        )
    missing = order.difference(weights.index)
    if len(missing):
        raise ConfigError(
            f"weights has no value for {len(missing)} gold rows (index {preview(missing)}):"
            f" pass the sample's {WEIGHT!r} column"
        )
    values = pd.to_numeric(weights.loc[order], errors="coerce").to_numpy(dtype=float)
    if not (np.isfinite(values).all() and (values > 0).all()):
        raise ConfigError(
            "weights must be positive numbers (how many rows each gold row stands for)"
        )
    return values

"""Prediction-powered inference of means (PPI++, power-tuned), in numpy alone.

A model labelled every row; a few rows also carry a gold (true) label. The mean of the truth
over the population is estimated as the model's mean over the unlabelled rows plus the mean
error of the model on the gold rows (the *rectifier*), the model's part scaled by a tuning
factor ``lam`` chosen from the data to make the interval narrowest (Angelopoulos, Duchi and
Zrnic, "PPI++: Efficient Prediction-Powered Inference", 2023). ``lam`` = 0 is the classical
interval of the gold rows alone; ``lam`` = 1 is the original PPI. The interval is the normal
one, its variance the sum of the two parts' variances: valid whatever the model's bias, for
gold rows drawn at random (or with known weights) from the same population.

Every function works column by column on 2-D arrays (one column per estimated quantity, e.g.
one per label for shares), each column with its own ``lam``, so many shares cost one pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

#: Fewer gold rows than this and the normal interval is not to be trusted.
MIN_GOLD = 20


@dataclass(frozen=True)
class Intervals:
    """Per column: the estimate, its interval's bounds and the ``lam`` used (arrays)."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    lam: np.ndarray

    @property
    def half_width(self) -> np.ndarray:
        return (self.high - self.low) / 2


def z_of(level: float) -> float:
    """The normal quantile of a two-sided interval at ``level`` (0.95 gives 1.96)."""
    return NormalDist().inv_cdf(1 - (1 - level) / 2)


def _columns(values: np.ndarray) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    return array[:, None] if array.ndim == 1 else array


def _normalised(weights: np.ndarray | None, rows: int) -> np.ndarray:
    """Weights scaled to sum to the number of rows (ones when None), as a column."""
    if weights is None:
        return np.ones((rows, 1))
    w = np.asarray(weights, dtype=float).reshape(-1, 1)
    return w / w.sum() * rows


def _point(
    y: np.ndarray,
    yhat: np.ndarray,
    yhat_u: np.ndarray,
    w: np.ndarray,
    w_u: np.ndarray,
    lam: float | np.ndarray,
) -> np.ndarray:
    """The estimate at ``lam``: the model's weighted mean on the unlabelled rows plus the
    mean of what the gold rows correct."""
    return (w_u * lam * yhat_u).mean(axis=0) + (w * (y - lam * yhat)).mean(axis=0)


def tuned_lam(
    y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray, w: np.ndarray, w_u: np.ndarray
) -> np.ndarray:
    """The ``lam`` in [0, 1] that minimises each column's variance: the covariance of the
    truth and the model on the gold rows over the model's variance on all rows, shrunk by
    ``1 + n/N`` (the gold rows' share of the data). A model that never varies has nothing
    to add: its ``lam`` is 0."""
    n, big_n = len(y), len(yhat_u)
    start = _point(y, yhat, yhat_u, w, w_u, 1.0)  # the plain PPI estimate, to centre on
    errors = w * (y - start)
    guesses = w * (yhat - start)
    guesses_u = w_u * (yhat_u - start)
    centred = errors - errors.mean(axis=0)
    centred_guesses = guesses - guesses.mean(axis=0)
    covariance = 2 * (centred * centred_guesses).sum(axis=0) / n
    variance = np.var(np.concatenate([guesses, guesses_u]), axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = covariance / (2 * (1 + n / big_n) * variance)
    return np.clip(np.where(variance > 0, lam, 0.0), 0.0, 1.0)


def ppi_means(
    y: np.ndarray,
    yhat: np.ndarray,
    yhat_unlabelled: np.ndarray,
    *,
    weights: np.ndarray | None = None,
    weights_unlabelled: np.ndarray | None = None,
    level: float = 0.95,
    lam: float | None = None,
) -> Intervals:
    """The PPI++ estimate of each column's mean with its interval at ``level``.

    ``y``: the truth on the gold rows; ``yhat``: the model on the same rows;
    ``yhat_unlabelled``: the model on the other rows (1-D, or one column per quantity).
    ``weights``: each gold row's inclusion weight (how many rows it stands for), likewise
    ``weights_unlabelled``; both are scaled to average 1. ``lam``: a fixed tuning factor
    (0: the gold rows alone; 1: plain PPI); None tunes it per column.
    """
    y, yhat, yhat_u = _columns(y), _columns(yhat), _columns(yhat_unlabelled)
    n, big_n = len(y), len(yhat_u)
    w, w_u = _normalised(weights, n), _normalised(weights_unlabelled, big_n)
    if lam is None:
        lams = tuned_lam(y, yhat, yhat_u, w, w_u)
    else:
        lams = np.full(y.shape[1], float(lam))
    estimate = _point(y, yhat, yhat_u, w, w_u, lams)
    model_part = (w_u * lams * yhat_u).std(axis=0) / np.sqrt(big_n)
    gold_part = (w * (y - lams * yhat)).std(axis=0) / np.sqrt(n)
    half = z_of(level) * np.sqrt(model_part**2 + gold_part**2)
    return Intervals(estimate, estimate - half, estimate + half, lams)


def gold_means(
    y: np.ndarray, *, weights: np.ndarray | None = None, level: float = 0.95
) -> Intervals:
    """The classical estimate of each column's mean from the gold rows alone (``lam`` = 0)."""
    y = _columns(y)
    nothing = np.zeros((1, y.shape[1]))
    return ppi_means(y, np.zeros_like(y), nothing, weights=weights, level=level, lam=0.0)


def worth(n_gold: int, gold_only: Intervals, ppi: Intervals) -> np.ndarray:
    """How many gold labels a gold-only interval would need to be as narrow as the PPI one:
    ``n_gold`` times the squared ratio of the two widths (nan when the PPI width is 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = gold_only.half_width / ppi.half_width
    return np.where(ppi.half_width > 0, n_gold * ratio**2, np.nan)

"""``xl.gold_sample``: the rows to label by hand, drawn so that estimates from them are valid.

A uniform sample gives every row the same chance. A stratified one (``by=`` a column, such
as the model's label) draws the same number of rows from each of its values, so a rare
label still gets gold rows; its rows then stand for different numbers of rows, which their
``sample_weight`` says (the stratum's rows over its sampled rows) and ``xl.shares`` /
``xl.mean`` take as ``weights=``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from x402lab.analysis.estimates_gold import SAMPLE_ATTR, WEIGHT
from x402lab.errors import ConfigError
from x402lab.tables.attrs import set_attrs


def gold_sample(
    frame: pd.DataFrame, n: int, *, seed: int | None = None, by: str | None = None
) -> pd.DataFrame:
    """Free: ``n`` rows of ``frame`` drawn at random to be labelled by hand (the same index,
    in the frame's order), with ``sample_weight``: how many of the frame's rows each stands
    for. The same ``seed`` draws the same rows.

    ``by``: a column to stratify on: ``n`` is shared out equally among its values (a value
    with fewer rows gives all of them, the others share what it leaves); a null is a value
    of its own. Pass ``weights=sample["sample_weight"]`` to ``xl.shares`` / ``xl.mean``.

    Raises ConfigError for ``n`` out of 1..len(frame), an unknown ``by``, fewer rows than
    values of ``by``, or a frame that already has a ``sample_weight`` column.
    """
    if not isinstance(frame, pd.DataFrame):
        raise ConfigError(f"gold_sample() takes a DataFrame, got {type(frame).__name__}")
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or not 0 < n <= len(frame):
        raise ConfigError(f"n is the number of rows to draw, 1 to {len(frame)}; got {n!r}")
    if WEIGHT in frame.columns:
        raise ConfigError(f"the frame already has a {WEIGHT!r} column: rename it first")
    rng = np.random.default_rng(seed)
    if by is None:
        positions = rng.choice(len(frame), size=int(n), replace=False)
        weight = np.full(int(n), len(frame) / int(n))
    else:
        positions, weight = _stratified(frame, int(n), by, rng)
    order = np.argsort(positions, kind="stable")
    sample = frame.iloc[positions[order]].copy()
    sample[WEIGHT] = weight[order]
    described = {"rows": len(frame), "n": int(n), "seed": seed, "by": by}
    return set_attrs(sample, **{SAMPLE_ATTR: described})


def _stratified(
    frame: pd.DataFrame, n: int, by: str, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    if by not in frame.columns:
        raise ConfigError(
            f"by={by!r} is no column of the frame; it has {', '.join(map(str, frame.columns))}"
        )
    groups: dict[Any, np.ndarray] = {
        key: np.asarray(rows)
        for key, rows in frame.groupby(by, dropna=False, sort=True).indices.items()
    }
    if n < len(groups):
        raise ConfigError(
            f"n={n} is fewer than the {len(groups)} values of {by!r}: every value needs at"
            " least one gold row"
        )
    counts = _equal_shares(n, {key: len(rows) for key, rows in groups.items()})
    positions, weights = [], []
    for key, rows in groups.items():
        chosen = rng.choice(rows, size=counts[key], replace=False)
        positions.append(chosen)
        weights.append(np.full(counts[key], len(rows) / counts[key]))
    return np.concatenate(positions), np.concatenate(weights)


def _equal_shares(n: int, sizes: dict[Any, int]) -> dict[Any, int]:
    """``n`` shared out as equally as the strata's sizes allow (the smallest strata first,
    each taking at most all its rows, the remainder going to the earliest keys)."""
    counts: dict[Any, int] = {}
    left, open_strata = n, sorted(sizes, key=lambda key: sizes[key])
    while open_strata:
        each, extra = divmod(left, len(open_strata))
        key = open_strata[0]
        if sizes[key] <= each:  # a small stratum gives all its rows
            counts[key] = sizes[key]
            left -= sizes[key]
            open_strata.pop(0)
            continue
        for i, key in enumerate(open_strata):
            counts[key] = each + (1 if i < extra else 0)
        break
    return counts

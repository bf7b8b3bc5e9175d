"""The figure of ``Estimates.plot()``: per value, the model-only figure against the PPI++ and
gold-only intervals, one row per value (drawn without pyplot, shown in Jupyter as a PNG)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from x402lab.analysis.plots import FAIR_COLOR, PADDING_COLOR, SETTLED_COLOR, ShownFigure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from x402lab.analysis.estimates_result import Estimates


def estimates_figure(estimates: Estimates) -> Figure:
    """Horizontal intervals, one row of three marks per quantity: the PPI++ estimate with its
    interval (filled), the gold-only one (hollow, below it) and the model-only figure (a
    cross, no interval)."""
    table = estimates.table
    name, measure = estimates.names
    height = max(2.4, 0.55 * len(table) + 1.4)
    figure = ShownFigure(figsize=(7.5, height), layout="constrained")
    axes = figure.add_subplot()
    level = f"{estimates.level:.0%}"
    axes.set_title(
        f"{measure.capitalize()} of {estimates.column!r}: {estimates.n_gold} gold labels,"
        f" {estimates.rows} rows",
        fontsize=11,
    )
    y = np.arange(len(table))[::-1].astype(float)
    ppi = table[measure].to_numpy(dtype=float)
    bars = np.clip(
        [ppi - table["low"].to_numpy(float), table["high"].to_numpy(float) - ppi], 0, None
    )
    axes.errorbar(ppi, y + 0.12, xerr=bars, fmt="o", color=SETTLED_COLOR, capsize=3,
                  label=f"PPI++ ({level} interval)")  # fmt: skip
    gold = table[f"gold_{measure}"].to_numpy(dtype=float)
    gold_bars = np.clip(
        [gold - table["gold_low"].to_numpy(float), table["gold_high"].to_numpy(float) - gold],
        0,
        None,
    )
    axes.errorbar(gold, y - 0.12, xerr=gold_bars, fmt="o", mfc="white", color=FAIR_COLOR,
                  capsize=3, label=f"gold labels only ({level})")  # fmt: skip
    model = table[f"model_{measure}"].to_numpy(dtype=float)
    axes.scatter(model, y, marker="x", s=50, color=PADDING_COLOR, zorder=3,
                 label="model's labels only (no interval)")  # fmt: skip
    axes.set_yticks(y, [str(v) for v in table[name]])
    axes.set_ylim(-0.7, len(table) - 0.3)
    axes.set_xlabel(measure)
    axes.grid(True, axis="x", alpha=0.3)
    figure.legend(loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    return figure

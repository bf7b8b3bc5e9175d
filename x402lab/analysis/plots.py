"""Figures of the cost report, drawn from its tables.

Figures are built with ``matplotlib.figure.Figure`` directly, never through pyplot: no global
figure registry, no GUI backend, so they draw under Agg, in threads and in notebooks alike.
An empty table gives a figure that says there is nothing to plot, never an error.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure

SIZE = (7.5, 3.6)
SETTLED_COLOR = "#2f6db5"
UNKNOWN_COLOR = "#d98b1f"
FAIR_COLOR = "#7aa874"
PADDING_COLOR = "#c4473d"
MAX_BARS = 15


def _figure(title: str, height: float | None = None) -> tuple[Figure, Axes]:
    figure = Figure(figsize=(SIZE[0], height or SIZE[1]), layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(title, fontsize=11)
    return figure, axes


def _empty(axes: Axes, message: str) -> None:
    axes.text(0.5, 0.5, message, ha="center", va="center", transform=axes.transAxes)
    axes.set_axis_off()


def _labels(frame: pd.DataFrame, columns: Iterable[str]) -> list[str]:
    def label(row: pd.Series) -> str:
        parts = [str(row[c]) for c in columns if c in row and pd.notna(row[c])]
        return " · ".join(parts).replace("/api/v1/", "") or "(none)"

    return [label(row) for _, row in frame.iterrows()]


def spend_over_time(timeline: pd.DataFrame) -> Figure:
    """Cumulative settled USD over time, one step line per service (and their sum)."""
    figure, axes = _figure("Settled spend over time")
    if len(timeline) == 0:
        _empty(axes, "no settled payments yet")
        return figure
    services = sorted(timeline["service"].unique())
    lines = [(str(s), timeline[timeline["service"] == s]) for s in services]
    if len(services) > 1:
        lines.insert(0, ("all services", timeline))
    first, last = timeline["ts"].iloc[0], timeline["ts"].iloc[-1]
    for label, rows in lines:
        # Every line runs from zero before the first payment to the last one of any service,
        # so where each ends is its total.
        times = [first, *rows["ts"], last]
        running = [0.0, *rows["amount_usd"].cumsum()]
        running.append(running[-1])
        style: dict[str, Any] = (
            {"color": "black", "linestyle": "--", "linewidth": 1} if label == "all services" else {}
        )
        axes.step(times, running, where="post", label=label, **style)
    locator = AutoDateLocator()
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    axes.set_ylabel("USD (cumulative)")
    axes.set_ylim(bottom=0)
    axes.legend(loc="upper left", fontsize=8)
    return figure


def spend_by_route(by_route: pd.DataFrame) -> Figure:
    """Settled USD per route and model, with unknown exposure stacked beside it."""
    shown = by_route[(by_route["settled_atomic"] > 0) | (by_route["unknown_atomic"] > 0)]
    shown = shown.sort_values("committed_atomic", ascending=True).tail(MAX_BARS)
    figure, axes = _figure("Spend by route and model", height=max(2.6, 0.45 * len(shown) + 1.2))
    if len(shown) == 0:
        _empty(axes, "no settled or unknown payments yet")
        return figure
    labels = _labels(shown, ("path", "model"))
    axes.barh(labels, shown["settled_usd"], color=SETTLED_COLOR, label="settled")
    if (shown["unknown_atomic"] > 0).any():
        axes.barh(
            labels,
            shown["unknown_usd"],
            left=shown["settled_usd"],
            color=UNKNOWN_COLOR,
            hatch="//",
            label="unknown (may have settled)",
        )
    axes.set_xlabel("USD")
    axes.tick_params(axis="y", labelsize=8)
    axes.legend(loc="lower right", fontsize=8)
    return figure


def unit_costs(costs: pd.DataFrame) -> Figure:
    """USD per 1k calls (ledger routes) and per 1k rows (batches)."""
    shown = costs[costs["usd_per_1k"].notna()].tail(MAX_BARS)
    figure, axes = _figure("Cost per 1k calls or rows", height=max(2.6, 0.45 * len(shown) + 1.2))
    if len(shown) == 0:
        _empty(axes, "no paid calls yet")
        return figure
    labels = [
        f"{label} (per 1k {unit}s)"
        for label, unit in zip(
            _labels(shown, ("batch", "path", "model")), shown["unit"], strict=True
        )
    ]
    colors = [SETTLED_COLOR if s == "ledger" else FAIR_COLOR for s in shown["source"]]
    axes.barh(labels, shown["usd_per_1k"], color=colors)
    axes.set_xlabel("USD per 1,000")
    axes.tick_params(axis="y", labelsize=8)
    return figure


def padding(table: pd.DataFrame) -> Figure:
    """Paid per route: the fair price (upstream × multiplier) and the minimum-charge padding."""
    shown = table[table["paid_atomic"] > 0].tail(MAX_BARS)
    figure, axes = _figure("Minimum-charge padding", height=max(2.6, 0.45 * len(shown) + 1.2))
    if len(shown) == 0:
        _empty(axes, "no priced gateway payments yet")
        return figure
    labels = _labels(shown, ("path", "model"))
    fair = shown["paid_atomic"] - shown["padding_atomic"]
    axes.barh(labels, fair / 1e6, color=FAIR_COLOR, label="upstream × multiplier")
    axes.barh(
        labels,
        shown["padding_usd"],
        left=fair / 1e6,
        color=PADDING_COLOR,
        label="padding up to the minimum",
    )
    axes.set_xlabel("USD paid")
    axes.tick_params(axis="y", labelsize=8)
    axes.legend(loc="lower right", fontsize=8)
    return figure


def drift(table: pd.DataFrame) -> Figure:
    """Quoted vs paid USD per batch (and report orders), with how many rows differ."""
    shown = table[table["compared"] > 0]
    figure, axes = _figure("Quoted vs paid")
    if len(shown) == 0:
        _empty(axes, "no quoted and paid rows to compare (pass batches=...)")
        return figure
    positions = list(range(len(shown)))
    width = 0.4
    axes.bar(
        [p - width / 2 for p in positions],
        shown["quoted_usd"],
        width,
        label="quoted",
        color=FAIR_COLOR,
    )
    axes.bar(
        [p + width / 2 for p in positions],
        shown["paid_usd"],
        width,
        label="paid",
        color=SETTLED_COLOR,
    )
    top = float(max(shown["quoted_usd"].max(), shown["paid_usd"].max()))
    for position, (_, row) in zip(positions, shown.iterrows(), strict=True):
        note = f"{row['drifted']} of {row['compared']} differ"
        if row["drift_atomic"]:
            note += f"\n{row['drift_usd']:+.6f} USD"
        axes.annotate(note, (position, top * 1.03), ha="center", va="bottom", fontsize=8)
    axes.set_ylim(0, top * 1.3 if top > 0 else 1)
    axes.set_xticks(positions, list(shown["source"]), fontsize=8)
    axes.set_ylabel("USD")
    axes.legend(fontsize=8, loc="upper right", ncols=2)
    return figure


def rates(table: pd.DataFrame) -> Figure:
    """Agent vs upstream rate per model from the price list, models used here highlighted.

    Token models are placed by their input rate per 1M tokens, unit-priced models (images,
    voices) by their unit price; the dotted line is agent = upstream.
    """
    upstream = table["upstream_input_usd_per_1m"].fillna(table["upstream_usd_per_unit"])
    agent = table["agent_input_usd_per_1m"].fillna(table["agent_usd_per_unit"])
    usable = (upstream > 0) & (agent > 0)
    figure, axes = _figure("Agent vs upstream rates (price list)")
    if not usable.any():
        _empty(axes, "no price list with rates")
        return figure
    tokens = table["upstream_input_usd_per_1m"].notna()
    groups = [
        (usable & tokens & ~table["used"], "per 1M input tokens", "o", "#999999", 14),
        (usable & ~tokens & ~table["used"], "per unit", "s", "#999999", 14),
        (usable & table["used"], "used here", "o", SETTLED_COLOR, 40),
    ]
    for mask, label, marker, color, size in groups:
        if mask.any():
            axes.scatter(
                upstream[mask],
                agent[mask],
                s=size,
                marker=marker,
                color=color,
                label=label,
                zorder=3 if color == SETTLED_COLOR else 2,
            )
    low, high = float(upstream[usable].min()), float(upstream[usable].max())
    axes.plot(
        [low, high],
        [low, high],
        color="black",
        linewidth=0.8,
        linestyle=":",
        label="agent = upstream",
    )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("upstream USD (per 1M input tokens, or per unit)")
    axes.set_ylabel("agent USD")
    axes.legend(fontsize=8)
    return figure


def png_bytes(figure: Figure, dpi: int = 110) -> bytes:
    """The figure as PNG bytes (drawn by Agg whatever the session's backend)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()

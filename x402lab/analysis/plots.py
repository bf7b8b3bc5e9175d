"""Figures of the cost report, drawn from its tables.

Figures are built with ``matplotlib.figure.Figure`` directly, never through pyplot: no global
figure registry, no GUI backend, so they draw under Agg, in threads and in notebooks alike.
An empty table gives a figure that says there is nothing to plot, never an error.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Iterable
from datetime import UTC, timedelta
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.dates import AutoDateLocator, DateFormatter
from matplotlib.figure import Figure

from x402lab.analysis.report_html import route_text

SIZE = (7.5, 3.6)
SETTLED_COLOR = "#2f6db5"
UNKNOWN_COLOR = "#d98b1f"
FAIR_COLOR = "#7aa874"
PADDING_COLOR = "#c4473d"
MAX_BARS = 15
LABEL_WIDTH = 26  # characters per line of a bar's label; two lines at most, then cut


class ShownFigure(Figure):
    """A matplotlib Figure that shows itself as a PNG in Jupyter with no ``%matplotlib``
    magic (a figure made without pyplot has no display hook otherwise, and prints as
    ``<Figure size ...>``); with the inline backend active, its hook draws it the same."""

    def _repr_png_(self) -> bytes:
        return png_bytes(self)


def _figure(title: str, height: float | None = None) -> tuple[Figure, Axes]:
    figure = ShownFigure(figsize=(SIZE[0], height or SIZE[1]), layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(title, fontsize=11)
    return figure, axes


def _bar_height(bars: int) -> float:
    """Figure height for ``bars`` horizontal bars with labels of up to three lines."""
    return max(2.6, 0.62 * bars + 1.3)


def _empty(axes: Axes, message: str) -> None:
    axes.text(0.5, 0.5, message, ha="center", va="center", transform=axes.transAxes)
    axes.set_axis_off()


def short_label(text: str, width: int = LABEL_WIDTH, lines: int = 2) -> str:
    """``text`` on at most ``lines`` lines of ``width`` characters, cut with an ellipsis
    (the report's tables keep the full name)."""
    wrapped = textwrap.wrap(text, width, break_on_hyphens=False) or [""]
    if len(wrapped) > lines:
        wrapped = wrapped[:lines]
        wrapped[-1] = wrapped[-1][: width - 1].rstrip() + "…"
    return "\n".join(line if len(line) <= width else line[: width - 1] + "…" for line in wrapped)


def _labels(frame: pd.DataFrame, columns: Iterable[str]) -> list[str]:
    """One bar label per row: the model (or batch) first, then the route, on two lines."""

    def label(row: pd.Series) -> str:
        parts = []
        for column in columns:
            value = row[column] if column in row else None
            if value is None or pd.isna(value):
                continue
            parts.append(route_text(value) if column == "path" else str(value))
        parts.reverse()  # the most specific name first: model, then route
        lines = [short_label(part, lines=1) for part in parts[:2]]
        return "\n".join(lines) or "(none)"

    return [label(row) for _, row in frame.iterrows()]


# Tick formats by the span shown: seconds for a few minutes, hours in a day, days in a few
# months, months beyond; the axis title names the day or year the ticks leave out.
_SPANS = (
    (timedelta(minutes=10), "%H:%M:%S"),
    (timedelta(days=1), "%H:%M"),
    (timedelta(days=4), "%d %b %H:%M"),
    (timedelta(days=150), "%d %b"),
)


def time_axis(axes: Axes, first: pd.Timestamp, last: pd.Timestamp) -> None:
    """A time x axis people read: UTC ticks in a format that fits the span, at most about
    seven of them, and a title saying the date (or year) the ticks do not repeat."""
    span = last - first
    if span < timedelta(seconds=30):
        # One payment, or a burst: show a minute around it rather than a zero-width axis.
        middle = first + span / 2
        first, last = middle - timedelta(seconds=30), middle + timedelta(seconds=30)
        span = last - first
        axes.set_xlim(first, last)
    fmt = next((f for limit, f in _SPANS if span <= limit), "%b %Y")
    if first.date() != last.date() and fmt.startswith("%H"):
        fmt = "%d %b " + fmt  # a few hours across midnight: the ticks say which day
    locator = AutoDateLocator(minticks=3, maxticks=7, tz=UTC)
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(DateFormatter(fmt, tz=UTC))
    if first.date() == last.date():
        title = f"Time (UTC) on {first:%d %b %Y}"
    elif first.year == last.year and "%Y" not in fmt:
        title = f"Date (UTC), {first:%Y}"
    else:
        title = "Date (UTC)"
    axes.set_xlabel(title)


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
        running = [0.0, *rows["amount_usd"].astype(float).cumsum()]  # a line, not money
        running.append(running[-1])
        style: dict[str, Any] = (
            {"color": "black", "linestyle": "--", "linewidth": 1} if label == "all services" else {}
        )
        axes.step(times, running, where="post", label=label, **style)
    time_axis(axes, first, last)
    axes.set_ylabel("Settled so far (USD)")
    axes.set_ylim(bottom=0)
    axes.legend(loc="upper left", fontsize=8)
    return figure


def spend_by_route(by_route: pd.DataFrame) -> Figure:
    """Settled USD per route and model, with unknown exposure stacked beside it."""
    shown = by_route[(by_route["settled_atomic"] > 0) | (by_route["unknown_atomic"] > 0)]
    shown = shown.sort_values("committed_atomic", ascending=True).tail(MAX_BARS)
    figure, axes = _figure("Spend by route and model", height=_bar_height(len(shown)))
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
    axes.set_xlabel("Spent (USD)")
    axes.tick_params(axis="y", labelsize=8)
    axes.legend(loc="lower right", fontsize=8)
    return figure


def unit_costs(costs: pd.DataFrame) -> Figure:
    """USD per 1k calls (ledger routes) and per 1k rows (batches), on two axes: a call and an
    input row are different units, so their bars are never compared on one scale."""
    shown = costs[costs["usd_per_1k"].notna()].tail(MAX_BARS)
    calls, rows = shown[shown["unit"] != "row"], shown[shown["unit"] == "row"]
    if len(calls) == 0 or len(rows) == 0:
        only = rows if len(rows) else calls
        what = "rows" if len(rows) else "calls"
        figure, axes = _figure(f"Cost per 1,000 {what}", height=_bar_height(len(only)))
        if len(only) == 0:
            _empty(axes, "no paid calls yet")
            return figure
        _unit_bars(axes, only, what)
        return figure
    height = _bar_height(len(calls)) + _bar_height(len(rows))
    figure = ShownFigure(figsize=(SIZE[0], height), layout="constrained")
    top, bottom = figure.subplots(2, 1, height_ratios=[len(calls), len(rows)])
    top.set_title("Cost per 1,000 calls (ledger) and per 1,000 rows (batches)", fontsize=11)
    _unit_bars(top, calls, "calls")
    _unit_bars(bottom, rows, "rows")
    return figure


def _unit_bars(axes: Axes, shown: pd.DataFrame, what: str) -> None:
    labels = [
        label + "\n" + short_label(f"{batch}" if isinstance(batch, str) else "ledger", lines=1)
        for label, batch in zip(_labels(shown, ("path", "model")), shown["batch"], strict=True)
    ]
    color = FAIR_COLOR if what == "rows" else SETTLED_COLOR
    axes.barh(labels, shown["usd_per_1k"], color=color)
    axes.set_xlabel(f"Cost of 1,000 {what} (USD)")
    axes.tick_params(axis="y", labelsize=8)


def padding(table: pd.DataFrame) -> Figure:
    """Paid per route: the fair price (upstream × multiplier) and the minimum-charge padding."""
    shown = table[table["paid_atomic"] > 0].tail(MAX_BARS)
    figure, axes = _figure("Minimum-charge padding", height=_bar_height(len(shown)))
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
    axes.set_xlabel("Paid (USD)")
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
    names = [short_label(str(source), width=18) for source in shown["source"]]
    axes.set_xticks(positions, names, fontsize=8)
    axes.set_ylabel("Amount (USD)")
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
    axes.set_xlabel("Upstream price (USD per 1M input tokens, or per unit)")
    axes.set_ylabel("Agent price (USD, same unit)")
    axes.legend(fontsize=8)
    return figure


def png_bytes(figure: Figure, dpi: int = 110) -> bytes:
    """The figure as PNG bytes (drawn by Agg whatever the session's backend)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def comparison(
    table: pd.DataFrame, *, measure: str = "agreement", target: float | None = None
) -> Figure:
    """Cost per 1,000 rows (log x) against ``measure`` (``agreement`` with the reference, or
    ``accuracy`` against gold labels), one labelled point per configuration (``lab.compare``)
    with its 95% interval when the table has ``<measure>_low``/``_high``. The configurations
    no other is both cheaper and better than (``frontier``) are filled and joined by a step
    line; the reference is a star; ``target`` is a dashed line. Labels are placed beside
    their points and moved apart until none overlaps another (checked with the renderer)."""
    what = "agreement with the reference" if measure == "agreement" else measure
    figure, axes = _figure(f"Cost against {what}", height=4.2)
    if table.empty:
        _empty(axes, "no configurations")
        return figure
    x = table["usd_per_1k_rows"].astype(float).clip(lower=1e-6).to_numpy()
    y = table[measure].astype(float).to_numpy()
    front = table["frontier"].to_numpy(dtype=bool)
    ref = (
        table["reference"].to_numpy(dtype=bool)
        if "reference" in table.columns
        else np.zeros(len(table), dtype=bool)
    )
    axes.set_xscale("log")
    axes.set_xlabel("USD per 1,000 rows (log scale)")
    axes.set_ylabel(what)
    low, high = float(np.nanmin(y)), float(np.nanmax(y))
    if f"{measure}_low" in table.columns:
        lows = table[f"{measure}_low"].astype(float).to_numpy()
        highs = table[f"{measure}_high"].astype(float).to_numpy()
        bars = np.clip([y - lows, highs - y], 0.0, None)  # rounding can leave -1e-17
        axes.errorbar(x, y, yerr=bars, fmt="none", ecolor="0.7", lw=0.8,
                      capsize=2, zorder=1, label="95% interval")  # fmt: skip
        low, high = float(np.nanmin(lows)), float(np.nanmax(highs))
    if target is not None:
        axes.axhline(target, color=PADDING_COLOR, lw=0.8, ls="--", zorder=0,
                     label=f"target {target:g}")  # fmt: skip
        low, high = min(low, target), max(high, target)
    order = np.argsort(x[front])
    axes.step(x[front][order], y[front][order], where="post", color=FAIR_COLOR, zorder=1,
              label=f"cheapest at its {measure}")  # fmt: skip
    axes.scatter(x[~front & ~ref], y[~front & ~ref], s=36, facecolors="white",
                 edgecolors=SETTLED_COLOR, zorder=2, label="configuration")  # fmt: skip
    axes.scatter(x[front & ~ref], y[front & ~ref], s=36, color=SETTLED_COLOR, zorder=3)
    if ref.any():
        axes.scatter(x[ref], y[ref], s=110, marker="*", color=UNKNOWN_COLOR, zorder=4,
                     label="reference")  # fmt: skip
    axes.set_ylim(max(-0.02, low - 0.1 * max(high - low, 0.05)), min(1.05, high + 0.08))
    axes.set_xlim(x.min() / 2.5, x.max() * 4)
    axes.legend(loc="lower right", fontsize=8, frameon=False)
    axes.grid(True, which="major", alpha=0.3)
    labels = [
        f"{model} ×{int(n)}"
        for model, n in zip(table["model"], table["rows_per_request"], strict=True)
    ]
    _place_labels(figure, axes, x, y, labels)
    return figure


def _place_labels(
    figure: Figure, axes: Axes, x: np.ndarray, y: np.ndarray, labels: list[str]
) -> None:
    """Annotate each point, then move labels (up or down by a step, alternating) until no
    label's box overlaps an earlier one's or the legend; a moved label gets a leader line."""
    texts = [
        axes.annotate(label, (xi, yi), xytext=(7, 4), textcoords="offset points", fontsize=8)
        for label, xi, yi in zip(labels, x, y, strict=True)
    ]
    for text in texts:
        text.set_in_layout(False)  # the layout is fixed first; labels then move within it
    canvas = FigureCanvasAgg(figure)
    figure.draw_without_rendering()
    renderer = canvas.get_renderer()
    legend = axes.get_legend()
    placed: list[Any] = [legend.get_window_extent(renderer)] if legend else []
    steps = [0, 11, -11, 22, -22, 33, -33, 44, -44, 55, -55]
    for text in sorted(texts, key=lambda t: (t.xy[1], t.xy[0])):
        for dy in steps:
            text.set_position((7, 4 + dy))
            box = text.get_window_extent(renderer).expanded(1.02, 1.1)
            if not any(box.overlaps(other) for other in placed):
                break
        if dy:  # a label moved off its point says which point it names
            axes.annotate(
                "", text.xy, xytext=(7, 4 + dy + (3 if dy > 0 else 8)),
                textcoords="offset points",
                arrowprops={"arrowstyle": "-", "color": "0.6", "lw": 0.6, "shrinkB": 3},
            )  # fmt: skip
        placed.append(text.get_window_extent(renderer))

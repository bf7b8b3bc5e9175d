"""The cost report as HTML for people: key figures first, labelled tables that scroll.

The report's tables keep their declared columns (``settled_atomic``, ``usd_per_1k``...) for
code and Parquet; what a reader sees here is a chosen set of those columns under plain
headings ("Settled (USD)"), amounts in USD, times in UTC written out, and long names cut
with the full text kept in the cell's tooltip. Every table sits in a box that scrolls with
its header row kept in view, so nothing is cut off.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd

from x402lab.money import ATOMIC_PER_USD, format_usd

# Shown inline as well as in the stylesheet: a notebook viewer that drops <style> still
# scrolls the box and keeps the header row in view.
SCROLL_STYLE = "max-height:24em;overflow:auto;max-width:100%;border:1px solid #ddd"
HEAD_STYLE = "position:sticky;top:0;z-index:1;background:#f3f4f6"
NAME_WIDTH = 32  # characters of a name shown in a cell before it is cut (full text on hover)
MAX_ROWS = 1000  # rows written into one table's box

CSS = (
    ".x402-report{font-family:system-ui,sans-serif;max-width:72em;margin:1em auto;color:#222}"
    ".x402-report img{max-width:100%;height:auto}"
    ".x402-report h3{margin:1.6em 0 .3em}"
    ".x402-report p.about{color:#555;font-size:13px;margin:.2em 0 .6em}"
    ".x402-report .figures{display:grid;grid-template-columns:repeat(auto-fit,minmax(11em,1fr));"
    "gap:.6em;margin:.8em 0 1.2em}"
    ".x402-report .figure{border:1px solid #ddd;border-radius:6px;padding:.5em .7em}"
    ".x402-report .figure .label{font-size:12px;color:#555}"
    ".x402-report .figure .value{font-size:18px;font-weight:600;margin:.1em 0}"
    ".x402-report .figure .detail{font-size:12px;color:#555}"
    f".x402-report .scroll{{{SCROLL_STYLE};margin-bottom:1em}}"
    ".x402-report table{border-collapse:collapse;font-size:12px}"
    ".x402-report td,.x402-report th{border-bottom:1px solid #e5e7eb;padding:3px 8px;"
    "white-space:nowrap;text-align:right}"
    f".x402-report thead th{{{HEAD_STYLE}}}"
    ".x402-report td.text,.x402-report th.text{text-align:left}"
    ".x402-report ul.notes{font-size:13px;color:#555}"
)


def usd_text(value: float | None, digits: int = 6) -> str:
    """USD for reading: up to ``digits`` decimals, trailing zeros trimmed to two."""
    if value is None or pd.isna(value):
        return "—"
    text = f"{float(value):,.{digits}f}".rstrip("0")
    whole, _, frac = text.partition(".")
    return f"{whole}.{frac.ljust(2, '0')}"


def _count(value: Any) -> str:
    return "—" if value is None or pd.isna(value) else f"{int(value):,}"


def _atomic_usd(value: Any) -> str:
    return "—" if value is None or pd.isna(value) else usd_text(int(value) / ATOMIC_PER_USD)


def _ratio(value: Any) -> str:
    return "—" if value is None or pd.isna(value) else f"{float(value):.3g}×"


def _yes(value: Any) -> str:
    return "yes" if bool(value) else ""


def when_text(value: Any) -> str:
    """A UTC time for reading: ``23 Nov 2026 22:05:31``."""
    if value is None or pd.isna(value):
        return "—"
    return pd.Timestamp(value).strftime("%d %b %Y %H:%M:%S")


def _day(value: Any) -> str:
    return "—" if value is None or pd.isna(value) else pd.Timestamp(value).strftime("%d %b %Y")


def route_text(path: Any) -> str:
    """A gateway path without its ``/api/v1/`` prefix (the route's name)."""
    if path is None or pd.isna(path):
        return "—"
    return re.sub(r"^/api/(v1/)?", "", str(path).split("?", 1)[0])


def unit_text(unit: Any) -> str:
    """A price-list unit for reading: ``usd_per_1m_tokens`` -> ``per 1M tokens``."""
    if unit is None or pd.isna(unit):
        return "—"
    words = str(unit).removeprefix("usd_").replace("_", " ")
    return re.sub(r"\b1m\b", "1M", re.sub(r"\b1k\b", "1k", words))


def _text(value: Any) -> str:
    return "—" if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)


@dataclass(frozen=True)
class Column:
    """One column as a reader sees it: the table's column, its heading and how to write it."""

    name: str
    label: str
    show: Callable[[Any], str] = _count
    text: bool = False  # a name: left-aligned, cut to NAME_WIDTH with the full text on hover
    cut: bool = True  # False: prose, shown whole


def _name(name: str, label: str, show: Callable[[Any], str] = _text) -> Column:
    return Column(name, label, show, text=True)


def _usd(name: str, label: str) -> Column:
    return Column(name, label, usd_text)


def _money(name: str, label: str) -> Column:
    return Column(name, label, _atomic_usd)


SPEND_COLUMNS = (
    Column("payments", "Payments"),
    Column("settled_count", "Settled"),
    _usd("settled_usd", "Settled (USD)"),
    Column("unknown_count", "Unknown"),
    _usd("unknown_usd", "Unknown (USD)"),
    Column("in_flight_count", "In flight"),
    _usd("held_usd", "Held (USD)"),
    _usd("committed_usd", "Committed (USD)"),
    Column("refused_count", "Refused"),
    Column("rejected_count", "Rejected"),
    Column("failed_count", "Failed"),
    _usd("lost_usd", "Paid, answer lost (USD)"),
)
ROUTE = _name("path", "Route", route_text)
MODEL = _name("model", "Model")
SERVICE = _name("service", "Service")

# What each table of the report shows, in order; a table not listed here is not drawn.
DISPLAY: Mapping[str, tuple[Column, ...]] = {
    "totals": SPEND_COLUMNS,
    "budgets": (
        _name("budget", "Budget"),
        _usd("cap_usd", "Cap (USD)"),
        _usd("settled_usd", "Spent (USD)"),
        _usd("held_usd", "Held (USD)"),
        _usd("unknown_usd", "Unknown (USD)"),
        _usd("committed_usd", "Committed (USD)"),
        _usd("left_usd", "Left (USD)"),
        _usd("burn_usd_per_day", "Burn (USD per day)"),
        _name("runs_out", "Cap runs out (UTC)", _day),
        _usd("lost_usd", "Paid, answer lost (USD)"),
    ),
    "by_user": (_name("user", "User"), _name("payer", "Payer"), *SPEND_COLUMNS),
    "by_day": (_name("day", "Day (UTC)", _day), SERVICE, *SPEND_COLUMNS),
    "by_route": (SERVICE, ROUTE, MODEL, *SPEND_COLUMNS),
    "unit_costs": (
        _name("source", "From"),
        _name("batch", "Batch"),
        ROUTE,
        MODEL,
        Column("units", "Units"),
        _name("unit", "Unit"),
        _usd("paid_usd", "Paid (USD)"),
        _usd("cost_usd", "Cost (USD)"),
        _usd("usd_per_unit", "Per unit (USD)"),
        _usd("usd_per_1k", "Per 1,000 (USD)"),
    ),
    "batch_status": (
        _name("batch", "Batch"),
        Column("rows", "Rows"),
        Column("ok_rows", "Answered"),
        Column("cached_rows", "Cached"),
        Column("skipped_rows", "Skipped"),
        Column("refused_rows", "Refused"),
        Column("failed_rows", "Failed"),
        Column("lost_rows", "Lost"),
        Column("other_rows", "Other"),
        _usd("paid_usd", "Paid by this run (USD)"),
        _usd("cost_usd", "Answers cost (USD)"),
        _usd("earlier_usd", "Of which an earlier run paid (USD)"),
        _usd("counted_usd", "Counted once (USD)"),
        _usd("lost_usd", "Paid, answer lost (USD)"),
    ),
    "drift": (
        _name("source", "What"),
        ROUTE,
        MODEL,
        Column("compared", "Compared"),
        Column("drifted", "Differ"),
        _usd("quoted_usd", "Quoted (USD)"),
        _usd("paid_usd", "Paid (USD)"),
        _usd("drift_usd", "Paid − quoted (USD)"),
    ),
    "padding": (
        ROUTE,
        MODEL,
        Column("calls", "Calls"),
        Column("padded_calls", "At the minimum"),
        Column("estimated_calls", "No 402 seen: estimated"),
        Column("unpriced_calls", "No 402 seen: unpriced"),
        _money("paid_atomic", "Paid (USD)"),
        _money("fair_atomic", "Upstream × multiplier (USD)"),
        _money("padding_atomic", "Padding (USD)"),
        _money("min_charge_atomic", "Minimum charge (USD)"),
        Column("inputs_per_call", "Inputs per call to pass it"),
        _money("packing_saves_atomic", "Packing would save (USD)"),
    ),
    "savings": (
        _name("source", "From"),
        Column("items", "Items"),
        _usd("saved_usd", "Saved (USD)"),
        Column("unpriced_items", "Unpriced items"),
        Column("note", "Note", _text, text=True, cut=False),
    ),
    "rates": (
        _name("family", "Family"),
        MODEL,
        _name("unit", "Priced", unit_text),
        _usd("upstream_input_usd_per_1m", "Upstream input (USD per 1M)"),
        _usd("upstream_output_usd_per_1m", "Upstream output (USD per 1M)"),
        _usd("agent_input_usd_per_1m", "Agent input (USD per 1M)"),
        _usd("agent_output_usd_per_1m", "Agent output (USD per 1M)"),
        _usd("upstream_usd_per_unit", "Upstream (USD per unit)"),
        _usd("agent_usd_per_unit", "Agent (USD per unit)"),
        Column("agent_over_upstream", "Agent ÷ upstream", _ratio),
        Column("used", "Used here", _yes),
        _money("settled_atomic", "Settled here (USD)"),
    ),
    "outcomes": (
        _name("status", "Status"),
        _name("resolved_by", "Resolved by"),
        Column("payments", "Payments"),
        _usd("amount_usd", "Amount (USD)"),
        Column("resent", "Sent again"),
        Column("resends", "Re-sends"),
        _name("first_expiry", "First expiry (UTC)", when_text),
    ),
    "timeline": (
        _name("ts", "Time (UTC)", when_text),
        SERVICE,
        ROUTE,
        MODEL,
        _name("budget", "Budget"),
        _usd("amount_usd", "Amount (USD)"),
        _usd("cumulative_usd", "Running total (USD)"),
    ),
}


def _cell(column: Column, value: Any) -> str:
    shown = column.show(value)
    if not column.text:
        return f"<td>{html.escape(shown)}</td>"
    if len(shown) <= NAME_WIDTH or not column.cut:
        return f"<td class='text'>{html.escape(shown)}</td>"
    cut = shown[: NAME_WIDTH - 1].rstrip() + "…"
    return f"<td class='text' title='{html.escape(shown, quote=True)}'>{html.escape(cut)}</td>"


def table_html(name: str, table: pd.DataFrame, where: str) -> str:
    """One report table for reading, in a box that scrolls (header row kept in view).

    ``where``: how to reach the full table from code, said when rows are left out.
    """
    columns = [c for c in DISPLAY[name] if c.name in table.columns]
    if len(table) == 0:
        return "<p class='about'><em>Nothing here yet.</em></p>"
    head = "".join(
        f"<th class='{'text' if c.text else 'num'}' style='{HEAD_STYLE}'>"
        f"{html.escape(c.label)}</th>"
        for c in columns
    )
    shown = table.head(MAX_ROWS)
    body = "".join(
        "<tr>" + "".join(_cell(c, row[c.name]) for c in columns) + "</tr>"
        for _, row in shown.iterrows()
    )
    text = (
        f"<div class='scroll' style='{SCROLL_STYLE}'><table><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table></div>"
    )
    if len(table) > MAX_ROWS:
        text += (
            f"<p class='about'>The first {MAX_ROWS:,} of {len(table):,} rows; all of them are in"
            f" <code>{html.escape(where)}</code>.</p>"
        )
    return text


@dataclass(frozen=True)
class KeyFigure:
    label: str
    value: str
    detail: str = ""


def _period(first: datetime | None, last: datetime | None) -> KeyFigure:
    if first is None or last is None:
        return KeyFigure("Period", "—", "no payments yet")
    start, end = pd.Timestamp(first), pd.Timestamp(last)
    if start.date() == end.date():
        value = start.strftime("%d %b %Y")
        clock = "%H:%M:%S" if end - start < pd.Timedelta(hours=1) else "%H:%M"
        detail = f"{start.strftime(clock)}–{end.strftime(clock)} UTC"
    else:
        value = f"{start:%d %b} – {end:%d %b %Y}"
        days = (end.normalize() - start.normalize()).days + 1
        detail = f"{days} days, UTC"
    return KeyFigure("Period", value, detail)


def _top(by_route: pd.DataFrame, settled: int) -> KeyFigure:
    paid = by_route[by_route["settled_atomic"] > 0]
    if len(paid) == 0:
        return KeyFigure("Top route", "—", "nothing settled yet")
    top = paid.sort_values("settled_atomic", ascending=False, kind="stable").iloc[0]
    model = top["model"] if isinstance(top["model"], str) else None
    share = 100 * int(top["settled_atomic"]) / settled if settled else 0
    return KeyFigure(
        "Top model" if model else "Top route",
        model or route_text(top["path"]),
        f"{format_usd(int(top['settled_atomic']))} ({share:.0f}%)"
        + (f" on {route_text(top['path'])}" if model else ""),
    )


def key_figures(
    tables: Mapping[str, pd.DataFrame], first: datetime | None, last: datetime | None
) -> list[KeyFigure]:
    """The few figures a reader needs first: spent, payments, settled / unknown / held,
    period and the route or model that cost the most."""
    totals = tables["totals"]

    def total(column: str) -> int:
        return int(totals[column].iloc[0]) if len(totals) else 0

    settled = total("settled_atomic")
    return [
        KeyFigure("Total spent", format_usd(settled), "settled payments"),
        KeyFigure(
            "Payments",
            f"{total('settled_count'):,} settled",
            f"of {total('payments'):,} ledger rows",
        ),
        KeyFigure(
            "Settled / unknown / held",
            f"{total('settled_count'):,} / {total('unknown_count'):,} / {total('held_count'):,}",
            f"unknown {format_usd(total('unknown_atomic'))}, held"
            f" {format_usd(total('held_atomic'))}",
        ),
        KeyFigure(
            "Paid, answer lost",
            format_usd(total("lost_atomic")),
            f"{total('lost_count'):,} settled payments whose answer was never stored",
        ),
        _period(first, last),
        _top(tables["by_route"], settled),
        *_batch_figures(tables.get("batch_status")),
    ]


def _batch_figures(status: pd.DataFrame | None) -> list[KeyFigure]:
    """What the batches passed cost (each answer once) beside what these runs paid."""
    if status is None or len(status) == 0:
        return []
    counted = int(status["counted_atomic"].sum())
    paid = int(status["paid_atomic"].sum())
    return [
        KeyFigure(
            "Batches' answers cost",
            format_usd(counted),
            f"each once; these runs paid {format_usd(paid)}",
        )
    ]


def figures_html(figures: list[KeyFigure]) -> str:
    cards = "".join(
        "<div class='figure'>"
        f"<div class='label'>{html.escape(f.label)}</div>"
        f"<div class='value'>{html.escape(f.value)}</div>"
        f"<div class='detail'>{html.escape(f.detail)}</div></div>"
        for f in figures
    )
    return f"<div class='figures'>{cards}</div>"

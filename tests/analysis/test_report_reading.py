"""The cost report reads well: key figures first, plain headings instead of wire or column
names, tables that scroll with their header in view, figures with labelled axes (a time axis
that fits spans from minutes to months) and no overlapping or cut-off labels."""

from __future__ import annotations

import html as htmllib
import itertools
import re
from datetime import UTC, datetime, timedelta

import matplotlib
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from x402lab.analysis import plots
from x402lab.analysis.report_html import NAME_WIDTH, table_html
from x402lab.money import format_usd

matplotlib.use("Agg")

SNAKE = re.compile(r"\b[a-z][a-z0-9]*_[a-z0-9_]+\b")  # settled_atomic, usd_per_1k
CAMEL = re.compile(r"\b[a-z]+[A-Z][A-Za-z]*\b")  # chargedUsd, upstreamUsd
# The unit each figure's numeric axes name in their titles (x, y); None: an axis of names.
AXIS_UNITS = {
    "spend_over_time": ("UTC", "USD"),
    "by_route": ("USD", None),
    "unit_costs": ("USD", None),
    "padding": ("USD", None),
    "drift": (None, "USD"),
    "rates": ("USD", "USD"),
}
SPANS = [
    timedelta(seconds=90),
    timedelta(hours=3),
    timedelta(days=2),
    timedelta(days=45),
    timedelta(days=400),
]


@pytest.fixture(scope="module")
def report(workload):
    prompts = ["What is a ledger?", "What is a budget?", "What is a ledger?"]
    rows = workload.lab.batch_chat(prompts, model=workload.text_model, max_tokens=8, progress=None)
    return workload.lab.cost_report(batches={"chats": rows}, purchases=workload.purchases)


# The report's two pages, drawn once for the module: each draws every figure to PNG, and
# the tests below only read them.
@pytest.fixture(scope="module")
def saved_page(report, tmp_path_factory) -> str:
    """The page ``report.to_html(..., embed=True)`` writes."""
    return report.to_html(tmp_path_factory.mktemp("page"), embed=True).read_text()


@pytest.fixture(scope="module")
def notebook_page(report) -> str:
    """The HTML a notebook shows for the report."""
    return report._repr_html_()


def visible_text(page: str) -> str:
    """What a reader sees: no stylesheet, no code samples, no tags or attributes."""
    page = re.sub(r"<style>.*?</style>", " ", page, flags=re.S)
    page = re.sub(r"<code>.*?</code>", " ", page, flags=re.S)
    return htmllib.unescape(re.sub(r"<[^>]+>", " ", page))


def test_the_page_starts_with_the_key_figures(report, saved_page):
    page = saved_page
    top = visible_text(page[: page.index("<h3>")])
    table = report.tables["totals"]
    totals = {column: int(table[column].iloc[0]) for column in table if "usd" not in column}
    expected = [
        "Total spent",
        format_usd(report.settled_atomic),
        "Payments",
        f"{totals['settled_count']} settled",
        f"of {totals['payments']} ledger rows",
        "Settled / unknown / held",
        f"{totals['settled_count']} / {totals['unknown_count']} / {totals['held_count']}",
        f"unknown {format_usd(report.unknown_atomic)}",
        "Period",
        f"{report.first_payment:%d %b %Y}",
        "Top model",
    ]
    for text in expected:
        assert text in top, text
    # The top model is the one the most was settled on.
    by_route = report.tables["by_route"]
    top_model = by_route.sort_values("settled_atomic").iloc[-1]["model"]
    assert top_model in top
    assert top.index("Total spent") < top.index("Period") < top.index("Top model")


def test_no_wire_or_column_names_in_what_a_reader_sees(report, saved_page, notebook_page):
    for page in (saved_page, notebook_page):
        text = visible_text(page)
        assert not SNAKE.findall(text)
        assert not CAMEL.findall(text)
        for name in ("chargedUsd", "amount_atomic", "settled_atomic", "usd_per_1k"):
            assert name not in text
        for heading in ("Settled (USD)", "Committed (USD)", "Per 1,000 (USD)", "Time (UTC)"):
            assert heading in text
    # The column names stay where code reads them: the tables and their Parquet files.
    assert "settled_atomic" in report.tables["totals"].columns


def test_every_table_scrolls_with_its_header_in_view(report, notebook_page):
    page = notebook_page
    tables = re.findall(r"<div class='scroll' style='([^']*)'><table>", page)
    assert len(tables) == page.count("<table>") >= 8
    for style in tables:
        assert "overflow:auto" in style and "max-height" in style
    headers = re.findall(r"<th [^>]*style='([^']*)'", page)
    assert headers and all("position:sticky" in style for style in headers)
    # Every row is written into its box (the box scrolls; nothing is cut at 50 rows).
    rates = report.tables["rates"]
    assert len(rates) > 20
    section = page[page.index("Agent vs upstream rates") :]
    section = section[: section.index("</table>")]
    assert section.count("<tr>") == len(rates) + 1


def test_long_names_are_cut_with_the_full_name_kept():
    model = "an-extremely-long-model-name-from-some-provider-v2-large-instruct"
    frame = pd.DataFrame(
        {"service": ["gateway"], "path": ["/api/v1/chat/completions"], "model": [model]}
    )
    cell = table_html("by_route", frame, 'report.tables["by_route"]')
    assert f"title='{model}'" in cell
    shown = re.search(r"title='[^']*'>([^<]*)<", cell)
    assert shown is not None
    assert shown.group(1).endswith("…") and len(shown.group(1)) <= NAME_WIDTH
    assert ">chat/completions<" in cell  # the route's name, not its wire path
    label = plots.short_label(model)
    assert len(label.splitlines()) <= 2 and label.endswith("…")
    assert all(len(line) <= plots.LABEL_WIDTH for line in label.splitlines())


def drawn(figure: Figure):
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return canvas.get_renderer()


def tick_labels(axis, renderer):
    """The tick labels drawn: visible, not empty, at a tick inside the axis' view."""
    low, high = sorted(axis.get_view_interval())
    slack = (high - low) * 1e-9
    return [
        (label.get_text(), label.get_window_extent(renderer))
        for where, label in zip(axis.get_majorticklocs(), axis.get_majorticklabels(), strict=True)
        if label.get_visible() and label.get_text() and low - slack <= where <= high + slack
    ]


def assert_readable(figure: Figure, name: str) -> None:
    """Axis titles with units on numeric axes; tick labels that neither overlap nor leave
    the figure; titles and legends inside the figure."""
    renderer = drawn(figure)
    frame = figure.bbox
    for axes in figure.axes:
        if not axes.axison:
            continue  # an empty table's figure: a message, no axes
        for axis, unit in zip((axes.xaxis, axes.yaxis), AXIS_UNITS[name], strict=True):
            if unit is not None:
                title = axis.get_label().get_text()
                assert f"({unit}" in title or f"{unit})" in title, (name, title)
        texts = [axes.title, axes.xaxis.label, axes.yaxis.label]
        legend = axes.get_legend()
        for axis in (axes.xaxis, axes.yaxis):
            labels = tick_labels(axis, renderer)
            for (a, box_a), (b, box_b) in itertools.combinations(labels, 2):
                assert not box_a.shrunk(0.98, 0.98).overlaps(box_b), (name, a, b)
            for text, box in labels:
                assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1, (name, text)
                assert frame.y0 - 1 <= box.y0 and box.y1 <= frame.y1 + 1, (name, text)
        boxes = [t.get_window_extent(renderer) for t in texts if t.get_text()]
        if legend is not None:
            boxes.append(legend.get_window_extent(renderer))
        for box in boxes:
            assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1, name
            assert frame.y0 - 1 <= box.y0 and box.y1 <= frame.y1 + 1, name


def test_figures_have_labelled_axes_and_no_overlapping_labels(report):
    assert set(report.figures) >= {"spend_over_time", "by_route", "drift", "padding", "rates"}
    for name, figure in report.figures.items():
        assert_readable(figure, name)
    # The drift figure names each source on the x axis without overlap, however long.
    sources = set(report.tables["drift"]["source"])
    assert {"music jobs (quote vs queue)", "report orders (charged vs paid)"} <= sources


def timeline(span: timedelta, payments: int = 40) -> pd.DataFrame:
    start = datetime(2026, 3, 30, 22, 15, tzinfo=UTC)
    step = span / max(payments - 1, 1)
    return pd.DataFrame(
        {
            "ts": [start + i * step for i in range(payments)],
            "service": ["gateway" if i % 3 else "reports" for i in range(payments)],
            "amount_usd": [0.01] * payments,
        }
    )


@pytest.mark.parametrize("span", SPANS, ids=lambda span: f"{span.total_seconds():.0f}s")
def test_the_time_axis_reads_at_every_span(span):
    figure = plots.spend_over_time(timeline(span))
    assert_readable(figure, "spend_over_time")
    renderer = drawn(figure)
    [axes] = figure.axes
    labels = [text for text, _ in tick_labels(axes.xaxis, renderer)]
    assert 3 <= len(labels) <= 8, labels
    # Dates and times as people write them, never offsets from a hidden origin ("33").
    date_or_time = re.compile(r"\d{2}:\d{2}|[A-Z][a-z]{2}")
    assert all(date_or_time.search(label) for label in labels), labels
    assert axes.xaxis.get_offset_text().get_text() == ""
    title = axes.get_xlabel()
    assert "UTC" in title
    # Each tick's day is said: in the title when they share one, else in every label.
    month = re.compile(r"[A-Z][a-z]{2}")
    assert "30 Mar 2026" in title or all(month.search(label) for label in labels), labels
    if span < timedelta(minutes=10):
        assert "30 Mar 2026" in title  # the ticks show times of that day


def test_one_payment_still_has_a_readable_time_axis():
    figure = plots.spend_over_time(timeline(timedelta(0), payments=1))
    assert_readable(figure, "spend_over_time")


def test_calls_and_rows_are_drawn_on_separate_axes():
    costs = pd.DataFrame(
        {
            "source": ["ledger", "ledger", "batch", "batch"],
            "batch": [None, None, "first run", "re-run"],
            "path": ["/api/v1/chat/completions", "/api/v1/embeddings"] * 2,
            "model": ["zai-org-glm-4.7-flash", "text-embedding-3-small"] * 2,
            "unit": ["call", "call", "row", "row"],
            "usd_per_1k": [10.0, 10.0, 0.04, 0.04],
        }
    )
    figure = plots.unit_costs(costs)
    calls, rows = figure.axes
    assert "calls" in calls.xaxis.get_label().get_text()
    assert "rows" in rows.xaxis.get_label().get_text()
    assert len(calls.patches) == len(rows.patches) == 2
    # Each axis has its own scale: the cheap rows are not flattened by the calls' bars.
    assert rows.get_xlim()[1] < 1 < calls.get_xlim()[1]
    assert_readable(figure, "unit_costs")

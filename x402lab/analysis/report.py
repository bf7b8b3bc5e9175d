"""The cost report: tables and figures of what was spent, and where it can be saved.

``build_report`` is pure: ledger rows (plus optional batch results, a price list and the
report library) in, a ``CostReport`` out. The report shows itself in Jupyter, writes an HTML
page with its figures (``to_html``), one Parquet file per table (``to_parquet``) or both
(``save``).
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa

from x402lab.analysis import batches as batch_tables
from x402lab.analysis import budgets, plots, pricing, report_html, spend
from x402lab.analysis import jobs as job_tables
from x402lab.analysis import library as report_library
from x402lab.analysis.outcomes import payment_outcomes
from x402lab.money import format_usd
from x402lab.private import open_private, private_folder, write_private
from x402lab.tables import spend as schemas

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class Section:
    """One part of the report: a table, its figure (if any) and what it says."""

    table: str
    title: str
    about: str
    figure: str | None = None


SECTIONS = (
    Section(
        "totals",
        "Totals by status",
        "Every ledger row, counted once. Settled is money spent; unknown is exposure (a signed "
        "payment left and no answer came back, so it may have settled); held is a signed "
        "payment the server refused, counted until its authorization expires; committed is "
        "what budget caps count (settled + unknown + in flight + held). Paid, answer lost: "
        "settled payments whose answer was never stored (part of settled; a batch shows "
        "their rows as paid but not stored, and buys exactly them again when asked to).",
    ),
    Section(
        "budgets",
        "Budgets: cap, spent, held, left and forecast",
        "Per budget: its stored cap, what was spent (settled), held and committed, what is "
        "left under the cap, the burn rate (settled per day over the last 7 days, at least one "
        "day) and the day the cap runs out at that rate.",
    ),
    Section(
        "by_user",
        "Spend by user and payer",
        "Who spent: the ledger's user label of each payment and the address that paid.",
    ),
    Section(
        "by_day",
        "Spend over time",
        "The figure: the running total of settled payments, per service. The table: per UTC "
        "day and service.",
        "spend_over_time",
    ),
    Section(
        "by_route",
        "Spend by route and model",
        "Per service, route and model; the longest names are cut in the figure and in full "
        "in the table (hover a cut name to read it).",
        "by_route",
    ),
    Section(
        "unit_costs",
        "Cost per call, per row, per 1,000",
        "Calls (ledger rows): the mean price of one settled call per route and model. Rows "
        "(batches): what the answered rows cost (their share, whichever run paid them, so a "
        "re-run shows the same as the run that paid), per row and per 1,000 rows. Calls and "
        "rows are drawn on separate axes.",
        "unit_costs",
    ),
    Section(
        "batch_status",
        "Batch rows by status, paid and cost",
        "One line per batch passed to the report. Paid: what that run paid. Cost: what its "
        "rows' answers cost, whichever run bought them (from an earlier run: the part an "
        "earlier run paid). Counted once: each paid request's answers counted in one batch "
        "only, so a re-run listed beside its first run adds nothing; its sum is what the "
        "batches' answers cost. Lost: paid by an earlier run, answer never stored.",
    ),
    Section(
        "drift",
        "Quoted vs paid",
        "Batch rows that carry both a quote and a payment, music and video jobs (the free "
        "quote vs the queue payment) and report purchases (the price the service says it "
        "charged vs the amount paid). The ledger signs the live price it is asked, so a "
        "payment never differs from its own challenge; drift is measured against the quote "
        "taken before paying.",
        "drift",
    ),
    Section(
        "padding",
        "Minimum-charge padding",
        "What was paid above upstream × multiplier because of the minimum charge, per route, "
        "over every settled payment. A payment sent with the first request saw no 402: above "
        "the minimum it paid its fair price; at the minimum its upstream cost is estimated "
        "from the route's seen 402s (Estimated), or, with none, not priced (Unpriced). "
        "Inputs per call to pass it: how many inputs of that size one call would need before "
        "the minimum stops binding. Packing would save: what sending the padded inputs "
        "together would have saved (routes that take several inputs per call, such as "
        "embeddings).",
        "padding",
    ),
    Section(
        "savings",
        "Cache and library savings",
        "Rows and reports that were not paid again, at what paying again would have cost: a "
        "batch row at its real share of its pack (not a request of its own), a report at its "
        "price. What was paid once and reused is not counted again as spent.",
    ),
    Section(
        "rates",
        "Agent vs upstream rates",
        "From the gateway's price list; the models used here first.",
        "rates",
    ),
    Section(
        "outcomes",
        "Payment outcomes and reconciliation",
        "Every signed payment by status and what resolved it: receipt (the answer to its "
        "first send), resend (the answer to the same signed payload sent again after an "
        "ambiguous failure) or chain (a reconciliation, or a lost answer confirmed on the "
        "chain). Sent again counts payments sent more than once; rows still signed or unknown "
        "show when the first of them expires.",
    ),
    Section("timeline", "Settled payments", "Every settled payment with the running total."),
)

TABLE_SCHEMAS: dict[str, pa.Schema] = {
    "totals": schemas.spend_schema((), atomic=True),
    "budgets": schemas.spend_schema(("budget",), atomic=True),
    "by_user": schemas.spend_schema(("user", "payer"), atomic=True),
    "by_day": schemas.spend_schema(("day", "service"), atomic=True),
    "by_route": schemas.spend_schema(("service", "path", "model"), atomic=True),
    "unit_costs": schemas.UNIT_COSTS,
    "batch_status": schemas.BATCH_STATUS,
    "drift": schemas.DRIFT,
    "padding": schemas.PADDING,
    "savings": schemas.SAVINGS,
    "rates": schemas.RATES,
    "outcomes": schemas.OUTCOMES,
    "timeline": schemas.TIMELINE,
}


@dataclass(frozen=True)
class Picture:
    """A figure that shows itself in Jupyter as PNG, whatever matplotlib backend is active
    (a bare ``Figure`` made without pyplot shows only as text there)."""

    figure: Figure
    name: str = "figure"

    def _repr_png_(self) -> bytes:
        return plots.png_bytes(self.figure)

    def save(self, path: str | Path) -> Path:
        """Write the PNG to ``path``; returns it."""
        return write_private(Path(path).expanduser(), plots.png_bytes(self.figure))

    def __repr__(self) -> str:
        return f"<Picture {self.name}>"


@dataclass
class CostReport:
    """Tables (pandas, declared schemas), matplotlib figures and notes about spend.

    ``report.tables["by_route"]``, ``report.figures["spend_over_time"]`` (a matplotlib
    Figure), ``report.plot("padding")`` (the same, shown inline in Jupyter),
    ``report.settled_atomic`` (exact total), ``to_html(folder)``, ``to_parquet(folder)``,
    ``save(folder)``.
    """

    tables: dict[str, pd.DataFrame]
    figures: dict[str, Figure]
    notes: list[str] = field(default_factory=list)
    generated_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    ledger_path: str | None = None
    # The first and last ledger row's time (None for an empty ledger): the report's period.
    first_payment: datetime | None = None
    last_payment: datetime | None = None

    @property
    def totals(self) -> pd.DataFrame:
        return self.tables["totals"]

    def _total(self, column: str) -> int:
        totals = self.totals
        return int(totals[column].iloc[0]) if len(totals) else 0

    @property
    def settled_atomic(self) -> int:
        """Total settled, in USDC base units (exact)."""
        return self._total("settled_atomic")

    @property
    def unknown_atomic(self) -> int:
        """Total amount of payments whose outcome is unknown (exposure)."""
        return self._total("unknown_atomic")

    def plot(self, name: str) -> Picture:
        """One figure, ready to show in a notebook cell. Raises KeyError naming the figures."""
        if name not in self.figures:
            raise KeyError(f"no figure {name!r}; the report has {sorted(self.figures)}")
        return Picture(self.figures[name], name)

    def to_arrow(self, name: str) -> pa.Table:
        """One table as Arrow, with its declared schema."""
        return schemas.to_arrow(self.tables[name], TABLE_SCHEMAS[name])

    def summary(self) -> str:
        """One line: settled, unknown exposure and payment count."""
        count = self._total("payments")
        return (
            f"settled {format_usd(self.settled_atomic)} in {self._total('settled_count')}"
            f" payments; unknown exposure {format_usd(self.unknown_atomic)};"
            f" {count} ledger rows"
        )

    def __repr__(self) -> str:
        return f"<CostReport {self.summary()}; tables {sorted(self.tables)}>"

    # -- exports -----------------------------------------------------------------------------

    def to_parquet(self, folder: str | Path) -> list[Path]:
        """Write each table to ``folder/<name>.parquet``; returns the paths."""
        import pyarrow.parquet as pq

        target = private_folder(Path(folder).expanduser())
        written = []
        for name in self.tables:
            path = target / f"{name}.parquet"
            with open_private(path) as out:
                pq.write_table(self.to_arrow(name), out)
            written.append(path)
        return written

    def write_figures(self, folder: str | Path) -> list[Path]:
        """Write each figure to ``folder/<name>.png``; returns the paths."""
        target = private_folder(Path(folder).expanduser())
        written = []
        for name, figure in self.figures.items():
            written.append(write_private(target / f"{name}.png", plots.png_bytes(figure)))
        return written

    def to_html(self, folder: str | Path, *, embed: bool = False) -> Path:
        """Write ``folder/cost_report.html``; returns its path.

        With ``embed=False`` the figures are written beside it as PNG files and linked; with
        ``embed=True`` the page carries them inline and stands alone.
        """
        target = private_folder(Path(folder).expanduser())
        if not embed:
            self.write_figures(target)
        page = target / "cost_report.html"
        stamp = self.generated_at.strftime("%Y-%m-%d %H:%M UTC")
        body = self._html(link_figures=not embed, stamp=stamp)
        return write_private(
            page,
            "<!doctype html><html><head><meta charset='utf-8'><title>x402lab cost report"
            f"</title><style>{report_html.CSS}</style></head><body>{body}</body></html>",
        )

    def save(self, folder: str | Path) -> Path:
        """HTML with linked PNG figures plus one Parquet file per table; returns the page."""
        self.to_parquet(folder)
        return self.to_html(folder)

    def _repr_html_(self) -> str:
        return f"<style>{report_html.CSS}</style>{self._html()}"

    def _html(self, *, link_figures: bool = False, stamp: str | None = None) -> str:
        # The notebook view carries no clock time, so re-running a notebook changes nothing.
        when = f"<p class='about'>Generated {stamp}.</p>" if stamp else ""
        figures = report_html.key_figures(self.tables, self.first_payment, self.last_payment)
        parts = ["<h2>x402lab cost report</h2>", report_html.figures_html(figures), when]
        if self.notes:
            items = "".join(f"<li>{_note_html(note)}</li>" for note in self.notes)
            parts.append(f"<ul class='notes'>{items}</ul>")
        for section in SECTIONS:
            table = self.tables.get(section.table)
            if table is None:
                continue
            parts.append(f"<h3>{html.escape(section.title)}</h3>")
            parts.append(f"<p class='about'>{html.escape(section.about)}</p>")
            figure = self.figures.get(section.figure or "")
            if figure is not None:
                if link_figures:
                    source = f"{section.figure}.png"
                else:
                    encoded = base64.b64encode(plots.png_bytes(figure)).decode("ascii")
                    source = f"data:image/png;base64,{encoded}"
                alt = html.escape(section.title)
                parts.append(f"<img src='{source}' alt='{alt}'/>")
            where = f'report.tables["{section.table}"]'
            parts.append(report_html.table_html(section.table, table, where))
        return f"<div class='x402-report'>{''.join(parts)}</div>"


def _note_html(note: str) -> str:
    """A note with the calls it names (written ``like(this=...)``) set as code."""
    pieces = re.split(r"(\b[\w.]+\([^)]*\))", note)
    return "".join(
        f"<code>{html.escape(piece)}</code>" if index % 2 else html.escape(piece)
        for index, piece in enumerate(pieces)
    )


def _batch_note(status: pd.DataFrame, savings: pd.DataFrame) -> str:
    """What the batches passed paid, apart from what their answers cost (each once), and
    what reusing answers saved."""
    paid, counted = int(status["paid_atomic"].sum()), int(status["counted_atomic"].sum())
    batch_saved = savings[savings["source"].str.startswith("batch cache: ")]
    saved = int(batch_saved["saved_atomic"].sum())
    return (
        f"Batches: these runs paid {format_usd(paid)}; their rows' answers cost"
        f" {format_usd(counted)}, each answer counted once whichever run bought it. Reused"
        f" answers saved {format_usd(saved)}: what paying again would have cost, each row at"
        " its real share of its pack."
    )


def _concat(frames: list[pd.DataFrame | None], schema: pa.Schema) -> pd.DataFrame:
    # Empty parts are left out: concatenating them is deprecated in pandas and adds nothing.
    parts = [f for f in frames if f is not None and len(f)]
    return schemas.typed(pd.concat(parts, ignore_index=True) if parts else None, schema)


def build_report(
    rows: spend.LedgerRows,
    *,
    batches: batch_tables.BatchInput = None,
    prices: pd.DataFrame | None = None,
    library: pd.DataFrame | None = None,
    purchases: Any = None,
    report_orders: Any = None,
    jobs: pd.DataFrame | None = None,
    notes: list[str] | None = None,
    ledger_path: str | None = None,
    lost: Collection[int] | None = None,
    caps: Mapping[str, int | None] | None = None,
    now: datetime | None = None,
) -> CostReport:
    """The cost report of ``rows`` (a Ledger, its Arrow table or its DataFrame).

    ``batches``: batch results to analyse (see ``batch_frames``); ``prices``: the price list
    (``lab.prices()``); ``library``: ``lab.reports.library()``; ``purchases``: ReportSets of
    ``lab.reports.buy`` (their already-owned reports count as saved); ``report_orders``: the
    library's purchase orders (charged vs paid); ``jobs``: ``lab.jobs()`` (media quote vs
    queue payment); ``lost`` and ``caps``: the ledger's lost payments and budget caps
    (``budgets.ledger_facts``; read from ``rows`` when it is a Ledger); ``now``: the time the
    burn rates run to. Figures are drawn here; nothing is sent.
    """
    if lost is None or caps is None:
        found = budgets.ledger_facts(rows) if spend.is_ledger(rows) else (set(), {})
        lost = found[0] if lost is None else lost
        caps = found[1] if caps is None else caps
    frame = spend.ledger_frame(rows)
    notes = list(notes or [])
    by_route = spend.spend(frame, ("service", "path", "model"), atomic=True, lost=lost)
    unit_costs = _concat(
        [spend.route_unit_costs(frame), batch_tables.unit_costs(batches, frame)],
        schemas.UNIT_COSTS,
    )
    savings = _concat(
        [batch_tables.cache_savings(batches), report_library.library_savings(library, purchases)],
        schemas.SAVINGS,
    )
    drift = _concat(
        [
            batch_tables.drift(batches, frame),
            job_tables.job_drift(jobs),
            report_library.order_drift(report_orders),
        ],
        schemas.DRIFT,
    )
    tables: dict[str, Any] = {
        "totals": spend.spend(frame, (), atomic=True, lost=lost),
        "budgets": spend.spend(frame, ("budget",), atomic=True, lost=lost, caps=caps, now=now),
        "by_user": spend.spend(frame, ("user", "payer"), atomic=True, lost=lost),
        "by_day": spend.spend(frame, ("day", "service"), atomic=True, lost=lost),
        "by_route": by_route,
        "unit_costs": unit_costs,
        "batch_status": batch_tables.status_counts(batches),
        "drift": drift,
        "padding": pricing.padding(frame, prices),
        "savings": savings,
        "rates": pricing.rates(prices, frame),
        "outcomes": payment_outcomes(frame),
        "timeline": spend.timeline(frame),
    }
    tables = {name: schemas.typed(t, TABLE_SCHEMAS[name]) for name, t in tables.items()}
    if batches is not None:
        notes.append(_batch_note(tables["batch_status"], tables["savings"]))
    if batches is None:
        notes.append(
            "No batch results were passed: per-row costs, drift and cache savings come from"
            " lab.cost_report(batches=...)."
        )
    if prices is None:
        notes.append("No price list: the rates table is empty.")
    figures = {
        "spend_over_time": plots.spend_over_time(tables["timeline"]),
        "by_route": plots.spend_by_route(tables["by_route"]),
        "unit_costs": plots.unit_costs(tables["unit_costs"]),
        "drift": plots.drift(tables["drift"]),
        "padding": plots.padding(tables["padding"]),
        "rates": plots.rates(tables["rates"]),
    }
    times = frame["ts"].dropna()
    return CostReport(
        tables=tables,
        figures=figures,
        notes=notes,
        ledger_path=ledger_path,
        first_payment=times.min().to_pydatetime() if len(times) else None,
        last_payment=times.max().to_pydatetime() if len(times) else None,
    )

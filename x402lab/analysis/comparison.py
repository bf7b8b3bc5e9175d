"""What ``lab.compare`` returns: the quote of a comparison (``ComparisonQuote``, from
``dry_run=True``) and its measured result (``Comparison``), each a table with a Jupyter view.

Money columns are exact decimals (``pd.ArrowDtype(pa.decimal128(18, 6))``) made from atomic
amounts, so they add up to the chain to the atomic unit. ``Comparison.best`` is the choice
the evidence supports: with ``target``, the cheapest configuration whose interval's low
bound reaches the target, or None (``verdict`` then says how many more labelled rows would
settle it); without, the cheapest whose interval overlaps that of the best-measured one
(``rule`` says so on the card).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa

from x402lab.analysis.intervals import rows_to_reach
from x402lab.money import atomic_to_decimal, budget_verdict, format_usd
from x402lab.reprs import card, scrolling

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: What a comparison on the emulator says of its answers.
SIMULATED = (
    "simulated by the emulator (a seeded quality model, docs/emulator.md): the measures show"
    " how the comparison works, not how good the models are"
)

#: The dtype of every ``*_usd`` money column: exact, from atomic units.
USD = pd.ArrowDtype(pa.decimal128(18, 6))


def usd_column(atomic: Sequence[int | None]) -> pd.Series:
    """Atomic amounts as an exact USD column (None stays null)."""
    values = [None if a is None else atomic_to_decimal(a) for a in atomic]
    return pd.Series(pa.array(values, type=pa.decimal128(18, 6)), dtype=USD)


def _html_table(table: pd.DataFrame) -> str:
    """``table`` as HTML with each model id on one line (ids wrap at every hyphen otherwise)."""
    shown = table.copy()
    if "model" in shown.columns:
        shown["model"] = [
            f'<span style="white-space:nowrap">{html.escape(str(m))}</span>' for m in shown["model"]
        ]
    with pd.option_context("display.max_colwidth", None):  # a cut id is no id
        text = shown.to_html(
            index=False, escape=False, notebook=True, na_rep="", float_format=lambda v: f"{v:.4g}"
        )
    return scrolling(text)


@dataclass
class ComparisonQuote:
    """The exact price of a comparison before anything is signed (``dry_run=True``): one row
    per configuration (``model``, ``rows_per_request``, ``rows``, ``requests`` to pay now,
    ``quoted_usd``) and the total. Answers a re-run would reuse are not counted."""

    table: pd.DataFrame
    total_atomic: int
    budget_left_atomic: int | None

    def to_pandas(self) -> pd.DataFrame:
        return self.table

    @property
    def total_usd(self) -> Decimal:
        """The total as an exact Decimal of USD."""
        return atomic_to_decimal(self.total_atomic)

    @property
    def fits_budget(self) -> bool | None:
        """Whether the comparison fits what the budget has left (None without a cap)."""
        if self.budget_left_atomic is None:
            return None
        return self.total_atomic <= self.budget_left_atomic

    def describe(self) -> str:
        text = (
            f"{len(self.table)} configurations, {int(self.table['requests'].sum())} requests"
            f" to pay: exact total {format_usd(self.total_atomic)}"
        )
        if self.budget_left_atomic is not None:
            text += f"; {budget_verdict(self.fits_budget is True, self.budget_left_atomic)}"
        return text

    def __repr__(self) -> str:
        return f"<ComparisonQuote: {self.describe()}>"

    def _repr_html_(self) -> str:
        rows = [("total", format_usd(self.total_atomic)), ("nothing signed", self.describe())]
        return card("Comparison quote (free, exact)", rows, below=_html_table(self.table))


@dataclass
class Comparison:
    """One row per configuration (``to_pandas()``), the plot of cost against the measure
    (``plot()``) and the choice (``best``, ``verdict``); shows as all three in Jupyter.

    ``measure`` is ``"accuracy"`` (gold labels given) or ``"agreement"`` (with the reference
    configuration, ``reference``; None with gold labels).
    """

    table: pd.DataFrame
    reference: tuple[str, int] | None
    total_rows: int
    answers: dict[tuple[str, int], pd.DataFrame]
    quote: ComparisonQuote
    measure: str = "agreement"
    target: float | None = None
    labelled_rows: int = 0
    simulated: bool = False
    notes: list[str] = field(default_factory=list)

    def to_pandas(self) -> pd.DataFrame:
        return self.table

    def _candidates(self) -> pd.DataFrame:
        table = self.table
        if self.reference is not None and len(table) > 1:
            table = table[~table["reference"]]
        return table

    @property
    def best(self) -> tuple[str, int] | None:
        """``(model, rows_per_request)`` chosen by the evidence (``rule`` says how). With
        ``target``: the cheapest configuration whose ``<measure>_low`` reaches it, None when
        none does. Without: the cheapest whose interval overlaps that of the best-measured
        one (the measured difference could be chance), the better measured on ties. The
        reference configuration is never chosen against itself (unless it is the only one)."""
        table = self._candidates()
        if table.empty:
            return None
        if self.target is not None:
            table = table[table[f"{self.measure}_low"] >= self.target]
        else:
            table = table[table[f"{self.measure}_high"] >= self._top()[f"{self.measure}_low"]]
        if table.empty:
            return None
        row = table.sort_values(
            ["usd_per_1k_rows", self.measure], ascending=[True, False], kind="stable"
        ).iloc[0]
        return str(row["model"]), int(row["rows_per_request"])

    def _top(self) -> pd.Series:
        """The best-measured candidate, the cheaper on ties."""
        order = [self.measure, "usd_per_1k_rows"]
        return self._candidates().sort_values(order, ascending=[False, True], kind="stable").iloc[0]

    @property
    def rule(self) -> str:
        """How ``best`` is chosen, in words."""
        name = self.measure
        if self.target is not None:
            return f"the cheapest configuration whose {name}_low reaches the target {self.target}"
        return (
            f"the cheapest configuration whose {name} interval overlaps that of the highest"
            f" {name} (a difference inside the intervals could be chance)"
        )

    @property
    def verdict(self) -> str:
        """The choice in words; without one, why, and how many more labelled rows would
        settle it."""
        name = self.measure
        best = self.best
        if best is not None:
            row = self._row(best)
            if self.target is not None:
                low = row[f"{name}_low"]
                why = f"the cheapest whose {name}_low ({low:.3f}) reaches {self.target}"
            else:
                top = self._top()
                why = (
                    f"{name} {row[name]:.3f} [{row[f'{name}_low']:.3f}, {row[f'{name}_high']:.3f}],"
                    f" the cheapest whose interval overlaps that of the highest {name},"
                    f" {top['model']} at {int(top['rows_per_request'])}"
                    f" ({top[name]:.3f} [{top[f'{name}_low']:.3f}, {top[f'{name}_high']:.3f}])"
                )
            return (
                f"best: {best[0]} at {best[1]} row(s) per request, {why};"
                f" {row['usd_per_1k_rows']:.4g} USD per 1,000 rows"
            )
        assert self.target is not None
        table = self._candidates()
        n = int(table["rows"].max()) if len(table) else 0
        hopeful = table[table[name] >= self.target].sort_values("usd_per_1k_rows")
        if hopeful.empty:
            top = table.sort_values(name, ascending=False).iloc[0]
            return (
                f"best: None. No configuration reaches {name} {self.target} on this sample:"
                f" the highest is {top[name]:.3f} ({top['model']} at"
                f" {int(top['rows_per_request'])}); at the {name} measured, no number of"
                f" {self._rows_word} would bring an interval's low bound to the target."
            )
        row = hopeful.iloc[0]
        rows = rows_to_reach(float(row[name]), n, self.target)
        more = (
            f"with about {rows - n} more {self._rows_word} ({rows} in all), if its {name} held,"
            f" its {name}_low would reach it"
            if rows is not None
            else "no sample size would settle it at that share"
        )
        return (
            f"best: None. No configuration's {name}_low reaches {self.target} on {n} rows;"
            f" the cheapest whose {name} does, {row['model']} at {int(row['rows_per_request'])}"
            f" ({row[name]:.3f}, interval {row[f'{name}_low']:.3f} to"
            f" {row[f'{name}_high']:.3f}): {more}."
        )

    @property
    def _rows_word(self) -> str:
        return "labelled rows" if self.measure == "accuracy" else "sample rows"

    def _row(self, config: tuple[str, int]) -> pd.Series:
        table = self.table
        match = table[(table["model"] == config[0]) & (table["rows_per_request"] == config[1])]
        return match.iloc[0]

    def plot(self) -> Figure:
        """Cost per 1,000 rows (log scale) against the measure with its 95% interval, one
        labelled point per configuration; the configurations no other is both cheaper and
        better than are filled and on the step line. Shows as an image in Jupyter."""
        from x402lab.analysis.plots import comparison

        return comparison(self.table, measure=self.measure, target=self.target)

    def __repr__(self) -> str:
        against = (
            "gold labels"
            if self.reference is None
            else f"reference {self.reference[0]} at {self.reference[1]} row(s) per request"
        )
        return (
            f"<Comparison of {len(self.table)} configurations on {self.table['rows'].max()}"
            f" rows against {against}; {self.verdict}>"
        )

    def _repr_html_(self) -> str:
        from x402lab.analysis.plots import png_bytes

        image = base64.b64encode(png_bytes(self.plot())).decode("ascii")
        against = (
            f"gold labels ({self.labelled_rows} rows)"
            if self.reference is None
            else f"{self.reference[0]} at {self.reference[1]} row(s) per request"
        )
        paid = sum(self.table["paid_usd"].dropna(), start=atomic_to_decimal(0))
        rows: list[tuple[str, object]] = [
            ("measured against", against),
            ("answers", SIMULATED if self.simulated else None),
            ("rule", self.rule),
            ("choice", self.verdict),
            ("quoted / paid now", f"{format_usd(self.quote.total_atomic)} / {paid} USD"),
            ("projected for", f"{self.total_rows} rows (projected_usd)"),
        ]
        rows += [("note", note) for note in self.notes]
        below = (
            _html_table(self.table.drop(columns=["frontier"]))
            + f'<img alt="cost against {self.measure}" src="data:image/png;base64,{image}"/>'
        )
        return card("Comparison (paid within the budget)", rows, below=below)

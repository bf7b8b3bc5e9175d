"""What ``xl.shares`` and ``xl.mean`` return: one row per estimated quantity (a label's share,
or a field's mean) with its PPI++ interval beside the model-only figure and the gold-only
interval, shown as a card with a table and a figure in Jupyter (no magics needed)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from x402lab.reprs import card, scrolling

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: What each kind of estimate calls its columns: the quantity's name column and its measure.
NAMES = {"share": ("value", "share"), "mean": ("field", "mean")}


@dataclass
class Estimates:
    """Population figures with valid intervals from a few gold labels (``to_pandas()``).

    ``kind`` is ``"share"`` (one row per value of ``column``) or ``"mean"`` (one row, the
    field ``column``). ``rows``: the frame's rows the figures are about; ``n_gold``: the
    labelled rows; ``weighted``: whether their inclusion weights were used; ``notes``: what
    the reader must know (values with no gold row, rows without a model label)."""

    table: pd.DataFrame
    kind: str
    column: str
    rows: int
    n_gold: int
    level: float
    weighted: bool
    notes: list[str] = field(default_factory=list)

    def to_pandas(self) -> pd.DataFrame:
        return self.table

    @property
    def names(self) -> tuple[str, str]:
        """The quantity's name column and the measure (``("value", "share")``...)."""
        return NAMES[self.kind]

    def plot(self) -> Figure:
        """Per quantity: the model-only figure (a cross, no interval), the PPI++ estimate and
        the gold-only one with their intervals. Shows as an image in Jupyter."""
        from x402lab.analysis.estimates_plot import estimates_figure

        return estimates_figure(self)

    def describe(self) -> str:
        name, measure = self.names
        sample = "weighted gold sample" if self.weighted else "uniform gold sample"
        what = (
            f"{measure}s of {self.column!r}" if self.kind == "share" else f"mean of {self.column!r}"
        )
        return (
            f"{what} over {self.rows} rows, {self.level:.0%} PPI++ intervals from"
            f" {self.n_gold} gold labels ({sample})"
        )

    def __repr__(self) -> str:
        name, measure = self.names
        figures = "; ".join(
            f"{row[name]}: {row[measure]:.3f} [{row['low']:.3f}, {row['high']:.3f}]"
            for _, row in self.table.iterrows()
        )
        return f"<Estimates: {self.describe()}; {figures}>"

    def _repr_html_(self) -> str:
        from x402lab.analysis.plots import png_bytes

        image = base64.b64encode(png_bytes(self.plot())).decode("ascii")
        name, measure = self.names
        rows: list[tuple[str, object]] = [
            ("estimated", self.describe()),
            (
                f"{measure}, low, high",
                "the model's labels on every row, corrected by their errors on the gold rows"
                " (PPI++, power-tuned): valid for gold rows drawn at random from these rows, or"
                " with their inclusion weights",
            ),
            (
                f"model_{measure}",
                "the model's labels alone: no interval, their errors do not average out",
            ),
            ("gold_low, gold_high", "the gold rows alone"),
            ("worth_gold", "how many gold labels a gold-only interval would need to be as narrow"),
        ]
        rows += [("note", note) for note in self.notes]
        with pd.option_context("display.max_colwidth", None):
            table = self.table.to_html(
                index=False, notebook=True, na_rep="", float_format=lambda v: f"{v:.4g}"
            )
        below = (
            scrolling(table)
            + f'<img alt="{measure} estimates" src="data:image/png;base64,{image}"/>'
        )
        return card(f"Population {measure}s with valid intervals", rows, below=below)

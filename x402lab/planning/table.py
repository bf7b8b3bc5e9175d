"""The plan table: one row per cell that would pay (or that rehearsal could not price
exactly), its totals against the notebook's budget, and its HTML, text and JSON forms."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pandas as pd
import pyarrow as pa

from x402lab.money import atomic_to_decimal, format_usd
from x402lab.planning.records import Connected, PricedCall

USD = pa.decimal128(18, 6)
SCHEMA = pa.schema(
    [
        pa.field("cell", pa.int64(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("calls", pa.int64(), nullable=False),
        pa.field("usd", USD, nullable=False),
        pa.field("usd_high", USD),
        pa.field("exact", pa.bool_(), nullable=False),
        pa.field("note", pa.string()),
    ]
)
# Names whose use makes a cell's requests differ from run to run.
_RANDOM = re.compile(
    r"\b(?:random\.|np\.random|numpy\.random|secrets\.|uuid\.|uuid4|time\.time\(|"
    r"datetime\.now|date\.today|default_rng)|\.sample\((?![^)]*random_state)"
)


@dataclass
class CellPlan:
    """What one code cell did in rehearsal: its paid requests, its error, its position
    (``cell``, counting from 1 over every cell of the notebook, markdown too)."""

    cell: int
    source: str
    calls: list[PricedCall] = field(default_factory=list)
    error: str | None = None

    @property
    def first_line(self) -> str:
        return next((line.strip() for line in self.source.splitlines() if line.strip()), "")

    @property
    def amount_atomic(self) -> int:
        return sum(c.amount_atomic for c in self.calls)

    @property
    def random(self) -> bool:
        return bool(self.calls) and _RANDOM.search(self.source) is not None

    @property
    def exact(self) -> bool:
        return self.error is None and not self.random and all(c.exact for c in self.calls)

    @property
    def high_atomic(self) -> int | None:
        """The most this cell can cost: its exact calls, and a bound for each call built from
        an answer (None when one has none, or the cell uses randomness)."""
        if self.random:
            return None
        total = 0
        for call in self.calls:
            if call.exact:
                total += call.amount_atomic
            elif call.high_atomic is None or call.reasked:
                return None
            else:
                total += max(call.high_atomic, call.amount_atomic)
        return total


def _notes(cell: CellPlan, cell_of: dict[int, int]) -> list[str]:
    notes = []
    if cell.error is not None:
        notes.append(f"failed in rehearsal: {cell.error}")
    sources = sorted({cell_of.get(s, 0) for c in cell.calls for s in c.depends_on})
    if sources:
        where = ", ".join(f"cell {s}" for s in sources)
        notes.append(
            f"a request holds the answer of a paid call ({where}): priced with the rehearsal's"
            " answer, the real one differs"
        )
    reasked = sum(c.reasked for c in cell.calls)
    if reasked:
        notes.append(
            f"{reasked} request(s) asked rows again whose answers did not validate: the real"
            " run asks again as its own answers require"
        )
    refused = [c.refused for c in cell.calls if c.refused]
    if refused:
        notes.append(f"the rehearsal's emulator could not answer {len(refused)}: {refused[0]}")
    if cell.random:
        notes.append("uses randomness: the real run may send other requests")
    return notes


def plan_frame(cells: list[CellPlan], connects: list[Connected]) -> PlanFrame:
    """The plan of ``cells`` (rows for cells that pay or have something to say), with totals
    and the notebook's budget in ``attrs["plan"]``."""
    cell_of = {c.seq: cell.cell for cell in cells for c in cell.calls}
    columns: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    total, high = 0, 0
    high_known = True
    left = next((c.left_atomic for c in connects if c.left_atomic is not None), None)
    budget = connects[0] if connects else None
    for cell in cells:
        notes = _notes(cell, cell_of)
        if not cell.calls and not notes:
            continue
        before = total
        total += cell.amount_atomic
        cell_high = cell.high_atomic
        if cell_high is None:
            high_known = False
        else:
            high += cell_high
        if left is not None and before <= left < total:
            notes.append(
                f"the budget {budget.budget!r} has {format_usd(left)} left: it runs out here"
                if budget
                else "the budget runs out here"
            )
        columns["cell"].append(cell.cell)
        columns["source"].append(cell.first_line)
        columns["calls"].append(len(cell.calls))
        columns["usd"].append(atomic_to_decimal(cell.amount_atomic))
        columns["usd_high"].append(None if cell_high is None else atomic_to_decimal(cell_high))
        columns["exact"].append(cell.exact)
        columns["note"].append("; ".join(notes) or None)
    table = pa.table(columns, schema=SCHEMA)
    frame = PlanFrame(table.to_pandas(types_mapper=pd.ArrowDtype))
    frame.attrs["plan"] = {
        "total_usd": str(atomic_to_decimal(total)),
        "total_usd_high": str(atomic_to_decimal(high)) if high_known else None,
        "budget": None
        if budget is None
        else {
            "name": budget.budget,
            "usd": _usd(budget.budget_atomic),
            "left_usd": _usd(left),
            "fits": None if left is None else (high if high_known else total) <= left,
        },
        "notes": sorted({n for c in connects for n in c.notes}),
    }
    return frame


def _usd(atomic: int | None) -> str | None:
    return None if atomic is None else str(atomic_to_decimal(atomic))


class PlanFrame(pd.DataFrame):
    """The plan as a DataFrame, shown with its totals and budget (HTML in Jupyter, text in a
    terminal). A frame derived from it (a slice, a sort) is a plain DataFrame."""

    @property
    def _constructor(self) -> Any:
        return pd.DataFrame

    def summary(self) -> str:
        """One line: the total (and its bound) against the notebook's budget."""
        plan = self.attrs.get("plan", {})
        total = Decimal(plan.get("total_usd", "0"))
        text = f"total {total:.6f} USD"
        high = plan.get("total_usd_high")
        if high is not None and Decimal(high) != total:
            text += f" (at most {Decimal(high):.6f} USD)"
        elif high is None:
            text += " (no upper bound: some cells depend on answers or randomness)"
        budget = plan.get("budget")
        if budget and budget.get("left_usd") is not None:
            verdict = "fits" if budget["fits"] else "does NOT fit"
            text += (
                f"; budget {budget['name']!r} has {Decimal(budget['left_usd']):.6f} USD left:"
                f" {verdict}"
            )
        for note in plan.get("notes", []):
            text += f"\nnote: {note}"
        return text

    def to_text(self) -> str:
        """The table and its summary as plain text (what ``x402lab plan`` prints)."""
        if self.empty:
            return "no cell would pay\n" + self.summary()
        shown = pd.DataFrame(self).copy()
        shown["note"] = shown["note"].fillna("")
        shown["usd_high"] = shown["usd_high"].astype(object).where(shown["usd_high"].notna(), "?")
        return shown.to_string(index=False, max_colwidth=60) + "\n" + self.summary()

    def __repr__(self) -> str:
        return f"{super().__repr__()}\n{self.summary()}"

    def _repr_html_(self) -> str:  # type: ignore[override]
        table = pd.DataFrame(self).to_html(index=False, na_rep="")
        summary = self.summary().replace("\n", "<br>")
        return f"{table}<p><b>{summary}</b></p>"

    def to_plan_json(self) -> str:
        """``{"cells": [...], "total_usd", "total_usd_high", "budget", "notes"}`` with every
        USD amount a decimal string (``x402lab plan --json``)."""
        cells = []
        for row in pd.DataFrame(self).itertuples(index=False):
            high = row.usd_high
            cells.append(
                {
                    "cell": int(row.cell),
                    "source": row.source,
                    "calls": int(row.calls),
                    "usd": str(row.usd),
                    "usd_high": None if pd.isna(high) else str(high),
                    "exact": bool(row.exact),
                    "note": None if pd.isna(row.note) else row.note,
                }
            )
        return json.dumps({"cells": cells, **self.attrs.get("plan", {})}, indent=2)

"""The plan table: one row per cell that would pay (or that rehearsal could not price
exactly), its totals against each budget the notebook's labs run on, what it would write,
and its HTML, text and JSON forms."""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pandas as pd
import pyarrow as pa

from x402lab.money import atomic_to_decimal
from x402lab.planning.lines import statement_at
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
    (``cell``, counting from 1 over every cell of the notebook, markdown too); ``refused``:
    the reason when its budget refused it before paying (a BudgetExceeded it did not catch),
    as the real run's budget would."""

    cell: int
    source: str
    calls: list[PricedCall] = field(default_factory=list)
    error: str | None = None
    refused: str | None = None

    @property
    def first_line(self) -> str:
        return next((line.strip() for line in self.source.splitlines() if line.strip()), "")

    @property
    def paying_line(self) -> str:
        """The statement that paid (the first of them, saying how many others did), else the
        cell's first line."""
        lines = list(dict.fromkeys(c.line for c in self.calls if c.line is not None))
        if not lines:
            return self.first_line
        shown = statement_at(self.source, lines[0]) or self.first_line
        others = len({statement_at(self.source, line) for line in lines[1:]} - {shown})
        return f"{shown} (and {others} other line{'s' if others > 1 else ''})" if others else shown

    @property
    def amount_atomic(self) -> int:
        return sum(c.amount_atomic for c in self.calls)

    @property
    def random(self) -> bool:
        return bool(self.calls) and _RANDOM.search(self.source) is not None

    @property
    def exact(self) -> bool:
        ran = self.error is None or self.refused is not None  # a refusal is priced exactly
        return ran and not self.random and all(c.exact for c in self.calls)

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


def _notes(cell: CellPlan, cell_of: dict[int, int], refused_by: str | None) -> list[str]:
    notes = []
    if cell.refused is not None:
        which = f"budget {refused_by!r}" if refused_by is not None else "its budget"
        notes.append(f"refused before paying by {which}, as the real run would: {cell.refused}")
    elif cell.error is not None:
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


@dataclass
class _BudgetPlan:
    """One budget of the notebook (a name in a ledger) and what the plan spends of it."""

    connected: Connected
    spend: int = 0
    high: int | None = 0
    refused: list[int] = field(default_factory=list)

    def add(self, amount: int, high: int | None) -> None:
        self.spend += amount
        self.high = None if self.high is None or high is None else self.high + high

    @property
    def fits(self) -> bool | None:
        left = self.connected.left_atomic
        if left is None:
            return None
        most = self.high if self.high is not None else self.spend
        return not self.refused and most <= left

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.connected.budget,
            "usd": _usd(self.connected.budget_atomic),
            "left_usd": _usd(self.connected.left_atomic),
            "planned_usd": _usd(self.spend),
            "planned_usd_high": _usd(self.high),
            "fits": self.fits,
            "refused_cells": self.refused,
        }


def _budgets(
    connects: list[Connected],
) -> tuple[dict[tuple[str, str], _BudgetPlan], dict[int, _BudgetPlan]]:
    """Each budget (the first ``connect()`` that names it says what it had left), and the
    budget of each lab."""
    budgets: dict[tuple[str, str], _BudgetPlan] = {}
    of_lab: dict[int, _BudgetPlan] = {}
    for connected in connects:
        found = budgets.setdefault(connected.budget_key, _BudgetPlan(connected))
        of_lab[connected.lab] = found
    return budgets, of_lab


def _refused_by(reason: str, budgets: dict[tuple[str, str], _BudgetPlan]) -> _BudgetPlan | None:
    """The budget a refusal names (every refusal of a budget says its name), else the only
    budget with a total cap."""
    named = [b for b in budgets.values() if repr(b.connected.budget) in reason]
    capped = [b for b in budgets.values() if b.connected.budget_atomic is not None]
    found = named or capped
    return found[-1] if len(found) == 1 or named else None


def _call_high(call: PricedCall) -> int | None:
    if call.exact:
        return call.amount_atomic
    if call.high_atomic is None or call.reasked:
        return None
    return max(call.high_atomic, call.amount_atomic)


def plan_frame(
    cells: list[CellPlan],
    connects: list[Connected],
    writes: list[str] | None = None,
    notes: list[str] | None = None,
) -> PlanFrame:
    """The plan of ``cells`` (rows for cells that pay or have something to say), with totals,
    each budget, what the notebook would write (``writes``) and the plan's ``notes`` in
    ``attrs["plan"]``."""
    cell_of = {c.seq: cell.cell for cell in cells for c in cell.calls}
    columns: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    total, high = 0, 0
    high_known = True
    budgets, of_lab = _budgets(connects)
    for cell in cells:
        refused_by = _refused_by(cell.refused, budgets) if cell.refused is not None else None
        if refused_by is not None:
            refused_by.refused.append(cell.cell)
        said = _notes(cell, cell_of, refused_by.connected.budget if refused_by else None)
        if not cell.calls and not said:
            continue
        total += cell.amount_atomic
        cell_high = cell.high_atomic
        if cell_high is None:
            high_known = False
        else:
            high += cell_high
        for call in cell.calls:
            if (budget := of_lab.get(call.lab)) is not None:
                budget.add(call.amount_atomic, None if cell.random else _call_high(call))
        columns["cell"].append(cell.cell)
        columns["source"].append(cell.paying_line)
        columns["calls"].append(len(cell.calls))
        columns["usd"].append(atomic_to_decimal(cell.amount_atomic))
        columns["usd_high"].append(None if cell_high is None else atomic_to_decimal(cell_high))
        columns["exact"].append(cell.exact)
        columns["note"].append("; ".join(said) or None)
    table = pa.table(columns, schema=SCHEMA)
    frame = PlanFrame(table.to_pandas(types_mapper=pd.ArrowDtype))
    listed = [b.as_json() for b in budgets.values()]
    frame.attrs["plan"] = {
        "total_usd": str(atomic_to_decimal(total)),
        "total_usd_high": str(atomic_to_decimal(high)) if high_known else None,
        "budgets": listed,
        "budget": listed[0] if listed else None,
        "writes": list(writes or []),
        "notes": sorted({n for c in connects for n in c.notes} | set(notes or [])),
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
        """The total (and its bound), then a line per budget (what the plan spends of it,
        what it had left, whether it fits), what the notebook would write, and the notes."""
        plan = self.attrs.get("plan", {})
        total = Decimal(plan.get("total_usd", "0"))
        text = f"total {total:.6f} USD"
        high = plan.get("total_usd_high")
        if high is not None and Decimal(high) != total:
            text += f" (at most {Decimal(high):.6f} USD)"
        elif high is None:
            text += " (no upper bound: some cells depend on answers or randomness)"
        for budget in plan.get("budgets", []):
            text += f"\nbudget {budget['name']!r}: plans {Decimal(budget['planned_usd']):.6f} USD"
            if budget.get("left_usd") is None:
                text += " (no total cap)"
                continue
            text += f" of {Decimal(budget['left_usd']):.6f} USD left: "
            if budget["fits"]:
                text += "fits"
            elif budget["refused_cells"]:
                cells = ", ".join(str(c) for c in budget["refused_cells"])
                text += f"does NOT fit (refused cell {cells})"
            else:
                text += "does NOT fit"
        writes = plan.get("writes", [])
        if writes:
            text += "\nwould write (in rehearsal into a scratch copy): " + ", ".join(writes)
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
        summary = html.escape(self.summary()).replace("\n", "<br>")
        return f"{table}<p><b>{summary}</b></p>"

    def to_plan_json(self) -> str:
        """``{"cells": [...], "total_usd", "total_usd_high", "budgets", "budget", "writes",
        "notes"}`` with every USD amount a decimal string (``x402lab plan --json``)."""
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

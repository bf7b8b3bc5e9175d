"""Spend from ledger rows: pure functions over a ledger DataFrame or Arrow table.

Statuses fall into the groups of the spend table: ``settled`` (paid), ``unknown`` (a signed
payment left and no answer came: exposure, it may have settled), ``in_flight`` (reserved or
signed right now), ``refused`` (the client would not sign: a failed check, the per-call cap,
or a budget with no room), ``rejected`` (the server refused the payment) and ``failed`` (the
request failed before settling, the reservation was given back, or the authorization expired
unused). Besides its status, a row may be ``held``: a signed payment the server refused,
which counts against its budget until its authorization expires. Only settled rows are money
spent; ``committed`` (settled + unknown + in flight + held) is what a budget's cap counts, the
same sum as ``Budget.state().committed_atomic``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

import pandas as pd
import pyarrow as pa

from x402lab.ledger import IN_FLIGHT, PaymentStatus, arrow_to_pandas, ledger_schema
from x402lab.money import ATOMIC_PER_USD
from x402lab.tables.spend import (
    DEFAULT_SPEND_BY,
    SPEND_VALUES,
    TIMELINE,
    UNIT_COSTS,
    spend_keys,
    spend_schema,
    typed,
)
from x402lab.tables.usd import usd_series

if TYPE_CHECKING:
    from x402lab.ledger import Ledger

S = PaymentStatus
# Every status in exactly one group (a test checks it).
STATUS_GROUPS: dict[str, tuple[PaymentStatus, ...]] = {
    "settled": (S.SETTLED,),
    "unknown": (S.UNKNOWN,),
    "in_flight": IN_FLIGHT,
    "refused": (S.REFUSED,),
    "rejected": (S.REJECTED,),
    "failed": (S.FAILED, S.RELEASED, S.EXPIRED),
}
# The groups that make up ``committed`` (with ``held``), as in ``BudgetState.committed_atomic``.
COMMITTED_GROUPS = ("settled", "unknown", "in_flight", "held")

LedgerRows: TypeAlias = "Ledger | pa.Table | pd.DataFrame"
# Ledger columns added after the first release, and what a table saved before them means.
_SAVED_BEFORE: dict[str, object] = {
    "held": False,
    "expires_at": None,
    "resends": 0,
    "resolved_by": None,
    "user": None,
    "prepaid": False,
}


def ledger_frame(rows: LedgerRows) -> pd.DataFrame:
    """Ledger rows as a DataFrame with the ledger's declared dtypes.

    Accepts a ``Ledger``, the Arrow table of ``Ledger.to_arrow()`` or a DataFrame with the
    ledger's columns (extra columns are dropped; a table saved before ``held`` was exported
    reads as nothing held). Raises KeyError for a missing column.
    """
    if hasattr(rows, "to_arrow") and hasattr(rows, "budget_state"):
        rows = rows.to_arrow()
    schema = ledger_schema()
    if isinstance(rows, pa.Table):
        for name, value in _SAVED_BEFORE.items():
            if name not in rows.schema.names:
                column = pa.array([value] * len(rows), schema.field(name).type)
                rows = rows.append_column(name, column)
        table = rows.select(schema.names).cast(schema)
    else:
        frame = pd.DataFrame(rows)
        # Saved before these columns were exported: nothing held, never sent again.
        frame = frame.assign(**{k: v for k, v in _SAVED_BEFORE.items() if k not in frame})
        if len(frame) == 0:
            table = schema.empty_table()
        else:
            table = pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)
    return arrow_to_pandas(table)


def budget_rows(ledger: Ledger, budget: str | None) -> pd.DataFrame:
    """``ledger_frame`` of ``ledger``, only the rows of ``budget`` when one is named."""
    frame = ledger_frame(ledger)
    if budget is not None:
        frame = frame[frame["budget"] == budget].reset_index(drop=True)
    return frame


def route_path(path: pd.Series) -> pd.Series:
    """Paths without their query string: a report purchase's path carries its selection,
    and grouping by it would make every purchase a route of its own."""
    return path.map(lambda text: text.split("?", 1)[0] if isinstance(text, str) else text)


def by_route(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``path`` cut to the route (see ``route_path``)."""
    out = frame.copy()
    out["path"] = route_path(out["path"])
    return out


def _usd(atomic: pd.Series) -> pd.Series:
    return usd_series(atomic)


def _with_groups(frame: pd.DataFrame) -> pd.DataFrame:
    """Per-row counts and amounts of each status group, summed later by the grouping."""
    out = pd.DataFrame(index=frame.index)
    amount = frame["amount_atomic"].astype("int64")
    out["payments"] = 1
    for group, statuses in STATUS_GROUPS.items():
        member = frame["status"].isin([str(status) for status in statuses])
        out[f"{group}_count"] = member.astype("int64")
        out[f"{group}_atomic"] = amount.where(member, 0)
    held = frame["held"].fillna(False).astype(bool)
    out["held_count"] = held.astype("int64")
    out["held_atomic"] = amount.where(held, 0)
    return out


def spend(
    rows: LedgerRows,
    by: str | Sequence[str] | None = DEFAULT_SPEND_BY,
    *,
    atomic: bool = False,
) -> pd.DataFrame:
    """Spend grouped by ``by`` (any of service, path, model, day, budget, user, payer; ``()``
    for totals).

    One row per group, sorted by the keys; a null path or model is a group of its own, and
    ``path`` is the route without its query string. The columns are
    ``spend_schema(by, atomic=atomic)``: counts and USD of settled, unknown exposure, in
    flight, held, committed (settled + unknown + in flight + held) and refused, and the counts
    of rejected and failed. The USD columns are exact decimals (``tables.usd``);
    ``atomic=True`` adds the integer sums of USDC base units (``settled_atomic``...). An
    empty ledger gives an empty table with the same columns. Raises ConfigError for an
    unknown key.
    """
    keys = spend_keys(by)
    schema = spend_schema(keys, atomic=atomic)
    frame = ledger_frame(rows)
    if len(frame) == 0:
        return typed(None, schema)
    parts = _with_groups(frame)
    frame = by_route(frame)
    for key in keys:
        parts[key] = frame["ts"].dt.floor("D") if key == "day" else frame[key]
    sums = [c for c in parts.columns if c not in keys]
    if keys:
        grouped = parts.groupby(list(keys), dropna=False, sort=True)[sums].sum().reset_index()
    else:
        # One row of totals, summed column by column so integers never pass through float.
        grouped = pd.DataFrame({column: [parts[column].sum()] for column in sums})
    grouped["committed_atomic"] = sum(grouped[f"{name}_atomic"] for name in COMMITTED_GROUPS)
    for name in (*COMMITTED_GROUPS, "committed", "refused"):
        grouped[f"{name}_usd"] = _usd(grouped[f"{name}_atomic"])
    for field in SPEND_VALUES:
        if pa.types.is_integer(field.type):
            grouped[field.name] = grouped[field.name].astype("int64")
    return typed(grouped, schema)


def settled_rows(rows: LedgerRows) -> pd.DataFrame:
    """The settled ledger rows, oldest first."""
    frame = ledger_frame(rows)
    settled = frame[frame["status"] == S.SETTLED]
    return settled.sort_values(["ts", "id"], kind="stable").reset_index(drop=True)


def timeline(rows: LedgerRows) -> pd.DataFrame:
    """Settled payments in time order with the running total (columns of ``TIMELINE``)."""
    settled = settled_rows(rows)
    if len(settled) == 0:
        return typed(None, TIMELINE)
    out = settled[["ts", "service", "path", "model", "budget", "amount_atomic"]].copy()
    out["amount_usd"] = _usd(out["amount_atomic"])
    out["cumulative_atomic"] = out["amount_atomic"].cumsum()
    out["cumulative_usd"] = _usd(out["cumulative_atomic"])
    return typed(out, TIMELINE)


def route_unit_costs(rows: LedgerRows) -> pd.DataFrame:
    """What one paid call costs per service, path and model, from settled ledger rows.

    One row per route and model: ``units`` is the number of settled calls, ``usd_per_unit``
    the mean price of a call and ``usd_per_1k`` the price of a thousand such calls.
    """
    settled = by_route(settled_rows(rows))
    if len(settled) == 0:
        return typed(None, UNIT_COSTS)
    keys = ["service", "path", "model"]
    grouped = (
        settled.groupby(keys, dropna=False, sort=True)["amount_atomic"]
        .agg(units="count", paid_atomic="sum")
        .reset_index()
    )
    grouped["source"] = "ledger"
    grouped["batch"] = None
    grouped["unit"] = "call"
    return typed(_per_unit(grouped), UNIT_COSTS)


def _per_unit(frame: pd.DataFrame) -> pd.DataFrame:
    frame["paid_usd"] = _usd(frame["paid_atomic"])
    units = frame["units"].astype("float64")
    frame["usd_per_unit"] = (frame["paid_atomic"] / ATOMIC_PER_USD / units).where(units > 0)
    frame["usd_per_1k"] = frame["usd_per_unit"] * 1000
    return frame

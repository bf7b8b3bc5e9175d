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

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, TypeAlias, TypeGuard

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from x402lab.analysis import budgets
from x402lab.ledger import IN_FLIGHT, PaymentStatus, arrow_to_pandas, ledger_schema
from x402lab.money import ATOMIC_PER_USD
from x402lab.tables.spend import (
    DEFAULT_SPEND_BY,
    TIMELINE,
    UNIT_COSTS,
    spend_keys,
    spend_schema,
    typed,
)
from x402lab.tables.usd import usd_array, usd_series

if TYPE_CHECKING:
    from x402lab.ledger import Ledger

S = PaymentStatus
INT64 = pa.int64()
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


def ledger_arrow(rows: LedgerRows) -> pa.Table:
    """Ledger rows as an Arrow table with the ledger's declared schema (see ``ledger_frame``
    for what is accepted). Raises KeyError for a missing column."""
    if is_ledger(rows):
        rows = rows.to_arrow()
    schema = ledger_schema()
    if isinstance(rows, pa.Table):
        for name, value in _SAVED_BEFORE.items():
            if name not in rows.schema.names:
                column = pa.array([value] * len(rows), schema.field(name).type)
                rows = rows.append_column(name, column)
        return rows.select(schema.names).cast(schema)
    frame = pd.DataFrame(rows)
    # Saved before these columns were exported: nothing held, never sent again.
    frame = frame.assign(**{k: v for k, v in _SAVED_BEFORE.items() if k not in frame})
    if len(frame) == 0:
        return schema.empty_table()
    return pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)


def ledger_frame(rows: LedgerRows) -> pd.DataFrame:
    """Ledger rows as a DataFrame with the ledger's declared dtypes.

    Accepts a ``Ledger``, the Arrow table of ``Ledger.to_arrow()`` or a DataFrame with the
    ledger's columns (extra columns are dropped; a table saved before ``held`` was exported
    reads as nothing held). Raises KeyError for a missing column.
    """
    return arrow_to_pandas(ledger_arrow(rows))


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


def _with_groups(
    table: pa.Table, lost: Collection[int] | None = None
) -> dict[str, pa.ChunkedArray | pa.Array]:
    """Per-row counts and amounts of each status group, summed later by the grouping; ``lost``
    the ids of settled payments whose answer was lost (``budgets.lost_payments``)."""
    amount = table["amount_atomic"]
    zero = pa.scalar(0, pa.int64())
    out: dict[str, pa.ChunkedArray | pa.Array] = {
        "payments": pa.array(np.ones(len(table), dtype="int64"))
    }
    for group, statuses in STATUS_GROUPS.items():
        member = pc.is_in(table["status"], value_set=pa.array([str(s) for s in statuses]))
        out[f"{group}_count"] = pc.cast(member, pa.int64())
        out[f"{group}_atomic"] = pc.if_else(member, amount, zero)
    held = pc.fill_null(table["held"], False)
    out["held_count"] = pc.cast(held, pa.int64())
    out["held_atomic"] = pc.if_else(held, amount, zero)
    settled = pc.equal(table["status"], str(S.SETTLED))
    gone = pc.and_(settled, pc.is_in(table["id"], value_set=pa.array(sorted(lost or ()), INT64)))
    out["lost_count"] = pc.cast(gone, pa.int64())
    out["lost_atomic"] = pc.if_else(gone, amount, zero)
    return out


def _key_column(table: pa.Table, key: str) -> pa.ChunkedArray:
    """The column a spend table groups ``key`` by: the day of ``ts`` (midnight UTC), the
    route of ``path`` (see ``route_path``), the ledger's own column otherwise."""
    if key == "day":
        return pc.floor_temporal(table["ts"], unit="day")
    if key == "path":
        return pc.list_element(pc.split_pattern(table["path"], "?", max_splits=1), 0)
    return table[key]


def spend(
    rows: LedgerRows,
    by: str | Sequence[str] | None = DEFAULT_SPEND_BY,
    *,
    atomic: bool = False,
    lost: Collection[int] | None = None,
    caps: Mapping[str, int | None] | None = None,
    now: datetime | None = None,
) -> pd.DataFrame:
    """Spend grouped by ``by`` (any of service, path, model, day, budget, user, payer; ``()``
    for totals).

    One row per group, sorted by the keys; a null path or model is a group of its own, and
    ``path`` is the route without its query string. The columns are
    ``spend_schema(by, atomic=atomic)``: counts and USD of settled, unknown exposure, in
    flight, held, committed (settled + unknown + in flight + held) and refused, and the counts
    of rejected and failed; ``lost``: the settled payments whose answer was never stored
    ("paid, answer lost", part of settled). The USD columns are exact decimals
    (``tables.usd``); ``atomic=True`` adds the integer sums of USDC base units
    (``settled_atomic``...). Grouped by ``"budget"`` alone, each line also has the budget's
    cap, what is left, its burn rate per day and the day the cap runs out at that rate
    (``analysis.budgets``). ``lost`` (payment ids) and ``caps`` are read from ``rows`` when
    it is a Ledger. An empty ledger gives an empty table with the same columns. Raises
    ConfigError for an unknown key.
    """
    keys = spend_keys(by)
    schema = spend_schema(keys, atomic=atomic)
    if is_ledger(rows):
        found = budgets.ledger_facts(rows)
        lost = found[0] if lost is None else lost
        caps = found[1] if caps is None else caps
    table = ledger_arrow(rows)
    if table.num_rows == 0:
        return typed(None, schema)
    # Summed in Arrow (int64 all the way, so sums stay exact): a fraction of pandas' cost.
    parts = _with_groups(table, lost)
    sums = list(parts)
    if keys:
        columns = {**parts, **{key: _key_column(table, key) for key in keys}}
        grouped = pa.table(columns).group_by(list(keys), use_threads=False)
        totals = grouped.aggregate([(name, "sum") for name in sums])
        totals = totals.rename_columns([name.removesuffix("_sum") for name in totals.column_names])
        order = [(key, "ascending") for key in keys]
        totals = totals.sort_by(order)  # nulls last, as pandas sorts them
        out = {name: totals[name] for name in (*keys, *sums)}
    else:
        out = {name: pa.array([pc.sum(parts[name]).as_py()], pa.int64()) for name in sums}
    committed = out["settled_atomic"]
    for name in COMMITTED_GROUPS[1:]:
        committed = pc.add(committed, out[f"{name}_atomic"])
    out["committed_atomic"] = committed
    for name in (*COMMITTED_GROUPS, "committed", "refused", "lost"):
        out[f"{name}_usd"] = usd_array(out[f"{name}_atomic"])
    lines = arrow_to_pandas(pa.table(out))
    if keys == ("budget",):
        lines = budgets.budget_columns(lines, arrow_to_pandas(table), caps or {}, now)
        for name in ("cap", "left"):
            lines[f"{name}_usd"] = usd_series(lines[f"{name}_atomic"])
    return typed(lines, schema)


def is_ledger(rows: object) -> TypeGuard[Ledger]:
    """Whether ``rows`` is a Ledger (read through its API) rather than its rows."""
    return hasattr(rows, "to_arrow") and hasattr(rows, "budget_state")


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
    grouped["cost_atomic"] = grouped["paid_atomic"]  # a call costs what it paid
    return typed(per_unit(grouped), UNIT_COSTS)


def per_unit(frame: pd.DataFrame) -> pd.DataFrame:
    """``UNIT_COSTS``' USD and rate columns from ``units``, ``paid_atomic`` and
    ``cost_atomic``: the rates are of the cost (for a batch re-run, what its rows' answers
    cost, not the nothing it paid)."""
    frame["paid_usd"] = _usd(frame["paid_atomic"])
    frame["cost_usd"] = _usd(frame["cost_atomic"])
    units = frame["units"].astype("float64")
    frame["usd_per_unit"] = (frame["cost_atomic"] / ATOMIC_PER_USD / units).where(units > 0)
    frame["usd_per_1k"] = frame["usd_per_unit"] * 1000
    return frame

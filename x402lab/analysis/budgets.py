"""What a lead asks of a ledger beyond its payments: each budget's cap and what is left, the
rate it burns and the day its cap runs out at that rate, and the money paid for answers that
were then lost.

Every function here takes a ``Ledger`` (or the figures read from one) and reads only: none
needs a lab or a wallet, so a read-only view of a team's ledger gets the same figures.

- ``budget_caps``: each budget's stored cap, from the ledger's budgets table.
- ``lost_payments``: the settled payments whose answer was never stored (a crash between
  the settlement and the store, or an answer that could not be read): ``paid, answer lost``
  in ``spend()`` and the cost report, never counted as saved.
- ``budget_columns``: the cap, what is left, the burn rate and the day the cap runs out, for
  the lines of ``spend(by="budget")``.

The burn rate is the settled spend of the last ``BURN_DAYS`` days over the time it was
spent in: from the budget's first payment in that window (or the window's start) to now, and
at least one day, so a budget a few minutes old is not extrapolated from minutes. The day the
cap runs out is now plus what is left at that rate (now once nothing is left; null without a
cap or without spend in the window).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pandas as pd

from x402lab.ledger import PaymentStatus, left_under_cap
from x402lab.money import ATOMIC_PER_USD

if TYPE_CHECKING:
    from x402lab.ledger import Ledger

BURN_DAYS = 7
_DAY = timedelta(days=1)


def budget_caps(ledger: Ledger) -> dict[str, int | None]:
    """Each budget's total cap in base units (None: no cap), as the ledger stores it."""
    return {
        str(row["name"]): (int(row["cap_atomic"]) if row["cap_atomic"] is not None else None)
        for row in ledger.query("SELECT name, cap_atomic FROM budgets")
    }


def lost_payments(ledger: Ledger) -> set[int]:
    """Ids of settled payments that bought answers none of which was stored: a claim of
    theirs is ``unknown`` (the row a batch shows ``paid_not_stored``) and none is ``done``."""
    rows = ledger.query(
        "SELECT DISTINCT c.ledger_id FROM claims c JOIN payments p ON p.id = c.ledger_id"
        " WHERE p.status = ? AND c.status = 'unknown' AND NOT EXISTS (SELECT 1 FROM claims d"
        " WHERE d.ledger_id = c.ledger_id AND d.status = 'done')",
        (str(PaymentStatus.SETTLED),),
    )
    return {int(row[0]) for row in rows}


def lost_flags(frame: pd.DataFrame, lost: Collection[int] | None) -> pd.Series:
    """Per ledger row of ``frame``: whether it is a settled payment whose answer was lost."""
    if not lost:
        return pd.Series(False, index=frame.index)
    return frame["id"].isin(set(lost)) & (frame["status"] == PaymentStatus.SETTLED)


def budget_columns(
    lines: pd.DataFrame,
    frame: pd.DataFrame,
    caps: Mapping[str, int | None],
    now: datetime | None = None,
) -> pd.DataFrame:
    """``lines`` (spend grouped by budget, with ``committed_atomic``) with each budget's
    ``cap_atomic``, ``left_atomic``, ``burn_usd_per_day`` and ``runs_out`` (see the module
    docstring); ``frame`` is the ledger rows they were summed from."""
    now = now or datetime.now(UTC)
    start = pd.Timestamp(now - BURN_DAYS * _DAY)
    settled = frame[frame["status"] == PaymentStatus.SETTLED]
    recent = settled[settled["ts"] >= start]
    out = lines.copy()
    caps_of, left_of, burn_of, out_of = [], [], [], []
    for name, committed in zip(out["budget"], out["committed_atomic"], strict=True):
        cap = caps.get(name)
        left = left_under_cap(cap, int(committed))
        mine = recent[recent["budget"] == name]
        burn = None
        if len(mine):
            since = max(start, mine["ts"].min())
            days = max((pd.Timestamp(now) - since) / pd.Timedelta(days=1), 1.0)
            burn = int(mine["amount_atomic"].sum()) / ATOMIC_PER_USD / days
        runs_out = None
        if left is not None and (left == 0 or burn):
            ahead = left / ATOMIC_PER_USD / burn if left and burn else 0.0
            # To the second: a forecast, and Arrow's microseconds would refuse nanoseconds.
            runs_out = (pd.Timestamp(now) + pd.Timedelta(days=ahead)).floor("s")
        caps_of.append(cap)
        left_of.append(left)
        burn_of.append(burn)
        out_of.append(runs_out)
    out["cap_atomic"] = pd.array(caps_of, dtype="Int64")
    out["left_atomic"] = pd.array(left_of, dtype="Int64")
    out["burn_usd_per_day"] = pd.Series(burn_of, index=out.index, dtype="float64")
    runs = pd.to_datetime(pd.Series(out_of, index=out.index, dtype=object), utc=True)
    out["runs_out"] = runs.astype("datetime64[us, UTC]")
    return out


def ledger_facts(ledger: Ledger) -> tuple[set[int], dict[str, int | None]]:
    """What ``spend`` and the cost report read from a ledger besides its payments: the lost
    payments and the budgets' caps."""
    return lost_payments(ledger), budget_caps(ledger)

"""A budget's running total: what counts against its cap, kept in its ``budgets`` row.

``budgets.counted_atomic`` is the sum of the budget's payments that count (``counted_sql``:
reserved, signed, settled and unknown rows, and refused signed ones still ``held``), kept up
to date inside every transaction that changes one, so a reservation costs the same with ten
rows or a million. It is recomputed from the payments only for a budget seen for the first
time. Every function here runs inside the caller's write transaction (``BEGIN IMMEDIATE``),
so a read-then-write is atomic across processes.
"""

from __future__ import annotations

from typing import Any

from x402lab.ledger.database import Tx
from x402lab.ledger.statuses import PaymentStatus, counted_sql

_ADD = "UPDATE budgets SET counted_atomic = counted_atomic + ? WHERE name = ?"


def take(tx: Tx, budget: str, cap_atomic: int | None, amount: int) -> bool:
    """Add ``amount`` to the running total if it stays within ``cap_atomic``, in one
    statement. False when it would not, or the budget has no row yet: the caller then takes
    the exact path (``expire_held``, ``counted``), since expired held rows still count here
    until ``expire_held`` runs (so this never lets spend past the cap)."""
    if cap_atomic is None:
        return tx.execute(_ADD, (amount, budget)).rowcount == 1
    sql = _ADD + " AND counted_atomic + ? <= ?"
    return tx.execute(sql, (amount, budget, amount, cap_atomic)).rowcount == 1


def counted(tx: Tx, budget: str, now_us: int) -> int:
    """The running total (created from the payments for a budget seen the first time)."""
    found = tx.scalar("SELECT counted_atomic FROM budgets WHERE name = ?", (budget,))
    if found is not None:
        return int(found)
    total = tx.scalar(
        "SELECT COALESCE(SUM(amount_atomic), 0) FROM payments WHERE budget = ?"
        f" AND {counted_sql()}",
        (budget,),
    )
    tx.execute(
        "INSERT INTO budgets (name, counted_atomic, created_us, updated_us) VALUES (?,?,?,?)",
        (budget, int(total), now_us, now_us),
    )
    return int(total)


def expire_held(tx: Tx, budget: str, cutoff: int, now_us: int) -> None:
    """Stop counting refused payments whose authorization can no longer settle (their
    ``valid_before`` is before ``cutoff``)."""
    _unhold(tx, budget, "held = 1 AND budget = ? AND valid_before < ?", (budget, cutoff), now_us)


def release_prepay_miss(tx: Tx, budget: str, request_key: str, now_us: int) -> int:
    """Stop counting the held prepay misses of ``request_key`` (refused prepaid payments of
    the same request, whose fresh challenge is being paid now); returns the amount freed.

    The server refused the predicted payment with a 402 (it keeps no challenge state and
    settled nothing), so the one request needs the budget once: its fresh payment is not
    blocked near the cap by its own miss. Only called when the cap would otherwise refuse.
    """
    where = "budget = ? AND request_key = ? AND held = 1 AND prepaid = 1 AND status = ?"
    return _unhold(tx, budget, where, (budget, request_key, str(PaymentStatus.REJECTED)), now_us)


def _unhold(tx: Tx, budget: str, where: str, params: tuple[Any, ...], now_us: int) -> int:
    """Stop counting the held rows ``where`` finds; returns the amount freed."""
    found = tx.one(
        f"SELECT COALESCE(SUM(amount_atomic), 0), COUNT(*) FROM payments WHERE {where}", params
    )
    if found is None or not found[1]:
        return 0
    tx.execute(f"UPDATE payments SET held = 0 WHERE {where}", params)
    add(tx, budget, -int(found[0]), now_us)
    return int(found[0])


def add(tx: Tx, budget: str, delta: int, now_us: int) -> None:
    """Move the running total by ``delta`` (a row started or stopped counting)."""
    if delta and tx.execute(_ADD, (delta, budget)).rowcount == 0:
        # First sight of this budget: its row is created from the payments table, which
        # already holds this change.
        counted(tx, budget, now_us)

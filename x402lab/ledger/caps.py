"""One cap per named budget, kept in the ``budgets`` table.

A team's processes name one budget; each would otherwise enforce the cap it was given, and the
last to connect would rewrite the one stored. Here the stored caps are the budget's: the first
process that names the budget with a cap sets them (``cap_set_by``, ``cap_set_us``), a later
one that names it without a cap takes them, one that asks for other caps is refused with a
ConfigError showing both, and only an explicit ``set_caps`` changes them. Reservations read the
stored cap inside their own transaction (``payments.take_budget``), so every process reserves
against the same figure, even one that connected before the cap changed.

Both functions run inside the caller's write transaction (``BEGIN IMMEDIATE`` or its
PostgreSQL lock), so two processes that connect at once cannot both set a budget's caps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from x402lab.errors import ConfigError
from x402lab.ledger.database import Database, Row, Tx
from x402lab.ledger.payments import budget_total
from x402lab.money import format_usd


@dataclass(frozen=True)
class BudgetCaps:
    """A budget's caps as the ledger keeps them (atomic units; None: no cap), and who set them
    when (``set_us`` None: never set; the next process that names a cap sets it)."""

    name: str
    cap_atomic: int | None
    per_call_atomic: int | None
    set_by: str | None = None
    set_us: int | None = None

    @property
    def is_set(self) -> bool:
        return self.set_us is not None

    def describe(self) -> str:
        """``'cap 2.80 USD, per call 0.50 USD (set by ana@laptop at 2026-12-01 21:40 UTC)'``."""
        text = f"cap {_usd(self.cap_atomic)}, per call {_usd(self.per_call_atomic)}"
        if self.set_us is not None:
            when = datetime.fromtimestamp(self.set_us / 1_000_000, tz=UTC)
            text += f" (set by {self.set_by or 'an earlier version'} at {when:%Y-%m-%d %H:%M} UTC)"
        return text


def _usd(atomic: int | None) -> str:
    return "none" if atomic is None else format_usd(atomic)


CAPS_SELECT = (
    "SELECT cap_atomic, per_call_atomic, cap_set_by, cap_set_us FROM budgets WHERE name = ?"
)


def caps_of(name: str, row: Row) -> BudgetCaps:
    """The caps of a ``CAPS_SELECT`` row."""
    return BudgetCaps(name, row[0], row[1], row[2], row[3])


def read_caps(tx: Tx, name: str) -> BudgetCaps | None:
    """The stored caps of budget ``name`` (None: the ledger has no row for it)."""
    row = tx.one(CAPS_SELECT, (name,))
    return None if row is None else caps_of(name, row)


def agree_caps(
    tx: Tx,
    name: str,
    cap_atomic: int | None,
    per_call_atomic: int | None,
    who: str,
    now_us: int,
) -> BudgetCaps:
    """The caps budget ``name`` runs under, for a process that asks for ``cap_atomic`` and
    ``per_call_atomic`` (None: whatever is stored). The first one to give a cap sets both;
    afterwards a given cap must equal the stored one. Raises ConfigError (both caps shown, and
    how to change them) otherwise."""
    stored = read_caps(tx, name)
    asked = cap_atomic is not None or per_call_atomic is not None
    if stored is not None and stored.is_set:
        differs = [
            (what, have, want)
            for what, have, want in (
                ("cap", stored.cap_atomic, cap_atomic),
                ("per-call cap", stored.per_call_atomic, per_call_atomic),
            )
            if want is not None and want != have
        ]
        if differs:
            asked_text = ", ".join(f"{what} {_usd(want)}" for what, _, want in differs)
            raise ConfigError(
                f"budget {name!r} already has {stored.describe()} in the ledger, and this"
                f" connect() asks for {asked_text}. Name the budget without usd= (and"
                f" per_call_usd=) to use the stored caps, or change them for everyone"
                f" explicitly: lab.budget.set_cap(usd=...)"
            )
        return stored
    if not asked:
        budget_total(tx, name, now_us)  # its row (and running total); its caps stay unset
        return stored or BudgetCaps(name, None, None)
    return set_caps(tx, name, cap_atomic, per_call_atomic, who, now_us)


def set_caps(
    tx: Tx,
    name: str,
    cap_atomic: int | None,
    per_call_atomic: int | None,
    who: str,
    now_us: int,
) -> BudgetCaps:
    """Store budget ``name``'s caps (None: no cap), set by ``who`` now; returns them."""
    budget_total(tx, name, now_us)  # its row, created from its payments the first time
    tx.execute(
        "UPDATE budgets SET cap_atomic = ?, per_call_atomic = ?, cap_set_by = ?,"
        " cap_set_us = ?, updated_us = ? WHERE name = ?",
        (cap_atomic, per_call_atomic, who, now_us, now_us, name),
    )
    return BudgetCaps(name, cap_atomic, per_call_atomic, who, now_us)


class BudgetCapsBook:
    """``ledger.caps``: the budgets' caps of one database, written as ``who()`` (the ledger's
    user, and now in microseconds)."""

    def __init__(self, db: Database, who: Callable[[], tuple[str, int]]) -> None:
        self._db = db
        self._who = who

    def agree(self, name: str, cap_atomic: int | None, per_call_atomic: int | None) -> BudgetCaps:
        """``agree_caps`` in a transaction of its own."""
        with self._db.transaction() as tx:
            return agree_caps(tx, name, cap_atomic, per_call_atomic, *self._who())

    def set(self, name: str, cap_atomic: int | None, per_call_atomic: int | None) -> BudgetCaps:
        """``set_caps`` in a transaction of its own: spend already committed is kept (a cap
        below it refuses every new reservation)."""
        with self._db.transaction() as tx:
            return set_caps(tx, name, cap_atomic, per_call_atomic, *self._who())

    def read(self, name: str) -> BudgetCaps | None:
        """Budget ``name``'s stored caps (None: the ledger has no row for it); writes nothing."""
        rows = self._db.read(CAPS_SELECT, (name,))
        return caps_of(name, rows[0]) if rows else None

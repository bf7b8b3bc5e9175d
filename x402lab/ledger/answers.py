"""An answer is as durable as its payment: a settlement is committed with the answer it bought.

A paid request's receipt comes with its response headers; what it bought (a media job's
queue id, report bodies, a batch's rows) is stored once the body is read and parsed.
Committed apart, a crash between the two commits loses an answer that was paid for: the
next run sees the payment and, never paying twice, cannot get the answer back.

So a caller that stores an answer opens ``hold_settlements(ledger)`` around its paid
request. Inside the block ``Payer.record`` does not commit a receipt's settlement: it holds
it here, and the caller stores the answer in ``answer_transaction(db, held)``, which settles
the held rows in that same transaction (SQLite or PostgreSQL alike; in a batch's group
commit when ``grouped``). Whatever is still held when the block ends (the caller raised,
the answer was unusable) is committed then, on its own: no settlement is ever dropped.
Without an open block (a plain ``lab.call``) a settlement is committed at once.

A crash while a settlement is held leaves its row ``signed`` by a process that is gone:
recovery makes it ``unknown`` and its claim shows it maybe paid, never bought again on its
own. Those are the requests still on the wire, the most a crash can lose.

The block is per asyncio task (a context variable), so concurrent tasks never commit each
other's settlements; a task it starts that outlives it commits at once.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from x402lab.errors import ConfigError

if TYPE_CHECKING:
    from x402lab.ledger.database import Database, Tx
    from x402lab.ledger.store import Ledger

_OPEN: contextvars.ContextVar[HeldSettlements | None] = contextvars.ContextVar(
    "x402lab_held_settlements", default=None
)


class HeldSettlements:
    """The settlements of one caller's paid requests, not committed yet."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._held: list[tuple[int, dict[str, Any]]] = []
        self._open = True

    def __repr__(self) -> str:
        return f"HeldSettlements({[row_id for row_id, _ in self._held]})"

    @property
    def rows(self) -> list[int]:
        """The ledger rows whose settlement is held."""
        return [row_id for row_id, _ in self._held]

    def hold(self, row_id: int, settled: dict[str, Any]) -> bool:
        """Hold the settlement of row ``row_id`` (``Ledger.record_settled``'s arguments);
        False once the block has ended (the caller commits it at once then)."""
        if not self._open:
            return False
        self._held.append((row_id, dict(settled)))
        return True

    @contextlib.contextmanager
    def transaction(self, *, grouped: bool = False) -> Iterator[Tx]:
        """A write transaction of the ledger that settles the held rows with what the
        caller writes in it; they are no longer held once it commits."""
        taken = list(self._held)
        with self.ledger.db.transaction(grouped=grouped) as tx:
            for row_id, settled in taken:
                self.ledger.settle_in(tx, row_id, **settled)
            yield tx
        del self._held[: len(taken)]  # held meanwhile: kept, after these

    def commit(self) -> None:
        """Commit the settlements still held, in one transaction of their own (in a batch's
        group commit, as ``Ledger.record_settled`` would have)."""
        if self._held:
            with self.transaction(grouped=True):
                pass


@contextlib.contextmanager
def hold_settlements(ledger: Ledger) -> Iterator[HeldSettlements]:
    """Within this block (in this task), settlements of ``ledger``'s payments wait to be
    committed with their answer (``answer_transaction``); those left are committed when it
    ends, whether it returns or raises."""
    held = HeldSettlements(ledger)
    token = _OPEN.set(held)
    try:
        yield held
    finally:
        _OPEN.reset(token)
        held._open = False
        held.commit()


def held_for(ledger: Ledger) -> HeldSettlements | None:
    """The open block of this task that holds ``ledger``'s settlements, or None."""
    held = _OPEN.get()
    if held is None or held.ledger.db is not ledger.db or not held._open:
        return None
    return held


def answer_transaction(
    db: Database, held: HeldSettlements | None, *, grouped: bool = False
) -> contextlib.AbstractContextManager[Tx]:
    """The transaction that stores an answer: with ``held``, the one that also settles the
    payments held for it; else an ordinary one of ``db``."""
    if held is None:
        return db.transaction(grouped=grouped)
    if held.ledger.db is not db:
        raise ConfigError(
            f"the answer's store ({db.url}) is not the ledger that holds its settlement"
            f" ({held.ledger.db.url})"
        )
    return held.transaction(grouped=grouped)

"""What became of a signed payment: settled with the answer it bought, or not known yet.

An answer is as durable as its payment: a settlement is committed with the answer it bought
(a media job's queue id, report bodies, a batch's rows), which is stored once the body is read,
after the receipt came with the headers. Committed apart, a crash between the two commits
would lose an answer paid for, never to be bought again. So a caller that stores an answer
opens ``hold_settlements(ledger)`` around its paid request: inside it ``Payer.record`` holds
a receipt's settlement instead of committing it, and ``answer_transaction(db, held)`` settles
the held rows in the transaction that stores the answer (in a batch's group commit when
``grouped``). What is still held when the block ends (the caller raised, the answer was
unusable) is committed then, on its own: no settlement is ever dropped. Without an open block
(a plain ``lab.call``) a settlement is committed at once. A crash while one is held leaves
its row ``signed`` by a process that is gone: recovery makes it ``unknown``, never bought
again on its own. The block is per asyncio task (a context variable), so concurrent tasks
never commit each other's settlements; a task it starts that outlives it commits at once.

Signed payments whose outcome is not known yet (``signed`` or ``unknown``): finding them,
taking one up again to send its same signed payload, rows left by a process that died, and
the moves reconciliation makes. A row is *taken up* when a later call for the same request
key sends its stored payload again (``resume``): an ``unknown`` row, or a ``signed`` row whose
owner process is gone (``database.owner_gone``), becomes ``signed`` by this process (so no
other caller sends it at the same time). Its nonce can settle only once, so sending it again
never pays twice. Nothing here signs anything.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from x402lab.errors import ConfigError
from x402lab.ledger.database import (
    Database,
    GoneOwners,
    Row,
    Tx,
    chunks,
    marks,
    process_owner,
    record_fields,
)
from x402lab.ledger.payments import IfNull, move_payments
from x402lab.ledger.statuses import UNRESOLVED, PaymentStatus, Resolution, in_sql

S = PaymentStatus
#: A stored payload is sent again only while this much of its window is left (a server
#: refuses an authorization about to expire; clocks differ).
RESEND_MARGIN_S = 20
#: A claim hands a key back to pay (its stored payload sent again) only with this much left:
#: room for the time between the claim and the payment.
CLAIM_RESEND_MARGIN_S = RESEND_MARGIN_S + 60
_OPEN_SQL = in_sql("status", UNRESOLVED)
_SELECT = (
    "SELECT id, status, service, request_key, budget, amount_atomic, payer, nonce,"
    " valid_before, network, asset, owner, resends, ts_us, payment_header FROM payments"
)
#: What the error column says of a row whose sender died with it in flight.
ORPHANED = "the process that sent it ({owner}) stopped before an answer arrived"
_NEVER_SIGNED = "reserved by a process that stopped before signing"


# -- payments whose outcome is open --------------------------------------------------------


@dataclass(frozen=True)
class OpenPayment:
    """A signed payment whose outcome is not known yet (``signed`` or ``unknown``), as the
    ledger holds it: what re-sending and reconciliation with the chain need."""

    id: int
    status: str
    service: str
    request_key: str | None
    budget: str
    amount_atomic: int
    payer: str | None
    nonce: str | None
    valid_before: int | None
    network: str | None
    asset: str | None
    owner: str | None
    resends: int
    ts_us: int
    header: str | None = field(default=None, repr=False)

    @property
    def expires_at(self) -> datetime | None:
        """When the authorization stops being valid (its ``validBefore``), UTC."""
        if self.valid_before is None:
            return None
        return datetime.fromtimestamp(self.valid_before, tz=UTC)


def open_payment(row: Row) -> OpenPayment:
    return OpenPayment(
        **record_fields(
            row,
            OpenPayment,
            amount_atomic=int(row["amount_atomic"]),
            resends=int(row["resends"] or 0),
            header=row["payment_header"],
        )
    )


@dataclass(frozen=True)
class Move:
    """One change reconciliation makes: row ``row_id`` to ``status`` (settled or expired)."""

    row_id: int
    status: PaymentStatus
    tx_hash: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Applied:
    """A move that was made: the row as it was, and the status it has now."""

    before: OpenPayment
    after: PaymentStatus
    tx_hash: str | None
    note: str | None


def resumable(row: OpenPayment, gone: GoneOwners) -> bool:
    """Whether ``row`` may be sent again by a caller that is not its sender: it is
    ``unknown`` (its sender gave up on it), or ``signed`` by a process that is gone."""
    if not row.header:
        return False
    return row.status == S.UNKNOWN or (row.status == S.SIGNED and gone(row.owner))


def resume(db: Database, request_key: str, *, valid_until: int, now_us: int) -> OpenPayment | None:
    """Take up a signed payment of ``request_key`` to send its same payload again: an
    ``unknown`` one, or a ``signed`` one whose sender is gone, whose authorization is valid
    at least until ``valid_until``. It becomes ``signed`` by this process; returns it (as it
    was), or None when there is none."""
    where = (
        f" WHERE request_key = ? AND {_OPEN_SQL} AND payment_header IS NOT NULL"
        " AND valid_before >= ? ORDER BY id"
    )
    found = db.read(_SELECT + where, (request_key, valid_until))
    if not found:  # the common case: one indexed read, no write
        return None
    gone = GoneOwners()
    owner = process_owner()
    with db.transaction() as tx:
        for row in tx.all(_SELECT + where, (request_key, valid_until)):
            payment = open_payment(row)
            if not resumable(payment, gone):
                continue
            if payment.status == S.UNKNOWN:
                move_payments(tx, [payment.id], S.SIGNED, now_us, {"owner": owner})
            else:
                tx.execute(
                    "UPDATE payments SET owner = ?, updated_us = ? WHERE id = ?",
                    (owner, now_us, payment.id),
                )
            return payment
    return None


def unresolved(
    db: Database, *, ids: Iterable[int] | None = None, orphaned: bool = False
) -> list[OpenPayment]:
    """The ``signed`` and ``unknown`` rows with a nonce (of ``ids`` when given), oldest
    first; with ``orphaned``, only those whose sender is a process of this host that is
    gone."""
    base = f"{_SELECT} WHERE {_OPEN_SQL} AND nonce IS NOT NULL"
    if ids is None:
        rows = [open_payment(row) for row in db.read(base + " ORDER BY id")]
    else:
        rows = []
        for chunk in chunks(sorted(set(ids))):
            rows += [
                open_payment(row)
                for row in db.read(f"{base} AND id IN ({marks(len(chunk))}) ORDER BY id", chunk)
            ]
    if orphaned:
        gone = GoneOwners()
        rows = [row for row in rows if gone(row.owner)]
    return rows


def recover(db: Database, *, now_us: int, cutoff: int, reserved_older_than_s: float) -> int:
    """Close the rows a stopped process left open; returns how many moved (see
    ``Ledger.recover_interrupted``). ``cutoff``: a signed row whose window ends before it
    is orphaned whatever its sender."""
    stale_us = now_us - int(reserved_older_than_s * 1_000_000)
    gone = GoneOwners()
    orphaned: dict[str, list[int]] = {}  # note -> signed rows whose sender is gone
    abandoned: list[int] = []  # reserved rows never signed
    with db.transaction() as tx:
        rows = tx.all(
            "SELECT id, status, valid_before, owner, ts_us FROM payments"
            f" WHERE {in_sql('status', (S.RESERVED, S.SIGNED))}"
        )
        for row in rows:
            owner = row["owner"]
            if row["status"] == S.SIGNED:
                expired = row["valid_before"] is not None and row["valid_before"] < cutoff
                if expired or gone(owner):
                    orphaned.setdefault(ORPHANED.format(owner=owner or "?"), []).append(row["id"])
            elif row["ts_us"] < stale_us or gone(owner):
                abandoned.append(row["id"])
        for note, ids in orphaned.items():
            # An earlier note (a send that failed before) is kept.
            move_payments(tx, ids, S.UNKNOWN, now_us, {"error": IfNull(note)})
        move_payments(tx, abandoned, S.RELEASED, now_us, {"error": _NEVER_SIGNED})
    return len(abandoned) + sum(len(ids) for ids in orphaned.values())


def apply(db: Database, moves: Sequence[Move], *, now_us: int) -> list[Applied]:
    """Make reconciliation's moves in one transaction; returns those made (a row that is no
    longer ``signed`` or ``unknown`` by now, concluded meanwhile, is left as it is)."""
    if not moves:
        return []
    by_id = {move.row_id: move for move in moves}
    applied: list[Applied] = []
    with db.transaction() as tx:
        for chunk in chunks(sorted(by_id)):
            rows = tx.all(f"{_SELECT} WHERE id IN ({marks(len(chunk))}) ORDER BY id", chunk)
            for row in rows:
                before = open_payment(row)
                if before.status not in UNRESOLVED:
                    continue
                move = by_id[before.id]
                fields: dict[str, object] = {"resolved_by": Resolution.CHAIN}
                if move.tx_hash:
                    fields["tx_hash"] = move.tx_hash
                if move.note:
                    fields["error"] = move.note
                move_payments(tx, [before.id], move.status, now_us, fields)
                applied.append(Applied(before, move.status, move.tx_hash, move.note))
    return applied


# -- settlements held until their answer is stored -----------------------------------------

_HELD: contextvars.ContextVar[HeldSettlements | None] = contextvars.ContextVar(
    "x402lab_held_settlements", default=None
)


class SettlingLedger(Protocol):
    """What holding settlements needs of a ledger (``store.Ledger`` is one): its database,
    and a row's settlement inside a transaction of it."""

    @property
    def db(self) -> Database: ...

    def settle_in(
        self, tx: Tx, row_id: int, *, tx_hash: str | None, payer: str | None, **outcome: Any
    ) -> None: ...


class HeldSettlements:
    """The settlements of one caller's paid requests, not committed yet."""

    def __init__(self, ledger: SettlingLedger) -> None:
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
def hold_settlements(ledger: SettlingLedger) -> Iterator[HeldSettlements]:
    """Within this block (in this task), settlements of ``ledger``'s payments wait to be
    committed with their answer (``answer_transaction``); those left are committed when it
    ends, whether it returns or raises."""
    held = HeldSettlements(ledger)
    token = _HELD.set(held)
    try:
        yield held
    finally:
        _HELD.reset(token)
        held._open = False
        held.commit()


def held_for(ledger: SettlingLedger) -> HeldSettlements | None:
    """The open block of this task that holds ``ledger``'s settlements, or None."""
    held = _HELD.get()
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

"""The ``payments`` and ``budgets`` tables: a payment's records, the one way a row is
written (``insert_payment``) and the one way its status changes (``move_payments``; a
receipt's ``Settlement`` is such a move, made when its caller commits it), and the budgets'
running totals that every such write keeps.

Nothing else in x402lab inserts a payment or writes ``payments.status`` (docs/money.md, money
rule 8; ``tests/ledger/test_status_writes.py`` reads the source to keep it so; the
``claims`` table's twins are in ``claim_rows``). A new row starts in an initial status
(``statuses.INITIAL``); ``move_payments`` checks every later move against the allowed ones
(``statuses.TRANSITIONS``) and raises ConfigError naming the row, the status it is in and the
one asked for; the caller's transaction then rolls back, so a refused move changes nothing.
It moves many rows at once in set-based statements, and reads a row's status again only to
name the one that could not move. A move also keeps a payment's bookkeeping: ``held`` (a
signed payment the server refused counts until the chain says what became of it), the
forgotten signed payload once its outcome is known, and the budget's running total
(``add_to_budget``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from x402lab.errors import ConfigError
from x402lab.ledger.database import CommitGroup, Database, Row, Tx, chunks, marks, record_fields
from x402lab.ledger.statuses import (
    COUNTING,
    HOLDABLE,
    INITIAL,
    SAYS_LESS,
    TRANSITIONS,
    UNRESOLVED,
    OpenPayment,
    PaymentStatus,
    counted_sql,
    counts,
    in_sql,
)

S = PaymentStatus
#: A stored payload is sent again only while this much of its window is left (a server
#: refuses an authorization about to expire; clocks differ).
RESEND_MARGIN_S = 20
#: A claim hands a key back to pay (its stored payload sent again) only with this much left:
#: room for the time between the claim and the payment.
CLAIM_RESEND_MARGIN_S = RESEND_MARGIN_S + 60
#: ``payment_header=DROP``: forget a row's signed payload (its nonce is known to be used).
DROP = object()
#: Columns a move sets itself: a caller's fields never name them.
_OWN_COLUMNS = frozenset({"id", "status", "held", "updated_us"})
_COLUMN = re.compile(r"[a-z_]+")


@dataclass(frozen=True)
class PaymentMeta:
    """What a ledger row says about the call it pays for."""

    service: str
    method: str | None = None
    path: str | None = None
    model: str | None = None
    request_key: str | None = None
    pay_to: str | None = None
    network: str | None = None
    asset: str | None = None
    upstream_usd: float | None = None
    price_mult: float | None = None
    #: Paid with the first request, for a predicted challenge (``x402lab.payments.prediction``).
    prepaid: bool = False


@dataclass(frozen=True)
class SignedAuthorization:
    """What the ledger keeps of a signed authorization: enough to find it on chain, and the
    signed payload's header value, to send the same authorization again (it holds no secret,
    but it is kept out of reprs)."""

    nonce: str
    payer: str
    valid_before: int
    header: str | None = field(default=None, repr=False)


#: The columns of an ``OpenPayment`` (``open_payment`` reads them).
OPEN_SELECT = (
    "SELECT id, status, service, request_key, budget, amount_atomic, payer, nonce,"
    " valid_before, network, asset, owner, resends, ts_us, payment_header, held FROM payments"
)


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
class IfNull:
    """A field value written only where the column is empty (``COALESCE(column, value)``)."""

    value: Any


# -- the inserter and the transition function ----------------------------------------------


def insert_payment(
    tx: Tx,
    budget: str,
    amount: int,
    meta: PaymentMeta,
    status: PaymentStatus,
    who: tuple[int, str, str],
    *,
    signed: SignedAuthorization | None = None,
    count: bool = True,
    error: str | None = None,
) -> int:
    """Insert a payment row inside ``tx``; returns its id. ``who``: when and by whom (the
    time in microseconds, the process owner, the user label). ``count``: add it to the
    budget's running total (unless the caller already has, with ``take_budget``).

    The table's one inserter: a new row starts in an initial status (``statuses.INITIAL``);
    every later status is a move (``move_payments``). Raises ConfigError for another.
    """
    if status not in INITIAL:
        raise ConfigError(f"a new ledger row cannot start as {str(status)!r}")
    now, owner, user = who
    row_id = tx.insert(
        "INSERT INTO payments (ts_us, updated_us, service, method, path, model, request_key,"
        " budget, amount_atomic, upstream_usd, price_mult, status, pay_to, network, asset,"
        " error, nonce, payer, valid_before, payment_header, owner, prepaid, user_label)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            now,
            now,
            meta.service,
            meta.method,
            meta.path,
            meta.model,
            meta.request_key,
            budget,
            int(amount),
            meta.upstream_usd,
            meta.price_mult,
            str(status),
            meta.pay_to,
            meta.network,
            meta.asset,
            error,
            signed.nonce if signed else None,
            signed.payer if signed else None,
            signed.valid_before if signed else None,
            signed.header if signed else None,
            owner,
            int(meta.prepaid),
            user,
        ),
    )
    if count and status in COUNTING:
        add_to_budget(tx, budget, int(amount), now)
    return row_id


def move_payment(
    db: Database,
    row_id: int,
    status: PaymentStatus,
    now_us: int,
    fields: Mapping[str, Any],
    *,
    group: CommitGroup | None = None,
) -> None:
    """``move_payments`` of one row in a transaction of its own (``group`` as for
    ``Database.transaction``).

    The common move, an in-flight row to ``settled``, is one statement
    (``_settle_in_flight``). Any other row takes the full rules of ``move_payments``,
    reading the row again.
    """
    if status == S.SETTLED:
        sql, params = _settle_in_flight([row_id], now_us, fields)
        if db.write_one(sql, params, group=group) == 1:
            return
    with db.transaction(group=group) as tx:
        move_payments(tx, [row_id], status, now_us, fields)


def move_payments(
    tx: Tx,
    ids: Iterable[int],
    status: PaymentStatus,
    now_us: int,
    fields: Mapping[str, Any] | None = None,
) -> None:
    """Move the payment rows ``ids`` to ``status`` inside ``tx`` (allowed moves:
    ``statuses.TRANSITIONS``), setting ``fields`` (column -> value; None values are left
    out, ``IfNull`` values fill only an empty column, ``payment_header=DROP`` forgets the
    signed payload).

    Rows all in flight settle in one statement (``_settle_in_flight``). A settled row
    ignores a move that says less (``statuses.SAYS_LESS``): only a missing ``tx_hash`` is
    filled in. Raises ConfigError for a row missing or in any status the move
    does not start from. A refused signed payment (``HOLDABLE``, from ``signed`` or
    ``unknown``) is ``held``; the budgets' running totals follow what starts or stops
    counting.
    """
    given = _fields(fields or {})
    sources = TRANSITIONS.get(status, ())
    if status not in UNRESOLVED or given.get("payment_header") is DROP:
        given["payment_header"] = None  # its outcome is known: never sent again
    tx_hash = given.get("tx_hash")
    assignments, values = _assignments(given), _values(given)
    for chunk in chunks(list(dict.fromkeys(ids))):
        settle = _settle_in_flight(chunk, now_us, fields or {}) if status == S.SETTLED else None
        if settle is not None and tx.execute(*settle).rowcount == len(chunk):
            continue  # all in flight: settled in one statement, no total changes
        rows = {
            row["id"]: row
            for row in tx.all(
                "SELECT id, status, amount_atomic, budget, valid_before, held, tx_hash"
                f" FROM payments WHERE id IN ({marks(len(chunk))})",
                chunk,
            )
        }
        by_held: dict[bool, list[int]] = {False: [], True: []}
        delta: dict[str, int] = {}
        fill: list[int] = []
        for row_id in chunk:
            row = rows.get(row_id)
            current = row["status"] if row is not None else "missing"
            if row is not None and current == S.SETTLED and status in SAYS_LESS:
                # Settled is final: reconciliation may have settled a row still in flight,
                # so a later receipt adds at most its transaction hash.
                if status == S.SETTLED and tx_hash and not row["tx_hash"]:
                    fill.append(row_id)
                continue
            if row is None or current not in sources:
                raise ConfigError(
                    f"ledger row {row_id} cannot move to {str(status)!r} from {str(current)!r}"
                )
            # A signed payment the server refused keeps counting until the chain resolves it.
            held = status in HOLDABLE and current in UNRESOLVED and row["valid_before"] is not None
            by_held[held].append(row_id)
            was_counted = counts(current, bool(row["held"]))
            if was_counted != counts(status, held):
                amount = int(row["amount_atomic"])
                budget = row["budget"]
                delta[budget] = delta.get(budget, 0) + (-amount if was_counted else amount)
        for held, moving in by_held.items():
            if not moving:
                continue
            changed = tx.execute(
                f"UPDATE payments SET status = ?, updated_us = ?, held = ?{assignments}"
                f" WHERE id IN ({marks(len(moving))}) AND {in_sql('status', sources)}",
                (str(status), now_us, int(held), *values, *moving),
            ).rowcount
            if changed != len(moving):  # the rows were read under this lock: a broken store
                raise ConfigError(f"ledger rows {moving} changed while moving to {str(status)!r}")
        if fill:
            tx.execute(
                f"UPDATE payments SET tx_hash = ?, updated_us = ? WHERE id IN ({marks(len(fill))})",
                (tx_hash, now_us, *fill),
            )
        for budget, amount in delta.items():
            add_to_budget(tx, budget, amount, now_us)


def _settle_in_flight(
    ids: Sequence[int], now_us: int, fields: Mapping[str, Any]
) -> tuple[str, tuple[Any, ...]]:
    """The statement that settles those of ``ids`` in flight (``signed`` or ``unknown``:
    counted, never held, so no total changes), and its parameters; its count of rows
    changed says whether every row was."""
    given = _fields(fields)
    given.pop("payment_header", None)  # a settled row never keeps its payload
    sql = (
        "UPDATE payments SET status = ?, updated_us = ?, held = 0, payment_header = NULL"
        f"{_assignments(given)} WHERE id IN ({marks(len(ids))})"
        f" AND {in_sql('status', UNRESOLVED)}"
    )
    return sql, (str(S.SETTLED), now_us, *_values(given), *ids)


class Settlement:
    """A receipt's settlement of row ``row_id``, not committed yet (``Ledger.settlement``; a
    paid reply carries it when its caller stores the answer).

    Committed once: with the answer it bought, in the transaction that stores it
    (``transaction``), or alone (``commit``) by a caller with no answer to store. Until then
    its row stays ``signed``: counted, and after a crash taken for a payment whose answer
    was lost (recovery makes it ``unknown``; never bought again on its own).
    """

    def __init__(
        self, db: Database, row_id: int, fields: dict[str, Any], now_us: Callable[[], int]
    ) -> None:
        self.db = db
        self.row_id = row_id
        self.committed = False
        self._fields = fields
        self._now_us = now_us

    def __repr__(self) -> str:
        state = "committed" if self.committed else "not committed"
        return f"Settlement(ledger row {self.row_id}, {state})"

    @contextlib.contextmanager
    def transaction(self, db: Database, *, group: CommitGroup | None = None) -> Iterator[Tx]:
        """A write transaction of ``db`` that settles the row with what the caller writes in
        it (an ordinary one once committed). Raises ConfigError when ``db`` is not the
        database of the row."""
        if db is not self.db:
            raise ConfigError(
                f"the answer's store ({db.url}) is not the ledger of its settlement ({self.db.url})"
            )
        with db.transaction(group=group) as tx:
            if not self.committed:
                move_payments(tx, [self.row_id], S.SETTLED, self._now_us(), self._fields)
            yield tx
        self.committed = True

    def commit(self, *, group: CommitGroup | None = None) -> None:
        """Commit the settlement alone (``group``: a batch run's), unless it is committed."""
        if not self.committed:
            move_payment(self.db, self.row_id, S.SETTLED, self._now_us(), self._fields, group=group)
            self.committed = True


def answer_transaction(
    db: Database, settlement: Settlement | None, *, group: CommitGroup | None = None
) -> contextlib.AbstractContextManager[Tx]:
    """The transaction of ``db`` that stores an answer: with ``settlement``, the one that
    also commits the settlement of the payment that bought it."""
    if settlement is None:
        return db.transaction(group=group)
    return settlement.transaction(db, group=group)


# -- budgets: the running total ------------------------------------------------------------
#
# ``budgets.counted_atomic`` is the sum of the budget's payments that count (``counted_sql``:
# reserved, signed, settled and unknown rows, and refused signed ones still ``held``), kept up
# to date inside every transaction that changes one, so a reservation costs the same with ten
# rows or a million. It is recomputed from the payments only for a budget seen for the first
# time. Every function here runs inside the caller's write transaction (``BEGIN IMMEDIATE``),
# so a read-then-write is atomic across processes.


_ADD = "UPDATE budgets SET counted_atomic = counted_atomic + ? WHERE name = ?"
#: The cap a reservation is measured against: the stored one once set (``caps``), else the
#: caller's.
_CAP = "(CASE WHEN cap_set_us IS NULL THEN ? ELSE cap_atomic END)"


def take_budget(tx: Tx, budget: str, cap_atomic: int | None, amount: int) -> bool:
    """Add ``amount`` to the running total if it stays within the budget's stored cap (or
    ``cap_atomic`` when none is stored: ``caps``), in one statement. False when it would not,
    or the budget has no row yet: the caller then takes the exact path (``budget_total``)."""
    sql = _ADD + f" AND ({_CAP} IS NULL OR counted_atomic + ? <= {_CAP})"
    return tx.execute(sql, (amount, budget, cap_atomic, amount, cap_atomic)).rowcount == 1


def budget_total(tx: Tx, budget: str, now_us: int) -> int:
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


def add_to_budget(tx: Tx, budget: str, delta: int, now_us: int) -> None:
    """Move the running total by ``delta`` (a row started or stopped counting)."""
    if delta and tx.execute(_ADD, (delta, budget)).rowcount == 0:
        # First sight of this budget: its row is created from the payments table, which
        # already holds this change.
        budget_total(tx, budget, now_us)


# -- helpers -------------------------------------------------------------------------------


def _fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The columns a caller sets (None values left out), checked to be plain column names
    that a move does not set itself."""
    given = {key: value for key, value in fields.items() if value is not None}
    for key in given:
        if key in _OWN_COLUMNS or not _COLUMN.fullmatch(key):
            raise ConfigError(f"a status move cannot set the column {key!r} as a field")
    return given


def _assignments(fields: Mapping[str, Any]) -> str:
    return "".join(
        f", {key} = COALESCE({key}, ?)" if isinstance(value, IfNull) else f", {key} = ?"
        for key, value in fields.items()
    )


def _values(fields: Mapping[str, Any]) -> list[Any]:
    return [value.value if isinstance(value, IfNull) else value for value in fields.values()]

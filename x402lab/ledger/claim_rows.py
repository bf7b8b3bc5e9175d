"""The ``claims`` table: its records, its one inserter (``insert_rows``) and its one
transition function (``move_claims``), its reads, and the payments a claim looks up. The
state machine built on them: ``claims.py``."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NoReturn

from x402lab.errors import ConfigError
from x402lab.ledger.database import Row, Tx, chunks, marks, record_fields
from x402lab.ledger.packs import Fetch, answer_of, pack_bodies
from x402lab.ledger.statuses import (
    BY_WEIGHT,
    CLAIM_INITIAL,
    CLAIM_TRANSITIONS,
    MAYBE_PAID,
    UNRESOLVED,
    ClaimStatus,
    PaymentStatus,
    any_sql,
    in_sql,
)

#: A payment in one of these never settled and never can: a claim that pointed at it is void.
NEVER_SETTLED = (
    PaymentStatus.REJECTED,
    PaymentStatus.FAILED,
    PaymentStatus.EXPIRED,
    PaymentStatus.RELEASED,
)

LIGHT = "id, key, status, payment_key, ledger_id, ledger_floor, owner, label, updated_us"
FULL = (
    "SELECT c.id, c.scope, c.key, c.status, c.payment_key, c.ledger_id, c.owner, c.label,"
    " c.created_us, c.updated_us, c.error, c.answer, c.pack_id, c.pack_offset, c.pack_length,"
    " c.cost_atomic, p.status AS payment_status, p.amount_atomic, p.tx_hash"
    " FROM claims c LEFT JOIN payments p ON p.id = c.ledger_id"
)
_COLUMNS = (
    "INSERT INTO claims (scope, key, status, payment_key, ledger_id, ledger_floor, owner, label,"
    " created_us, updated_us, error, answer) VALUES "
)
_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
INSERT = _COLUMNS + _ROW
#: What storing an answer writes in a claim row moved to ``done`` (``Claims.complete_in``):
#: the answer inline or its place in a pack (``packs.place``), then its money facts.
ANSWERED = (
    "answer = ?, pack_id = ?, pack_offset = ?, pack_length = ?,"
    " ledger_id = COALESCE(?, ledger_id), payment_key = ?, label = COALESCE(?, label),"
    " cost_atomic = ?, error = NULL"
)
#: The same for a claim row inserted ``done`` (``insert_rows`` writes its answer inline).
ANSWERED_LATER = (
    "UPDATE claims SET cost_atomic = ?, pack_id = ?, pack_offset = ?, pack_length = ? WHERE id = ?"
)
#: Rows per multi-row INSERT: 12 values each stays under SQLite's historical 999 bound values.
ROWS_PER_INSERT = 80


# -- records -------------------------------------------------------------------------------


class ClaimAction(StrEnum):
    """What ``Claims.claim`` tells the caller to do with one key."""

    PAY = "pay"
    REUSE = "reuse"
    WAIT = "wait"
    MAYBE_PAID = "maybe_paid"


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    """One claim row, with the money facts of its payment joined from the ledger."""

    id: int
    scope: str
    key: str
    status: ClaimStatus
    payment_key: str
    ledger_id: int | None
    owner: str
    label: str | None
    created_us: int
    updated_us: int
    error: str | None
    answer: bytes | None
    #: A stored answer's exact share of what was paid for it (None: stored before it was kept).
    cost_atomic: int | None = None
    payment_status: str | None = None
    amount_atomic: int | None = None
    tx_hash: str | None = None

    @property
    def created_at(self) -> datetime:
        return datetime.fromtimestamp(self.created_us / 1_000_000, tz=UTC)

    @property
    def updated_at(self) -> datetime:
        return datetime.fromtimestamp(self.updated_us / 1_000_000, tz=UTC)


@dataclass(frozen=True, slots=True)
class Claimed:
    """The answer of ``claim`` for one key: what to do, and the row that decided it (for
    ``PAY`` the new pending row of this caller). ``resend``: a ``PAY`` whose payment sends
    the signed payload an earlier run left ``unknown`` again, so it needs no new budget."""

    key: str
    action: ClaimAction
    record: ClaimRecord
    resend: bool = False


def claim_record(row: Row, bodies: Mapping[int, bytes]) -> ClaimRecord:
    """The record of a ``FULL`` row; ``bodies``: the packs it may point into (``packs``)."""
    answer = answer_of(row, bodies)
    status = ClaimStatus(row["status"])
    return ClaimRecord(**record_fields(row, ClaimRecord, status=status, answer=answer))


def read_records(fetch: Fetch, sql: str, params: Sequence[Any] = ()) -> list[ClaimRecord]:
    """The records of the ``FULL`` rows ``sql`` selects (``fetch``: ``tx.all`` or
    ``db.read``), their packed answers read with them (each pack once)."""
    rows = fetch(sql, params)
    bodies = pack_bodies(fetch, rows)
    return [claim_record(row, bodies) for row in rows]


def current_records(rows: Iterable[ClaimRecord]) -> dict[str, ClaimRecord]:
    """Per key, the deciding record (or the newest failed one), in first-claimed order."""
    out: dict[str, ClaimRecord] = {}
    for record in rows:  # oldest first
        kept = out.get(record.key)
        if kept is None or record.status != ClaimStatus.FAILED or kept.status == ClaimStatus.FAILED:
            out[record.key] = record
    return out


# -- the inserter and the transition function ----------------------------------------------


def insert_rows(tx: Tx, rows: Sequence[Sequence[Any]]) -> list[int]:
    """Insert claim rows (``Claims._row`` tuples) in multi-row ``INSERT ... RETURNING``
    statements (SQLite 3.35+ and PostgreSQL); returns their ids in the order of ``rows``.

    One statement per ``ROWS_PER_INSERT`` rows instead of one per row: claiming a batch's
    keys cost 25-40 us a key inserted one by one. RETURNING gives no order, so ids are
    matched by (scope, key); rows that repeat a (scope, key) go one by one.
    """
    for row in rows:
        if row[2] not in CLAIM_INITIAL:  # every later status is a move (``move_claims``)
            raise ConfigError(f"a new claim row cannot start as {row[2]!r} ({row[0]} {row[1]!r})")
    if len({(row[0], row[1]) for row in rows}) < len(rows):
        return tx.insert_many(INSERT, rows)
    ids: list[int] = []
    for chunk in chunks(rows, ROWS_PER_INSERT):
        sql = _COLUMNS + ", ".join([_ROW] * len(chunk)) + " RETURNING id, scope, key"
        values = [value for row in chunk for value in row]
        found = {(scope, key): int(row_id) for row_id, scope, key in tx.all(sql, values)}
        ids += [found[(row[0], row[1])] for row in chunk]
    return ids


def pending_record(row_id: int, row: Sequence[Any]) -> ClaimRecord:
    """The record of a claim row just inserted without a payment (``Claims._row`` order),
    built from its values instead of read back: nothing in it is joined from the ledger."""
    scope, key, status, payment_key, ledger_id, _, owner, label, created, updated, error, answer = (
        row
    )
    assert ledger_id is None
    return ClaimRecord(
        row_id, scope, key, ClaimStatus(status), payment_key, None, owner, label, created,
        updated, error, answer,
    )  # fmt: skip


def move_claims(
    tx: Tx,
    rows: Sequence[Sequence[Any]],
    status: ClaimStatus,
    now_us: int,
    *,
    sets: str = "",
) -> None:
    """Move claim rows to ``status`` inside ``tx`` (allowed moves:
    ``statuses.CLAIM_TRANSITIONS``), in one ``executemany``.

    ``rows``: ``(row_id, *values)`` per claim; ``sets``: the other columns the move writes,
    as SQL (``"error = ?, ledger_id = COALESCE(?, ledger_id)"``), whose placeholders take
    ``values`` in order. Raises ConfigError naming a row that is missing or in a status the
    move does not start from (a bulk move checks the count of rows changed, and reads the
    rows again only then).
    """
    if not rows:
        return
    if re.search(r"\b(status|updated_us)\b", sets):
        raise ConfigError(f"move_claims sets status and updated_us itself, not in {sets!r}")
    sources = CLAIM_TRANSITIONS.get(status, ())
    ids = [int(row[0]) for row in rows]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise ConfigError(f"claim rows {twice} are asked to move to {str(status)!r} twice")
    if not sources:
        _refuse_claim(tx, ids[0], status, None)
    extra = f", {sets}" if sets else ""
    changed = tx.executemany(
        f"UPDATE claims SET status = ?, updated_us = ?{extra}"
        f" WHERE id = ? AND {any_sql('status', sources)}",
        [(str(status), now_us, *row[1:], row[0]) for row in rows],
    )
    if changed != len(ids):
        _refuse_stuck_claims(tx, ids, status, now_us)


def _refuse_stuck_claims(tx: Tx, ids: Sequence[int], status: ClaimStatus, now_us: int) -> NoReturn:
    """Name a claim row ``move_claims`` could not move (and raise): one missing, in another
    status, or already in ``status`` before this move."""
    found: dict[int, Row] = {}
    for chunk in chunks(list(ids)):
        for each in tx.all(
            "SELECT id, scope, key, status, updated_us FROM claims"
            f" WHERE id IN ({marks(len(chunk))})",
            chunk,
        ):
            found[each["id"]] = each
    for row_id in ids:
        row = found.get(row_id)
        if row is None or row["status"] != status or row["updated_us"] != now_us:
            _refuse_claim(tx, row_id, status, row)
    raise ConfigError(f"some of claim rows {list(ids)} could not move to {str(status)!r}")


def _refuse_claim(tx: Tx, row_id: int, status: ClaimStatus, row: Row | None) -> NoReturn:
    if row is None:
        row = tx.one("SELECT id, scope, key, status FROM claims WHERE id = ?", (row_id,))
    if row is None:
        raise ConfigError(f"claim row {row_id} cannot move to {str(status)!r} from 'missing'")
    raise ConfigError(
        f"claim row {row_id} ({row['scope']} {row['key']!r}) cannot move to {str(status)!r}"
        f" from {str(row['status'])!r}"
    )


# -- reads ---------------------------------------------------------------------------------


def deciding(rows: Sequence[Row]) -> Row | None:
    """The row that decides a key: its newest row that is not ``failed``."""
    for row in reversed(rows):
        if row["status"] != ClaimStatus.FAILED:
            return row
    return None


def history_in(tx: Tx, scope: str, keys: Sequence[str]) -> dict[str, list[Row]]:
    """Every row of each key, oldest first (only keys with rows)."""
    out: dict[str, list[Row]] = {}
    for chunk in chunks(keys):
        for row in tx.all(
            f"SELECT {LIGHT} FROM claims WHERE scope = ? AND key IN ({marks(len(chunk))})"
            " ORDER BY id",
            (scope, *chunk),
        ):
            out.setdefault(row["key"], []).append(row)
    return out


def records_in(tx: Tx, ids: Sequence[int]) -> dict[int, ClaimRecord]:
    out: dict[int, ClaimRecord] = {}
    for chunk in chunks(list(dict.fromkeys(ids))):
        for record in read_records(tx.all, f"{FULL} WHERE c.id IN ({marks(len(chunk))})", chunk):
            out[record.id] = record
    return out


# -- the payments a claim looks up ---------------------------------------------------------


def payments_in(
    tx: Tx, floors: Mapping[str, int], statuses: Sequence[PaymentStatus] = MAYBE_PAID
) -> dict[str, tuple[int, str]]:
    """Per payment key, its strongest payment in ``statuses`` (``BY_WEIGHT``, then the
    newest) among its rows newer than the key's floor: ``(ledger id, status)``."""
    best: dict[str, tuple[int, str]] = {}
    rank = {str(status): weight for weight, status in enumerate(BY_WEIGHT)}
    for chunk in chunks(list(floors)):
        for row_id, request_key, status in tx.all(
            "SELECT id, request_key, status FROM payments"
            f" WHERE request_key IN ({marks(len(chunk))}) AND {in_sql('status', statuses)}"
            " ORDER BY id",
            chunk,
        ):
            if row_id <= floors[request_key]:
                continue
            kept = best.get(request_key)
            if kept is None or rank[status] <= rank[kept[1]]:
                best[request_key] = (row_id, status)
    return best


def follow_payments(
    tx: Tx,
    maybe: Mapping[str, ClaimRecord],
    payment_key_of: Callable[[str], str],
    valid_until: int,
    gone: Callable[[str | None], bool],
) -> tuple[list[int], list[tuple[str, str, int | None]]]:
    """What the payments of claims decided ``MAYBE_PAID`` say now: ``(void, again)``.

    ``void``: claim ids whose payment never settled (rejected, expired...): the claim no
    longer stands, and its key is paid again. ``again``: ``(key, payment key, floor)`` of the
    keys to hand back to pay (``floor`` None: the caller's own): the void ones, and those
    whose payment is ``unknown`` (or ``signed`` by a process that is gone), valid until
    ``valid_until``, with its signed payload kept, for the very request key the caller pays
    (``payment_key_of(key)``): the payment that follows sends that same payload again
    (``Ledger.resume_payment``), so nothing is signed twice.
    """
    facts = payment_rows(tx, [r.ledger_id for r in maybe.values() if r.ledger_id is not None])
    void: list[int] = []
    again: list[tuple[str, str, int | None]] = []
    for key, record in maybe.items():
        fact = facts.get(record.ledger_id or 0)
        if fact is None:
            continue
        if fact["status"] in NEVER_SETTLED:
            void.append(record.id)
            again.append((key, record.payment_key, None))
        elif (
            fact["status"] in UNRESOLVED
            and fact["kept"]
            and fact["request_key"] == payment_key_of(key)
            and (fact["valid_before"] or 0) >= valid_until
            and (fact["status"] == PaymentStatus.UNKNOWN or gone(fact["owner"]))
        ):
            again.append((key, fact["request_key"], fact["id"] - 1))
    return void, again


def payment_rows(tx: Tx, ids: Sequence[int]) -> dict[int, Row]:
    """The payments of ``ids`` (what a claim needs to follow its payment): status, request
    key, owner, window and whether its signed payload is kept."""
    out: dict[int, Row] = {}
    for chunk in chunks(list(dict.fromkeys(ids))):
        for row in tx.all(
            "SELECT id, status, request_key, owner, valid_before,"
            " payment_header IS NOT NULL AS kept FROM payments"
            f" WHERE id IN ({marks(len(chunk))})",
            chunk,
        ):
            out[row["id"]] = row
    return out

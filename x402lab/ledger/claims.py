"""Did we already pay for this request? One claim state machine for every paid request key.

Media jobs, report purchases and batch rows all ask it the same way. A *scope* names what is
bought (``jobs:<gateway>``, ``reports:<service>``, ``batch:chat``); a *key* is one thing bought
(a request key, a report id, a batch item's key); its *payment key* is the request key of the
paid request that carries it (the ledger's ``payments.request_key``; a batch packs several
item keys into one request, a report purchase several report ids). Money facts are never
copied here: a claim keeps ``ledger_id`` and every reader joins ``payments`` for the amount,
status and tx hash, so a payment that reconciliation later moves shows up at once.

Each attempt to buy a key is one row (pending -> done | failed | unknown). The row that
decides a key is its newest row that is not ``failed`` (a failed attempt moved no money, so
it changes nothing). ``Claims.claim`` answers, per key, in one write transaction:

- ``REUSE``: the deciding row is ``done``; its stored answer is the result, nothing to pay;
- ``WAIT``: it is ``pending`` and held by a live caller; look again later;
- ``MAYBE_PAID``: it is ``unknown``, or no claim decides but the ledger has a payment of its
  payment key that may have settled (``statuses.MAYBE_PAID``): never pay again on its own;
  the caller reports it (reconciliation, issue 12, resolves it);
- ``PAY``: otherwise a new ``pending`` row is written for this caller, who pays, then calls
  ``complete`` (answers stored: ``done``) or ``release`` (``unknown`` if the ledger shows a
  payment of its payment key that left the process since the claim, else ``failed``).

``rebuy=True`` is the one override: it writes a new pending row over ``done`` and ``unknown``
(a live pending claim of another caller is still waited for). If the rebuy fails, the
earlier row decides again. An answer, once stored, is kept: ``complete`` on a key whose
newest row is ``done`` stores nothing.

A pending claim of a process that died must not block forever. A pending row older than
``stale_after_s`` whose owner is not this process is taken over: if a payment of its payment
key left since it was written, it becomes ``unknown`` (``MAYBE_PAID``); otherwise nothing was
signed for it (the signed row is written before any request leaves), so it is marked
``failed`` and a new pending row is this caller's (``PAY``). A live owner that holds claims
longer than that before paying calls ``renew`` first and pays only the keys it still holds.
Issue 12 adds owner liveness (``owner`` is ``host:pid:process-start``).

Claims are written with ordinary commits: the durable commit of the payment's write-ahead
row flushes them too (same WAL), so a claim is on disk before its payment leaves.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from x402lab.ledger.database import Database, Row, Tx, chunks, marks
from x402lab.ledger.statuses import BY_WEIGHT, MAYBE_PAID, ClaimStatus, in_sql

C = ClaimStatus
DEFAULT_STALE_AFTER_S = 300.0
_LIGHT = "id, key, status, payment_key, ledger_id, ledger_floor, owner, label, updated_us"
_FULL = (
    "SELECT c.id, c.scope, c.key, c.status, c.payment_key, c.ledger_id, c.owner, c.label,"
    " c.created_us, c.updated_us, c.error, c.answer, p.status AS payment_status,"
    " p.amount_atomic, p.tx_hash FROM claims c LEFT JOIN payments p ON p.id = c.ledger_id"
)
_INSERT = (
    "INSERT INTO claims (scope, key, status, payment_key, ledger_id, ledger_floor, owner, label,"
    " created_us, updated_us, error, answer) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


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
    ``PAY`` the new pending row of this caller)."""

    key: str
    action: ClaimAction
    record: ClaimRecord


_OWNER: tuple[int, str] | None = None


def process_owner() -> str:
    """``host:pid:start``: this process, told apart from a later one that reuses its pid."""
    global _OWNER
    pid = os.getpid()
    if _OWNER is None or _OWNER[0] != pid:  # recomputed in a forked child
        _OWNER = (pid, f"{socket.gethostname()}:{pid}:{_process_start()}")
    return _OWNER[1]


def _process_start() -> int:
    try:  # Linux: field 22 of /proc/self/stat is the start time in clock ticks after boot
        with open("/proc/self/stat") as stat:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as system:
            boot = next(int(line.split()[1]) for line in system if line.startswith("btime"))
        return boot + ticks // os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return int(time.time())


def _record(row: Row) -> ClaimRecord:
    answer = row["answer"]
    return ClaimRecord(
        id=row["id"],
        scope=row["scope"],
        key=row["key"],
        status=ClaimStatus(row["status"]),
        payment_key=row["payment_key"],
        ledger_id=row["ledger_id"],
        owner=row["owner"],
        label=row["label"],
        created_us=row["created_us"],
        updated_us=row["updated_us"],
        error=row["error"],
        answer=bytes(answer) if answer is not None else None,
        payment_status=row["payment_status"],
        amount_atomic=row["amount_atomic"],
        tx_hash=row["tx_hash"],
    )


def _deciding(rows: Sequence[Row]) -> Row | None:
    """The row that decides a key: its newest row that is not ``failed``."""
    for row in reversed(rows):
        if row["status"] != C.FAILED:
            return row
    return None


def _current(rows: Iterable[ClaimRecord]) -> dict[str, ClaimRecord]:
    """Per key, the deciding record (or the newest failed one), in first-claimed order."""
    out: dict[str, ClaimRecord] = {}
    for record in rows:  # oldest first
        kept = out.get(record.key)
        if kept is None or record.status != C.FAILED or kept.status == C.FAILED:
            out[record.key] = record
    return out


class Claims:
    """The claims of one database (see the module docstring for the state machine).

    ``stale_after_s``: age after which a pending claim of another process may be taken
    over. ``now`` and ``owner`` are injectable for tests.
    """

    def __init__(
        self,
        db: Database,
        *,
        stale_after_s: float = DEFAULT_STALE_AFTER_S,
        now: Callable[[], float] = time.time,
        owner: str | None = None,
    ) -> None:
        self.db = db
        self.stale_after_s = stale_after_s
        self._now = now
        self.owner = owner if owner is not None else process_owner()

    def __repr__(self) -> str:
        return f"Claims({self.db.url!r}, owner={self.owner!r})"

    def _now_us(self) -> int:
        return int(self._now() * 1_000_000)

    # -- the state machine (each method is one write transaction) ----------------------------

    def claim(
        self,
        scope: str,
        keys: Iterable[str],
        *,
        payment_key: str | Mapping[str, str] | None = None,
        rebuy: bool = False,
        label: str | None = None,
    ) -> dict[str, Claimed]:
        """Claim ``keys`` before paying; returns each key's ``Claimed`` (in input order).

        ``payment_key``: the request key that will carry every key, or a mapping key ->
        request key, or None (each key is its own request key). ``rebuy=True`` buys again
        what is ``done`` or ``unknown``. ``label`` is kept on new rows (a report's handle).
        """
        with self.db.transaction() as tx:
            return self.claim_in(tx, scope, keys, payment_key=payment_key, rebuy=rebuy, label=label)

    def complete(
        self,
        scope: str,
        answers: Iterable[tuple[str, bytes | None]],
        *,
        payment_key: str | Mapping[str, str] | None = None,
        ledger_id: int | None = None,
        label: str | None = None,
    ) -> list[str]:
        """Store the answers of paid keys (``done``); returns the keys whose answer was stored.

        ``ledger_id``: the payment that carried them; when None it is found in the ledger
        (the strongest payment of the payment key since the claim). A key whose newest row
        is ``done`` keeps its first answer; a key never claimed gets a ``done`` row.
        """
        with self.db.transaction() as tx:
            return self.complete_in(
                tx, scope, answers, payment_key=payment_key, ledger_id=ledger_id, label=label
            )

    def release(self, scope: str, keys: Iterable[str], error: str) -> dict[str, ClaimStatus]:
        """Close this process's pending claims of ``keys`` that got no answer: ``unknown``
        when a payment of their payment key left the process since the claim (it may have
        settled), else ``failed`` (the next caller may pay). Returns the newest status of
        every key found (claims already closed or held by others are left as they are)."""
        with self.db.transaction() as tx:
            return self.release_in(tx, scope, keys, error)

    def renew(self, scope: str, keys: Iterable[str]) -> list[str]:
        """Refresh this process's pending claims of ``keys`` (so they do not go stale);
        returns the keys still held. Pay only for those."""
        now = self._now_us()
        with self.db.transaction() as tx:
            history = self._history_in(tx, scope, list(dict.fromkeys(keys)))
            held = [
                rows[-1]
                for rows in history.values()
                if rows[-1]["status"] == C.PENDING and rows[-1]["owner"] == self.owner
            ]
            tx.executemany(
                "UPDATE claims SET updated_us = ? WHERE id = ?", [(now, r["id"]) for r in held]
            )
        return [row["key"] for row in held]

    # -- the same, inside a caller's transaction (stores of this package) --------------------

    def claim_in(
        self,
        tx: Tx,
        scope: str,
        keys: Iterable[str],
        *,
        payment_key: str | Mapping[str, str] | None = None,
        rebuy: bool = False,
        label: str | None = None,
    ) -> dict[str, Claimed]:
        """``claim`` inside the open transaction ``tx``."""
        wanted = list(dict.fromkeys(keys))
        history = self._history_in(tx, scope, wanted)
        now = self._now_us()
        stale_before = now - int(self.stale_after_s * 1_000_000)
        decided: dict[str, tuple[ClaimAction, int]] = {}
        to_pay: list[str] = []
        unclaimed: list[str] = []  # no claim decides: a payment of their payment key may
        abandoned: dict[str, Row] = {}  # stale pending rows of other processes
        for key in wanted:
            row = _deciding(history.get(key, ()))
            if row is None:
                (to_pay if rebuy else unclaimed).append(key)
            elif row["status"] == C.PENDING:
                if row["owner"] == self.owner or row["updated_us"] >= stale_before:
                    decided[key] = (ClaimAction.WAIT, row["id"])
                else:
                    abandoned[key] = row
            elif rebuy:
                to_pay.append(key)
            elif row["status"] == C.DONE:
                decided[key] = (ClaimAction.REUSE, row["id"])
            else:
                decided[key] = (ClaimAction.MAYBE_PAID, row["id"])
        if unclaimed or abandoned:
            paid = self._payments_in(
                tx,
                {self._payment_key(payment_key, key): 0 for key in unclaimed}
                | {row["payment_key"]: row["ledger_floor"] for row in abandoned.values()},
            )
        else:
            paid = {}
        floor = int(tx.scalar("SELECT COALESCE(MAX(id), 0) FROM payments") or 0)
        new_rows: list[tuple[Any, ...]] = []
        for key in unclaimed:
            found = paid.get(self._payment_key(payment_key, key))
            if found is None:
                to_pay.append(key)
            else:  # paid outside any claim: record it, so the next look is a plain read
                pk = self._payment_key(payment_key, key)
                new_rows.append(self._row(scope, key, C.UNKNOWN, pk, found[0], found[0] - 1, label))
        for key, row in abandoned.items():
            found = paid.get(row["payment_key"])
            status = C.FAILED if found is None else C.UNKNOWN
            tx.execute(
                "UPDATE claims SET status = ?, ledger_id = ?, updated_us = ?, error = ?"
                " WHERE id = ?",
                (
                    str(status),
                    found[0] if found else None,
                    now,
                    f"abandoned: pending since {row['updated_us']} us by {row['owner']}",
                    row["id"],
                ),
            )
            if found is None or rebuy:
                to_pay.append(key)
            else:
                decided[key] = (ClaimAction.MAYBE_PAID, row["id"])
        pay_from = len(new_rows)
        new_rows += [
            self._row(
                scope, key, C.PENDING, self._payment_key(payment_key, key), None, floor, label
            )
            for key in to_pay
        ]
        ids = tx.insert_many(_INSERT, new_rows)
        for offset, row_id in enumerate(ids):
            action = ClaimAction.PAY if offset >= pay_from else ClaimAction.MAYBE_PAID
            decided[new_rows[offset][1]] = (action, row_id)
        records = self._records_in(tx, [row_id for _, row_id in decided.values()])
        return {key: Claimed(key, decided[key][0], records[decided[key][1]]) for key in wanted}

    def complete_in(
        self,
        tx: Tx,
        scope: str,
        answers: Iterable[tuple[str, bytes | None]],
        *,
        payment_key: str | Mapping[str, str] | None = None,
        ledger_id: int | None = None,
        label: str | None = None,
    ) -> list[str]:
        """``complete`` inside the open transaction ``tx``."""
        given = dict(answers)
        history = self._history_in(tx, scope, list(given))
        now = self._now_us()
        newest = {key: rows[-1] for key, rows in history.items()}
        open_rows = {k: r for k, r in newest.items() if r["status"] != C.DONE}
        keys_of = {
            key: (
                self._payment_key(payment_key, key) if payment_key is not None else r["payment_key"]
            )
            for key, r in open_rows.items()
        }
        paid: dict[str, tuple[int, str]] = {}
        if ledger_id is None and open_rows:
            floors: dict[str, int] = {}
            for key, row in open_rows.items():
                pk = keys_of[key]
                floors[pk] = min(floors.get(pk, row["ledger_floor"]), row["ledger_floor"])
            paid = self._payments_in(tx, floors)
        updates = []
        for key, row in open_rows.items():
            found = paid.get(keys_of[key])
            link = ledger_id if ledger_id is not None else (found[0] if found else None)
            updates.append((str(C.DONE), given[key], link, keys_of[key], label, now, row["id"]))
        tx.executemany(
            "UPDATE claims SET status = ?, answer = ?, ledger_id = COALESCE(?, ledger_id),"
            " payment_key = ?, label = COALESCE(?, label), error = NULL, updated_us = ?"
            " WHERE id = ?",
            updates,
        )
        fresh = [key for key in given if key not in history]
        if fresh:
            paid_fresh = (
                self._payments_in(tx, {self._payment_key(payment_key, k): 0 for k in fresh})
                if ledger_id is None
                else {}
            )
            rows = []
            for key in fresh:
                pk = self._payment_key(payment_key, key)
                found = paid_fresh.get(pk)
                link = ledger_id if ledger_id is not None else (found[0] if found else None)
                rows.append(self._row(scope, key, C.DONE, pk, link, 0, label, given[key]))
            tx.insert_many(_INSERT, rows)
        return [key for key in given if key in open_rows or key in fresh]

    def release_in(
        self, tx: Tx, scope: str, keys: Iterable[str], error: str
    ) -> dict[str, ClaimStatus]:
        """``release`` inside the open transaction ``tx``."""
        history = self._history_in(tx, scope, list(dict.fromkeys(keys)))
        mine = {
            key: rows[-1]
            for key, rows in history.items()
            if rows[-1]["status"] == C.PENDING and rows[-1]["owner"] == self.owner
        }
        floors: dict[str, int] = {}
        for row in mine.values():
            pk = row["payment_key"]
            floors[pk] = min(floors.get(pk, row["ledger_floor"]), row["ledger_floor"])
        paid = self._payments_in(tx, floors) if floors else {}
        now = self._now_us()
        out = {key: ClaimStatus(rows[-1]["status"]) for key, rows in history.items()}
        updates = []
        for key, row in mine.items():
            found = paid.get(row["payment_key"])
            out[key] = C.UNKNOWN if found else C.FAILED
            updates.append(
                (str(out[key]), found[0] if found else None, error[:500], now, row["id"])
            )
        tx.executemany(
            "UPDATE claims SET status = ?, ledger_id = COALESCE(?, ledger_id), error = ?,"
            " updated_us = ? WHERE id = ?",
            updates,
        )
        return out

    # -- reading ---------------------------------------------------------------------------

    def get(self, scope: str, keys: Iterable[str]) -> dict[str, ClaimRecord]:
        """The current record of each key that has one (its deciding row, or its newest
        failed one), with the joined money facts."""
        wanted = list(dict.fromkeys(keys))
        rows: list[ClaimRecord] = []
        for chunk in chunks(wanted):
            rows += [
                _record(row)
                for row in self.db.read(
                    f"{_FULL} WHERE c.scope = ? AND c.key IN ({marks(len(chunk))}) ORDER BY c.id",
                    (scope, *chunk),
                )
            ]
        return _current(rows)

    def all(self, scope: str, *, label: str | None = None) -> list[ClaimRecord]:
        """The current record of every key of ``scope`` (of ``label`` when given), in the
        order the keys were first claimed."""
        where, params = "c.scope = ?", [scope]
        if label is not None:
            where += " AND c.label = ?"
            params.append(label)
        rows = self.db.read(f"{_FULL} WHERE {where} ORDER BY c.id", params)
        return list(_current(_record(row) for row in rows).values())

    def history(self, scope: str | None = None, key: str | None = None) -> list[ClaimRecord]:
        """Every claim row (of ``scope``, of ``key``), oldest first."""
        where, params = ["1 = 1"], []
        if scope is not None:
            where.append("c.scope = ?")
            params.append(scope)
        if key is not None:
            where.append("c.key = ?")
            params.append(key)
        rows = self.db.read(f"{_FULL} WHERE {' AND '.join(where)} ORDER BY c.id", params)
        return [_record(row) for row in rows]

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _payment_key(payment_key: str | Mapping[str, str] | None, key: str) -> str:
        if payment_key is None:
            return key
        if isinstance(payment_key, str):
            return payment_key
        return payment_key[key]

    def _row(
        self,
        scope: str,
        key: str,
        status: ClaimStatus,
        payment_key: str,
        ledger_id: int | None,
        floor: int,
        label: str | None,
        answer: bytes | None = None,
    ) -> tuple[Any, ...]:
        now = self._now_us()
        return (
            scope, key, str(status), payment_key, ledger_id, floor, self.owner, label,
            now, now, None, answer,
        )  # fmt: skip

    @staticmethod
    def _history_in(tx: Tx, scope: str, keys: Sequence[str]) -> dict[str, list[Row]]:
        """Every row of each key, oldest first (only keys with rows)."""
        out: dict[str, list[Row]] = {}
        for chunk in chunks(keys):
            for row in tx.all(
                f"SELECT {_LIGHT} FROM claims WHERE scope = ? AND key IN ({marks(len(chunk))})"
                " ORDER BY id",
                (scope, *chunk),
            ):
                out.setdefault(row["key"], []).append(row)
        return out

    @staticmethod
    def _payments_in(tx: Tx, floors: Mapping[str, int]) -> dict[str, tuple[int, str]]:
        """Per payment key, the strongest payment that may have settled (``BY_WEIGHT``,
        newest first) among its rows newer than the key's floor: ``(ledger id, status)``."""
        best: dict[str, tuple[int, str]] = {}
        rank = {str(status): weight for weight, status in enumerate(BY_WEIGHT)}
        for chunk in chunks(list(floors)):
            for row_id, request_key, status in tx.all(
                "SELECT id, request_key, status FROM payments"
                f" WHERE request_key IN ({marks(len(chunk))}) AND {in_sql('status', MAYBE_PAID)}"
                " ORDER BY id",
                chunk,
            ):
                if row_id <= floors[request_key]:
                    continue
                kept = best.get(request_key)
                if kept is None or rank[status] <= rank[kept[1]]:
                    best[request_key] = (row_id, status)
        return best

    @staticmethod
    def _records_in(tx: Tx, ids: Sequence[int]) -> dict[int, ClaimRecord]:
        out: dict[int, ClaimRecord] = {}
        for chunk in chunks(list(dict.fromkeys(ids))):
            for row in tx.all(f"{_FULL} WHERE c.id IN ({marks(len(chunk))})", chunk):
                out[row["id"]] = _record(row)
        return out

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

A pending claim of a process that died must not block: one whose owner (``host:pid:start``,
or one holder in it, ``database.holder_owner``) is a process of this host that is gone, or
older than ``stale_after_s`` and not this caller's (``Claims.owner``), is taken over:
``unknown`` if a payment of its payment key left since it was written, else ``failed``
(nothing was signed for it) and a new pending row is this caller's (``PAY``). A live owner
that holds claims longer than that before paying calls ``renew`` first.
A ``MAYBE_PAID`` key is looked at once more through its payment: one that never settled
makes the claim void (paid again); an ``unknown`` one whose signed payload can be sent again
to the same request key is handed back (``PAY``), and that payload is sent, not a new one.

Every change of a claim's status goes through ``claim_rows.move_claims``, checked against
``statuses.CLAIM_TRANSITIONS`` (new rows start ``pending``, ``done`` or ``unknown``).

Claims are written with ordinary commits: the durable commit of the payment's write-ahead
row flushes them too (same WAL), so a claim is on disk before its payment leaves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from x402lab.ledger import packs
from x402lab.ledger.claim_rows import (
    ANSWERED,
    ANSWERED_LATER,
    FULL,
    ClaimAction,
    Claimed,
    ClaimRecord,
    current_records,
    deciding,
    follow_payments,
    history_in,
    insert_rows,
    move_claims,
    payments_in,
    pending_record,
    read_records,
    records_in,
)
from x402lab.ledger.database import Database, GoneOwners, Row, Tx, chunks, marks, process_owner
from x402lab.ledger.payments import CLAIM_RESEND_MARGIN_S
from x402lab.ledger.statuses import COUNTING, ClaimStatus, PaymentStatus

C = ClaimStatus
DEFAULT_STALE_AFTER_S = 300.0


class Claims:
    """The claims of one database (see the module docstring for the state machine).

    ``stale_after_s``: age after which a pending claim of another owner may be taken over;
    ``owner``: whose claims these are (this process, or a holder in it: ``holder_owner``).
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
        is ``done`` keeps its first answer; a key never claimed gets a ``done`` row."""
        with self.db.transaction() as tx:
            return self.complete_in(
                tx, scope, answers, payment_key=payment_key, ledger_id=ledger_id, label=label
            )

    def release(
        self, scope: str, keys: Iterable[str], error: str, *, answered: bool = False
    ) -> dict[str, ClaimStatus]:
        """Close this owner's pending claims of ``keys`` that got no answer: ``unknown``
        when a payment of their payment key left the process since the claim (it may have
        settled), else ``failed`` (the next caller may pay). ``answered=True``: the paid
        request was answered and the answer did not hold these keys, so they are ``failed``
        whatever the ledger shows. Returns the newest status of every key found (claims
        already closed or held by others are left as they are)."""
        with self.db.transaction() as tx:
            return self.release_in(tx, scope, keys, error, answered=answered)

    def renew(self, scope: str, keys: Iterable[str]) -> list[str]:
        """Refresh this owner's pending claims of ``keys`` (so they do not go stale);
        returns the keys still held. Pay only for those."""
        now = self._now_us()
        with self.db.transaction() as tx:
            history = history_in(tx, scope, list(dict.fromkeys(keys)))
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
        history = history_in(tx, scope, wanted)
        gone = GoneOwners()
        now = self._now_us()
        stale_before = now - int(self.stale_after_s * 1_000_000)
        decided: dict[str, tuple[ClaimAction, int]] = {}
        to_pay: list[str] = []
        unclaimed: list[str] = []  # no claim decides: a payment of their payment key may
        abandoned: dict[str, Row] = {}  # stale pending rows of other processes
        for key in wanted:
            row = deciding(history.get(key, ()))
            if row is None:
                (to_pay if rebuy else unclaimed).append(key)
            elif row["status"] == C.PENDING:
                owner = row["owner"]
                live = owner == self.owner or (
                    row["updated_us"] >= stale_before and not gone(owner)
                )
                if live:
                    decided[key] = (ClaimAction.WAIT, row["id"])
                else:
                    abandoned[key] = row
            elif rebuy:
                to_pay.append(key)
            elif row["status"] == C.DONE:
                decided[key] = (ClaimAction.REUSE, row["id"])
            else:
                decided[key] = (ClaimAction.MAYBE_PAID, row["id"])
        floors: dict[str, int] = {}
        for pk, since in [(self._payment_key(payment_key, key), 0) for key in unclaimed] + [
            (row["payment_key"], row["ledger_floor"]) for row in abandoned.values()
        ]:
            floors[pk] = min(since, floors.get(pk, since))
        # Reserved rows too: a stale claim whose owner holds a reservation is mid-payment.
        paid = payments_in(tx, floors, COUNTING) if floors else {}
        floor = int(tx.scalar("SELECT COALESCE(MAX(id), 0) FROM payments") or 0)
        new_rows: list[tuple[Any, ...]] = []
        for key in unclaimed:
            pk = self._payment_key(payment_key, key)
            found = paid.get(pk)
            if found is None or found[1] == PaymentStatus.RESERVED:
                to_pay.append(key)
            else:  # paid outside any claim: record it, so the next look is a plain read
                new_rows.append(self._row(scope, key, C.UNKNOWN, pk, found[0], found[0] - 1, label))
        taken_over: dict[ClaimStatus, list[tuple[Any, ...]]] = {C.FAILED: [], C.UNKNOWN: []}
        for key, row in abandoned.items():
            found = paid.get(row["payment_key"])
            if found is not None and found[1] == PaymentStatus.RESERVED:
                decided[key] = (ClaimAction.WAIT, row["id"])
                continue
            taken_over[C.FAILED if found is None else C.UNKNOWN].append(
                (
                    row["id"],
                    found[0] if found else None,
                    f"abandoned: pending since {row['updated_us']} us by {row['owner']}",
                )
            )
            if found is None or rebuy:
                to_pay.append(key)
            else:
                decided[key] = (ClaimAction.MAYBE_PAID, row["id"])
        for status, moved in taken_over.items():
            move_claims(tx, moved, status, now, sets="ledger_id = ?, error = ?")
        pay_from = len(new_rows)
        new_rows += [
            self._row(
                scope, key, C.PENDING, self._payment_key(payment_key, key), None, floor, label
            )
            for key in to_pay
        ]
        ids = insert_rows(tx, new_rows)
        built: dict[int, ClaimRecord] = {}  # new pending rows: nothing to read back or join
        for offset, row_id in enumerate(ids):
            action = ClaimAction.PAY if offset >= pay_from else ClaimAction.MAYBE_PAID
            decided[new_rows[offset][1]] = (action, row_id)
            if action is ClaimAction.PAY:
                built[row_id] = pending_record(row_id, new_rows[offset])
        records = records_in(tx, [i for _, i in decided.values() if i not in built])
        records.update(built)
        resend = self._follow_payments(tx, scope, payment_key, label, floor, decided, records, gone)
        return {
            key: Claimed(key, decided[key][0], records[decided[key][1]], key in resend)
            for key in wanted
        }

    def _follow_payments(
        self,
        tx: Tx,
        scope: str,
        payment_key: str | Mapping[str, str] | None,
        label: str | None,
        floor: int,
        decided: dict[str, tuple[ClaimAction, int]],
        records: dict[int, ClaimRecord],
        gone: GoneOwners,
    ) -> set[str]:
        """A second look at the keys decided ``MAYBE_PAID``, through their payment now
        (``claim_rows.follow_payments``): a void claim is ``failed`` and its key paid again;
        a key whose stored payload can be sent again is handed back to pay. Returns those
        keys (their payment needs no new budget: it was reserved when it was signed)."""
        maybe = {
            key: records[row_id]
            for key, (action, row_id) in decided.items()
            if action is ClaimAction.MAYBE_PAID and records[row_id].ledger_id is not None
        }
        if not maybe:
            return set()
        valid_until = int(self._now()) + CLAIM_RESEND_MARGIN_S
        void, again = follow_payments(
            tx, maybe, lambda key: self._payment_key(payment_key, key), valid_until, gone
        )
        now = self._now_us()
        never = [(row_id, "its payment never settled") for row_id in void]
        move_claims(tx, never, C.FAILED, now, sets="error = ?")
        rows = [
            self._row(scope, key, C.PENDING, pk, None, floor if low is None else low, label)
            for key, pk, low in again
        ]
        for (key, _, _), row_id in zip(again, insert_rows(tx, rows), strict=True):
            decided[key] = (ClaimAction.PAY, row_id)
        records.update(records_in(tx, [decided[key][1] for key, _, _ in again]))
        return {key for key, _, low in again if low is not None}

    def complete_in(
        self,
        tx: Tx,
        scope: str,
        answers: Iterable[tuple[str, bytes | None]],
        *,
        payment_key: str | Mapping[str, str] | None = None,
        ledger_id: int | None = None,
        label: str | None = None,
        costs: Mapping[str, int | None] | None = None,
        packed: bool = False,
    ) -> list[str]:
        """``complete`` inside the open transaction ``tx``; ``costs``: each key's exact share
        of what was paid for its answer (``cost_atomic``, what later runs show it cost);
        ``packed``: the answers stored are those of one paid request (``payment_key``, a str),
        kept together in one pack (``packs.place``), not each in its claim row."""
        given, cost = dict(answers), dict(costs or {})
        history = history_in(tx, scope, list(given))
        now = self._now_us()
        newest = {key: rows[-1] for key, rows in history.items()}
        open_rows = {k: r for k, r in newest.items() if r["status"] != C.DONE}
        stored = [(key, given[key]) for key in given if key in open_rows or key not in history]
        one_request = payment_key if packed and isinstance(payment_key, str) else None
        place = packs.place(tx, one_request, stored, now)
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
            paid = payments_in(tx, floors)
        updates = []
        for key, row in open_rows.items():
            found = paid.get(keys_of[key])
            link = ledger_id if ledger_id is not None else (found[0] if found else None)
            updates.append((row["id"], *place[key], link, keys_of[key], label, cost.get(key)))
        move_claims(tx, updates, C.DONE, now, sets=ANSWERED)
        fresh = [key for key in given if key not in history]
        if fresh:
            paid_fresh = (
                payments_in(tx, {self._payment_key(payment_key, k): 0 for k in fresh})
                if ledger_id is None
                else {}
            )
            rows = []
            for key in fresh:
                pk = self._payment_key(payment_key, key)
                found = paid_fresh.get(pk)
                link = ledger_id if ledger_id is not None else (found[0] if found else None)
                rows.append(self._row(scope, key, C.DONE, pk, link, 0, label, place[key][0]))
            ids = insert_rows(tx, rows)  # then the answers' cost and pack (not a status move)
            later = [(cost.get(k), *place[k][1:], i) for k, i in zip(fresh, ids, strict=True)]
            tx.executemany(ANSWERED_LATER, [row for row in later if row[:2] != (None, None)])
        return [key for key, _ in stored]

    def release_in(
        self, tx: Tx, scope: str, keys: Iterable[str], error: str, *, answered: bool = False
    ) -> dict[str, ClaimStatus]:
        """``release`` inside the open transaction ``tx``."""
        history = history_in(tx, scope, list(dict.fromkeys(keys)))
        mine = {
            key: rows[-1]
            for key, rows in history.items()
            if rows[-1]["status"] == C.PENDING and rows[-1]["owner"] == self.owner
        }
        floors: dict[str, int] = {}
        for row in mine.values():
            pk = row["payment_key"]
            floors[pk] = min(floors.get(pk, row["ledger_floor"]), row["ledger_floor"])
        paid = payments_in(tx, floors) if floors and not answered else {}
        now = self._now_us()
        out = {key: ClaimStatus(rows[-1]["status"]) for key, rows in history.items()}
        closed: dict[ClaimStatus, list[tuple[Any, ...]]] = {C.UNKNOWN: [], C.FAILED: []}
        for key, row in mine.items():
            found = paid.get(row["payment_key"])
            out[key] = C.UNKNOWN if found else C.FAILED
            closed[out[key]].append((row["id"], found[0] if found else None, error[:500]))
        for status, moved in closed.items():
            move_claims(
                tx, moved, status, now, sets="ledger_id = COALESCE(?, ledger_id), error = ?"
            )
        return out

    # -- reading ---------------------------------------------------------------------------

    def get(self, scope: str, keys: Iterable[str]) -> dict[str, ClaimRecord]:
        """The current record of each key that has one (its deciding row, or its newest
        failed one), with the joined money facts."""
        wanted = list(dict.fromkeys(keys))
        rows: list[ClaimRecord] = []
        for chunk in chunks(wanted):
            where = f" WHERE c.scope = ? AND c.key IN ({marks(len(chunk))}) ORDER BY c.id"
            rows += read_records(self.db.read, FULL + where, (scope, *chunk))
        return current_records(rows)

    def all(self, scope: str, *, label: str | None = None) -> list[ClaimRecord]:
        """The current record of every key of ``scope`` (of ``label`` when given), in the
        order the keys were first claimed."""
        where, params = "c.scope = ?", [scope]
        if label is not None:
            where += " AND c.label = ?"
            params.append(label)
        rows = read_records(self.db.read, f"{FULL} WHERE {where} ORDER BY c.id", params)
        return list(current_records(rows).values())

    def history(self, scope: str | None = None, key: str | None = None) -> list[ClaimRecord]:
        """Every claim row (of ``scope``, of ``key``), oldest first."""
        where, params = ["1 = 1"], []
        if scope is not None:
            where.append("c.scope = ?")
            params.append(scope)
        if key is not None:
            where.append("c.key = ?")
            params.append(key)
        sql = f"{FULL} WHERE {' AND '.join(where)} ORDER BY c.id"
        return read_records(self.db.read, sql, params)

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _payment_key(payment_key: str | Mapping[str, str] | None, key: str) -> str:
        if payment_key is None or isinstance(payment_key, str):
            return payment_key or key
        return payment_key[key]

    def _row(
        self, scope: str, key: str, status: ClaimStatus, payment_key: str,
        ledger_id: int | None, floor: int, label: str | None, answer: bytes | None = None,
    ) -> tuple[Any, ...]:  # fmt: skip
        now = self._now_us()
        return (
            scope, key, str(status), payment_key, ledger_id, floor, self.owner, label,
            now, now, None, answer,
        )  # fmt: skip

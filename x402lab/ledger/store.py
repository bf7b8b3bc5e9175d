"""The ledger of payments (``Ledger``): what a user holds to reserve, record and read them,
from a payment's reservation to what became of it.

One database serves many notebooks and processes at once (``database.Database``). Budget
reservations happen inside a write transaction that locks out other writers, so they are
atomic across threads, asyncio tasks and processes that share the file. Write-ahead: the
row of a signed payment (with its nonce) is committed, with a full fsync, before the paid
request leaves the process. The rows, their one transition function, the receipt's
``Settlement`` (committed with the answer it bought) and the budgets' running totals are
``payments.py``'s.

A signed payment whose outcome is not known (``signed`` or ``unknown``) is *taken up* when a
later call for the same request key sends its stored payload again (``resume_payment``): an
``unknown`` row, or a ``signed`` row whose owner process is gone (``database.owner_gone``),
becomes ``signed`` by this process, so no other caller sends it at the same time. Its nonce
settles only once: sending it again never pays twice. ``recover_interrupted`` closes the
rows a stopped process left open, and reconciliation with the chain moves the rest
(``apply_outcomes``). Nothing here signs anything.

Reserved, signed, settled and unknown rows count against their budget. A signed payment that
the server refused (``rejected``, or ``failed`` after signing) keeps counting while it is
``held``: it left the process signed, and whoever holds it could settle it. The clock alone
never frees it: a held row stops counting only when the chain says what became of it (used:
``settled``; unused once its window and ``EXPIRY_SLACK_S`` have passed: ``expired``), which
reconciliation asks (``x402lab.chain``: ``reconcile``, and ``free_held`` when a reservation
would otherwise not fit). ``budget_state``, the running totals and the exported tables agree
at every moment.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from x402lab.errors import BudgetExceeded
from x402lab.ledger import caps, payments
from x402lab.ledger.database import (
    CommitGroup,
    Database,
    GoneOwners,
    Row,
    chunks,
    marks,
    process_owner,
    user_label,
)
from x402lab.ledger.payments import IfNull, PaymentMeta, Settlement, SignedAuthorization
from x402lab.ledger.schema import MIGRATIONS
from x402lab.ledger.sqlite import open_database
from x402lab.ledger.statuses import (
    COUNTING,
    IN_FLIGHT,
    UNRESOLVED,
    Applied,
    BudgetState,
    Move,
    OpenPayment,
    PaymentStatus,
    Resolution,
    in_sql,
)
from x402lab.ledger.write_ahead import WriteAhead
from x402lab.money import format_usd
from x402lab.tables.ledger import arrow_to_pandas, ledger_record, ledger_table

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

DEFAULT_LEDGER_PATH = "~/.x402lab/ledger.sqlite"
# Slack on expiry: a chain's clock may lag this machine's.
EXPIRY_SLACK_S = 60
# What counts against a budget: the one definition of committed spend.
_COUNTED = f"({in_sql('status', COUNTING)} OR held = 1)"
_OPEN_SQL = in_sql("status", UNRESOLVED)
#: What the error column says of a row whose sender died with it in flight.
ORPHANED = "the process that sent it ({owner}) stopped before an answer arrived"
_NEVER_SIGNED = "reserved by a process that stopped before signing"
S = PaymentStatus


class Ledger:
    """The ledger of payments (default ``~/.x402lab/ledger.sqlite``).

    ``Ledger(path)`` opens (or creates) the file (or a ``postgresql://`` URL's database) and
    upgrades its schema; ``Ledger(db)`` uses an open ``Database``. ``user`` labels this
    process's payments (default ``X402LAB_USER``, else ``login@host``). Raises ConfigError
    when the database cannot be opened or was written by a newer x402lab.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | Database = DEFAULT_LEDGER_PATH,
        *,
        now: Callable[[], float] = time.time,
        user: str | None = None,
    ) -> None:
        self.db = open_database(path)
        self.path = self.db.path
        self.user = user if user is not None else user_label()
        self._now = now
        self.db.migrate(MIGRATIONS)
        #: The budgets' caps, one per budget (``caps.BudgetCapsBook``).
        self.caps = caps.BudgetCapsBook(self.db, lambda: (self.user, self._now_us()))
        #: Group commit of write-ahead rows (``reserve(durable=False)``, then ``durable()``).
        self.write_ahead = WriteAhead(self.db)

    def __repr__(self) -> str:
        return f"Ledger({self.db.url!r})"

    def now(self) -> float:
        """This ledger's clock (unix seconds; injectable for tests)."""
        return self._now()

    def _now_us(self) -> int:
        return int(self._now() * 1_000_000)

    def _held_cutoff(self) -> int:
        return int(self._now()) - EXPIRY_SLACK_S

    def _who(self) -> tuple[int, str, str]:
        """When and by whom a new row is written: now, this process, this ledger's user."""
        return self._now_us(), process_owner(), self.user

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Rows of a read query (by index and by column name)."""
        return self.db.read(sql, params)

    def close(self) -> None:
        self.db.close()

    # -- budgets ---------------------------------------------------------------------------

    def budget_state(self, name: str, cap_atomic: int | None = None) -> BudgetState:
        """Settled, in-flight, unknown and held spend of a budget, right now."""
        sums = dict.fromkeys((*COUNTING, "held"), 0)
        for status, total in self.db.read(
            "SELECT CASE WHEN held = 1 THEN 'held' ELSE status END, SUM(amount_atomic)"
            f" FROM payments WHERE budget = ? AND {_COUNTED} GROUP BY 1",
            (name,),
        ):
            sums[status] = int(total)
        return BudgetState(
            name=name,
            cap_atomic=cap_atomic,
            settled_atomic=sums[S.SETTLED],
            in_flight_atomic=sum(sums[status] for status in IN_FLIGHT),
            unknown_atomic=sums[S.UNKNOWN],
            held_atomic=sums["held"],
        )

    def budget_committed(self, name: str) -> int:
        """``budget_state(name).committed_atomic`` from the budget's running total: the same
        figure without reading every payment of the budget (a batch asks before and after
        it runs, on a ledger a team may have filled for years)."""
        with self.db.transaction() as tx:
            return payments.budget_total(tx, name, self._now_us())

    # -- the payment lifecycle -------------------------------------------------------------

    def reserve(
        self,
        *,
        budget: str,
        cap_atomic: int | None,
        amount_atomic: int,
        meta: PaymentMeta,
        sign: Callable[[], SignedAuthorization] | None = None,
        durable: bool = True,
        group: CommitGroup | None = None,
    ) -> int:
        """Spends money (with ``sign``): hold ``amount_atomic`` of a budget atomically;
        returns the new row's id.

        With ``sign``, the reservation and the write-ahead row are one transaction: the cap
        is checked, then ``sign()`` runs while the budget is held, and the row is committed as
        ``signed`` (with its nonce) before this returns, fsync'd when ``durable``. With
        ``durable=False`` the caller must ``await self.write_ahead.durable()`` before the
        signed payload leaves (one fsync for many rows; ``group``: a batch run's, which that
        commits first). If ``sign`` raises, nothing is recorded: nothing signed left the
        process.

        Raises BudgetExceeded (after recording a ``refused`` row) when the budget's settled,
        in-flight, unknown and held spend plus this amount would pass its cap: the cap stored
        for the budget (``caps``), read in this transaction, so every process
        reserves against the same one; ``cap_atomic`` only for a budget without one stored.
        """
        fsync = sign is not None and (durable or not self.write_ahead.needed)
        with self.db.transaction(durable=fsync, group=group if sign is not None else None) as tx:
            # The common case in two statements: the running total moves only if the cap
            # allows it. Otherwise (or for a budget not seen yet) the exact path below.
            if payments.take_budget(tx, budget, cap_atomic, amount_atomic):
                signed = sign() if sign is not None else None
                status = S.RESERVED if signed is None else S.SIGNED
                return payments.insert_payment(
                    tx, budget, amount_atomic, meta, status, self._who(), signed=signed, count=False
                )
            # A refused prepayment's authorization is not released for the fresh challenge
            # of the same request: the server still holds it and could settle it (money
            # rule 4), so both must fit.
            counted = payments.budget_total(tx, budget, self._now_us())
            stored = caps.read_caps(tx, budget)
            cap_atomic = stored.cap_atomic if stored is not None and stored.is_set else cap_atomic
            if cap_atomic is not None and counted + amount_atomic > cap_atomic:
                left = max(0, cap_atomic - counted)
                reason = (
                    f"amount {format_usd(amount_atomic)} exceeds what budget {budget!r} has left:"
                    f" {format_usd(left)} of {format_usd(cap_atomic)}"
                )
                payments.insert_payment(
                    tx, budget, amount_atomic, meta, S.REFUSED, self._who(), error=reason
                )
                refused = BudgetExceeded(reason, budget=budget, amount_atomic=amount_atomic)
            else:
                signed = sign() if sign is not None else None
                status = S.RESERVED if signed is None else S.SIGNED
                return payments.insert_payment(
                    tx, budget, amount_atomic, meta, status, self._who(), signed=signed
                )
        raise refused

    def record_refused(
        self, *, budget: str, amount_atomic: int, meta: PaymentMeta, error: str
    ) -> int:
        """Record a challenge the client refused to sign; returns the row id."""
        with self.db.transaction() as tx:
            return payments.insert_payment(
                tx, budget, amount_atomic, meta, S.REFUSED, self._who(), error=error
            )

    def settlement(
        self, row_id: int, *, tx_hash: str | None, payer: str | None, **outcome: Any
    ) -> Settlement:
        """The receipt arrived: the settlement of row ``row_id``, not committed yet (commit
        it with the answer it bought, or alone: ``Settlement``). ``outcome``:
        ``resolved_by`` (``statuses.Resolution``, default the receipt) and ``error`` (a note:
        an answer lost)."""
        outcome.setdefault("resolved_by", Resolution.RECEIPT)
        fields = {"tx_hash": tx_hash, "payer": payer, **outcome}
        return Settlement(self.db, row_id, fields, self._now_us)

    def record_settled(
        self, row_id: int, *, tx_hash: str | None, payer: str | None, **outcome: Any
    ) -> None:
        """The receipt arrived (or the chain shows it) and no answer is stored with it: the
        payment settled, committed now (``settlement`` and ``Settlement.commit``)."""
        self.settlement(row_id, tx_hash=tx_hash, payer=payer, **outcome).commit()

    def record_rejected(
        self, row_id: int, error: str, *, resolved_by: Resolution = Resolution.RECEIPT
    ) -> None:
        """The server refused the signed payment: nothing settled, but the authorization
        counts against the budget (``held``) until the chain resolves it."""
        self._move(row_id, S.REJECTED, error=error, resolved_by=resolved_by)

    def record_failed(
        self, row_id: int, error: str, *, resolved_by: Resolution = Resolution.RECEIPT
    ) -> None:
        """The paid request failed in a way that proves nothing settled (``held`` until the
        authorization expires, like ``record_rejected``)."""
        self._move(row_id, S.FAILED, error=error, resolved_by=resolved_by)

    def record_unknown(self, row_id: int, error: str, *, spent: bool = False) -> None:
        """A signed payment left and no clear answer came back; it keeps counting. A row
        already settled stays settled. ``spent``: its nonce is known to be used (the server
        said so), so its signed payload is dropped, never sent again."""
        self._move(row_id, S.UNKNOWN, error=error, payment_header=payments.DROP if spent else None)

    def record_expired(self, row_id: int, error: str | None = None) -> None:
        """The chain says the authorization was never used and its window has passed: the
        payment can no longer settle, and it stops counting."""
        self._move(row_id, S.EXPIRED, error=error, resolved_by=Resolution.CHAIN)

    def record_resend(self, row_id: int) -> None:
        """The same signed payload of row ``row_id`` is being sent again: count it."""
        with self.db.transaction() as tx:
            tx.execute("UPDATE payments SET resends = resends + 1 WHERE id = ?", (row_id,))

    def release(self, row_id: int, error: str | None = None) -> None:
        """Give back a reservation that was never signed."""
        self._move(row_id, S.RELEASED, error=error)

    def _move(self, row_id: int, status: PaymentStatus, **fields: Any) -> None:
        """Move one row to ``status`` (``payments.move_payment``: allowed moves are
        ``statuses.TRANSITIONS``); raises ConfigError for a move from any other status."""
        payments.move_payment(self.db, row_id, status, self._now_us(), fields)

    # -- signed payments whose outcome is not known -----------------------------------------

    def recover_interrupted(self, *, reserved_older_than_s: float = 600.0) -> int:
        """Close the rows a stopped process left open; returns how many rows moved.

        ``signed`` rows whose authorization window has passed, or whose sender is gone (a
        process of this host that no longer runs) and whose signed payload is not kept,
        become ``unknown`` (whether they settled is not known; they keep counting;
        ``reconcile`` asks the chain). A gone sender's row that can still settle and whose
        payload the ledger holds stays ``signed``: whichever process pays that request next
        sends that same payload (``resume_payment``), so what happens to it does not depend
        on which process looks first. ``reserved`` rows of a gone process, or older than
        ``reserved_older_than_s``, were never signed and are released.
        """
        now_us, cutoff = self._now_us(), self._held_cutoff()
        stale_us = now_us - int(reserved_older_than_s * 1_000_000)
        gone = GoneOwners()
        orphaned: dict[str, list[int]] = {}  # note -> signed rows whose sender is gone
        abandoned: list[int] = []  # reserved rows never signed
        with self.db.transaction() as tx:
            rows = tx.all(
                "SELECT id, status, valid_before, owner, ts_us,"
                " payment_header IS NOT NULL AS kept FROM payments"
                f" WHERE {in_sql('status', (S.RESERVED, S.SIGNED))}"
            )
            for row in rows:
                owner = row["owner"]
                if row["status"] == S.SIGNED:
                    valid = row["valid_before"] is not None and row["valid_before"] >= cutoff
                    expired = row["valid_before"] is not None and not valid
                    if expired or (gone(owner) and not (valid and row["kept"])):
                        note = ORPHANED.format(owner=owner or "?")
                        orphaned.setdefault(note, []).append(row["id"])
                elif row["ts_us"] < stale_us or gone(owner):
                    abandoned.append(row["id"])
            for note, ids in orphaned.items():
                # An earlier note (a send that failed before) is kept.
                payments.move_payments(tx, ids, S.UNKNOWN, now_us, {"error": IfNull(note)})
            payments.move_payments(tx, abandoned, S.RELEASED, now_us, {"error": _NEVER_SIGNED})
        return len(abandoned) + sum(len(ids) for ids in orphaned.values())

    def resume_payment(self, request_key: str, *, valid_until: int) -> OpenPayment | None:
        """Take up a signed payment of ``request_key`` to send its same payload again: an
        ``unknown`` one, or a ``signed`` one whose sender is gone, whose authorization is
        valid at least until ``valid_until``. It becomes ``signed`` by this process; returns
        it (as it was), or None when there is none."""
        where = (
            f" WHERE request_key = ? AND {_OPEN_SQL} AND payment_header IS NOT NULL"
            " AND valid_before >= ? ORDER BY id"
        )
        if not self.db.read(payments.OPEN_SELECT + where, (request_key, valid_until)):
            return None  # the common case: one indexed read, no write
        gone, owner, now_us = GoneOwners(), process_owner(), self._now_us()
        with self.db.transaction() as tx:
            for row in tx.all(payments.OPEN_SELECT + where, (request_key, valid_until)):
                payment = payments.open_payment(row)
                # Sent again only by its sender, or when it is ``unknown`` (its sender gave
                # up on it) or its sender is gone.
                if not (payment.status == S.UNKNOWN or gone(payment.owner)):
                    continue
                if payment.status == S.UNKNOWN:
                    payments.move_payments(tx, [payment.id], S.SIGNED, now_us, {"owner": owner})
                else:
                    tx.execute(
                        "UPDATE payments SET owner = ?, updated_us = ? WHERE id = ?",
                        (owner, now_us, payment.id),
                    )
                return payment
        return None

    def unresolved(
        self, *, ids: Iterable[int] | None = None, orphaned: bool = False, held: bool = False
    ) -> list[OpenPayment]:
        """The ``signed`` and ``unknown`` rows with a nonce (of ``ids`` when given), oldest
        first; with ``orphaned``, only those whose sender is a process of this host that is
        gone; with ``held``, also the refused signed payments still ``held`` (the server
        holds a valid authorization: the chain may say it settled after all)."""
        which = f"({_OPEN_SQL} OR held = 1)" if held else _OPEN_SQL
        base = f"{payments.OPEN_SELECT} WHERE {which} AND nonce IS NOT NULL"
        if ids is None:
            rows = [payments.open_payment(row) for row in self.db.read(base + " ORDER BY id")]
        else:
            rows = []
            for chunk in chunks(sorted(set(ids))):
                where = f" AND id IN ({marks(len(chunk))}) ORDER BY id"
                rows += [payments.open_payment(row) for row in self.db.read(base + where, chunk)]
        if orphaned:
            gone = GoneOwners()
            rows = [row for row in rows if gone(row.owner)]
        return rows

    def held_past_window(self, budget: str) -> list[int]:
        """The ids of ``budget``'s ``held`` rows whose window and ``EXPIRY_SLACK_S`` have
        passed: the ones the chain may show unused, and so free (``chain.free_held``)."""
        sql = "SELECT id FROM payments WHERE held = 1 AND budget = ? AND valid_before < ?"
        sql += " ORDER BY id"
        return [int(r[0]) for r in self.db.read(sql, (budget, self._held_cutoff()))]

    def apply_outcomes(self, moves: Sequence[Move]) -> list[Applied]:
        """Make reconciliation's moves (settled, expired) in one transaction; returns those
        made (a row no longer ``signed``, ``unknown`` or ``held`` by now, concluded
        meanwhile, is left as it is)."""
        if not moves:
            return []
        by_id = {move.row_id: move for move in moves}
        applied: list[Applied] = []
        now_us = self._now_us()
        with self.db.transaction() as tx:
            for chunk in chunks(sorted(by_id)):
                where = f" WHERE id IN ({marks(len(chunk))}) ORDER BY id"
                for row in tx.all(payments.OPEN_SELECT + where, chunk):
                    before = payments.open_payment(row)
                    if before.status not in UNRESOLVED and not row["held"]:
                        continue
                    move = by_id[before.id]
                    fields = {"resolved_by": Resolution.CHAIN, "tx_hash": move.tx_hash or None}
                    fields["error"] = move.note or None  # (None values are left out)
                    payments.move_payments(tx, [before.id], move.status, now_us, fields)
                    applied.append(Applied(before, move.status, move.tx_hash, move.note))
        return applied

    # -- reading ---------------------------------------------------------------------------

    def settled_by_key(self, request_keys: Iterable[str]) -> dict[str, tuple[int, float]]:
        """The settled payment of each of ``request_keys`` that has one: its amount (atomic)
        and the seconds from its reservation to its settlement (its paid round trip as the
        ledger recorded it, so every later reading gives the same figure)."""
        wanted = list(dict.fromkeys(request_keys))
        found: dict[str, tuple[int, float]] = {}
        for chunk in chunks(wanted):
            for key, amount, start, end in self.db.read(
                "SELECT request_key, amount_atomic, ts_us, updated_us FROM payments"
                f" WHERE status = ? AND request_key IN ({marks(len(chunk))}) ORDER BY id",
                (str(PaymentStatus.SETTLED), *chunk),
            ):
                found[key] = (int(amount), (end - start) / 1_000_000)
        return found

    def row(self, row_id: int) -> dict[str, Any] | None:
        """One ledger row as a dict (columns of ``ledger_schema``), or None."""
        rows = self.rows(where="id = ?", params=(row_id,))
        return rows[0] if rows else None

    def rows(self, *, where: str = "1 = 1", params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Ledger rows as dicts, oldest first. ``where`` is an SQL condition on the table.

        ``held`` says whether the row counts against its budget as a refused signed payment
        whose authorization the chain has not yet shown settled or expired unused (the same
        rule as ``budget_state``).
        """
        records = self.db.read(f"SELECT * FROM payments WHERE {where} ORDER BY id", tuple(params))
        return [ledger_record(record) for record in records]

    def to_arrow(self) -> pa.Table:
        """All ledger rows as an Arrow table with the declared schema."""
        return ledger_table(self.rows())

    def to_pandas(self) -> pd.DataFrame:
        """All ledger rows as a DataFrame (dtypes from the declared Arrow schema)."""
        return arrow_to_pandas(self.to_arrow())

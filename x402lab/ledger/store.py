"""The durable record of every payment: a SQLite database in WAL mode.

One file serves many notebooks and processes at once. Budget reservations happen inside a
``BEGIN IMMEDIATE`` transaction, so they are atomic across threads, asyncio tasks and
processes that share the file. Write-ahead: the row of a signed payment (with its nonce) is
committed, with a full fsync, before the paid request leaves the process.

Statuses: ``reserved`` (budget held, nothing signed), ``signed`` (authorization made, request
about to leave or in flight), ``settled`` (receipt seen), ``rejected`` (the server refused the
payment; nothing settled), ``failed`` (the paid request failed without settling), ``unknown``
(a signed payment left and no clear answer came back), ``released`` (a reservation given back
unsigned), ``refused`` (the client refused to sign). Reserved, signed, settled and unknown
rows count against their budget. A rejected or failed payment keeps counting (``held``)
until its authorization expires: it left the process signed, and until ``validBefore``
whoever holds it could still settle it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from x402lab.errors import BudgetExceeded, ConfigError
from x402lab.ledger.schema import SCHEMA, upgrade
from x402lab.ledger.tables import arrow_to_pandas, as_record, ledger_schema
from x402lab.money import format_usd

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

DEFAULT_LEDGER_PATH = "~/.x402lab/ledger.sqlite"
STATUSES = (
    "reserved",
    "signed",
    "settled",
    "rejected",
    "failed",
    "unknown",
    "released",
    "refused",
)
COUNTING_STATUSES = ("reserved", "signed", "settled", "unknown")
# What a budget's cap is measured against: counting statuses, and refused payments whose
# signed authorization has not expired yet.
_COUNTED_SQL = "(status IN ('reserved','signed','settled','unknown') OR held = 1)"
# Slack on expiry: a chain's clock may lag this machine's.
EXPIRY_SLACK_S = 60


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


@dataclass(frozen=True)
class SignedAuthorization:
    """What the ledger keeps of a signed authorization: enough to find it on chain."""

    nonce: str
    payer: str
    valid_before: int


@dataclass(frozen=True)
class BudgetState:
    """Spend of one budget in atomic units."""

    name: str
    cap_atomic: int | None
    settled_atomic: int
    in_flight_atomic: int
    unknown_atomic: int
    held_atomic: int = 0

    @property
    def committed_atomic(self) -> int:
        """Settled, in flight, unknown and held: what the cap is measured against."""
        return self.settled_atomic + self.in_flight_atomic + self.unknown_atomic + self.held_atomic

    @property
    def remaining_atomic(self) -> int | None:
        if self.cap_atomic is None:
            return None
        return max(0, self.cap_atomic - self.committed_atomic)


class Ledger:
    """The SQLite ledger of payments (default ``~/.x402lab/ledger.sqlite``)."""

    def __init__(
        self,
        path: str | os.PathLike[str] = DEFAULT_LEDGER_PATH,
        *,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot create the ledger folder {self.path.parent}: {exc}"
            ) from None
        self._now = now
        self._lock = threading.RLock()
        try:
            self._db = sqlite3.connect(
                self.path, timeout=60.0, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._durable = True
            self._db.execute("PRAGMA busy_timeout=60000")
            with self.transaction() as db:
                upgrade(db)
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"cannot open the ledger {self.path}: {exc}") from None

    def __repr__(self) -> str:
        return f"Ledger(path={str(self.path)!r})"

    def _now_us(self) -> int:
        return int(self._now() * 1_000_000)

    # -- plumbing shared with the other stores of the same file ----------------------------

    @contextlib.contextmanager
    def transaction(self, *, durable: bool = False) -> Iterator[sqlite3.Connection]:
        """An immediate (write-locking) transaction, committed on success.

        ``durable`` commits with an fsync. Only the write-ahead row of a signed payment needs
        it: that fsync also flushes every earlier commit to this file (they share one WAL),
        so whatever was written before a signature is on disk before the payment leaves.
        """
        with self._lock:
            if durable != self._durable:
                self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
                self._durable = durable
            try:
                self._db.execute("BEGIN IMMEDIATE")
                yield self._db
            except BaseException:
                # Even an interrupt must not leave a write transaction open: it would lock
                # every process sharing the file.
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Rows of a read query, as sqlite3.Row."""
        with self._lock:
            cursor = self._db.execute(sql, params)
            cursor.row_factory = sqlite3.Row
            return cursor.fetchall()

    def ensure_schema(self, ddl: str) -> None:
        """Create a store's own tables in this file (idempotent DDL, ``;``-separated)."""
        with self.transaction() as db:
            for statement in ddl.split(";"):
                if statement.strip():
                    db.execute(statement)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- budgets ---------------------------------------------------------------------------

    def register_budget(
        self, name: str, cap_atomic: int | None, per_call_atomic: int | None
    ) -> None:
        """Record a budget's caps (a named budget keeps its spend across restarts)."""
        now = self._now_us()
        with self.transaction() as db:
            db.execute(
                "INSERT INTO budgets (name, cap_atomic, per_call_atomic, created_us, updated_us)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET"
                " cap_atomic=excluded.cap_atomic, per_call_atomic=excluded.per_call_atomic,"
                " updated_us=excluded.updated_us",
                (name, cap_atomic, per_call_atomic, now, now),
            )

    def budget_state(self, name: str, cap_atomic: int | None = None) -> BudgetState:
        """Settled, in-flight and unknown spend of a budget."""
        with self._lock:
            return self._budget_state(self._db, name, cap_atomic)

    @staticmethod
    def _budget_state(db: sqlite3.Connection, name: str, cap: int | None) -> BudgetState:
        sums = dict.fromkeys((*COUNTING_STATUSES, "held"), 0)
        for status, total in db.execute(
            "SELECT CASE WHEN held = 1 THEN 'held' ELSE status END, SUM(amount_atomic)"
            f" FROM payments WHERE budget = ? AND {_COUNTED_SQL} GROUP BY 1",
            (name,),
        ):
            sums[status] = int(total)
        return BudgetState(
            name=name,
            cap_atomic=cap,
            settled_atomic=sums["settled"],
            in_flight_atomic=sums["reserved"] + sums["signed"],
            unknown_atomic=sums["unknown"],
            held_atomic=sums["held"],
        )

    # -- the payment lifecycle -------------------------------------------------------------

    def reserve(
        self,
        *,
        budget: str,
        cap_atomic: int | None,
        amount_atomic: int,
        meta: PaymentMeta,
        sign: Callable[[], SignedAuthorization] | None = None,
    ) -> int:
        """Hold ``amount_atomic`` of a budget atomically; returns the new row's id.

        With ``sign``, the reservation and the write-ahead row are one durable transaction:
        the cap is checked, then ``sign()`` runs while the budget is held, and the row is
        committed as ``signed`` (with its nonce, fsync'd) before this returns. If ``sign``
        raises, nothing is recorded: nothing signed left the process.

        Raises BudgetExceeded (after recording a ``refused`` row) when the budget's settled,
        in-flight, unknown and held spend plus this amount would pass its cap.
        """
        with self.transaction(durable=sign is not None) as db:
            self._expire_held(db, budget)
            counted = self._counted(db, budget)
            if cap_atomic is not None and counted + amount_atomic > cap_atomic:
                left = max(0, cap_atomic - counted)
                reason = (
                    f"amount {format_usd(amount_atomic)} exceeds what budget {budget!r} has left:"
                    f" {format_usd(left)} of {format_usd(cap_atomic)}"
                )
                self._insert(db, budget, amount_atomic, meta, "refused", error=reason)
                refused = BudgetExceeded(reason, budget=budget, amount_atomic=amount_atomic)
            elif sign is None:
                return self._insert(db, budget, amount_atomic, meta, "reserved")
            else:
                signed = sign()
                row_id = self._insert(db, budget, amount_atomic, meta, "signed")
                db.execute(
                    "UPDATE payments SET nonce = ?, payer = ?, valid_before = ? WHERE id = ?",
                    (signed.nonce, signed.payer, signed.valid_before, row_id),
                )
                return row_id
        raise refused

    def _counted(self, db: sqlite3.Connection, budget: str) -> int:
        # A running total kept in the budgets row, so a reservation costs the same with
        # ten rows or a million; it is recomputed only for a budget seen for the first time.
        found = db.execute(
            "SELECT counted_atomic FROM budgets WHERE name = ?", (budget,)
        ).fetchone()
        if found is not None:
            return int(found[0])
        total = db.execute(
            f"SELECT COALESCE(SUM(amount_atomic), 0) FROM payments WHERE budget = ?"
            f" AND {_COUNTED_SQL}",
            (budget,),
        ).fetchone()[0]
        now = self._now_us()
        db.execute(
            "INSERT INTO budgets (name, counted_atomic, created_us, updated_us) VALUES (?,?,?,?)",
            (budget, int(total), now, now),
        )
        return int(total)

    def _expire_held(self, db: sqlite3.Connection, budget: str) -> None:
        """Stop counting refused payments whose authorization can no longer settle."""
        cutoff = int(self._now()) - EXPIRY_SLACK_S
        where = "held = 1 AND budget = ? AND valid_before < ?"
        total, count = db.execute(
            f"SELECT COALESCE(SUM(amount_atomic), 0), COUNT(*) FROM payments WHERE {where}",
            (budget, cutoff),
        ).fetchone()
        if count:
            db.execute(f"UPDATE payments SET held = 0 WHERE {where}", (budget, cutoff))
            self._count(db, budget, -int(total))

    def _count(self, db: sqlite3.Connection, budget: str, delta: int) -> None:
        if not delta:
            return
        sql = "UPDATE budgets SET counted_atomic = counted_atomic + ? WHERE name = ?"
        if db.execute(sql, (delta, budget)).rowcount == 0:
            # First sight of this budget: its row is created from the payments table,
            # which already holds this change.
            self._counted(db, budget)

    def record_refused(
        self, *, budget: str, amount_atomic: int, meta: PaymentMeta, error: str
    ) -> int:
        """Record a challenge the client refused to sign."""
        with self.transaction() as db:
            return self._insert(db, budget, amount_atomic, meta, "refused", error=error)

    def _insert(
        self,
        db: sqlite3.Connection,
        budget: str,
        amount: int,
        meta: PaymentMeta,
        status: str,
        error: str | None = None,
    ) -> int:
        now = self._now_us()
        cursor = db.execute(
            "INSERT INTO payments (ts_us, updated_us, service, method, path, model, request_key,"
            " budget, amount_atomic, upstream_usd, price_mult, status, pay_to, network, asset,"
            " error) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
                status,
                meta.pay_to,
                meta.network,
                meta.asset,
                error,
            ),
        )
        if status in COUNTING_STATUSES:
            self._count(db, budget, int(amount))
        return int(cursor.lastrowid or 0)

    def record_signed(self, row_id: int, *, nonce: str, payer: str, valid_before: int) -> None:
        """Write-ahead: commit the signed authorization's nonce, with an fsync, before the
        request is sent."""
        self._move(
            row_id,
            "signed",
            ("reserved",),
            durable=True,
            nonce=nonce,
            payer=payer,
            valid_before=valid_before,
        )

    def record_settled(self, row_id: int, *, tx_hash: str | None, payer: str | None) -> None:
        """The receipt arrived: the payment settled."""
        self._move(row_id, "settled", ("signed", "unknown"), tx_hash=tx_hash, payer=payer)

    def record_rejected(self, row_id: int, error: str) -> None:
        """The server refused the payment: nothing settled, the reservation is given back."""
        self._move(row_id, "rejected", ("signed",), error=error)

    def record_failed(self, row_id: int, error: str) -> None:
        """The paid request failed in a way that proves nothing settled."""
        self._move(row_id, "failed", ("signed",), error=error)

    def record_unknown(self, row_id: int, error: str) -> None:
        """A signed payment left and no clear answer came back; it keeps counting."""
        self._move(row_id, "unknown", ("signed",), error=error)

    def release(self, row_id: int, error: str | None = None) -> None:
        """Give back a reservation that was never signed."""
        self._move(row_id, "released", ("reserved",), error=error)

    def _move(
        self,
        row_id: int,
        status: str,
        allowed_from: tuple[str, ...],
        *,
        durable: bool = False,
        **fields: Any,
    ) -> None:
        fields = {key: value for key, value in fields.items() if value is not None}
        assignments = "".join(f", {key} = ?" for key in fields)
        with self.transaction(durable=durable) as db:
            found = db.execute(
                "SELECT status, amount_atomic, budget, valid_before, held FROM payments"
                " WHERE id = ?",
                (row_id,),
            ).fetchone()
            current = found[0] if found else "missing"
            if current not in allowed_from:
                raise ConfigError(f"ledger row {row_id} cannot move to {status!r} from {current!r}")
            amount, budget, valid_before, held_before = found[1], found[2], found[3], found[4]
            # A signed payment the server refused keeps counting until it expires.
            held = int(
                status in ("rejected", "failed")
                and current == "signed"
                and valid_before is not None
            )
            db.execute(
                f"UPDATE payments SET status = ?, updated_us = ?, held = ?{assignments}"
                " WHERE id = ?",
                (status, self._now_us(), held, *fields.values(), row_id),
            )
            was_counted = current in COUNTING_STATUSES or bool(held_before)
            counts = status in COUNTING_STATUSES or bool(held)
            if was_counted != counts:
                self._count(db, budget, amount if counts else -amount)

    def recover_interrupted(self, *, reserved_older_than_s: float = 600.0) -> int:
        """Settle the rows a stopped process left open; returns how many rows moved.

        ``signed`` rows whose authorization window has passed become ``unknown`` (whether
        they settled is not known; they keep counting). ``reserved`` rows older than
        ``reserved_older_than_s`` were never signed and are released.
        """
        now_us = self._now_us()
        cutoff = int(self._now()) - EXPIRY_SLACK_S
        with self.transaction() as db:
            moved = db.execute(
                "UPDATE payments SET status = 'unknown', updated_us = ?, error = COALESCE(error,"
                " 'the process stopped before an answer arrived') WHERE status = 'signed'"
                " AND valid_before IS NOT NULL AND valid_before < ?",
                (now_us, cutoff),
            ).rowcount
            stale = db.execute(
                "SELECT id, amount_atomic, budget FROM payments WHERE status = 'reserved'"
                " AND ts_us < ?",
                (now_us - int(reserved_older_than_s * 1_000_000),),
            ).fetchall()
            for row_id, amount, budget in stale:
                db.execute(
                    "UPDATE payments SET status = 'released', updated_us = ?, error ="
                    " 'reserved by a process that stopped before signing' WHERE id = ?",
                    (now_us, row_id),
                )
                self._count(db, budget, -amount)
            return moved + len(stale)

    # -- reading ---------------------------------------------------------------------------

    def row(self, row_id: int) -> dict[str, Any] | None:
        """One ledger row as a dict (columns of ``ledger_schema``), or None."""
        rows = self.rows(where="id = ?", params=(row_id,))
        return rows[0] if rows else None

    def rows(self, *, where: str = "1", params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Ledger rows as dicts, oldest first. ``where`` is an SQL condition on the table."""
        records = self.query(f"SELECT * FROM payments WHERE {where} ORDER BY id", params)
        return [as_record(record) for record in records]

    def to_arrow(self) -> pa.Table:
        """All ledger rows as an Arrow table with the declared schema."""
        import pyarrow as pa

        records = self.rows()
        schema = ledger_schema()
        columns = {name: [record[name] for record in records] for name in schema.names}
        return pa.table(columns, schema=schema)

    def to_pandas(self) -> pd.DataFrame:
        """All ledger rows as a DataFrame (dtypes from the declared Arrow schema)."""
        return arrow_to_pandas(self.to_arrow())

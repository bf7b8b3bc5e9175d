"""The SQLite ledger file: WAL mode, pragmas, transactions and grouped writes.

SQLite runs in WAL mode. A write transaction is ``BEGIN IMMEDIATE``: it takes the write lock
up front, so a read-then-write inside it is atomic across threads, tasks and processes that
share the file. ``durable=True`` commits with ``synchronous=FULL`` (an fsync of the WAL);
other commits use ``NORMAL``. One durable commit flushes every earlier commit to the same
file (they share one WAL), so a row written before a durable one is on disk with it.

Grouped writes: the writes a batch run passes its ``CommitGroup`` (its signed rows, its
answers with their settlements) of one event-loop iteration are savepoints of one
transaction, committed by a callback of the next iteration (or by the write-ahead fsync, an
ungrouped transaction, ``end_group``), so each
page they touch reaches the WAL once per group rather than once per payment: about a tenth
of a batch's client CPU per paid call. The write lock is held meanwhile; other processes
wait for it as for any transaction. A block of one statement (``write_one``: a settlement
committed alone) needs no savepoint: SQLite undoes a failed statement alone.

The write-ahead fsync that makes a signed payment's row durable before its request leaves,
one fsync for many rows, is ``write_ahead.py``'s.

PostgreSQL commits are durable when they return (``synchronous_commit`` on): nothing to wait
for there.

``open_database`` picks the backend a ledger location names (this file, or ``postgres.py``).
Where the engine sits under the stores, and what it shares with PostgreSQL: ``database.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from x402lab.errors import ConfigError, StoreError
from x402lab.ledger.database import CommitGroup, Database, Row, Tx, private_database_file
from x402lab.ledger.postgres import PostgresDatabase


class SQLiteDatabase(Database):
    """A SQLite database file shared by every store of one ledger (WAL mode).

    Raises ConfigError when the file cannot be opened or created, or is not a database.
    """

    dialect = "sqlite"
    driver_errors = (sqlite3.DatabaseError,)

    def __init__(self, path: str | os.PathLike[str], *, timeout_s: float = 60.0) -> None:
        self.path = Path(path).expanduser()
        try:
            private_database_file(self.path)  # 0600 in a 0700 folder, whatever the umask
        except OSError as exc:
            raise ConfigError(
                f"cannot create the ledger folder {self.path.parent}: {exc}"
            ) from None
        self._lock = threading.RLock()
        try:
            self._db = sqlite3.connect(
                self.path, timeout=timeout_s, isolation_level=None, check_same_thread=False
            )
            self._db.row_factory = sqlite3.Row
            _into_wal_mode(self._db, timeout_s)
            self._db.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
            self._db.execute("PRAGMA synchronous=FULL")
            self._durable = True
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"cannot open the ledger {self.path}: {exc}") from None
        self._tx = Tx(self._db, self.dialect)
        #: The event loop whose grouped blocks share the open transaction, if one is open.
        self._group: asyncio.AbstractEventLoop | None = None
        self._group_failure: str | None = None

    def __repr__(self) -> str:
        return f"SQLiteDatabase({str(self.path)!r})"

    @property
    def url(self) -> str:
        return str(self.path)

    @contextlib.contextmanager
    def transaction(
        self, *, durable: bool = False, group: CommitGroup | None = None
    ) -> Iterator[Tx]:
        # BEGIN IMMEDIATE takes the write lock up front; ``durable`` commits with
        # synchronous=FULL (an fsync of the WAL), other commits with NORMAL.
        loop = self._group_loop(durable, group)
        with self._lock:
            if loop is not None:
                yield from self._grouped(loop)
                return
            self._commit_group()  # transactions never nest: an open group ends first
            self._synchronous(durable)
            try:
                self._db.execute("BEGIN IMMEDIATE")
                yield self._tx
            except BaseException:
                # Even an interrupt must not leave a write transaction open: it would lock
                # every process sharing the file.
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _synchronous(self, durable: bool) -> None:
        if durable != self._durable:
            self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            self._durable = durable

    def write_one(
        self,
        sql: str,
        params: Sequence[Any] = (),
        *,
        durable: bool = False,
        group: CommitGroup | None = None,
    ) -> int:
        loop = self._group_loop(durable, group)
        if loop is None:
            return super().write_one(sql, params, durable=durable)
        with self._lock:
            self._open_group(loop)
            try:
                # A failed statement is undone alone by SQLite; the group goes on.
                return int(self._db.execute(sql, params).rowcount)
            except BaseException:
                self._lost_group_unless_open()
                raise

    def _group_loop(
        self, durable: bool, group: CommitGroup | None
    ) -> asyncio.AbstractEventLoop | None:
        """The loop whose group a write joins: a non-durable write given a group, on an
        event loop (a blocking caller has no next iteration to commit it)."""
        if durable or group is None:
            return None
        if group.db is not self:
            raise ConfigError(f"a group of commits of {group.db.url} was given to {self.url}")
        try:
            return asyncio.get_running_loop()
        except RuntimeError:
            return None

    def _open_group(self, loop: asyncio.AbstractEventLoop) -> None:
        """Open the group transaction of ``loop``'s iteration unless it is open; a callback
        of the next iteration (or an earlier ``end_group``) commits it."""
        if self._group is not loop:
            self._commit_group()
            self._synchronous(False)
            self._db.execute("BEGIN IMMEDIATE")
            self._group = loop
            loop.call_soon(self._end_group_quietly)

    def _lost_group_unless_open(self) -> None:
        """After a failed grouped write: if the engine rolled the whole group back (a full
        disk, an I/O error), the group is lost and the next ``end_group`` says so."""
        if not self._db.in_transaction:
            self._group = None
            self._group_failure = "a write it held failed"

    def _grouped(self, loop: asyncio.AbstractEventLoop) -> Iterator[Tx]:
        """One grouped block: a savepoint in the group's transaction."""
        self._open_group(loop)
        self._db.execute("SAVEPOINT grouped")
        try:
            yield self._tx
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK TO grouped")
                self._db.execute("RELEASE grouped")
            self._lost_group_unless_open()
            raise
        self._db.execute("RELEASE grouped")

    def _commit_group(self) -> None:
        # Under ``_lock``. One COMMIT for every block of the group: each row's pages are
        # written to the WAL once per group instead of once per block.
        if self._group is None:
            return
        self._group = None
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            self._group_failure = str(exc)

    def _end_group_quietly(self) -> None:
        with self._lock:
            self._commit_group()  # a failure is kept for the next ``end_group``

    def end_group(self) -> None:
        with self._lock:
            self._commit_group()
            failure, self._group_failure = self._group_failure, None
        if failure is not None:
            raise StoreError(
                f"the ledger {self.path} could not commit a batch's writes ({failure}):"
                " the signed payments among them were not sent"
            )

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def read_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        with self._lock:
            found: Row | None = self._db.execute(sql, params).fetchone()
            return found

    def close(self) -> None:
        with self._lock:
            self._commit_group()
            self._db.close()

    def _stored_version(self, tx: Tx | None) -> int:
        found = tx.one("PRAGMA user_version") if tx else self.read_one("PRAGMA user_version")
        return int(found[0]) if found is not None else 0

    def _record_version(self, tx: Tx, version: int) -> None:
        tx.execute(f"PRAGMA user_version = {int(version)}")


def _into_wal_mode(db: sqlite3.Connection, timeout_s: float) -> None:
    """``PRAGMA journal_mode=WAL``, tried again while the file is locked (up to ``timeout_s``).

    Processes that open a new file together each switch it to WAL. One of them may be
    answered "database is locked" at once, without SQLite's busy handler (waiting could
    deadlock two connections that both hold a shared lock): the statement is tried again
    after the others' switch. Measured: 6 processes opening a new ledger together, 150 times,
    12 such failures without this.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.005)


def open_database(target: str | os.PathLike[str] | Database) -> Database:
    """The database at ``target``: a ``Database`` as is, a SQLite file path or ``sqlite://``
    URL, or a ``postgresql://`` (``postgres://``) URL.

    Raises ConfigError for a URL of another scheme (naming the supported ones) and for a
    database that cannot be opened; a password in the URL is never repeated.
    """
    if isinstance(target, Database):
        return target
    text = os.fspath(target)
    scheme = text.split("://", 1)[0].lower() if "://" in text else None
    if scheme in ("postgresql", "postgres"):
        return PostgresDatabase(text)
    if scheme is not None and scheme != "sqlite":
        where = text.split("://", 1)[1].split("@")[-1]
        raise ConfigError(
            f"ledger {scheme}://{where}: {scheme!r} is not a supported ledger scheme; use a"
            " SQLite file path (or sqlite:///path) or a PostgreSQL URL"
            " (postgresql://user@host:port/dbname)"
        )
    if scheme == "sqlite":
        text = text.split("://", 1)[1]
    return SQLiteDatabase(text)

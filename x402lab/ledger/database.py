"""The database under the store: connection, pragmas, transactions, reads and migrations.

``Database`` is the interface of the one object that talks to the database engine
(``SQLiteDatabase`` implements it; ``open_database`` picks it). Everything above it
(payments, claims, jobs, the report library) writes SQL in the subset that SQLite and
PostgreSQL share, and leaves the differences to a few methods here:

- placeholders: SQL is written with ``?``; a backend rewrites them (PostgreSQL: ``%s``);
- upserts: ``INSERT ... ON CONFLICT (...) DO UPDATE SET col = excluded.col`` / ``DO NOTHING``
  (the same text in both);
- new ids: ``Tx.insert`` / ``Tx.insert_many`` (SQLite ``lastrowid``; PostgreSQL
  ``RETURNING id``);
- DDL types: a migration's ``apply`` receives the ``Tx`` and reads ``tx.dialect``;
- the schema version: ``PRAGMA user_version`` here (a one-row table on PostgreSQL);
- rows: readable by index and by column name (``sqlite3.Row``; a backend supplies the same).

``PostgresDatabase`` (``postgres.py``) is the second subclass; ``backends.open_database``
picks one from the URL's scheme.

SQLite runs in WAL mode. A write transaction is ``BEGIN IMMEDIATE``: it takes the write lock
up front, so a read-then-write inside it is atomic across threads, tasks and processes that
share the file. ``durable=True`` commits with ``synchronous=FULL`` (an fsync of the WAL);
other commits use ``NORMAL``. One durable commit flushes every earlier commit to the same
file (they share one WAL), so a row written before a durable one is on disk with it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from x402lab.errors import ConfigError


class Row(Protocol):
    """A result row: by index and by column name (``sqlite3.Row``, ``postgres.PgRow``);
    ``dict(row)`` and ``row.keys()`` work, iterating gives the values."""

    def __getitem__(self, key: int | str, /) -> Any: ...
    def keys(self) -> list[str]: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __len__(self) -> int: ...


class Cursor(Protocol):
    """What ``Tx.execute`` returns: ``rowcount`` and the rows of a query."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> Any: ...


#: Most values one statement binds (SQLite's historical limit is 999): bulk reads go in chunks.
CHUNK = 500


def chunks(values: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    """``values`` in slices of at most ``size`` (for ``IN (...)`` lists)."""
    for start in range(0, len(values), size):
        yield values[start : start + size]


def marks(count: int) -> str:
    """``?, ?, ?``: ``count`` placeholders (for ``IN (...)`` and ``VALUES (...)``)."""
    return ", ".join("?" * count)


@dataclass(frozen=True)
class Migration:
    """One step of the schema: ``apply(tx)`` brings version ``version - 1`` to ``version``.

    Steps run in order, each in the transaction that also records the new version, so a file
    is never left half upgraded. ``apply`` must cope with tables an older x402lab created
    without a version number (``CREATE ... IF NOT EXISTS``, columns checked before adding).
    """

    version: int
    name: str
    apply: Callable[[Tx], None]


class Tx:
    """An open write transaction (from ``Database.transaction``). Commits on leaving the
    ``with`` block, rolls back on any exception. This is SQLite's; a backend subclasses it
    where it differs (placeholders, ``RETURNING id``, ``information_schema`` columns)."""

    def __init__(self, connection: sqlite3.Connection, dialect: str) -> None:
        self.connection = connection
        self.dialect = dialect

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """Run one statement; returns its cursor (``rowcount``, ``fetchone``...)."""
        return self.connection.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> int:
        """Run one statement for every parameter row; returns the rows changed."""
        return self.connection.executemany(sql, rows).rowcount

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row of a query, or None."""
        found: Row | None = self.connection.execute(sql, params).fetchone()
        return found

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row of a query."""
        return self.connection.execute(sql, params).fetchall()

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row (None when there is no row)."""
        found = self.one(sql, params)
        return None if found is None else found[0]

    def insert(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one ``INSERT`` into a table with an ``id`` key; returns the new id."""
        cursor = self.connection.execute(sql, params)
        return int(cursor.lastrowid or 0)

    def insert_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> list[int]:
        """Run one ``INSERT`` per parameter row; returns the new ids in order.

        SQLite inserts them one by one inside this transaction (cheap: no round trip);
        PostgreSQL uses ``executemany(..., returning=True)`` (one pipeline).
        """
        execute = self.connection.execute
        return [int(execute(sql, params).lastrowid or 0) for params in rows]

    def columns(self, table: str) -> set[str]:
        """The column names of ``table`` (empty when it does not exist)."""
        return {row[1] for row in self.connection.execute(f"PRAGMA table_info({table})")}


class Database(ABC):
    """The interface every backend implements: transactions, reads, schema versions.

    ``SQLiteDatabase`` and ``postgres.PostgresDatabase`` implement the abstract methods (the
    latter with a ``Tx`` subclass) and inherit ``migrate``.
    """

    dialect: str
    path: Path
    #: The driver's errors that ``migrate`` turns into a ConfigError.
    driver_errors: tuple[type[Exception], ...] = ()

    @property
    @abstractmethod
    def url(self) -> str:
        """Where the data lives, as a person would write it (never with a password)."""

    @abstractmethod
    def transaction(self, *, durable: bool = False) -> contextlib.AbstractContextManager[Tx]:
        """A write transaction that locks out other writers from its first statement.

        Commits when the block ends (durably, on disk, when ``durable``), rolls back when it
        raises. Not reentrant: a store never opens one inside another.
        """

    @abstractmethod
    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row of a read query (outside any transaction: a consistent snapshot)."""

    @abstractmethod
    def read_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row of a read query, or None."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection (the data stays)."""

    @abstractmethod
    def _stored_version(self, tx: Tx | None) -> int:
        """The schema version recorded in the database (0 when none), read in ``tx`` when
        given."""

    @abstractmethod
    def _record_version(self, tx: Tx, version: int) -> None:
        """Record ``version`` as the schema version, inside ``tx``."""

    @property
    def version(self) -> int:
        """The schema version recorded in the database (0 for a new or unversioned one)."""
        return self._stored_version(None)

    def migrate(self, migrations: Sequence[Migration]) -> int:
        """Apply the steps newer than the database's version, each in one transaction.

        Returns the version reached. Raises ConfigError when the database was written by a
        newer x402lab (its version is above the last step known here): nothing is changed,
        and nothing in it is read with rules that may no longer hold.
        """
        steps = sorted(migrations, key=lambda step: step.version)
        if [step.version for step in steps] != list(range(1, len(steps) + 1)):
            raise ConfigError("schema migrations must be numbered 1, 2, 3, ... without gaps")
        latest = len(steps)
        self._refuse_newer(self.version, latest)
        for step in steps:
            try:
                with self.transaction() as tx:
                    # Read again under the write lock: another process may have upgraded.
                    current = self._stored_version(tx)
                    self._refuse_newer(current, latest)
                    if current >= step.version:
                        continue
                    step.apply(tx)
                    self._record_version(tx, step.version)
            except self.driver_errors as exc:
                raise ConfigError(
                    f"cannot upgrade the ledger {self.url} to schema {step.version}"
                    f" ({step.name}): {exc}"
                ) from None
        return latest

    def _refuse_newer(self, current: int, latest: int) -> None:
        if current > latest:
            raise ConfigError(
                f"the ledger {self.url} has schema version {current}, newer than this x402lab"
                f" understands ({latest}): it was written by a newer x402lab. Upgrade x402lab"
                " (pip install -U x402lab) or use another ledger file; nothing was changed"
            )


class SQLiteDatabase(Database):
    """A SQLite database file shared by every store of one ledger (WAL mode).

    Raises ConfigError when the file cannot be opened or created, or is not a database.
    """

    dialect = "sqlite"
    driver_errors = (sqlite3.DatabaseError,)

    def __init__(self, path: str | os.PathLike[str], *, timeout_s: float = 60.0) -> None:
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
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
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
            self._db.execute("PRAGMA synchronous=FULL")
            self._durable = True
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"cannot open the ledger {self.path}: {exc}") from None
        self._tx = Tx(self._db, self.dialect)

    def __repr__(self) -> str:
        return f"SQLiteDatabase({str(self.path)!r})"

    @property
    def url(self) -> str:
        return str(self.path)

    @contextlib.contextmanager
    def transaction(self, *, durable: bool = False) -> Iterator[Tx]:
        # BEGIN IMMEDIATE takes the write lock up front; ``durable`` commits with
        # synchronous=FULL (an fsync of the WAL), other commits with NORMAL.
        with self._lock:
            if durable != self._durable:
                self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
                self._durable = durable
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

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def read_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        with self._lock:
            found: Row | None = self._db.execute(sql, params).fetchone()
            return found

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _stored_version(self, tx: Tx | None) -> int:
        found = tx.one("PRAGMA user_version") if tx else self.read_one("PRAGMA user_version")
        return int(found[0]) if found is not None else 0

    def _record_version(self, tx: Tx, version: int) -> None:
        tx.execute(f"PRAGMA user_version = {int(version)}")

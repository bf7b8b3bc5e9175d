"""The database under the store: transactions, reads and migrations, as an interface; and
whose it is (the process that writes a row, the files only its owner may read).

``Database`` is the interface of the one object that talks to the database engine
(``sqlite.SQLiteDatabase`` implements it). Everything above it
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

``PostgresDatabase`` (``postgres.py``) is the second subclass; ``sqlite.open_database``
picks one from the URL's scheme. Grouped writes (``CommitGroup``): a batch run's writes of
one event-loop iteration share one commit where the backend can.

A ledger's files are private to their owner, whatever the umask (``private_folder``,
``private_database_file``): the ledger holds prompts, answers, bought report bodies and signed
payments, so on a shared host (JupyterHub) nobody else may read it, nor the media it points
at. The folders we create are 0700 (``~/.x402lab`` always, as it is ours); a SQLite file and
its ``-wal`` and ``-shm`` are 0600. SQLite gives the ``-wal`` and ``-shm`` it creates the mode
of the database file, so creating that file 0600 before SQLite opens it covers all three;
files already there are brought to 0600 too.

Who writes a row: every payment and claim row names its owner, ``host:pid:start``
(``process_owner``; ``start`` in seconds since the epoch, from the kernel's record of the
process), and a payment its user (``user_label``). A process on this host is alive when its
pid runs *and* started at the same second, so a later process that reuses the pid is not
mistaken for it. A process on another host cannot be checked from here: ``owner_gone`` says
False for it, and callers fall back to age (a stale claim) or to the authorization's window.
One holder of claims inside a process (a lab's batches) may name itself
``host:pid:start/holder`` (``holder_owner``): its claims are told apart from the other
holders' of the process, and it is alive as long as the process is.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import secrets
import socket
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Protocol

from x402lab.errors import ConfigError
from x402lab.private import FILE_MODE, private_file


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


def record_fields(row: Row, record: Any, **given: Any) -> dict[str, Any]:
    """The fields of the dataclass ``record`` from the row's columns of the same names, but
    those ``given`` (a record type's constructor arguments)."""
    return {f.name: row[f.name] for f in fields(record) if f.name not in given} | given


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
        found: Row | None = self.execute(sql, params).fetchone()
        return found

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row of a query."""
        found: list[Row] = self.execute(sql, params).fetchall()
        return found

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


class CommitGroup:
    """The ledger writes of one batch run that may share commits, passed to each of them.

    A run opens one (``Database.commit_group``) and hands it to the writes that can wait for
    a shared commit: a signed row, which the write-ahead fsync (``WriteAhead.durable``)
    commits before its payload leaves, and an answer stored with its settlement, which a
    crash may drop only together (recovery finds the row ``signed`` by a process that is
    gone: never bought again on its own). Where the backend groups (SQLite), the grouped
    writes of one event-loop iteration share one commit, made at most one iteration later,
    at the next write outside a group, or at ``end()``, whichever comes first; this
    connection sees them at once, others then. PostgreSQL commits each write on its own.
    """

    def __init__(self, db: Database) -> None:
        self.db = db

    def __repr__(self) -> str:
        return f"CommitGroup({self.db.url!r})"

    def end(self) -> None:
        """Commit what the group holds now; raises StoreError when one of its commits
        failed (the signed payments among its writes were not sent)."""
        self.db.end_group()


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
    def transaction(
        self, *, durable: bool = False, group: CommitGroup | None = None
    ) -> contextlib.AbstractContextManager[Tx]:
        """A write transaction that locks out other writers from its first statement.

        Commits when the block ends (durably, on disk, when ``durable``), rolls back when it
        raises. Not reentrant: a store never opens one inside another. ``group``: a batch
        run's ``CommitGroup`` the block may join (where the backend groups; never when
        ``durable``).
        """

    def write_one(
        self,
        sql: str,
        params: Sequence[Any] = (),
        *,
        durable: bool = False,
        group: CommitGroup | None = None,
    ) -> int:
        """Run one write statement in a transaction of its own (``durable`` and ``group``
        as for ``transaction``); returns the rows it changed. One statement is atomic by
        itself, so a grouped one needs no savepoint of its own."""
        with self.transaction(durable=durable, group=group) as tx:
            return int(tx.execute(sql, params).rowcount)

    def commit_group(self) -> CommitGroup:
        """A new group of commits for one batch run's writes (see ``CommitGroup``)."""
        return CommitGroup(self)

    def end_group(self) -> None:
        """Commit the open group of grouped blocks, if any; raises StoreError when a group
        could not be committed since the last call. (Backends that do not group have
        nothing to do.)"""
        return None

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


# -- the files of a ledger, private to their owner -----------------------------------------

_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def private_database_file(path: Path) -> None:
    """Create the database file 0600 if missing, and bring it and its side files to 0600."""
    private_file(path)
    for suffix in _SQLITE_SIDE_FILES:
        target = path.with_name(path.name + suffix)
        with contextlib.suppress(FileNotFoundError):
            if target.stat().st_mode & 0o777 != FILE_MODE:
                os.chmod(target, FILE_MODE)


# -- owners: which process wrote a row, and whether it still runs ---------------------------

_OWNER: str | None = None


def process_owner() -> str:
    """``host:pid:start``: this process, told apart from a later one that reuses its pid."""
    global _OWNER
    if _OWNER is None:  # forgotten in a forked child (below): recomputed there
        _OWNER = f"{_hostname()}:{os.getpid()}:{_process_start('self')}"
    return _OWNER


def holder_owner() -> str:
    """``host:pid:start/holder``: a new holder of claims in this process, whose claims no
    other holder of the process takes for its own (a random ``holder``: nothing kept here)."""
    return f"{process_owner()}/{secrets.token_hex(4)}"


def _forget_owner() -> None:
    global _OWNER
    _OWNER = None


# Every paid call asks; a fork is the only way the answer changes (and asking the kernel
# for the pid each time was a system call per ledger row).
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_owner)


def user_label() -> str:
    """Who is paying, as the ledger's ``user_label`` says it: ``X402LAB_USER`` when set, else
    ``login@host`` (what a team reads in ``lab.spend(by="user")``)."""
    given = os.environ.get("X402LAB_USER", "").strip()
    if given:
        return given
    import getpass

    try:
        login = getpass.getuser()
    except (OSError, KeyError):  # no login name (a container without a passwd entry)
        login = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return f"{login}@{_hostname()}"


@functools.cache
def _hostname() -> str:
    return socket.gethostname()


def owner_alive(owner: str | None) -> bool | None:
    """Whether the process ``owner`` names still runs: True or False on this host, None when
    it cannot be told (another host, or an owner written in another form)."""
    if not owner:
        return None
    owner = owner.partition("/")[0]  # a holder lives as long as its process
    if owner == process_owner():
        return True
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or parts[0] != _hostname():
        return None
    try:
        pid, start = int(parts[1]), int(parts[2])
    except ValueError:
        return None
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it runs, under another user
    except OSError:
        return None
    found = _process_start(str(pid), fallback=False)
    if found is None:  # no /proc: a running pid is all that can be told
        return True
    # The start time is derived from clock ticks: allow one second of rounding.
    return abs(found - start) <= 1


def owner_gone(owner: str | None) -> bool:
    """True only when ``owner`` is a process of this host that no longer runs."""
    return owner_alive(owner) is False


class GoneOwners:
    """``owner_gone`` remembered per owner for one pass (a pass reads /proc once each)."""

    def __init__(self) -> None:
        self._seen: dict[str | None, bool] = {}

    def __call__(self, owner: str | None) -> bool:
        found = self._seen.get(owner)
        if found is None:
            found = self._seen[owner] = owner_gone(owner)
        return found


def _process_start(pid: str, *, fallback: bool = True) -> int | None:
    try:  # Linux: field 22 of /proc/PID/stat is the start time in clock ticks after boot
        with open(f"/proc/{pid}/stat") as stat:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as system:
            boot = next(int(line.split()[1]) for line in system if line.startswith("btime"))
        return boot + ticks // os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return int(time.time()) if fallback else None


def denied_advice(exc: Exception, role: str | None, url: str) -> str:
    """What a database's "permission denied for table T" means, for ``role`` on the ledger at
    ``url``: the table, and the grant (by the ledger's owner) that would fix it."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    found = re.search(r"permission denied for (?:table|relation|sequence) (\w+)", text)
    table = found.group(1) if found else "the ledger's tables"
    who = role or "this role"
    return (
        f"the role {who!r} may not use {table} of the ledger {url} ({text}). Reading (spend,"
        f" cost_report, `x402lab report`) needs SELECT on every ledger table: GRANT SELECT ON"
        f" ALL TABLES IN SCHEMA public TO {who}; paying needs SELECT, INSERT, UPDATE and"
        f" DELETE on them and USAGE on their sequences (as the ledger's owner)"
    )

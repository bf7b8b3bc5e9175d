"""The ledger in PostgreSQL: one database a team (or a Dask cluster) shares, on psycopg 3.

``PostgresDatabase`` implements ``database.Database``; everything above it writes SQL with
``?`` placeholders in the subset SQLite and PostgreSQL share, rewritten here to ``%s``.

Writers lock each other out exactly as SQLite's ``BEGIN IMMEDIATE`` does: the first statement
of every write transaction takes one transaction-scoped advisory lock of the ledger
(``pg_advisory_xact_lock``), released by its commit or rollback. Much of the store reads
then writes (a reservation reads the budget's running total, checks the cap, inserts the
row), so this is what makes a reservation atomic across processes and machines with no
check-then-write race (claims and recovery read and write across tables on the same promise).
Reads take no lock: each one is a snapshot of what was committed. A role without a grant gets
a ConfigError naming the table and the grant (``database.denied_advice``).

Every transaction commits with ``synchronous_commit`` off, so the lock is never held through
a disk flush; a ``durable`` one (the write-ahead row of a signed payment) then runs ``FLUSH``
before it returns, which flushes the WAL past its commit. The WAL is one sequence, so that
flush makes every earlier commit durable too: the same promise as the SQLite backend's.

psycopg is optional (``pip install "x402lab[postgres]"``), imported when a PostgreSQL ledger
is opened. Passwords never appear in ``url``, reprs or error messages: ``PgTarget`` says where
a ledger is without one, and a failed connection in words a person can act on.
"""

from __future__ import annotations

import contextlib
import functools
import re
import weakref
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from x402lab.errors import ConfigError
from x402lab.ledger.database import CommitGroup, Cursor, Database, Row, Tx, denied_advice

#: The advisory lock every write transaction of a ledger takes first (any fixed number: the
#: lock is per database, and only x402lab takes it there).
LEDGER_LOCK_KEY = 402_402_402
#: How long opening a connection may take before the server is called unreachable.
CONNECT_TIMEOUT_S = 5
#: How long a writer waits for the ledger's lock (as SQLite's busy timeout) before failing.
LOCK_TIMEOUT_S = 60
#: Makes every commit before it durable, taking no lock: a transaction with a (tiny) WAL
#: record commits with ``synchronous_commit`` on, which flushes the WAL up to its commit
#: record, past every earlier commit (the WAL is one sequence). Concurrent flushes of many
#: sessions are one disk flush (PostgreSQL's group commit).
FLUSH = "SELECT pg_logical_emit_message(true, 'x402lab', 'durable')"
#: Where the schema version lives (SQLite keeps it in ``PRAGMA user_version``).
VERSION_TABLE = "x402lab_schema"
INSTALL_HINT = 'pip install "x402lab[postgres]"'


#: What libpq says when no server answers there.
_UNREACHABLE = (
    "connection refused",
    "could not connect",
    "timeout expired",
    "no such file or directory",
    "could not translate host name",
    "name or service not known",
    "network is unreachable",
    "no route to host",
)


class PgTarget:
    """The parts of a ledger URL a message may show (``params``: libpq's, from
    ``conninfo_to_dict``); the password is kept only to be scrubbed from messages."""

    def __init__(self, params: dict[str, Any]) -> None:
        self._password = params.get("password")
        host = params.get("host") or params.get("hostaddr")
        port = params.get("port")
        #: ``host:port``, or "the local socket".
        self.where = f"{host}:{port or 5432}" if host else "the local socket"
        # libpq's defaults: the database is named after the user, the user after the login.
        self.dbname = str(params.get("dbname") or params.get("user") or _login())
        user = f"{params['user']}@" if params.get("user") else ""
        #: ``postgresql://user@host:port/dbname``: never the password.
        self.url = f"postgresql://{user}{host or ''}{f':{port}' if port else ''}/{self.dbname}"
        folder = f"{host or 'local'}-{port or 5432}-{self.dbname}"
        folder = "".join(char if char.isalnum() or char in "-_." else "_" for char in folder)
        #: Files that belong next to the ledger (downloaded media) stay on this machine.
        self.folder = Path("~/.x402lab/postgresql").expanduser() / folder

    def explain(self, exc: Exception) -> str:
        """What a failed connection means and what to do (never with the password)."""
        text = str(exc).strip()
        # libpq says "connection to server at "h", port p failed: <why>": keep the why.
        first = text.splitlines()[0] if text else type(exc).__name__
        detail = first.rsplit("failed: ", 1)[-1].removeprefix("FATAL:").strip()
        detail = scrub(detail, self._password)
        text = text.lower()
        if "does not exist" in text and "database" in text:
            return (
                f"the PostgreSQL database {self.dbname!r} does not exist on {self.where}:"
                f" create it (createdb {self.dbname}, or CREATE DATABASE {self.dbname}) or"
                " name another one in the ledger URL"
            )
        if "password" in text or "authentication" in text:
            return (
                f"the PostgreSQL server at {self.where} refused the login of {self.url}:"
                f" {detail}. Check the user and password (PGPASSWORD or ~/.pgpass)"
            )
        if "role" in text and "does not exist" in text:
            return f"the PostgreSQL server at {self.where} has no such user: {detail}"
        if any(sign in text for sign in _UNREACHABLE):
            return (
                f"the PostgreSQL server at {self.where} is not reachable ({detail}):"
                " check the host and port of the ledger URL and that the server is running"
            )
        return f"cannot open the PostgreSQL ledger {self.url}: {detail}"


def scrub(text: str, password: str | None) -> str:
    """``text`` with the password and any ``user:password@`` part of a URL removed."""
    if password:
        text = text.replace(password, "***")
    return re.sub(r"(://[^/:@\s]*):[^@/\s]*@", r"\1@", text)


def _login() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return ""


def _psycopg() -> Any:
    """The psycopg module, or a ConfigError saying how to install it."""
    try:
        import psycopg
        import psycopg_pool  # noqa: F401 (the pool comes with the same extra)
    except ImportError:
        raise ConfigError(
            f"a PostgreSQL ledger needs psycopg 3 with its pool: {INSTALL_HINT}"
        ) from None
    return psycopg


@functools.lru_cache(maxsize=2048)
def to_pyformat(sql: str) -> str:
    """``sql`` with each ``?`` placeholder as ``%s`` and each literal ``%`` as ``%%``.

    A ``?`` inside a quoted string or identifier is left as it is; a ``%`` anywhere is
    doubled (psycopg reads the whole text for its placeholders).
    """
    out: list[str] = []
    quote: str | None = None
    for char in sql:
        if char == "%":
            out.append("%%")
        elif quote is not None:
            out.append(char)
            if char == quote:  # a doubled quote closes and reopens: same result
                quote = None
        elif char in "'\"":
            quote = char
            out.append(char)
        elif char == "?":
            out.append("%s")
        else:
            out.append(char)
    return "".join(out)


class PgRow:
    """A row readable by index and by column name, like ``sqlite3.Row`` (``dict(row)`` and
    ``row.keys()`` work; iterating gives the values)."""

    __slots__ = ("_index", "_names", "_values")

    def __init__(self, values: Sequence[Any], names: list[str], index: dict[str, int]) -> None:
        self._values = values
        self._names = names
        self._index = index

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, str):
            try:
                return self._values[self._index[key]]
            except KeyError:
                raise IndexError(f"no such column: {key}") from None
        return self._values[key]

    def keys(self) -> list[str]:
        return list(self._names)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PgRow):
            return self._names == other._names and list(self._values) == list(other._values)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._values))

    def __repr__(self) -> str:
        return f"PgRow({dict(zip(self._names, self._values, strict=True))!r})"


def _row_factory(cursor: Any) -> Any:
    names = [column.name for column in cursor.description or ()]
    index: dict[str, int] = {}
    for position, name in enumerate(names):
        index.setdefault(name, position)  # a repeated name reads the first, as in SQLite

    def make(values: Sequence[Any]) -> PgRow:
        return PgRow(values, names, index)

    return make


def _configure(connection: Any) -> None:
    """Per new connection: ``SUM`` of integers (a ``numeric``) reads as an int, as in SQLite."""
    from psycopg.adapt import Loader

    class IntegralNumeric(Loader):
        def load(self, data: Any) -> Any:
            text = bytes(data).decode()
            try:
                return int(text)
            except ValueError:
                return float(text)

    connection.adapters.register_loader("numeric", IntegralNumeric)


class PgTx(Tx):
    """A write transaction on one PostgreSQL connection (see ``Tx``)."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection  # psycopg's (``Ledger.transaction`` hands it out)
        self._pg: Any = connection
        self.dialect = "postgresql"

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        cursor: Cursor = self._pg.execute(to_pyformat(sql), tuple(params))
        return cursor

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> int:
        rows = [tuple(row) for row in rows]
        if not rows:
            return 0
        with self._pg.cursor() as cursor:
            cursor.executemany(to_pyformat(sql), rows)
            return int(cursor.rowcount)

    def insert(self, sql: str, params: Sequence[Any] = ()) -> int:
        found = self.execute(f"{sql} RETURNING id", params).fetchone()
        return int(found[0]) if found is not None else 0

    def insert_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> list[int]:
        rows = [tuple(row) for row in rows]
        if not rows:
            return []
        ids: list[int] = []
        with self._pg.cursor() as cursor:
            cursor.executemany(to_pyformat(f"{sql} RETURNING id"), rows, returning=True)
            while True:
                found = cursor.fetchone()
                ids.append(int(found[0]) if found is not None else 0)
                if not cursor.nextset():
                    break
        return ids

    def columns(self, table: str) -> set[str]:
        rows = self.all(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = ?",
            (table.lower(),),
        )
        return {row[0] for row in rows}


class PostgresDatabase(Database):
    """A PostgreSQL database holding one ledger, shared by every process that opens it.

    ``url``: ``postgresql://user@host:port/dbname`` (``postgres://`` too; a password is best
    kept in ``PGPASSWORD`` or ``~/.pgpass``, where libpq finds it). ``pool_size``: the most
    connections this process opens. Raises ConfigError when psycopg is missing, the server
    is not reachable, the login is refused or the database does not exist.
    """

    dialect = "postgresql"

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 4,
        connect_timeout_s: int = CONNECT_TIMEOUT_S,
    ) -> None:
        psycopg = _psycopg()
        from psycopg_pool import ConnectionPool

        self.driver_errors = (psycopg.Error,)
        self._operational_error: type[Exception] = psycopg.OperationalError
        self._denied: type[Exception] = psycopg.errors.InsufficientPrivilege
        try:
            params = psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.Error:
            raise ConfigError(
                f"ledger {scrub(url, None)!r} is not a PostgreSQL URL"
                " (postgresql://user@host:port/dbname)"
            ) from None
        self.target = PgTarget(params)
        self._url = self.target.url
        self.path = self.target.folder / "ledger"  # its parent holds the ledger's media
        params.setdefault("connect_timeout", str(int(connect_timeout_s)))
        self._check(psycopg, params)
        self._pool = ConnectionPool(
            kwargs={**params, "autocommit": True, "row_factory": _row_factory},
            min_size=1,
            max_size=max(1, pool_size),
            open=False,
            configure=_configure,
            name="x402lab-ledger",
            timeout=float(LOCK_TIMEOUT_S),
            num_workers=1,
        )
        self._pool.open(wait=True, timeout=float(connect_timeout_s) + 5)
        # A ledger dropped without close() still gives its connections back.
        self._finalizer = weakref.finalize(self, self._pool.close)

    def _check(self, psycopg: Any, params: dict[str, Any]) -> None:
        """Open one connection now, so a bad server, login or database name is a clear
        ConfigError before anything else happens; see whether ``FLUSH`` may be used."""
        try:
            with psycopg.connect(**params) as connection:
                found = connection.execute(
                    "SELECT has_function_privilege("
                    "'pg_logical_emit_message(boolean, text, text)', 'execute'),"
                    " current_setting('synchronous_commit') = 'off'"
                ).fetchone()
        except psycopg.Error as exc:
            raise ConfigError(self.target.explain(exc)) from None
        may_flush, self._sync_off = bool(found[0]), bool(found[1])
        # FLUSH commits with the server's default, which must flush.
        self._flush_after = may_flush and not self._sync_off

    def __repr__(self) -> str:
        return f"PostgresDatabase({self._url!r})"

    @property
    def url(self) -> str:
        return self._url

    @contextlib.contextmanager
    def transaction(
        self, *, durable: bool = False, group: CommitGroup | None = None
    ) -> Iterator[Tx]:
        # A ``group`` is not taken here: every commit is its own.
        # One round trip opens the transaction, relaxes the commit's flush, and takes the
        # ledger's write lock (held until COMMIT or ROLLBACK). A durable transaction is
        # flushed after the lock is let go (``FLUSH``), so writers do not queue behind a
        # disk flush and concurrent flushes share one; without that function, its commit
        # flushes under the lock.
        relaxed = not durable or self._flush_after
        # A server whose default is "off" still flushes our durable commits.
        flush = "off" if relaxed else ("on" if self._sync_off else None)
        begin = (
            f"BEGIN; SET LOCAL lock_timeout = '{LOCK_TIMEOUT_S}s';"
            + (f" SET LOCAL synchronous_commit = {flush};" if flush else "")
            + f" SELECT pg_advisory_xact_lock({LEDGER_LOCK_KEY})"
        )
        connection, _ = self._first(begin, None)
        try:
            try:
                yield PgTx(connection)
            except self._denied as exc:
                connection.execute("ROLLBACK")
                raise ConfigError(denied_advice(exc, connection.info.user, self.url)) from None
            except BaseException:
                # Even an interrupt must not leave the lock held; a connection broken
                # mid-statement is dropped by the pool, and the server rolls it back.
                with contextlib.suppress(Exception):
                    connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            if durable and self._flush_after:
                connection.execute(FLUSH)
        finally:
            self._pool.putconn(connection)

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return list(self._fetch(sql, params, lambda cursor: cursor.fetchall()))

    def read_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        return self._fetch(sql, params, lambda cursor: cursor.fetchone())  # type: ignore[no-any-return]

    def _fetch(self, sql: str, params: Sequence[Any], take: Any) -> Any:
        connection, cursor = self._first(to_pyformat(sql), tuple(params))
        try:
            return take(cursor)
        finally:
            self._pool.putconn(connection)

    def _first(self, sql: str, params: tuple[Any, ...] | None) -> tuple[Any, Any]:
        """A connection of the pool with the first statement run on it, and its cursor.

        A connection the server closed while it waited in the pool (a restart, an idle
        timeout, a terminated session) fails at once and is dropped; the statement runs again
        on another one. Nothing had run on it, so nothing runs twice.
        """
        for attempt in range(self._pool.max_size + 1):
            connection = self._pool.getconn()
            try:
                return connection, connection.execute(sql, params)
            except self._denied as exc:  # a role without the grant a read needs
                self._pool.putconn(connection)
                raise ConfigError(denied_advice(exc, connection.info.user, self.url)) from None
            except self._operational_error:
                self._pool.putconn(connection)
                if not connection.broken or attempt == self._pool.max_size:
                    raise
        raise AssertionError("unreachable")  # the loop returns or raises

    def close(self) -> None:
        self._finalizer()

    def _stored_version(self, tx: Tx | None) -> int:
        sql = f"SELECT to_regclass('{VERSION_TABLE}') IS NOT NULL"
        exists = tx.scalar(sql) if tx is not None else self.read_one(sql)[0]  # type: ignore[index]
        if not exists:
            return 0
        sql = f"SELECT version FROM {VERSION_TABLE}"
        found = tx.one(sql) if tx is not None else self.read_one(sql)
        return int(found[0]) if found is not None else 0

    def _record_version(self, tx: Tx, version: int) -> None:
        tx.execute(
            f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (one BOOLEAN PRIMARY KEY DEFAULT TRUE"
            " CHECK (one), version INTEGER NOT NULL)"
        )
        tx.execute(
            f"INSERT INTO {VERSION_TABLE} (one, version) VALUES (TRUE, ?)"
            " ON CONFLICT (one) DO UPDATE SET version = excluded.version",
            (int(version),),
        )

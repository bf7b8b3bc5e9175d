"""A durable row-by-row store of batch results: a SQLite file named by ``checkpoint=``.

Each paid (or ambiguous) result is queued the moment it arrives and committed, with a full
fsync, by a writer thread: results that arrive together share one commit, so storing costs
the event loop nothing. A result that was paid but not yet committed when the process died
is not lost from the books: before a paid request leaves, the store commits which items
(rows' own request keys) that request carries (``sent``); the ledger holds the payment under
the request's key. A re-run joins the two and reports the row as ``paid_not_stored`` (or
``unknown``) instead of buying it again, however the items are grouped into requests then.

The store is a file of its own (not a table of the ledger), so its commits never queue behind
the ledger's write lock on the payment path.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from pathlib import Path

from x402lab.errors import ConfigError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    item_key TEXT PRIMARY KEY,
    request_key TEXT NOT NULL,
    status TEXT NOT NULL,
    quoted_atomic INTEGER,
    paid_atomic INTEGER,
    upstream_usd REAL,
    tx_hash TEXT,
    latency_s REAL,
    ledger_id INTEGER,
    error TEXT,
    data BLOB,
    stored_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS results_request_key ON results (request_key);
CREATE TABLE IF NOT EXISTS sent (
    item_key TEXT NOT NULL,
    request_key TEXT NOT NULL,
    position INTEGER NOT NULL,
    members INTEGER NOT NULL,
    sent_us INTEGER NOT NULL,
    PRIMARY KEY (item_key, request_key)
);
"""
_COLUMNS = (
    "item_key",
    "request_key",
    "status",
    "quoted_atomic",
    "paid_atomic",
    "upstream_usd",
    "tx_hash",
    "latency_s",
    "ledger_id",
    "error",
    "data",
)
_STOP = object()
_CHUNK = 500


@dataclass(frozen=True, slots=True)
class StoredItem:
    """One stored result. ``item_key`` names the row's request (a text's own request for
    embeddings packed several to a request); ``request_key`` the paid request that carried it."""

    item_key: str
    request_key: str
    status: str
    quoted_atomic: int | None
    paid_atomic: int | None
    upstream_usd: float | None
    tx_hash: str | None
    latency_s: float | None
    ledger_id: int | None
    error: str | None
    data: bytes | None


@dataclass(frozen=True, slots=True)
class SentItem:
    """An item a paid request carried (or was about to): the request, the item's place in it
    and how many items it carried (so the item's share of the payment can be worked out)."""

    request_key: str
    position: int
    members: int


@dataclass(slots=True)
class _Sent:
    request_key: str
    item_keys: list[str]
    done: Future[None]


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=60.0, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA busy_timeout=60000")
    return db


class Checkpoint:
    """The result store of one batch kind (``"chat"`` or ``"embed"``) at ``path``.

    Raises ConfigError when the file cannot be opened or holds another kind of batch.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, kind: str, ledger_path: str | None = None
    ) -> None:
        self.path = Path(path).expanduser()
        self.kind = kind
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._reader = _connect(self.path)
            now = str(time.time_ns() // 1000)
            self._reader.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._reader.execute(statement)
                # sent_since: when this file began recording ``sent``; later than created_us
                # only in a checkpoint written before that table existed.
                for key, value in (("kind", kind), ("created_us", now), ("sent_since", now)):
                    self._reader.execute(
                        "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (key, value)
                    )
                if ledger_path is not None:
                    self._reader.execute(
                        "INSERT OR IGNORE INTO meta (key, value) VALUES ('ledger', ?)",
                        (ledger_path,),
                    )
            except BaseException:
                self._reader.execute("ROLLBACK")
                raise
            self._reader.execute("COMMIT")
        except (OSError, sqlite3.DatabaseError) as exc:
            raise ConfigError(f"cannot open the checkpoint {self.path}: {exc}") from None
        meta = dict(self._reader.execute("SELECT key, value FROM meta").fetchall())
        if meta["kind"] != kind:
            self._reader.close()
            raise ConfigError(
                f"checkpoint {self.path} holds a {meta['kind']} batch, not a {kind} batch:"
                " give this batch a checkpoint file of its own"
            )
        self.created_us = int(meta["created_us"])
        self.sent_since_us = int(meta["sent_since"])
        self.ledger_path = meta.get("ledger")
        self._lock = threading.Lock()
        self._queue: queue.Queue[object] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._error: BaseException | None = None

    def __repr__(self) -> str:
        return f"Checkpoint({str(self.path)!r}, kind={self.kind!r})"

    # -- reading (the caller's thread) -------------------------------------------------------

    def stored_keys(self, item_keys: Iterable[str]) -> set[str]:
        """Which of ``item_keys`` have a stored result."""
        wanted = set(item_keys)
        with self._lock:
            rows = self._reader.execute("SELECT item_key FROM results").fetchall()
        return {key for (key,) in rows if key in wanted}

    def load(self, item_key: str) -> StoredItem | None:
        """The stored result of ``item_key``, or None."""
        with self._lock:
            row = self._reader.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM results WHERE item_key = ?", (item_key,)
            ).fetchone()
        return StoredItem(*row) if row is not None else None

    def sent_for(self, item_keys: Iterable[str]) -> dict[str, list[SentItem]]:
        """The requests recorded as carrying each of ``item_keys`` (only those with any)."""
        found: dict[str, list[SentItem]] = {}
        keys = list(dict.fromkeys(item_keys))
        with self._lock:
            if self._reader.execute("SELECT 1 FROM sent LIMIT 1").fetchone() is None:
                return found
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start : start + _CHUNK]
                rows = self._reader.execute(
                    "SELECT item_key, request_key, position, members FROM sent"
                    f" WHERE item_key IN ({','.join('?' * len(chunk))})",
                    chunk,
                ).fetchall()
                for item_key, request_key, position, members in rows:
                    found.setdefault(item_key, []).append(SentItem(request_key, position, members))
        return found

    def __len__(self) -> int:
        with self._lock:
            return int(self._reader.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    # -- writing (one writer thread, group commits) ------------------------------------------

    def put(self, items: list[StoredItem]) -> None:
        """Queue results for a durable commit; returns at once. Raises the writer's error."""
        if self._error is not None:
            raise self._stopped()
        self._start_writer()
        self._queue.put(items)

    def _start_writer(self) -> None:
        if self._writer is None:
            self._writer = threading.Thread(
                target=self._write_loop, name="x402lab-checkpoint", daemon=True
            )
            self._writer.start()

    def _stopped(self) -> ConfigError:
        return ConfigError(f"the checkpoint {self.path} stopped storing: {self._error}")

    def record_sent(self, request_key: str, item_keys: list[str]) -> Future[None]:
        """Queue the items a paid request is about to carry; the future completes when they
        are committed durably (or fails with the writer's error). Pay only after it completes.
        """
        done: Future[None] = Future()
        if self._error is not None:
            done.set_exception(self._stopped())
            return done
        self._start_writer()
        self._queue.put(_Sent(request_key, list(item_keys), done))
        return done

    def flush(self) -> None:
        """Block until every queued result is committed. Raises the writer's error."""
        if self._writer is not None:
            self._queue.join()
        if self._error is not None:
            raise self._stopped()

    def close(self) -> None:
        """Commit what is queued, stop the writer and close the file."""
        if self._writer is not None:
            self._queue.put(_STOP)
            self._writer.join()
            self._writer = None
        with self._lock:
            self._reader.close()

    def _write_loop(self) -> None:
        db = _connect(self.path)
        try:
            while True:
                first = self._queue.get()
                batch = [first]
                while True:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                items = [item for entry in batch if isinstance(entry, list) for item in entry]
                sent = [entry for entry in batch if isinstance(entry, _Sent)]
                try:
                    if (items or sent) and self._error is None:
                        self._commit(db, items, sent)
                except BaseException as exc:  # reported by put(), flush() and record_sent()
                    self._error = exc
                finally:
                    for entry in sent:
                        _conclude(entry.done, self._stopped() if self._error else None)
                    for _ in batch:
                        self._queue.task_done()
                if any(entry is _STOP for entry in batch):
                    return
        finally:
            db.close()

    @staticmethod
    def _commit(db: sqlite3.Connection, items: list[StoredItem], sent: list[_Sent]) -> None:
        now = time.time_ns() // 1000
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany(
                "INSERT OR REPLACE INTO sent (item_key, request_key, position, members, sent_us)"
                " VALUES (?, ?, ?, ?, ?)",
                [
                    (item_key, entry.request_key, position, len(entry.item_keys), now)
                    for entry in sent
                    for position, item_key in enumerate(entry.item_keys)
                ],
            )
            db.executemany(
                f"INSERT OR REPLACE INTO results ({', '.join(_COLUMNS)}, stored_us)"
                f" VALUES ({', '.join('?' * (len(_COLUMNS) + 1))})",
                [
                    (
                        item.item_key,
                        item.request_key,
                        item.status,
                        item.quoted_atomic,
                        item.paid_atomic,
                        item.upstream_usd,
                        item.tx_hash,
                        item.latency_s,
                        item.ledger_id,
                        item.error,
                        item.data,
                        now,
                    )
                    for item in items
                ],
            )
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")


def _conclude(done: Future[None], error: BaseException | None) -> None:
    # The waiting task may have been cancelled meanwhile; its future then takes no result.
    try:
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)
    except InvalidStateError:
        pass

"""The durable record of media jobs: a ``jobs`` table in the ledger's SQLite file.

A job row is written as soon as the paid queue request answers, keyed by the request key of
that queue request (the same key as its ledger row). That is what makes a re-run of the same
``music()``/``video()`` call return the stored job instead of paying again, and what lets
``lab.jobs()`` list the jobs after a kernel restart so polling can resume.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from x402lab.errors import ConfigError
from x402lab.ledger import Ledger, arrow_to_pandas

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

JOB_STATUSES = ("queued", "processing", "completed", "failed")

_DDL = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY,
    gateway TEXT NOT NULL,
    kind TEXT NOT NULL,
    model TEXT NOT NULL,
    queue_id TEXT NOT NULL,
    request_key TEXT NOT NULL,
    request_json TEXT NOT NULL,
    status TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL,
    finished_us INTEGER,
    quoted_atomic INTEGER,
    paid_atomic INTEGER,
    ledger_id INTEGER,
    tx_hash TEXT,
    delete_media INTEGER NOT NULL DEFAULT 0,
    download_url TEXT,
    average_execution_ms INTEGER,
    media_path TEXT,
    content_type TEXT,
    size_bytes INTEGER,
    cleaned_up INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    UNIQUE (gateway, queue_id)
);
CREATE INDEX IF NOT EXISTS jobs_request_key ON jobs (gateway, request_key)
"""


@dataclass(frozen=True)
class JobRecord:
    """One row of the ``jobs`` table."""

    id: int
    gateway: str
    kind: str
    model: str
    queue_id: str
    request_key: str
    request_json: str
    status: str
    created_us: int
    updated_us: int
    finished_us: int | None = None
    quoted_atomic: int | None = None
    paid_atomic: int | None = None
    ledger_id: int | None = None
    tx_hash: str | None = None
    delete_media: bool = False
    download_url: str | None = None
    average_execution_ms: int | None = None
    media_path: str | None = None
    content_type: str | None = None
    size_bytes: int | None = None
    cleaned_up: bool = False
    error: str | None = None

    @property
    def request(self) -> dict[str, Any]:
        """The queue request body."""
        return dict(json.loads(self.request_json))


_COLUMNS = tuple(f.name for f in fields(JobRecord))
_BOOLS = ("delete_media", "cleaned_up")


class JobStore:
    """Reads and writes job rows in the ledger's file (through ``Ledger.transaction``)."""

    def __init__(self, ledger: Ledger, *, now: Callable[[], float] = time.time) -> None:
        self.ledger = ledger
        self._now = now
        ledger.ensure_schema(_DDL)

    def _now_us(self) -> int:
        return int(self._now() * 1_000_000)

    def insert(
        self,
        *,
        gateway: str,
        kind: str,
        model: str,
        queue_id: str,
        request_key: str,
        request: dict[str, Any],
        status: str = "queued",
        **extra: Any,
    ) -> JobRecord:
        """Record a job that the queue just accepted; returns its row."""
        now = self._now_us()
        values: dict[str, Any] = {
            "gateway": gateway,
            "kind": kind,
            "model": model,
            "queue_id": queue_id,
            "request_key": request_key,
            "request_json": json.dumps(request, sort_keys=True, default=str),
            "status": status,
            "created_us": now,
            "updated_us": now,
            **extra,
        }
        unknown = set(values) - set(_COLUMNS)
        if unknown:
            raise ConfigError(f"not job columns: {sorted(unknown)}")
        names = ", ".join(values)
        marks = ", ".join("?" * len(values))
        with self.ledger.transaction() as db:
            cursor = db.execute(
                f"INSERT INTO jobs ({names}) VALUES ({marks})",
                tuple(_db(v) for v in values.values()),
            )
            row_id = int(cursor.lastrowid or 0)
        found = self.get(row_id)
        assert found is not None
        return found

    def update(self, row_id: int, **changes: Any) -> None:
        """Change some columns of a job row (``updated_us`` follows)."""
        unknown = set(changes) - set(_COLUMNS)
        if unknown:
            raise ConfigError(f"not job columns: {sorted(unknown)}")
        if "status" in changes and changes["status"] not in JOB_STATUSES:
            raise ConfigError(f"not a job status: {changes['status']!r}")
        changes["updated_us"] = self._now_us()
        assignments = ", ".join(f"{name} = ?" for name in changes)
        with self.ledger.transaction() as db:
            db.execute(
                f"UPDATE jobs SET {assignments} WHERE id = ?",
                (*(_db(v) for v in changes.values()), row_id),
            )

    def _select(self, where: str, params: tuple[Any, ...]) -> list[JobRecord]:
        rows = self.ledger.query(f"SELECT * FROM jobs WHERE {where} ORDER BY id", params)
        return [_record(row) for row in rows]

    def get(self, row_id: int) -> JobRecord | None:
        found = self._select("id = ?", (row_id,))
        return found[0] if found else None

    def find(self, gateway: str, queue_id: str) -> JobRecord | None:
        """The job ``queue_id`` of ``gateway``, or None."""
        found = self._select("gateway = ? AND queue_id = ?", (gateway, queue_id))
        return found[0] if found else None

    def latest_for_request(self, gateway: str, request_key: str) -> JobRecord | None:
        """The newest job queued by this request on ``gateway``, or None."""
        found = self._select("gateway = ? AND request_key = ?", (gateway, request_key))
        return found[-1] if found else None

    def all(self, gateway: str | None = None) -> list[JobRecord]:
        """Every job row (of ``gateway`` when given), oldest first."""
        if gateway is None:
            return self._select("1", ())
        return self._select("gateway = ?", (gateway,))


def _db(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value


def _record(row: Any) -> JobRecord:
    values = {name: row[name] for name in _COLUMNS}
    for name in _BOOLS:
        values[name] = bool(values[name])
    return JobRecord(**values)


def jobs_schema() -> pa.Schema:
    """The declared Arrow schema of ``lab.jobs()``."""
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    text = pa.string()
    return pa.schema(
        [
            pa.field("queue_id", text, nullable=False),
            pa.field("kind", text, nullable=False),
            pa.field("model", text, nullable=False),
            pa.field("status", text, nullable=False),
            pa.field("created", ts, nullable=False),
            ("finished", ts),
            ("elapsed_s", pa.float64()),
            ("quoted_atomic", pa.int64()),
            ("quoted_usd", pa.float64()),
            ("paid_atomic", pa.int64()),
            ("paid_usd", pa.float64()),
            ("tx_hash", text),
            ("ledger_id", pa.int64()),
            pa.field("delete_media", pa.bool_(), nullable=False),
            pa.field("cleaned_up", pa.bool_(), nullable=False),
            ("download_url", text),
            ("media_path", text),
            ("content_type", text),
            ("size_bytes", pa.int64()),
            ("error", text),
            pa.field("request_key", text, nullable=False),
            pa.field("gateway", text, nullable=False),
        ]
    )


def jobs_table(records: Iterable[JobRecord], *, now: float | None = None) -> pa.Table:
    """Job rows as an Arrow table of ``jobs_schema()`` (``elapsed_s`` runs to ``now``)."""
    import pyarrow as pa

    current = time.time() if now is None else now
    schema = jobs_schema()
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    for record in records:
        end_us = record.finished_us if record.finished_us is not None else current * 1_000_000
        row = {
            **{name: getattr(record, name, None) for name in schema.names},
            "created": _utc(record.created_us),
            "finished": _utc(record.finished_us),
            "elapsed_s": max(0.0, (end_us - record.created_us) / 1_000_000),
            "quoted_usd": _usd(record.quoted_atomic),
            "paid_usd": _usd(record.paid_atomic),
        }
        for name in schema.names:
            columns[name].append(row[name])
    return pa.table(columns, schema=schema)


def jobs_frame(records: Iterable[JobRecord], *, now: float | None = None) -> pd.DataFrame:
    """Job rows as a DataFrame whose dtypes come from ``jobs_schema()``, empty or full."""
    return arrow_to_pandas(jobs_table(records, now=now))


def _utc(us: int | None) -> datetime | None:
    return None if us is None else datetime.fromtimestamp(us / 1_000_000, tz=UTC)


def _usd(atomic: int | None) -> float | None:
    return None if atomic is None else atomic / 1_000_000

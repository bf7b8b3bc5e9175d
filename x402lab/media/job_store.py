"""The durable record of media jobs: ``jobs`` and ``job_claims`` in the ledger's SQLite file.

A job row is written as soon as the paid queue request answers, keyed by the request key of
that queue request (the same key as its ledger row). That is what makes a re-run of the same
``music()``/``video()`` call return the stored job instead of paying again, and what lets
``lab.jobs()`` list the jobs after a kernel restart so polling can resume.

Before the queue is paid, a ``pending`` claim for the request key is written in the same
transaction that finds no stored job and no claim in progress. A second identical call (in
this process or another one sharing the file) sees the claim and waits for its job instead of
paying too. A claim ends ``done`` (with its job, written in one transaction), ``failed``
(nothing left the process: the next call may pay) or ``unknown`` (a payment for it may have
settled: only ``new=True`` pays again).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from x402lab.errors import ConfigError, JobError
from x402lab.ledger import Ledger
from x402lab.money import format_usd

if TYPE_CHECKING:
    pass

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
CREATE INDEX IF NOT EXISTS jobs_request_key ON jobs (gateway, request_key);
CREATE TABLE IF NOT EXISTS job_claims (
    id INTEGER PRIMARY KEY,
    gateway TEXT NOT NULL,
    kind TEXT NOT NULL,
    path TEXT NOT NULL,
    request_key TEXT NOT NULL,
    status TEXT NOT NULL,
    new INTEGER NOT NULL DEFAULT 0,
    ledger_floor INTEGER NOT NULL,
    job_id INTEGER,
    ledger_id INTEGER,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL,
    error TEXT
);
CREATE INDEX IF NOT EXISTS job_claims_request ON job_claims (gateway, request_key, status)
"""

CLAIM_STATUSES = ("pending", "done", "failed", "unknown")
# Ledger statuses that mean a queue payment may have settled (never pay again on our own).
MAYBE_PAID = ("signed", "settled", "unknown")


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


@dataclass(frozen=True)
class JobClaim:
    """A ``pending`` queue claimed for one request key before anything is signed.

    ``held`` is True for the caller that wrote it (it pays now) and False for a claim of
    another caller that is still in progress (wait for its job). ``ledger_floor`` is the
    newest ledger row id when it was written: the claim's own payment rows come after it.
    """

    id: int
    gateway: str
    kind: str
    path: str
    request_key: str
    status: str
    created_us: int
    ledger_floor: int
    held: bool = False


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
        values = self._job_values(gateway, kind, model, queue_id, request_key, request, status)
        values.update(extra)
        with self.ledger.transaction() as db:
            row_id = _insert_job(db, values)
        found = self.get(row_id)
        assert found is not None
        return found

    def _job_values(
        self,
        gateway: str,
        kind: str,
        model: str,
        queue_id: str,
        request_key: str,
        request: dict[str, Any],
        status: str,
    ) -> dict[str, Any]:
        now = self._now_us()
        return {
            "gateway": gateway,
            "kind": kind,
            "model": model,
            "queue_id": queue_id,
            "request_key": request_key,
            "request_json": json.dumps(request, sort_keys=True, default=str),
            "status": status,
            "created_us": now,
            "updated_us": now,
        }

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

    # -- claims: one paid queue per request key -------------------------------------------------

    def claim(
        self, *, gateway: str, kind: str, path: str, request_key: str, new: bool = False
    ) -> JobRecord | JobClaim:
        """Claim the paid queue of one request, in one transaction, before anything is signed.

        Unless ``new``, returns the request's stored job when there is one, or another
        caller's pending claim (``held`` False: wait for it); raises JobError when a payment
        for the request may have settled without a stored job. Otherwise writes and returns
        a pending claim of this caller (``held`` True).
        """
        now = self._now_us()
        with self.ledger.transaction() as db:
            if not new:
                job = _fetch(
                    db,
                    "SELECT * FROM jobs WHERE gateway = ? AND request_key = ?"
                    " ORDER BY id DESC LIMIT 1",
                    (gateway, request_key),
                )
                if job is not None:
                    return _record(job)
                pending = _fetch(
                    db,
                    "SELECT * FROM job_claims WHERE gateway = ? AND"
                    " request_key = ? AND status = 'pending' ORDER BY id LIMIT 1",
                    (gateway, request_key),
                )
                if pending is not None:
                    return _claim(pending, held=False)
                marks = ",".join("?" * len(MAYBE_PAID))
                paid = _fetch(
                    db,
                    "SELECT id, status, amount_atomic FROM payments WHERE"
                    " service = 'gateway' AND path = ? AND request_key = ? AND"
                    f" status IN ({marks}) ORDER BY id DESC LIMIT 1",
                    (path, request_key, *MAYBE_PAID),
                )
                if paid is not None:
                    amount = format_usd(paid["amount_atomic"])
                    raise JobError(
                        f"this {kind} request was already paid ({amount}, ledger row"
                        f" {paid['id']}, {paid['status']}) but no job was stored, so"
                        " its queue_id is not known here; it will not be paid again on its own:"
                        " pass new=True to queue and pay for a new job"
                    )
            floor = db.execute("SELECT COALESCE(MAX(id), 0) FROM payments").fetchone()[0]
            cursor = db.execute(
                "INSERT INTO job_claims (gateway, kind, path, request_key, status, new,"
                " ledger_floor, created_us, updated_us) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?)",
                (gateway, kind, path, request_key, int(new), int(floor), now, now),
            )
            claim_id = int(cursor.lastrowid or 0)
        return JobClaim(
            claim_id, gateway, kind, path, request_key, "pending", now, int(floor), held=True
        )

    def complete_claim(
        self,
        claim: JobClaim,
        *,
        model: str,
        queue_id: str,
        request: dict[str, Any],
        **extra: Any,
    ) -> JobRecord:
        """Store the job the claim's queue answered and close the claim ``done``, together."""
        values = self._job_values(
            claim.gateway, claim.kind, model, queue_id, claim.request_key, request, "queued"
        )
        values.update(extra)
        with self.ledger.transaction() as db:
            row_id = _insert_job(db, values)
            db.execute(
                "UPDATE job_claims SET status = 'done', job_id = ?, ledger_id = ?, updated_us = ?"
                " WHERE id = ?",
                (row_id, values.get("ledger_id"), values["updated_us"], claim.id),
            )
        found = self.get(row_id)
        assert found is not None
        return found

    def release_claim(self, claim: JobClaim, error: str) -> str:
        """Close a claim whose queue gave no job: ``unknown`` when the ledger shows a payment
        of the claim that left the process (it may have settled), else ``failed`` (released:
        the next call may pay). Returns the status set (a closed claim is left as it is)."""
        marks = ",".join("?" * len(MAYBE_PAID))
        sent = self.ledger.query(
            "SELECT id FROM payments WHERE id > ? AND service = 'gateway' AND path = ? AND"
            f" request_key = ? AND status IN ({marks}) ORDER BY id",
            (claim.ledger_floor, claim.path, claim.request_key, *MAYBE_PAID),
        )
        status = "unknown" if sent else "failed"
        with self.ledger.transaction() as db:
            db.execute(
                "UPDATE job_claims SET status = ?, error = ?, updated_us = ?,"
                " ledger_id = COALESCE(?, ledger_id) WHERE id = ? AND status = 'pending'",
                (status, error[:500], self._now_us(), sent[-1]["id"] if sent else None, claim.id),
            )
        return status

    def claim_status(self, claim_id: int) -> str | None:
        """The status of claim ``claim_id`` (None when there is no such claim)."""
        rows = self.ledger.query("SELECT status FROM job_claims WHERE id = ?", (claim_id,))
        return str(rows[0]["status"]) if rows else None

    def claims(self, gateway: str | None = None) -> list[dict[str, Any]]:
        """Every queue claim (of ``gateway`` when given) as dicts, oldest first."""
        where, params = ("1", ()) if gateway is None else ("gateway = ?", (gateway,))
        rows = self.ledger.query(f"SELECT * FROM job_claims WHERE {where} ORDER BY id", params)
        return [dict(row) for row in rows]


def _db(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value


def _insert_job(db: sqlite3.Connection, values: dict[str, Any]) -> int:
    unknown = set(values) - set(_COLUMNS)
    if unknown:
        raise ConfigError(f"not job columns: {sorted(unknown)}")
    names = ", ".join(values)
    marks = ", ".join("?" * len(values))
    cursor = db.execute(
        f"INSERT INTO jobs ({names}) VALUES ({marks})", tuple(_db(v) for v in values.values())
    )
    return int(cursor.lastrowid or 0)


def _fetch(db: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> sqlite3.Row | None:
    """One row of a read inside an open transaction (the ledger's ``query`` opens its own)."""
    cursor = db.execute(sql, params)
    cursor.row_factory = sqlite3.Row
    row: sqlite3.Row | None = cursor.fetchone()
    return row


def _claim(row: sqlite3.Row, *, held: bool) -> JobClaim:
    return JobClaim(
        id=row["id"],
        gateway=row["gateway"],
        kind=row["kind"],
        path=row["path"],
        request_key=row["request_key"],
        status=row["status"],
        created_us=row["created_us"],
        ledger_floor=row["ledger_floor"],
        held=held,
    )


def _record(row: Any) -> JobRecord:
    values = {name: row[name] for name in _COLUMNS}
    for name in _BOOLS:
        values[name] = bool(values[name])
    return JobRecord(**values)

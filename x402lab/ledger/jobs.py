"""Media jobs in the store: a claim of the paid queue request plus the job it bought.

A job row (``media_jobs``) is written when the paid queue request answers, in the same
transaction that closes its claim ``done`` (scope ``job_scope(gateway)``, key and payment key
the queue request's key). That is what makes a re-run of the same ``music()``/``video()`` call
return the stored job instead of paying again, and what lets ``lab.jobs()`` list the jobs
after a kernel restart so polling can resume. Identical calls in other processes see the
pending claim and wait for its job (``Claims``: ``WAIT``); ``rebuy=True`` queues a new one.

Money is not copied here: ``paid_atomic``, ``tx_hash`` and ``ledger_id`` of a ``JobRecord``
are read through the claim's ``ledger_id`` from ``payments``, so a payment that
reconciliation later settles shows up in the job at once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from x402lab.errors import ConfigError
from x402lab.ledger.claim_rows import ClaimAction, Claimed
from x402lab.ledger.claims import Claims
from x402lab.ledger.database import Database, Row, Tx, marks
from x402lab.ledger.payments import Settlement, answer_transaction
from x402lab.ledger.schema import gateway_of, job_scope
from x402lab.ledger.statuses import ClaimStatus, JobStatus, PaymentStatus, in_sql
from x402lab.ledger.store import Ledger

#: Columns a job row owns (written by ``insert``/``update``).
JOB_COLUMNS = (
    "gateway",
    "kind",
    "model",
    "queue_id",
    "request_key",
    "request_json",
    "status",
    "created_us",
    "updated_us",
    "finished_us",
    "quoted_atomic",
    "delete_media",
    "download_url",
    "average_execution_ms",
    "media_path",
    "content_type",
    "size_bytes",
    "cleaned_up",
    "error",
)
_BOOLS = ("delete_media", "cleaned_up")
_SELECT = (
    "SELECT j.*, c.ledger_id AS ledger_id, p.status AS payment_status, p.tx_hash AS tx_hash,"
    f" CASE WHEN {in_sql('p.status', (PaymentStatus.SETTLED,))} THEN p.amount_atomic END"
    " AS paid_atomic FROM media_jobs j LEFT JOIN claims c ON c.id = j.claim_id"
    " LEFT JOIN payments p ON p.id = c.ledger_id"
)


@dataclass(frozen=True)
class JobRecord:
    """One stored job, with the money facts of its queue payment joined from the ledger
    (``paid_atomic`` is the settled amount; None while the payment is not known settled)."""

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
    claim_id: int | None = None
    payment_status: str | None = None

    @property
    def request(self) -> dict[str, Any]:
        """The queue request body."""
        return dict(json.loads(self.request_json))


_RECORD_FIELDS = tuple(f.name for f in fields(JobRecord))


def _record(row: Row) -> JobRecord:
    values = {name: row[name] for name in _RECORD_FIELDS}
    for name in _BOOLS:
        values[name] = bool(values[name])
    return JobRecord(**values)


def _db(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value


class Jobs:
    """Job rows and queue claims of the media jobs in one store.

    ``Jobs(ledger)`` (or a ``Database``); ``claims`` defaults to ``Claims(db)``.
    """

    def __init__(
        self,
        store: Ledger | Database,
        *,
        claims: Claims | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.db = store.db if isinstance(store, Ledger) else store
        self.claims = claims if claims is not None else Claims(self.db, now=now)
        self._now = now

    def __repr__(self) -> str:
        return f"Jobs({self.db.url!r})"

    def _now_us(self) -> int:
        return int(self._now() * 1_000_000)

    # -- claims: one paid queue per request key --------------------------------------------

    def claim(
        self, *, gateway: str, kind: str, request_key: str, rebuy: bool = False
    ) -> JobRecord | Claimed:
        """Claim the paid queue of one request before anything is signed.

        Returns the stored job when the request was bought (``REUSE``); otherwise the
        ``Claimed`` answer: ``PAY`` (this caller pays, then ``complete_claim`` or
        ``release_claim``), ``WAIT`` (another caller is paying: look again later) or
        ``MAYBE_PAID`` (a payment may have settled without a stored job: report it; only
        ``rebuy=True`` pays again).
        """
        scope = job_scope(gateway)
        got = self.claims.claim(scope, [request_key], rebuy=rebuy, label=kind)[request_key]
        if got.action is ClaimAction.REUSE:
            job = self._last("j.claim_id = ?", (got.record.id,))
            job = job or self.latest_for_request(gateway, request_key)
            if job is not None:
                return job
        return got

    def complete_claim(
        self,
        claimed: Claimed,
        *,
        model: str,
        queue_id: str,
        request: dict[str, Any],
        ledger_id: int | None = None,
        settlement: Settlement | None = None,
        **columns: Any,
    ) -> JobRecord:
        """Store the job the claimed queue answered and close the claim ``done``, together.

        ``ledger_id``: the queue payment (found in the ledger when None). ``settlement``:
        the queue payment's settlement, committed in the same transaction.
        ``columns``: other job columns (``quoted_atomic``, ``delete_media``,
        ``download_url``...). Raises ConfigError for a name that is not a job column.
        """
        record = claimed.record
        gateway, kind = gateway_of(record.scope), record.label or ""
        values = self._values(gateway, kind, model, queue_id, record.key, request, columns)
        return self._store(record.scope, record.key, values, ledger_id, settlement)

    def release_claim(self, claimed: Claimed, error: str) -> ClaimStatus:
        """Close a claim whose queue gave no job: ``unknown`` when a payment of it left the
        process (it may have settled), else ``failed`` (the next call may pay). Returns the
        claim's status afterwards."""
        record = claimed.record
        return self.claims.release(record.scope, [record.key], error)[record.key]

    # -- job rows ----------------------------------------------------------------------------

    def insert(
        self,
        *,
        gateway: str,
        kind: str,
        model: str,
        queue_id: str,
        request_key: str,
        request: dict[str, Any],
        status: str = JobStatus.QUEUED,
        ledger_id: int | None = None,
        **columns: Any,
    ) -> JobRecord:
        """Record a job the queue accepted without a claim of this caller (the claim is
        written ``done`` with it, so the request is not bought again); returns its row."""
        values = self._values(gateway, kind, model, queue_id, request_key, request, columns)
        values["status"] = _status(status)
        return self._store(job_scope(gateway), request_key, values, ledger_id, None)

    def update(self, row_id: int, **changes: Any) -> None:
        """Change some columns of a job row (``updated_us`` follows). Raises ConfigError for
        a name that is not a job column (money is the ledger's) or an unknown status."""
        _check_columns(changes)
        if "status" in changes:
            changes["status"] = _status(changes["status"])
        changes["updated_us"] = self._now_us()
        assignments = ", ".join(f"{name} = ?" for name in changes)
        with self.db.transaction() as tx:
            tx.execute(
                f"UPDATE media_jobs SET {assignments} WHERE id = ?",
                (*(_db(v) for v in changes.values()), row_id),
            )

    def get(self, row_id: int) -> JobRecord | None:
        """The job row ``row_id``, or None."""
        return self._last("j.id = ?", (row_id,))

    def find(self, gateway: str, queue_id: str) -> JobRecord | None:
        """The job ``queue_id`` of ``gateway``, or None."""
        return self._last("j.gateway = ? AND j.queue_id = ?", (gateway, queue_id))

    def latest_for_request(self, gateway: str, request_key: str) -> JobRecord | None:
        """The newest job queued by this request on ``gateway``, or None."""
        return self._last("j.gateway = ? AND j.request_key = ?", (gateway, request_key))

    def all(self, gateway: str | None = None) -> list[JobRecord]:
        """Every job row (of ``gateway`` when given), oldest first."""
        if gateway is None:
            return self._select("1 = 1", ())
        return self._select("j.gateway = ?", (gateway,))

    # -- helpers ---------------------------------------------------------------------------

    def _values(
        self,
        gateway: str,
        kind: str,
        model: str,
        queue_id: str,
        request_key: str,
        request: dict[str, Any],
        columns: dict[str, Any],
    ) -> dict[str, Any]:
        _check_columns(columns)
        now = self._now_us()
        return {
            "gateway": gateway,
            "kind": kind,
            "model": model,
            "queue_id": queue_id,
            "request_key": request_key,
            "request_json": json.dumps(request, sort_keys=True, default=str),
            "status": str(JobStatus.QUEUED),
            "created_us": now,
            "updated_us": now,
            **columns,
        }

    def _store(
        self,
        scope: str,
        key: str,
        values: dict[str, Any],
        ledger_id: int | None,
        settlement: Settlement | None,
    ) -> JobRecord:
        """Close the claim of ``key`` done (its answer the queue id) and insert the job row,
        in one transaction; returns the row."""
        answer = json.dumps({"queue_id": values["queue_id"]}).encode()
        with answer_transaction(self.db, settlement) as tx:
            self.claims.complete_in(tx, scope, [(key, answer)], ledger_id=ledger_id)
            row_id = tx.insert(
                f"INSERT INTO media_jobs (claim_id, {', '.join(values)})"
                f" VALUES (?, {marks(len(values))})",
                (_newest_claim(tx, scope, key), *(_db(v) for v in values.values())),
            )
        found = self.get(row_id)
        if found is None:  # written in the transaction that just committed
            raise ConfigError(f"job row {row_id} vanished from {self.db.url}")
        return found

    def _select(self, where: str, params: tuple[Any, ...]) -> list[JobRecord]:
        rows = self.db.read(f"{_SELECT} WHERE {where} ORDER BY j.id", params)
        return [_record(row) for row in rows]

    def _last(self, where: str, params: tuple[Any, ...]) -> JobRecord | None:
        """The newest job row that ``where`` finds (ids and queue ids find one), or None."""
        found = self._select(where, params)
        return found[-1] if found else None


def _newest_claim(tx: Tx, scope: str, key: str) -> int | None:
    """The claim ``complete_in`` just closed (or the done one that kept its first answer)."""
    found = tx.scalar("SELECT MAX(id) FROM claims WHERE scope = ? AND key = ?", (scope, key))
    return None if found is None else int(found)


def _check_columns(columns: dict[str, Any]) -> None:
    unknown = set(columns) - set(JOB_COLUMNS)
    if unknown:
        raise ConfigError(
            f"not job columns: {sorted(unknown)} (paid_atomic, tx_hash and ledger_id are read"
            " from the ledger)"
        )


def _status(value: Any) -> str:
    try:
        return str(JobStatus(value))
    except ValueError:
        raise ConfigError(f"not a job status: {value!r}") from None

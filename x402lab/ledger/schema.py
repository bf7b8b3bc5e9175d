"""The store's tables, as numbered migrations (``Database.migrate`` applies them in order).

1. ``payments`` and ``budgets`` (the ledger). Files written before versions were numbered
   are brought up to date in place: a missing ``held`` column is added, a missing running
   total is recomputed from the payments (never defaulted to 0: that would forget spend).
2. ``claims``: one row per attempt to buy a request key (``claims.py``).
3. ``media_jobs`` and ``report_purchases`` (``jobs.py``, ``library.py``), filled from the
   tables of earlier versions (``jobs``/``job_claims``, ``report_orders``/``report_library``)
   so stored jobs and owned reports are kept. Those tables are left as they were; nothing
   here reads them afterwards.

4. The outcome of every signed payment: its ``owner`` (the process that sent it, so a row
   left by a process that died is found at once), ``payment_header`` (the signed payload
   itself, to send the same authorization again; it holds no secret), ``resends`` and
   ``resolved_by`` (``statuses.Resolution``), and an index of the rows still open.
5. ``prepaid``: the payment went with the first request, for a challenge predicted before
   any 402 of that request (``payments.prediction``); 0 for every earlier row.
6. ``payments.user_label``: who made each payment (``Ledger(user=...)``, by default
   ``X402LAB_USER`` or ``login@host``), so a ledger a team shares says who spent what.
7. ``rate_limits``: what each process paying from a wallet has learned of a service's rate
   limit (``rate_limits.py``), one row per process and service, so they share it.
8. ``budgets.cap_set_by`` and ``cap_set_us``: who set a budget's caps and when (NULL: never
   set, so the first ``connect()`` that names the budget with a cap sets them; ``budget.py``).
   Rows written before keep their caps, as set by nobody known.
9. ``claims.cost_atomic``: a stored answer's exact share of the payments it came from (a
   packed row's share of its pack, summed over every request it was asked in), written with
   the answer, so a later run shows what the answer cost without guessing the pack's size.
   Null for answers stored before (read as their payment split over its claims).
10. ``answer_packs``: the answers of one paid request stored together, one blob, the claims
   pointing at their slices of it (``claims.pack_id``, ``pack_offset``, ``pack_length``;
   ``packs.py``): a batch's embeddings. Answers stored before stay inline and read as before.

A new step is appended with the next number; a released step is never edited (its DDL is
written once, in SQLite's words, and ``portable_ddl`` says it in PostgreSQL's).
"""

from __future__ import annotations

import json
from typing import Any

from x402lab.ledger import packs
from x402lab.ledger.database import Migration, Tx
from x402lab.ledger.ddl import add_column as _add_column
from x402lab.ledger.ddl import run_ddl as _run
from x402lab.ledger.rate_limits import RATE_LIMITS
from x402lab.ledger.statuses import (
    IN_FLIGHT,
    UNRESOLVED,
    ClaimStatus,
    counted_sql,
    in_sql,
)

PAYMENTS = """
CREATE TABLE IF NOT EXISTS payments (
    id INTEGER PRIMARY KEY,
    ts_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL,
    service TEXT NOT NULL,
    method TEXT,
    path TEXT,
    model TEXT,
    request_key TEXT,
    budget TEXT NOT NULL,
    amount_atomic INTEGER NOT NULL,
    upstream_usd REAL,
    price_mult REAL,
    status TEXT NOT NULL,
    tx_hash TEXT,
    payer TEXT,
    pay_to TEXT,
    network TEXT,
    asset TEXT,
    nonce TEXT UNIQUE,
    valid_before INTEGER,
    error TEXT,
    held INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS payments_budget_status ON payments (budget, status);
CREATE INDEX IF NOT EXISTS payments_request_key ON payments (request_key);
CREATE INDEX IF NOT EXISTS payments_held ON payments (budget, valid_before) WHERE held = 1;
CREATE TABLE IF NOT EXISTS budgets (
    name TEXT PRIMARY KEY,
    cap_atomic INTEGER,
    per_call_atomic INTEGER,
    counted_atomic INTEGER NOT NULL DEFAULT 0,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL
);
"""

CLAIMS = """
CREATE TABLE IF NOT EXISTS claims (
    id INTEGER PRIMARY KEY,
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    status TEXT NOT NULL,
    payment_key TEXT NOT NULL,
    ledger_id INTEGER,
    ledger_floor INTEGER NOT NULL DEFAULT 0,
    owner TEXT NOT NULL,
    label TEXT,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL,
    error TEXT,
    answer BLOB
);
CREATE INDEX IF NOT EXISTS claims_scope_key ON claims (scope, key, id);
CREATE INDEX IF NOT EXISTS claims_payment_key ON claims (payment_key);
CREATE INDEX IF NOT EXISTS claims_scope_label ON claims (scope, label);
"""

STORES = """
CREATE TABLE IF NOT EXISTS media_jobs (
    id INTEGER PRIMARY KEY,
    claim_id INTEGER,
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
CREATE INDEX IF NOT EXISTS media_jobs_request ON media_jobs (gateway, request_key);
CREATE INDEX IF NOT EXISTS media_jobs_claim ON media_jobs (claim_id);
CREATE TABLE IF NOT EXISTS report_purchases (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    handle TEXT NOT NULL,
    report_ids TEXT NOT NULL,
    query TEXT NOT NULL,
    first_party INTEGER NOT NULL DEFAULT 0,
    request_key TEXT NOT NULL UNIQUE,
    report_count INTEGER,
    charged_usd REAL,
    receipt TEXT,
    response TEXT,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS report_purchases_source ON report_purchases (source, handle);
"""

#: Who wrote a claim copied from a table of an earlier version.
MIGRATED_OWNER = "migrated"


def _ledger(tx: Tx) -> None:
    payments = tx.columns("payments")
    if payments and "held" not in payments:
        _add_column(tx, "payments", "held", "INTEGER NOT NULL DEFAULT 0")
    budgets = tx.columns("budgets")
    if budgets and "counted_atomic" not in budgets:
        _add_column(tx, "budgets", "counted_atomic", "INTEGER NOT NULL DEFAULT 0")
        tx.execute(
            "UPDATE budgets SET counted_atomic = (SELECT COALESCE(SUM(amount_atomic), 0)"
            f" FROM payments WHERE payments.budget = budgets.name AND {counted_sql()})"
        )
    _run(tx, PAYMENTS)


def _stores(tx: Tx) -> None:
    _run(tx, STORES)
    if tx.columns("jobs"):
        _copy_jobs(tx)
    if tx.columns("report_orders"):
        _copy_reports(tx)


# -- copies of the stores of earlier versions (money is not copied: claims keep ledger_id) --

_CLAIM_INSERT = (
    "INSERT INTO claims (scope, key, status, payment_key, ledger_id, ledger_floor, owner,"
    " label, created_us, updated_us, error, answer) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
#: The job columns as migration 3 copies them from the ``jobs`` table of earlier versions:
#: frozen with it (the live list, ``jobs.JOB_COLUMNS``, may grow in later migrations).
_JOB_COLUMNS = (
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


def job_scope(gateway: str) -> str:
    """The claim scope of the media jobs of one gateway (its address as the jobs keep it)."""
    return f"jobs:{gateway}"


def gateway_of(scope: str) -> str:
    """The gateway address of a ``job_scope``."""
    return scope.removeprefix("jobs:")


def report_scope(source: str) -> str:
    """The claim scope of the reports of one report service."""
    return f"reports:{source.rstrip('/')}"


def _copy_jobs(tx: Tx) -> None:
    for job in tx.all("SELECT * FROM jobs ORDER BY id"):
        answer = json.dumps({"queue_id": job["queue_id"]}).encode()
        claim_id = tx.insert(
            _CLAIM_INSERT,
            (
                job_scope(job["gateway"]),
                job["request_key"],
                str(ClaimStatus.DONE),
                job["request_key"],
                job["ledger_id"],
                0,
                MIGRATED_OWNER,
                job["kind"],
                job["created_us"],
                job["updated_us"],
                None,
                answer,
            ),
        )
        tx.execute(
            f"INSERT INTO media_jobs (claim_id, {', '.join(_JOB_COLUMNS)})"
            f" VALUES (?, {', '.join('?' * len(_JOB_COLUMNS))}) ON CONFLICT DO NOTHING",
            (claim_id, *(job[name] for name in _JOB_COLUMNS)),
        )
    if not tx.columns("job_claims"):
        return
    # Done claims are the jobs copied above; the others still say something about money.
    open_claims = (ClaimStatus.PENDING, ClaimStatus.FAILED, ClaimStatus.UNKNOWN)
    for claim in tx.all(
        f"SELECT * FROM job_claims WHERE {in_sql('status', open_claims)} ORDER BY id"
    ):
        tx.insert(
            _CLAIM_INSERT,
            (
                job_scope(claim["gateway"]),
                claim["request_key"],
                claim["status"],
                claim["request_key"],
                claim["ledger_id"],
                claim["ledger_floor"],
                MIGRATED_OWNER,
                claim["kind"],
                claim["created_us"],
                claim["updated_us"],
                claim["error"],
                None,
            ),
        )


def _copy_reports(tx: Tx) -> None:
    has_library = bool(tx.columns("report_library"))
    for order in tx.all("SELECT * FROM report_orders ORDER BY id"):
        request_key = order["request_key"] or f"report-order:{order['id']}"
        tx.execute(
            "INSERT INTO report_purchases (id, source, handle, report_ids, query, first_party,"
            " request_key, report_count, charged_usd, receipt, response, created_us, updated_us)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                order["id"],
                order["source"],
                order["handle"],
                order["report_ids"],
                order["query"],
                order["first_party"],
                request_key,
                _report_count(order["response"]),
                order["charged_usd"],
                order["receipt"],
                order["response"],
                order["created_us"],
                order["updated_us"],
            ),
        )
        scope = report_scope(order["source"])
        if order["status"] == ClaimStatus.DONE:
            owned = (
                tx.all(
                    "SELECT report_id, snapshot, bought_us FROM report_library WHERE order_id = ?"
                    " ORDER BY report_id",
                    (order["id"],),
                )
                if has_library
                else []
            )
            rows: list[tuple[str, Any, int]] = [
                (r["report_id"], r["snapshot"].encode(), r["bought_us"]) for r in owned
            ]
        else:
            ids = json.loads(order["report_ids"])
            rows = [(str(report_id), None, order["updated_us"]) for report_id in ids]
        tx.insert_many(
            _CLAIM_INSERT,
            [
                (
                    scope,
                    report_id,
                    order["status"],
                    request_key,
                    order["ledger_id"],
                    0,
                    MIGRATED_OWNER,
                    order["handle"],
                    order["created_us"],
                    updated_us,
                    order["error"],
                    answer,
                )
                for report_id, answer, updated_us in rows
            ],
        )


def _report_count(response: str | None) -> int | None:
    """How many reports a purchase's answer held (a report's price is the amount / count)."""
    try:
        reports = json.loads(response or "")["reports"]
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(reports, list):
        return None
    return sum(
        1 for r in reports if isinstance(r, dict) and isinstance(r.get("id"), str) and r["id"]
    )


#: Columns of step 4 (name, type); added one by one, so a partly upgraded file is fine.
OUTCOME_COLUMNS = (
    ("owner", "TEXT"),
    ("payment_header", "TEXT"),
    ("resends", "INTEGER NOT NULL DEFAULT 0"),
    ("resolved_by", "TEXT"),
)
_OPEN = tuple(dict.fromkeys((*IN_FLIGHT, *UNRESOLVED)))


def _outcomes(tx: Tx) -> None:
    present = tx.columns("payments")
    for name, kind in OUTCOME_COLUMNS:
        if name not in present:
            _add_column(tx, "payments", name, kind)
    tx.execute(
        "CREATE INDEX IF NOT EXISTS payments_open ON payments (status, id)"
        f" WHERE {in_sql('status', _OPEN)}"
    )


def _prepaid(tx: Tx) -> None:
    if "prepaid" not in tx.columns("payments"):
        _add_column(tx, "payments", "prepaid", "INTEGER NOT NULL DEFAULT 0")


def _user_label(tx: Tx) -> None:
    if "user_label" not in tx.columns("payments"):
        _add_column(tx, "payments", "user_label", "TEXT")


def _cap_setter(tx: Tx) -> None:
    present = tx.columns("budgets")
    for name, kind in (("cap_set_by", "TEXT"), ("cap_set_us", "INTEGER")):
        if name not in present:
            _add_column(tx, "budgets", name, kind)
    # A cap stored before this version was set by some process: keep it as set.
    tx.execute(
        "UPDATE budgets SET cap_set_us = updated_us WHERE cap_set_us IS NULL"
        " AND (cap_atomic IS NOT NULL OR per_call_atomic IS NOT NULL)"
    )


def _claim_cost(tx: Tx) -> None:
    if "cost_atomic" not in tx.columns("claims"):
        _add_column(tx, "claims", "cost_atomic", "INTEGER")


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "payments and budgets", _ledger),
    Migration(2, "claims", lambda tx: _run(tx, CLAIMS)),
    Migration(3, "media jobs and report purchases", _stores),
    Migration(4, "payment outcomes: owner, signed payload, re-sends", _outcomes),
    Migration(5, "prepaid payments: sent with the first request", _prepaid),
    Migration(6, "who made each payment: user_label", _user_label),
    Migration(7, "rate limits shared by a wallet's processes", lambda tx: _run(tx, RATE_LIMITS)),
    Migration(8, "one cap per budget: who set it and when", _cap_setter),
    Migration(9, "what a stored answer cost: claims.cost_atomic", _claim_cost),
    Migration(10, "the answers of one request stored together: answer_packs", packs.migrate),
)
#: The schema version this code writes.
SCHEMA_VERSION = MIGRATIONS[-1].version

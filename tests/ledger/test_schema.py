"""Schema versions: new files, files of earlier versions upgraded in place, newer ones refused."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from support.ledger import settled
from support.processes import racing

import x402lab as xl
from x402lab.ledger import (
    MIGRATIONS,
    SCHEMA_VERSION,
    Claims,
    ClaimStatus,
    Ledger,
    job_scope,
    open_database,
    report_scope,
)


def user_version(path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("PRAGMA user_version").fetchone()[0])


def test_a_new_file_has_every_table_at_the_current_version(tmp_path):
    path = tmp_path / "l.sqlite"
    Ledger(path).close()
    assert user_version(path) == SCHEMA_VERSION == len(MIGRATIONS)
    with sqlite3.connect(path) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"payments", "budgets", "claims", "media_jobs", "report_purchases"} <= tables


def test_reopening_changes_nothing(tmp_path):
    path = tmp_path / "l.sqlite"
    ledger = Ledger(path)
    settled(ledger, "k", 5)
    ledger.close()
    again = Ledger(path)
    assert [r["status"] for r in again.rows()] == ["settled"]
    assert again.db.version == SCHEMA_VERSION


def test_a_file_of_newer_code_is_refused_and_left_as_it_is(tmp_path):
    path = tmp_path / "l.sqlite"
    Ledger(path).close()
    older_code = MIGRATIONS[:-1]  # this code, as an x402lab that knew one step less
    with pytest.raises(xl.ConfigError, match=rf"schema version {SCHEMA_VERSION}, newer than"):
        open_database(path).migrate(older_code)
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(xl.ConfigError, match="written by a newer x402lab"):
        Ledger(path)
    assert user_version(path) == SCHEMA_VERSION + 1


def test_migrations_are_numbered_without_gaps(tmp_path):
    db = open_database(tmp_path / "l.sqlite")
    with pytest.raises(xl.ConfigError, match="numbered"):
        db.migrate([MIGRATIONS[0], MIGRATIONS[2]])


def test_a_url_of_an_unknown_scheme_is_refused_naming_the_supported_ones(tmp_path):
    with pytest.raises(xl.ConfigError, match="'mysql' is not a supported ledger scheme") as info:
        Ledger("mysql://user:secret@127.0.0.1:1/team")
    assert "secret" not in str(info.value)
    assert "SQLite file path" in str(info.value) and "postgresql://" in str(info.value)
    assert open_database(f"sqlite://{tmp_path / 'u.sqlite'}").path == tmp_path / "u.sqlite"


def test_a_file_that_is_not_a_database_is_refused(tmp_path):
    path = tmp_path / "notes.sqlite"
    path.write_text("not a database, just notes\n" * 100)
    with pytest.raises(xl.ConfigError, match="cannot"):
        Ledger(path)


def _open(path: str, start: Any) -> None:
    start.wait()
    Ledger(path).close()


def test_processes_opening_a_new_file_together_migrate_it_once(tmp_path):
    # Six processes open each new file at the same moment, ten files over: switching a new
    # file to WAL mode was then answered "database is locked" about once in 75 opens.
    context = racing()
    for n in range(10):
        path = str(tmp_path / f"l{n}.sqlite")
        start = context.Barrier(6)
        procs = [context.Process(target=_open, args=(path, start)) for _ in range(6)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(60)
            assert proc.exitcode == 0
        assert user_version(path) == SCHEMA_VERSION


# -- a file of the version before numbered schemas: ledger, media jobs, report library --------

OLD_TABLES = """
CREATE TABLE payments (id INTEGER PRIMARY KEY, ts_us INTEGER NOT NULL, updated_us INTEGER
 NOT NULL, service TEXT NOT NULL, method TEXT, path TEXT, model TEXT, request_key TEXT, budget
 TEXT NOT NULL, amount_atomic INTEGER NOT NULL, upstream_usd REAL, price_mult REAL, status TEXT
 NOT NULL, tx_hash TEXT, payer TEXT, pay_to TEXT, network TEXT, asset TEXT, nonce TEXT UNIQUE,
 valid_before INTEGER, error TEXT, held INTEGER NOT NULL DEFAULT 0);
CREATE TABLE budgets (name TEXT PRIMARY KEY, cap_atomic INTEGER, per_call_atomic INTEGER,
 counted_atomic INTEGER NOT NULL DEFAULT 0, created_us INTEGER NOT NULL, updated_us INTEGER
 NOT NULL);
CREATE TABLE jobs (id INTEGER PRIMARY KEY, gateway TEXT NOT NULL, kind TEXT NOT NULL, model TEXT
 NOT NULL, queue_id TEXT NOT NULL, request_key TEXT NOT NULL, request_json TEXT NOT NULL, status
 TEXT NOT NULL, created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL, finished_us INTEGER,
 quoted_atomic INTEGER, paid_atomic INTEGER, ledger_id INTEGER, tx_hash TEXT, delete_media
 INTEGER NOT NULL DEFAULT 0, download_url TEXT, average_execution_ms INTEGER, media_path TEXT,
 content_type TEXT, size_bytes INTEGER, cleaned_up INTEGER NOT NULL DEFAULT 0, error TEXT,
 UNIQUE (gateway, queue_id));
CREATE TABLE job_claims (id INTEGER PRIMARY KEY, gateway TEXT NOT NULL, kind TEXT NOT NULL, path
 TEXT NOT NULL, request_key TEXT NOT NULL, status TEXT NOT NULL, new INTEGER NOT NULL DEFAULT 0,
 ledger_floor INTEGER NOT NULL, job_id INTEGER, ledger_id INTEGER, created_us INTEGER NOT NULL,
 updated_us INTEGER NOT NULL, error TEXT);
CREATE TABLE report_orders (id INTEGER PRIMARY KEY, source TEXT NOT NULL, handle TEXT NOT NULL,
 report_ids TEXT NOT NULL, query TEXT NOT NULL, first_party INTEGER NOT NULL, status TEXT NOT
 NULL, request_key TEXT, ledger_id INTEGER, paid_atomic INTEGER, charged_usd REAL, tx_hash TEXT,
 receipt TEXT, response TEXT, created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL, error
 TEXT);
CREATE TABLE report_library (source TEXT NOT NULL, report_id TEXT NOT NULL, handle TEXT NOT
 NULL, created_at TEXT, snapshot TEXT NOT NULL, order_id INTEGER NOT NULL, price_atomic INTEGER,
 bought_us INTEGER NOT NULL, PRIMARY KEY (source, report_id));
"""
GATEWAY = "http://gw.test"
REPORTS = "http://reports.test"


def _payment(db: sqlite3.Connection, key: str, amount: int, status: str) -> int:
    cursor = db.execute(
        "INSERT INTO payments (ts_us, updated_us, service, request_key, budget, amount_atomic,"
        " status, tx_hash) VALUES (1, 1, 'gateway', ?, 'exp', ?, ?, ?)",
        (key, amount, status, "0xabc" if status == "settled" else None),
    )
    return int(cursor.lastrowid or 0)


def test_stored_jobs_and_owned_reports_of_an_old_file_are_kept(tmp_path):
    path = tmp_path / "old.sqlite"
    snapshots = [{"id": "r1", "createdAt": "2025-01-02"}, {"id": "r2", "createdAt": "2025-01-01"}]
    with sqlite3.connect(path) as db:
        db.executescript(OLD_TABLES)
        job_row = _payment(db, "music-key", 15_000, "settled")
        db.execute(
            "INSERT INTO jobs (gateway, kind, model, queue_id, request_key, request_json,"
            " status, created_us, updated_us, paid_atomic, ledger_id, tx_hash) VALUES (?, 'music',"
            " 'ace', 'q-1', 'music-key', '{}', 'completed', 5, 6, 15000, ?, '0xabc')",
            (GATEWAY, job_row),
        )
        unknown_row = _payment(db, "video-key", 90_000, "unknown")
        db.execute(
            "INSERT INTO job_claims (gateway, kind, path, request_key, status, ledger_floor,"
            " ledger_id, created_us, updated_us) VALUES (?, 'video', '/v', 'video-key', 'unknown',"
            " 0, ?, 7, 8)",
            (GATEWAY, unknown_row),
        )
        order_row = _payment(db, "report-order:1", 40_000, "settled")
        response = json.dumps({"reports": snapshots})
        db.execute(
            "INSERT INTO report_orders (id, source, handle, report_ids, query, first_party,"
            " status, request_key, ledger_id, paid_atomic, response, created_us, updated_us)"
            " VALUES (1, ?, 'alice', '[\"r1\", \"r2\"]', 'q', 0, 'done', 'report-order:1', ?,"
            " 40000, ?, 9, 10)",
            (REPORTS, order_row, response),
        )
        for snapshot in snapshots:
            db.execute(
                "INSERT INTO report_library VALUES (?, ?, 'alice', ?, ?, 1, 20000, 11)",
                (REPORTS, snapshot["id"], snapshot["createdAt"], json.dumps(snapshot)),
            )
        db.execute(
            "INSERT INTO report_orders (id, source, handle, report_ids, query, first_party,"
            " status, request_key, created_us, updated_us) VALUES (2, ?, 'bob', '[\"r9\"]', 'q',"
            " 0, 'unknown', 'report-order:2', 12, 13)",
            (REPORTS,),
        )
        _payment(db, "report-order:2", 20_000, "unknown")
    ledger = Ledger(path)
    assert ledger.db.version == SCHEMA_VERSION
    claims = Claims(ledger.db)
    jobs = {r.key: r for r in claims.all(job_scope(GATEWAY))}
    assert jobs["music-key"].status == ClaimStatus.DONE
    assert (jobs["music-key"].ledger_id, jobs["music-key"].amount_atomic) == (job_row, 15_000)
    assert jobs["video-key"].status == ClaimStatus.UNKNOWN
    with sqlite3.connect(path) as db:
        [(queue_id, claim_id)] = db.execute("SELECT queue_id, claim_id FROM media_jobs").fetchall()
    assert (queue_id, claim_id) == ("q-1", jobs["music-key"].id)
    owned = {r.key: r for r in claims.all(report_scope(REPORTS))}
    assert {k: r.status for k, r in owned.items()} == {"r1": "done", "r2": "done", "r9": "unknown"}
    assert json.loads(owned["r1"].answer or b"") == snapshots[0]
    assert owned["r2"].tx_hash == "0xabc" and owned["r1"].label == "alice"
    # What it means: nothing bought before is bought again without being asked.
    got = claims.claim(report_scope(REPORTS), ["r1", "r9"])
    assert {k: c.action for k, c in got.items()} == {"r1": "reuse", "r9": "maybe_paid"}

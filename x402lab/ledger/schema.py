"""The ledger's SQLite tables, and the upgrade of files written by earlier versions."""

from __future__ import annotations

import sqlite3

SCHEMA = """
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


def upgrade(db: sqlite3.Connection) -> None:
    """Bring a ledger written by an earlier version up to the current tables."""
    payments = {row[1] for row in db.execute("PRAGMA table_info(payments)")}
    if payments and "held" not in payments:
        db.execute("ALTER TABLE payments ADD COLUMN held INTEGER NOT NULL DEFAULT 0")
    budgets = {row[1] for row in db.execute("PRAGMA table_info(budgets)")}
    if budgets and "counted_atomic" not in budgets:
        # Recomputed from the payments, never defaulted to 0: that would forget spend.
        db.execute("ALTER TABLE budgets ADD COLUMN counted_atomic INTEGER NOT NULL DEFAULT 0")
        db.execute(
            "UPDATE budgets SET counted_atomic = (SELECT COALESCE(SUM(amount_atomic), 0)"
            " FROM payments WHERE payments.budget = budgets.name"
            " AND status IN ('reserved','signed','settled','unknown'))"
        )

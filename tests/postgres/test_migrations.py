"""The schema on PostgreSQL: built from an empty database in PostgreSQL's types, upgraded step
by step, reopened unchanged, and refused when a newer x402lab wrote it."""

from __future__ import annotations

import pytest
from support.postgres import query, settled

import x402lab as xl
from x402lab.ledger import MIGRATIONS, SCHEMA_VERSION, Ledger, open_database
from x402lab.ledger.postgres import VERSION_TABLE


def column_types(url: str, table: str) -> dict[str, str]:
    rows = query(
        url,
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = %s",
        (table,),
    )
    return dict(rows)


def test_an_empty_database_gets_every_table_in_postgresql_types(pg_url):
    ledger = Ledger(pg_url)
    assert ledger.db.version == SCHEMA_VERSION == len(MIGRATIONS)
    assert query(pg_url, f"SELECT version FROM {VERSION_TABLE}") == [(SCHEMA_VERSION,)]
    tables = {
        name
        for (name,) in query(
            pg_url,
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema()",
        )
    }
    assert {"payments", "budgets", "claims", "media_jobs", "report_purchases"} <= tables
    payments = column_types(pg_url, "payments")
    assert payments["id"] == payments["amount_atomic"] == payments["ts_us"] == "bigint"
    assert payments["upstream_usd"] == "double precision"
    assert payments["user_label"] == "text" and payments["held"] == "bigint"
    assert column_types(pg_url, "claims")["answer"] == "bytea"
    assert column_types(pg_url, "claims")["pack_offset"] == "bigint"
    assert column_types(pg_url, "answer_packs")["body"] == "bytea"
    # Packs of float32 bytes are kept as they are: no compression tried (docs/embeddings.md).
    storage = query(
        pg_url,
        "SELECT attstorage FROM pg_attribute WHERE attrelid = 'answer_packs'::regclass"
        " AND attname = 'body'",
    )
    assert storage == [("e",)]
    ledger.close()


def test_reopening_changes_nothing(pg_url):
    ledger = Ledger(pg_url)
    settled(ledger, "k", 5)
    ledger.close()
    again = Ledger(pg_url)
    assert [r["status"] for r in again.rows()] == ["settled"]
    assert again.db.version == SCHEMA_VERSION
    again.close()


def test_a_database_of_an_earlier_version_is_upgraded_keeping_its_rows(pg_url):
    earlier = open_database(pg_url)
    assert earlier.migrate(MIGRATIONS[:-1]) == SCHEMA_VERSION - 1
    with earlier.transaction() as tx:
        tx.execute(
            "INSERT INTO payments (ts_us, updated_us, service, budget, amount_atomic, status)"
            " VALUES (1, 1, 'gateway', 'exp', 900000, 'settled')"
        )
        tx.execute(  # its running total, as the store of that version kept it
            "INSERT INTO budgets (name, counted_atomic, created_us, updated_us)"
            " VALUES ('exp', 900000, 1, 1)"
        )
    earlier.close()
    ledger = Ledger(pg_url, user="ana")
    assert ledger.db.version == SCHEMA_VERSION
    budget = xl.Budget(usd=1.0, name="exp").bind(ledger)
    with pytest.raises(xl.BudgetExceeded):  # the old spend is counted, not forgotten
        budget.reserve(200_000, xl.ledger.PaymentMeta(service="gateway"))
    assert [r["user"] for r in ledger.rows()] == [None, "ana"]  # before labels: no user
    ledger.close()


def test_a_database_of_newer_code_is_refused_and_left_as_it_is(pg_url):
    Ledger(pg_url).close()
    with pytest.raises(xl.ConfigError, match=rf"schema version {SCHEMA_VERSION}, newer than"):
        open_database(pg_url).migrate(MIGRATIONS[:-1])
    query(pg_url, f"UPDATE {VERSION_TABLE} SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(xl.ConfigError, match="written by a newer x402lab"):
        Ledger(pg_url)
    assert query(pg_url, f"SELECT version FROM {VERSION_TABLE}") == [(SCHEMA_VERSION + 1,)]

"""Connections the server closes while they wait in the pool (a restart, an idle timeout, an
administrator terminating sessions) are replaced: the next payment and the next read work,
and nothing runs twice."""

from __future__ import annotations

from support.postgres import admin, settled

import x402lab as xl
from x402lab.ledger import Ledger


def terminate_sessions(url: str) -> int:
    dbname = url.rsplit("/", 1)[1]
    rows = admin(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = %s AND pid <> pg_backend_pid()",
        (dbname,),
    )
    return len(rows)


def test_connections_closed_by_the_server_are_replaced(pg_url):
    ledger = Ledger(pg_url)
    budget = xl.Budget(usd=1.0, name="b").bind(ledger)
    settled(ledger, "before", 5_000, cap=1_000_000)
    assert terminate_sessions(pg_url) >= 1
    settled(ledger, "after", 7_000, cap=1_000_000)  # a write transaction first
    assert terminate_sessions(pg_url) >= 1
    assert [r["request_key"] for r in ledger.rows()] == ["before", "after"]  # a read first
    assert budget.state().settled_atomic == 12_000
    ledger.close()

"""Processes sharing one PostgreSQL ledger: reservations from one budget never pass its cap
(and a refusal happens exactly when the cap would be passed), processes racing for one
request key pay once, and processes opening a new database together migrate it once."""

from __future__ import annotations

import queue
import random

import pytest
from support.ledger import claim_and_pay
from support.postgres import open_ledger, query, reserve_many
from support.processes import racing

from x402lab.ledger import SCHEMA_VERSION, Ledger
from x402lab.ledger.postgres import VERSION_TABLE

SPAWN = racing()


def run_all(procs: list) -> None:
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0


def test_processes_reserving_from_one_budget_never_overshoot(pg_url):
    cap = 2_000_000
    draw = random.Random(402)
    prices = [[draw.randint(1_000, 60_000) for _ in range(60)] for _ in range(4)]
    assert sum(map(sum, prices)) > 2 * cap  # far more asked than the cap allows
    Ledger(pg_url).close()
    start = SPAWN.Event()
    procs = [
        SPAWN.Process(target=reserve_many, args=(pg_url, "team", cap, chunk, start))
        for chunk in prices
    ]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    rows = query(pg_url, "SELECT id, status, amount_atomic FROM payments ORDER BY id")
    assert len(rows) == sum(map(len, prices))
    # Writers are serialized, so ids are in commit order: replay them against the cap.
    counted = 0
    for _, status, amount in rows:
        if status == "reserved":
            counted += amount
            assert counted <= cap
        else:
            assert status == "refused" and counted + amount > cap  # refused only when needed
    [(total,)] = query(pg_url, "SELECT counted_atomic FROM budgets WHERE name = 'team'")
    assert total == counted and cap - 60_000 < counted <= cap
    assert len({user for (user,) in query(pg_url, "SELECT user_label FROM payments")}) == 4


def test_processes_racing_for_one_key_pay_once(pg_url):
    Ledger(pg_url).close()
    results = SPAWN.Queue()
    procs = [
        SPAWN.Process(target=claim_and_pay, args=(pg_url, "batch:chat", "the-key", results))
        for _ in range(4)
    ]
    for proc in procs:
        proc.start()
    outcomes = []
    for _ in procs:
        try:
            outcomes.append(results.get(timeout=120))
        except queue.Empty:
            pytest.fail("a claimer did not finish")
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    assert sum(paid for _, paid, _ in outcomes) == 1
    assert len({answer for _, _, answer in outcomes}) == 1
    assert query(pg_url, "SELECT status FROM payments") == [("settled",)]


def test_processes_opening_a_new_database_together_migrate_it_once(pg_url):
    run_all([SPAWN.Process(target=open_ledger, args=(pg_url,)) for _ in range(3)])
    assert query(pg_url, f"SELECT version FROM {VERSION_TABLE}") == [(SCHEMA_VERSION,)]

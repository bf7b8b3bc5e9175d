"""Grouped writes (``CommitGroup``): the reservations and settlements a batch run passes its
group of commits, of one event-loop iteration, share one commit. Another connection sees
them one iteration later, this one at once; the write-ahead fsync commits them first; a
block that fails is undone alone; a group the engine rolls back is reported, and nothing of
it is counted as sent. A write not given the group commits at once."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from support.ledger import meta, nonce

from x402lab.errors import ConfigError, StoreError
from x402lab.ledger import CommitGroup, Ledger, SignedAuthorization


def _reserve(ledger: Ledger, key: str, group: CommitGroup | None = None) -> int:
    """A signed reservation as the async driver makes it (committed without an fsync), in
    a batch run's ``group`` when given."""
    return ledger.reserve(
        budget="b",
        cap_atomic=10**9,
        amount_atomic=10_000,
        meta=meta(key),
        sign=lambda: SignedAuthorization(nonce(), "0xPayer", 10**10, "header"),
        durable=False,
        group=group,
    )


def _settle(ledger: Ledger, row: int, group: CommitGroup | None, tx_hash: str = "0xtx") -> None:
    ledger.settlement(row, tx_hash=tx_hash, payer="0xPayer").commit(group=group)


def _seen_elsewhere(path: str) -> dict[str, int]:
    """Statuses of the payments another connection sees (committed rows only)."""
    other = sqlite3.connect(path)
    try:
        return dict(other.execute("SELECT status, COUNT(*) FROM payments GROUP BY status"))
    finally:
        other.close()


def test_one_iteration_shares_one_commit(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    path = str(ledger.path)

    async def run() -> None:
        group = ledger.db.commit_group()
        rows = [_reserve(ledger, f"k{i}", group) for i in range(10)]
        assert _seen_elsewhere(path) == {}  # the group is open
        assert len(ledger.rows()) == 10  # this connection sees its own writes
        await asyncio.sleep(0)  # the next iteration commits the group
        assert _seen_elsewhere(path) == {"signed": 10}
        for row in rows:
            _settle(ledger, row, group, f"0xtx{row}")
        assert _seen_elsewhere(path) == {"signed": 10}
        await ledger.write_ahead.durable()  # commits the open group, then fsyncs
        assert _seen_elsewhere(path) == {"settled": 10}
        _settle(ledger, _reserve(ledger, "last", group), group)
        group.end()  # the run's end commits what the group holds
        assert _seen_elsewhere(path) == {"settled": 11}

    asyncio.run(run())


def test_a_write_not_given_the_group_commits_at_once(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    group = ledger.db.commit_group()  # a batch runs meanwhile: nothing here joins it

    async def run() -> None:
        row = _reserve(ledger, "single")
        assert _seen_elsewhere(str(ledger.path)) == {"signed": 1}
        ledger.record_settled(row, tx_hash="0xtx", payer="0xPayer")
        assert _seen_elsewhere(str(ledger.path)) == {"settled": 1}

    asyncio.run(run())
    _reserve(ledger, "no loop", group)  # given the group, but no event loop to commit it
    assert _seen_elsewhere(str(ledger.path)) == {"settled": 1, "signed": 1}


def test_a_group_belongs_to_one_database(tmp_path):
    ledger, other = Ledger(tmp_path / "a.sqlite"), Ledger(tmp_path / "b.sqlite")

    async def run() -> None:
        with pytest.raises(ConfigError, match="was given to"):
            _reserve(ledger, "k", other.db.commit_group())

    asyncio.run(run())
    assert ledger.rows() == []


def test_an_ungrouped_write_commits_the_open_group_first(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")

    async def run() -> None:
        _reserve(ledger, "grouped", ledger.db.commit_group())
        ledger.record_refused(budget="b", amount_atomic=1, meta=meta("x"), error="no")
        assert _seen_elsewhere(str(ledger.path)) == {"signed": 1, "refused": 1}

    asyncio.run(run())


def test_a_failed_block_is_undone_alone(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")

    def refuse_to_sign() -> SignedAuthorization:
        raise RuntimeError("the signer failed")

    async def run() -> None:
        group = ledger.db.commit_group()
        _reserve(ledger, "before", group)
        with pytest.raises(RuntimeError):
            ledger.reserve(
                budget="b",
                cap_atomic=10**9,
                amount_atomic=10_000,
                meta=meta("failed"),
                sign=refuse_to_sign,
                durable=False,
                group=group,
            )
        _reserve(ledger, "after", group)
        await ledger.write_ahead.durable()
        keys = sorted(row["request_key"] for row in ledger.rows())
        assert keys == ["after", "before"]
        assert ledger.budget_state("b").in_flight_atomic == 20_000

    asyncio.run(run())


def test_a_group_the_engine_rolls_back_is_reported_and_never_sent(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    # The fault: a trigger that makes SQLite roll back the whole open transaction, as a
    # full disk or an I/O error would.
    ledger.db._db.execute(
        "CREATE TEMP TRIGGER fail_group BEFORE INSERT ON payments"
        " WHEN NEW.request_key = 'fatal'"
        " BEGIN SELECT RAISE(ROLLBACK, 'simulated I/O error'); END"
    )

    async def run() -> None:
        group = ledger.db.commit_group()
        _reserve(ledger, "lost with the group", group)
        with pytest.raises(sqlite3.IntegrityError):
            _reserve(ledger, "fatal", group)
        with pytest.raises(StoreError, match="not sent"):
            await ledger.write_ahead.durable()  # the waiters of that group are told
        await ledger.write_ahead.durable()  # reported once; the ledger works on
        _reserve(ledger, "next group", group)
        await ledger.write_ahead.durable()

    asyncio.run(run())
    assert [row["request_key"] for row in ledger.rows()] == ["next group"]
    assert ledger.budget_state("b").in_flight_atomic == 10_000


def test_a_grouped_settlement_is_one_statement_and_a_late_one_keeps_the_rules(tmp_path):
    """Settling an in-flight row in a group is a single UPDATE (atomic by itself, so no
    savepoint); a row that is not in flight any more still goes through the full rules."""
    ledger = Ledger(tmp_path / "l.sqlite")
    statements: list[str] = []

    async def run() -> None:
        group = ledger.db.commit_group()
        row = _reserve(ledger, "k", group)
        await ledger.write_ahead.durable()
        ledger.db._db.set_trace_callback(statements.append)
        _settle(ledger, row, group)
        ledger.db._db.set_trace_callback(None)
        # Settled is final: a second receipt changes nothing but a missing hash.
        _settle(ledger, row, group, "0xother")
        await ledger.write_ahead.durable()

    asyncio.run(run())
    assert [s.split()[0] for s in statements] == ["BEGIN", "UPDATE"]
    assert "payment_header = NULL" in statements[1]
    assert _seen_elsewhere(str(ledger.path)) == {"settled": 1}
    (only,) = ledger.rows()
    assert only["tx_hash"] == "0xtx"

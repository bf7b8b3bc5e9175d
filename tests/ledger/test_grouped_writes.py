"""Grouped writes (``grouped_writes``): a batch's reservations and settlements of one event
loop iteration share one commit. Another connection sees them one iteration later, this one
at once; the write-ahead fsync commits them first; a block that fails is undone alone; a
group the engine rolls back is reported, and nothing of it is counted as sent."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from support.ledger import meta, nonce

from x402lab.errors import StoreError
from x402lab.ledger import Ledger, SignedAuthorization, grouped_writes


def _reserve(ledger: Ledger, key: str) -> int:
    """A signed reservation as the async driver makes it (committed without an fsync)."""
    return ledger.reserve(
        budget="b",
        cap_atomic=10**9,
        amount_atomic=10_000,
        meta=meta(key),
        sign=lambda: SignedAuthorization(nonce(), "0xPayer", 10**10, "header"),
        durable=False,
    )


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
        with grouped_writes():
            rows = [_reserve(ledger, f"k{i}") for i in range(10)]
            assert _seen_elsewhere(path) == {}  # the group is open
            assert len(ledger.rows()) == 10  # this connection sees its own writes
            await asyncio.sleep(0)  # the next iteration commits the group
            assert _seen_elsewhere(path) == {"signed": 10}
            for row in rows:
                ledger.record_settled(row, tx_hash=f"0xtx{row}", payer="0xPayer")
            assert _seen_elsewhere(path) == {"signed": 10}
            await ledger.write_ahead.durable()  # commits the open group, then fsyncs
            assert _seen_elsewhere(path) == {"settled": 10}

    asyncio.run(run())


def test_outside_a_batch_each_write_commits_at_once(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")

    async def run() -> None:
        row = _reserve(ledger, "single")
        assert _seen_elsewhere(str(ledger.path)) == {"signed": 1}
        ledger.record_settled(row, tx_hash="0xtx", payer="0xPayer")
        assert _seen_elsewhere(str(ledger.path)) == {"settled": 1}

    asyncio.run(run())


def test_an_ungrouped_write_commits_the_open_group_first(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")

    async def run() -> None:
        with grouped_writes():
            _reserve(ledger, "grouped")
            ledger.record_refused(budget="b", amount_atomic=1, meta=meta("x"), error="no")
            assert _seen_elsewhere(str(ledger.path)) == {"signed": 1, "refused": 1}

    asyncio.run(run())


def test_a_failed_block_is_undone_alone(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")

    def refuse_to_sign() -> SignedAuthorization:
        raise RuntimeError("the signer failed")

    async def run() -> None:
        with grouped_writes():
            _reserve(ledger, "before")
            with pytest.raises(RuntimeError):
                ledger.reserve(
                    budget="b",
                    cap_atomic=10**9,
                    amount_atomic=10_000,
                    meta=meta("failed"),
                    sign=refuse_to_sign,
                    durable=False,
                )
            _reserve(ledger, "after")
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
        with grouped_writes():
            _reserve(ledger, "lost with the group")
            with pytest.raises(sqlite3.IntegrityError):
                _reserve(ledger, "fatal")
            with pytest.raises(StoreError, match="not sent"):
                await ledger.write_ahead.durable()  # the waiters of that group are told
            await ledger.write_ahead.durable()  # reported once; the ledger works on
            _reserve(ledger, "next group")
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
        with grouped_writes():
            row = _reserve(ledger, "k")
            await ledger.write_ahead.durable()
            ledger.db._db.set_trace_callback(statements.append)
            ledger.record_settled(row, tx_hash="0xtx", payer="0xPayer")
            ledger.db._db.set_trace_callback(None)
            # Settled is final: a second receipt changes nothing but a missing hash.
            ledger.record_settled(row, tx_hash="0xother", payer="0xPayer")
            await ledger.write_ahead.durable()

    asyncio.run(run())
    assert [s.split()[0] for s in statements] == ["BEGIN", "UPDATE"]
    assert "payment_header = NULL" in statements[1]
    assert _seen_elsewhere(str(ledger.path)) == {"settled": 1}
    (only,) = ledger.rows()
    assert only["tx_hash"] == "0xtx"

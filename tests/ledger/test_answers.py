"""A settlement is committed with the answer it bought (``hold_settlements``, in
``x402lab.ledger.outcomes``), or on its own when the caller's block ends without storing one:
never dropped."""

from __future__ import annotations

import asyncio

import pytest
from support.ledger import signed

from x402lab.errors import ConfigError
from x402lab.ledger import (
    ClaimAction,
    Claimed,
    Jobs,
    Ledger,
    answer_transaction,
    held_for,
    hold_settlements,
)

GW = "http://127.0.0.1:9/"
KEY = "music-request-key"
BODY = {"model": "ace-step-15", "prompt": "calm piano", "duration": 60}
RECEIPT = {"tx_hash": "0xabc", "payer": "0xPayer"}


@pytest.fixture
def ledger(tmp_path) -> Ledger:
    return Ledger(tmp_path / "ledger.sqlite")


@pytest.fixture
def other(tmp_path, ledger) -> Ledger:
    """Another process's view of the same file (its own connection)."""
    return Ledger(tmp_path / "ledger.sqlite")


def status(ledger: Ledger, row: int) -> str:
    found = ledger.row(row)
    assert found is not None
    return str(found["status"])


def claim(jobs: Jobs) -> Claimed:
    got = jobs.claim(gateway=GW, kind="music", request_key=KEY)
    assert isinstance(got, Claimed) and got.action is ClaimAction.PAY
    return got


def test_a_held_settlement_commits_with_its_answer(ledger, other):
    jobs, seen = Jobs(ledger), Jobs(other)
    claimed = claim(jobs)
    row = signed(ledger, KEY)
    with hold_settlements(ledger) as held:
        assert held_for(ledger) is held
        assert held.hold(row, RECEIPT)
        assert status(other, row) == "signed"  # not committed on its own
        job = jobs.complete_claim(
            claimed, model="m", queue_id="q-1", request=BODY, ledger_id=row, held=held
        )
        assert held.rows == []
        # Committed together: another connection sees both at once.
        assert status(other, row) == "settled" and other.row(row)["tx_hash"] == "0xabc"  # type: ignore[index]
        assert seen.find(GW, "q-1") == job and job.paid_atomic == 10_000
    assert held_for(ledger) is None


def test_a_settlement_whose_answer_was_not_stored_commits_when_the_block_ends(ledger, other):
    row = signed(ledger, KEY)
    with pytest.raises(RuntimeError, match="unusable answer"):
        with hold_settlements(ledger) as held:
            held.hold(row, RECEIPT)
            with answer_transaction(ledger.db, held) as tx:
                tx.execute("UPDATE payments SET error = 'written' WHERE id = ?", (row,))
                raise RuntimeError("unusable answer")
    # The answer's transaction rolled back with the settlement in it; the block's end
    # committed the settlement alone.
    found = other.row(row)
    assert found is not None and found["status"] == "settled" and found["error"] is None


def test_a_block_holds_only_its_own_tasks_and_ledgers_settlements(ledger, tmp_path):
    elsewhere = Ledger(tmp_path / "elsewhere.sqlite")
    row = signed(ledger, KEY)

    async def main() -> None:
        with hold_settlements(ledger) as held:
            assert held_for(ledger) is held
            assert held_for(elsewhere) is None  # another ledger commits at once
            started = asyncio.get_running_loop().create_future()

            async def late() -> bool:
                await started
                found = held_for(ledger)  # the task outlived the block that started it
                return found is not None and found.hold(row, RECEIPT)

            task = asyncio.create_task(late())
        started.set_result(None)
        assert await task is False

    asyncio.run(main())
    with pytest.raises(ConfigError, match="not the ledger"):
        with hold_settlements(ledger) as held:
            answer_transaction(elsewhere.db, held)

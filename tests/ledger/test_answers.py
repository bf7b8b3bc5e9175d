"""A settlement is a value (``Settlement``, in ``x402lab.ledger.payments``) that its caller
commits: with the answer it bought, in the one transaction that stores that answer
(``answer_transaction``), or alone when there is no answer to store. Never dropped, never
committed twice, and an answer is never stored apart from its settlement."""

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
    Resolution,
    Settlement,
    answer_transaction,
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


def test_a_settlement_is_not_committed_until_its_caller_commits_it(ledger, other):
    row = signed(ledger, KEY)
    settlement = ledger.settlement(row, **RECEIPT)
    assert isinstance(settlement, Settlement) and not settlement.committed
    assert status(other, row) == status(ledger, row) == "signed"
    assert "not committed" in repr(settlement) and str(row) in repr(settlement)


def test_a_settlement_commits_with_its_answer(ledger, other):
    jobs, seen = Jobs(ledger), Jobs(other)
    claimed = claim(jobs)
    row = signed(ledger, KEY)
    settlement = ledger.settlement(row, **RECEIPT)
    job = jobs.complete_claim(
        claimed, model="m", queue_id="q-1", request=BODY, ledger_id=row, settlement=settlement
    )
    assert settlement.committed
    # Committed together: another connection sees both at once.
    found = other.row(row)
    assert found is not None and found["status"] == "settled" and found["tx_hash"] == "0xabc"
    assert found["resolved_by"] == Resolution.RECEIPT
    assert seen.find(GW, "q-1") == job and job.paid_atomic == 10_000
    settlement.commit()  # committed already: nothing more is written
    assert other.row(row) == found


def test_an_answer_that_cannot_be_stored_takes_its_settlement_back_with_it(ledger, other):
    row = signed(ledger, KEY)
    settlement = ledger.settlement(row, **RECEIPT)
    with pytest.raises(RuntimeError, match="unusable answer"):
        with answer_transaction(ledger.db, settlement) as tx:
            tx.execute("UPDATE payments SET error = 'written' WHERE id = ?", (row,))
            raise RuntimeError("unusable answer")
    # The answer's transaction rolled back with the settlement in it: neither is stored.
    assert not settlement.committed and status(other, row) == "signed"
    settlement.commit()  # the caller with no answer to store commits it alone
    found = other.row(row)
    assert found is not None and found["status"] == "settled" and found["error"] is None
    assert settlement.committed


def test_a_store_of_another_ledger_cannot_take_the_settlement(ledger, tmp_path):
    elsewhere = Ledger(tmp_path / "elsewhere.sqlite")
    settlement = ledger.settlement(signed(ledger, KEY), **RECEIPT)
    with pytest.raises(ConfigError, match="not the ledger"):
        with answer_transaction(elsewhere.db, settlement):
            pass
    assert not settlement.committed


def test_without_a_settlement_an_answer_is_an_ordinary_transaction(ledger, other):
    jobs = Jobs(ledger)
    claimed = claim(jobs)
    job = jobs.complete_claim(claimed, model="m", queue_id="q-2", request=BODY)
    assert Jobs(other).find(GW, "q-2") == job


def test_settlements_of_concurrent_tasks_are_their_own(ledger, other):
    """Nothing is carried by the task that runs: each task commits the settlement it was
    given, and a task that never commits one leaves only its own row ``signed``."""
    rows = [signed(ledger, f"{KEY}-{i}") for i in range(3)]

    async def answer(row: int, commit: bool) -> None:
        settlement = ledger.settlement(row, **RECEIPT)
        await asyncio.sleep(0)
        if commit:
            with answer_transaction(ledger.db, settlement) as tx:
                tx.execute("UPDATE payments SET error = 'answered' WHERE id = ?", (row,))

    async def main() -> None:
        await asyncio.gather(answer(rows[0], True), answer(rows[1], False), answer(rows[2], True))

    asyncio.run(main())
    assert [status(other, row) for row in rows] == ["settled", "signed", "settled"]

"""Group commit of write-ahead rows and the budget's two-statement reservation, on real
SQLite files: one fsync covers many rows, each row is committed before its caller is told it
is durable, and the cap refuses exactly the reservations that would pass it."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest

import x402lab as xl
from x402lab.busy import WINDOW_S
from x402lab.ledger import Move, PaymentMeta, PaymentStatus, SignedAuthorization

META = PaymentMeta(service="gateway", method="POST", path="/api/v1/chat/completions")


def _signer(n: int):
    def sign() -> SignedAuthorization:
        return SignedAuthorization(f"0x{n:064x}", "0xP", 2_000_000_000, f"header-{n}")

    return sign


def test_one_fsync_makes_the_rows_of_many_tasks_durable(tmp_path):
    path = tmp_path / "l.sqlite"
    ledger = xl.Ledger(path)
    budget = xl.Budget(usd=10.0).bind(ledger)
    seen_committed: list[bool] = []

    async def pay(n: int) -> int:
        await asyncio.sleep(0)
        row = budget.reserve(1000, META, sign=_signer(n), durable=False)
        await ledger.write_ahead.durable()
        # Durable only after it was committed: another connection already sees it signed.
        other = sqlite3.connect(path)
        [(status,)] = other.execute("SELECT status FROM payments WHERE id = ?", (row,)).fetchall()
        other.close()
        seen_committed.append(status == "signed")
        return row

    async def main() -> list[int]:
        return await asyncio.gather(*(pay(n) for n in range(64)))

    rows = asyncio.run(main())
    assert len(set(rows)) == 64 and all(seen_committed)
    assert 1 <= ledger.write_ahead.syncs < 64  # shared: far fewer fsyncs than rows
    assert budget.state().in_flight_atomic == 64 * 1000
    [(total,)] = ledger.query("SELECT counted_atomic FROM budgets WHERE name = ?", (budget.name,))
    assert total == 64 * 1000


def test_a_cancelled_waiter_does_not_cancel_the_shared_fsync(tmp_path):
    ledger = xl.Ledger(tmp_path / "l.sqlite")
    budget = xl.Budget(usd=1.0).bind(ledger)

    async def main() -> None:
        budget.reserve(10, META, sign=_signer(1), durable=False)
        budget.reserve(10, META, sign=_signer(2), durable=False)
        first = asyncio.ensure_future(ledger.write_ahead.durable())
        second = asyncio.ensure_future(ledger.write_ahead.durable())
        await asyncio.sleep(0)
        first.cancel()
        await second  # still completes
        with pytest.raises(asyncio.CancelledError):
            await first

    asyncio.run(main())
    assert ledger.write_ahead.syncs >= 1


def test_the_cap_refuses_exactly_what_would_pass_it_after_held_rows_are_freed(tmp_path):
    clock = [1000.0]
    ledger = xl.Ledger(tmp_path / "l.sqlite", now=lambda: clock[0])
    budget = xl.Budget(usd=0.1).bind(ledger)  # 100_000 atomic
    row = budget.reserve(60_000, META, sign=_signer(1))
    ledger.record_rejected(row, "settlement failed")  # held: it could still settle
    with pytest.raises(xl.BudgetExceeded):
        budget.reserve(50_000, META, sign=_signer(2), durable=False)
    clock[0] = 2_000_000_000 + 61  # its window and the clock slack have passed
    with pytest.raises(xl.BudgetExceeded):  # the clock alone frees nothing
        budget.reserve(50_000, META, sign=_signer(3), durable=False)
    # The chain says its nonce is unused (what ``chain.free_held`` asks): freed, and the cap
    # refuses exactly what would pass it.
    ledger.apply_outcomes([Move(row, PaymentStatus.EXPIRED, None, "unused")])
    budget.reserve(50_000, META, sign=_signer(3), durable=False)
    with pytest.raises(xl.BudgetExceeded):
        budget.reserve(50_001, META)
    budget.reserve(50_000, META)  # exactly up to the cap
    assert budget.state().committed_atomic == 100_000
    [(total,)] = ledger.query("SELECT counted_atomic FROM budgets WHERE name = ?", (budget.name,))
    assert total == 100_000
    statuses = [r["status"] for r in ledger.rows()]
    assert statuses == ["expired", "refused", "refused", "signed", "refused", "reserved"]


def test_settling_is_one_statement_and_a_settled_row_stays_settled(tmp_path):
    ledger = xl.Ledger(tmp_path / "l.sqlite")
    budget = xl.Budget(usd=1.0).bind(ledger)
    row = budget.reserve(1000, META, sign=_signer(1))
    ledger.record_settled(row, tx_hash="0xabc", payer="0xP")
    ledger.record_unknown(row, "a late ambiguous answer")  # says less: ignored
    settled = ledger.row(row)
    assert settled is not None
    assert (settled["status"], settled["tx_hash"]) == ("settled", "0xabc")
    assert ledger.query("SELECT payment_header FROM payments WHERE id = ?", (row,))[0][0] is None
    assert budget.state().settled_atomic == 1000 and budget.state().in_flight_atomic == 0
    again = budget.reserve(1000, META, sign=_signer(2))
    ledger.record_unknown(again, "no answer")
    ledger.record_settled(again, tx_hash="0xdef", payer="0xP")  # unknown -> settled
    assert budget.state().settled_atomic == 2000 and budget.state().unknown_atomic == 0


def test_a_ledger_opened_by_a_relative_path_still_syncs_after_a_change_of_folder(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    ledger = xl.Ledger("relative.sqlite")
    budget = xl.Budget(usd=1.0).bind(ledger)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the notebook moved on; the ledger's WAL did not

    async def main() -> None:
        budget.reserve(10, META, sign=_signer(1), durable=False)
        await ledger.write_ahead.durable()

    before = ledger.write_ahead.syncs
    asyncio.run(main())
    assert ledger.write_ahead.syncs == before + 1  # an fsync of the real WAL, not a no-op


@pytest.mark.parametrize("inline_below_s", [1.0, 0.0], ids=["on the loop", "in a thread"])
def test_both_ways_of_syncing_share_one_fsync_and_survive_a_cancelled_waiter(
    tmp_path, inline_below_s
):
    path = tmp_path / "l.sqlite"
    ledger = xl.Ledger(path)
    ledger.write_ahead.inline_below_s = inline_below_s
    budget = xl.Budget(usd=10.0).bind(ledger)

    async def pay(n: int) -> int:
        row = budget.reserve(1000, META, sign=_signer(n), durable=False)
        await ledger.write_ahead.durable()
        return row

    async def main() -> None:
        rows = await asyncio.gather(*(pay(n) for n in range(32)))
        assert len(set(rows)) == 32
        budget.reserve(10, META, sign=_signer(99), durable=False)
        first = asyncio.ensure_future(ledger.write_ahead.durable())
        second = asyncio.ensure_future(ledger.write_ahead.durable())
        await asyncio.sleep(0)
        first.cancel()
        await second
        with pytest.raises(asyncio.CancelledError):
            await first

    asyncio.run(main())
    assert 1 <= ledger.write_ahead.syncs < 33
    other = sqlite3.connect(path)
    [(signed,)] = other.execute("SELECT COUNT(*) FROM payments WHERE status = 'signed'")
    other.close()
    assert signed == 33


def _finishes_without_waiting(coro) -> bool:
    """Whether ``coro`` ran to its end in one step (it never waited on the loop)."""
    try:
        coro.send(None)
    except StopIteration:
        return True
    coro.close()
    return False


def test_a_busy_loop_hands_the_fsync_to_a_worker_thread_and_a_quiet_one_syncs_at_once(tmp_path):
    ledger = xl.Ledger(tmp_path / "l.sqlite")
    budget = xl.Budget(usd=1.0).bind(ledger)
    write_ahead = ledger.write_ahead

    async def main() -> None:
        # The bounds are the test's: a thread that only computes is busy over 5 % of the
        # time, one that sleeps is not busy half of it, however loaded the machine is.
        write_ahead.offload_busy = 0.05
        assert write_ahead.inline  # nothing measured yet: the loop's first window starts
        end = time.perf_counter() + 2 * WINDOW_S
        while time.perf_counter() < end:
            pass  # the loop's thread computes for two windows
        assert not write_ahead.inline
        budget.reserve(10, META, sign=_signer(1), durable=False)
        before = write_ahead.syncs
        # Even the holder of a send turn waits for a worker thread's fsync on a busy loop.
        assert not _finishes_without_waiting(write_ahead.durable(at_once=True))
        await write_ahead.durable()
        assert write_ahead.syncs == before + 1

        write_ahead.offload_busy = 0.5
        await asyncio.sleep(2 * WINDOW_S)  # the loop's thread waits for two windows
        assert write_ahead.inline
        budget.reserve(10, META, sign=_signer(2), durable=False)
        before = write_ahead.syncs
        assert _finishes_without_waiting(write_ahead.durable(at_once=True))  # on the loop
        assert write_ahead.syncs == before + 1

    asyncio.run(main())
    other = sqlite3.connect(tmp_path / "l.sqlite")
    [(signed,)] = other.execute("SELECT COUNT(*) FROM payments WHERE status = 'signed'")
    other.close()
    assert signed == 2

"""One definition of committed spend: ``Budget.state()`` and ``spend()`` always agree.

After settled, rejected-and-held, unknown and released payments (and a held one whose
authorization has expired), ``spend(by="budget")``'s ``committed_atomic`` equals
``Budget.state().committed_atomic``, and the ledger table exports ``held``.
"""

from __future__ import annotations

import pytest
from support.ledger import meta, settled, signed

import x402lab as xl
from x402lab.analysis.spend import STATUS_GROUPS, spend
from x402lab.ledger import EXPIRY_SLACK_S, Move, PaymentStatus


def committed_in_spend(ledger, budget: str) -> int:
    table = spend(ledger, by="budget", atomic=True).set_index("budget")
    return int(table.loc[budget, "committed_atomic"])


@pytest.fixture
def world(tmp_path):
    clock = [1_000.0]
    ledger = xl.Ledger(tmp_path / "l.sqlite", now=lambda: clock[0])
    budget = xl.Budget(usd=1.0, name="b").bind(ledger)
    return clock, ledger, budget


def test_committed_agrees_after_every_kind_of_outcome(world):
    clock, ledger, budget = world

    def agree() -> int:
        state = budget.state()
        assert committed_in_spend(ledger, "b") == state.committed_atomic
        return state.committed_atomic

    settled(ledger, "settled", 100_000)
    assert agree() == 100_000
    held = signed(ledger, "rejected", 20_000, valid_before=1_300)
    ledger.record_rejected(held, "settlement failed")
    assert budget.state().held_atomic == 20_000
    assert agree() == 120_000
    unknown = signed(ledger, "unknown", 3_000)
    ledger.record_unknown(unknown, "connection dropped")
    assert agree() == 123_000
    reserved = budget.reserve(400, meta("released"))
    assert agree() == 123_400
    ledger.release(reserved, "never sent")
    assert agree() == 123_000
    frame = ledger.to_pandas()
    assert frame.set_index("request_key")["held"].to_dict() == {
        "settled": False,
        "rejected": True,
        "unknown": False,
        "released": False,
    }
    assert str(frame["held"].dtype) == "boolean"
    # Past its window (and the clock slack) it still counts: only the chain frees it. When
    # the chain shows it unused, both stop counting it at once.
    clock[0] = 1_300 + EXPIRY_SLACK_S + 1
    assert agree() == 123_000
    assert ledger.held_past_window("b") == [held]
    ledger.apply_outcomes([Move(held, PaymentStatus.EXPIRED, None, "unused")])
    assert agree() == 103_000
    assert not ledger.to_pandas().set_index("request_key").loc["rejected", "held"]
    budget.reserve(1, meta("after"))
    assert agree() == 103_001


def test_spend_counts_held_rows_in_their_own_columns(world):
    _, ledger, _ = world
    row = signed(ledger, "rejected", 20_000, valid_before=1_300)
    ledger.record_rejected(row, "refused")
    totals = spend(ledger, by=(), atomic=True)
    assert int(totals["held_atomic"].iloc[0]) == 20_000
    assert int(totals["held_count"].iloc[0]) == 1
    assert int(totals["rejected_count"].iloc[0]) == 1
    assert int(totals["committed_atomic"].iloc[0]) == 20_000


def test_expired_payments_are_freed(world):
    _, ledger, budget = world
    row = signed(ledger, "gone", 50_000)
    ledger.record_unknown(row, "timeout")
    ledger.record_expired(row, "the chain says the nonce is unused and the window passed")
    assert budget.state().committed_atomic == 0 == committed_in_spend(ledger, "b")
    assert [r["status"] for r in ledger.rows()] == ["expired"]
    with pytest.raises(xl.ConfigError, match="cannot move to 'settled' from 'expired'"):
        ledger.record_settled(row, tx_hash="0x1", payer="0xP")


def test_every_status_is_in_exactly_one_spend_group():
    grouped = [status for statuses in STATUS_GROUPS.values() for status in statuses]
    assert sorted(grouped) == sorted(PaymentStatus)


def test_an_export_without_held_reads_as_nothing_held(world):
    _, ledger, _ = world
    settled(ledger, "k", 10)
    old_export = ledger.to_pandas().drop(columns=["held"])
    assert int(spend(old_export, by=(), atomic=True)["committed_atomic"].iloc[0]) == 10
    old_arrow = ledger.to_arrow().drop(["held"])
    assert int(spend(old_arrow, by=(), atomic=True)["settled_atomic"].iloc[0]) == 10


def test_an_export_from_before_prepay_and_user_labels_still_reads(world):
    _, ledger, _ = world
    settled(ledger, "k", 10)
    older = ["held", "expires_at", "resends", "resolved_by", "user", "prepaid"]
    old_export = ledger.to_pandas().drop(columns=older)
    assert int(spend(old_export, by=(), atomic=True)["settled_atomic"].iloc[0]) == 10
    old_arrow = ledger.to_arrow().drop(older)
    by_user = spend(old_arrow, by="user", atomic=True)
    assert by_user["settled_atomic"].sum() == 10

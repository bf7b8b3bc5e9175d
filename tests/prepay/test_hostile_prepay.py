"""A hostile gateway that answers every prepayment with a fresh 402 (and keeps the refused
authorization, which it could settle later) never holds more valid authorizations than the
budget (money rule 4): the refused one stays ``held``, and the fresh challenge is paid only if
the budget has room for both, else BudgetExceeded before anything more is signed."""

from __future__ import annotations

import contextlib
import time
from types import SimpleNamespace

import pytest
from support.hostile import hostile_server
from support.prepay import CHAT, CHAT_MODEL, MIN_ATOMIC, check_money

import x402lab as xl
from x402lab.gateway.text import chat_body


def _through(hostile, emulator) -> SimpleNamespace:
    return SimpleNamespace(
        gateway_url=hostile.url, reports_url=emulator.reports_url, chain_url=emulator.chain_url
    )


def _committed_within(lab, cap_atomic: int) -> None:
    state = lab.budget.state()
    assert state.committed_atomic <= cap_atomic, state


@pytest.mark.parametrize("calls", [1, 3], ids=["0.01 USD", "0.03 USD"])
def test_quote_then_chat_hands_a_refusing_server_at_most_the_budget(start, lab_on, calls):
    emulator = start()
    cap = calls * MIN_ATOMIC
    with hostile_server(emulator.gateway_url) as hostile:
        hostile.attack(refuse_prepayments=True)
        budget = xl.Budget(usd=cap / 1e6, per_call_usd=MIN_ATOMIC / 1e6, name="hostile")
        lab = lab_on(_through(hostile, emulator), budget=budget)
        outcomes = []
        for i in range(calls):
            body = chat_body(f"question {i}", model=CHAT_MODEL, max_tokens=8)
            lab.quote("POST", CHAT, body)  # the exact challenge: the chat is paid up front
            try:
                lab.chat(f"question {i}", model=CHAT_MODEL, max_tokens=8)
                outcomes.append("ok")
            except xl.BudgetExceeded as exc:
                # After a refused prepayment the error says that one is held.
                outcomes.append("held" if "stays held" in str(exc) else "budget")
            assert hostile.valid_atomic() <= cap
            _committed_within(lab, cap)
        # Every prepayment was refused and kept by the server: it holds the whole budget.
        assert hostile.valid_atomic() == cap
        # 0.01: the refused prepayment took it all; 0.03: one paid, two refused and held.
        assert outcomes == (["held"] if calls == 1 else ["ok", "held", "budget"])
        rows = check_money(lab, emulator.chain)
        refused = [r for r in rows if r["prepaid"] and r["status"] != "refused"]
        assert len(refused) == outcomes.count("ok") + outcomes.count("held")
        assert all(r["held"] and r["status"] == "rejected" for r in refused)
        assert sum(r["status"] == "settled" for r in rows) == outcomes.count("ok")


@pytest.mark.parametrize(
    ("rows", "cap", "partial"), [(30, 30 * MIN_ATOMIC, False), (30, 3 * MIN_ATOMIC, True)]
)
def test_a_batch_on_a_refusing_server_hands_it_at_most_the_budget(
    start, lab_on, rows, cap, partial
):
    emulator = start()
    with hostile_server(emulator.gateway_url) as hostile:
        hostile.attack(refuse_prepayments=True)
        lab = lab_on(_through(hostile, emulator), budget=xl.Budget(usd=cap / 1e6, name="batch"))
        prompts = [f"row {i}" for i in range(rows)]
        with pytest.warns(xl.IncompleteBatchWarning):
            frame = lab.batch_chat(
                prompts, model=CHAT_MODEL, max_tokens=8, progress=None, partial=partial
            )
        assert hostile.valid_atomic() <= cap
        _committed_within(lab, cap)
        statuses = frame["status"].value_counts().to_dict()
        assert statuses.get("ok", 0) >= 1 and statuses.get("skipped_budget", 0) >= 1, statuses
        # What was paid and what the server still holds add up to at most the budget.
        paid = int(frame["paid_atomic"].sum()) if "paid_atomic" in frame else None
        settled = sum(t.amount_atomic for t in emulator.chain.transfers())
        assert paid in (None, settled)
        assert settled + lab.budget.state().held_atomic <= cap
        check_money(lab, emulator.chain)


def test_a_refused_prepayment_the_server_settles_later_is_found_by_reconcile(start, lab_on):
    emulator = start()
    with hostile_server(emulator.gateway_url) as hostile:
        hostile.attack(refuse_prepayments=True)
        lab = lab_on(_through(hostile, emulator), budget=xl.Budget(usd=1.0, name="later"))
        body = chat_body("question", model=CHAT_MODEL, max_tokens=8)
        lab.quote("POST", CHAT, body)
        lab.chat("question", model=CHAT_MODEL, max_tokens=8)  # the miss, then paid afresh
        committed = lab.budget.state().committed_atomic
        assert committed == 2 * MIN_ATOMIC  # the refused one is held
        assert hostile.settle_refused() == [200]  # the server takes the one it refused
    changed = lab.reconcile()
    assert changed[["before", "after"]].values.tolist() == [["rejected", "settled"]]
    assert "settled on chain after all" in changed["note"].iloc[0]
    # One request settled twice (the attack), and the ledger now says so, tx hashes and all.
    rows = lab.ledger.rows()
    assert [r["status"] for r in rows] == ["settled", "settled"]
    assert not any(r["held"] for r in rows)
    assert {r["tx_hash"] for r in rows} == {t.tx_hash for t in emulator.chain.transfers()}
    assert lab.budget.state().committed_atomic == committed  # it was counted all along
    assert lab.budget.state().settled_atomic == 2 * MIN_ATOMIC


@pytest.fixture
def held_then_paid(start, lab_on, tmp_path):
    """``held_then_paid(chain=...)``: a budget of two minimum charges, full: a chat's refused
    prepayment (held, kept by the server) and its fresh challenge paid; then the server
    forwards everything as it is. The ledger's clock is the test's (``clock[0]``)."""
    with contextlib.ExitStack() as stack:

        def _make(*, chain: bool):
            emulator = start()
            clock = [time.time()]
            hostile = stack.enter_context(hostile_server(emulator.gateway_url))
            hostile.attack(refuse_prepayments=True)
            through = _through(hostile, emulator)
            if not chain:
                through.chain_url = None
            budget = xl.Budget(usd=2 * MIN_ATOMIC / 1e6, name="late")
            ledger = xl.Ledger(tmp_path / "late.sqlite", now=lambda: clock[0])
            lab = lab_on(through, budget=budget, ledger=ledger)
            lab.quote("POST", CHAT, chat_body("first", model=CHAT_MODEL, max_tokens=8))
            lab.chat("first", model=CHAT_MODEL, max_tokens=8)
            assert lab.budget.state().held_atomic == MIN_ATOMIC
            hostile.attacks.clear()
            return emulator, hostile, lab, clock

        yield _make


def _past_the_window(clock) -> None:
    """The ledger's clock past every window signed so far and the clock slack."""
    clock[0] = time.time() + 3600


def test_a_held_authorization_the_server_settles_late_is_never_freed_by_the_clock(
    held_then_paid,
):
    emulator, hostile, lab, clock = held_then_paid(chain=True)
    assert hostile.settle_refused() == [200]  # settled inside its window, unseen by the lab
    _past_the_window(clock)
    # The window has passed by the clock, but the chain says the nonce was used: it stays
    # counted (now settled), so nothing more is signed.
    signed_before = len(hostile.payments)
    with pytest.raises(xl.BudgetExceeded):
        lab.chat("second", model=CHAT_MODEL, max_tokens=8)
    assert len(hostile.payments) == signed_before
    settled = sum(t.amount_atomic for t in emulator.chain.transfers())
    assert settled == 2 * MIN_ATOMIC == lab.budget.state().settled_atomic
    assert [r["status"] for r in lab.ledger.rows() if r["prepaid"]] == ["settled"]
    _committed_within(lab, 2 * MIN_ATOMIC)


def test_a_held_authorization_past_its_window_is_freed_only_when_the_chain_says_unused(
    held_then_paid,
):
    emulator, hostile, lab, clock = held_then_paid(chain=True)
    with pytest.raises(xl.BudgetExceeded):  # inside its window: held, nothing asked
        lab.chat("second", model=CHAT_MODEL, max_tokens=8)
    _past_the_window(clock)
    # The budget is short, so the chain is asked about the held row past its window: its
    # nonce is unused, so it is freed (expired) and the call is paid.
    lab.chat("third", model=CHAT_MODEL, max_tokens=8)
    rows = lab.ledger.rows()
    assert rows[0]["prepaid"] and rows[0]["status"] == "expired" and not rows[0]["held"]
    assert [r["status"] for r in rows].count("settled") == 2
    assert hostile.valid_atomic(now=clock[0]) <= 2 * MIN_ATOMIC
    assert sum(t.amount_atomic for t in emulator.chain.transfers()) == 2 * MIN_ATOMIC
    _committed_within(lab, 2 * MIN_ATOMIC)
    check_money(lab, emulator.chain)


def test_without_a_chain_a_held_authorization_stays_counted_past_its_window(held_then_paid):
    _, hostile, lab, clock = held_then_paid(chain=False)
    _past_the_window(clock)
    signed_before = len(hostile.payments)
    with pytest.raises(xl.BudgetExceeded):
        lab.chat("second", model=CHAT_MODEL, max_tokens=8)
    assert len(hostile.payments) == signed_before
    assert lab.budget.state().held_atomic == MIN_ATOMIC

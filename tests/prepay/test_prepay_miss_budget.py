"""A prepay miss never blocks the paid retry of the same request for lack of budget: near
the cap, the miss's hold gives way to the fresh payment of the same request."""

from __future__ import annotations

import pytest
from support.prepay import MIN_ATOMIC, chat, check_money, restart

import x402lab as xl
from x402lab.payments.prediction import PREPAY_REFUSED


def test_the_fresh_payment_after_a_miss_fits_a_budget_that_holds_the_request_once(start, lab_on):
    emulator = start()
    fresh = 2 * MIN_ATOMIC
    # Room for two learning chats and the one request at its new price, not for its miss too.
    lab = lab_on(emulator, budget=xl.Budget(usd=(2 * MIN_ATOMIC + fresh) / 1e6, name="tight"))
    for i in range(2):
        assert not chat(lab, f"learn {i}").cost.prepaid
    emulator = restart(emulator, min_charge_usd=fresh / 1e6)
    start.keep(emulator)
    result = chat(lab, "after the change")  # the miss, then the fresh challenge: paid
    assert result.cost.amount_atomic == fresh and not result.cost.prepaid
    rows = check_money(lab, emulator.chain)
    refused, paid = rows[-2], rows[-1]
    assert (
        refused["error"].startswith(PREPAY_REFUSED)
        and refused["request_key"] == (paid["request_key"])
    )
    assert paid["status"] == "settled"
    state = lab.budget.state()
    assert state.held_atomic == 0 and state.committed_atomic == 2 * MIN_ATOMIC + fresh
    # The budget is spent: the next request is refused before anything is signed.
    with pytest.raises(xl.BudgetExceeded):
        chat(lab, "one more")

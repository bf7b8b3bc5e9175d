"""A prepay miss keeps counting: the server refused the payment sent with the first request,
but it holds that valid authorization and could still settle it (money rule 4). Near the cap
the fresh challenge of the same request is refused with BudgetExceeded, nothing more signed;
with room for both it is paid."""

from __future__ import annotations

import pytest
from support.prepay import MIN_ATOMIC, chat, check_money, restart

import x402lab as xl
from x402lab.payments.prediction import PREPAY_REFUSED


def test_the_fresh_payment_after_a_miss_is_paid_only_with_room_for_both(start, lab_on):
    emulator = start()
    fresh = 2 * MIN_ATOMIC
    # Room for two learning chats and the one request at its new price, not for its miss too.
    lab = lab_on(emulator, budget=xl.Budget(usd=(2 * MIN_ATOMIC + fresh) / 1e6, name="tight"))
    for i in range(2):
        assert not chat(lab, f"learn {i}").cost.prepaid
    emulator = restart(emulator, min_charge_usd=fresh / 1e6)
    start.keep(emulator)
    with pytest.raises(xl.BudgetExceeded, match="stays held") as refused_fresh:
        chat(lab, "after the change")  # the miss is held: no room for the fresh challenge
    assert "0.01 USD of 0.04 USD" in str(refused_fresh.value)
    rows = check_money(lab, emulator.chain)
    miss, refused = rows[-2], rows[-1]
    assert miss["error"].startswith(PREPAY_REFUSED) and miss["held"]
    assert refused["status"] == "refused" and refused["nonce"] is None  # never signed
    assert miss["request_key"] == refused["request_key"]
    state = lab.budget.state()
    assert state.held_atomic == MIN_ATOMIC and state.committed_atomic == 3 * MIN_ATOMIC
    assert len(emulator.chain.transfers()) == 2

    # With room for both, the same miss is followed by the fresh payment, paid once.
    roomy = lab_on(emulator, budget=xl.Budget(usd=1.0, name="roomy"))
    for i in range(2):
        chat(roomy, f"learn again {i}")
    emulator = restart(emulator, min_charge_usd=3 * MIN_ATOMIC / 1e6)
    start.keep(emulator)
    result = chat(roomy, "after another change")
    assert result.cost.amount_atomic == 3 * MIN_ATOMIC and not result.cost.prepaid
    state = roomy.budget.state()
    assert state.held_atomic == fresh  # its miss, at the price it predicted
    assert state.committed_atomic == 2 * fresh + fresh + 3 * MIN_ATOMIC

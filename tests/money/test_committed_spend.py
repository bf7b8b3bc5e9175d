"""One definition of committed spend, end to end: after a settled, a rejected (held), an
unknown and a released payment, ``lab.spend()`` and ``lab.budget.state()`` agree."""

from __future__ import annotations

import pytest

import x402lab as xl
from x402lab.ledger import PaymentMeta

CHAT_MODEL = "zai-org-glm-4.7-flash"
PROMPT = "Say something short about ledgers."


def committed(lab) -> tuple[int, int]:
    """(spend()'s committed_atomic of the lab's budget, budget.state()'s)."""
    table = lab.spend(by="budget", atomic=True).set_index("budget")
    name = lab.budget.name
    from_spend = int(table.loc[name, "committed_atomic"]) if name in table.index else 0
    return from_spend, lab.budget.state().committed_atomic


def test_spend_and_budget_agree_after_every_outcome(start, lab_for):
    budget = xl.Budget(usd=5.0, name="team")
    fine = lab_for(start(), budget=budget)
    assert fine.chat(PROMPT, model=CHAT_MODEL, max_tokens=16).cost.status == "settled"
    settled = fine.budget.state().settled_atomic
    assert settled > 0 and committed(fine) == (settled, settled)

    refusing = lab_for(start(settle_fail_rate=1.0), budget=xl.Budget(usd=5.0, name="team"))
    # The same request on the same ledger is a stored answer: rebuy=True pays again.
    with pytest.raises(xl.PaymentRejected):
        refusing.chat(PROMPT, model=CHAT_MODEL, max_tokens=16, rebuy=True)
    state = refusing.budget.state()
    assert state.held_atomic > 0  # signed and refused: it counts until it expires
    assert committed(refusing) == (state.committed_atomic, state.committed_atomic)
    held = refusing.spend(by=(), atomic=True)
    assert int(held["held_count"].iloc[0]) == 1
    assert int(held["held_atomic"].iloc[0]) == state.held_atomic

    losing = lab_for(start(paid_then_500_rate=1.0), budget=xl.Budget(usd=5.0, name="team"))
    with pytest.raises(xl.SettlementUnknown):
        losing.chat(PROMPT, model=CHAT_MODEL, max_tokens=16, rebuy=True)
    state = losing.budget.state()
    assert state.unknown_atomic > 0
    assert committed(losing) == (state.committed_atomic, state.committed_atomic)

    # A reservation given back unsigned counts while held and not after.
    row = losing.ledger.reserve(
        budget="team",
        cap_atomic=budget.cap_atomic,
        amount_atomic=7_000,
        meta=PaymentMeta(service="gateway", path="/api/v1/chat/completions"),
    )
    before = losing.budget.state().committed_atomic
    assert committed(losing) == (before, before)
    losing.ledger.release(row, "given back")
    after = losing.budget.state().committed_atomic
    assert after == before - 7_000
    assert committed(losing) == (after, after)
    assert sorted(r["status"] for r in losing.ledger.rows()) == [
        "rejected",
        "released",
        "settled",
        "unknown",
    ]

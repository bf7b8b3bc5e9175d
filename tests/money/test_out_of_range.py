"""A challenge asking an amount no ledger can hold (26 digits) is a typed refusal with a
``refused`` row, before anything is signed: never a raw OverflowError from the database."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from support.hostile import hostile_server
from support.prepay import CHAT_MODEL

import x402lab as xl


@pytest.mark.parametrize("per_call_usd", [1.0, None], ids=["capped", "no per-call cap"])
def test_an_amount_of_26_digits_is_refused_with_a_refused_row(start, lab_for, per_call_usd):
    emulator = start()
    with hostile_server(emulator.gateway_url) as hostile:
        hostile.attack(challenge={"amount": "1" * 26})
        service = SimpleNamespace(gateway_url=hostile.url, reports_url=emulator.reports_url)
        lab = lab_for(service, xl.Budget(usd=5.0, per_call_usd=per_call_usd))
        with pytest.raises(xl.PaymentRefused, match="amount of 26 digits is out of range"):
            lab.chat("hello", model=CHAT_MODEL, max_tokens=8)
        (row,) = lab.ledger.rows()
        assert row["status"] == "refused" and row["nonce"] is None
        assert "26 digits" in row["error"]
        assert hostile.payments == [] and emulator.chain.transfers() == []
        assert lab.budget.state().committed_atomic == 0

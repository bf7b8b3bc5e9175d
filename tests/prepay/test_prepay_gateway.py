"""Paying the gateway with the first request (issue 16), end to end against the emulator.

A price class is predicted after two identical 402s (every chat under the minimum charge is
one class), a fresh ``estimate`` pays each row up front, and a stale prediction (the operator
changed the price or the payee: the emulator restarted on the same address with other
settings) is refused by a 402, recorded ``rejected``/``prepay_refused`` and held, and the
fresh challenge is paid once: never a second settlement. Requests are counted at the
emulator's payment gate; every test ends with the chain and the ledger agreeing.
"""

from __future__ import annotations

import pytest
from support.prepay import CHAT, CHAT_MODEL, MIN_ATOMIC, chat, check_money, gate, restart

import x402lab as xl
from x402lab.batch import BatchSummary
from x402lab.gateway.paid import request_key
from x402lab.gateway.text import chat_body
from x402lab.payments import CallInfo
from x402lab.payments.prediction import PREPAY_REFUSED

OTHER_PAYEE = "0x000000000000000000000000000000000000dEaD"
PRICIER = "zai-org-glm-5-2"  # 8000 output tokens cost more than the minimum charge


def _learn(lab, emulator, n: int = 2) -> None:
    """Two chats under the minimum charge: two handshakes, and the class is known."""
    for i in range(n):
        assert not chat(lab, f"learn {i}").cost.prepaid
    assert gate(emulator.gateway_url)["requests"] == 2 * n


def test_chats_under_the_minimum_are_paid_with_their_first_request(start, lab_on):
    emulator = start()
    lab = lab_on(emulator)
    _learn(lab, emulator)
    for i in range(4):
        result = chat(lab, f"then {i}")
        assert result.cost.prepaid and result.cost.amount_atomic == MIN_ATOMIC
    counters = gate(emulator.gateway_url)
    assert counters["requests"] == 4 + 4  # one request each once the class is known
    assert counters["challenges"] == 2 and counters["settled"] == 6
    rows = check_money(lab, emulator.chain)
    assert [r["prepaid"] for r in rows] == [False, False, True, True, True, True]
    assert all(r["status"] == "settled" for r in rows)
    assert len(emulator.chain.transfers()) == 6


def test_prepay_false_always_asks_for_the_402_first(start, lab_on):
    emulator = start()
    lab = lab_on(emulator, prepay=False)
    for i in range(4):
        assert not chat(lab, f"hello {i}").cost.prepaid
    assert gate(emulator.gateway_url)["requests"] == 8
    rows = check_money(lab, emulator.chain)
    assert not any(r["prepaid"] for r in rows) and len(rows) == 4


def test_an_estimate_pays_each_row_of_the_batch_with_its_first_request(start, lab_on):
    emulator = start()
    lab = lab_on(emulator)
    # Above the minimum and each of another size: no price class, only the estimate's 402s.
    prompts = [f"question {'x' * 40 * i}" for i in range(12)]
    estimate = lab.estimate(prompts, model=PRICIER, max_tokens=8000)
    quoted = estimate.rows["quoted_usd"].tolist()
    assert len(set(quoted)) > 1 and min(quoted) > MIN_ATOMIC / 1e6
    assert gate(emulator.gateway_url)["requests"] == 12
    frame = lab.batch_chat(prompts, model=PRICIER, max_tokens=8000, progress=None)
    summary = BatchSummary.of(frame)
    assert set(frame["status"]) == {"ok"}
    assert (summary.prepay_hits, summary.prepay_misses, summary.extra_signatures) == (12, 0, 0)
    assert gate(emulator.gateway_url)["requests"] == 12 + 12  # one per row
    assert frame["paid_usd"].tolist() == quoted
    # A re-run pays nothing and sends nothing paid.
    again = lab.batch_chat(prompts, model=PRICIER, max_tokens=8000, progress=None)
    assert set(again["status"]) == {"cached"} and again.attrs["batch"]["prepay_hits"] == 0
    assert gate(emulator.gateway_url)["requests"] == 24
    rows = check_money(lab, emulator.chain)
    assert len(rows) == 12 and all(r["prepaid"] and r["status"] == "settled" for r in rows)


@pytest.mark.parametrize(
    ("new_minimum", "case"), [(0.02, "lower"), (0.005, "higher")], ids=["lower", "higher"]
)
def test_a_stale_predicted_price_is_refused_and_the_fresh_one_paid_once(
    start, lab_on, new_minimum, case
):
    emulator = start()
    lab = lab_on(emulator)
    _learn(lab, emulator)
    # The operator changes the minimum charge: the lab's prediction is now stale (lower or
    # higher than the price), and its cached price list too.
    emulator = restart(emulator, min_charge_usd=new_minimum)
    start.keep(emulator)
    fresh = round(new_minimum * 1e6)
    result = chat(lab, "after the change")
    assert result.cost.amount_atomic == fresh and not result.cost.prepaid
    rows = check_money(lab, emulator.chain)
    refused, paid = rows[-2], rows[-1]
    assert refused["prepaid"] and refused["status"] == "rejected"
    assert refused["error"].startswith(PREPAY_REFUSED) and refused["held"]
    assert refused["amount_atomic"] == MIN_ATOMIC
    assert paid["status"] == "settled" and not paid["prepaid"] and paid["amount_atomic"] == fresh
    assert refused["request_key"] == paid["request_key"]
    assert [t.amount_atomic for t in emulator.chain.transfers()][-1] == fresh
    assert len(emulator.chain.transfers()) == 3  # never the refused one
    # The refused authorization counts against the budget until it expires.
    assert lab.budget.state().held_atomic == MIN_ATOMIC
    # The class was forgotten: two handshakes at the new price, then one request again.
    counters_before = gate(emulator.gateway_url)["requests"]
    chat(lab, "relearn 1")
    assert chat(lab, "relearn 2").cost.prepaid
    assert gate(emulator.gateway_url)["requests"] - counters_before == 3
    assert lab.ledger.rows()[-1]["amount_atomic"] == fresh
    check_money(lab, emulator.chain)


def test_a_changed_payee_is_refused_by_the_server_and_then_by_the_pin(start, lab_on):
    emulator = start()
    lab = lab_on(emulator)
    _learn(lab, emulator)
    emulator = restart(emulator, pay_to=OTHER_PAYEE)
    start.keep(emulator)
    with pytest.raises(xl.PaymentRefused, match="pinned payee"):
        chat(lab, "to whom")
    rows = check_money(lab, emulator.chain)
    refused_by_server, refused_by_us = rows[-2], rows[-1]
    assert refused_by_server["status"] == "rejected" and refused_by_server["prepaid"]
    assert refused_by_server["error"].startswith(PREPAY_REFUSED) and refused_by_server["held"]
    assert refused_by_us["status"] == "refused" and refused_by_us["nonce"] is None
    assert len(emulator.chain.transfers()) == 2  # only the two learning calls


def test_a_predicted_price_above_the_cap_is_refused_before_anything_is_sent(start, lab_on):
    emulator = start()
    lab = lab_on(emulator, budget=xl.Budget(usd=0.025, name="tight"))
    _learn(lab, emulator)
    with pytest.raises(xl.PaymentRefused, match="per-call cap"):
        chat(lab, "capped", max_usd=0.005)
    with pytest.raises(xl.BudgetExceeded):
        chat(lab, "over budget")
    assert gate(emulator.gateway_url)["requests"] == 4  # neither was sent
    rows = check_money(lab, emulator.chain)
    assert [(r["status"], r["prepaid"]) for r in rows[-2:]] == [("refused", True)] * 2
    assert all(r["nonce"] is None for r in rows[-2:])  # nothing signed


def test_a_resumed_unclear_payment_refused_by_the_server_is_never_signed_again(start, lab_on):
    # A request whose earlier payment left with no clear answer (its row ``unknown``) sends
    # that same payload again on its first request; if the server refuses it (the price
    # changed), that earlier send may still have settled: nothing new is signed, and the row
    # stays ``unknown`` (counted, left to reconciliation) rather than called refused.
    emulator = start()
    lab = lab_on(emulator)
    _learn(lab, emulator)
    body = chat_body("unclear", model=CHAT_MODEL, max_tokens=8)
    key = request_key("POST", CHAT, body)
    client = lab.async_.session.client("gateway")
    challenge = xl.run(client.probe("POST", CHAT, json=body))
    ticket = lab.payer.prepare(challenge, CallInfo("gateway", "POST", CHAT, CHAT_MODEL, key))
    lab.ledger.record_unknown(ticket.row_id, "sent, no answer (this test)")
    emulator = restart(emulator, min_charge_usd=0.02)
    start.keep(emulator)
    with pytest.raises(xl.SettlementUnknown):
        chat(lab, "unclear")
    rows = [r for r in check_money(lab, emulator.chain) if r["request_key"] == key]
    assert [(r["status"], r["nonce"] == ticket.nonce) for r in rows] == [("unknown", True)]
    assert len(emulator.chain.transfers()) == 2  # the two learning calls only

"""Re-send, never re-sign: after an ambiguous answer to a paid request the same request goes
again with the same signed payload (same nonce), against the emulator with faults on.

Each test checks the money rules of docs/money.md on the emulator's chain: one transfer
per settled row, with that row's nonce; no request key paid twice; a re-send is counted in
the ledger's ``resends`` and never writes a second row."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from support.outcomes import CHAT, CHAT_MODEL, FAST, KEY, chat_body, transfers_by_nonce

import x402lab as xl
from x402lab.errors import AnswerLost


def _check_money(lab, emulator, *, once_per_key: bool = True) -> dict[str, object]:
    """Every transfer on the chain is a settled row with its nonce, and the other way round;
    no request key settled twice (unless bought again on purpose). Returns the transfers by
    nonce."""
    rows = lab.ledger.rows()
    chain = transfers_by_nonce(emulator)
    settled = {r["nonce"].lower(): r for r in rows if r["status"] == "settled"}
    assert set(chain) == set(settled)
    for nonce, row in settled.items():
        assert row["amount_atomic"] == chain[nonce].amount_atomic
        assert row["tx_hash"] is None or row["tx_hash"] == chain[nonce].tx_hash
    keys = Counter(r["request_key"] for r in settled.values())
    assert not once_per_key or all(count == 1 for count in keys.values())
    nonces = [r["nonce"] for r in rows if r["nonce"]]
    assert len(nonces) == len(set(nonces))  # a re-send is never a second row
    return chain


def test_a_5xx_after_the_payment_left_is_sent_again_with_the_same_nonce(start, lab_for):
    emulator = start(seed=3, rate_5xx=0.4)
    lab = lab_for(emulator)
    answered = 0
    for index in range(12):
        try:
            lab.chat(f"Sent again {index}", model=CHAT_MODEL, max_tokens=8)
            answered += 1
        except xl.ApiError:
            pass  # the unpaid phase ran out of retries: nothing was signed
    rows = lab.ledger.rows()
    resent = [r for r in rows if r["resends"] > 0]
    assert resent, "some paid sends met a 503"
    assert all(r["status"] == "settled" and r["resolved_by"] == "resend" for r in resent)
    chain = _check_money(lab, emulator)
    assert answered == len(chain) == sum(r["status"] == "settled" for r in rows)


def test_a_429_after_the_payment_left_is_sent_again_after_retry_after(start, lab_for):
    emulator = start(seed=5, rate_429=0.4, retry_after_s=0.05)
    lab = lab_for(emulator)
    for index in range(10):
        try:
            lab.chat(f"Rate limited {index}", model=CHAT_MODEL, max_tokens=8)
        except xl.RateLimited:
            pass  # the unpaid phase gave up: nothing was signed
    rows = lab.ledger.rows()
    assert any(r["resends"] for r in rows)
    assert {r["status"] for r in rows} == {"settled"}
    _check_money(lab, emulator)


def test_paid_then_500_is_answered_lost_and_settled_from_the_chain(start, lab_for):
    emulator = start(paid_then_500_rate=1.0)
    lab = lab_for(emulator)
    with pytest.raises(AnswerLost, match="answer was lost") as info:
        lab.chat("Lost answer", model=CHAT_MODEL, max_tokens=8)
    [row] = lab.ledger.rows()
    [transfer] = emulator.chain.transfers()
    # The re-send carried the same authorization: the chain has one transfer, its nonce.
    assert row["nonce"].lower() == transfer.nonce.lower()
    assert row["status"] == "settled" and row["resolved_by"] == "chain"
    assert row["tx_hash"] == transfer.tx_hash == info.value.details["tx_hash"]
    assert row["resends"] == 1 and "answer was lost" in row["error"]
    assert info.value.details["settled"] is True
    assert isinstance(info.value, xl.SettlementUnknown)  # never paid again on its own
    assert lab.budget.state().settled_atomic == transfer.amount_atomic


def test_without_a_chain_a_lost_answer_stays_unknown_until_reconciled(start, lab_for):
    emulator = start(paid_then_500_rate=1.0)
    lab = lab_for(emulator, chain=False)
    with pytest.raises(AnswerLost, match="may or may not have settled") as info:
        lab.chat("Lost, no chain", model=CHAT_MODEL, max_tokens=8)
    assert info.value.details["settled"] is False
    [row] = lab.ledger.rows()
    assert row["status"] == "unknown" and "nonce already used" in row["error"]
    assert lab.budget.state().unknown_atomic == row["amount_atomic"]
    # The same request again is not paid again on its own (it may have settled)...
    with pytest.raises(xl.SettlementUnknown, match="not paid again on its own") as again:
        lab.chat("Lost, no chain", model=CHAT_MODEL, max_tokens=8)
    assert not isinstance(again.value, AnswerLost) and len(lab.ledger.rows()) == 1
    # ...rebuy=True is a new purchase: its spent payload is not sent a third time.
    with pytest.raises(AnswerLost):
        lab.chat("Lost, no chain", model=CHAT_MODEL, max_tokens=8, rebuy=True)
    assert len(lab.ledger.rows()) == 2
    # A Lab with the chain reconciles both: settled, with the chain's tx hashes.
    done = lab_for(emulator).reconcile()
    assert sorted(done["after"]) == ["settled", "settled"]
    assert set(done["before"]) == {"unknown"}
    assert set(done["tx_hash"]) == {t.tx_hash for t in emulator.chain.transfers()}
    _check_money(lab, emulator, once_per_key=False)  # asked twice: bought twice


def test_a_timeout_is_sent_again_and_never_signed_again(start, lab_for):
    # The first send settles and then sits 2 s at the server; the client gives up after 1 s
    # and sends the same payload again: "nonce already used", confirmed on the chain.
    emulator = start(paid_latency_s=2.0)
    lab = lab_for(emulator, timeout_s=1.0)
    with pytest.raises(AnswerLost):
        lab.chat("Slow answer", model=CHAT_MODEL, max_tokens=8)
    [row] = lab.ledger.rows()
    assert row["status"] == "settled" and row["resends"] >= 1
    _check_money(lab, emulator)


def test_the_window_closing_leaves_unknown_for_reconciliation(start, lab_for):
    # Backoff longer than the authorization's window: no re-send fits, the row is unknown.
    emulator = start(paid_latency_s=1.5)
    slow = xl.RetryPolicy(attempts=2, base_delay_s=400.0, max_delay_s=400.0)
    lab = lab_for(emulator, timeout_s=0.5, retry=slow)
    with pytest.raises(xl.SettlementUnknown, match="about to expire") as info:
        lab.chat("No time left", model=CHAT_MODEL, max_tokens=8)
    assert not isinstance(info.value, AnswerLost)
    [row] = lab.ledger.rows()
    assert row["status"] == "unknown" and row["resends"] == 0
    time.sleep(2.0)  # the server settles the first send
    done = lab.reconcile()
    assert done["after"].tolist() == ["settled"]
    assert lab.ledger.rows()[0]["status"] == "settled"
    _check_money(lab, emulator)


def test_a_refusal_of_the_re_sent_payload_is_rejected_not_signed_again(start, lab_for):
    emulator = start(seed=2, rate_5xx=0.3, settle_fail_rate=0.5)
    lab = lab_for(emulator)
    outcomes = Counter()
    for index in range(14):
        try:
            lab.chat(f"Refused maybe {index}", model=CHAT_MODEL, max_tokens=8)
            outcomes["ok"] += 1
        except xl.PaymentRejected:
            outcomes["rejected"] += 1
        except xl.ApiError:
            outcomes["unpaid"] += 1
    rows = lab.ledger.rows()
    assert outcomes["rejected"] == sum(r["status"] == "rejected" for r in rows) > 0
    assert {r["status"] for r in rows} <= {"settled", "rejected"}
    _check_money(lab, emulator)


def test_cancelled_in_flight_stays_unknown_and_a_later_call_sends_the_same_payload(
    start, ledger_path
):
    emulator = start(latency_s=0.3)
    body = chat_body("Cancelled in flight")

    async def main() -> tuple[list[dict], list[dict], object]:
        alab = xl.connect_async(
            emulator.gateway_url,
            emulator.reports_url,
            wallet=xl.Wallet.from_key(KEY),
            ledger=ledger_path,
            chain_rpc_url=emulator.chain_url,
            retry=FAST,
        )
        try:
            task = asyncio.create_task(alab.call("POST", CHAT, body))
            while not [r for r in alab.ledger.rows() if r["status"] == "signed"]:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)  # the paid request is on its way
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            after_cancel = alab.ledger.rows()
            try:
                outcome: object = await alab.call("POST", CHAT, body)
            except AnswerLost as exc:  # the cancelled send reached the server and settled
                outcome = exc
            return after_cancel, alab.ledger.rows(), outcome
        finally:
            await alab.aclose()

    after_cancel, rows, outcome = asyncio.run(main())
    assert [r["status"] for r in after_cancel] == ["unknown"]
    assert "cancelled" in after_cancel[0]["error"]
    # The later call took up the same row: same nonce, no new signature.
    [row] = rows
    assert row["nonce"] == after_cancel[0]["nonce"] and row["status"] == "settled"
    [transfer] = emulator.chain.transfers()
    assert transfer.nonce.lower() == row["nonce"].lower()
    assert row["resolved_by"] in ("resend", "chain")
    assert not isinstance(outcome, AnswerLost) or outcome.details["settled"]

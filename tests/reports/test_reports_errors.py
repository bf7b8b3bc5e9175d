"""Every report service error (docs/services.md, "Report errors and limits") through lab.reports."""

from __future__ import annotations

import dataclasses
import time

import httpx
import pytest

import x402lab as xl
from x402lab.errors import (
    ApiError,
    BudgetExceeded,
    NotFound,
    PaymentRefused,
    PaymentRejected,
    SettlementUnknown,
)
from x402lab.ledger import ReportLibrary
from x402lab.payments import CallInfo, Payer
from x402lab.reports.errors import explain
from x402lab.x402.codec import decode_header, encode_header
from x402lab.x402.models import normalize_challenge
from x402lab.x402.signing import new_nonce, sign_payment

UNIT = 10_000
REPORTS = "/api/intel/reports"


def _orders(lab):
    return ReportLibrary(lab.ledger, lab.reports_url).orders()


def test_range_without_ids_or_bounds_is_the_services_400(lab, payments):
    for call in (lab.reports.quote, lab.reports.buy):
        with pytest.raises(ApiError) as info:
            call("solarmoth", select="range")
        assert info.value.status == 400
        assert info.value.code == "range_requires_from_to_or_ids"
        assert "needs ids=[...], from_=... or to=..." in str(info.value)
    assert payments(lab) == []


def test_a_range_that_matches_nothing_is_not_found(lab, payments):
    for kwargs in ({"ids": ["rpt_0000000000000000"]}, {"from_": "2100-01-01"}):
        for call in (lab.reports.quote, lab.reports.buy):
            with pytest.raises(NotFound) as info:
                call("solarmoth", **kwargs)
            assert info.value.status == 404
            assert info.value.code == "no_matching_reports"
            assert "no report of @solarmoth matches" in str(info.value)
    assert payments(lab) == []
    assert _orders(lab) == []


def test_an_unknown_handle_is_not_found(lab, payments):
    for call in (lab.reports.menu, lab.reports.quote, lab.reports.buy):
        with pytest.raises(NotFound) as info:
            call("nobody_here")
        assert info.value.status == 404
        assert "@nobody_here is not on the report shelf" in str(info.value)
    assert payments(lab) == []


def test_bad_arguments_are_refused_before_any_request(lab):
    with pytest.raises(xl.ConfigError, match="select='all' takes no ids"):
        lab.reports.buy("solarmoth", select="all", ids=["x"])
    with pytest.raises(xl.ConfigError, match="'all' or 'range'"):
        lab.reports.quote("solarmoth", select="some")
    with pytest.raises(xl.ConfigError, match="library_secret"):
        lab.reports.buy("solarmoth", first_party=True)


def test_settlement_not_configured_is_a_clear_501(emulator_factory, lab_for, payments):
    lab = lab_for(emulator_factory(settlement_configured=False))
    assert len(lab.reports.menu("solarmoth")) == 3  # the free routes still work
    for call in (lab.reports.quote, lab.reports.buy):
        with pytest.raises(ApiError) as info:
            call("solarmoth")
        assert info.value.status == 501
        assert "payments are not configured on this deployment" in str(info.value)
    assert payments(lab) == []
    assert lab.reports.library().empty
    assert [o["status"] for o in _orders(lab)] == ["failed"]


def test_a_reused_payment_id_is_rejected_and_the_library_stays_intact(
    emulator, lab_for, tmp_path, chain_view, payments
):
    wallet = xl.Wallet.create()
    first = lab_for(emulator, wallet=wallet, ledger=tmp_path / "a.sqlite")
    first.reports.buy("solarmoth")
    used = payments(first)[0]["nonce"]

    # The same wallet on another ledger signs its second payment with that same nonce:
    # Payer takes its nonce source as an argument, so no patching is needed.
    second = lab_for(emulator, wallet=wallet, ledger=tmp_path / "b.sqlite")
    calls = []

    def nonce_source() -> str:
        calls.append(1)
        return used if len(calls) == 2 else new_nonce()

    second.async_.session.payer = Payer(
        wallet, xl.Budget(usd=5.0), second.ledger, new_nonce=nonce_source
    )
    owned = second.reports.buy("quantquill")
    assert owned.paid_atomic == 4 * UNIT
    library_before = second.reports.library()
    chain_before = chain_view(emulator)

    # Our nonce was already used: from this ledger's side an earlier send of the same
    # payment may have settled it, so the purchase is unknown, never silently refused.
    with pytest.raises(SettlementUnknown) as info:
        second.reports.buy("ledgerlark")
    text = str(info.value)
    assert "payment_already_used" in text and "HTTP 409" in text
    assert "the library is unchanged" in text and "rebuy=True" in text
    assert info.value.details["status"] == 409
    assert chain_view(emulator) == chain_before
    rows = payments(second)
    assert [r["status"] for r in rows] == ["settled", "unknown"]
    assert rows[-1]["nonce"] == used
    assert info.value.details["ledger_id"] == rows[-1]["id"]
    # The library is intact; the unclear purchase is not paid again on its own.
    assert second.reports.library().equals(library_before)
    assert [o["status"] for o in _orders(second)] == ["done", "unknown"]
    with pytest.raises(xl.X402LabError, match="does not pay for the same reports twice"):
        second.reports.buy("ledgerlark")
    bought = second.reports.buy("ledgerlark", rebuy=True)
    assert bought.paid_atomic == 5 * UNIT
    assert len(second.reports.library()) == 4 + 5
    assert second.reports.buy("quantquill").paid_atomic == 0


def test_a_replayed_payment_header_gets_409_from_the_service(emulator, lab, chain_view):
    lab.reports.buy("solarmoth")
    library_before = lab.reports.library()
    # Pay once by hand, with a payment signed by x402lab.x402.signing, then replay it.
    url = f"{emulator.reports_url}{REPORTS}"
    params = {"username": "ledgerlark", "select": "all"}
    challenge_402 = httpx.get(url, params=params)
    assert challenge_402.status_code == 402
    body = challenge_402.json()
    assert body["extensions"]["reportCount"] == 5  # the service's own 402 body
    assert body["accepts"][0]["amount"] == str(5 * UNIT)
    challenge = normalize_challenge(decode_header(challenge_402.headers["payment-required"]))
    payload = sign_payment(
        challenge, challenge.accepts[0], lab.wallet.signer, now=int(time.time()), nonce=new_nonce()
    )
    header = {"X-402-Payment": encode_header(payload.to_wire())}
    paid = httpx.get(url, params=params, headers=header)
    assert paid.status_code == 200 and paid.json()["chargedUsd"] == 0.05
    after_first = chain_view(emulator)
    replay = httpx.get(url, params=params, headers=header)
    assert replay.status_code == 409
    assert replay.json()["error"] == "payment_already_used"
    assert chain_view(emulator) == after_first
    assert lab.reports.library().equals(library_before)
    assert lab.reports.buy("solarmoth").paid_atomic == 0


def test_insufficient_payment_is_rejected_with_a_clear_reason(emulator, lab, payments):
    url = f"{emulator.reports_url}{REPORTS}"
    params = {"username": "solarmoth", "select": "all"}
    response = httpx.get(url, params=params)
    challenge = normalize_challenge(decode_header(response.headers["payment-required"]))
    # The lab's own payer signs, and records, a payment one unit short of the price.
    short = dataclasses.replace(challenge.accepts[0], amount=2 * UNIT)
    underpriced = dataclasses.replace(challenge, accepts=[short])
    call = CallInfo(service="reports", method="GET", path=REPORTS)
    ticket = lab.payer.prepare(underpriced, call)
    refused = httpx.get(url, params=params, headers={"X-402-Payment": ticket.header_value})
    assert refused.status_code == 402
    assert refused.json()["error"] == "insufficient_payment"
    with pytest.raises(PaymentRejected) as info:
        lab.payer.record(
            ticket,
            lab.payer.outcome(402, refused.headers.get("payment-response"), refused.json()),
        )
    assert payments(lab)[-1]["status"] == "rejected"
    clear = explain(info.value, "solarmoth")
    assert isinstance(clear, PaymentRejected)
    assert "was below the price (insufficient_payment)" in str(clear)
    assert clear.details == info.value.details
    assert lab.reports.buy("solarmoth").paid_atomic == 3 * UNIT


def test_budget_and_max_usd_refuse_before_signing(emulator, lab_for, chain_view, payments):
    lab = lab_for(emulator, budget=xl.Budget(usd=0.02, name="tiny"))
    before = chain_view(emulator)
    with pytest.raises(BudgetExceeded):
        lab.reports.buy("solarmoth")  # 0.03 USD
    with pytest.raises(PaymentRefused):
        lab.reports.buy("solarmoth", max_usd=0.025)
    assert chain_view(emulator) == before
    assert {r["status"] for r in payments(lab)} == {"refused"}
    assert lab.reports.library().empty
    assert [o["status"] for o in _orders(lab)] == ["failed", "failed"]
    menu = lab.reports.menu("solarmoth")
    assert lab.reports.buy("solarmoth", ids=menu.report_id[:2].tolist()).paid_atomic == 2 * UNIT


def test_an_unclear_payment_is_never_repeated_on_its_own(
    emulator_factory, lab_for, chain_view, payments
):
    emulator = emulator_factory(paid_then_500_rate=1.0)
    lab = lab_for(emulator)
    with pytest.raises(xl.SettlementUnknown):
        lab.reports.buy("solarmoth")
    assert [r["status"] for r in payments(lab)] == ["unknown"]
    assert [o["status"] for o in _orders(lab)] == ["unknown"]
    assert lab.reports.library().empty
    before = chain_view(emulator)
    with pytest.raises(PaymentRefused, match="rebuy=True"):
        lab.reports.buy("solarmoth")
    menu = lab.reports.menu("solarmoth")
    with pytest.raises(PaymentRefused):  # any overlap blocks
        lab.reports.buy("solarmoth", ids=[menu.report_id.iloc[0]])
    assert len(payments(lab)) == 1
    assert chain_view(emulator) == before
    # Asked explicitly, it pays again (and this emulator fails the answer again).
    with pytest.raises(xl.SettlementUnknown):
        lab.reports.buy("solarmoth", rebuy=True)
    assert [r["status"] for r in payments(lab)] == ["unknown", "unknown"]


def test_a_pending_order_of_another_process_blocks_a_second_payment(lab, payments):
    menu = lab.reports.menu("solarmoth")
    other = ReportLibrary(xl.Ledger(lab.ledger.path), lab.reports_url)
    other.claim("solarmoth", [menu.report_id.iloc[1]], "?select=range")
    with pytest.raises(PaymentRefused, match="still in progress"):
        lab.reports.buy("solarmoth")
    assert payments(lab) == []
    # Reports outside that order can be bought.
    assert lab.reports.buy("solarmoth", ids=[menu.report_id.iloc[0]]).paid_atomic == UNIT


def test_first_party_reads_with_the_secret_only_when_asked(
    emulator_factory, lab_for, chain_view, payments
):
    emulator = emulator_factory(library_secret="operator-secret", settlement_configured=False)
    lab = lab_for(emulator, library_secret="operator-secret")
    # By default the secret is not sent: this deployment cannot take payments, so 501.
    with pytest.raises(ApiError) as info:
        lab.reports.buy("solarmoth")
    assert info.value.status == 501
    before = chain_view(emulator)
    bought = lab.reports.buy("solarmoth", first_party=True)
    assert (bought.paid_atomic, bought.charged_usd, len(bought)) == (0, 0, 3)
    assert chain_view(emulator) == before
    assert payments(lab) == []
    library = lab.reports.library()
    assert library["first_party"].all()
    assert (library["price_atomic"] == 0).all()
    assert library["ledger_id"].isna().all()
    assert lab.reports.buy("solarmoth").paid_atomic == 0  # owned now, whatever the path


def test_a_wrong_library_secret_is_refused_without_paying(emulator_factory, lab_for, payments):
    emulator = emulator_factory(library_secret="operator-secret")
    lab = lab_for(emulator, library_secret="not-the-secret")
    with pytest.raises(ApiError, match="did not accept the library secret"):
        lab.reports.buy("solarmoth", first_party=True)
    assert payments(lab) == []
    assert lab.reports.library().empty

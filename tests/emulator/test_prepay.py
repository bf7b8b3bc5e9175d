"""Paying on the first request (x402 v2): the servers keep no challenge state.

A client that can predict the challenge (here from the discovery documents, or from the same
request on another emulator) may attach its payment to the first request: the emulator
checks it against what it would ask now and serves it, without any 402 before. A stale
prediction (an amount lower or higher, another payee or timeout, an expired authorization)
is refused with a 402 whose Payment-Required header carries the fresh challenge, and nothing
settles; paying that fresh challenge then works. The report service keeps its overpayment
rule (docs/services.md, "Buying reports"): a higher amount for the same selection is accepted.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from x402lab.emulator.settings import RECEIVER_ADDRESS
from x402lab.x402.tokens import BASE_USDC

SEARCH = "/api/v1/augment/search"
QUERY = {"query": "x402 payments"}
CHAT = "/api/v1/chat/completions"
HELLO = {
    "model": "zai-org-glm-4.7-flash",
    "max_tokens": 8,
    "messages": [{"role": "user", "content": "hi"}],
}
REPORTS = "/api/intel/reports"
ALL = {"username": "quantquill", "select": "all"}
OTHER_PAYEE = "0x000000000000000000000000000000000000dEaD"


def _predicted(base: str, amount_atomic: int) -> dict[str, Any]:
    """A challenge built from /.well-known/x402.json alone, as a client that never saw a 402
    for this request would build it."""
    [accepts] = httpx.get(f"{base}/.well-known/x402.json").json()["accepts"]
    entry = {
        **accepts,
        "amount": str(amount_atomic),
        "extra": {"name": BASE_USDC.name, "version": BASE_USDC.version},
    }
    return {"x402Version": 2, "accepts": [entry]}


def _search_price(base: str) -> int:
    routes = httpx.get(f"{base}/openapi.json").json()["info"]["x-pricing"]["routes"]
    return round(routes[SEARCH]["agentUsd"] * 1_000_000)


def _stats(base: str) -> dict[str, Any]:
    return httpx.get(f"{base}/api/x402/stats").json()["payments"]


def _fresh(response: httpx.Response, helpers, amount: int) -> dict[str, Any]:
    """The fresh challenge of a refusal: a 402 carrying it in Payment-Required."""
    challenge = helpers.challenge_of(response)
    [entry] = challenge["accepts"]
    assert entry["amount"] == str(amount)
    assert entry["payTo"] == RECEIVER_ADDRESS and entry["maxTimeoutSeconds"] == 300
    assert challenge["error"] and challenge["error"] != "PAYMENT-SIGNATURE header is required"
    return challenge


# -- gateway ------------------------------------------------------------------------------------


def test_gateway_serves_a_payment_predicted_from_its_discovery_documents(emulator, payer, helpers):
    base = emulator.gateway_url
    price = _search_price(base)
    header = payer.header(_predicted(base, price))
    response = httpx.post(f"{base}{SEARCH}", json=QUERY, headers={"PAYMENT-SIGNATURE": header})
    assert response.status_code == 200, response.text
    assert helpers.receipt_of(response)["success"] is True
    assert _stats(base)["challenges"] == 0  # no 402 was ever sent
    assert [t.amount_atomic for t in emulator.chain.transfers()] == [price]


def test_gateway_serves_a_payment_for_a_challenge_another_instance_issued(
    emulator_factory, payer, helpers
):
    # The servers keep no challenge state: a challenge from one emulator pays the identical
    # request on another that never answered it (same settings, same price).
    issuer, server = emulator_factory(), emulator_factory()
    challenge = helpers.challenge_of(httpx.post(f"{issuer.gateway_url}{CHAT}", json=HELLO))
    header = payer.header(challenge)
    response = httpx.post(
        f"{server.gateway_url}{CHAT}", json=HELLO, headers={"X-402-Payment": header}
    )
    assert response.status_code == 200, response.text
    assert _stats(server.gateway_url)["challenges"] == 0
    assert len(server.chain.transfers()) == 1 and issuer.chain.transfers() == []


STALE = {
    "lower amount": ({"amount": -1}, "invalid_payment_requirements"),
    "higher amount": ({"amount": +1}, "invalid_payment_requirements"),
    "another payee": ({"payTo": OTHER_PAYEE}, "invalid_payment_requirements"),
    "another timeout": ({"maxTimeoutSeconds": 600}, "invalid_payment_requirements"),
    "expired": ({"now": -400}, "invalid_exact_evm_payload_authorization_valid_before"),
}


def _stale_header(payer, challenge: dict[str, Any], change: dict[str, Any]) -> str:
    entry = challenge["accepts"][0]
    if "now" in change:
        return payer.header(challenge, now=time.time() + change["now"])
    if "amount" in change:
        return payer.header(
            challenge, changes={"amount": str(int(entry["amount"]) + change["amount"])}
        )
    return payer.header(challenge, changes=change)


@pytest.mark.parametrize("case", list(STALE))
def test_gateway_answers_a_stale_first_payment_with_the_fresh_challenge(
    emulator, payer, helpers, case
):
    change, reason = STALE[case]
    base = emulator.gateway_url
    price = _search_price(base)
    header = _stale_header(payer, _predicted(base, price), change)
    response = httpx.post(f"{base}{SEARCH}", json=QUERY, headers={"PAYMENT-SIGNATURE": header})
    fresh = _fresh(response, helpers, price)
    assert fresh["error"] == reason
    assert response.json()["accepts"] == fresh["accepts"]  # the body mirrors the header
    assert emulator.chain.transfers() == []
    # The fresh challenge is paid normally, once.
    paid = httpx.post(
        f"{base}{SEARCH}", json=QUERY, headers={"PAYMENT-SIGNATURE": payer.header(fresh)}
    )
    assert paid.status_code == 200, paid.text
    assert [t.amount_atomic for t in emulator.chain.transfers()] == [price]


# -- report service -------------------------------------------------------------------------------


def _report_price(base: str) -> int:
    menu = httpx.get(f"{base}{REPORTS}", params={"username": ALL["username"]}).json()
    return 10_000 * menu["reportCount"]  # unit price (0.01 USD) x N reports


def test_reports_serve_a_payment_predicted_from_the_free_menu(emulator, payer, helpers):
    base = emulator.reports_url
    price = _report_price(base)
    entry = {
        "scheme": "exact",
        "network": BASE_USDC.network,
        "asset": BASE_USDC.address,
        "amount": str(price),
        "payTo": RECEIVER_ADDRESS,
        "maxTimeoutSeconds": 300,
        "extra": {"name": BASE_USDC.name, "version": BASE_USDC.version},
    }
    header = payer.header({"x402Version": 2, "accepts": [entry]})
    response = httpx.get(f"{base}{REPORTS}", params=ALL, headers={"X-402-Payment": header})
    assert response.status_code == 200, response.text
    assert response.json()["chargedUsd"] == pytest.approx(price / 1e6)
    assert emulator.reports_app.state.gate.stats()["challenges"] == 0
    assert [t.amount_atomic for t in emulator.chain.transfers()] == [price]


@pytest.mark.parametrize("case", ["lower amount", "another payee", "expired"])
def test_reports_answer_a_stale_first_payment_with_the_fresh_challenge(
    emulator_factory, payer, helpers, case
):
    issuer, server = emulator_factory(), emulator_factory()
    challenge = helpers.challenge_of(httpx.get(f"{issuer.reports_url}{REPORTS}", params=ALL))
    price = int(challenge["accepts"][0]["amount"])
    header = _stale_header(payer, challenge, STALE[case][0])
    base = server.reports_url
    response = httpx.get(f"{base}{REPORTS}", params=ALL, headers={"X-Payment": header})
    fresh = _fresh(response, helpers, price)
    if case == "lower amount":
        assert fresh["error"] == response.json()["error"] == "insufficient_payment"
    assert server.chain.transfers() == []
    paid = httpx.get(f"{base}{REPORTS}", params=ALL, headers={"X-Payment": payer.header(fresh)})
    assert paid.status_code == 200, paid.text
    assert [t.amount_atomic for t in server.chain.transfers()] == [price]


def test_reports_accept_a_higher_first_payment_for_the_same_selection(
    emulator_factory, payer, helpers
):
    # Overpayment is accepted, settled as signed, and not reflected.
    issuer, server = emulator_factory(), emulator_factory()
    challenge = helpers.challenge_of(httpx.get(f"{issuer.reports_url}{REPORTS}", params=ALL))
    price = int(challenge["accepts"][0]["amount"])
    header = _stale_header(payer, challenge, {"amount": +5_000})
    response = httpx.get(
        f"{server.reports_url}{REPORTS}", params=ALL, headers={"X-Payment": header}
    )
    assert response.status_code == 200, response.text
    assert response.json()["chargedUsd"] == pytest.approx(price / 1e6)
    assert [t.amount_atomic for t in server.chain.transfers()] == [price + 5_000]


def test_reports_keep_a_payment_predicted_for_another_selection(emulator, payer, helpers):
    # Why a client may pay the report service up front only with a quote of the *same*
    # selection: a payment priced for a larger selection, sent with a smaller one, is
    # accepted and settled in full (docs/services.md, "Buying reports"), the difference kept.
    base = emulator.reports_url
    menu = httpx.get(f"{base}{REPORTS}", params={"username": ALL["username"]}).json()
    assert menu["reportCount"] > 1
    whole = helpers.challenge_of(httpx.get(f"{base}{REPORTS}", params=ALL))
    price_all = int(whole["accepts"][0]["amount"])
    one = {"username": ALL["username"], "select": "range", "ids": menu["reports"][0]["id"]}
    response = httpx.get(f"{base}{REPORTS}", params=one, headers={"X-Payment": payer.header(whole)})
    assert response.status_code == 200, response.text
    assert response.json()["reportCount"] == 1 and response.json()["chargedUsd"] == 0.01
    assert [t.amount_atomic for t in emulator.chain.transfers()] == [price_all]  # overpaid


def test_the_gate_counts_every_request_to_a_paid_route(emulator, payer, helpers):
    # One request for a payment sent up front, two for the usual handshake: what the prepay
    # tests count with (``requests`` in /api/x402/stats).
    base = emulator.gateway_url
    header = payer.header(_predicted(base, _search_price(base)))
    assert httpx.post(f"{base}{SEARCH}", json=QUERY, headers={"X-402-Payment": header}).is_success
    assert _stats(base)["requests"] == 1
    challenge = helpers.challenge_of(httpx.post(f"{base}{SEARCH}", json=QUERY))
    paid = httpx.post(
        f"{base}{SEARCH}", json=QUERY, headers={"X-402-Payment": payer.header(challenge)}
    )
    assert paid.is_success and _stats(base)["requests"] == 3

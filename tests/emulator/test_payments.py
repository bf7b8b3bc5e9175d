"""The payment gate over real sockets: challenge, verification, settlement, refusals."""

from __future__ import annotations

import base64
import concurrent.futures
import json
import re
import time

import httpx
import pytest

from x402lab.emulator.settings import RECEIVER_ADDRESS, EmulatorSettings
from x402lab.x402.codec import encode_header
from x402lab.x402.tokens import BASE_USDC

TX_HASH = re.compile(r"0x[0-9a-f]{64}")


def test_unpaid_request_gets_the_full_challenge_in_header_and_body(gate_server, helpers):
    server = gate_server()
    response = httpx.post(f"{server.url}/paid?price=12345")
    challenge = helpers.challenge_of(response)
    assert response.json() == challenge
    assert response.headers["cache-control"] == "no-store"
    assert challenge["x402Version"] == 2
    assert challenge["error"]
    assert challenge["resource"] == {
        "url": f"{server.url}/paid?price=12345",
        "description": "Test resource",
        "mimeType": "application/json",
        "serviceName": "x402lab test",
        "iconUrl": f"{server.url}/favicon.ico",
    }
    assert challenge["accepts"] == [
        {
            "scheme": "exact",
            "network": "eip155:8453",
            "amount": "12345",
            "asset": BASE_USDC.address,
            "payTo": RECEIVER_ADDRESS,
            "maxTimeoutSeconds": 300,
            "extra": {"name": "USD Coin", "version": "2"},
        }
    ]
    assert challenge["extensions"] == {"priceMult": 0.5}
    # Standard base64 with padding, as the SDK client decodes it.
    raw = response.headers["payment-required"]
    assert json.loads(base64.b64decode(raw, validate=True)) == challenge


@pytest.mark.parametrize("header", ["PAYMENT-SIGNATURE", "X-402-Payment", "X-Payment"])
def test_payment_in_any_header_settles_and_returns_a_receipt(gate_server, payer, helpers, header):
    server = gate_server()
    challenge = helpers.challenge_of(httpx.post(f"{server.url}/paid"))
    before = server.chain.balance_of(payer.address)
    response = httpx.post(f"{server.url}/paid", headers={header: payer.header(challenge)})
    assert response.status_code == 200, response.text
    assert response.json()["payer"] == payer.address
    receipt = helpers.receipt_of(response)
    assert receipt["success"] is True
    assert TX_HASH.fullmatch(receipt["transaction"])
    assert receipt["network"] == "eip155:8453"
    assert receipt["payer"] == payer.address
    assert receipt["amount"] == "10000"
    assert server.chain.balance_of(payer.address) == before - 10_000
    assert server.chain.received(RECEIVER_ADDRESS) == 10_000
    [transfer] = server.chain.transfers()
    assert transfer.tx_hash == receipt["transaction"]


def test_payers_start_with_the_configured_balance(gate_server, payer):
    server = gate_server(EmulatorSettings(balance_usd=2.5))
    assert server.chain.balance_of(payer.address) == 2_500_000


def _refused(server, response, reason):
    assert response.status_code == 402, response.text
    fresh = response.json()
    assert fresh["error"] == reason
    assert response.headers["payment-required"]
    assert "payment-response" not in response.headers
    assert server.chain.transfers() == []


def test_replayed_payment_is_refused_and_settles_once(gate_server, payer, helpers):
    server = gate_server()
    challenge = helpers.challenge_of(httpx.post(f"{server.url}/paid"))
    header = payer.header(challenge)
    assert httpx.post(f"{server.url}/paid", headers={"PAYMENT-SIGNATURE": header}).is_success
    again = httpx.post(f"{server.url}/paid", headers={"X-Payment": header})
    assert again.status_code == 402
    assert again.json()["error"] == "invalid_exact_evm_nonce_already_used"
    assert len(server.chain.transfers()) == 1


def test_concurrent_replays_settle_exactly_once(gate_server, payer, helpers):
    server = gate_server()
    challenge = helpers.challenge_of(httpx.post(f"{server.url}/paid"))
    header = payer.header(challenge)

    def send(_: int) -> int:
        return httpx.post(f"{server.url}/paid", headers={"PAYMENT-SIGNATURE": header}).status_code

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(send, range(16)))
    assert statuses.count(200) == 1
    assert statuses.count(402) == 15
    assert len(server.chain.transfers()) == 1


def test_underpayment_is_refused(gate_server, payer, helpers):
    server = gate_server()
    challenge = helpers.challenge_of(httpx.post(f"{server.url}/paid"))
    header = payer.header(challenge, changes={"amount": "9999"})
    response = httpx.post(f"{server.url}/paid", headers={"PAYMENT-SIGNATURE": header})
    _refused(server, response, "invalid_payment_requirements")


def test_payment_for_an_older_cheaper_price_is_refused(gate_server, payer, helpers):
    server = gate_server()
    challenge = helpers.challenge_of(httpx.post(f"{server.url}/paid?price=10000"))
    header = payer.header(challenge)
    response = httpx.post(f"{server.url}/paid?price=20000", headers={"X-Payment": header})
    _refused(server, response, "invalid_payment_requirements")
    assert response.json()["accepts"][0]["amount"] == "20000"


def test_wrong_receiver_is_refused(gate_server, payer, other_payer, helpers):
    server = gate_server()
    challenge = helpers.challenge_of(httpx.post(f"{server.url}/paid"))
    header = payer.header(challenge, changes={"payTo": other_payer.address})
    response = httpx.post(f"{server.url}/paid", headers={"PAYMENT-SIGNATURE": header})
    _refused(server, response, "invalid_payment_requirements")


def test_authorization_to_another_address_with_a_correct_echo_is_refused(
    gate_server, payer, other_payer, helpers
):
    server = gate_server()
    challenge = helpers.challenge_of(httpx.post(f"{server.url}/paid"))
    payload = payer.sign(challenge, changes={"payTo": other_payer.address})
    wire = payload.to_wire()
    wire["accepted"] = challenge["accepts"][0]  # claims the right receiver, signed another
    response = httpx.post(f"{server.url}/paid", headers={"X-Payment": encode_header(wire)})
    _refused(server, response, "invalid_exact_evm_payload_recipient_mismatch")


def test_expired_authorization_is_refused(gate_server, payer, helpers):
    server = gate_server()
    challenge = helpers.challenge_of(httpx.post(f"{server.url}/paid"))
    header = payer.header(challenge, now=time.time() - 400)  # validBefore 100 s ago
    response = httpx.post(f"{server.url}/paid", headers={"PAYMENT-SIGNATURE": header})
    _refused(server, response, "invalid_exact_evm_payload_authorization_valid_before")


def test_not_yet_valid_authorization_is_refused(gate_server, payer, helpers):
    server = gate_server()
    challenge = helpers.challenge_of(httpx.post(f"{server.url}/paid"))
    header = payer.header(challenge, now=time.time() + 3600)
    response = httpx.post(f"{server.url}/paid", headers={"PAYMENT-SIGNATURE": header})
    _refused(server, response, "invalid_exact_evm_payload_authorization_valid_after")


def test_forged_signature_is_refused(gate_server, payer, other_payer, helpers):
    server = gate_server()
    challenge = helpers.challenge_of(httpx.post(f"{server.url}/paid"))
    wire = other_payer.sign(challenge).to_wire()
    wire["payload"]["authorization"]["from"] = payer.address  # spend someone else's money
    response = httpx.post(f"{server.url}/paid", headers={"PAYMENT-SIGNATURE": encode_header(wire)})
    _refused(server, response, "invalid_exact_evm_payload_signature")
    assert server.chain.balance_of(payer.address) == 100_000_000


def test_tampered_value_is_refused(gate_server, payer, helpers):
    server = gate_server()
    challenge = helpers.challenge_of(httpx.post(f"{server.url}/paid?price=20000"))
    wire = payer.sign(challenge, changes={"amount": "10000"}).to_wire()
    wire["payload"]["authorization"]["value"] = "20000"
    wire["accepted"]["amount"] = "20000"
    response = httpx.post(
        f"{server.url}/paid?price=20000", headers={"PAYMENT-SIGNATURE": encode_header(wire)}
    )
    _refused(server, response, "invalid_exact_evm_payload_signature")


@pytest.mark.parametrize(
    "value", ["not base64!", "eyJub3QiOiAianNvbiJ9", base64.b64encode(b"[1,2]").decode()]
)
def test_malformed_payment_header_is_400(gate_server, value):
    server = gate_server()
    response = httpx.post(f"{server.url}/paid", headers={"PAYMENT-SIGNATURE": value})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_payload"
    assert server.chain.transfers() == []


def test_insufficient_balance_is_refused(gate_server, payer, helpers):
    server = gate_server(EmulatorSettings(balance_usd=0.005))
    challenge = helpers.challenge_of(httpx.post(f"{server.url}/paid"))
    response = httpx.post(f"{server.url}/paid", headers={"X-Payment": payer.header(challenge)})
    _refused(server, response, "invalid_exact_evm_insufficient_balance")
    assert server.chain.balance_of(payer.address) == 5_000


def test_test_wallet_is_the_only_payer_allowed(gate_server, payer, other_payer, helpers):
    server = gate_server(EmulatorSettings(test_wallet=payer.address))
    challenge = helpers.challenge_of(httpx.post(f"{server.url}/paid"))
    refused = httpx.post(f"{server.url}/paid", headers={"X-Payment": other_payer.header(challenge)})
    _refused(server, refused, "test_wallet_mismatch")
    ok = httpx.post(f"{server.url}/paid", headers={"X-Payment": payer.header(challenge)})
    assert ok.status_code == 200


def test_without_test_mode_payers_hold_only_what_they_were_funded(gate_server, payer, helpers):
    server = gate_server(EmulatorSettings(test_mode=False))
    challenge = helpers.challenge_of(httpx.post(f"{server.url}/paid"))
    response = httpx.post(f"{server.url}/paid", headers={"X-Payment": payer.header(challenge)})
    _refused(server, response, "invalid_exact_evm_insufficient_balance")
    server.chain.fund(payer.address, 50_000)
    response = httpx.post(f"{server.url}/paid", headers={"X-Payment": payer.header(challenge)})
    assert response.status_code == 200
    assert server.chain.balance_of(payer.address) == 40_000


def test_refusal_after_a_settled_payment_leaves_the_first_intact(gate_server, payer, helpers):
    server = gate_server()
    challenge = helpers.challenge_of(httpx.post(f"{server.url}/paid"))
    httpx.post(f"{server.url}/paid", headers={"X-Payment": payer.header(challenge)})
    expired = payer.header(challenge, now=time.time() - 1000)
    assert httpx.post(f"{server.url}/paid", headers={"X-Payment": expired}).status_code == 402
    assert server.chain.received(RECEIVER_ADDRESS) == 10_000


def test_stats_count_every_outcome(gate_server, payer, helpers):
    server = gate_server()
    challenge = helpers.challenge_of(httpx.post(f"{server.url}/paid"))
    header = payer.header(challenge)
    httpx.post(f"{server.url}/paid", headers={"X-Payment": header})
    httpx.post(f"{server.url}/paid", headers={"X-Payment": header})
    httpx.post(f"{server.url}/paid", headers={"X-Payment": "%%%"})
    stats = httpx.get(f"{server.url}/stats").json()
    assert stats["challenges"] == 1
    assert stats["verified"] == 1
    assert stats["settled"] == 1
    assert stats["settledAtomic"] == 10_000
    assert stats["refused"] == 1
    assert stats["malformed"] == 1
    assert stats["refusedByReason"] == {"invalid_exact_evm_nonce_already_used": 1}

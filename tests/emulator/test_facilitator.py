"""The stand-in facilitator, and the emulator verifying and settling through it."""

from __future__ import annotations

import socket

import httpx
import pytest

from x402lab.emulator.chain import Chain
from x402lab.emulator.facilitator import start_facilitator
from x402lab.emulator.payments import PaymentGate
from x402lab.emulator.settings import RECEIVER_ADDRESS, EmulatorSettings
from x402lab.x402.codec import encode_header

REPORTS = "/api/intel/reports"


@pytest.fixture
def facilitator():
    with start_facilitator(Chain()) as running:
        yield running


def _body(payer, gate_challenge, **sign):
    payload = payer.sign(gate_challenge, **sign).to_wire()
    return {
        "x402Version": 2,
        "paymentPayload": payload,
        "paymentRequirements": gate_challenge["accepts"][0],
    }


def _challenge(amount: int = 10_000) -> dict:
    gate = PaymentGate(EmulatorSettings(), Chain(), service="t")
    return gate.challenge(resource_url="http://x/paid", description="d", amount_atomic=amount)


def test_supported_lists_exact_on_base(facilitator):
    body = httpx.get(f"{facilitator.url}/supported").json()
    assert body["kinds"] == [{"x402Version": 2, "scheme": "exact", "network": "eip155:8453"}]
    assert "eip155:*" in body["signers"]


def test_verify_then_settle_a_good_payment(facilitator, payer):
    body = _body(payer, _challenge())
    verified = httpx.post(f"{facilitator.url}/verify", json=body)
    assert verified.status_code == 200
    assert verified.json() == {"isValid": True, "payer": payer.address}
    assert facilitator.chain.transfers() == []
    settled = httpx.post(f"{facilitator.url}/settle", json=body).json()
    assert settled["success"] is True
    assert settled["transaction"].startswith("0x") and len(settled["transaction"]) == 66
    assert settled["payer"] == payer.address
    assert facilitator.chain.received(RECEIVER_ADDRESS) == 10_000
    # The same authorization cannot settle again; the refusal is a 200, as the SDK expects.
    again = httpx.post(f"{facilitator.url}/settle", json=body)
    assert again.status_code == 200
    assert again.json()["success"] is False
    assert again.json()["errorReason"] == "invalid_exact_evm_nonce_already_used"
    reverify = httpx.post(f"{facilitator.url}/verify", json=body).json()
    assert reverify["isValid"] is False
    assert facilitator.calls.verify == 2
    assert facilitator.calls.settle == 2


def test_invalid_payments_are_200_with_is_valid_false(facilitator, payer, other_payer):
    body = _body(payer, _challenge())
    body["paymentPayload"]["payload"]["authorization"]["from"] = other_payer.address
    answer = httpx.post(f"{facilitator.url}/verify", json=body)
    assert answer.status_code == 200
    assert answer.json()["isValid"] is False
    assert answer.json()["invalidReason"] == "invalid_exact_evm_payload_signature"
    settled = httpx.post(f"{facilitator.url}/settle", json=body).json()
    assert settled == {
        "success": False,
        "transaction": "",
        "network": "eip155:8453",
        "payer": other_payer.address,
        "errorReason": "invalid_exact_evm_payload_signature",
    }
    assert facilitator.chain.transfers() == []


def test_bad_requirements_are_invalid_and_bad_bodies_are_400(facilitator, payer):
    body = _body(payer, _challenge())
    body["paymentRequirements"] = {"scheme": "exact"}
    answer = httpx.post(f"{facilitator.url}/verify", json=body).json()
    assert answer == {"isValid": False, "invalidReason": "invalid_payment_requirements"}
    assert httpx.post(f"{facilitator.url}/verify", content=b"{nope").status_code == 400
    assert httpx.post(f"{facilitator.url}/settle", json=[1]).status_code == 400


def test_emulator_settles_through_the_facilitator(emulator_factory, facilitator, payer, helpers):
    emulator = emulator_factory(facilitator_url=facilitator.url)
    params = {"username": "solarmoth", "select": "all"}
    with httpx.Client(base_url=emulator.reports_url) as client:
        challenge = helpers.challenge_of(client.get(REPORTS, params=params))
        header = payer.header(challenge)
        response = client.get(REPORTS, params=params, headers={"X-402-Payment": header})
        assert response.status_code == 200, response.text
        receipt = helpers.receipt_of(response)
        assert receipt["success"] is True
        assert facilitator.calls.verify == 1
        assert facilitator.calls.settle == 1
        sent = facilitator.calls.bodies[0]
        assert sent["x402Version"] == 2
        assert sent["paymentRequirements"] == challenge["accepts"][0]
        assert sent["paymentPayload"]["payload"]["authorization"]["from"] == payer.address
        # The money moved on the facilitator's chain, not on the emulator's own.
        price = int(challenge["accepts"][0]["amount"])
        assert facilitator.chain.received(RECEIVER_ADDRESS) == price
        assert emulator.chain.transfers() == []
        again = client.get(REPORTS, params=params, headers={"X-402-Payment": header})
        assert again.status_code == 409
        assert facilitator.chain.received(RECEIVER_ADDRESS) == price


def test_facilitator_refusals_come_back_as_402(emulator_factory, facilitator, payer, helpers):
    emulator = emulator_factory(facilitator_url=facilitator.url)
    params = {"username": "solarmoth", "select": "all"}
    with httpx.Client(base_url=emulator.reports_url) as client:
        challenge = helpers.challenge_of(client.get(REPORTS, params=params))
        expired = payer.header(challenge, now=0)
        response = client.get(REPORTS, params=params, headers={"X-Payment": expired})
    assert response.status_code == 402
    assert response.json()["error"] == "invalid_exact_evm_payload_authorization_valid_before"
    assert facilitator.calls.settle == 0
    assert facilitator.chain.transfers() == []


def test_replay_of_a_payment_settled_by_the_facilitator_elsewhere_is_refused(
    emulator_factory, facilitator, payer, helpers
):
    emulator = emulator_factory(facilitator_url=facilitator.url)
    params = {"username": "solarmoth", "select": "all"}
    with httpx.Client(base_url=emulator.reports_url) as client:
        challenge = helpers.challenge_of(client.get(REPORTS, params=params))
    payload = payer.sign(challenge)
    settled = httpx.post(
        f"{facilitator.url}/settle",
        json={
            "x402Version": 2,
            "paymentPayload": payload.to_wire(),
            "paymentRequirements": challenge["accepts"][0],
        },
    )
    assert settled.json()["success"] is True
    with httpx.Client(base_url=emulator.reports_url) as client:
        response = client.get(
            REPORTS, params=params, headers={"X-Payment": encode_header(payload.to_wire())}
        )
    assert response.status_code == 409
    assert len(facilitator.chain.transfers()) == 1


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_facilitator_refuses_and_settles_nothing(emulator_factory, payer, helpers):
    emulator = emulator_factory(facilitator_url=f"http://127.0.0.1:{_closed_port()}")
    params = {"username": "solarmoth", "select": "all"}
    with httpx.Client(base_url=emulator.reports_url) as client:
        challenge = helpers.challenge_of(client.get(REPORTS, params=params))
        response = client.get(
            REPORTS, params=params, headers={"X-Payment": payer.header(challenge)}
        )
    assert response.status_code == 402
    assert response.json()["error"] == "unexpected_verify_error"
    assert emulator.chain.transfers() == []

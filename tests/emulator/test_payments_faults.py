"""Each fault flag, caused on purpose, over real sockets."""

from __future__ import annotations

import time

import httpx
import pytest

from x402lab.emulator.settings import RECEIVER_ADDRESS, EmulatorSettings, Faults


def _settings(**faults: float) -> EmulatorSettings:
    return EmulatorSettings(faults=Faults(**faults))


def _prepaid(server, payer, helpers) -> str:
    # Take the challenge while the fault is off, then pay under the fault.
    clean = httpx.post(f"{server.url}/paid")
    return payer.header(helpers.challenge_of(clean))


def test_rate_429_answers_unpaid_and_paid_requests_with_retry_after(gate_server, payer):
    server = gate_server(_settings(rate_429=1.0, retry_after_s=2.5))
    unpaid = httpx.post(f"{server.url}/paid")
    assert unpaid.status_code == 429
    assert unpaid.headers["retry-after"] == "2.5"
    assert unpaid.json()["error"] == "rate_limited"
    # A paid request is turned away before its payment is looked at: nothing settles.
    header = payer.header(
        server.gate.challenge(resource_url=server.url, description="x", amount_atomic=10_000)
    )
    paid = httpx.post(f"{server.url}/paid", headers={"PAYMENT-SIGNATURE": header})
    assert paid.status_code == 429
    assert server.chain.transfers() == []
    assert server.gate.stats()["faults"]["rateLimited"] == 2


def test_rate_5xx_answers_503_and_settles_nothing(gate_server, payer):
    server = gate_server(_settings(rate_5xx=1.0))
    assert httpx.post(f"{server.url}/paid").status_code == 503
    header = payer.header(
        server.gate.challenge(resource_url=f"{server.url}/paid", description="x", amount_atomic=10)
    )
    paid = httpx.post(f"{server.url}/paid", headers={"X-Payment": header})
    assert paid.status_code == 503
    assert paid.json()["error"] == "service_unavailable"
    assert server.chain.transfers() == []


def test_settle_fail_gives_402_with_a_failed_receipt_and_moves_nothing(gate_server, payer, helpers):
    server = gate_server(_settings(settle_fail_rate=1.0))
    header = _prepaid(server, payer, helpers)
    response = httpx.post(f"{server.url}/paid", headers={"PAYMENT-SIGNATURE": header})
    assert response.status_code == 402
    receipt = helpers.receipt_of(response)
    assert receipt["success"] is False
    assert receipt["transaction"] == ""
    assert receipt["errorReason"] == "transaction_failed"
    assert helpers.challenge_of(response)["error"] == "transaction_failed"
    assert server.chain.transfers() == []
    assert server.chain.balance_of(payer.address) == 100_000_000


def test_failed_settlement_leaves_the_payload_reusable(gate_server, payer, helpers):
    failing = gate_server(_settings(settle_fail_rate=1.0))
    header = _prepaid(failing, payer, helpers)
    assert httpx.post(f"{failing.url}/paid", headers={"X-Payment": header}).status_code == 402
    # Same chain, healthy gate: the identical payload settles (its nonce never settled).
    healthy = gate_server(chain=failing.chain)
    response = httpx.post(f"{healthy.url}/paid", headers={"X-Payment": header})
    assert response.status_code == 200
    assert len(failing.chain.transfers()) == 1


def test_paid_then_500_settles_and_answers_500_without_body_or_receipt(gate_server, payer, helpers):
    server = gate_server(_settings(paid_then_500_rate=1.0))
    header = _prepaid(server, payer, helpers)
    response = httpx.post(f"{server.url}/paid", headers={"PAYMENT-SIGNATURE": header})
    assert response.status_code == 500
    assert response.content == b""
    assert "payment-response" not in response.headers
    assert server.chain.received(RECEIVER_ADDRESS) == 10_000
    # Re-sending the same payload cannot settle twice.
    again = httpx.post(f"{server.url}/paid", headers={"PAYMENT-SIGNATURE": header})
    assert again.status_code == 402
    assert again.json()["error"] == "invalid_exact_evm_nonce_already_used"
    assert server.chain.received(RECEIVER_ADDRESS) == 10_000


def test_latency_delays_every_answer(gate_server):
    server = gate_server(_settings(latency_s=0.3))
    started = time.monotonic()
    response = httpx.get(f"{server.url}/stats")
    assert response.status_code == 200
    assert time.monotonic() - started >= 0.3


def test_paid_latency_makes_the_client_time_out_after_settlement(gate_server, payer, helpers):
    server = gate_server(_settings(paid_latency_s=1.5))
    header = _prepaid(server, payer, helpers)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.url}/paid", headers={"X-Payment": header}, timeout=0.5)
    assert server.chain.received(RECEIVER_ADDRESS) == 10_000


def _statuses(server, count: int) -> list[int]:
    with httpx.Client() as client:
        return [client.post(f"{server.url}/paid").status_code for _ in range(count)]


def test_fault_schedule_is_deterministic_for_a_seed(gate_server):
    first = _statuses(gate_server(_settings(rate_429=0.5)), 30)
    second = _statuses(gate_server(_settings(rate_429=0.5)), 30)
    assert first == second
    assert set(first) == {402, 429}
    other_seed = gate_server(EmulatorSettings(seed=7, faults=Faults(rate_429=0.5)))
    assert _statuses(other_seed, 30) != first

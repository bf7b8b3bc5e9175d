"""How the report service takes money: overpayment and payment ids (docs/services.md).

An authorization of more than the price is accepted and settled in full, ``chargedUsd`` says
the required amount; a payment id (the authorization nonce) is accepted once, also when two
requests carry it at the same moment.
"""

from __future__ import annotations

import concurrent.futures
import threading

import httpx
import pytest

from x402lab.emulator.settings import RECEIVER_ADDRESS
from x402lab.x402.codec import encode_header

REPORTS = "/api/intel/reports"
ALL = {"username": "solarmoth", "select": "all"}


@pytest.fixture
def client(emulator):
    with httpx.Client(base_url=emulator.reports_url) as client:
        yield client


def _overpaid_header(payer, challenge, price, *, echo_challenge):
    """A payment moving twice the price; ``accepted`` echoes the challenge's entry as is, or
    says the amount paid."""
    wire = payer.sign(challenge, changes={"amount": str(price * 2)}).to_wire()
    if echo_challenge:
        wire["accepted"] = challenge["accepts"][0]
    return encode_header(wire)


@pytest.mark.parametrize("echo_challenge", [True, False], ids=["echoed", "restated"])
def test_an_overpayment_is_served_and_charged_the_required_amount(
    client, emulator, payer, helpers, echo_challenge
):
    challenge = helpers.challenge_of(client.get(REPORTS, params=ALL))
    price = int(challenge["accepts"][0]["amount"])
    header = _overpaid_header(payer, challenge, price, echo_challenge=echo_challenge)
    response = client.get(REPORTS, params=ALL, headers={"X-402-Payment": header})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["chargedUsd"] == pytest.approx(price / 1e6)
    assert body["reportCount"] == len(body["reports"]) == 3
    # What settles is what the payer signed: the whole overpayment, once.
    receipt = helpers.receipt_of(response)
    assert receipt["success"] is True and int(receipt["amount"]) == price * 2
    [transfer] = emulator.chain.transfers()
    assert transfer.amount_atomic == price * 2
    assert emulator.chain.received(RECEIVER_ADDRESS) == price * 2


def test_a_payment_for_a_bigger_selection_buys_a_smaller_one(client, emulator, payer, helpers):
    menu = client.get(REPORTS, params={"username": "solarmoth"}).json()["reports"]
    one = {"username": "solarmoth", "select": "range", "ids": menu[0]["id"]}
    bigger = helpers.challenge_of(client.get(REPORTS, params=ALL))
    response = client.get(REPORTS, params=one, headers={"X-Payment": payer.header(bigger)})
    assert response.status_code == 200, response.text
    assert response.json()["chargedUsd"] == pytest.approx(0.01)
    assert emulator.chain.received(RECEIVER_ADDRESS) == int(bigger["accepts"][0]["amount"])


def _race(client_url, params, headers, copies):
    """Send ``copies`` identical requests at the same moment; their status codes."""
    barrier = threading.Barrier(copies)

    def send(_):
        with httpx.Client(base_url=client_url) as own:
            barrier.wait()
            return own.get(REPORTS, params=params, headers=headers).status_code

    with concurrent.futures.ThreadPoolExecutor(copies) as pool:
        return sorted(pool.map(send, range(copies)))


@pytest.mark.parametrize("overpaid", [False, True], ids=["exact", "overpaid"])
def test_two_concurrent_requests_with_one_payment_give_one_200_and_one_409(
    emulator_factory, payer, helpers, overpaid
):
    # paid_latency keeps the first request open after settling, so the second one really
    # arrives while the first is in flight.
    emulator = emulator_factory(paid_latency_s=0.2)
    with httpx.Client(base_url=emulator.reports_url) as client:
        for _ in range(4):
            challenge = helpers.challenge_of(client.get(REPORTS, params=ALL))
            price = int(challenge["accepts"][0]["amount"])
            header = (
                _overpaid_header(payer, challenge, price, echo_challenge=True)
                if overpaid
                else payer.header(challenge)
            )
            codes = _race(emulator.reports_url, ALL, {"X-402-Payment": header}, 2)
            assert codes == [200, 409]
    transfers = emulator.chain.transfers()
    assert len(transfers) == 4
    assert len({t.nonce for t in transfers}) == 4


def test_many_concurrent_copies_settle_once(emulator, payer, helpers):
    with httpx.Client(base_url=emulator.reports_url) as client:
        challenge = helpers.challenge_of(client.get(REPORTS, params=ALL))
    header = payer.header(challenge)
    codes = _race(emulator.reports_url, ALL, {"X-Payment": header}, 8)
    assert codes == [200] + [409] * 7
    assert len(emulator.chain.transfers()) == 1

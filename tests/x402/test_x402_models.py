from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.x402 import PAY_TO, challenge_wire, entry

from x402lab.errors import ProtocolError
from x402lab.x402 import (
    BASE_USDC,
    DEFAULT_MAX_TIMEOUT_SECONDS,
    Authorization,
    PaymentPayload,
    PaymentRequired,
    PaymentRequirements,
    ResourceInfo,
    SettlementResponse,
    decode_header,
    encode_header,
    normalize_challenge,
)

addresses = st.binary(min_size=20, max_size=20).map(lambda b: "0x" + b.hex())
uint256 = st.integers(min_value=0, max_value=2**256 - 1)
small_text = st.text(max_size=30)
plain_json = st.dictionaries(
    st.text(max_size=10), st.none() | st.booleans() | st.integers() | small_text, max_size=4
)

requirements_st = st.builds(
    PaymentRequirements,
    scheme=st.sampled_from(["exact", "upto"]),
    network=st.sampled_from(["eip155:8453", "eip155:84532", "solana:mainnet"]),
    amount=uint256,
    asset=addresses,
    pay_to=addresses,
    max_timeout_seconds=st.integers(min_value=0, max_value=10**6),
    extra=plain_json,
)
resource_st = st.builds(
    ResourceInfo,
    url=small_text,
    description=st.none() | small_text,
    mime_type=st.none() | small_text,
    service_name=st.none() | small_text,
    icon_url=st.none() | small_text,
)
authorization_st = st.builds(
    Authorization,
    from_address=addresses,
    to=addresses,
    value=uint256,
    valid_after=uint256,
    valid_before=uint256,
    nonce=st.binary(min_size=32, max_size=32).map(lambda b: "0x" + b.hex()),
)


@given(requirements_st)
def test_requirements_round_trip(req):
    wire = req.to_wire()
    assert isinstance(wire["amount"], str)
    back = PaymentRequirements.from_wire(decode_header(encode_header(wire)))
    assert back == req
    assert back.raw == wire


@given(
    st.lists(requirements_st, min_size=1, max_size=3),
    st.none() | resource_st,
    st.none() | small_text,
    plain_json,
)
def test_payment_required_round_trip(accepts, resource, error, extensions):
    pr = PaymentRequired(2, tuple(accepts), error, resource, extensions)
    wire = decode_header(encode_header(pr.to_wire()))
    assert PaymentRequired.from_wire(wire) == pr
    assert normalize_challenge(wire) == pr


@given(authorization_st, requirements_st, st.none() | plain_json)
def test_payload_round_trip(auth, req, extensions):
    payload = PaymentPayload(
        x402_version=2,
        accepted=req.raw,
        signature="0x" + "11" * 65,
        authorization=auth,
        resource={"url": "https://x.test/"},
        extensions=extensions,
    )
    wire = decode_header(encode_header(payload.to_wire()))
    assert PaymentPayload.from_wire(wire) == payload


@given(
    st.booleans(),
    small_text,
    st.none() | addresses,
    st.none() | small_text,
    st.none() | uint256,
)
def test_settlement_round_trip(success, tx, payer, reason, amount):
    sr = SettlementResponse(success, tx, "eip155:8453", payer, reason, amount)
    assert SettlementResponse.from_wire(decode_header(encode_header(sr.to_wire()))) == sr


def test_payload_wire_shape_omits_absent_optionals():
    auth = Authorization(PAY_TO, PAY_TO, 1, 0, 10, "0x" + "00" * 32)
    wire = PaymentPayload(2, entry(), "0x" + "22" * 65, auth).to_wire()
    assert list(wire) == ["x402Version", "accepted", "payload"]
    assert wire["payload"]["authorization"] == {
        "from": PAY_TO,
        "to": PAY_TO,
        "value": "1",
        "validAfter": "0",
        "validBefore": "10",
        "nonce": "0x" + "00" * 32,
    }


def test_settlement_keeps_unknown_fields_in_raw():
    wire = {
        "success": False,
        "errorReason": "insufficient_funds",
        "errorMessage": "balance too low",
        "transaction": "",
        "network": "eip155:8453",
    }
    sr = SettlementResponse.from_wire(wire)
    assert sr.error_reason == "insufficient_funds"
    assert sr.raw["errorMessage"] == "balance too low"


def test_requirements_raw_is_verbatim_and_to_wire_keeps_unknown_fields():
    wire = entry(description="v1-style leftover", amount="0010000")
    req = PaymentRequirements.from_wire(wire)
    assert req.amount == 10000
    assert req.raw == wire
    assert req.to_wire()["description"] == "v1-style leftover"
    wire["extra"]["name"] = "mutated later"
    assert req.raw["extra"]["name"] == "USD Coin"


@pytest.mark.parametrize(
    ("wire", "words"),
    [
        (challenge_wire(x402Version=1), "unsupported x402Version 1"),
        (challenge_wire(x402Version=3), "unsupported x402Version 3"),
        (challenge_wire(x402Version="2"), "x402Version"),
        (challenge_wire(x402Version=None), "x402Version"),
        (challenge_wire(accepts=[]), "accepts: empty"),
        (challenge_wire(accepts={"a": 1}), "accepts: want an array"),
        (challenge_wire(entry(amount=10000)), r"accepts\[0\].amount: want a string of digits"),
        (challenge_wire(entry(amount="1.5")), r"accepts\[0\].amount"),
        (challenge_wire(entry(amount="-1")), r"accepts\[0\].amount"),
        (challenge_wire(entry(payTo=None)), r"accepts\[0\].payTo: missing"),
        (challenge_wire(entry(), entry(maxTimeoutSeconds="300")), r"accepts\[1\].maxTimeout"),
        (challenge_wire(entry(maxTimeoutSeconds=True)), r"maxTimeoutSeconds: want an integer"),
        (challenge_wire(entry(extra=[1])), r"accepts\[0\].extra: want an object"),
        (challenge_wire(resource={"description": "x"}), "resource.url: missing"),
        (challenge_wire(resource="https://x"), "resource: want an object"),
    ],
)
def test_bad_challenges_are_protocol_errors_naming_the_field(wire, words):
    with pytest.raises(ProtocolError, match=words):
        PaymentRequired.from_wire(wire)


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (lambda w: w.pop("payload"), "payload: missing"),
        (lambda w: w["payload"].pop("signature"), "payload.signature: missing"),
        (lambda w: w["payload"].update(signature="0xzz"), "payload.signature: not 0x hex"),
        (lambda w: w["payload"]["authorization"].update(nonce="0x12"), "nonce"),
        (lambda w: w["payload"]["authorization"].update(to="bob"), "authorization.to"),
        (lambda w: w["payload"]["authorization"].update(value="1e3"), "authorization.value"),
        (lambda w: w.update(accepted=[]), "accepted: want an object"),
        (lambda w: w.update(x402Version="2"), "x402Version: want an integer"),
    ],
)
def test_bad_payloads_are_protocol_errors_naming_the_field(mutate, words):
    auth = Authorization(PAY_TO, PAY_TO, 1, 0, 10, "0x" + "00" * 32)
    wire = PaymentPayload(2, entry(), "0x" + "22" * 65, auth).to_wire()
    mutate(wire)
    with pytest.raises(ProtocolError, match=words):
        PaymentPayload.from_wire(wire)


# The report service's 402 body (docs/services.md, "The report service's 402 body").
REPORTS_402: dict[str, Any] = {
    "x402Version": 2,
    "error": "payment required",
    "accepts": [
        {
            "protocol": "x402",
            "version": 2,
            "network": "eip155:8453",
            "asset": BASE_USDC.address.lower(),
            "amount": "30000",
            "payTo": PAY_TO,
        }
    ],
    "extensions": {
        "chainId": 8453,
        "tokenDecimals": 6,
        "unitPriceUsd": 0.01,
        "reportCount": 3,
        "select": "all",
        "resource": "/api/intel/reports?username=a&select=all",
    },
}


def test_normalize_fills_reports_shape_from_the_known_token():
    pr = normalize_challenge(REPORTS_402)
    (req,) = pr.accepts
    assert req.scheme == "exact"
    assert req.max_timeout_seconds == DEFAULT_MAX_TIMEOUT_SECONDS
    assert req.extra == {"name": "USD Coin", "version": "2"}
    assert req.filled == {"scheme", "extra", "maxTimeoutSeconds"}
    assert req.raw == REPORTS_402["accepts"][0]
    assert pr.raw == REPORTS_402
    assert pr.extensions["reportCount"] == 3


def test_normalize_accepts_missing_top_level_version_when_entries_say_2():
    wire = {k: v for k, v in REPORTS_402.items() if k != "x402Version"}
    assert normalize_challenge(wire).x402_version == 2
    wire["accepts"] = [dict(wire["accepts"][0], version=1)]
    with pytest.raises(ProtocolError, match="x402Version: missing"):
        normalize_challenge(wire)


def test_normalize_standard_challenge_fills_nothing():
    pr = normalize_challenge(challenge_wire())
    assert pr == PaymentRequired.from_wire(challenge_wire())
    assert pr.accepts[0].filled == frozenset()


def test_normalize_fills_only_missing_domain_keys():
    pr = normalize_challenge(challenge_wire(entry(extra={"assetTransferMethod": "eip3009"})))
    assert pr.accepts[0].extra == {
        "name": "USD Coin",
        "version": "2",
        "assetTransferMethod": "eip3009",
    }
    assert pr.accepts[0].filled == {"extra"}


@pytest.mark.parametrize(
    "bad_entry",
    [
        dict(REPORTS_402["accepts"][0], asset="0x" + "12" * 20),
        dict(REPORTS_402["accepts"][0], network="eip155:1"),
        entry(extra=None, asset="0x" + "34" * 20),
        entry(scheme=None, asset="0x" + "34" * 20),
    ],
)
def test_normalize_never_guesses_a_domain_for_unknown_tokens(bad_entry):
    with pytest.raises(ProtocolError, match="not a known token"):
        normalize_challenge(dict(REPORTS_402, accepts=[bad_entry]))


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"protocol": "other"}, "protocol"),
        ({"version": 1}, "unsupported x402Version 1"),
    ],
)
def test_normalize_rejects_other_protocols(changes, words):
    bad = dict(REPORTS_402["accepts"][0], **changes)
    with pytest.raises(ProtocolError, match=words):
        normalize_challenge(dict(REPORTS_402, accepts=[bad]))


def test_normalize_leaves_foreign_entries_alone():
    solana = entry(network="solana:mainnet", asset="So1ana", payTo="x", extra={"feePayer": "y"})
    pr = normalize_challenge(challenge_wire(solana, entry()))
    assert pr.accepts[0].extra == {"feePayer": "y"}
    assert pr.accepts[0].filled == frozenset()


def test_normalize_keeps_a_wrong_partial_domain_visible():
    pr = normalize_challenge(challenge_wire(entry(extra={"name": "USDC"})))
    assert pr.accepts[0].extra == {"name": "USDC", "version": "2"}

import copy

import pytest
from support.x402 import NONCE, NOW, OTHER, PAY_TO, challenge_wire, entry

from x402lab.x402 import (
    BASE_USDC,
    KeySigner,
    PaymentRequired,
    PaymentRequirements,
    normalize_challenge,
    sign_payment,
    verify_payment,
)
from x402lab.x402.verify import _HALF_N, _SECP256K1_N

PREFIX = "invalid_exact_evm_payload_"


@pytest.fixture
def signed(signer, challenge):
    payload = sign_payment(challenge, challenge.accepts[0], signer, now=NOW, nonce=NONCE)
    return payload.to_wire(), challenge.accepts[0]


def reason(wire, requirements, now=NOW):
    result = verify_payment(wire, requirements, now=now)
    return result.invalid_reason


def test_valid_payload_passes_as_wire_and_as_model(signed, signer):
    wire, req = signed
    result = verify_payment(wire, req, now=NOW)
    assert result.is_valid and result.invalid_reason is None
    assert result.payer == signer.address
    assert result.to_wire() == {"isValid": True, "payer": signer.address}


def test_forged_signature(signed):
    wire, req = signed
    sig = bytearray(bytes.fromhex(wire["payload"]["signature"][2:]))
    sig[5] ^= 0x01
    wire["payload"]["signature"] = "0x" + sig.hex()
    assert reason(wire, req) == PREFIX + "signature"


def test_signature_from_another_key(signed, challenge):
    wire, req = signed
    other = KeySigner("0x" + "02" * 32)
    forged = sign_payment(challenge, req, other, now=NOW, nonce=NONCE).to_wire()
    wire["payload"]["signature"] = forged["payload"]["signature"]
    assert reason(wire, req) == PREFIX + "signature"


def test_high_s_twin_is_refused(signed):
    wire, req = signed
    sig = bytes.fromhex(wire["payload"]["signature"][2:])
    s = int.from_bytes(sig[32:64], "big")
    assert s <= _HALF_N
    twin = sig[:32] + (_SECP256K1_N - s).to_bytes(32, "big") + bytes([55 - sig[64]])
    wire["payload"]["signature"] = "0x" + twin.hex()
    assert reason(wire, req) == PREFIX + "signature"


def test_v_as_recovery_id_is_accepted(signed):
    wire, req = signed
    sig = bytes.fromhex(wire["payload"]["signature"][2:])
    wire["payload"]["signature"] = "0x" + (sig[:64] + bytes([sig[64] - 27])).hex()
    assert verify_payment(wire, req, now=NOW).is_valid


def test_wrong_payee(signed):
    wire, req = signed
    wire["payload"]["authorization"]["to"] = OTHER
    assert reason(wire, req) == PREFIX + "recipient_mismatch"


def test_payee_compared_case_insensitively(signed):
    wire, req = signed
    wire["payload"]["authorization"]["to"] = PAY_TO.lower()
    assert verify_payment(wire, req, now=NOW).is_valid


def test_value_mismatch(signed):
    wire, req = signed
    wire["payload"]["authorization"]["value"] = "9999"
    assert reason(wire, req) == PREFIX + "authorization_value_mismatch"


def test_expired_and_margin(signed):
    wire, req = signed
    valid_before = NOW + 300
    assert reason(wire, req, now=valid_before - 6) is None
    assert reason(wire, req, now=valid_before - 5) == PREFIX + "authorization_valid_before"
    assert reason(wire, req, now=valid_before + 100) == PREFIX + "authorization_valid_before"


def test_not_yet_valid(signed):
    wire, req = signed
    assert reason(wire, req, now=NOW - 600) is None
    assert reason(wire, req, now=NOW - 601) == PREFIX + "authorization_valid_after"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("amount", "1"),
        ("amount", 10000),
        ("payTo", OTHER),
        ("payTo", PAY_TO.lower()),
        ("asset", BASE_USDC.address.lower()),
        ("maxTimeoutSeconds", 3600),
        ("maxTimeoutSeconds", "300"),
        ("extra", {"name": "USD Coin"}),
        ("extra", None),
    ],
)
def test_tampered_accepted(signed, field, value):
    wire, req = signed
    if value is None:
        del wire["accepted"][field]
    else:
        wire["accepted"][field] = value
    assert reason(wire, req) == "invalid_payment_requirements"


def test_accepted_may_add_to_extra(signed):
    wire, req = signed
    wire["accepted"]["extra"]["more"] = 1
    assert "more" not in req.raw["extra"]
    assert verify_payment(wire, req, now=NOW).is_valid


def test_scheme_and_network(signed):
    wire, req = signed
    bad = copy.deepcopy(wire)
    bad["accepted"]["scheme"] = "upto"
    assert reason(bad, req) == "unsupported_scheme"
    bad = copy.deepcopy(wire)
    bad["accepted"]["network"] = "eip155:84532"
    assert reason(bad, req) == "network_mismatch"


@pytest.mark.parametrize("version", [1, 3])
def test_x402_version(signed, version):
    wire, req = signed
    wire["x402Version"] = version
    assert reason(wire, req) == "invalid_x402_version"


def test_missing_domain_in_requirements(signed):
    wire, req = signed
    bare = PaymentRequirements.from_wire(entry(extra={}))
    wire["accepted"] = dict(bare.raw)
    assert reason(wire, bare) == "missing_eip712_domain"


def test_sepolia_domain_signature_fails_on_mainnet(signer):
    # The Sepolia-name trap (docs/services.md, "Signing"): a challenge and a signer that both use
    # "USDC" on mainnet.
    from x402lab.x402 import Authorization, authorization_digest
    from x402lab.x402.models import PaymentPayload
    from x402lab.x402.tokens import Token

    req = PaymentRequirements.from_wire(entry(extra={"name": "USDC", "version": "2"}))
    auth = Authorization(signer.address, PAY_TO, 10000, NOW - 600, NOW + 300, NONCE)
    wrong = Token("eip155:8453", 8453, BASE_USDC.address, "USDC", "2", 6, "USDC")
    sig = signer.sign_digest(authorization_digest(wrong, auth))
    payload = PaymentPayload(2, req.raw, "0x" + sig.hex(), auth)
    assert reason(payload, req) == PREFIX + "signature"


def test_unknown_token_is_invalid_signature(signer):
    req = PaymentRequirements.from_wire(entry(asset=OTHER))
    challenge = PaymentRequired(2, (req,))
    good = normalize_challenge(challenge_wire())
    payload = sign_payment(good, good.accepts[0], signer, now=NOW, nonce=NONCE).to_wire()
    payload["accepted"] = dict(req.raw)
    assert challenge.accepts[0] is req
    assert reason(payload, req) == PREFIX + "signature"


def test_reports_shape_raw_echo_verifies(signer):
    raw = {
        "protocol": "x402",
        "version": 2,
        "network": "eip155:8453",
        "asset": BASE_USDC.address,
        "amount": "20000",
        "payTo": PAY_TO,
    }
    challenge = normalize_challenge({"x402Version": 2, "accepts": [raw]})
    req = challenge.accepts[0]
    wire = sign_payment(challenge, req, signer, now=NOW, nonce=NONCE).to_wire()
    assert verify_payment(wire, req, now=NOW).is_valid
    wire["accepted"] = dict(raw, amount="1")
    assert reason(wire, req) == "invalid_payment_requirements"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda w: w.pop("payload"),
        lambda w: w["payload"].update(signature=None),
        lambda w: w["payload"].update(signature="0xzz"),
        lambda w: w["payload"]["authorization"].update(value="-5"),
        lambda w: w["payload"]["authorization"].update(nonce="0x00"),
        lambda w: w["payload"]["authorization"].pop("from"),
        lambda w: w.update(accepted="x"),
        lambda w: w.update(x402Version="2"),
    ],
)
def test_malformed_payload_is_invalid_payload_not_an_exception(signed, mutate):
    wire, req = signed
    mutate(wire)
    assert reason(wire, req) == "invalid_payload"


@pytest.mark.parametrize("junk", [None, 42, "text", [], {}])
def test_junk_is_invalid_payload(signed, junk):
    _, req = signed
    assert reason(junk, req) == "invalid_payload"


def test_short_signature_is_invalid_signature(signed):
    wire, req = signed
    wire["payload"]["signature"] = wire["payload"]["signature"][:-2]
    assert reason(wire, req) == PREFIX + "signature"

import copy
import pickle
import secrets

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data
from support.x402 import (
    NONCE,
    NOW,
    OTHER,
    PAY_TO,
    TEST_ADDRESS,
    TEST_KEY_HEX,
    challenge_wire,
    entry,
)

from x402lab.errors import ConfigError, PaymentRefused
from x402lab.x402 import (
    BASE_SEPOLIA_USDC,
    BASE_USDC,
    Authorization,
    KeySigner,
    PaymentRequired,
    authorization_digest,
    domain_separator,
    new_nonce,
    normalize_challenge,
    recover_address,
    sign_payment,
)

# Pinned once, after cross-checking against eth-account and the SDK hasher (tests below).
BASE_USDC_DOMAIN_SEPARATOR = "02fa7265e7c5d81118673727957699e4d68f74cd74b7db77da710fe8a2c7834f"
GOLDEN_DIGEST = "e75ad0033f1987101a9c2d881d69ed4cd5ad3bcadda934d49527b19f5d84e247"
GOLDEN_SIGNATURE = (
    "0x0462b206394e9eebf2a4398fa326f373813bc191e7c9852725bc908e69e24d79"
    "190071ec5bc4919f135511e3d39614ff66458720558d3aa596b412a3a8a80b821c"
)
GOLDEN_AUTH = Authorization(TEST_ADDRESS, PAY_TO, 10000, NOW - 600, NOW + 300, NONCE)

TRANSFER_TYPES = {
    "TransferWithAuthorization": [
        {"name": "from", "type": "address"},
        {"name": "to", "type": "address"},
        {"name": "value", "type": "uint256"},
        {"name": "validAfter", "type": "uint256"},
        {"name": "validBefore", "type": "uint256"},
        {"name": "nonce", "type": "bytes32"},
    ]
}


def eth_account_typed_data(token, auth):
    return encode_typed_data(
        domain_data={
            "name": token.name,
            "version": token.version,
            "chainId": token.chain_id,
            "verifyingContract": token.address,
        },
        message_types=TRANSFER_TYPES,
        message_data={
            "from": auth.from_address,
            "to": auth.to,
            "value": auth.value,
            "validAfter": auth.valid_after,
            "validBefore": auth.valid_before,
            "nonce": bytes.fromhex(auth.nonce[2:]),
        },
    )


def test_base_usdc_domain_separator_is_the_on_chain_value():
    assert domain_separator(BASE_USDC).hex() == BASE_USDC_DOMAIN_SEPARATOR


def test_sepolia_domain_differs_from_mainnet():
    assert domain_separator(BASE_SEPOLIA_USDC) != domain_separator(BASE_USDC)


def test_golden_digest_and_signature(signer, challenge):
    assert signer.address == TEST_ADDRESS
    assert authorization_digest(BASE_USDC, GOLDEN_AUTH).hex() == GOLDEN_DIGEST
    payload = sign_payment(challenge, challenge.accepts[0], signer, now=NOW, nonce=NONCE)
    assert payload.authorization == GOLDEN_AUTH
    assert payload.signature == GOLDEN_SIGNATURE


def test_digest_matches_eth_account_typed_data():
    signable = eth_account_typed_data(BASE_USDC, GOLDEN_AUTH)
    # EIP-191 version 0x01: keccak(0x19 ‖ 0x01 ‖ header ‖ body).
    from eth_hash.auto import keccak

    expected = keccak(b"\x19" + signable.version + signable.header + signable.body)
    assert expected.hex() == GOLDEN_DIGEST
    signed = Account.sign_message(signable, TEST_KEY_HEX)
    assert "0x" + signed.signature.hex().removeprefix("0x") == GOLDEN_SIGNATURE


@pytest.mark.interop
def test_digest_matches_sdk_hasher():
    from x402.mechanisms.evm.eip712 import hash_eip3009_authorization
    from x402.mechanisms.evm.types import ExactEIP3009Authorization

    sdk_auth = ExactEIP3009Authorization(
        from_address=GOLDEN_AUTH.from_address,
        to=GOLDEN_AUTH.to,
        value=str(GOLDEN_AUTH.value),
        valid_after=str(GOLDEN_AUTH.valid_after),
        valid_before=str(GOLDEN_AUTH.valid_before),
        nonce=GOLDEN_AUTH.nonce,
    )
    digest = hash_eip3009_authorization(sdk_auth, 8453, BASE_USDC.address, "USD Coin", "2")
    assert digest.hex() == GOLDEN_DIGEST


def test_digest_ignores_address_case():
    lower = Authorization(
        TEST_ADDRESS.lower(), PAY_TO.upper().replace("0X", "0x"), 10000, NOW - 600, NOW + 300, NONCE
    )
    assert authorization_digest(BASE_USDC, lower).hex() == GOLDEN_DIGEST


def test_signature_recovers_the_signer(signer):
    digest = authorization_digest(BASE_USDC, GOLDEN_AUTH)
    sig = signer.sign_digest(digest)
    assert len(sig) == 65 and sig[64] in (27, 28)
    assert recover_address(digest, sig) == signer.address
    assert recover_address(digest, sig[:64] + bytes([sig[64] - 27])) == signer.address
    assert recover_address(digest, "0x" + sig.hex()) == signer.address


def test_payload_shape(signer):
    wire = challenge_wire(extensions={"bazaar": {"info": {"a": 1}, "schema": {}}})
    challenge = normalize_challenge(wire)
    payload = sign_payment(challenge, challenge.accepts[0], signer, now=NOW, nonce=NONCE)
    out = payload.to_wire()
    assert list(out) == ["x402Version", "resource", "accepted", "payload", "extensions"]
    assert out["accepted"] == wire["accepts"][0]
    assert out["resource"] == wire["resource"]
    assert out["extensions"] == wire["extensions"]
    assert out["payload"]["authorization"]["validAfter"] == str(NOW - 600)
    assert out["payload"]["authorization"]["validBefore"] == str(NOW + 300)
    assert len(out["payload"]["signature"]) == 132


def test_accepted_echoes_the_raw_entry_verbatim(signer):
    raw = entry(description="kept", amount="010000")
    raw["extra"]["assetTransferMethod"] = "eip3009"
    challenge = normalize_challenge(challenge_wire(raw))
    payload = sign_payment(challenge, challenge.accepts[0], signer, now=NOW, nonce=NONCE)
    assert payload.to_wire()["accepted"] == raw
    assert payload.authorization.value == 10000


def test_reports_shape_echoes_its_raw_entry(signer):
    raw = {
        "protocol": "x402",
        "version": 2,
        "network": "eip155:8453",
        "asset": BASE_USDC.address,
        "amount": "20000",
        "payTo": PAY_TO,
    }
    challenge = normalize_challenge({"x402Version": 2, "accepts": [raw]})
    payload = sign_payment(challenge, challenge.accepts[0], signer, now=NOW, nonce=NONCE)
    assert payload.accepted == raw
    assert "resource" not in payload.to_wire()
    assert "extensions" not in payload.to_wire()


def test_valid_after_never_below_zero(signer, challenge):
    payload = sign_payment(challenge, challenge.accepts[0], signer, now=100, nonce=NONCE)
    assert payload.authorization.valid_after == 0
    payload = sign_payment(
        challenge, challenge.accepts[0], signer, now=NOW, nonce=NONCE, valid_after_slack=0
    )
    assert payload.authorization.valid_after == NOW


def test_extensions_echo_rule(signer):
    server = {"payment-identifier": {"info": {"required": False}, "schema": {"type": "object"}}}
    challenge = normalize_challenge(challenge_wire(extensions=server))
    payload = sign_payment(
        challenge,
        challenge.accepts[0],
        signer,
        now=NOW,
        nonce=NONCE,
        extensions={"payment-identifier": {"info": {"id": "pay_0123456789abcdef"}}, "x": 1},
    )
    assert payload.extensions == {
        "payment-identifier": {
            "info": {"required": False, "id": "pay_0123456789abcdef"},
            "schema": {"type": "object"},
        },
        "x": 1,
    }
    assert challenge.extensions == server  # not mutated
    with pytest.raises(ConfigError, match="overwrite"):
        sign_payment(
            challenge,
            challenge.accepts[0],
            signer,
            now=NOW,
            nonce=NONCE,
            extensions={"payment-identifier": {"info": {"required": True}}},
        )


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (entry(extra={"name": "USDC", "version": "2"}), "differs from the real USDC domain"),
        (entry(extra={"name": "USD Coin", "version": "1"}), "differs from the real USDC domain"),
        (entry(asset=OTHER), "not a known token"),
        (entry(network="eip155:1"), "not a known token"),
        (entry(scheme="upto"), "scheme 'upto' not supported"),
        (entry(payTo="not-an-address"), "not an EVM address"),
    ],
)
def test_sign_payment_refuses_bad_requirements(signer, raw, words):
    challenge = PaymentRequired.from_wire(challenge_wire(raw))
    with pytest.raises(PaymentRefused, match=words):
        sign_payment(challenge, challenge.accepts[0], signer, now=NOW, nonce=NONCE)


def test_sign_payment_refuses_bad_nonce(signer, challenge):
    with pytest.raises(ConfigError, match="nonce"):
        sign_payment(challenge, challenge.accepts[0], signer, now=NOW, nonce="0x1234")


def test_new_nonce_format_and_uniqueness():
    nonces = {new_nonce() for _ in range(100)}
    assert len(nonces) == 100
    assert all(len(n) == 66 and n.startswith("0x") and int(n, 16) >= 0 for n in nonces)


def test_key_signer_never_shows_the_key(signer):
    key_hex = TEST_KEY_HEX[2:]
    for text in (repr(signer), str(signer), f"{signer}", f"{signer!r}"):
        assert key_hex not in text.lower()
        assert signer.address in text
    assert not hasattr(signer, "__dict__")


@pytest.mark.parametrize("dump", [pickle.dumps, copy.copy, copy.deepcopy])
def test_key_signer_cannot_be_pickled_or_copied(signer, dump):
    with pytest.raises(TypeError, match="cannot be pickled"):
        dump(signer)


@pytest.mark.parametrize(
    "bad",
    ["0x1234", "zz" * 32, b"\x00" * 32, b"\x01" * 31, "0x" + "ff" * 32, 12345],
)
def test_bad_keys_raise_config_error_without_echoing(bad):
    with pytest.raises(ConfigError) as info:
        KeySigner(bad)
    text = str(info.value) + repr(info.value)
    assert "ff" * 8 not in text and "zz" not in text and "1234" not in text
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_key_signer_accepts_bytes_and_unprefixed_hex():
    assert KeySigner(bytes.fromhex(TEST_KEY_HEX[2:])).address == TEST_ADDRESS
    assert KeySigner(TEST_KEY_HEX[2:]).address == TEST_ADDRESS


class EthAccountDigestSigner:
    """Any object with ``address`` and ``sign_digest`` is a DigestSigner (e.g. a hardware key)."""

    def __init__(self, key: str) -> None:
        self._account = Account.from_key(key)
        self.address = self._account.address

    def sign_digest(self, digest: bytes) -> bytes:
        return bytes(self._account.unsafe_sign_hash(digest).signature)


def test_any_digest_signer_works(challenge):
    from x402lab.x402 import DigestSigner, verify_payment

    other = EthAccountDigestSigner(TEST_KEY_HEX)
    assert isinstance(other, DigestSigner)
    payload = sign_payment(challenge, challenge.accepts[0], other, now=NOW, nonce=NONCE)
    assert payload.signature == GOLDEN_SIGNATURE
    assert verify_payment(payload, challenge.accepts[0], now=NOW).is_valid


def test_keccak_is_the_c_one_and_agrees_with_eth_hash():
    from eth_hash.auto import keccak as reference

    from x402lab.x402.keccak import keccak

    # safe-pysha3 is a declared dependency on CPython: its absence must show, not slow us.
    assert keccak is not reference
    for size in (0, 1, 31, 32, 135, 136, 137, 1000):  # around Keccak-256's 136-byte block
        data = secrets.token_bytes(size)
        assert keccak(data) == reference(data)

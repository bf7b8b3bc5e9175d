"""Interop with the official x402 Python SDK, offline.

The SDK facilitator verifies our payloads against an in-memory chain stand-in, and our
verify_payment accepts payloads made by the SDK client. Both sides use the real clock here
because the SDK reads time.time() itself.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data
from support.x402 import NONCE, PAY_TO, TEST_KEY_HEX, challenge_wire, entry

from x402lab.x402 import (
    BASE_USDC,
    KeySigner,
    new_nonce,
    normalize_challenge,
    sign_payment,
    verify_payment,
)

pytestmark = pytest.mark.interop

sdk = pytest.importorskip("x402")
sdk_evm = pytest.importorskip("x402.mechanisms.evm")
from x402 import x402ClientSync, x402FacilitatorSync  # noqa: E402
from x402.mechanisms.evm.exact import (  # noqa: E402
    ExactEvmClientScheme,
    ExactEvmFacilitatorScheme,
)
from x402.mechanisms.evm.signers import EthAccountSigner  # noqa: E402
from x402.schemas import PaymentPayload as SdkPayload  # noqa: E402
from x402.schemas import PaymentRequired as SdkRequired  # noqa: E402
from x402.schemas import PaymentRequirements as SdkRequirements  # noqa: E402

FACILITATOR = "0x00000000000000000000000000000000000FaC11"


class InMemoryUsdc:
    """A FacilitatorEvmSigner stand-in: Base USDC's transferWithAuthorization rules in memory.

    The signature is checked with eth-account against the token's real domain (independently
    of x402lab), so a payload passes only if it would pass on chain.
    """

    def __init__(self, balances: dict[str, int] | None = None) -> None:
        self.balances = {k.lower(): v for k, v in (balances or {}).items()}
        self.used: set[tuple[str, bytes]] = set()
        self.calls: list[str] = []

    def get_addresses(self) -> list[str]:
        return [FACILITATOR]

    def get_chain_id(self) -> int:
        return BASE_USDC.chain_id

    def get_code(self, address: str) -> bytes:
        self.calls.append(f"get_code:{address.lower()}")
        return b"\x60\x80" if address.lower() == BASE_USDC.address.lower() else b""

    def get_balance(self, address: str, token_address: str) -> int:
        return self.balances.get(address.lower(), 0)

    def read_contract(self, address: str, abi: Any, function_name: str, *args: Any) -> Any:
        self.calls.append(function_name)
        if function_name != "transferWithAuthorization":
            raise RuntimeError(f"execution reverted: unexpected call {function_name}")
        frm, to, value, valid_after, valid_before, nonce, v, r, s = args
        now = int(time.time())
        if not now > valid_after:
            raise RuntimeError("execution reverted: FiatTokenV2: authorization is not yet valid")
        if not now < valid_before:
            raise RuntimeError("execution reverted: FiatTokenV2: authorization is expired")
        if (frm.lower(), bytes(nonce)) in self.used:
            raise RuntimeError("execution reverted: FiatTokenV2: authorization is used or canceled")
        signable = encode_typed_data(
            domain_data={
                "name": BASE_USDC.name,
                "version": BASE_USDC.version,
                "chainId": BASE_USDC.chain_id,
                "verifyingContract": BASE_USDC.address,
            },
            message_types={
                "TransferWithAuthorization": [
                    {"name": "from", "type": "address"},
                    {"name": "to", "type": "address"},
                    {"name": "value", "type": "uint256"},
                    {"name": "validAfter", "type": "uint256"},
                    {"name": "validBefore", "type": "uint256"},
                    {"name": "nonce", "type": "bytes32"},
                ]
            },
            message_data={
                "from": frm,
                "to": to,
                "value": value,
                "validAfter": valid_after,
                "validBefore": valid_before,
                "nonce": bytes(nonce),
            },
        )
        recovered = Account.recover_message(signable, vrs=(v, bytes(r), bytes(s)))
        if recovered.lower() != frm.lower():
            raise RuntimeError("execution reverted: FiatTokenV2: invalid signature")
        if self.balances.get(frm.lower(), 0) < value:
            raise RuntimeError("execution reverted: ERC20: transfer amount exceeds balance")
        return None

    def verify_typed_data(self, *args: Any, **kwargs: Any) -> bool:
        raise AssertionError("not expected for EOA signatures")

    # Settlement is the emulator's business; these tests only verify.
    def write_contract(self, *args: Any, **kwargs: Any) -> str:
        raise AssertionError("settle is not exercised here")

    def send_transaction(self, to: str, data: bytes) -> str:
        raise AssertionError("settle is not exercised here")

    def wait_for_transaction_receipt(self, tx_hash: str) -> Any:
        raise AssertionError("settle is not exercised here")


def sdk_facilitator(chain: InMemoryUsdc) -> x402FacilitatorSync:
    facilitator = x402FacilitatorSync()
    facilitator.register(["eip155:8453"], ExactEvmFacilitatorScheme(chain))
    return facilitator


def sdk_verify(chain: InMemoryUsdc, payload_wire: dict[str, Any], requirements_wire: dict):
    return sdk_facilitator(chain).verify(
        SdkPayload.model_validate(payload_wire), SdkRequirements.model_validate(requirements_wire)
    )


@pytest.fixture
def funded(signer):
    return InMemoryUsdc({signer.address: 10_000_000})


def our_payload(signer, wire: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    challenge = normalize_challenge(wire)
    payload = sign_payment(
        challenge, challenge.accepts[0], signer, now=int(time.time()), nonce=new_nonce()
    )
    return payload.to_wire(), challenge.accepts[0].to_wire()


def test_sdk_facilitator_accepts_our_payload(signer, funded):
    payload, requirements = our_payload(signer, challenge_wire())
    result = sdk_verify(funded, payload, requirements)
    assert result.is_valid, result.invalid_reason
    assert result.payer.lower() == signer.address.lower()
    assert "transferWithAuthorization" in funded.calls


def test_sdk_facilitator_accepts_our_reports_shape_payload(signer, funded):
    wire = {
        "x402Version": 2,
        "accepts": [
            {
                "protocol": "x402",
                "version": 2,
                "network": "eip155:8453",
                "asset": BASE_USDC.address,
                "amount": "30000",
                "payTo": PAY_TO,
            }
        ],
    }
    challenge = normalize_challenge(wire)
    payload = sign_payment(
        challenge, challenge.accepts[0], signer, now=int(time.time()), nonce=new_nonce()
    ).to_wire()
    # The raw echo lacks scheme; the SDK model needs one, as a facilitator would be sent it.
    payload["accepted"] = challenge.accepts[0].to_wire()
    result = sdk_verify(funded, payload, challenge.accepts[0].to_wire())
    assert result.is_valid, result.invalid_reason


def test_sdk_facilitator_and_we_agree_on_bad_payloads(signer, funded):
    now = int(time.time())
    payload, requirements = our_payload(signer, challenge_wire())
    cases = {
        "invalid_exact_evm_payload_recipient_mismatch": ("to", "0x" + "11" * 20),
        "invalid_exact_evm_payload_authorization_value_mismatch": ("value", "1"),
        "invalid_exact_evm_payload_authorization_valid_before": ("validBefore", str(now + 3)),
        "invalid_exact_evm_payload_authorization_valid_after": ("validAfter", str(now + 60)),
    }
    ours = normalize_challenge(challenge_wire()).accepts[0]
    for reason, (field, value) in cases.items():
        bad = {**payload, "payload": {**payload["payload"]}}
        bad["payload"]["authorization"] = {**payload["payload"]["authorization"], field: value}
        assert sdk_verify(funded, bad, requirements).invalid_reason == reason
        assert verify_payment(bad, ours, now=now).invalid_reason == reason
    forged = {**payload, "payload": {**payload["payload"]}}
    sig = bytearray(bytes.fromhex(payload["payload"]["signature"][2:]))
    sig[3] ^= 1
    forged["payload"]["signature"] = "0x" + sig.hex()
    assert verify_payment(forged, ours, now=now).invalid_reason == (
        "invalid_exact_evm_payload_signature"
    )
    assert sdk_verify(funded, forged, requirements).invalid_reason == (
        "invalid_exact_evm_payload_signature"
    )


def test_sdk_check_misses_the_sepolia_domain_trap_but_chain_and_we_catch_it(signer, funded):
    # A challenge claiming "USDC" on mainnet, signed with that wrong domain (as the SDK
    # client would). We refuse to sign it at all; a hand-made one fails the chain stand-in.
    from x402lab.x402 import Authorization, PaymentPayload, authorization_digest
    from x402lab.x402.tokens import Token

    wire = challenge_wire(entry(extra={"name": "USDC", "version": "2"}))
    now = int(time.time())
    requirements = normalize_challenge(wire).accepts[0]
    auth = Authorization(signer.address, PAY_TO, 10000, now - 600, now + 300, NONCE)
    wrong = Token("eip155:8453", 8453, BASE_USDC.address, "USDC", "2", 6, "USDC")
    sig = signer.sign_digest(authorization_digest(wrong, auth))
    payload = PaymentPayload(2, requirements.raw, "0x" + sig.hex(), auth).to_wire()
    result = sdk_verify(funded, payload, requirements.to_wire())
    assert result.invalid_reason == "invalid_exact_evm_payload_signature"
    assert verify_payment(payload, requirements, now=now).invalid_reason == (
        "invalid_exact_evm_payload_signature"
    )


def sdk_client() -> x402ClientSync:
    client = x402ClientSync()
    client.register(
        "eip155:8453", ExactEvmClientScheme(EthAccountSigner(Account.from_key(TEST_KEY_HEX)))
    )
    return client


def test_we_accept_payloads_made_by_the_sdk_client():
    wire = challenge_wire(extensions={"bazaar": {"info": {"x": 1}, "schema": {}}})
    payload = sdk_client().create_payment_payload(SdkRequired.model_validate(wire))
    payload_wire = payload.model_dump(by_alias=True, exclude_none=True)
    requirements = normalize_challenge(wire).accepts[0]
    result = verify_payment(payload_wire, requirements, now=int(time.time()))
    assert result.is_valid, result.invalid_reason
    assert result.payer == KeySigner(TEST_KEY_HEX).address
    assert payload_wire["extensions"] == wire["extensions"]
    # The SDK client signs validAfter=0 (we use now-600); both are valid.
    assert payload_wire["payload"]["authorization"]["validAfter"] == "0"


def test_sdk_client_drops_unknown_entry_fields_but_still_matches():
    raw = entry(description="v1-style field")
    wire = challenge_wire(raw)
    payload = sdk_client().create_payment_payload(SdkRequired.model_validate(wire))
    payload_wire = payload.model_dump(by_alias=True, exclude_none=True)
    assert "description" not in payload_wire["accepted"]
    requirements = normalize_challenge(wire).accepts[0]
    assert verify_payment(payload_wire, requirements, now=int(time.time())).is_valid


def test_sdk_default_spend_controls_cap_at_one_dollar():
    from x402.schemas.errors import NoMatchingRequirementsError

    client = sdk_client()
    over = challenge_wire(entry(amount="2000000"))
    with pytest.raises(NoMatchingRequirementsError):
        client.create_payment_payload(SdkRequired.model_validate(over))
    client.set_spend_controls(False)
    payload = client.create_payment_payload(SdkRequired.model_validate(over))
    requirements = normalize_challenge(over).accepts[0]
    wire = payload.model_dump(by_alias=True, exclude_none=True)
    assert verify_payment(wire, requirements, now=int(time.time())).is_valid

"""Offline verification of x402 "exact" payments, in the order and with the reason strings of
the official SDK facilitator. Nonce reuse and balances are the chain's business, not checked here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import coincurve

from x402lab.errors import ProtocolError
from x402lab.x402.address import checksum_address
from x402lab.x402.eip712 import authorization_digest
from x402lab.x402.keccak import keccak
from x402lab.x402.models import X402_VERSION, PaymentPayload, PaymentRequirements
from x402lab.x402.tokens import token_for

# Signatures with s above half the curve order are malleable copies; USDC's ecrecover refuses them.
_SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
_HALF_N = _SECP256K1_N // 2
# EIP-55 checksums cost a keccak each, and a server sees the same few payers again and again.
_checksum = lru_cache(maxsize=4096)(checksum_address)
# The SDK facilitator wants validBefore at least this far ahead, to leave time to settle.
VALID_BEFORE_MARGIN_SECONDS = 6

_PREFIX = "invalid_exact_evm_payload_"
INVALID_X402_VERSION = "invalid_x402_version"
INVALID_PAYLOAD = "invalid_payload"
UNSUPPORTED_SCHEME = "unsupported_scheme"
NETWORK_MISMATCH = "network_mismatch"
INVALID_PAYMENT_REQUIREMENTS = "invalid_payment_requirements"
MISSING_EIP712_DOMAIN = "missing_eip712_domain"
RECIPIENT_MISMATCH = _PREFIX + "recipient_mismatch"
VALUE_MISMATCH = _PREFIX + "authorization_value_mismatch"
VALID_BEFORE = _PREFIX + "authorization_valid_before"
VALID_AFTER = _PREFIX + "authorization_valid_after"
INVALID_SIGNATURE = _PREFIX + "signature"

# Fields of ``accepted`` that must equal the requirements, as the SDK resource server matches.
_MATCHED_FIELDS = ("scheme", "network", "amount", "asset", "payTo", "maxTimeoutSeconds")


def recover_address(digest: bytes, signature: bytes | str) -> str:
    """The checksummed address that signed the 32-byte ``digest``.

    ``signature`` is 65 bytes r‖s‖v (or 0x-hex of them) with v in {0, 1, 27, 28}.
    Raises ProtocolError for a malformed signature or one that recovers no key.
    """
    if isinstance(signature, str):
        text = signature[2:] if signature[:2] in ("0x", "0X") else signature
        try:
            signature = bytes.fromhex(text)
        except ValueError:
            raise ProtocolError("signature is not hex") from None
    if len(signature) != 65:
        raise ProtocolError(f"signature must be 65 bytes, got {len(signature)}")
    if len(digest) != 32:
        raise ProtocolError("digest must be 32 bytes")
    v = signature[64]
    if v in (27, 28):
        v -= 27
    if v not in (0, 1):
        raise ProtocolError(f"signature v must be 0, 1, 27 or 28, got {signature[64]}")
    try:
        public = coincurve.PublicKey.from_signature_and_message(
            signature[:64] + bytes((v,)), digest, hasher=None
        )
    except Exception as exc:
        raise ProtocolError("signature recovers no public key") from exc
    return _checksum(keccak(public.format(compressed=False)[1:])[-20:])


@dataclass(frozen=True)
class VerifyResult:
    """The outcome of verify_payment; ``invalid_reason`` is None when valid."""

    is_valid: bool
    invalid_reason: str | None
    payer: str | None

    def to_wire(self) -> dict[str, Any]:
        """The facilitator ``/verify`` response object."""
        out: dict[str, Any] = {"isValid": self.is_valid}
        if self.invalid_reason is not None:
            out["invalidReason"] = self.invalid_reason
        if self.payer is not None:
            out["payer"] = self.payer
        return out


def _invalid(reason: str, payer: str | None = None) -> VerifyResult:
    return VerifyResult(False, reason, payer)


def _accepted_matches(accepted: Mapping[str, Any], requirements: PaymentRequirements) -> bool:
    # Exact wire values (strings stay strings), against the verbatim entry; a field that
    # normalize_challenge filled may be absent, since the client echoes the raw entry.
    raw = requirements.raw
    wire = None  # built only for a field the verbatim entry lacks (rare)
    for key in _MATCHED_FIELDS:
        if key in raw:
            expected = raw[key]
        else:
            wire = wire or requirements.to_wire()
            expected = wire[key]
        if key in accepted:
            got = accepted[key]
            if got != expected or type(got) is not type(expected):
                return False
        elif key not in requirements.filled:
            return False
    if "extra" in requirements.raw:
        # The server's extra must be a subset of the echoed one (as the SDK matches).
        server_extra = requirements.raw["extra"]
        got_extra = accepted.get("extra")
        if not isinstance(got_extra, Mapping) or not isinstance(server_extra, Mapping):
            return False
        if any(k not in got_extra or got_extra[k] != v for k, v in server_extra.items()):
            return False
    return True


def _payer(address: str) -> str:
    try:
        return _checksum(address)
    except ValueError:
        return address


def verify_payment(
    payload: PaymentPayload | Mapping[str, Any], requirements: PaymentRequirements, *, now: int
) -> VerifyResult:
    """Check a payment against ``requirements`` at time ``now``; never raises for bad input.

    Returns VerifyResult with the first failed check's reason (docs/services.md, "Failure reasons").
    """
    if not isinstance(payload, PaymentPayload):
        if isinstance(payload, Mapping):
            version = payload.get("x402Version")
            if isinstance(version, int) and version != X402_VERSION:
                return _invalid(INVALID_X402_VERSION)
        try:
            payload = PaymentPayload.from_wire(payload)
        except ProtocolError:
            return _invalid(INVALID_PAYLOAD)
    auth = payload.authorization
    payer = _payer(auth.from_address)
    if payload.x402_version != X402_VERSION:
        return _invalid(INVALID_X402_VERSION, payer)
    accepted = payload.accepted
    if not isinstance(accepted, Mapping):
        return _invalid(INVALID_PAYLOAD, payer)
    scheme = accepted.get("scheme", "exact" if "scheme" in requirements.filled else None)
    if scheme != "exact" or requirements.scheme != "exact":
        return _invalid(UNSUPPORTED_SCHEME, payer)
    if accepted.get("network") != requirements.network:
        return _invalid(NETWORK_MISMATCH, payer)
    if not _accepted_matches(accepted, requirements):
        return _invalid(INVALID_PAYMENT_REQUIREMENTS, payer)
    extra = requirements.extra
    if not extra.get("name") or not extra.get("version"):
        return _invalid(MISSING_EIP712_DOMAIN, payer)
    if auth.to.lower() != requirements.pay_to.lower():
        return _invalid(RECIPIENT_MISMATCH, payer)
    if auth.value != requirements.amount:
        return _invalid(VALUE_MISMATCH, payer)
    if auth.valid_before < now + VALID_BEFORE_MARGIN_SECONDS:
        return _invalid(VALID_BEFORE, payer)
    if auth.valid_after > now:
        return _invalid(VALID_AFTER, payer)
    if not _signature_ok(payload, requirements):
        return _invalid(INVALID_SIGNATURE, payer)
    return VerifyResult(True, None, payer)


def _signature_ok(payload: PaymentPayload, requirements: PaymentRequirements) -> bool:
    # The digest uses the token's real domain from our table, never ``extra``: a "USDC"
    # (Sepolia) domain on mainnet would pass an extra-based check and fail on chain.
    token = token_for(requirements.network, requirements.asset)
    if token is None:
        return False
    try:
        signature = bytes.fromhex(payload.signature[2:])
        if len(signature) != 65 or int.from_bytes(signature[32:64], "big") > _HALF_N:
            return False
        digest = authorization_digest(token, payload.authorization)
        signer = recover_address(digest, signature)
    except (ValueError, ProtocolError):
        return False
    return signer.lower() == payload.authorization.from_address.lower()

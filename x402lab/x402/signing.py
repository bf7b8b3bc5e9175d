"""Signing x402 "exact" payments: a digest-signer protocol, a key-holding signer, sign_payment.

Time (``now``) and randomness (``nonce``) are arguments, so tests pin golden signatures
without patching anything.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any, NoReturn, Protocol, runtime_checkable

import coincurve

from x402lab.errors import ConfigError, PaymentRefused
from x402lab.x402._wire import ADDRESS_RE, NONCE_RE, copy_json
from x402lab.x402.address import checksum_address
from x402lab.x402.eip712 import authorization_digest
from x402lab.x402.keccak import keccak
from x402lab.x402.models import (
    X402_VERSION,
    Authorization,
    PaymentPayload,
    PaymentRequired,
    PaymentRequirements,
)
from x402lab.x402.tokens import token_for


@runtime_checkable
class DigestSigner(Protocol):
    """Anything that signs a 32-byte digest as 65 bytes r‖s‖v with v in {27, 28}."""

    address: str

    def sign_digest(self, digest: bytes) -> bytes: ...


class KeySigner:
    """A DigestSigner over a raw secp256k1 private key.

    The key is held only inside a coincurve object: repr and str show the address, pickling
    and copying raise TypeError, and errors never include the key.
    """

    __slots__ = ("_key", "address")

    def __init__(self, private_key: bytes | str) -> None:
        """Raises ConfigError when ``private_key`` is not 32 bytes (or 0x + 64 hex) in range."""
        try:
            if isinstance(private_key, str):
                text = private_key[2:] if private_key[:2] in ("0x", "0X") else private_key
                if len(text) != 64:
                    raise ValueError
                secret = bytes.fromhex(text)
            else:
                secret = bytes(private_key)
            if len(secret) != 32:
                raise ValueError
            key = coincurve.PrivateKey(secret)
        except Exception:
            # ``from None``: the original exception may carry the key material.
            raise ConfigError(
                "private key must be 32 bytes (or 0x + 64 hex digits) within the curve order"
            ) from None
        self._key = key
        public = key.public_key.format(compressed=False)[1:]
        self.address: str = checksum_address(keccak(public)[-20:])

    def sign_digest(self, digest: bytes) -> bytes:
        """65 bytes r‖s‖v (v in {27, 28}, low s) over the 32-byte ``digest``."""
        if len(digest) != 32:
            raise ValueError("digest must be 32 bytes")
        signature = self._key.sign_recoverable(digest, hasher=None)
        return signature[:64] + bytes((signature[64] + 27,))

    def __repr__(self) -> str:
        return f"KeySigner(address={self.address!r})"

    __str__ = __repr__

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        # pickle, copy.copy and copy.deepcopy all ask this (the class has no __copy__ or
        # __deepcopy__), so none of them can carry the key anywhere.
        raise TypeError("KeySigner holds a private key and cannot be pickled or copied")


def new_nonce() -> str:
    """A fresh EIP-3009 nonce: 0x + 64 hex digits from the OS CSPRNG."""
    return "0x" + secrets.token_hex(32)


def merge_extensions(server: Mapping[str, Any], client: Mapping[str, Any] | None) -> dict[str, Any]:
    """The server's extensions echoed unchanged, plus the client's additions.

    The extensions echo rule lets a client add to what it received but not delete or overwrite;
    raises ConfigError when ``client`` would overwrite a server value.
    """
    merged = copy_json(dict(server))
    if client:
        _merge_into(merged, client, "extensions")
    return merged


def _merge_into(target: dict[str, Any], extra: Mapping[str, Any], where: str) -> None:
    for key, value in extra.items():
        if key not in target:
            target[key] = copy_json(value)
        elif isinstance(target[key], dict) and isinstance(value, Mapping):
            _merge_into(target[key], value, f"{where}.{key}")
        elif target[key] != value:
            raise ConfigError(f"{where}.{key}: would overwrite the server's value")


def sign_payment(
    challenge: PaymentRequired,
    requirements: PaymentRequirements,
    signer: DigestSigner,
    *,
    now: int,
    nonce: str,
    valid_after_slack: int = 600,
    extensions: Mapping[str, Any] | None = None,
) -> PaymentPayload:
    """Spends money: signs an EIP-3009 authorization for ``requirements`` and returns the payload.

    Hashes with the token's real EIP-712 domain. Raises PaymentRefused when the scheme is not
    exact, the token is unknown, ``extra`` claims another domain, or payTo is not an address;
    ConfigError for a bad nonce or conflicting extensions. Run the policy checks
    (``select_requirements``) before calling this.
    """
    if requirements.scheme != "exact":
        raise PaymentRefused(f"scheme {requirements.scheme!r} not supported (only exact)")
    token = token_for(requirements.network, requirements.asset)
    if token is None:
        raise PaymentRefused(
            f"asset {requirements.asset[:42]} on {requirements.network} is not a known token"
        )
    extra = requirements.extra
    if extra.get("name") != token.name or extra.get("version") != token.version:
        raise PaymentRefused(
            f"challenge EIP-712 domain name={extra.get('name')!r} version={extra.get('version')!r}"
            f" differs from the real {token.symbol} domain on {token.network}"
            f" (name={token.name!r} version={token.version!r})"
        )
    if not ADDRESS_RE.fullmatch(requirements.pay_to):
        raise PaymentRefused(f"payTo {requirements.pay_to[:42]!r} is not an EVM address")
    if not NONCE_RE.fullmatch(nonce):
        raise ConfigError("nonce must be 0x + 64 hex digits")
    authorization = Authorization(
        from_address=signer.address,
        to=requirements.pay_to,
        value=requirements.amount,
        valid_after=max(0, now - valid_after_slack),
        valid_before=now + requirements.max_timeout_seconds,
        nonce=nonce,
    )
    signature = signer.sign_digest(authorization_digest(token, authorization))
    echoed: Mapping[str, Any] | None = None
    if extensions:
        echoed = merge_extensions(challenge.extensions, extensions)
    elif "extensions" in challenge.raw or challenge.extensions:
        # Echoed unchanged, so shared with the (frozen) challenge rather than copied: the
        # input schemas in it are the largest part of a payment.
        echoed = challenge.extensions
    # ``accepted`` and ``resource`` are echoed unchanged too, and shared the same way: a
    # payment is frozen like its challenge (``to_wire()`` hands out copies), and copying
    # them for every payment was a tenth of the signing time of a batch.
    return PaymentPayload(
        x402_version=X402_VERSION,
        accepted=requirements.raw,
        signature="0x" + signature.hex(),
        authorization=authorization,
        resource=challenge.raw.get("resource"),
        extensions=echoed,
    )

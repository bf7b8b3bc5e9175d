"""EIP-712 hashing of EIP-3009 ``TransferWithAuthorization`` messages.

Hand-packed rather than built through eth-account's typed-data encoder: every field is a
static 32-byte word, so ``abi.encode`` is plain concatenation, and the generic encoder is the
bottleneck of signing (see benchmarks/sign_throughput.py). Cross-checked in the tests.
"""

from __future__ import annotations

from functools import lru_cache

from x402lab.x402.keccak import keccak
from x402lab.x402.models import Authorization
from x402lab.x402.tokens import Token

DOMAIN_TYPE = "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
TRANSFER_WITH_AUTHORIZATION_TYPE = (
    "TransferWithAuthorization(address from,address to,uint256 value,"
    "uint256 validAfter,uint256 validBefore,bytes32 nonce)"
)
DOMAIN_TYPEHASH = keccak(DOMAIN_TYPE.encode("ascii"))
TRANSFER_WITH_AUTHORIZATION_TYPEHASH = keccak(TRANSFER_WITH_AUTHORIZATION_TYPE.encode("ascii"))

_UINT256_LIMIT = 1 << 256
_ZERO12 = bytes(12)


def _address_word(address: str) -> bytes:
    # Accepts any case: EIP-712 hashes the 20 bytes, not the checksum spelling.
    if len(address) != 42 or address[:2] not in ("0x", "0X"):
        raise ValueError(f"not a 0x address: {address[:44]!r}")
    return _ZERO12 + bytes.fromhex(address[2:])


def _uint_word(value: int) -> bytes:
    if not 0 <= value < _UINT256_LIMIT:
        raise ValueError("uint256 out of range")
    return value.to_bytes(32, "big")


@lru_cache(maxsize=64)
def domain_separator(token: Token) -> bytes:
    """The 32-byte EIP-712 domain separator of ``token``'s real domain (cached)."""
    return keccak(
        DOMAIN_TYPEHASH
        + keccak(token.name.encode("utf-8"))
        + keccak(token.version.encode("utf-8"))
        + _uint_word(token.chain_id)
        + _address_word(token.address)
    )


def authorization_struct_hash(auth: Authorization) -> bytes:
    """hashStruct(TransferWithAuthorization) of ``auth``; raises ValueError for bad fields."""
    nonce = auth.nonce
    if len(nonce) != 66 or nonce[:2] not in ("0x", "0X"):
        raise ValueError("nonce must be 0x + 64 hex digits")
    return keccak(
        TRANSFER_WITH_AUTHORIZATION_TYPEHASH
        + _address_word(auth.from_address)
        + _address_word(auth.to)
        + _uint_word(auth.value)
        + _uint_word(auth.valid_after)
        + _uint_word(auth.valid_before)
        + bytes.fromhex(nonce[2:])
    )


def authorization_digest(token: Token, auth: Authorization) -> bytes:
    """The 32-byte digest to sign: keccak(0x1901 ‖ domainSeparator ‖ hashStruct(auth)).

    Raises ValueError when an address, number or the nonce cannot be encoded.
    """
    return keccak(b"\x19\x01" + domain_separator(token) + authorization_struct_hash(auth))

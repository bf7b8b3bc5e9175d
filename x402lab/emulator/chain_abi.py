"""The slice of the USDC contract's ABI the emulated chain answers over JSON-RPC.

Selectors and event topics are computed from their signatures (keccak-256), never copied in
as constants. Encoding is the Solidity ABI for static types: every argument and result is one
32-byte word (an address left-padded with zeros, a uint256 big-endian, a bool as 0 or 1).
"""

from __future__ import annotations

from x402lab.x402.keccak import keccak

BALANCE_OF = "balanceOf(address)"
AUTHORIZATION_STATE = "authorizationState(address,bytes32)"
TRANSFER_EVENT = "Transfer(address,address,uint256)"
AUTHORIZATION_USED_EVENT = "AuthorizationUsed(address,bytes32)"
WORD = 32


def selector(signature: str) -> str:
    """The 4-byte function selector of ``signature`` as 0x-hex."""
    return "0x" + keccak(signature.encode()).hex()[:8]


def topic(signature: str) -> str:
    """The topic0 of the event ``signature`` (its keccak-256) as 0x-hex."""
    return "0x" + keccak(signature.encode()).hex()


BALANCE_OF_SELECTOR = selector(BALANCE_OF)
AUTHORIZATION_STATE_SELECTOR = selector(AUTHORIZATION_STATE)
TRANSFER_TOPIC = topic(TRANSFER_EVENT)
AUTHORIZATION_USED_TOPIC = topic(AUTHORIZATION_USED_EVENT)


class AbiError(ValueError):
    """Call data that does not decode as the function's arguments."""


def word_of_address(address: str) -> str:
    """A 20-byte address as a 32-byte word (0x-hex, lowercase)."""
    return "0x" + address.lower().removeprefix("0x").rjust(WORD * 2, "0")


def word_of_uint(value: int) -> str:
    """A uint256 as a 32-byte word (0x-hex)."""
    if not 0 <= value < 2**256:
        raise ValueError(f"not a uint256: {value}")
    return "0x" + value.to_bytes(WORD, "big").hex()


def word_of_bool(value: bool) -> str:
    return word_of_uint(1 if value else 0)


def split_call(data: str) -> tuple[str, list[bytes]]:
    """(selector, argument words) of 0x-hex call data. Raises AbiError."""
    text = data[2:] if data[:2] in ("0x", "0X") else data
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raise AbiError("call data is not hex") from None
    if len(raw) < 4:
        raise AbiError("call data shorter than a selector")
    body = raw[4:]
    if len(body) % WORD:
        raise AbiError("call arguments are not whole 32-byte words")
    words = [body[i : i + WORD] for i in range(0, len(body), WORD)]
    return "0x" + raw[:4].hex(), words


def address_arg(word: bytes) -> str:
    """A word holding an address (12 zero bytes, then 20). Raises AbiError."""
    if any(word[:12]):
        raise AbiError("address argument has dirty high bytes")
    return "0x" + word[12:].hex()


def bytes32_arg(word: bytes) -> str:
    return "0x" + word.hex()

"""EIP-55 checksummed addresses (mixed case that carries a checksum), from 20 bytes or hex.

Written here rather than imported from eth-utils: it was the one thing x402lab used from it,
and importing eth-utils (which brings pydantic) took about 0.2 s of CPU in every process that
signs or verifies a payment.
"""

from __future__ import annotations

import string

from x402lab.x402.keccak import keccak

_HEX = frozenset(string.hexdigits)


def checksum_address(address: bytes | str) -> str:
    """``address`` as ``0x`` and its 40 hex digits in EIP-55 case. Raises ValueError for
    anything but 20 bytes or 40 hex digits (``0x`` optional, any case)."""
    if isinstance(address, bytes):
        if len(address) != 20:
            raise ValueError(f"an address is 20 bytes, got {len(address)}")
        digits = address.hex()
    elif isinstance(address, str):
        digits = address[2:] if address[:2] in ("0x", "0X") else address
        if len(digits) != 40 or not _HEX.issuperset(digits):
            raise ValueError(f"not an address (40 hex digits): {address!r}")
        digits = digits.lower()
    else:
        raise ValueError(f"not an address: {address!r}")
    hashed = keccak(digits.encode("ascii")).hex()
    # A letter is upper case where the same nibble of the hash of the lower-case hex is >= 8.
    pairs = zip(digits, hashed[:40], strict=True)
    return "0x" + "".join(d.upper() if h in "89abcdef" else d for d, h in pairs)

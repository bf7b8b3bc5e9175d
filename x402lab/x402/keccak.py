"""Keccak-256, the hash of Ethereum signatures and addresses.

safe-pysha3's C Keccak when it is installed (a dependency on CPython): about 1.4 µs a hash,
where eth-hash's pycryptodome backend takes about 7.8 µs, most of it Python wrappers around
the same C code. A payment is hashed twice to be signed and twice more to be verified.
eth-hash otherwise.
"""

from __future__ import annotations

from collections.abc import Callable

from eth_hash.auto import keccak as _eth_hash_keccak

#: keccak256(b"") from the Keccak reference: a module named ``sha3`` that is something else
#: (NIST SHA3-256 pads differently and differs on every input) is not used.
_EMPTY = bytes.fromhex("c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470")


def _fast() -> Callable[[bytes], bytes] | None:
    try:
        from sha3 import keccak_256  # safe-pysha3
    except ImportError:
        return None
    try:
        if keccak_256(b"").digest() != _EMPTY:
            return None
    except Exception:  # noqa: BLE001 (some other module named sha3)
        return None

    def keccak(data: bytes) -> bytes:
        return keccak_256(data).digest()

    return keccak


keccak: Callable[[bytes], bytes] = _fast() or _eth_hash_keccak

"""Keys: a wallet signs EIP-712 digests and shows nothing but its address.

The private key is read only by the explicit constructors below, never at import. It never
appears in a repr, str, exception, pickle or file written by x402lab.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any, NoReturn

from x402lab.errors import ConfigError
from x402lab.x402.signing import KeySigner

DEFAULT_KEY_VARIABLE = "X402LAB_PRIVATE_KEY"


def _key_bytes(key: str | bytes) -> bytes:
    """Parse a private key from hex text or raw bytes; errors never repeat the key."""
    if isinstance(key, bytes | bytearray):
        raw = bytes(key)
    elif isinstance(key, str):
        text = key.strip()
        if text[:2].lower() == "0x":
            text = text[2:]
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raise ConfigError(f"private key is not hex ({len(text)} characters given)") from None
    else:
        raise ConfigError(f"private key must be hex text or bytes, not {type(key).__name__}")
    if len(raw) != 32:
        raise ConfigError(f"private key must be 32 bytes, got {len(raw)}")
    if not any(raw):
        raise ConfigError("private key must not be zero")
    return raw


class Wallet:
    """An EVM account that pays x402 challenges. Its repr shows the address only."""

    __slots__ = ("_signer", "_label")

    def __init__(self, signer: KeySigner, *, label: str = "") -> None:
        self._signer = signer
        self._label = label

    @classmethod
    def from_key(cls, key: str | bytes) -> Wallet:
        """Wallet from a 32-byte private key (hex, with or without 0x). Raises ConfigError."""
        return cls(KeySigner(_key_bytes(key)), label="key")

    @classmethod
    def from_env(cls, var: str = DEFAULT_KEY_VARIABLE) -> Wallet:
        """Wallet from the private key in environment variable ``var``. Raises ConfigError."""
        value = os.environ.get(var)
        if not value:
            raise ConfigError(f"environment variable {var} is not set (want a private key)")
        try:
            return cls(KeySigner(_key_bytes(value)), label=f"env:{var}")
        except ConfigError as exc:
            raise ConfigError(f"{var}: {exc}") from None

    @classmethod
    def from_keyfile(cls, path: str | os.PathLike[str], password: str) -> Wallet:
        """Wallet from an encrypted JSON keystore (V3). Raises ConfigError."""
        from eth_account import Account

        file = Path(path).expanduser()
        try:
            keystore = file.read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read keyfile {file}: {exc.strerror}") from None
        try:
            raw = bytes(Account.decrypt(keystore, password))
        except ValueError:
            raise ConfigError(
                f"cannot decrypt keyfile {file}: wrong password or not a keystore"
            ) from None
        return cls(KeySigner(_key_bytes(raw)), label=f"keyfile:{file.name}")

    @classmethod
    def create(cls) -> Wallet:
        """A new throwaway wallet with a random key (held in memory only)."""
        return cls(KeySigner(secrets.token_bytes(32)), label="throwaway")

    @property
    def address(self) -> str:
        """Checksummed address."""
        return self._signer.address

    @property
    def signer(self) -> KeySigner:
        """The digest signer used by the payment flow."""
        return self._signer

    def sign_digest(self, digest: bytes) -> bytes:
        """65-byte r‖s‖v signature of a 32-byte digest."""
        return self._signer.sign_digest(digest)

    def __repr__(self) -> str:
        return f"Wallet(address={self.address!r})"

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return f"<code>Wallet {self.address}</code>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Wallet) and other.address == self.address

    def __hash__(self) -> int:
        return hash(self.address)

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Wallet cannot be pickled: its private key never leaves memory")

    def __getstate__(self) -> NoReturn:
        raise TypeError("a Wallet cannot be pickled: its private key never leaves memory")

    def __deepcopy__(self, memo: dict[int, Any]) -> Wallet:
        return self

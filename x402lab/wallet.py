"""Keys: a wallet signs EIP-712 digests and shows nothing but its address.

The private key is read only by the explicit constructors below, never at import. It never
appears in a repr, str, exception, pickle or file written by x402lab. A wallet remembers
where its key came from (``Wallet.source``, never the key itself), so another process, such
as a Dask worker, can load the same wallet from the same place.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from x402lab.errors import ConfigError
from x402lab.x402.codec import MAX_JSON_DEPTH, deeper_than
from x402lab.x402.signing import KeySigner

DEFAULT_KEY_VARIABLE = "X402LAB_PRIVATE_KEY"
#: Set in the kernel of a plan (``x402lab.planning``): every ``connect()`` there rehearses, and
#: a keyfile is not opened (its password variable holds a stand-in there, docs/planning.md).
REHEARSAL_ENV = "X402LAB_REHEARSAL"


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


#: The key derivation work a keyfile may ask for: eth-keyfile's defaults (what
#: ``Account.encrypt`` writes). A keystore asking more (scrypt p=100000) would keep a process
#: busy for minutes; scrypt's n*r*p is capped as a whole, so geth's "light" files (p=6) open.
MAX_SCRYPT_N = 262_144
MAX_SCRYPT_R = 8
MAX_SCRYPT_WORK = MAX_SCRYPT_N * MAX_SCRYPT_R  # n * r * p
MAX_PBKDF2_ROUNDS = 1_000_000
MAX_DKLEN = 64


def _check_kdf(keystore: str, file: Path) -> None:
    """Raise ConfigError when the keystore's KDF parameters ask more work than the caps above
    (before any derivation runs); a keystore that is not JSON is left to the decryption."""
    try:
        if deeper_than(keystore.encode(), MAX_JSON_DEPTH) is not None:
            raise ValueError("nested too deeply")  # a keystore nests 3 levels
        data = json.loads(keystore)
    except (ValueError, RecursionError):
        raise ConfigError(f"cannot read keyfile {file}: not a JSON keystore") from None
    crypto = data.get("crypto") or data.get("Crypto") if isinstance(data, dict) else None
    if not isinstance(crypto, dict) or not isinstance(crypto.get("kdfparams"), dict):
        return
    kdf, params = crypto.get("kdf"), crypto["kdfparams"]

    def number(name: str) -> int:
        value = params.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"keyfile {file}: kdfparams.{name} is not a positive integer")
        return value

    asked: list[str] = []
    if kdf == "scrypt":
        n, r, p = number("n"), number("r"), number("p")
        if n > MAX_SCRYPT_N or r > MAX_SCRYPT_R or n * r * p > MAX_SCRYPT_WORK:
            asked.append(
                f"scrypt n={n} r={r} p={p} (at most n={MAX_SCRYPT_N}, r={MAX_SCRYPT_R} and"
                f" n*r*p={MAX_SCRYPT_WORK})"
            )
    elif kdf == "pbkdf2" and number("c") > MAX_PBKDF2_ROUNDS:
        asked.append(f"pbkdf2 c={params['c']} (at most {MAX_PBKDF2_ROUNDS})")
    if kdf in ("scrypt", "pbkdf2") and number("dklen") > MAX_DKLEN:
        asked.append(f"dklen={params['dklen']} (at most {MAX_DKLEN})")
    if asked:
        raise ConfigError(
            f"keyfile {file} asks for more key derivation work than x402lab allows:"
            f" {'; '.join(asked)}. Re-encrypt it with the defaults"
            " (eth_account.Account.encrypt(key, password)) or load the key another way"
        )


@dataclass(frozen=True)
class WalletSource:
    """Where a wallet's key was read from, never the key: ``kind`` is ``"env"`` (``name`` the
    variable), ``"keyfile"`` (``name`` the file; ``password_env`` the variable holding its
    password, None when the password was given as text), ``"key"`` (``from_key``) or
    ``"created"`` (``create``)."""

    kind: str
    name: str = ""
    password_env: str | None = None

    @property
    def reloadable(self) -> bool:
        """Whether another process can load the same wallet from here (an environment
        variable, or a keyfile whose password is in an environment variable)."""
        return self.kind == "env" or (self.kind == "keyfile" and self.password_env is not None)

    def load(self) -> Wallet:
        """The wallet this source names, read again in this process. Raises ConfigError for a
        source that cannot be read again (``why_not_reloadable`` says why)."""
        if self.kind == "env":
            return Wallet.from_env(self.name)
        if self.kind == "keyfile" and self.password_env is not None:
            return Wallet.from_keyfile(self.name, password_env=self.password_env)
        raise ConfigError(self.why_not_reloadable())

    def why_not_reloadable(self) -> str:
        """What to use instead, for a source another process cannot read again ("" if it can)."""
        use = (
            "load it with Wallet.from_env('VAR') (the key in an environment variable every"
            " worker has) or Wallet.from_keyfile(path, password_env='VAR')"
        )
        if self.kind == "key":
            return f"a wallet made with Wallet.from_key() cannot be loaded elsewhere: {use}"
        if self.kind == "created":
            return (
                "a wallet made with Wallet.create() (or connect()'s throwaway wallet) exists in"
                f" this process only: {use}"
            )
        if self.kind == "keyfile" and self.password_env is None:
            return (
                f"the keyfile {self.name} was opened with a password given as text, which is"
                " never passed on: use Wallet.from_keyfile(path, password_env='VAR') with the"
                " password in an environment variable"
            )
        return ""


class Wallet:
    """An EVM account that pays x402 challenges. Its repr shows the address only."""

    __slots__ = ("_signer", "_source")

    def __init__(self, signer: KeySigner, *, source: WalletSource | None = None) -> None:
        self._signer = signer
        self._source = source if source is not None else WalletSource("key")

    @classmethod
    def from_key(cls, key: str | bytes) -> Wallet:
        """Wallet from a 32-byte private key (hex, with or without 0x). Raises ConfigError."""
        return cls(KeySigner(_key_bytes(key)), source=WalletSource("key"))

    @classmethod
    def from_env(cls, var: str = DEFAULT_KEY_VARIABLE) -> Wallet:
        """Wallet from the private key in environment variable ``var``. Raises ConfigError."""
        value = os.environ.get(var)
        if not value:
            raise ConfigError(f"environment variable {var} is not set (want a private key)")
        try:
            return cls(KeySigner(_key_bytes(value)), source=WalletSource("env", var))
        except ConfigError as exc:
            raise ConfigError(f"{var}: {exc}") from None

    @classmethod
    def from_keyfile(
        cls,
        path: str | os.PathLike[str],
        password: str | None = None,
        *,
        password_env: str | None = None,
    ) -> Wallet:
        """Wallet from an encrypted JSON keystore (V3), with its ``password`` or the name of
        the environment variable that holds it (``password_env``: the wallet can then be
        loaded again elsewhere, e.g. by Dask workers). In a plan's rehearsal the file is not
        read: a throwaway wallet stands in (``connect()`` replaces it there anyway). Raises
        ConfigError."""
        from eth_account import Account

        if (password is None) == (password_env is None):
            raise ConfigError("from_keyfile takes a password or password_env='VAR', one of them")
        if password_env is not None:
            password = os.environ.get(password_env)
            if password is None:
                raise ConfigError(
                    f"environment variable {password_env} is not set (want the keyfile's password)"
                )
        assert password is not None
        file = Path(path).expanduser().absolute()
        source = WalletSource("keyfile", str(file), password_env)
        if os.environ.get(REHEARSAL_ENV):
            return cls(KeySigner(secrets.token_bytes(32)), source=source)
        try:
            keystore = file.read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read keyfile {file}: {exc.strerror}") from None
        _check_kdf(keystore, file)
        try:
            raw = bytes(Account.decrypt(keystore, password))
        except ValueError:
            raise ConfigError(
                f"cannot decrypt keyfile {file}: wrong password or not a keystore"
            ) from None
        return cls(KeySigner(_key_bytes(raw)), source=source)

    @classmethod
    def create(cls) -> Wallet:
        """A new throwaway wallet with a random key (held in memory only)."""
        return cls(KeySigner(secrets.token_bytes(32)), source=WalletSource("created"))

    @property
    def source(self) -> WalletSource:
        """Where the key was read from (never the key): what another process needs to load
        this wallet again."""
        return self._source

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

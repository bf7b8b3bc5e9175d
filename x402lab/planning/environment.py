"""The environment of a plan's kernel: the user's, with every key and password replaced.

A notebook may leave rehearsal on purpose or by accident (it pops ``X402LAB_REHEARSAL``, or
signs with a wallet of its own, outside ``connect()``). Whatever it does, the kernel a plan
starts holds no key of the user's to sign with: each variable whose value is a private key
(32 bytes in hex) gets a stand-in key, a fresh random one, so ``Wallet.from_env()`` still
works in rehearsal and signs for nobody; each variable whose name says it holds a secret
(``PASSWORD``, ``PASSPHRASE``, ``SECRET``, ``MNEMONIC``, ``KEYFILE`` ...: a keyfile's password
given as ``password_env=``) gets a random stand-in, so a keyfile cannot be opened through
it. A password written in the notebook itself is not the environment's: the plan cannot hide
it (docs/planning.md says so).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping

_HEX_KEY = re.compile(r"(0[xX])?[0-9a-fA-F]{64}")
_SECRET_NAME = re.compile(
    r"PRIVATE|SECRET|MNEMONIC|SEED_?PHRASE|PASSPHRASE|PASSWORD|PASSWD|_PASS$|^PASS_|KEYFILE|KEYSTORE",
    re.IGNORECASE,
)


def _is_key(value: str) -> bool:
    return _HEX_KEY.fullmatch(value.strip()) is not None


def stand_in_key() -> str:
    """A fresh random private key in hex (0x...), a key of nobody's."""
    return "0x" + secrets.token_hex(32)


def without_credentials(environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``environ`` with every private key and secret replaced by a stand-in (see the module
    docstring), and the names of the variables replaced."""
    env: dict[str, str] = {}
    replaced: list[str] = []
    for name, value in environ.items():
        keyish = _is_key(value) or name.upper().endswith("PRIVATE_KEY")
        if keyish:
            env[name] = stand_in_key()
        elif _SECRET_NAME.search(name):
            env[name] = "stand-in-" + secrets.token_hex(16)
        else:
            env[name] = value
            continue
        replaced.append(name)
    return env, sorted(replaced)

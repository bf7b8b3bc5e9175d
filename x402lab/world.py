"""The embedded world of a ledger: what ``connect(ledger=path)`` with no address continues.

The embedded emulator's rehearsal (its throwaway wallet, its chain, its media jobs) lasts as
long as the ledger it paid into: it is kept in a private folder beside the ledger
(``<ledger file>.world/``, 0700, its files 0600). ``world.json`` holds the world's id and its
wallet's key (a throwaway key of the emulator's chain, never a real one); the emulator keeps
its chain and jobs there too (``emulator.journal``). The stores of the ledger that belong to
one service (media jobs, owned reports) are keyed by the world's stable names
(``emulator:<id>/gateway``), never by the emulator's address, which changes with every
process. With no ledger given, ``connect()`` makes a new throwaway world each time.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from x402lab.errors import ConfigError
from x402lab.private import private_folder, write_private
from x402lab.routes import GATEWAY, REPORTS
from x402lab.wallet import Wallet

FOLDER_SUFFIX = ".world"
WORLD_FILE = "world.json"


@dataclass(frozen=True)
class World:
    """One embedded world: its folder, id and wallet (``repr`` shows no key)."""

    folder: Path
    id: str
    wallet: Wallet = field(repr=False)

    @classmethod
    def beside(cls, ledger_path: str | os.PathLike[str]) -> World:
        """The world of the ledger at ``ledger_path``, created on first use (processes that
        start together agree on one: the first file written wins). Raises ConfigError for a
        world file that cannot be read."""
        ledger_path = Path(ledger_path)
        folder = private_folder(ledger_path.with_name(ledger_path.name + FOLDER_SUFFIX))
        file = folder / WORLD_FILE
        if not file.exists():
            _create(file)
        try:
            data = json.loads(file.read_text())
            return cls(folder, str(data["id"]), Wallet.from_key(str(data["key"])))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"the embedded world beside the ledger cannot be read ({file}:"
                f" {type(exc).__name__}); move that folder away to start a new world"
            ) from None

    @property
    def names(self) -> dict[str, str]:
        """The stable name of each service of this world (for the ledger's stores)."""
        return {GATEWAY: f"emulator:{self.id}/{GATEWAY}", REPORTS: f"emulator:{self.id}/{REPORTS}"}


def _create(file: Path) -> None:
    """Write a new world file unless one appears meanwhile (a hard link never replaces)."""
    data: dict[str, Any] = {
        "id": secrets.token_hex(8),
        "key": "0x" + secrets.token_hex(32),
        "created": time.time(),
        "note": "the throwaway wallet of x402lab's embedded emulator; not a real key",
    }
    draft = write_private(file.with_name(f".{file.name}.{os.getpid()}.draft"), json.dumps(data))
    try:
        os.link(draft, file)
    except FileExistsError:
        pass  # another process created it first: its world is the one
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(draft)

"""The emulator's state on disk: an append-only journal of JSON events, one a line.

With ``EmulatorSettings(state_dir=...)`` the chain (``chain.jsonl``: its genesis, fundings and
settled transfers) and the gateway's media jobs (``jobs.jsonl``) write each change as it
happens, and a later emulator on the same folder replays them: the same balances, used
nonces, transfers and jobs. (``connect(ledger=path)`` with no address keeps its embedded
world this way beside the ledger.) Each event is one write of one line, flushed before the
change is answered, so a process killed at any moment leaves every answered change on disk;
a torn last line (a kill mid-write) is cut off on replay. The files are private (0600 in a
0700 folder).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from x402lab.private import private_file

CHAIN_FILE = "chain.jsonl"
JOBS_FILE = "jobs.jsonl"


class Journal:
    """An append-only, private file of JSON events. Thread-safe."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = private_file(path)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Journal({str(self.path)!r})"

    def read(self) -> list[dict[str, Any]]:
        """Every whole event, oldest first. A torn last line (its writer was killed
        mid-write; never answered) is cut off, so the next event starts a line of its own."""
        events = []
        whole = 0
        with open(self.path, "rb") as handle:
            for line in handle:
                if not line.endswith(b"\n"):
                    break
                whole += len(line)
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    events.append(event)
        if whole < self.path.stat().st_size:
            with self._lock:
                os.truncate(self.path, whole)
        return events

    def append(self, event: dict[str, Any]) -> None:
        """Write ``event`` as one line (one ``write`` of an ``O_APPEND`` file, so lines of
        processes sharing the file never interleave)."""
        line = (json.dumps(event, separators=(",", ":")) + "\n").encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)


def journal_of(state_dir: str | os.PathLike[str] | None, name: str) -> Journal | None:
    """The journal ``name`` of ``state_dir``, or None when the emulator keeps no state."""
    return Journal(Path(state_dir) / name) if state_dir is not None else None

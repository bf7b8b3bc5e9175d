"""What a rehearsing kernel tells the planner: one JSON object a line, appended to a file.

The kernel appends (``Recorder``) and the executor reads what was added while each cell ran
(``read_new``), so every priced request lands in the cell that sent it. Two kinds of line:

- ``{"kind": "connect", ...}``: a ``connect()`` in rehearsal (``lab``: its order in the
  kernel), with the budget it runs on (name, cap, what its ledger says is left, and which
  ledger: two labs on one ledger with one budget name share it) and what the rehearsal could
  not see;
- ``{"kind": "call", ...}``: one paid request, priced by the target service's own challenge
  (``amount_atomic``), exact unless its body or its existence depends on an answer the
  rehearsal cannot have (``depends_on``, ``reasked``; ``high_atomic`` bounds it when it can),
  with the lab that paid it and the line of the cell that sent it.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from x402lab import wallet

#: The environment variable that switches ``connect()`` into rehearsal: the path of the file
#: the kernel appends its records to. Set by the planner for the kernel it starts.
REHEARSAL_ENV = wallet.REHEARSAL_ENV


@dataclass(frozen=True)
class Connected:
    """A ``connect()`` of the notebook, rehearsed: ``lab`` counts the kernel's labs from 1;
    ``ledger`` names the ledger its budget lives in (labs on one ledger share a budget of the
    same name, as in the real run)."""

    gateway: str | None
    reports: str | None
    budget: str
    budget_atomic: int | None
    left_atomic: int | None
    per_call_atomic: int | None
    notes: list[str] = field(default_factory=list)
    lab: int = 0
    ledger: str = ""
    kind: str = "connect"

    @property
    def budget_key(self) -> tuple[str, str]:
        """Which budget this is: its name in its ledger."""
        return self.ledger, self.budget


@dataclass(frozen=True)
class PricedCall:
    """One paid request of the notebook, priced by its target's challenge, not paid.

    ``seq``: its order among the kernel's paid requests; ``depends_on``: the ``seq`` of the
    paid requests whose rehearsed answers its body holds; ``reasked``: a typed batch asking
    again rows whose answer did not validate (it exists because of an answer);
    ``high_atomic``: the target's price of the same request with each of those answers at
    its longest (None when no bound is known); ``refused``: why the rehearsal's emulator did
    not answer it (the notebook's later cells then lack its answer); ``lab``: the
    ``Connected.lab`` that paid it; ``line``: the line of the running cell (counted from 1)
    whose statement sent it, None when no cell's code was running (a thread of its own).
    """

    seq: int
    service: str
    method: str
    path: str
    amount_atomic: int
    depends_on: list[int] = field(default_factory=list)
    reasked: bool = False
    high_atomic: int | None = None
    refused: str | None = None
    lab: int = 0
    line: int | None = None
    kind: str = "call"

    @property
    def exact(self) -> bool:
        return not self.depends_on and not self.reasked


Record = Connected | PricedCall


class Recorder:
    """Appends records to the rehearsal's file (thread-safe; each line flushed as written)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def write(self, record: Record) -> None:
        line = json.dumps(asdict(record), separators=(",", ":")) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(line)


def read_new(path: Path, offset: int) -> tuple[list[Record], int]:
    """The records appended to ``path`` after byte ``offset``, and the new offset (a line
    still being written is left for the next read)."""
    if not path.exists():
        return [], offset
    with path.open("rb") as source:
        source.seek(offset)
        data = source.read()
    end = data.rfind(b"\n") + 1
    found: list[Record] = []
    for line in data[:end].splitlines():
        if line.strip():
            found.append(_record(json.loads(line)))
    return found, offset + end


def _record(data: dict[str, Any]) -> Record:
    kind = data.pop("kind", None)
    if kind == "connect":
        return Connected(**data)
    if kind == "call":
        return PricedCall(**data)
    raise ValueError(f"unknown rehearsal record kind {kind!r}")

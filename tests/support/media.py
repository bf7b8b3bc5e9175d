"""Constants and helpers shared by the media job tests (``from support.media import ...``)."""

from __future__ import annotations

from typing import Any

# A fixed test key (not secret, funded only on the emulator's in-memory chain).
TEST_KEY = "0x" + "6d" * 32
MUSIC = {"model": "ace-step-15", "prompt": "calm piano over soft rain", "duration_seconds": 60}
FAST_POLL = 0.05


def queue_payments(lab: Any, path: str) -> Any:
    """The ledger rows of ``path`` as a DataFrame."""
    frame = lab.ledger.to_pandas()
    return frame[frame["path"] == path]

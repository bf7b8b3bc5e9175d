"""Constants and helpers of the batch tests (importable: conftest puts this folder on the path)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from x402lab.emulator.server import RunningEmulator

CHEAP = "zai-org-glm-4.7-flash"  # every short chat costs the minimum charge
PRICEY = "openai-gpt-54-pro"  # prices well above the minimum, set by max_tokens
EMBED = "text-embedding-3-small"  # takes dimensions=


def transfers_per_key(lab: Any, emulator: RunningEmulator) -> Counter[str | None]:
    """How many chain transfers settled for each request key (through the ledger's nonces)."""
    key_of = {
        row["nonce"].lower(): row["request_key"]
        for row in lab.ledger.rows()
        if row["nonce"] is not None
    }
    return Counter(key_of.get(t.nonce.lower()) for t in emulator.chain.transfers())


def settled_atomic(lab: Any) -> int:
    """Settled spend in the lab's ledger."""
    return sum(r["amount_atomic"] for r in lab.ledger.rows() if r["status"] == "settled")


def chain_atomic(emulator: RunningEmulator) -> int:
    """Everything that moved on the emulator's chain."""
    return sum(t.amount_atomic for t in emulator.chain.transfers())

"""Constants and helpers of the batch tests (``from support.batch import ...``)."""

from __future__ import annotations

from collections import Counter
from itertools import combinations
from typing import Any

from x402lab.emulator.server import RunningEmulator
from x402lab.gateway import request_key

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


def texts_per_transfer(
    lab: Any, emulator: RunningEmulator, texts: list[str], *, model: str, **params: Any
) -> list[tuple[str, ...]]:
    """The texts each chain transfer paid for, read through the ledger's nonce and request key.

    A request may carry any in-order selection of ``texts`` (one as a string, several as a
    list: the wire shape). A transfer matching none fails the test.
    """
    params = {"encoding_format": "base64", **params}  # what a batch asks for by default
    groups: dict[str, tuple[str, ...]] = {}
    for size in range(1, len(texts) + 1):
        for group in combinations(texts, size):
            body = {"model": model, "input": group[0] if size == 1 else list(group), **params}
            groups[request_key("POST", "/api/v1/embeddings", body)] = group
    key_of = {
        row["nonce"].lower(): row["request_key"]
        for row in lab.ledger.rows()
        if row["nonce"] is not None
    }
    paid = []
    for transfer in emulator.chain.transfers():
        key = key_of.get(transfer.nonce.lower())
        assert key in groups, f"transfer {transfer.tx_hash} is no request of these texts"
        paid.append(groups[key])
    return paid

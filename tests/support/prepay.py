"""Helpers for the prepay tests: what a cheap chat is, the emulator's counters, restarting an
emulator on the same addresses with other settings (an operator changing a price), and the
money checks every test ends with."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

import httpx

from x402lab.emulator.server import RunningEmulator, start_emulator
from x402lab.emulator.settings import EmulatorSettings, Faults
from x402lab.transport import RetryPolicy

KEY = "0x" + "5c" * 32
CHAT_MODEL = "zai-org-glm-4.7-flash"
CHAT = "/api/v1/chat/completions"
FAST = RetryPolicy(attempts=6, base_delay_s=0.01, max_delay_s=0.05)
MIN_ATOMIC = 10_000  # the emulator's default minimum charge, 0.01 USD


def settings(**changes: Any) -> EmulatorSettings:
    """Emulator settings; fault names go into ``faults`` (quick Retry-After)."""
    fault_names = {f.name for f in dataclasses.fields(Faults)}
    faults = {k: changes.pop(k) for k in list(changes) if k in fault_names}
    faults.setdefault("retry_after_s", 0.02)
    return EmulatorSettings(job_seconds=0.2, faults=Faults(**faults), **changes)


def restart(emulator: RunningEmulator, **changes: Any) -> RunningEmulator:
    """Stop ``emulator`` and start one with other settings on the same addresses and the same
    chain: what a client sees when the operator changes a price (or the payee)."""
    ports = [urlsplit(url).port for url in (emulator.gateway_url, emulator.reports_url)]
    chain_port = urlsplit(emulator.chain_url).port
    emulator.stop()
    return start_emulator(
        settings(**changes),
        gateway_port=ports[0] or 0,
        reports_port=ports[1] or 0,
        chain_port=chain_port or 0,
        chain=emulator.chain,
    )


def gate(url: str) -> dict[str, Any]:
    """The payment counters of the gateway at ``url`` (/api/x402/stats)."""
    return httpx.get(f"{url}/api/x402/stats").json()["payments"]


def report_gate(emulator: RunningEmulator) -> dict[str, Any]:
    return emulator.reports_app.state.gate.stats()


def chat(lab: Any, prompt: str, **kwargs: Any) -> Any:
    kwargs.setdefault("max_tokens", 8)
    return lab.chat(prompt, model=CHAT_MODEL, **kwargs)


def check_money(lab: Any, chain: Any) -> list[dict[str, Any]]:
    """The money invariants, from the chain and the ledger: every nonce settled once, every
    transfer has a ledger row that says settled (or unknown: an answer lost), no request key
    settled twice, and every settled row is a transfer. Returns the ledger rows."""
    rows = lab.ledger.rows()
    by_nonce = {row["nonce"].lower(): row for row in rows if row["nonce"]}
    transfers = chain.transfers()
    nonces = Counter(t.nonce.lower() for t in transfers)
    assert all(n == 1 for n in nonces.values()), "a nonce settled twice"
    keys: Counter[str] = Counter()
    for transfer in transfers:
        row = by_nonce.get(transfer.nonce.lower())
        assert row is not None, "a transfer without a ledger row"
        assert row["status"] in ("settled", "unknown"), row
        assert row["amount_atomic"] == transfer.amount_atomic
        keys[row["request_key"]] += 1
    assert all(n == 1 for n in keys.values()), f"a request settled twice: {keys}"
    settled = {row["nonce"].lower() for row in rows if row["status"] == "settled"}
    assert settled <= set(nonces), "a settled row without a transfer"
    return rows

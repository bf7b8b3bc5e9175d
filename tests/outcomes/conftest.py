"""Fixtures for payment outcomes: an emulator with chosen faults, Labs on it with or without
its chain, and a ledger file in tmp_path shared by the Labs (and processes) of one test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.outcomes import CHAT_MODEL, FAST, KEY

import x402lab as xl
from x402lab.emulator.server import RunningEmulator, start_emulator
from x402lab.emulator.settings import EmulatorSettings, Faults

__all__ = ["CHAT_MODEL", "FAST", "KEY"]


@pytest.fixture
def start() -> Iterator[Callable[..., RunningEmulator]]:
    """``start(seed=0, **faults)``: an emulator with those faults (stopped after the test)."""
    running: list[RunningEmulator] = []

    def _start(seed: int = 0, **faults: float) -> RunningEmulator:
        faults.setdefault("retry_after_s", 0.02)
        settings = EmulatorSettings(job_seconds=0.2, seed=seed, faults=Faults(**faults))
        emulator = start_emulator(settings)
        running.append(emulator)
        return emulator

    yield _start
    for emulator in running:
        emulator.stop()


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.sqlite"


@pytest.fixture
def lab_for(ledger_path: Path) -> Iterator[Callable[..., Any]]:
    """``lab_for(emulator, chain=True, **options)``: a sync Lab with the fixed wallet, on
    the shared ledger; ``chain=False`` leaves out the chain RPC address, a string gives
    another one."""
    labs: list[Any] = []

    def _lab(emulator: RunningEmulator, *, chain: bool | str = True, **options: Any) -> Any:
        options.setdefault("budget", xl.Budget(usd=5.0, name="outcomes"))
        options.setdefault("retry", FAST)
        options.setdefault("ledger", ledger_path)
        url = chain if isinstance(chain, str) else emulator.chain_url if chain else None
        lab = xl.connect(
            emulator.gateway_url,
            emulator.reports_url,
            wallet=xl.Wallet.from_key(KEY),
            chain_rpc_url=url,
            **options,
        )
        labs.append(lab)
        return lab

    yield _lab
    for lab in labs:
        lab.close()


@pytest.fixture(autouse=True)
def _no_chain_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("X402LAB_CHAIN_RPC_URL", raising=False)

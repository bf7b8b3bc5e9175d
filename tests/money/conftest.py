"""Fixtures for the money invariants: an emulator with chosen faults and a Lab paying it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

import x402lab as xl
from x402lab.emulator.server import RunningEmulator, start_emulator
from x402lab.emulator.settings import EmulatorSettings, Faults

KEY = "0x" + "5a" * 32
CHAT_MODEL = "zai-org-glm-4.7-flash"


@pytest.fixture
def start() -> Iterator[Callable[..., RunningEmulator]]:
    """Start an emulator with the given faults (stopped after the test)."""
    running: list[RunningEmulator] = []

    def _start(**faults: float) -> RunningEmulator:
        emulator = start_emulator(EmulatorSettings(job_seconds=0.2, faults=Faults(**faults)))
        running.append(emulator)
        return emulator

    yield _start
    for emulator in running:
        emulator.stop()


@pytest.fixture
def lab_for(tmp_path) -> Iterator[Callable[..., object]]:
    """A sync Lab on a given emulator, with a fixed wallet and a ledger in tmp_path."""
    labs: list[object] = []

    def _lab(emulator: RunningEmulator, budget: xl.Budget | None = None, **options) -> object:
        lab = xl.connect(
            emulator.gateway_url,
            emulator.reports_url,
            wallet=xl.Wallet.from_key(KEY),
            budget=budget or xl.Budget(usd=5.0),
            ledger=tmp_path / "ledger.sqlite",
            **options,
        )
        labs.append(lab)
        return lab

    yield _lab
    for lab in labs:
        lab.close()

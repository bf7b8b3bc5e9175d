"""Fixtures for paying with the first request: emulators with chosen settings (restartable on
the same addresses), and Labs on them with a fixed wallet and a ledger in tmp_path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.prepay import FAST, KEY, settings

import x402lab as xl
from x402lab.emulator.server import RunningEmulator, start_emulator


@pytest.fixture
def start() -> Iterator[Callable[..., RunningEmulator]]:
    """``start(**settings_and_faults)``: an emulator, stopped after the test (a restarted one
    is registered with ``start.keep``)."""
    running: list[RunningEmulator] = []

    def _start(**changes: Any) -> RunningEmulator:
        emulator = start_emulator(settings(**changes))
        running.append(emulator)
        return emulator

    _start.keep = running.append  # type: ignore[attr-defined]
    yield _start
    for emulator in running:
        emulator.stop()


@pytest.fixture
def lab_on(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``lab_on(emulator, **connect_options)``: a sync Lab with the fixed wallet."""
    labs: list[Any] = []

    def _lab(emulator: RunningEmulator, **options: Any) -> Any:
        options.setdefault("budget", xl.Budget(usd=5.0, name="prepay"))
        options.setdefault("retry", FAST)
        options.setdefault("ledger", tmp_path / f"ledger-{len(labs)}.sqlite")
        lab = xl.connect(
            emulator.gateway_url,
            emulator.reports_url,
            wallet=xl.Wallet.from_key(KEY),
            chain_rpc_url=emulator.chain_url,
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

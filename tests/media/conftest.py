"""Fixtures of the media job tests: Labs on an emulator with short jobs, over real sockets.

``connect_lab(emulator, ledger)`` plays one notebook kernel: a sync Lab with a fixed wallet on
a given ledger file. Two of them on the same ledger are a kernel restart. Every Lab is closed
after the test; emulators come from the shared ``emulator_factory`` fixture.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.media import TEST_KEY

import x402lab as xl


@pytest.fixture
def wallet() -> xl.Wallet:
    return xl.Wallet.from_key(TEST_KEY)


@pytest.fixture
def connect_lab(wallet: xl.Wallet) -> Iterator[Callable[..., Any]]:
    """``connect_lab(emulator, ledger_path, **options)``: a sync Lab closed after the test."""
    made: list[Any] = []

    def connect(emulator: Any, ledger: Path, **options: Any) -> Any:
        lab = xl.connect(
            gateway_url=emulator.gateway_url,
            reports_url=emulator.reports_url,
            wallet=wallet,
            ledger=ledger,
            **options,
        )
        made.append(lab)
        return lab

    yield connect
    for lab in made:
        lab.close()


@pytest.fixture
def lab(emulator: Any, connect_lab: Callable[..., Any], tmp_path: Path) -> Any:
    """A sync Lab on the shared fast-jobs emulator, with its ledger in ``tmp_path``."""
    return connect_lab(emulator, tmp_path / "ledger.sqlite")

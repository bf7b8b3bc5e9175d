"""Fixtures for the batch tests: a Lab on an emulator the test can inspect (its chain)."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import x402lab as xl
from x402lab.emulator.server import RunningEmulator

LabFactory = Callable[..., Any]


@pytest.fixture
def lab_factory(tmp_path: Path) -> Iterator[LabFactory]:
    """``lab_factory(emulator, usd=..., key=..., ledger=...)``: a sync Lab on ``emulator``
    with its own wallet (or ``key``) and a ledger in tmp_path; closed after the test."""
    labs: list[Any] = []

    def factory(
        emulator: RunningEmulator,
        *,
        usd: float | None = 50.0,
        per_call_usd: float | None = None,
        key: str | None = None,
        ledger: Path | None = None,
    ) -> Any:
        lab = xl.connect(
            emulator.gateway_url,
            emulator.reports_url,
            wallet=xl.Wallet.from_key(key or "0x" + secrets.token_hex(32)),
            budget=xl.Budget(usd=usd, per_call_usd=per_call_usd),
            ledger=ledger or tmp_path / "ledger.sqlite",
        )
        labs.append(lab)
        return lab

    yield factory
    for lab in labs:
        lab.close()

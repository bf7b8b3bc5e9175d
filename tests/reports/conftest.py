"""A sync Lab paying the report service of an emulator over real sockets.

``lab_for(emulator, **options)`` builds one with a fresh funded wallet and the ledger in
``tmp_path`` (pass ``ledger=`` or ``wallet=`` to share them between labs); every lab is
closed after the test. The emulators come from the shared ``emulator_factory``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import x402lab as xl
from x402lab.emulator.server import RunningEmulator

UNIT_ATOMIC = 10_000  # the default unit price, 0.01 USD per report


@pytest.fixture
def lab_for(tmp_path) -> Iterator[Callable[..., Any]]:
    labs: list[Any] = []

    def _lab(emulator: RunningEmulator, **options: Any) -> Any:
        options.setdefault("wallet", xl.Wallet.create())
        options.setdefault("ledger", tmp_path / "ledger.sqlite")
        options.setdefault("budget", xl.Budget(usd=5.0, per_call_usd=1.0))
        lab = xl.connect(emulator.gateway_url, emulator.reports_url, **options)
        labs.append(lab)
        return lab

    yield _lab
    for lab in labs:
        lab.close()


@pytest.fixture
def lab(emulator, lab_for) -> Any:
    return lab_for(emulator)


def _chain_view(emulator: RunningEmulator) -> tuple[int, int]:
    return len(emulator.chain.transfers()), emulator.chain.received(emulator.settings.pay_to)


def _payments(lab: Any) -> list[dict[str, Any]]:
    return [row for row in lab.ledger.rows() if row["service"] == "reports"]


@pytest.fixture
def chain_view() -> Callable[[RunningEmulator], tuple[int, int]]:
    """(number of settled transfers, atomic USDC received by the service) of an emulator."""
    return _chain_view


@pytest.fixture
def payments() -> Callable[[Any], list[dict[str, Any]]]:
    """The report service's ledger rows of a lab, oldest first."""
    return _payments

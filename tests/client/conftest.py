"""Fixtures of the gateway client tests: a sync Lab on its own embedded emulator.

Everything runs over real sockets against the emulator; nothing of ours is mocked.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.client import settings

import x402lab as xl


@pytest.fixture
def lab(tmp_path) -> Iterator[Any]:
    """A sync Lab on a fresh embedded emulator, with its ledger in ``tmp_path``."""
    lab = xl.connect(ledger=tmp_path / "ledger.sqlite", emulator_settings=settings())
    yield lab
    lab.close()

"""Fixtures of the gateway client tests: a sync Lab on its own embedded emulator.

Everything runs over real sockets against the emulator; nothing of ours is mocked.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# pytest runs in importlib mode (no sys.path changes): make client_testdata importable.
_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.append(_HERE)

from client_testdata import settings  # noqa: E402

import x402lab as xl  # noqa: E402


@pytest.fixture
def lab(tmp_path) -> Iterator[Any]:
    """A sync Lab on a fresh embedded emulator, with its ledger in ``tmp_path``."""
    lab = xl.connect(ledger=tmp_path / "ledger.sqlite", emulator_settings=settings())
    yield lab
    lab.close()

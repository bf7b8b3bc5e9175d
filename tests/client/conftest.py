"""Fixtures of the gateway client tests: a sync Lab on its own embedded emulator.

Everything runs over real sockets against the emulator; nothing of ours is mocked.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import x402lab as xl


def _load_testdata() -> Any:
    # pytest runs in importlib mode: register client_testdata by name without putting this
    # directory (and so its conftest.py) on sys.path, where other suites' imports could see it.
    name = "client_testdata"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


settings = _load_testdata().settings


@pytest.fixture
def lab(tmp_path) -> Iterator[Any]:
    """A sync Lab on a fresh embedded emulator, with its ledger in ``tmp_path``."""
    lab = xl.connect(ledger=tmp_path / "ledger.sqlite", emulator_settings=settings())
    yield lab
    lab.close()

"""Helpers of the Dask tests (importable: conftest puts this folder on the path)."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from x402lab.emulator.server import RunningEmulator

#: The environment variable the workers read the test wallet's key from.
KEY_VARIABLE = "X402LAB_DASK_TEST_KEY"
EMBED = "text-embedding-3-small"
CHEAP = "zai-org-glm-4.7-flash"  # every short chat costs the minimum charge


def require(module: str) -> Any:
    """Import a declared test dependency: a skip on a developer's machine, a failure under
    CI=true (where it must be installed)."""
    try:
        return __import__(module)
    except ImportError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{module} is a declared test dependency and missing under CI: {exc}")
        pytest.skip(f"{module} is not installed (pip install 'x402lab[dask]')")


def texts(n: int, tag: str) -> list[str]:
    """n distinct short texts, distinct from any other ``tag``'s."""
    return [f"{tag} note {i}: river stone market garden" for i in range(n)]


def transfers_per_key(lab: Any, emulator: RunningEmulator) -> Counter[str | None]:
    """How many chain transfers settled for each request key (through the ledger's nonces,
    whichever process signed them)."""
    key_of = {
        row["nonce"].lower(): row["request_key"]
        for row in lab.ledger.rows()
        if row["nonce"] is not None
    }
    return Counter(key_of.get(t.nonce.lower()) for t in emulator.chain.transfers())


def when(
    condition: Callable[[], bool], action: Callable[[], None], timeout_s: float
) -> threading.Thread:
    """Run ``action`` in a thread once ``condition`` holds (polled); gives up after
    ``timeout_s``."""

    def watch() -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if condition():
                action()
                return
            time.sleep(0.01)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread

"""Fixtures for the x402 protocol tests; constants and builders live in x402_testdata."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# pytest runs in importlib mode (no sys.path changes), so make the helper module of this
# directory importable; its name is unique to avoid shadowing anything.
_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.append(_HERE)

from x402_testdata import TEST_KEY_HEX, challenge_wire  # noqa: E402

from x402lab.x402 import KeySigner, PaymentRequired, normalize_challenge  # noqa: E402


@pytest.fixture
def signer() -> KeySigner:
    return KeySigner(TEST_KEY_HEX)


@pytest.fixture
def challenge() -> PaymentRequired:
    return normalize_challenge(challenge_wire())

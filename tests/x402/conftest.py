"""Fixtures for the x402 protocol tests; constants and builders live in support.x402."""

from __future__ import annotations

import pytest
from support.x402 import TEST_KEY_HEX, challenge_wire

from x402lab.x402 import KeySigner, PaymentRequired, normalize_challenge


@pytest.fixture
def signer() -> KeySigner:
    return KeySigner(TEST_KEY_HEX)


@pytest.fixture
def challenge() -> PaymentRequired:
    return normalize_challenge(challenge_wire())

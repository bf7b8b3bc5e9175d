"""EIP-55 addresses (``x402lab.x402.address``) agree with eth-utils, the reference."""

from __future__ import annotations

import os

import pytest
from eth_utils import to_checksum_address

from x402lab.x402.address import checksum_address


def test_checksums_agree_with_eth_utils_for_bytes_and_hex_in_any_case():
    for _ in range(300):
        raw = os.urandom(20)
        expected = to_checksum_address(raw)
        assert checksum_address(raw) == expected
        assert checksum_address("0x" + raw.hex()) == expected
        assert checksum_address(raw.hex().upper()) == expected
        assert checksum_address(expected) == expected


@pytest.mark.parametrize(
    "bad", [b"\x00" * 19, "0x" + "0" * 39, "0x" + "g" * 40, "", "0x", 12345, None]
)
def test_anything_but_an_address_is_a_value_error(bad):
    with pytest.raises(ValueError):
        checksum_address(bad)

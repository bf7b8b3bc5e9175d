"""The emulator's kept state: a chain on a journal is replayed by the next one on it, a torn
last line (a process killed mid-write) is left out, and the files are private."""

from __future__ import annotations

import os
import stat

from x402lab.emulator.chain import Chain
from x402lab.emulator.journal import CHAIN_FILE, Journal
from x402lab.emulator.settings import EmulatorSettings

PAYER = "0x00000000000000000000000000000000000000a1"


def test_a_chain_on_a_journal_is_replayed_and_a_torn_line_is_left_out(tmp_path):
    old = os.umask(0o022)
    try:
        settings = EmulatorSettings(balance_usd=1.0, state_dir=str(tmp_path / "world"))
        first = Chain.for_settings(settings)
        assert first.fund(PAYER, 250) == 1_000_250
    finally:
        os.umask(old)
    path = tmp_path / "world" / CHAIN_FILE
    with open(path, "ab") as handle:  # half a line: its writer was killed mid-write
        handle.write(b'{"t":"fund","address":"' + PAYER.encode() + b'","amou')
    second = Chain.for_settings(settings)
    assert second.balance_of(PAYER) == 1_000_250
    assert second.block_time(0) == first.block_time(0)  # the same genesis
    assert [e["t"] for e in Journal(path).read()] == ["genesis", "fund"]
    second.fund(PAYER, 5)  # on a line of its own: the torn tail was cut off
    assert Chain.for_settings(settings).balance_of(PAYER) == 1_000_255
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert Chain.for_settings(EmulatorSettings(balance_usd=1.0)).balance_of(PAYER) == 1_000_000

"""A batch's signed rows are on disk before they leave (one fsync each while a request holds
the send turn; shared fsyncs otherwise, and on a slow disk), its writes share commits
(grouped writes), and every money fact still holds: each paid request settles once, the ledger
agrees with the chain, and a killed-then-rerun batch pays nothing twice
(``test_batch_interrupt``)."""

from __future__ import annotations

import sqlite3

import pytest
from support.batch import CHEAP, chain_atomic, settled_atomic, transfers_per_key


@pytest.mark.parametrize("disk", ["fast", "slow"])
def test_a_batch_makes_its_signed_rows_durable_before_they_leave(
    emulator_factory, lab_factory, disk
):
    emulator = emulator_factory(latency_s=0.01)
    lab = lab_factory(emulator, usd=5.0)
    if disk == "slow":
        lab.ledger.write_ahead.inline_below_s = 0.0  # every fsync in a worker thread
    prompts = [f"group commit question {i}" for i in range(120)]
    before = lab.ledger.write_ahead.syncs
    frame = lab.batch_chat(prompts, model=CHEAP, max_tokens=8, concurrency=24, progress=None)
    assert (frame["status"] == "ok").all()
    paid = [row for row in lab.ledger.rows() if row["status"] == "settled"]
    assert len(paid) == 120
    # Reservations and settlements were grouped into shared commits, and the run committed
    # the last group before returning: another connection sees every row settled.
    other = sqlite3.connect(lab.ledger.path)
    try:
        seen = dict(other.execute("SELECT status, COUNT(*) FROM payments GROUP BY status"))
    finally:
        other.close()
    assert seen == {"settled": 120}
    syncs = lab.ledger.write_ahead.syncs - before
    if disk == "slow":
        # A request waiting for a slow disk's fsync hands the send turn on: the next ones
        # sign meanwhile and share the next fsync.
        assert 1 <= syncs < len(paid)
    else:
        # At most one each: a request holding the send turn syncs at once, others share.
        assert 1 <= syncs <= len(paid)
    assert max(transfers_per_key(lab, emulator).values()) == 1
    assert settled_atomic(lab) == chain_atomic(emulator)
    # A second run pays nothing: every answer is stored.
    again = lab.batch_chat(prompts, model=CHEAP, max_tokens=8, concurrency=24, progress=None)
    assert (again["status"] == "cached").all()
    assert len(emulator.chain.transfers()) == 120

"""A batch's signed rows share fsyncs (group commit) and its writes share commits (grouped
writes), and every money fact still holds: each paid request settles once, the ledger
agrees with the chain, and a killed-then-rerun batch pays nothing twice
(``test_batch_interrupt``)."""

from __future__ import annotations

import sqlite3

from support.batch import CHEAP, chain_atomic, settled_atomic, transfers_per_key


def test_a_batch_shares_fsyncs_between_its_paid_requests(emulator_factory, lab_factory):
    emulator = emulator_factory(latency_s=0.01)
    lab = lab_factory(emulator, usd=5.0)
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
    assert 1 <= syncs < len(paid)  # signed rows of concurrent requests share an fsync
    assert max(transfers_per_key(lab, emulator).values()) == 1
    assert settled_atomic(lab) == chain_atomic(emulator)
    # A second run pays nothing: every answer is stored.
    again = lab.batch_chat(prompts, model=CHEAP, max_tokens=8, concurrency=24, progress=None)
    assert (again["status"] == "cached").all()
    assert len(emulator.chain.transfers()) == 120

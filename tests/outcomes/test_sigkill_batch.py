"""A batch killed with SIGKILL loses at most the answers still on the wire: each answer is
committed with its settlement, so a re-run shows at most ``concurrency`` new rows
``paid_not_stored`` per kill (and never pays again for one)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from x402lab.emulator.server import start_emulator
from x402lab.emulator.settings import EmulatorSettings, Faults

KEY = "0x" + "5a" * 32
ROWS = 240
CONCURRENCY = 6


def _settled(ledger_path: Path) -> int:
    """Settled payments in the ledger the child writes. A count in SQL on a read-only
    connection: polled every 10 ms, reading every row would take the CPU (and, in this
    process, the GIL) from the child and the emulator it is timing."""
    if not ledger_path.exists():
        return 0
    uri = f"{ledger_path.as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=1)) as db:
        try:
            (count,) = db.execute(
                "SELECT count(*) FROM payments WHERE status = 'settled'"
            ).fetchone()
        except sqlite3.OperationalError:  # the child has not created its tables yet
            return 0
    return int(count)


def test_a_batch_killed_at_three_moments_loses_at_most_its_in_flight_answers(
    tmp_path, killed_batch
):
    emulator = start_emulator(
        EmulatorSettings(balance_usd=1000, seed=3, faults=Faults(latency_s=0.01))
    )
    ledger_path = tmp_path / "ledger.sqlite"
    settled_before = 0
    try:
        for batch, fraction in enumerate((0.2, 0.5, 0.8)):
            # Each batch its own rows, killed when that share of them has settled.
            prompts = [f"kill me {batch} {i}" for i in range(ROWS)]
            kill_at = settled_before + int(ROWS * fraction)
            counts = killed_batch(
                emulator.gateway_url, str(ledger_path), KEY, prompts, CONCURRENCY,
                ready=lambda: _settled(ledger_path) >= kill_at,  # noqa: B023 - used at once
            )  # fmt: skip
            assert counts.get("cached", 0) >= int(ROWS * fraction) - CONCURRENCY, counts
            settled_before = _settled(ledger_path)
        # Never paid twice: one transfer on the chain per row (one row per request).
        assert len(emulator.chain.transfers()) == 3 * ROWS
    finally:
        emulator.stop()

"""A batch on a PostgreSQL ledger killed with SIGKILL mid-run loses at most the answers still on
the wire: each request's answers are committed in the transaction of its settlement
(``Reply.settlement``, ``Settlement`` in ``x402lab/ledger/payments.py``), so the re-run
shows at most ``concurrency`` rows ``paid_not_stored`` (or ``unknown``) and never pays again
for one.

The emulator sends each answer's body ``answer_delay_s`` after its receipt: a settlement
committed on its own at the receipt would leave up to ``concurrency`` more paid rows without
their answers at any moment.
"""

from __future__ import annotations

KEY = "0x" + "5c" * 32
ROWS = 60
KILL_AT = 20
CONCURRENCY = 6
PROMPTS = [f"kill me on postgres {i}" for i in range(ROWS)]


def _settled(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as connection:
        if connection.execute("SELECT to_regclass('payments')").fetchone()[0] is None:
            return 0
        found = connection.execute("SELECT COUNT(*) FROM payments WHERE status = 'settled'")
        return int(found.fetchone()[0])


def test_a_batch_on_postgresql_killed_mid_run_loses_at_most_its_in_flight_answers(
    emulator_factory, pg_url, killed_batch
):
    emulator = emulator_factory(balance_usd=1000, latency_s=0.01, answer_delay_s=0.1)
    at_kill: list[int] = []
    counts = killed_batch(
        emulator.gateway_url, pg_url, KEY, PROMPTS, CONCURRENCY,
        ready=lambda: _settled(pg_url) >= KILL_AT,
        after_kill=lambda: at_kill.append(_settled(pg_url)),
    )  # fmt: skip
    # Every row whose payment the killed run had settled kept its answer.
    assert counts.get("cached", 0) == at_kill[0] >= KILL_AT, counts
    # Never paid twice: one transfer on the chain per row (one row per request).
    assert len(emulator.chain.transfers()) == ROWS

"""A batch on a PostgreSQL ledger killed with SIGKILL mid-run loses at most the answers still on
the wire: each request's answers are committed in the transaction of its settlement
(``x402lab/ledger/answers.py``), so the re-run shows at most ``concurrency`` rows
``paid_not_stored`` (or ``unknown``) and never pays again for one.

The emulator sends each answer's body ``answer_delay_s`` after its receipt: a settlement
committed on its own at the receipt would leave up to ``concurrency`` more paid rows without
their answers at any moment.
"""

from __future__ import annotations

import json
import textwrap

import x402lab as xl

KEY = "0x" + "5c" * 32
ROWS = 60
KILL_AT = 20
CONCURRENCY = 6
MODEL = "zai-org-glm-4.7-flash"
PROMPTS = [f"kill me on postgres {i}" for i in range(ROWS)]

WORKER = textwrap.dedent(
    """
    import json, sys
    import x402lab as xl
    gateway, ledger, key, model, concurrency, prompts = sys.argv[1:7]
    lab = xl.connect(gateway, gateway, wallet=xl.Wallet.from_key(key), ledger=ledger,
                     budget=xl.Budget(usd=100))
    lab.batch_chat(json.loads(prompts), model=model, max_tokens=8,
                   concurrency=int(concurrency), progress=None)
    lab.close()
    """
)


def _settled(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as connection:
        if connection.execute("SELECT to_regclass('payments')").fetchone()[0] is None:
            return 0
        found = connection.execute("SELECT COUNT(*) FROM payments WHERE status = 'settled'")
        return int(found.fetchone()[0])


def test_a_batch_on_postgresql_killed_mid_run_loses_at_most_its_in_flight_answers(
    emulator_factory, pg_url, kill_when
):
    emulator = emulator_factory(balance_usd=1000, latency_s=0.01, answer_delay_s=0.1)
    kill_when(
        WORKER,
        [emulator.gateway_url, pg_url, KEY, MODEL, str(CONCURRENCY), json.dumps(PROMPTS)],
        lambda: _settled(pg_url) >= KILL_AT,
        "the batch's settlements",
    )
    settled_at_kill = _settled(pg_url)

    lab = xl.connect(
        emulator.gateway_url, emulator.gateway_url, wallet=xl.Wallet.from_key(KEY),
        ledger=pg_url, budget=xl.Budget(usd=100),
    )  # fmt: skip
    try:
        frame = lab.batch_chat(
            PROMPTS, model=MODEL, max_tokens=8, concurrency=CONCURRENCY, progress=None
        )
    finally:
        lab.close()
    counts = frame["status"].value_counts().to_dict()
    assert set(counts) <= {"cached", "ok", "paid_not_stored", "unknown"}, counts
    # Every row whose payment the killed run had settled kept its answer.
    assert counts.get("cached", 0) == settled_at_kill >= KILL_AT, counts
    lost = counts.get("paid_not_stored", 0) + counts.get("unknown", 0)
    assert lost <= CONCURRENCY, counts
    # Never paid twice: one transfer on the chain per row (one row per request).
    assert len(emulator.chain.transfers()) == ROWS

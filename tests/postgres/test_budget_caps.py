"""One cap per named budget, kept in a PostgreSQL ledger a team shares: the first process that
names the budget with a cap sets it; another process that asks for another cap is refused with
both in the message; one that names it without a cap takes the stored one and changes
nothing; processes racing on the budget never move more than the stored cap on the chain; a
change is an explicit ``set_cap``, recorded with who and when, and reservations already
running follow it."""

from __future__ import annotations

import pytest
from support.postgres import query
from support.teams import KEY, finish, run_step, start_step

import x402lab as xl

pytestmark = pytest.mark.spawns

CAPS = "SELECT cap_atomic, per_call_atomic, cap_set_by, cap_set_us FROM budgets WHERE name = %s"


def _connect(emulator, pg_url, budget, user):
    wallet = xl.Wallet.from_key(KEY)
    gateway = emulator.gateway_url
    return xl.connect(gateway, gateway, wallet=wallet, ledger=pg_url, budget=budget, user=user)


def test_one_cap_per_named_budget_across_processes(emulator, pg_url, tmp_path):
    gateway = emulator.gateway_url
    ana = _connect(emulator, pg_url, xl.Budget(usd=0.10, name="team-q4"), "ana@laptop")
    [set_first] = query(pg_url, CAPS, ("team-q4",))
    assert set_first[:3] == (100_000, None, "ana@laptop")

    # Another process asks for another cap: refused, both caps in the message, nothing changed.
    second = run_step("connect_only", gateway, pg_url, "team-q4", "3.00", "ben@desktop")
    message = second["refused"]
    assert "0.10 USD" in message and "3.00 USD" in message and "ana@laptop" in message
    assert "set_cap" in message
    # The lead only looks: no cap given, the stored one is taken and kept as it was.
    lead = _connect(emulator, pg_url, xl.Budget(name="team-q4"), "lead@office")
    assert (lead.budget.cap_atomic, lead.budget.per_call_atomic) == (100_000, None)
    assert query(pg_url, CAPS, ("team-q4",)) == [set_first]

    # Three processes race on the budget (two name it without a cap, one with the same cap),
    # asking for far more than it allows: the chain moves at most the stored cap.
    go = tmp_path / "go"
    racers = [
        start_step("chat_until_refused", gateway, pg_url, "team-q4", usd, user, "8", str(go))
        for usd, user in (("-", "ana@laptop"), ("0.10", "ben@desktop"), ("-", "cy@lab"))
    ]
    go.touch()
    results = [finish(proc) for proc in racers]
    transfers = emulator.chain.transfers()
    moved = sum(t.amount_atomic for t in transfers)
    assert moved <= 100_000
    assert sum(r["paid"] for r in results) == len(transfers) >= 1
    assert sum(r["refused"] for r in results) >= 24 - 100_000 // 10_000  # most were refused
    assert all(r["paid"] + r["refused"] == 8 for r in results)
    settled = query(pg_url, "SELECT SUM(amount_atomic) FROM payments WHERE status = 'settled'")
    assert settled == [(moved,)]

    # An explicit change, by the lead: recorded with who and when; every process follows it.
    lead.budget.set_cap(moved / 1_000_000 + 0.02)
    [changed] = query(pg_url, CAPS, ("team-q4",))
    assert changed[:3] == (moved + 20_000, None, "lead@office") and changed[3] > set_first[3]
    caps = ana.budget.caps()
    assert caps is not None and caps.cap_atomic == moved + 20_000 and caps.set_by == "lead@office"
    assert ana.budget.remaining_atomic() == 20_000  # ana's Budget reads the new cap
    ana.close()
    lead.close()

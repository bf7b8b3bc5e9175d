"""Two people share one wallet's budget through a PostgreSQL ledger, end to end on the
emulator: ``connect(ledger=Ledger("postgresql://...", user=...))`` or
``connect(ledger="postgresql://...", user=...)``; the second person's run of
the same batch pays nothing for what settled; spend by user and the cost report read the
shared ledger; the ledger's settled total equals the chain's."""

from __future__ import annotations

import secrets

import x402lab as xl

EMBED = "text-embedding-bge-m3"


def test_a_team_shares_one_budget_and_a_rerun_pays_nothing_again(emulator, pg_url):
    team_key = "0x" + secrets.token_hex(32)

    def lab_of(**who):
        return xl.connect(
            emulator.gateway_url,
            emulator.reports_url,
            wallet=xl.Wallet.from_key(team_key),
            budget=xl.Budget(usd=5.0, name="team"),
            **who,
        )

    texts = [f"document {i} about topic {i % 5}" for i in range(40)]
    args = dict(model=EMBED, rows_per_request=4, progress=None)
    ana = lab_of(ledger=xl.Ledger(pg_url, user="ana@laptop"))
    first = ana.batch_embed(texts, **args)
    assert (first["status"] == "ok").all()
    assert len(emulator.chain.transfers()) == 10  # 40 texts, 4 per request

    ben = lab_of(ledger=pg_url, user="ben@desktop")  # another notebook, the same ledger
    again = ben.batch_embed([*texts, "one more text"], **args)
    assert again["status"].tolist() == ["cached"] * 40 + ["ok"]
    assert len(emulator.chain.transfers()) == 11  # only the new text was paid for

    settled = ben.ledger.to_pandas().query("status == 'settled'")
    chain_total = sum(t.amount_atomic for t in emulator.chain.transfers())
    assert int(settled["amount_atomic"].sum()) == chain_total
    by_user = ben.spend(by="user", atomic=True).set_index("user")
    assert by_user["settled_count"].to_dict() == {"ana@laptop": 10, "ben@desktop": 1}
    assert int(by_user["settled_atomic"].sum()) == chain_total
    # One budget: both see the same committed spend, measured against the one cap.
    assert ana.budget.state().committed_atomic == ben.budget.state().committed_atomic
    assert ben.budget.state().settled_atomic == chain_total
    report = ana.cost_report()
    assert report.settled_atomic == chain_total
    ana.close()
    ben.close()


def test_the_ledger_command_reads_a_postgresql_ledger(pg_url, tmp_path):
    import subprocess
    import sys

    import pandas as pd
    from support.postgres import settled

    ledger = xl.Ledger(pg_url, user="ana@laptop")
    settled(ledger, "k1", 10_000)
    settled(ledger, "k2", 5_000)
    ledger.close()
    out = tmp_path / "by_user.csv"
    command = ["ledger", "export", str(out), "--ledger", pg_url, "--by", "user", "--atomic"]
    done = subprocess.run(
        [sys.executable, "-m", "x402lab", *command], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(out)
    assert table[["user", "settled_atomic"]].values.tolist() == [["ana@laptop", 15_000]]
    summary = subprocess.run(
        [sys.executable, "-m", "x402lab", "ledger", "summary", "--ledger", pg_url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert summary.returncode == 0, summary.stderr
    assert "0.015" in summary.stdout

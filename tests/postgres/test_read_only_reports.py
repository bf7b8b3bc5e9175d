"""A lead reads the team's PostgreSQL ledger with a read-only role and no key:
``xl.Ledger(url).spend()``, ``.cost_report()`` and ``x402lab report`` work and write nothing
(the row count of every table is unchanged: no budget row added, no recovery run); a role
without SELECT gets a ConfigError naming the role, the table and the grant."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest
from support.postgres import admin, query, server_port, settled, signed

import x402lab as xl
from x402lab.ledger import Claims

PASSWORD = "lead-" + secrets.token_hex(6)


@pytest.fixture
def make_role(pg_url):
    """``make_role(*grants)``: a login role (password, over TCP) given ``grants`` (SQL run
    as the admin in the test database, ``{role}`` filled in); its URL without password."""
    made: list[str] = []

    def make(*grants: str) -> tuple[str, str]:
        name = f"x402lab_lead_{secrets.token_hex(4)}"
        admin(f"CREATE ROLE {name} LOGIN PASSWORD '{PASSWORD}'")
        made.append(name)
        for grant in grants:
            query(pg_url, grant.format(role=name))
        dbname = pg_url.rsplit("/", 1)[1]
        return name, f"postgresql://{name}@127.0.0.1:{server_port()}/{dbname}"

    yield make
    for name in made:
        query(pg_url, f"DROP OWNED BY {name}")
        admin(f"DROP ROLE IF EXISTS {name}")


def _counts(url: str) -> dict[str, int]:
    tables = query(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    return {t: query(url, f"SELECT COUNT(*) FROM {t}")[0][0] for (t,) in sorted(tables)}


def test_a_read_only_lead_reads_spend_and_the_cost_report_and_writes_nothing(
    pg_url, make_role, tmp_path, monkeypatch
):
    team = xl.Ledger(pg_url, user="ana@laptop")
    xl.Budget(usd=1.0, name="team-q4").bind(team)
    settled(team, "k1", 10_000, budget="team-q4")
    settled(team, "k2", 5_000, budget="team-q4")
    open_row = signed(team, "k3", 7_000, budget="team-q4")  # in flight: recovery would move it
    Claims(team.db).claim("batch:chat", ["item"], payment_key="k1")
    team.close()
    role, url = make_role(
        "GRANT USAGE ON SCHEMA public TO {role}",
        "GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}",
    )
    before = _counts(pg_url)
    assert before["payments"] == 3 and before["budgets"] == 1 and before["claims"] == 1

    monkeypatch.setenv("PGPASSWORD", PASSWORD)  # where libpq finds it; never in the URL
    lead = xl.Ledger(url)
    by_user = lead.spend(by="user", atomic=True).set_index("user")
    assert by_user.loc["ana@laptop", "settled_atomic"] == 15_000
    assert by_user.loc["ana@laptop", "in_flight_atomic"] == 7_000
    report = lead.cost_report(budget="team-q4")
    assert report.settled_atomic == 15_000
    lead.close()

    done = subprocess.run(
        [sys.executable, "-m", "x402lab", "report", "--ledger", url, "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PGPASSWORD": PASSWORD},
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r" / "cost_report.html").is_file()
    assert list((tmp_path / "r").glob("*.parquet"))
    assert PASSWORD not in done.stdout + done.stderr

    # Nothing written: every table has the rows it had, and the open row is still open.
    assert _counts(pg_url) == before
    [(status,)] = query(pg_url, "SELECT status FROM payments WHERE id = %s", (open_row,))
    assert status == "signed"
    assert query(pg_url, "SELECT name FROM budgets") == [("team-q4",)]


def test_a_role_without_select_gets_a_config_error_naming_the_table_and_grant(
    pg_url, make_role, monkeypatch
):
    xl.Ledger(pg_url).close()
    role, url = make_role(
        "GRANT USAGE ON SCHEMA public TO {role}",
        "GRANT SELECT ON x402lab_schema TO {role}",  # it can open the ledger, not read it
    )
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    lead = xl.Ledger(url)
    with pytest.raises(xl.ConfigError) as refused:
        lead.spend()
    message = str(refused.value)
    assert f"the role {role!r} may not use payments" in message
    assert f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}" in message
    assert PASSWORD not in message
    lead.close()

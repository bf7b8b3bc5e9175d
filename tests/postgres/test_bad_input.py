"""A PostgreSQL ledger that cannot be used is a clear ConfigError before anything is signed:
an unreachable server, a wrong password, a database that does not exist, a URL of an unknown
scheme, a schema written by a newer x402lab, psycopg not installed. The password is never
repeated; the emulator's chain has no transfer and the ledger is as it was.
"""

from __future__ import annotations

import secrets
import subprocess
import sys

import pytest
from support.postgres import admin, closed_port, database_url, query, server_port

import x402lab as xl
from x402lab.ledger import SCHEMA_VERSION, Ledger
from x402lab.ledger.postgres import VERSION_TABLE

PASSWORD = "hunter2-" + secrets.token_hex(4)


def refused_before_signing(emulator, url: str) -> str:
    """Connect to the running emulator with the ledger ``url``: the ConfigError's text, after
    checking that nothing was paid."""
    with pytest.raises(xl.ConfigError) as refused:
        xl.connect(
            emulator.gateway_url, emulator.reports_url, wallet=xl.Wallet.create(), ledger=url
        )
    assert emulator.chain.transfers() == []
    message = str(refused.value)
    assert PASSWORD not in message
    return message


@pytest.fixture
def role(pg_url):
    """A login role with a password, allowed into the test database (over TCP, scram)."""
    name = f"x402lab_test_{secrets.token_hex(4)}"
    admin(f"CREATE ROLE {name} LOGIN PASSWORD '{PASSWORD}'")
    query(pg_url, f"GRANT ALL ON SCHEMA public TO {name}")
    yield name
    query(pg_url, f"DROP OWNED BY {name}")  # the tables it made in the test database
    admin(f"DROP ROLE IF EXISTS {name}")


def test_an_unreachable_server_names_host_and_port(emulator):
    port = closed_port()
    message = refused_before_signing(emulator, f"postgresql://ana:{PASSWORD}@127.0.0.1:{port}/team")
    assert f"127.0.0.1:{port} is not reachable" in message
    assert "check the host and port" in message


def test_a_wrong_password_is_a_refused_login(emulator, pg_url, role):
    dbname = pg_url.rsplit("/", 1)[1]
    tcp = f"127.0.0.1:{server_port()}"
    message = refused_before_signing(
        emulator, f"postgresql://{role}:wrong-{PASSWORD}@{tcp}/{dbname}"
    )
    assert f"refused the login of postgresql://{role}@{tcp}/{dbname}" in message
    assert "password" in message
    # The right password opens it (so it was the password that was refused).
    ledger = Ledger(f"postgresql://{role}:{PASSWORD}@{tcp}/{dbname}")
    assert ledger.db.version == SCHEMA_VERSION and PASSWORD not in repr(ledger)
    assert PASSWORD not in ledger.db.url and PASSWORD not in repr(ledger.db)
    ledger.close()


def test_a_missing_database_says_how_to_create_it(emulator, pg_database):
    missing = f"x402lab_missing_{secrets.token_hex(4)}"
    message = refused_before_signing(emulator, database_url(missing))
    assert f"database {missing!r} does not exist" in message
    assert f"createdb {missing}" in message


def test_an_unknown_scheme_names_the_supported_ones(emulator):
    message = refused_before_signing(emulator, f"mysql://ana:{PASSWORD}@127.0.0.1:3306/team")
    assert "'mysql' is not a supported ledger scheme" in message
    assert "postgresql://user@host:port/dbname" in message


def test_a_schema_newer_than_the_code_is_refused_and_left_as_it_is(emulator, pg_url):
    Ledger(pg_url).close()
    query(pg_url, f"UPDATE {VERSION_TABLE} SET version = %s", (SCHEMA_VERSION + 1,))
    message = refused_before_signing(emulator, pg_url)
    assert f"schema version {SCHEMA_VERSION + 1}, newer than this x402lab" in message
    assert "written by a newer x402lab" in message
    assert query(pg_url, f"SELECT version FROM {VERSION_TABLE}") == [(SCHEMA_VERSION + 1,)]
    assert query(pg_url, "SELECT COUNT(*) FROM payments") == [(0,)]


def test_without_psycopg_the_error_says_what_to_install(pg_url):
    # A fresh interpreter in which psycopg cannot be imported (as where it is not installed).
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "import x402lab as xl\n"
        "try:\n"
        f"    xl.Ledger({pg_url!r})\n"
        "except xl.ConfigError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert 'pip install "x402lab[postgres]"' in done.stdout

"""A ledger URL that cannot be used is refused before anything starts: no SQLite file named
after the URL, no emulator left running, and a password in the URL never repeated.

A scheme x402lab does not serve names the ones it does; a PostgreSQL server that does not
answer says where it looked. (The PostgreSQL errors that need a running server, such as a
wrong password or a missing database, are in tests/postgres.)
"""

from __future__ import annotations

import importlib.util
import os
import socket
import threading

import pytest

import x402lab as xl


def closed_port() -> int:
    """A port of 127.0.0.1 that nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    "url", ["mysql://x/y", "redis://me:hunter2@127.0.0.1:1/0", "http://127.0.0.1:1/ledger"]
)
def test_a_ledger_url_of_an_unknown_scheme_is_refused(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    threads_before = {t.ident for t in threading.enumerate()}
    with pytest.raises(xl.ConfigError, match="is not a supported ledger scheme") as refused:
        xl.connect(ledger=url)
    message = str(refused.value)
    assert "SQLite file path" in message and "postgresql://user@host:port/dbname" in message
    assert "hunter2" not in message
    assert list(tmp_path.iterdir()) == []  # not a local file named after the URL
    started = [t.name for t in threading.enumerate() if t.ident not in threads_before]
    assert started == []  # checked before the embedded emulator would start


def test_an_unreachable_postgresql_ledger_is_refused_before_the_emulator_starts(
    tmp_path, monkeypatch
):
    if importlib.util.find_spec("psycopg") is None:
        message = 'psycopg is not installed: pip install "x402lab[postgres]"'
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    monkeypatch.chdir(tmp_path)
    port = closed_port()
    threads_before = {t.ident for t in threading.enumerate()}
    with pytest.raises(xl.ConfigError, match="is not reachable") as refused:
        xl.connect(ledger=f"postgresql://analyst:hunter2@127.0.0.1:{port}/team")
    message = str(refused.value)
    assert f"127.0.0.1:{port}" in message and "hunter2" not in message
    assert list(tmp_path.iterdir()) == []
    started = [t.name for t in threading.enumerate() if t.ident not in threads_before]
    assert started == []

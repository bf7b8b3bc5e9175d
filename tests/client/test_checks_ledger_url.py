"""A ledger location that looks like a URL of a scheme this version does not serve is refused
before anything starts: no SQLite file named after the URL, no emulator left running."""

from __future__ import annotations

import threading

import pytest

import x402lab as xl


@pytest.mark.parametrize("url", ["postgresql:///team", "postgres://me@db/team", "mysql://x/y"])
def test_a_ledger_url_of_an_unserved_scheme_is_refused(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    threads_before = {t.ident for t in threading.enumerate()}
    with pytest.raises(xl.ConfigError, match="backend is not available") as refused:
        xl.connect(ledger=url)
    assert "give a SQLite file path" in str(refused.value)
    assert list(tmp_path.iterdir()) == []  # not a local file named after the URL
    started = [t.name for t in threading.enumerate() if t.ident not in threads_before]
    assert started == []  # checked before the embedded emulator would start


def test_a_password_in_a_refused_ledger_url_is_not_repeated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(xl.ConfigError) as refused:
        xl.connect(ledger="postgresql://analyst:hunter2@db.example:5432/team")
    assert "hunter2" not in str(refused.value)

"""The ledger and the media folder are private to their owner under a permissive umask."""

from __future__ import annotations

import os
import stat

import pytest

from x402lab.ledger import Ledger, private_folder
from x402lab.media.polling import write_atomically


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _assert_private_ledger(path) -> None:
    assert _mode(path) == 0o600
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            assert _mode(side) == 0o600, side


def test_default_path_is_a_0600_file_in_a_0700_home_folder(tmp_path, monkeypatch, umask_022):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    ledger = Ledger("~/.x402lab/ledger.sqlite")
    path = home / ".x402lab" / "ledger.sqlite"
    assert (home / ".x402lab" / "ledger.sqlite-wal").exists()
    _assert_private_ledger(path)
    assert _mode(home / ".x402lab") == 0o700
    del ledger


def test_an_existing_home_folder_is_made_private(tmp_path, monkeypatch, umask_022):
    home = tmp_path / "home"
    (home / ".x402lab").mkdir(parents=True, mode=0o755)
    os.chmod(home / ".x402lab", 0o755)
    monkeypatch.setenv("HOME", str(home))
    Ledger(home / ".x402lab" / "ledger.sqlite")
    assert _mode(home / ".x402lab") == 0o700


def test_a_given_path_in_a_new_folder(tmp_path, umask_022):
    os.chmod(tmp_path, 0o755)
    path = tmp_path / "made" / "by" / "us" / "book.sqlite"
    Ledger(path)
    _assert_private_ledger(path)
    assert (path.parent / "book.sqlite-wal").exists()
    for folder in (tmp_path / "made", tmp_path / "made" / "by", path.parent):
        assert _mode(folder) == 0o700, folder
    assert _mode(tmp_path) == 0o755  # the user's own folder is left alone


def test_an_existing_folder_is_kept_and_old_files_made_private(tmp_path, umask_022):
    os.chmod(tmp_path, 0o755)
    path = tmp_path / "old.sqlite"
    Ledger(path)
    for suffix in ("", "-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.chmod(side, 0o644)
    Ledger(path)
    _assert_private_ledger(path)
    assert _mode(tmp_path) == 0o755


def test_media_folder_and_files_are_private(tmp_path, umask_022):
    folder = tmp_path / "media" / "jobs"
    private_folder(folder)
    write_atomically(folder / "video-1.mp4", b"\x00" * 10)
    assert _mode(folder) == 0o700
    assert _mode(tmp_path / "media") == 0o700
    assert _mode(folder / "video-1.mp4") == 0o600

"""The ledger and the media folder are private to their owner under a permissive umask."""

from __future__ import annotations

import asyncio
import os
import stat

import pytest

from x402lab.ledger import Ledger, private_folder
from x402lab.private import stream_private


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

    async def chunks():
        yield b"\x00" * 10
        yield b"\x01" * 5

    size, _ = asyncio.run(stream_private(folder / "video-1.mp4", chunks()))
    assert (size, (folder / "video-1.mp4").read_bytes()) == (15, b"\x00" * 10 + b"\x01" * 5)
    assert os.listdir(folder) == ["video-1.mp4"]  # no temporary file left beside it
    assert _mode(folder) == 0o700
    assert _mode(tmp_path / "media") == 0o700
    assert _mode(folder / "video-1.mp4") == 0o600


def test_a_streamed_file_that_fails_midway_leaves_nothing(tmp_path):
    target = tmp_path / "media" / "music-1.mp3"
    target.parent.mkdir()
    target.write_bytes(b"the earlier file")

    async def broken():
        yield b"\x00" * 1000
        raise ConnectionError("the body stopped")

    with pytest.raises(ConnectionError):
        asyncio.run(stream_private(target, broken()))
    assert os.listdir(target.parent) == ["music-1.mp3"]  # no temporary file left
    assert target.read_bytes() == b"the earlier file"  # never half a file under its name

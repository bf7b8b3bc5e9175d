"""A job's media is streamed to its file as it arrives: a child process fetching 200 MB of media
keeps its peak memory far below the body's size, the file lands whole under its final name,
and a body past ``Limits.media_bytes`` raises LimitExceeded naming the limit and leaves no
file (nor a temporary one) in the media folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.hostile import hostile_server
from support.media import MUSIC, TEST_KEY

from x402lab.routes import media_route

MIB = 1 << 20
ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import json, resource, sys
    import x402lab as xl

    def peak_mib():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    gateway, reports, key, ledger, music, media_bytes = sys.argv[1:7]
    lab = xl.connect(gateway, reports, wallet=xl.Wallet.from_key(key), ledger=ledger,
                     limits=xl.Limits(media_bytes=int(media_bytes)),
                     retry=xl.RetryPolicy(attempts=1))
    lab.models()
    before = peak_mib()
    job = lab.music(**json.loads(music), poll_s=0.05)
    try:
        job.wait(timeout_s=60)
        outcome = "completed"
    except xl.X402LabError as exc:
        outcome = f"{type(exc).__name__}: {exc}"
    path = job.media_path
    print(json.dumps({"before": before, "after": peak_mib(), "outcome": outcome,
                      "path": str(path) if path else None, "size": job.size_bytes}))
    lab.close()
    """
)


def _fetch_in_child(hostile, emulator, ledger: Path, body_bytes: int, media_bytes: int) -> dict:
    """A child process queues a music job whose retrieve answers ``body_bytes`` of audio."""
    attack = hostile.attack(
        path=media_route("music", "retrieve"), status=200, body_bytes=body_bytes,
        chunk_bytes=MIB, content_type="audio/mpeg",
    )  # fmt: skip
    try:
        child = subprocess.run(
            [sys.executable, "-c", CHILD, hostile.url, emulator.reports_url, TEST_KEY,
             str(ledger), json.dumps(MUSIC), str(media_bytes)],
            capture_output=True, text=True, timeout=300,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    finally:
        hostile.attacks.remove(attack)
    assert child.returncode == 0, child.stderr[-3000:]
    return json.loads(child.stdout.strip().splitlines()[-1])


@pytest.mark.spawns
def test_200_mb_of_media_streams_to_its_file_with_memory_bounded(emulator, tmp_path):
    body = 200 * MIB
    ledger = tmp_path / "ledger.sqlite"
    with hostile_server(emulator.gateway_url) as hostile:
        report = _fetch_in_child(hostile, emulator, ledger, body, media_bytes=256 * MIB)
    assert report["outcome"] == "completed", report
    path = Path(report["path"])
    assert report["size"] == body == path.stat().st_size
    assert (path.stat().st_mode & 0o777) == 0o600
    with path.open("rb") as media:
        assert media.read(16) == b"x" * 16
    # Only the finished file in the media folder: no temporary file beside it.
    assert os.listdir(path.parent) == [path.name]
    # 200 MB went to disk; the child's peak grew by far less than the body.
    assert report["after"] - report["before"] < 64, report


@pytest.mark.spawns
def test_media_past_its_limit_raises_naming_it_and_leaves_no_file(emulator, tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    with hostile_server(emulator.gateway_url) as hostile:
        report = _fetch_in_child(hostile, emulator, ledger, 16 * MIB, media_bytes=8 * MIB)
    assert report["outcome"].startswith("LimitExceeded"), report
    assert "Limits.media_bytes" in report["outcome"]
    assert "8,388,608 bytes" in report["outcome"]
    assert report["path"] is None and report["size"] is None
    media = ledger.parent / "media"
    assert not media.exists() or os.listdir(media) == []

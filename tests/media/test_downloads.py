"""A video's ``download_url`` against a hostile server (``support.hostile``): a redirect is
followed within limits (at most 5, http(s) only) and never stored as media, an empty answer
is an error and never a finished job of 0 bytes, and a trickling download is cut at the
deadline of the whole request. The job stays paid; ``wait()`` again retries the download."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from support.hostile import hostile_server
from support.media import FAST_POLL

import x402lab as xl
from x402lab.media.status import Completed

KLING = {"model": "kling-3-0-text-to-video", "duration": "5s", "resolution": "720p"}
DOWNLOADS = "/api/v1/video/download/"


def test_download_redirects_empty_answers_and_trickles(emulator, connect_lab, tmp_path):
    with hostile_server(emulator.gateway_url) as hostile:
        service = SimpleNamespace(gateway_url=hostile.url, reports_url=emulator.reports_url)
        lab = connect_lab(service, tmp_path / "ledger.sqlite", timeout_s=2.0)

        def video(prompt: str):
            job = lab.video(**KLING, prompt=prompt, poll_s=FAST_POLL)
            assert job.download_url.startswith(hostile.url + DOWNLOADS)
            return job

        # A redirect loop: refused after 5 hops, nothing stored, the job not completed.
        loop = hostile.attack(path=DOWNLOADS, redirect_to=f"{hostile.url}{DOWNLOADS}again")
        looped = video("a loop")
        with pytest.raises(xl.JobError, match="redirected more than 5 times"):
            looped.wait(timeout_s=10)
        assert looped.media_path is None and not isinstance(looped.status, Completed)
        hostile.attacks.remove(loop)

        # An empty 200: an error, never media of 0 bytes.
        empty = hostile.attack(path=DOWNLOADS, status=200, body_bytes=0)
        job = video("nothing")
        with pytest.raises(xl.JobError, match="HTTP 200 with 0 bytes, no media"):
            job.wait(timeout_s=10)
        assert job.media_path is None
        hostile.attacks.remove(empty)

        # A trickle: cut at timeout_s, the whole download included.
        slow = hostile.attack(path=DOWNLOADS, status=200, body_bytes=1 << 20, trickle_s=0.2)
        job = video("slowly")
        with pytest.raises(xl.TransportError, match=r"timeout_s=2 s"):
            job.wait(timeout_s=10)
        hostile.attacks.remove(slow)

        # A redirect to where the media really is: followed, the real bytes stored. And the
        # jobs above download now that the server behaves: they were paid and kept.
        job = video("somewhere else")
        real = job.download_url.replace(hostile.url, emulator.gateway_url)
        hostile.attack(path=job.download_url[len(hostile.url) :], redirect_to=real)
        assert isinstance(job.wait(timeout_s=10), Completed)
        assert job.result()[4:8] == b"ftyp"
        assert isinstance(looped.wait(timeout_s=10), Completed)  # paid, kept, fetched now
        assert looped.result()[4:8] == b"ftyp"
        assert len(lab.ledger.rows()) == 4 and len(hostile.payments) == 4

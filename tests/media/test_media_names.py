"""Media files never collide: each job's media is its own file, read back from its own row.

Two small real gateways on 127.0.0.1 answer the free retrieve route with media that names
the gateway and the queue id it was asked for. Queue ids that clean to one file name
(``song/1``, ``song_1``), and one queue id answered by both gateways to Labs sharing one
ledger folder, each give back their own bytes, also after the jobs are read again from the
ledger.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from support.http_server import QuietHandler, serving

import x402lab as xl
from x402lab.ledger import Jobs
from x402lab.routes import GATEWAY

_ASKED: list[str] = []
_LOCK = threading.Lock()


class _Retrieve(QuietHandler):
    """A gateway's retrieve route: finished media of ``<port> <queue_id>``."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with _LOCK:
            _ASKED.append(body["queue_id"])
        media = f"RIFF {self.server.server_address[1]} {body['queue_id']}".encode()
        self.reply(media, "audio/wav")


def _lab(server: Any, wallet: xl.Wallet, ledger: Path) -> Any:
    url = f"http://127.0.0.1:{server.server_address[1]}"
    return xl.connect(url, url, wallet=wallet, ledger=ledger)


def _queued(lab: Any, queue_id: str) -> None:
    gateway = lab.async_.session.name(GATEWAY)
    Jobs(lab.ledger).insert(
        gateway=gateway,
        kind="music",
        model="ace-step-15",
        queue_id=queue_id,
        request_key=f"key-of-{queue_id}",
        request={"prompt": queue_id},
    )


def test_jobs_whose_names_clean_alike_or_whose_gateways_differ_keep_their_own_media(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    wallet = xl.Wallet.create()
    with serving(_Retrieve) as one, serving(_Retrieve) as two:
        first, second = _lab(one, wallet, ledger), _lab(two, wallet, ledger)
        try:
            for queue_id in ("song/1", "song_1", "job-42"):
                _queued(first, queue_id)
            _queued(second, "job-42")
            port_one, port_two = one.server_address[1], two.server_address[1]
            wanted = {
                (first, "song/1"): f"RIFF {port_one} song/1",
                (first, "song_1"): f"RIFF {port_one} song_1",
                (first, "job-42"): f"RIFF {port_one} job-42",
                (second, "job-42"): f"RIFF {port_two} job-42",
            }
            for (lab, queue_id), media in wanted.items():
                job = lab.job(queue_id, poll_s=0.05)
                assert job.result().decode() == media
            paths = {lab.job(q).media_path for lab, q in wanted}
            assert len(paths) == 4  # four jobs, four files
            assert sorted(_ASKED) == sorted(q for _, q in wanted)
            # Read again from the ledger (a fresh kernel): each from its own file, no retrieve.
            for (lab, queue_id), media in wanted.items():
                again = Jobs(lab.ledger).find(lab.async_.session.name(GATEWAY), queue_id)
                assert again is not None and again.media_path is not None
                assert Path(again.media_path).read_bytes().decode() == media
            assert len(_ASKED) == 4
        finally:
            first.close()
            second.close()

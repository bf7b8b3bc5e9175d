"""Bounds against a hostile server (``support.hostile``, in front of the emulator): a body past
its kind's limit (a 402, a paid JSON answer, a media file), JSON nested 200,000 deep, and a
server trickling its answer past ``timeout_s``. Each is refused naming its limit, nothing is
signed for a 402 that breaks one, and a child process reading gigabyte-sized answers keeps
its peak memory bounded. A caller's own ``http_client`` reads within the same bounds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from support.client import TTS_MODEL
from support.hostile import hostile_server
from support.media import MUSIC, TEST_KEY

import x402lab as xl
from x402lab._loop import run
from x402lab.routes import CHAT, EMBEDDINGS, MODELS, SPEECH, media_route
from x402lab.transport import RetryPolicy

CHAT_MODEL = "zai-org-glm-4.7-flash"
EMBED_MODEL = "text-embedding-bge-m3"
HUGE = 1 << 30  # what the server offers: 1 GiB of each
ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import json, resource, sys
    import x402lab as xl

    def peak_mib():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    gateway, reports, key, ledger = sys.argv[1:5]
    limits = xl.Limits(json_bytes=8 << 20, media_bytes=8 << 20)
    lab = xl.connect(gateway, reports, wallet=xl.Wallet.from_key(key), ledger=ledger,
                     limits=limits, retry=xl.RetryPolicy(attempts=1))
    lab.models()
    before = peak_mib()
    seen = {}
    calls = {
        "402": lambda: lab.embed("hello", model=sys.argv[5]),
        "paid": lambda: lab.chat("hello", model=sys.argv[6], max_tokens=8),
        "media": lambda: lab.music(**json.loads(sys.argv[7]), poll_s=0.05).result(
            timeout_s=30),
    }
    for name, call in calls.items():
        try:
            call()
            seen[name] = "no error"
        except xl.X402LabError as exc:
            seen[name] = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"before": before, "after": peak_mib(), "seen": seen}))
    lab.close()
    """
)


@pytest.fixture
def connect_lab():
    """``connect_lab(service, ledger, **options)``: a sync Lab (closed after the test)."""
    made = []

    def connect(service, ledger, **options):
        lab = xl.connect(
            service.gateway_url, service.reports_url, wallet=xl.Wallet.from_key(TEST_KEY),
            ledger=ledger, **options,
        )  # fmt: skip
        made.append(lab)
        return lab

    yield connect
    for lab in made:
        lab.close()


def _through(hostile, emulator) -> SimpleNamespace:
    return SimpleNamespace(gateway_url=hostile.url, reports_url=emulator.reports_url)


@pytest.mark.spawns
def test_gigabyte_answers_stop_at_their_limits_with_memory_bounded(emulator, tmp_path):
    with hostile_server(emulator.gateway_url) as hostile:
        hostile.attack(path=EMBEDDINGS, status=402, body_bytes=HUGE)  # no challenge header
        hostile.attack(path=CHAT, paid_only=True, body_bytes=HUGE)  # the paid answer
        hostile.attack(path=media_route("music", "retrieve"), body_bytes=HUGE)
        child = subprocess.run(
            [sys.executable, "-c", CHILD, hostile.url, emulator.reports_url, TEST_KEY,
             str(tmp_path / "ledger.sqlite"), EMBED_MODEL, CHAT_MODEL, json.dumps(MUSIC)],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert child.returncode == 0, child.stderr[-3000:]
        report = json.loads(child.stdout.strip().splitlines()[-1])
        seen = report["seen"]
        assert seen["402"].startswith("LimitExceeded") and "Limits.error_bytes" in seen["402"]
        assert "1,048,576 bytes" in seen["402"]
        assert seen["paid"].startswith("LimitExceeded") and "Limits.json_bytes" in seen["paid"]
        assert seen["media"].startswith("LimitExceeded") and "Limits.media_bytes" in seen["media"]
        # Of 3 GiB offered the child read a few MiB: its peak grew by far less than one body.
        assert report["after"] - report["before"] < 64, report
        # Nothing was signed for the 402; the chat and the music queue were paid once each.
        paths = [p["resource"]["url"] for p in hostile.payments if "resource" in p]
        assert not any(EMBEDDINGS in url for url in paths)
        assert len(hostile.payments) == 2
    ledger = xl.Ledger(tmp_path / "ledger.sqlite")
    rows = ledger.rows()
    assert sorted(r["path"] for r in rows) == sorted([CHAT, media_route("music", "queue")])
    assert {r["status"] for r in rows} == {"settled"}  # what was paid is on the books
    ledger.close()


def test_json_nested_200000_deep_is_refused_naming_the_limit(emulator, connect_lab, tmp_path):
    with hostile_server(emulator.gateway_url) as hostile:
        hostile.attack(path=MODELS, nesting=200_000)
        lab = connect_lab(_through(hostile, emulator), tmp_path / "ledger.sqlite")
        with pytest.raises(xl.LimitExceeded, match=r"nested 200,000 levels.*Limits.json_depth"):
            lab.models()
        assert hostile.payments == [] and lab.ledger.rows() == []
    with pytest.raises(xl.ConfigError, match=r"Limits\(json_depth=...\) must be a whole number"):
        xl.Limits(json_depth=0)


def test_a_trickling_server_is_cut_at_the_deadline_of_the_whole_request(
    emulator, connect_lab, tmp_path
):
    with hostile_server(emulator.gateway_url) as hostile:
        lab = connect_lab(
            _through(hostile, emulator),
            tmp_path / "ledger.sqlite",
            timeout_s=2.0,
            retry=RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.05),
        )
        lab.models()  # the catalog, before the server starts trickling
        trickle = {"body_bytes": 1 << 20, "chunk_bytes": 1024, "trickle_s": 0.1}
        # The 402 trickles: nothing is signed, the error names the limit.
        unpaid = hostile.attack(path=CHAT, status=402, **trickle)
        started = time.monotonic()
        with pytest.raises(xl.TransportError, match=r"timeout_s=2 s"):
            lab.chat("hello", model=CHAT_MODEL, max_tokens=8)
        assert time.monotonic() - started < 6  # one deadline, never a retry after it
        assert hostile.payments == [] and lab.ledger.rows() == []
        hostile.attacks.remove(unpaid)
        # The paid answer trickles after its receipt, for chat() and chat_stream(): cut at
        # the deadline; the payment is on the books as settled (its answer lost), and never
        # signed again.
        hostile.attack(path=CHAT, paid_only=True, **trickle)
        for call in (lab.chat, lambda *a, **k: list(lab.chat_stream(*a, **k))):
            started = time.monotonic()
            with pytest.raises(xl.AnswerLost, match=r"timeout_s=2 s") as caught:
                call("hello again", model=CHAT_MODEL, max_tokens=8)
            assert time.monotonic() - started < 6
            assert caught.value.details["settled"] is True
        rows = lab.ledger.rows()
        assert len(hostile.payments) == len(rows) == 2  # one payment each, sent once
        assert {r["status"] for r in rows} == {"settled"}


def test_a_callers_own_client_reads_within_the_same_bounds(emulator, tmp_path):
    seen: list[str] = []

    async def note(request):
        seen.append(request.url.path)

    mine = httpx.AsyncClient(event_hooks={"request": [note]})
    limits = xl.Limits(json_bytes=8 << 20, error_bytes=1 << 20)
    with hostile_server(emulator.gateway_url) as hostile:
        hostile.attack(path=EMBEDDINGS, status=402, body_bytes=HUGE)  # no challenge header
        hostile.attack(path=CHAT, paid_only=True, body_bytes=HUGE)  # the paid answer
        lab = xl.connect(
            hostile.url, emulator.reports_url, wallet=xl.Wallet.from_key(TEST_KEY),
            ledger=tmp_path / "ledger.sqlite", http_client=mine, limits=limits,
            timeout_s=5.0, retry=RetryPolicy(attempts=1),
        )  # fmt: skip
        try:
            with pytest.raises(xl.LimitExceeded, match=r"1,048,576 bytes \(Limits.error_bytes\)"):
                lab.embed("hello", model=EMBED_MODEL)
            assert hostile.payments == []  # nothing signed for a 402 past its limit
            with pytest.raises(xl.LimitExceeded, match=r"8,388,608 bytes \(Limits.json_bytes\)"):
                lab.chat("hello", model=CHAT_MODEL, max_tokens=8)
            assert len(hostile.payments) == 1  # paid once, never signed again
            hostile.attack(path=CHAT, status=402, body_bytes=1 << 20, chunk_bytes=1024,
                           trickle_s=0.1)  # fmt: skip
            started = time.monotonic()
            with pytest.raises(xl.TransportError, match=r"timeout_s=5 s"):
                lab.chat("a trickle", model=CHAT_MODEL, max_tokens=8)
            assert time.monotonic() - started < 10
        finally:
            lab.close()
    # Every request went through the caller's client, which is left open.
    assert EMBEDDINGS in seen and CHAT in seen and MODELS in seen
    assert not mine.is_closed
    run(mine.aclose())


def test_a_binary_answer_past_its_limit_leaves_no_file(emulator, connect_lab, tmp_path):
    with hostile_server(emulator.gateway_url) as hostile:
        hostile.attack(
            path=SPEECH, paid_only=True, body_bytes=32 << 20, chunk_bytes=1 << 20,
            content_type="audio/mpeg",
        )  # fmt: skip
        lab = connect_lab(
            _through(hostile, emulator), tmp_path / "ledger.sqlite",
            limits=xl.Limits(json_bytes=8 << 20),
        )  # fmt: skip
        with pytest.raises(xl.LimitExceeded, match=r"8,388,608 bytes \(Limits.json_bytes\)"):
            lab.speech("Say it", model=TTS_MODEL)
        # Streamed to a temporary file and removed at the limit: nothing in answers/.
        answers = tmp_path / "media" / "answers"
        assert not answers.exists() or list(answers.iterdir()) == []
        assert len(hostile.payments) == 1  # paid once, and its row says so
        assert [r["status"] for r in lab.ledger.rows()] == ["settled"]


def test_an_answer_that_came_whole_with_its_headers_is_held_to_its_limit(emulator, tmp_path):
    # A 402's body is a few hundred bytes: on loopback it arrives with its headers, so it is
    # read in one piece rather than streamed, and that piece is counted against the limit too.
    lab = xl.connect(
        emulator.gateway_url, emulator.reports_url, wallet=xl.Wallet.from_key(TEST_KEY),
        ledger=tmp_path / "ledger.sqlite", limits=xl.Limits(error_bytes=64),
        retry=RetryPolicy(attempts=1),
    )  # fmt: skip
    try:
        with pytest.raises(xl.LimitExceeded, match=r"64 bytes \(Limits.error_bytes\)"):
            lab.chat("hello", model=CHAT_MODEL, max_tokens=8)
        assert lab.ledger.rows() == []  # nothing signed for it
        assert emulator.chain.received(emulator.settings.pay_to) == 0
    finally:
        lab.close()

"""Identical music() calls at the same time pay the queue once (docs/money.md, rule 5).

Concurrent calls in one Lab, in two Labs sharing a ledger file and in two processes sharing
it all end with one payment and one job: the first call writes a ``pending`` claim before
anything is signed, the others wait for its job. Paid requests are slowed down on the
emulator (``paid_latency_s``) so the calls really overlap. A claim whose payment left
nothing settled is released; one whose outcome is unknown blocks a second payment.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.media import FAST_POLL, MUSIC, TEST_KEY, queue_payments

import x402lab as xl
from x402lab.gateway import request_key
from x402lab.ledger import ClaimAction, Claims, Jobs

AUDIO_QUEUE = "/api/v1/audio/queue"

# A second process: one Lab on the same ledger queuing the same music; prints its queue id.
_OTHER_PROCESS = """
import json, os, sys
import x402lab as xl
lab = xl.connect(sys.argv[1], sys.argv[2], wallet=xl.Wallet.from_key(os.environ["TEST_KEY"]),
                 ledger=sys.argv[3])
try:
    print(json.dumps({"queue_id": lab.music(**json.loads(sys.argv[4])).queue_id}))
finally:
    lab.close()
"""


def claim_statuses(lab) -> list[str]:
    core = lab if isinstance(lab, xl.AsyncLab) else lab.async_
    claims = core.media.job_store.claims.history()
    return [str(claim.status) for claim in claims if claim.scope.startswith("jobs:")]


def test_concurrent_identical_calls_in_one_lab_pay_once(emulator_factory, wallet, tmp_path):
    emulator = emulator_factory(paid_latency_s=0.3)

    async def main() -> list[str]:
        async with xl.connect_async(
            emulator.gateway_url,
            emulator.reports_url,
            wallet=wallet,
            ledger=tmp_path / "ledger.sqlite",
        ) as alab:
            jobs = await asyncio.gather(*(alab.music(**MUSIC) for _ in range(3)))
            assert jobs[0] is jobs[1] is jobs[2]  # one handle for the one job
            rows = alab.ledger.rows(where="path = ?", params=(AUDIO_QUEUE,))
            assert [(r["status"], r["amount_atomic"]) for r in rows] == [("settled", 15_000)]
            assert claim_statuses(alab) == ["done"]
            return [job.queue_id for job in jobs]

    queue_ids = asyncio.run(main())
    assert len(set(queue_ids)) == 1
    assert len(emulator.chain.transfers()) == 1


def test_two_labs_on_one_ledger_pay_once(emulator_factory, connect_lab, tmp_path):
    emulator = emulator_factory(paid_latency_s=0.3)
    ledger = tmp_path / "ledger.sqlite"
    labs = [connect_lab(emulator, ledger), connect_lab(emulator, ledger)]  # two notebooks
    start = threading.Barrier(len(labs))

    def run(lab) -> str:
        start.wait()
        return lab.music(**MUSIC, poll_s=FAST_POLL).queue_id

    with ThreadPoolExecutor(len(labs)) as pool:
        queue_ids = list(pool.map(run, labs))

    assert queue_ids[0] == queue_ids[1]
    assert len(emulator.chain.transfers()) == 1
    assert queue_payments(labs[0], AUDIO_QUEUE)["status"].tolist() == ["settled"]
    assert labs[1].jobs()["queue_id"].tolist() == [queue_ids[0]]
    assert claim_statuses(labs[0]) == ["done"]


def test_another_process_waits_for_the_pending_claim(emulator_factory, connect_lab, tmp_path):
    emulator = emulator_factory(paid_latency_s=1.0)
    ledger = tmp_path / "ledger.sqlite"
    lab = connect_lab(emulator, ledger)
    other = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _OTHER_PROCESS,
            emulator.gateway_url,
            emulator.reports_url,
            str(ledger),
            json.dumps(MUSIC),
        ],
        env={**os.environ, "TEST_KEY": TEST_KEY},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while queue_payments(lab, AUDIO_QUEUE).empty:  # until the other process is paying
            assert other.poll() is None, other.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.01)
        job = lab.music(**MUSIC, poll_s=FAST_POLL)
        out, err = other.communicate(timeout=30)
    finally:
        if other.poll() is None:
            other.kill()
            other.communicate()
    assert other.returncode == 0, err
    assert job.queue_id == json.loads(out)["queue_id"]
    assert len(emulator.chain.transfers()) == 1
    assert queue_payments(lab, AUDIO_QUEUE)["status"].tolist() == ["settled"]
    assert claim_statuses(lab) == ["done"]


def test_unknown_outcome_is_not_paid_again_by_a_concurrent_call(emulator_factory, wallet, tmp_path):
    emulator = emulator_factory(paid_then_500_rate=1.0, paid_latency_s=0.2)

    async def main() -> None:
        async with xl.connect_async(
            emulator.gateway_url,
            emulator.reports_url,
            wallet=wallet,
            ledger=tmp_path / "ledger.sqlite",
        ) as alab:
            first, second = await asyncio.gather(
                alab.music(**MUSIC), alab.music(**MUSIC), return_exceptions=True
            )
            # It settled: a second payment would be double.
            assert len(emulator.chain.transfers()) == 1
            assert isinstance(first, xl.SettlementUnknown)
            assert isinstance(second, xl.JobError) and "rebuy=True" in str(second)
            assert claim_statuses(alab) == ["unknown"]

    asyncio.run(main())


def test_a_refused_payment_releases_its_claim(emulator, connect_lab, tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    poor = connect_lab(emulator, ledger, budget=xl.Budget(usd=0.01, name="poor"))
    with pytest.raises(xl.BudgetExceeded):
        poor.music(**MUSIC)
    assert claim_statuses(poor) == ["failed"]  # nothing was signed: the claim is released

    funded = connect_lab(emulator, ledger, budget=xl.Budget(usd=1.0, name="funded"))
    job = funded.music(**MUSIC, poll_s=FAST_POLL)
    assert job.paid_atomic == 15_000
    assert claim_statuses(funded) == ["failed", "done"]
    assert len(emulator.chain.transfers()) == 1
    assert poor.music(**MUSIC).queue_id == job.queue_id  # stored now: no payment, no budget


def test_claim_left_by_a_stopped_process_without_a_payment_is_taken_over(
    emulator, connect_lab, tmp_path
):
    lab = connect_lab(emulator, tmp_path / "ledger.sqlite")
    # The key music(**MUSIC) pays under (checked against the job's own key below).
    body = {"model": MUSIC["model"], "prompt": MUSIC["prompt"], "duration": 60}
    key = request_key("POST", AUDIO_QUEUE, body)
    # Another process claimed this queue an hour ago and stopped before signing anything.
    hour_ago = lambda: time.time() - 3600  # noqa: E731
    other = Claims(lab.ledger.db, now=hour_ago, owner="elsewhere:4242:1")
    stale = Jobs(lab.ledger, claims=other, now=hour_ago).claim(
        gateway=emulator.gateway_url, kind="music", request_key=key
    )
    assert stale.action is ClaimAction.PAY

    # The ledger proves nothing was signed for it, so the next call takes it over and pays once.
    job = lab.music(**MUSIC, poll_s=FAST_POLL)
    assert job.request_key == key
    assert lab.music(**MUSIC).queue_id == job.queue_id
    assert len(emulator.chain.transfers()) == 1
    assert claim_statuses(lab) == ["failed", "done"]

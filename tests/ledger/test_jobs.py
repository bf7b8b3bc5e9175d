"""Media job rows in the store (``x402lab.ledger.jobs``): one paid queue per request key."""

from __future__ import annotations

import pytest
from support.ledger import meta, settled, signed

import x402lab as xl
from x402lab.ledger import ClaimAction, Claimed, Claims, JobRecord, Jobs, Ledger, job_scope

GW = "http://127.0.0.1:9/"
KEY = "music-request-key"
BODY = {"model": "ace-step-15", "prompt": "calm piano", "duration": 60}


@pytest.fixture
def ledger(tmp_path) -> Ledger:
    return Ledger(tmp_path / "ledger.sqlite")


def pay_queue(jobs: Jobs, ledger: Ledger, amount: int = 15_000) -> JobRecord:
    claimed = jobs.claim(gateway=GW, kind="music", request_key=KEY)
    assert isinstance(claimed, Claimed) and claimed.action is ClaimAction.PAY
    row = settled(ledger, KEY, amount)
    return jobs.complete_claim(
        claimed, model="ace-step-15", queue_id=f"q-{row}", request=BODY, quoted_atomic=amount
    )


def test_a_paid_queue_is_stored_and_returned_instead_of_paying_again(ledger):
    jobs = Jobs(ledger)
    job = pay_queue(jobs, ledger)
    assert (job.gateway, job.kind, job.request_key, job.status) == (GW, "music", KEY, "queued")
    assert job.request == BODY and job.quoted_atomic == 15_000
    # Money through the join with the ledger: amount, tx hash, ledger row.
    [row] = ledger.rows()
    assert (job.ledger_id, job.paid_atomic, job.tx_hash) == (row["id"], 15_000, row["tx_hash"])
    assert jobs.claim(gateway=GW, kind="music", request_key=KEY) == job
    assert jobs.find(GW, job.queue_id) == job == jobs.latest_for_request(GW, KEY)
    assert jobs.all() == [job] == jobs.all(GW) and jobs.all("http://other") == []


def test_another_caller_waits_for_the_pending_queue(ledger):
    mine = Jobs(ledger)
    other = Jobs(ledger, claims=Claims(ledger.db, owner="other-host:1:1"))
    first = mine.claim(gateway=GW, kind="music", request_key=KEY)
    assert isinstance(first, Claimed) and first.action is ClaimAction.PAY
    waiting = other.claim(gateway=GW, kind="music", request_key=KEY)
    assert isinstance(waiting, Claimed) and waiting.action is ClaimAction.WAIT
    row = settled(ledger, KEY)
    mine.complete_claim(first, model="m", queue_id="q-1", request=BODY, ledger_id=row)
    assert other.claim(gateway=GW, kind="music", request_key=KEY).queue_id == "q-1"  # type: ignore[union-attr]


def test_a_refused_payment_releases_the_claim(ledger):
    jobs = Jobs(ledger)
    claimed = jobs.claim(gateway=GW, kind="music", request_key=KEY)
    assert isinstance(claimed, Claimed)
    ledger.record_refused(budget="poor", amount_atomic=15_000, meta=meta(KEY), error="budget")
    assert jobs.release_claim(claimed, "BudgetExceeded") == "failed"
    job = pay_queue(jobs, ledger)
    assert [c.status for c in jobs.claims.history(job_scope(GW))] == ["failed", "done"]
    assert job.paid_atomic == 15_000


def test_an_unknown_queue_payment_is_never_paid_again_without_rebuy(ledger):
    jobs = Jobs(ledger)
    claimed = jobs.claim(gateway=GW, kind="music", request_key=KEY)
    assert isinstance(claimed, Claimed)
    row = signed(ledger, KEY, 15_000)
    ledger.record_unknown(row, "HTTP 500 after the payment was sent")
    assert jobs.release_claim(claimed, "HTTP 500") == "unknown"
    again = jobs.claim(gateway=GW, kind="music", request_key=KEY)
    assert isinstance(again, Claimed) and again.action is ClaimAction.MAYBE_PAID
    assert (again.record.ledger_id, again.record.amount_atomic) == (row, 15_000)
    rebought = jobs.claim(gateway=GW, kind="music", request_key=KEY, rebuy=True)
    assert isinstance(rebought, Claimed) and rebought.action is ClaimAction.PAY
    second = settled(ledger, KEY, 15_000)
    job = jobs.complete_claim(rebought, model="m", queue_id="q-2", request=BODY, ledger_id=second)
    assert jobs.latest_for_request(GW, KEY) == job
    assert jobs.claim(gateway=GW, kind="music", request_key=KEY) == job


def test_paid_amounts_follow_the_ledger_instead_of_a_copy(ledger):
    jobs = Jobs(ledger)
    claimed = jobs.claim(gateway=GW, kind="video", request_key=KEY)
    assert isinstance(claimed, Claimed)
    row = signed(ledger, KEY, 90_000)
    ledger.record_unknown(row, "no receipt")
    job = jobs.complete_claim(claimed, model="m", queue_id="q-1", request=BODY, ledger_id=row)
    assert (job.paid_atomic, job.payment_status) == (None, "unknown")  # unknown is not 0
    ledger.record_settled(row, tx_hash="0xfound", payer="0xPayer")  # e.g. reconciliation
    job = jobs.get(job.id)
    assert job is not None and (job.paid_atomic, job.tx_hash) == (90_000, "0xfound")


def test_updates_touch_job_columns_only(ledger):
    jobs = Jobs(ledger)
    job = pay_queue(jobs, ledger)
    jobs.update(job.id, status="completed", media_path="/tmp/x.wav", cleaned_up=True)
    fresh = jobs.get(job.id)
    assert fresh is not None and (fresh.status, fresh.cleaned_up) == ("completed", True)
    with pytest.raises(xl.ConfigError, match="read from the ledger"):
        jobs.update(job.id, paid_atomic=1)
    with pytest.raises(xl.ConfigError, match="not a job status"):
        jobs.update(job.id, status="exploded")


def test_a_job_inserted_without_a_claim_is_not_bought_again(ledger):
    jobs = Jobs(ledger)
    row = settled(ledger, KEY)
    job = jobs.insert(
        gateway=GW,
        kind="music",
        model="m",
        queue_id="q-9",
        request_key=KEY,
        request=BODY,
        status="processing",
        ledger_id=row,
    )
    assert (job.status, job.paid_atomic) == ("processing", 10_000)
    assert jobs.claim(gateway=GW, kind="music", request_key=KEY) == job


def test_a_claim_left_by_a_stopped_process_is_taken_over(ledger):
    clock = [10_000.0]
    gone = Jobs(ledger, claims=Claims(ledger.db, owner="dead:1:1", now=lambda: clock[0]))
    gone.claim(gateway=GW, kind="music", request_key=KEY)  # stopped before signing
    clock[0] += 3600
    jobs = Jobs(ledger, claims=Claims(ledger.db, now=lambda: clock[0]))
    claimed = jobs.claim(gateway=GW, kind="music", request_key=KEY)
    assert isinstance(claimed, Claimed) and claimed.action is ClaimAction.PAY
    assert [c.status for c in jobs.claims.history(job_scope(GW))] == ["failed", "pending"]

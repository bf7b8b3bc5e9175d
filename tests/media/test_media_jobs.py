"""Music and video jobs end to end against the emulator: quote, pay once, poll, fetch, clean up.

Jobs run 0.3 s on the emulator and the tests poll every 50 ms. Money is checked in the three
places it shows: the job handle, the ledger, and the emulator's chain.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal

import httpx
import pytest
from support.media import FAST_POLL, MUSIC, queue_payments

import x402lab as xl
from x402lab.media.status import Completed, Processing, Queued

AUDIO_QUEUE = "/api/v1/audio/queue"
VIDEO_QUEUE = "/api/v1/video/queue"
WAN = {"model": "wan-2-7-text-to-video", "duration": 5, "resolution": "480p"}
KLING = {"model": "kling-3-0-text-to-video", "duration": "5s", "resolution": "720p"}


def transfers_from(emulator, wallet) -> list:
    return [t for t in emulator.chain.transfers() if t.payer.lower() == wallet.address.lower()]


def gateway_stats(emulator) -> dict:
    return httpx.get(f"{emulator.gateway_url}/api/x402/stats").json()


def test_music_lifecycle_quote_pay_once_wait_save_complete(lab, emulator, wallet, tmp_path):
    quote = lab.quote_music(model="ace-step-15", duration_seconds=60)
    assert quote.amount_atomic == 15_000 and quote.upstream_usd == pytest.approx(0.03)
    assert lab.ledger.to_pandas().empty  # the quote is free: nothing signed

    job = lab.music(**MUSIC, poll_s=FAST_POLL)
    assert isinstance(job.status, Queued) and not job.done
    # Exact money: Decimals, equal to the atomic unit.
    assert job.quoted_usd == quote.amount_usd
    assert job.paid_usd == quote.amount_usd

    final = job.wait(timeout_s=10)
    assert isinstance(final, Completed) and final.content_type == "audio/wav"
    data = job.result()
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    assert job.media_path.read_bytes() == data  # kept on disk as soon as it arrived
    saved = job.save(tmp_path / "song.wav")
    assert saved.read_bytes() == data
    assert job.elapsed >= 0.3 and job.polls >= 2

    assert job.complete() is True  # deleted upstream now
    assert job.complete() is False  # alreadyCompleted: still a success
    assert job.cleaned_up
    assert job.result() == data  # the paid media outlives the upstream copy

    rows = queue_payments(lab, AUDIO_QUEUE)
    assert rows["status"].tolist() == ["settled"]
    assert rows["amount_atomic"].tolist() == [15_000]
    assert rows["request_key"].tolist() == [job.request_key]
    assert [t.amount_atomic for t in transfers_from(emulator, wallet)] == [15_000]


def test_rerun_returns_the_stored_job_and_new_true_pays_again(lab, emulator, wallet):
    first = lab.music(**MUSIC, poll_s=FAST_POLL)
    again = lab.music(**MUSIC)
    assert again.queue_id == first.queue_id
    assert len(queue_payments(lab, AUDIO_QUEUE)) == 1

    other = lab.music(**MUSIC, rebuy=True, poll_s=FAST_POLL)
    assert other.queue_id != first.queue_id
    assert len(queue_payments(lab, AUDIO_QUEUE)) == 2
    assert len(transfers_from(emulator, wallet)) == 2
    # After rebuy=True the newest job is the one a re-run returns.
    assert lab.music(**MUSIC).queue_id == other.queue_id
    for job in (first, other):
        job.wait(timeout_s=10)


def test_kernel_restart_resumes_polling_without_paying(emulator, connect_lab, wallet, tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    before = connect_lab(emulator, ledger)
    job = before.music(**MUSIC)
    queue_id = job.queue_id
    assert not job.done
    before.close()  # the kernel goes away while the job runs

    after = connect_lab(emulator, ledger)
    listed = after.jobs()
    assert listed["queue_id"].tolist() == [queue_id]
    assert listed["status"].tolist() == ["queued"]
    assert listed["paid_atomic"].tolist() == [15_000]

    resumed = after.music(**MUSIC, poll_s=FAST_POLL)  # the same cell, run again
    assert resumed.queue_id == queue_id
    assert after.job(queue_id).queue_id == queue_id
    assert isinstance(resumed.wait(timeout_s=10), Completed)
    assert resumed.result()[:4] == b"RIFF"
    assert resumed.paid_usd == Decimal("0.015")

    rows = queue_payments(after, AUDIO_QUEUE)
    assert rows["status"].tolist() == ["settled"]
    assert len(transfers_from(emulator, wallet)) == 1
    assert after.jobs()["status"].tolist() == ["completed"]


def test_video_with_download_url_is_fetched_and_saved(lab, emulator):
    job = lab.video(**KLING, prompt="a city at night", poll_s=FAST_POLL)
    assert job.download_url and "/api/v1/video/download/" in job.download_url
    final = job.wait(timeout_s=10)
    assert isinstance(final, Completed) and final.content_type == "video/mp4"
    data = job.result()
    assert data[4:8] == b"ftyp"
    assert job.media_path.suffix == ".mp4"
    assert job.complete() is True
    assert job.complete() is False
    assert queue_payments(lab, VIDEO_QUEUE)["amount_atomic"].tolist() == [350_000]


def test_binary_video_and_delete_media_on_completion(lab, emulator):
    job = lab.video(**WAN, prompt="a paper boat", delete_media=True, poll_s=FAST_POLL)
    assert job.download_url is None
    data = job.result(timeout_s=10)
    assert data[4:8] == b"ftyp"
    assert job.cleaned_up  # retrieve deleted it upstream as it delivered it
    assert gateway_stats(emulator)["jobs"]["cleaned"] == 1
    assert job.complete() is False  # nothing left to delete, and that is fine


def test_download_url_video_with_delete_media(lab, emulator):
    job = lab.video(**KLING, prompt="rain on glass", delete_media=True, poll_s=FAST_POLL)
    assert job.result(timeout_s=10)[4:8] == b"ftyp"
    assert gateway_stats(emulator)["jobs"]["cleaned"] == 1
    assert job.complete() is False


def test_video_arguments_are_checked_before_any_request(lab, emulator):
    with pytest.raises(xl.QuoteRejected, match=r"allowed 5s, 10s"):
        lab.video("x", model="wan-2-7-text-to-video", duration=7)
    with pytest.raises(xl.QuoteRejected, match=r"allowed 16:9, 9:16, 1:1"):
        lab.quote_video(model="wan-2-7-text-to-video", duration=5, aspect_ratio="4:3")
    with pytest.raises(xl.QuoteRejected, match=r"allowed 720p, 1080p"):
        lab.video("x", model="kling-3-0-text-to-video", duration=5, resolution="480p")
    with pytest.raises(xl.ModelNotFound, match="kling-3-0-text-to-video"):
        lab.video("x", model="no-such-video-model", duration=5)
    stats = gateway_stats(emulator)
    assert stats["payments"]["challenges"] == 0 and stats["jobs"]["total"] == 0
    assert lab.ledger.to_pandas().empty


def test_quotes_match_what_the_queue_charges(lab):
    quote = lab.quote_video(**WAN, aspect_ratio="16:9")
    job = lab.video(**WAN, aspect_ratio="16:9", prompt="a paper boat", poll_s=FAST_POLL)
    assert job.quoted_usd == quote.amount_usd == Decimal("0.175")
    with pytest.raises(xl.QuoteRejected, match="duration_seconds 45"):
        lab.quote_music(model="ace-step-15", duration_seconds=45)
    job.wait(timeout_s=10)


def test_budget_refuses_the_queue_and_stores_no_job(emulator, connect_lab, tmp_path):
    lab = connect_lab(emulator, tmp_path / "ledger.sqlite", budget=xl.Budget(usd=0.01))
    with pytest.raises(xl.BudgetExceeded):
        lab.music(**MUSIC)
    assert lab.jobs().empty
    assert queue_payments(lab, AUDIO_QUEUE)["status"].tolist() == ["refused"]


def test_paid_but_unstored_queue_is_not_paid_again(emulator_factory, connect_lab, tmp_path):
    emulator = emulator_factory(paid_then_500_rate=1.0)
    lab = connect_lab(emulator, tmp_path / "ledger.sqlite")
    with pytest.raises(xl.SettlementUnknown):
        lab.music(**MUSIC)
    with pytest.raises(xl.JobError, match="rebuy=True"):
        lab.music(**MUSIC)
    assert queue_payments(lab, AUDIO_QUEUE)["status"].tolist() == ["unknown"]
    assert len(emulator.chain.transfers()) == 1  # it did settle: paying again would be double


def test_wait_timeout_leaves_the_job_resumable(emulator_factory, connect_lab, tmp_path):
    emulator = emulator_factory(job_seconds=1.0)
    lab = connect_lab(emulator, tmp_path / "ledger.sqlite")
    job = lab.music(**MUSIC, poll_s=FAST_POLL)
    with pytest.raises(xl.JobError, match="still processing"):
        job.wait(timeout_s=0.2)
    assert isinstance(job.status, Processing)
    assert job.expected_s == pytest.approx(1.0)  # the P80 guide from retrieve: job_seconds
    assert 0.0 < job.progress < 0.99
    assert isinstance(job.wait(timeout_s=10), Completed) and job.progress == 1.0


def test_jobs_table_has_its_declared_dtypes_empty_or_full(lab):
    empty = lab.jobs()
    job = lab.music(**MUSIC, poll_s=FAST_POLL)
    job.wait(timeout_s=10)
    full = lab.jobs()
    assert list(empty.columns) == list(full.columns)
    assert dict(empty.dtypes) == dict(full.dtypes)
    assert str(full["created_at"].dtype) == "datetime64[us, UTC]"
    assert str(full["paid_atomic"].dtype) == "Int64"
    row = full.iloc[0]
    assert (row["kind"], row["status"], row["paid_atomic"]) == ("music", "completed", 15_000)
    assert row["paid_usd"] == Decimal("0.015") and row["size_bytes"] == len(job.result())


def test_status_stream_shared_by_concurrent_readers(lab):
    job = lab.music(**MUSIC, poll_s=FAST_POLL)
    seen: list[str] = []
    job.watch(lambda j: seen.append(j.status.name), tick=0.01)
    names = [status.name for status in job.updates()]
    # The watcher may have started the shared stream first: a later reader begins at the
    # status current when it joins.
    assert names[0] in ("queued", "processing") and names[-1] == "completed"
    assert "processing" in names
    # Two readers, one stream: about one retrieve per interval, not one per reader.
    assert job.polls <= job.elapsed / FAST_POLL + 3
    job.wait(timeout_s=5)  # calls the watcher once more, from this (the awaiting) context
    assert seen[-1] == "completed"


def test_async_lab_music_and_updates(emulator, wallet, tmp_path):
    async def main() -> list[str]:
        async with xl.connect_async(
            emulator.gateway_url,
            emulator.reports_url,
            wallet=wallet,
            ledger=tmp_path / "ledger.sqlite",
        ) as alab:
            job = await alab.music(**MUSIC, poll_s=FAST_POLL)
            names = [status.name async for status in job.updates(timeout_s=10)]
            assert (await job.result())[:4] == b"RIFF"
            assert await job.complete() is True
            return names

    names = asyncio.run(main())
    assert names[0] == "queued" and names[-1] == "completed"


def test_unknown_stored_job_is_a_job_error(lab):
    with pytest.raises(xl.JobError, match="no stored job"):
        lab.job("not-a-queue-id")

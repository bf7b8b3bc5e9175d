"""Music and video jobs: objects, transitions, lifecycle (docs/services.md, "Job lifecycle")."""

from __future__ import annotations

import io
import struct
import time
import wave

import httpx
import pytest
from support.gateway import Gateway, error_of, receipt_of

from x402lab.emulator.gateway.catalog import Catalog
from x402lab.emulator.gateway.jobs import DOWNLOAD_URL_TTL_S, JobStore

MUSIC = {"model": "ace-step-15", "prompt": "calm piano", "duration_seconds": 60}
VIDEO_BINARY = {
    "model": "wan-2-7-text-to-video",
    "prompt": "waves at dusk",
    "duration": "5s",
    "resolution": "480p",
    "aspect_ratio": "16:9",
}
VIDEO_URL = {"model": "kling-3-0-text-to-video", "prompt": "a city", "duration": "5s"}


@pytest.fixture
def start(emulator_factory, payer):
    made: list[tuple[httpx.Client, object]] = []

    def start_gateway(**settings):
        emulator = emulator_factory(**settings)
        client = httpx.Client(base_url=emulator.gateway_url)
        made.append((client, emulator))
        return Gateway(client, payer), emulator

    yield start_gateway
    for client, _ in made:
        client.close()


@pytest.fixture
def done(start):
    """A gateway whose jobs finish at once."""
    return start(job_seconds=0.0)[0]


@pytest.fixture
def slow(start):
    """A gateway whose jobs keep running during the test."""
    return start(job_seconds=60.0)


def _queue(gw: Gateway, kind: str, body: dict) -> dict:
    response = gw.pay(f"/api/v1/{kind}/queue", json=body)
    assert response.status_code == 200, response.text
    assert receipt_of(response)["success"] is True
    return response.json()


def _retrieve(gw: Gateway, kind: str, job: dict, **extra) -> httpx.Response:
    body = {"model": job["model"], "queue_id": job["queue_id"], **extra}
    return gw.post(f"/api/v1/{kind}/retrieve", json=body)


def _complete(gw: Gateway, kind: str, job: dict) -> httpx.Response:
    return gw.post(
        f"/api/v1/{kind}/complete", json={"model": job["model"], "queue_id": job["queue_id"]}
    )


def _mp4_boxes(data: bytes) -> list[bytes]:
    boxes, offset = [], 0
    while offset < len(data):
        size, kind = struct.unpack(">I4s", data[offset : offset + 8])
        assert size >= 8
        boxes.append(kind)
        offset += size
    assert offset == len(data)
    return boxes


# -- objects --------------------------------------------------------------------------------


def test_audio_queue_response_has_queue_id_model_status(done):
    job = _queue(done, "audio", MUSIC)
    assert set(job) == {"queue_id", "model", "status"}
    assert job["model"] == "ace-step-15" and job["status"] == "QUEUED"


def test_video_queue_response_has_no_status_and_no_job_id(done):
    job = _queue(done, "video", VIDEO_BINARY)
    assert set(job) == {"queue_id", "model"}
    with_url = _queue(done, "video", VIDEO_URL)
    assert set(with_url) == {"queue_id", "model", "download_url"}
    assert with_url["download_url"].startswith("http://127.0.0.1:")


def test_quote_response_fields(done):
    quote = done.post("/api/v1/video/quote", json=VIDEO_BINARY).json()
    assert set(quote) == {"quote", "upstreamUsd"}
    assert quote["quote"] == pytest.approx(quote["upstreamUsd"] * 0.5)


# -- transitions ------------------------------------------------------------------------------


def test_queue_is_the_only_settling_step(start, payer):
    gw, emulator = start(job_seconds=0.3)
    before = emulator.chain.balance_of(payer.address)
    job = _queue(gw, "audio", MUSIC)
    paid = emulator.chain.balance_of(payer.address)
    assert paid == before - 15_000
    quote = gw.post("/api/v1/audio/quote", json={"model": "ace-step-15", "duration_seconds": 60})
    assert quote.status_code == 200
    assert _retrieve(gw, "audio", job).status_code == 200
    time.sleep(0.35)
    assert _retrieve(gw, "audio", job).headers["content-type"] == "audio/wav"
    assert _complete(gw, "audio", job).json() == {"success": True}
    assert emulator.chain.balance_of(payer.address) == paid


def test_processing_retrieve_returns_timing_json(slow):
    gw, _ = slow
    job = _queue(gw, "video", VIDEO_BINARY)
    first = _retrieve(gw, "video", job).json()
    assert first["status"] == "PROCESSING"
    assert first["average_execution_time"] == 60_000  # ms: the emulated duration (job_seconds)
    time.sleep(0.05)
    second = _retrieve(gw, "video", job).json()
    assert second["status"] == "PROCESSING"
    assert second["execution_duration"] >= first["execution_duration"] + 40


def test_processing_then_finished_audio_returns_wav(start):
    gw, _ = start(job_seconds=0.3)
    job = _queue(gw, "audio", MUSIC)
    assert _retrieve(gw, "audio", job).json()["status"] == "PROCESSING"
    time.sleep(0.35)
    response = _retrieve(gw, "audio", job)
    assert response.headers["content-type"] == "audio/wav"
    with wave.open(io.BytesIO(response.content)) as clip:
        assert clip.getnframes() > 0


def test_finished_video_without_download_url_returns_mp4(done):
    job = _queue(done, "video", VIDEO_BINARY)
    response = _retrieve(done, "video", job)
    assert response.headers["content-type"] == "video/mp4"
    assert _mp4_boxes(response.content) == [b"ftyp", b"moov", b"mdat"]


def test_finished_video_with_download_url_is_completed_json(done):
    job = _queue(done, "video", VIDEO_URL)
    answer = _retrieve(done, "video", job).json()
    assert answer == {"status": "COMPLETED", "download_url": job["download_url"]}
    media = httpx.get(answer["download_url"])
    assert media.status_code == 200 and media.headers["content-type"] == "video/mp4"
    assert _mp4_boxes(media.content)[0] == b"ftyp"
    assert httpx.get(answer["download_url"]).status_code == 200  # valid for ~24 h


def test_download_url_before_completion_is_404(slow):
    gw, _ = slow
    job = _queue(gw, "video", VIDEO_URL)
    error_of(httpx.get(job["download_url"]), 404, "media_not_ready")


def test_retrieve_with_delete_media_cleans_up(done):
    job = _queue(done, "audio", MUSIC)
    response = _retrieve(done, "audio", job, delete_media_on_completion=True)
    assert response.headers["content-type"] == "audio/wav"
    error_of(_retrieve(done, "audio", job), 404, "media_deleted")
    assert _complete(done, "audio", job).json() == {"success": True, "alreadyCompleted": True}


def test_delete_media_on_a_download_url_job_waits_for_the_download(done):
    job = _queue(done, "video", VIDEO_URL)
    answer = _retrieve(done, "video", job, delete_media_on_completion=True).json()
    assert answer["status"] == "COMPLETED"
    assert httpx.get(answer["download_url"]).status_code == 200
    error_of(httpx.get(answer["download_url"]), 404, "media_deleted")


def test_complete_deletes_stored_media(done):
    job = _queue(done, "video", VIDEO_BINARY)
    assert _retrieve(done, "video", job).status_code == 200
    assert _complete(done, "video", job).json() == {"success": True}
    error_of(_retrieve(done, "video", job), 404, "media_deleted")


def test_complete_again_is_already_completed(done):
    job = _queue(done, "audio", MUSIC)
    assert _complete(done, "audio", job).json() == {"success": True}
    again = _complete(done, "audio", job)
    assert again.status_code == 200
    assert again.json() == {"success": True, "alreadyCompleted": True}


def test_complete_on_an_unknown_id_is_already_completed(done):
    job = {"model": "ace-step-15", "queue_id": "00000000-0000-4000-8000-000000000000"}
    assert _complete(done, "audio", job).json() == {"success": True, "alreadyCompleted": True}


def test_complete_while_processing_is_409_and_deletes_nothing(slow):
    gw, _ = slow
    job = _queue(gw, "audio", MUSIC)
    error_of(_complete(gw, "audio", job), 409, "job_processing")
    assert _retrieve(gw, "audio", job).json()["status"] == "PROCESSING"


def test_another_queue_call_bills_a_new_job(start, payer):
    gw, emulator = start(job_seconds=60.0)
    before = emulator.chain.balance_of(payer.address)
    first = _queue(gw, "audio", MUSIC)
    second = _queue(gw, "audio", MUSIC)
    assert first["queue_id"] != second["queue_id"]
    assert emulator.chain.balance_of(payer.address) == before - 2 * 15_000


# -- lifecycle errors ---------------------------------------------------------------------------


def test_retrieve_unknown_queue_id_is_404(done):
    job = {"model": "ace-step-15", "queue_id": "nope"}
    error_of(_retrieve(done, "audio", job), 404, "job_not_found")


def test_retrieve_with_the_wrong_model_is_400(done):
    job = _queue(done, "audio", MUSIC)
    error_of(_retrieve(done, "audio", {**job, "model": "elevenlabs-music"}), 400, "model_mismatch")
    error_of(
        done.post("/api/v1/audio/retrieve", json={"queue_id": job["queue_id"]}),
        400,
        "invalid_request",
    )


def test_retrieve_of_a_video_job_on_the_audio_route_is_400(done):
    job = _queue(done, "video", VIDEO_BINARY)
    error_of(_retrieve(done, "audio", job), 400, "invalid_request")


@pytest.mark.parametrize(
    "change", [{"duration": "7s"}, {"resolution": "4k"}, {"aspect_ratio": "4:3"}]
)
def test_video_quote_outside_constraints_is_400(done, change):
    body = {**VIDEO_BINARY, **change}
    body.pop("prompt")
    response = done.post("/api/v1/video/quote", json=body)
    assert error_of(response, 400, "quote_rejected")["hint"].startswith("one of")
    queue = done.post("/api/v1/video/queue", json={**body, "prompt": "x"})
    error_of(queue, 400, "quote_rejected")


@pytest.mark.parametrize("change", [{"duration": "five"}, {"duration": None}])
def test_video_duration_the_schema_refuses_is_400_naming_it(done, change):
    # Not like "5s", or missing: the published schema refuses it before the catalog is read.
    body = {k: v for k, v in {**VIDEO_BINARY, **change}.items() if v is not None}
    body.pop("prompt")
    for path, extra in (("quote", {}), ("queue", {"prompt": "x"})):
        response = done.post(f"/api/v1/video/{path}", json={**body, **extra})
        error = error_of(response, 400, "invalid_request")
        assert "duration" in error["message"] and "constraints" in error["hint"]


def test_video_audio_flag_must_be_supported(done):
    body = {"model": "kling-3-0-text-to-video", "duration": "5s", "audio": True}
    error_of(done.post("/api/v1/video/quote", json=body), 400, "quote_rejected")


@pytest.mark.parametrize("seconds", [30, 59, 61, 100, 211, 240])
def test_ace_step_takes_only_the_six_durations(done, seconds):
    body = {"model": "ace-step-15", "duration_seconds": seconds}
    error = error_of(done.post("/api/v1/audio/quote", json=body), 400, "quote_rejected")
    assert "60, 90, 120, 150, 180, 210" in error["hint"]


def test_per_character_music_needs_character_count(done):
    body = {"model": "elevenlabs-tts-v3"}
    error_of(done.post("/api/v1/audio/quote", json=body), 400, "quote_rejected")


def test_a_good_quote_does_not_guarantee_the_queue_runs(done):
    quote = done.post("/api/v1/audio/quote", json={"model": "minimax-music-v2"})
    assert quote.status_code == 200
    body = {"model": "minimax-music-v2", "prompt": "an upbeat pop song"}  # lyrics are required
    error_of(done.post("/api/v1/audio/queue", json=body), 400, "quote_rejected")


def test_queue_needs_a_prompt(done):
    body = {k: v for k, v in MUSIC.items() if k != "prompt"}
    error_of(done.post("/api/v1/audio/queue", json=body), 400, "invalid_request")
    video = {k: v for k, v in VIDEO_BINARY.items() if k != "prompt"}
    error_of(done.post("/api/v1/video/queue", json=video), 400, "invalid_request")


def test_retrieve_and_complete_are_free(done):
    job = _queue(done, "audio", MUSIC)
    for response in (_retrieve(done, "audio", job), _complete(done, "audio", job)):
        assert response.status_code == 200
        assert "payment-required" not in response.headers


# -- the 24-hour download URL (an injected clock; no waiting a day) ------------------------------


def test_download_url_expires_after_about_24_hours():
    now = [1_000.0]
    store = JobStore(seed=0, job_seconds=1.0, clock=lambda: now[0])
    model = Catalog.from_fixtures().get("kling-3-0-text-to-video")
    assert model is not None
    job = store.create("video", model, {"duration": "5s"}, 350_000, base_url="http://h")
    token = job.download_url.rsplit("/", 1)[-1]
    now[0] += 2
    assert store.download(token)[1] == "video/mp4"
    now[0] += DOWNLOAD_URL_TTL_S - 10
    assert store.download(token)[1] == "video/mp4"
    now[0] += 20
    with pytest.raises(Exception) as info:
        store.download(token)
    assert getattr(info.value, "status", None) == 410

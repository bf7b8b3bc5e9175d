"""The polling schedule, the progress estimate, and the job views (widget, text, player).

Views are driven by real jobs on the emulator; the widgets are real ipywidgets objects (no
kernel is needed to build them and read their state back).
"""

from __future__ import annotations

import io
import math
import struct
import wave

import pytest
from support.media import FAST_POLL, MUSIC

from x402lab.media.status import (
    Completed,
    Failed,
    Processing,
    Queued,
    estimate_progress,
    next_poll_delay,
)
from x402lab.widgets import register
from x402lab.widgets.job import JobView, TextView, describe
from x402lab.widgets.player import file_link, player_html, wav_preview


def test_first_wait_follows_average_execution_time_then_the_interval():
    reading = Processing(average_execution_s=20.0, execution_duration_s=2.0, seen_at=0.0)
    assert next_poll_delay(3.0, Queued(), 0) == 0.0  # the first retrieve is free: at once
    assert next_poll_delay(3.0, reading, 1) == pytest.approx(18.0)
    nearly = Processing(average_execution_s=20.0, execution_duration_s=15.0, seen_at=0.0)
    assert next_poll_delay(12.0, nearly, 1) == 12.0  # never below the interval
    assert next_poll_delay(3.0, reading, 2) == 3.0
    assert next_poll_delay(3.0, Processing(), 1) == 3.0  # no guide: the interval


def test_progress_estimate():
    reading = Processing(average_execution_s=10.0, execution_duration_s=2.0, seen_at=100.0)
    assert estimate_progress(reading, 100.0) == pytest.approx(0.2)
    assert estimate_progress(reading, 103.0) == pytest.approx(0.5)
    assert estimate_progress(reading, 500.0) == 0.99  # past the guide: not done until told
    assert estimate_progress(Queued(), 0.0) is None
    assert estimate_progress(Completed(), 0.0) == 1.0
    assert estimate_progress(Failed("x"), 0.0) is None


def test_widget_moves_to_full_and_shows_the_player(lab):
    job = lab.music(**MUSIC, poll_s=FAST_POLL)
    view = JobView(job.async_)
    assert view.bar.value == 0.0 and view.player.value == ""
    job.async_.watch(view.update, tick=0.01)
    job.wait(timeout_s=10)
    assert view.bar.value == 1.0 and view.bar.bar_style == "success"
    assert view.line.value.startswith("completed") and "0.015 USD" in view.line.value
    assert '<audio controls preload="metadata" src="data:audio/wav;base64,' in view.player.value
    assert str(job.media_path) in view.player.value


def test_view_of_a_finished_job_shows_the_player_at_once(lab):
    job = lab.video(
        "a paper boat",
        model="wan-2-7-text-to-video",
        duration=5,
        resolution="480p",
        poll_s=FAST_POLL,
    )
    job.wait(timeout_s=10)
    view = JobView(job.async_)
    assert view.bar.value == 1.0 and "<video controls" in view.player.value
    bundle = TextView.bundle(job.async_)
    assert bundle["text/plain"].startswith("video · wan-2-7-text-to-video: completed")
    assert "<video controls" in bundle["text/html"]


def test_text_view_while_running(lab):
    job = lab.music(**MUSIC, poll_s=FAST_POLL)
    bundle = TextView.bundle(job.async_)
    assert "queued · waiting for the first status" in bundle["text/plain"]
    assert "<audio" not in bundle["text/html"]
    job.wait(timeout_s=10)
    assert describe(job.async_).startswith("completed")


def _wav(seconds: float, rate: int, channels: int) -> bytes:
    frames = int(seconds * rate)
    out = io.BytesIO()
    with wave.open(out, "wb") as target:
        target.setnchannels(channels)
        target.setsampwidth(2)
        target.setframerate(rate)
        samples = (int(8000 * math.sin(2 * math.pi * 440 * i / rate)) for i in range(frames))
        target.writeframes(b"".join(struct.pack("<h", s) * channels for s in samples))
    return out.getvalue()


def test_large_wav_gets_a_small_preview_and_a_path(tmp_path):
    path = tmp_path / "long.wav"
    path.write_bytes(_wav(40.0, 44_100, 2))  # about 7 MB
    preview = wav_preview(path.read_bytes())
    with wave.open(io.BytesIO(preview)) as read:
        assert (read.getnchannels(), read.getsampwidth()) == (1, 1)
        assert read.getframerate() <= 8000
        assert read.getnframes() / read.getframerate() == pytest.approx(30.0, abs=0.01)
    assert len(preview) < 250_000
    shown = player_html(path, "audio/wav", root=tmp_path / "elsewhere")
    assert "preview: first 30 s" in shown and f"<code>{path}</code>" in shown


def test_large_video_is_linked_not_embedded(tmp_path):
    path = tmp_path / "clip.mp4"
    path.write_bytes(b"\0" * 2_000_000)
    shown = player_html(path, "video/mp4", root=tmp_path)
    assert "<video" not in shown and 'href="clip.mp4"' in shown
    assert file_link(path, root=tmp_path / "other").startswith("<code>")


def test_register_hooks_both_job_types_into_ipython(lab):
    formatters = pytest.importorskip("IPython.core.formatters")

    class Shell:
        display_formatter = formatters.DisplayFormatter()

    shell = Shell()
    assert register(shell) is True
    job = lab.music(**MUSIC, poll_s=FAST_POLL)
    formatter = shell.display_formatter.ipython_display_formatter
    assert formatter.lookup(job) is formatter.lookup(job.async_)
    assert formatter.lookup(job).__module__ == "x402lab.widgets"
    job.wait(timeout_s=10)

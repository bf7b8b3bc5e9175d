"""What a music or video job looks like in Jupyter: a live progress bar, then a player.

The views only observe: they register a callback with ``job.watch()`` (the job polls, on its
own event loop, through the one polling iterator of the service layer) and read the job's
properties. ``job.wait()`` calls the callbacks once more from the awaiting cell, so an
executed notebook saves the final state. Without ipywidgets, a text/HTML display is updated
in place instead.
"""

from __future__ import annotations

import html
from typing import Any

from x402lab.media.job import AsyncJob
from x402lab.media.status import Completed, Failed
from x402lab.money import format_usd
from x402lab.widgets.player import player_html

TICK_S = 0.5


def describe(job: AsyncJob) -> str:
    """One line: status, progress, elapsed time and cost."""
    status = job.status
    parts = [status.name]
    progress = job.progress
    if not status.done:
        if progress is not None:
            parts.append(f"{progress:.0%} of ~{job.expected_s:.0f} s expected")
        else:
            parts.append("waiting for the first status")
    parts.append(_duration(job.elapsed))
    parts.append(f"paid {format_usd(job.paid_atomic)}")
    if isinstance(status, Failed):
        parts.append(status.error)
    elif job.last_error and not status.done:
        parts.append(f"polling stopped: {job.last_error}")
    return " · ".join(parts)


def title(job: AsyncJob) -> str:
    return f"{job.kind} · {job.model}"


def player_for(job: AsyncJob) -> str:
    """The player HTML of a finished job ("" before the media is on disk)."""
    path = job.media_path
    if not isinstance(job.status, Completed) or path is None or not path.is_file():
        return ""
    return player_html(path, job.content_type, caption=title(job))


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


class JobView:
    """An ipywidgets view of a job: a progress bar with its status line, then the player."""

    def __init__(self, job: AsyncJob) -> None:
        import ipywidgets as w

        self.job = job
        self.bar = w.FloatProgress(
            value=0.0, min=0.0, max=1.0, description=job.kind, bar_style="info"
        )
        self.bar.add_class("x402lab-job-progress")
        self.line = w.HTML()
        self.line.add_class("x402lab-job-status")
        self.player = w.HTML()
        self.player.add_class("x402lab-job-player")
        header = w.HTML(f"<b>{html.escape(title(job))}</b>")
        self.box = w.VBox([header, w.HBox([self.bar, self.line]), self.player])
        self.box.add_class("x402lab-job")
        self._player_shown = False
        self.update(job)

    def update(self, job: AsyncJob) -> None:
        """Redraw from the job's current state (called on every status and tick)."""
        status = job.status
        progress = job.progress
        if isinstance(status, Completed):
            self.bar.value, self.bar.bar_style = 1.0, "success"
        elif isinstance(status, Failed):
            self.bar.bar_style = "danger"
        elif progress is not None:
            self.bar.value = progress
        self.line.value = html.escape(describe(job))
        if isinstance(status, Completed) and not self._player_shown:
            self.player.value = player_for(job)
            self._player_shown = bool(self.player.value)
        if status.done:
            # Re-send everything so the cell that waited carries the whole final state.
            for widget in (self.bar, self.line, self.player):
                widget.send_state()

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.box)


class TextView:
    """The view without ipywidgets: an HTML/text display that is updated in place."""

    def __init__(self, job: AsyncJob) -> None:
        from IPython.display import display

        self.job = job
        self.handle = display(self.bundle(job), raw=True, display_id=True)

    @staticmethod
    def bundle(job: AsyncJob) -> dict[str, str]:
        """The text/plain and text/html of the job's current state."""
        line = f"{title(job)}: {describe(job)}"
        status = job.status
        bar = ""
        progress = job.progress
        if not status.done and progress is not None:
            bar = f' <progress value="{progress:.3f}" max="1"></progress>'
        rich = f"<div><b>{html.escape(title(job))}</b>{bar} {html.escape(describe(job))}</div>"
        return {"text/plain": line, "text/html": rich + player_for(job)}

    def update(self, job: AsyncJob) -> None:
        if self.handle is not None:
            self.handle.update(self.bundle(job), raw=True)


def show_job(job: Any, *, widgets: bool | None = None) -> JobView | TextView:
    """Display a job (async or sync handle) and keep the display live until it ends.

    ``widgets=None`` uses ipywidgets when installed, else the text/HTML view.
    """
    inner: AsyncJob = getattr(job, "async_", job)
    if widgets is None:
        try:
            import ipywidgets  # noqa: F401
        except ImportError:
            widgets = False
        else:
            widgets = True
    view: JobView | TextView
    if widgets:
        view = JobView(inner)
        from IPython.display import display

        display(view.box)
    else:
        view = TextView(inner)
    inner.watch(view.update, tick=TICK_S if widgets else 2 * TICK_S)
    return view

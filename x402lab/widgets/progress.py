"""A batch's progress in Jupyter: rows done and spend of budget, as an ipywidgets bar.

The bar only observes: the batch calls it with a ``BatchProgress`` (from the loop thread the
batch runs on) and it redraws. Without ipywidgets it falls back to an HTML line updated in
place. Importing this module registers the bar as the notebook display of
``progress="auto"``.
"""

from __future__ import annotations

import html
from typing import Any

from x402lab.batch.progress import BatchProgress, register_notebook_progress
from x402lab.money import format_usd


def _status_line(progress: BatchProgress) -> str:
    counts = " · ".join(f"{n} {s}" for s, n in sorted(progress.counts.items()) if n)
    cap = format_usd(progress.cap_atomic) if progress.cap_atomic is not None else "no cap"
    line = (
        f"{progress.done}/{progress.total} rows · paid {format_usd(progress.paid_atomic)}"
        f" · budget {format_usd(progress.spent_atomic)} of {cap}"
    )
    return line + (f" · {counts}" if counts else "")


class BatchProgressBar:
    """Two bars (rows done, budget spent) and a status line; shown on the first update."""

    def __init__(self) -> None:
        self._view: Any = None
        self._html: Any = None

    def __call__(self, progress: BatchProgress) -> None:
        try:
            import ipywidgets  # noqa: F401
        except ImportError:
            self._update_html(progress)
            return
        self._update_widgets(progress)

    def _update_widgets(self, progress: BatchProgress) -> None:
        import ipywidgets as w
        from IPython.display import display

        if self._view is None:
            self._rows = w.IntProgress(value=0, min=0, max=max(progress.total, 1))
            self._rows.description = f"{progress.kind} rows"
            self._spend = w.FloatProgress(value=0.0, min=0.0, max=1.0)
            self._spend.description = "budget"
            self._line = w.HTML()
            self._view = w.VBox([self._rows, self._spend, self._line])
            display(self._view)
        self._rows.value = progress.done
        if progress.cap_atomic:
            self._spend.value = min(progress.spent_atomic / progress.cap_atomic, 1.0)
        else:
            self._spend.layout.visibility = "hidden"
        if progress.finished:
            self._rows.bar_style = "success"
        self._line.value = html.escape(_status_line(progress))

    def _update_html(self, progress: BatchProgress) -> None:
        from IPython.display import HTML, display

        text = HTML(f"<code>{html.escape(_status_line(progress))}</code>")
        if self._html is None:
            self._html = display(text, display_id=True)
        else:
            self._html.update(text)


register_notebook_progress(BatchProgressBar)

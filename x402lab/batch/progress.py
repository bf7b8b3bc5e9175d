"""Progress of a batch, reported through a callback (the batch knows nothing of widgets).

A progress callback is any ``callable(BatchProgress)``. The batch calls it from the thread
its event loop runs on (the helper loop thread for the sync ``Lab``), at most ``rate_hz`` times
a second and once more with ``finished=True``. ``TextProgress`` writes one line per update to
a terminal. A notebook display (the widgets layer) registers itself with
``register_notebook_progress`` so ``progress="auto"`` can pick it inside Jupyter.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

from x402lab.errors import ConfigError
from x402lab.money import format_usd


@dataclass(frozen=True)
class BatchProgress:
    """Where a batch stands. Money in atomic units; ``cap_atomic`` None means no cap."""

    kind: str
    total: int
    done: int
    counts: Mapping[str, int] = field(default_factory=dict)
    paid_atomic: int = 0
    spent_before_atomic: int = 0
    cap_atomic: int | None = None
    finished: bool = False
    waiting: int = 0  # rows waiting for another run that is buying them now

    @property
    def spent_atomic(self) -> int:
        """The budget's committed spend: before this batch plus what this batch paid."""
        return self.spent_before_atomic + self.paid_atomic

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0

    def describe(self) -> str:
        """One line: rows done, statuses, spend of budget."""
        counts = ", ".join(f"{n} {status}" for status, n in sorted(self.counts.items()) if n)
        cap = format_usd(self.cap_atomic) if self.cap_atomic is not None else "no cap"
        return (
            f"{self.kind} {self.done}/{self.total} rows"
            + (f" ({counts})" if counts else "")
            + f"; paid {format_usd(self.paid_atomic)}, budget {format_usd(self.spent_atomic)}"
            + f" of {cap}"
            + (f"; {self.waiting} waiting for another run" if self.waiting else "")
        )


class ProgressCallback(Protocol):
    def __call__(self, progress: BatchProgress) -> None: ...


class TextProgress:
    """Writes a line per update to ``stream`` (default stderr), at most every ``every_s``."""

    def __init__(self, stream: TextIO | None = None, *, every_s: float = 1.0) -> None:
        self.stream = stream
        self.every_s = every_s
        self._last = -float("inf")

    def __call__(self, progress: BatchProgress) -> None:
        now = time.monotonic()
        if not progress.finished and now - self._last < self.every_s:
            return
        self._last = now
        stream = self.stream or sys.stderr
        print(("done: " if progress.finished else "") + progress.describe(), file=stream)


_notebook_factory: Callable[[], ProgressCallback] | None = None


def register_notebook_progress(factory: Callable[[], ProgressCallback]) -> None:
    """Let ``progress="auto"`` use ``factory()`` when running inside a Jupyter kernel."""
    global _notebook_factory
    _notebook_factory = factory


def _in_kernel() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    get = getattr(shell, "get_ipython", None)
    ip = get() if get is not None else None
    return ip is not None and getattr(ip, "kernel", None) is not None


def resolve_progress(progress: Any) -> ProgressCallback | None:
    """The callback for a ``progress=`` argument: a callable, ``"auto"``/True, ``"text"``, or
    None/False. Auto means the registered notebook display inside Jupyter, text when stderr is
    a terminal, else nothing. Raises ConfigError for anything else."""
    if progress is None or progress is False:
        return None
    if progress == "text":
        return TextProgress()
    if progress is True or progress == "auto":
        if _in_kernel() and _notebook_factory is not None:
            return _notebook_factory()
        if sys.stderr is not None and sys.stderr.isatty():
            return TextProgress()
        return None
    if callable(progress):
        return progress  # type: ignore[no-any-return]
    raise ConfigError(f"progress must be a callable, 'auto', 'text' or None, got {progress!r}")


class Throttle:
    """Calls ``callback`` at most ``rate_hz`` times a second, and always when finished.

    A failing callback is dropped (a display must never fail a batch that is spending money).
    """

    def __init__(self, callback: ProgressCallback | None, rate_hz: float = 10.0) -> None:
        self.callback = callback
        self.every_s = 1.0 / rate_hz
        self._last = -float("inf")
        self.error: BaseException | None = None

    def __call__(self, make: Callable[[], BatchProgress], *, force: bool = False) -> None:
        if self.callback is None:
            return
        now = time.monotonic()
        if not force and now - self._last < self.every_s:
            return
        self._last = now
        try:
            self.callback(make())
        except Exception as exc:  # noqa: BLE001 (see the class docstring)
            self.error = exc
            self.callback = None

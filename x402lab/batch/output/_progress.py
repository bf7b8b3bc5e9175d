"""Progress of a batch, reported through a callback (the batch knows nothing of widgets).

A progress callback is any ``callable(BatchProgress)``. The batch calls it from the thread
its event loop runs on (the helper loop thread for the sync ``Lab``), at most ``rate_hz`` times
a second and once more with ``finished=True``. ``TqdmProgress`` shows it as a tqdm bar: rows
done, rate, elapsed, ETA, and "paid X; budget Y of Z USD" as its postfix (this run's payments
apart from the budget's spend) with the request rate and the requests in flight; ``tqdm.auto``
draws the notebook widget inside Jupyter and one terminal line updated in place elsewhere. A
batch that ends with rows not answered ends its bar orange, a stopped one red with "stopping:
N in flight" while its requests finish.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from x402lab.batch.concurrency import Pace
from x402lab.errors import ConfigError
from x402lab.money import format_usd


@dataclass(frozen=True)
class BatchProgress:
    """Where a batch stands. Money in atomic units; ``cap_atomic`` None means no cap."""

    kind: str
    total: int | None  # None: a generator that has not said how many rows it holds
    done: int
    counts: Mapping[str, int] = field(default_factory=dict)
    paid_atomic: int = 0
    spent_before_atomic: int = 0
    cap_atomic: int | None = None
    finished: bool = False
    waiting: int = 0  # rows waiting for another run that is buying them now
    pace: Pace | None = None  # the request rate and the requests in flight
    stopping: int | None = None  # interrupted: requests still in flight, being let finish

    @property
    def answered(self) -> bool:
        """Whether every row done so far is answered (``ok`` or ``cached``)."""
        return all(status in ("ok", "cached") for status, n in self.counts.items() if n)

    @property
    def spent_atomic(self) -> int:
        """The budget's committed spend: before this batch plus what this batch paid."""
        return self.spent_before_atomic + self.paid_atomic

    @property
    def fraction(self) -> float:
        if self.total is None:
            return 0.0 if not self.finished else 1.0
        return self.done / self.total if self.total else 1.0

    def describe(self) -> str:
        """One line: rows done, statuses, spend of budget."""
        counts = ", ".join(f"{n} {status}" for status, n in sorted(self.counts.items()) if n)
        cap = format_usd(self.cap_atomic) if self.cap_atomic is not None else "no cap"
        return (
            f"{self.kind} {self.done}/{self.total if self.total is not None else '?'} rows"
            + (f" ({counts})" if counts else "")
            + f"; paid {format_usd(self.paid_atomic)}, budget {format_usd(self.spent_atomic)}"
            + f" of {cap}"
            + (f"; {self.waiting} waiting for another run" if self.waiting else "")
        )


def _auto_tqdm() -> Callable[..., Any]:
    from tqdm.auto import tqdm

    return tqdm  # type: ignore[no-any-return]


class ProgressCallback(Protocol):
    def __call__(self, progress: BatchProgress) -> None: ...


def _amount(atomic: int) -> str:
    return format_usd(atomic).removesuffix(" USD")


def spent_text(progress: BatchProgress) -> str:
    """ "paid 0.02 USD; budget 0.12 of 5.00 USD": this run's payments, then the budget's
    committed spend (earlier runs and other callers included) of its cap."""
    paid = f"paid {format_usd(progress.paid_atomic)}"
    if progress.cap_atomic is None:
        return f"{paid}; budget {format_usd(progress.spent_atomic)} (no cap)"
    return f"{paid}; budget {_amount(progress.spent_atomic)} of {_amount(progress.cap_atomic)} USD"


#: Bar colours of a batch that did not end answered (tqdm's ``colour``: a terminal bar's
#: colour, the notebook widget's bar colour instead of its green).
INCOMPLETE_COLOUR = "#e08a1e"
STOPPED_COLOUR = "#d9534f"


class TqdmProgress:
    """A batch's progress on a tqdm bar: ``bar`` when given (any tqdm instance: its total is
    set to the batch's rows; it is left open for its owner), else one made on the first update
    with ``tqdm`` (default ``tqdm.auto.tqdm``) and closed when the batch ends."""

    def __init__(self, bar: Any = None, *, make: Callable[..., Any] | None = None) -> None:
        self.bar = bar
        self._owned = bar is None
        self._make = make

    def __call__(self, progress: BatchProgress) -> None:
        bar = self.bar
        if bar is None:
            make = self._make or _auto_tqdm()
            bar = self.bar = make(
                total=progress.total, desc=f"batch_{progress.kind}", unit="row", leave=True
            )
        if bar.total != progress.total:
            bar.total = progress.total
        if progress.done > bar.n:
            bar.update(progress.done - bar.n)
        postfix = spent_text(progress)
        if progress.waiting:
            postfix += f", {progress.waiting} waiting for another run"
        if progress.pace is not None:
            postfix += pace_text(progress.pace, finished=progress.finished)
        if progress.stopping is not None:
            postfix = f"stopping: {progress.stopping} in flight; {postfix}"
            bar.colour = STOPPED_COLOUR
        elif progress.finished and not progress.answered:
            bar.colour = INCOMPLETE_COLOUR
            name = str(bar.desc or f"batch_{progress.kind}").removesuffix(": ")
            # The last report can come twice (the run's end and the drain's): mark it once.
            if not name.endswith(" (incomplete)"):
                bar.set_description(f"{name} (incomplete)", refresh=False)
        bar.set_postfix_str(postfix, refresh=progress.finished or progress.stopping is not None)
        if progress.finished:
            if self._owned:
                bar.close()
            else:
                bar.refresh()
            if not progress.answered and hasattr(bar, "container"):
                # tqdm.notebook styles a closed full bar "success" (green): not this one.
                bar.disp(bar_style="warning", check_delay=False)


def _in_kernel() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    get = getattr(shell, "get_ipython", None)
    ip = get() if get is not None else None
    return ip is not None and getattr(ip, "kernel", None) is not None


def _is_tqdm(value: Any) -> bool:
    tqdm_module = sys.modules.get("tqdm")
    return tqdm_module is not None and isinstance(value, tqdm_module.tqdm)


def resolve_progress(progress: Any) -> ProgressCallback | None:
    """The callback for a ``progress=`` argument: ``"auto"``/True (a ``tqdm.auto`` bar inside
    Jupyter or when stderr is a terminal, else nothing), ``"text"`` (a terminal tqdm line),
    a tqdm instance (updated in place), a callable taking BatchProgress, or None/False.
    Raises ConfigError for anything else."""
    if progress is None or progress is False:
        return None
    if _is_tqdm(progress):
        return TqdmProgress(progress)
    if isinstance(progress, str) and progress == "text":
        from tqdm import tqdm

        return TqdmProgress(make=tqdm)
    if progress is True or (isinstance(progress, str) and progress == "auto"):
        if _in_kernel() or (sys.stderr is not None and sys.stderr.isatty()):
            return TqdmProgress()
        return None
    if callable(progress):
        return progress  # type: ignore[no-any-return]
    raise ConfigError(
        f"progress must be 'auto', 'text', a tqdm bar, a callable or None, got {progress!r}"
    )


def pace_text(pace: Pace, *, finished: bool = False) -> str:
    """ ", 19.4 req/s, 3 in flight": the learned rate (when a limit was met) and the
    requests in flight (left out once the batch has finished: none are)."""
    rate = f", {pace.rate:.1f} req/s" if pace.rate is not None else ""
    return rate if finished else f"{rate}, {pace.in_flight} in flight"


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

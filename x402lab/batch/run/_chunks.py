"""A lazy source of texts run chunk by chunk: one plan and one run per chunk, one sink, one
progress bar and one summary for the whole batch.

Only one chunk's plan (its texts, keys and items) is in memory at a time, so a generator of
any length streams to Parquet in bounded memory. A text repeated in a later chunk is found in
the store (its earlier chunk claimed and stored it) and comes back ``cached``, not paid again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace

from x402lab.batch.output import BatchProgress, Tally, Throttle


def add_tallies(total: Tally, part: Tally) -> Tally:
    """``total`` with the counts and sums of ``part`` added."""
    merged = Tally()
    for f in fields(Tally):
        mine, theirs = getattr(total, f.name), getattr(part, f.name)
        if isinstance(mine, dict):  # per status: counts, money
            added = dict(mine)
            for status, n in theirs.items():
                added[status] = added.get(status, 0) + n
            setattr(merged, f.name, added)
        elif f.name == "rate_reached":
            merged.rate_reached = max(mine, theirs)
        else:
            setattr(merged, f.name, mine + theirs)
    return merged


class ChunkProgress(Throttle):
    """The progress of the whole batch from the runs of its chunks (a ``Throttle`` for each
    run): rows, counts and payments of earlier chunks added, ``total`` the source's (None
    when a generator does not say), finished only at the end (``finish``)."""

    def __init__(self, throttle: Throttle, total: int | None) -> None:
        super().__init__(None)
        self.throttle = throttle
        self.total = total
        self._done = Tally()
        self._rows = 0
        self._spent_before: int | None = None
        self._latest: BatchProgress | None = None

    def next_chunk(self, tally: Tally, rows: int) -> None:
        """The chunk that just ran: its tally and rows."""
        self._done = add_tallies(self._done, tally)
        self._rows += rows

    def _whole(self, part: BatchProgress) -> BatchProgress:
        if self._spent_before is None:
            self._spent_before = part.spent_before_atomic
        counts = dict(self._done.counts)
        for status, n in part.counts.items():
            counts[status] = counts.get(status, 0) + n
        self._latest = replace(
            part,
            total=self.total,
            done=self._rows + part.done,
            counts=counts,
            paid_atomic=self._done.paid_atomic + part.paid_atomic,
            spent_before_atomic=self._spent_before,
            finished=False,
        )
        return self._latest

    def __call__(self, make: Callable[[], BatchProgress], *, force: bool = False) -> None:
        self.throttle(lambda: self._whole(make()), force=force)

    def finish(self) -> None:
        """The last update, with the final total (a generator's count is known now)."""
        last = self._latest
        if last is None:
            return
        rows = self._rows
        self.throttle(lambda: replace(last, total=rows, done=rows, finished=True), force=True)

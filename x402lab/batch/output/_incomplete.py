"""Nothing partial looks finished: a batch that ends with rows not answered says so.

A row is answered when it ends ``ok`` or ``cached``. Any other end (``skipped_budget``,
``refused``, ``invalid``, ``failed``, ``unknown``, ``paid_not_stored``) makes the batch warn
with ``IncompleteBatchWarning``, naming each status with its rows and the money on them, and
what to do next; the progress bar ends in a colour that is not success (``_progress``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from x402lab._loop import warn
from x402lab.errors import IncompleteBatchWarning
from x402lab.money import format_usd

if TYPE_CHECKING:
    from x402lab.batch.output._results import BatchSummary

ANSWERED = frozenset({"ok", "cached"})
#: Per status: what the money on those rows is, and what to do about them.
_WHAT = {
    "skipped_budget": ("paid", "a bigger budget and the same call again buys them"),
    "refused": ("paid", "above the per-call cap: raise it, or shorten the requests"),
    "invalid": ("paid", "answers that did not validate; their raw text is in `response`"),
    "failed": ("paid", "the same call again retries them; see `error`"),
    "unknown": ("at risk", "lab.reconcile() asks the chain whether they settled"),
    "paid_not_stored": ("paid", 'rebuy="lost" buys exactly them again'),
}


def incomplete_message(summary: BatchSummary) -> str | None:
    """The warning's text for ``summary``, or None when every row was answered."""
    ends = {s: n for s, n in sorted(summary.counts.items()) if n and s not in ANSWERED}
    if not ends:
        return None
    parts = []
    for status, n in ends.items():
        money, todo = _WHAT.get(status, ("paid", "see `error`"))
        usd = format_usd(summary.status_atomic.get(status, 0))
        parts.append(f"{n} {status} ({usd} {money}; {todo})")
    return (
        f"batch_{summary.kind}: {sum(ends.values())} of {summary.rows} rows not answered: "
        + ", ".join(parts)
    )


def warn_incomplete(summary: BatchSummary) -> None:
    """Warn (IncompleteBatchWarning) when ``summary`` has rows not answered."""
    message = incomplete_message(summary)
    if message is not None:
        warn(message, IncompleteBatchWarning)

"""A media job's kinds and statuses: status as a small sum type, and the polling schedule.

Pure values and functions (no I/O): the routes and pace of each job kind (docs/services.md,
"Job lifecycle"), the four statuses a job can be in, when to retrieve next, and how far along it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from x402lab.ledger import JobRecord

# Poll music every 2-5 s and video every 10-15 s (docs/services.md, "Job lifecycle").
DEFAULT_POLL_S = {"music": 3.0, "video": 12.0}
DEFAULT_TIMEOUT_S = {"music": 15 * 60.0, "video": 60 * 60.0}


@dataclass(frozen=True)
class Queued:
    """Paid and queued; no retrieve has answered yet (in this process)."""

    name: ClassVar[str] = "queued"
    done: ClassVar[bool] = False


@dataclass(frozen=True)
class Processing:
    """Retrieve said PROCESSING. Times in seconds; ``average_execution_s`` is the P80 guide."""

    average_execution_s: float | None = None
    execution_duration_s: float | None = None
    seen_at: float | None = None  # monotonic clock of the reading

    name: ClassVar[str] = "processing"
    done: ClassVar[bool] = False


@dataclass(frozen=True)
class Completed:
    """The media arrived and is on disk."""

    content_type: str | None = None
    size_bytes: int | None = None
    download_url: str | None = None

    name: ClassVar[str] = "completed"
    done: ClassVar[bool] = True


@dataclass(frozen=True)
class Failed:
    """The gateway said the job failed, or no longer knows it."""

    error: str = "failed"

    name: ClassVar[str] = "failed"
    done: ClassVar[bool] = True


JobStatus = Queued | Processing | Completed | Failed


def next_poll_delay(interval_s: float, status: JobStatus, readings: int) -> float:
    """Seconds from the last retrieve to the next one.

    The first retrieve goes out at once (it is free and carries the timing guide). After the
    first PROCESSING answer the wait is what ``average_execution_time`` says is left (never
    less than the interval); after that, the interval.
    """
    if readings == 0:
        return 0.0
    if readings == 1 and isinstance(status, Processing) and status.average_execution_s:
        remaining = status.average_execution_s - (status.execution_duration_s or 0.0)
        return max(interval_s, remaining)
    return interval_s


def estimate_progress(status: JobStatus, clock: float) -> float | None:
    """Share done in [0, 1] from the expected duration; None while nothing is known."""
    if isinstance(status, Completed):
        return 1.0
    if isinstance(status, Processing) and status.average_execution_s:
        ran = (status.execution_duration_s or 0.0) + max(0.0, clock - (status.seen_at or clock))
        # A job past its P80 guide is not done until retrieve says so.
        return min(0.99, ran / status.average_execution_s)
    return None


def status_of(record: JobRecord) -> JobStatus:
    """The status a stored job record says: Completed, Failed, or Queued until retrieved."""
    if record.status == "completed":
        return Completed(record.content_type, record.size_bytes, record.download_url)
    if record.status == "failed":
        return Failed(record.error or "failed")
    return Queued()

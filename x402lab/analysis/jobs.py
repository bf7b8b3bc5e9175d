"""Music and video jobs in the cost report: the free quote vs the queue payment.

``lab.jobs()`` keeps, for every stored job, the amount of the free quote taken before
queueing (``quoted_atomic``) and what the queue's 402 made the client pay (``paid_atomic``).
The gateway takes the queue charge from a fresh server-side quote, so the two can differ
when prices move between the quote and the queue.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from x402lab.routes import QUEUE_PATHS
from x402lab.tables.spend import DRIFT, drift_record, drift_table, typed


def job_drift(jobs: pd.DataFrame | None) -> pd.DataFrame:
    """Quote vs paid per job kind and model, over jobs that carry both (``DRIFT``)."""
    if jobs is None or len(jobs) == 0:
        return typed(None, DRIFT)
    both = jobs[jobs["quoted_atomic"].notna() & jobs["paid_atomic"].notna()]
    records: list[dict[str, Any]] = []
    for (kind, model), group in both.groupby(["kind", "model"], sort=True):
        records.append(
            drift_record(f"{kind} jobs (quote vs queue)", QUEUE_PATHS.get(str(kind)), model, group)
        )
    return drift_table(records)

"""What a batch hands back: each row's outcome, the declared result schema, the summary and
the estimate, progress, and the warning that nothing partial looks finished.

``_items`` (each item's outcome, the running tally, shares of a payment), ``_schema`` (the
declared Arrow schemas of batch results and the frames derived from them), ``_results``
(``BatchSummary`` and ``BatchEstimate``), ``_progress`` (the progress callback protocol and
the tqdm bar) and ``_incomplete`` (``IncompleteBatchWarning`` when rows were not answered).
"""

from x402lab.batch.output._incomplete import warn_incomplete
from x402lab.batch.output._items import (
    Emitted,
    ItemResult,
    Reasked,
    Tally,
    from_answer,
    from_maybe_paid,
    released,
    shares,
    shown,
    split_atomic,
)
from x402lab.batch.output._progress import BatchProgress, Throttle, TqdmProgress, resolve_progress
from x402lab.batch.output._results import BatchEstimate, BatchSummary, summary_of
from x402lab.batch.output._schema import (
    EMBED_METADATA,
    batch_chat_schema,
    batch_embed_schema,
    chat_table,
    cost_fields,
    declared_table,
    embed_table,
    estimate_schema,
    estimate_table,
    join_inputs,
)

__all__ = [
    "BatchEstimate",
    "BatchProgress",
    "BatchSummary",
    "EMBED_METADATA",
    "Emitted",
    "ItemResult",
    "Reasked",
    "Tally",
    "Throttle",
    "TqdmProgress",
    "batch_chat_schema",
    "batch_embed_schema",
    "chat_table",
    "cost_fields",
    "declared_table",
    "embed_table",
    "estimate_schema",
    "estimate_table",
    "from_answer",
    "from_maybe_paid",
    "join_inputs",
    "released",
    "resolve_progress",
    "shares",
    "shown",
    "split_atomic",
    "summary_of",
    "warn_incomplete",
]

"""``batch_embed`` of a generator, a file or a dataset: read and run a chunk at a time.

One plan per chunk, one sink, one progress bar and one summary for the whole batch
(``batch.chunks``), so only one chunk's texts, keys and items are in memory at a time.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from x402lab.batch.arguments import index_frame
from x402lab.batch.chunks import ChunkProgress, add_tallies
from x402lab.batch.incomplete import warn_incomplete
from x402lab.batch.items import Tally
from x402lab.batch.plan import EmbedCodec, embed_plan
from x402lab.batch.progress import Throttle, resolve_progress
from x402lab.batch.results import BatchSummary, summary_of
from x402lab.batch.sinks import ColumnSink, ParquetSink
from x402lab.tables.batch import embed_table, join_inputs

if TYPE_CHECKING:
    import pandas as pd

    from x402lab.batch.api import Batches, PathLike
    from x402lab.batch.arguments import Run
    from x402lab.batch.inputs import Texts


async def embed_chunks(
    batches: Batches,
    source: Texts,
    *,
    model: str,
    per_request: int,
    params: dict[str, Any],
    unchecked: dict[str, Any],
    run: Run,
    progress: Any,
    out: PathLike | None,
    row_group_size: int,
    dim: int | None,
) -> pd.DataFrame | BatchSummary:
    """Spends money: ``batch_embed`` of a lazy source, one plan and run per chunk (each
    priced and refused when it cannot finish before it is paid, ``batch.preflight``)."""
    progress_of = ChunkProgress(Throttle(resolve_progress(progress)), source.total)
    target = Path(out).expanduser() if out is not None else None
    codec = EmbedCodec()
    sink: Any = None
    tally, rows = Tally(), 0
    assert source.chunks is not None
    try:
        for texts in itertools.chain(source.chunks, [None]):
            if texts is None and sink is not None:
                break  # the source ended (an empty one still runs once, with no rows)
            plan = embed_plan(texts or [], model=model, per_request=per_request, params=params)
            if sink is None:
                await batches.check_batch(plan, "batch_embed()", unchecked, to_run=True)
                sink = (
                    ParquetSink(target, plan, row_group_size=row_group_size, dim=dim)
                    if target is not None
                    else ColumnSink(codec, plan=plan)
                )
            sink.use(plan)
            part = await batches.run_plan(plan, codec, sink, run, progress_of)
            progress_of.next_chunk(part, plan.rows)
            tally, rows = add_tallies(tally, part), rows + plan.rows
        progress_of.finish()
    finally:
        if isinstance(sink, ParquetSink):
            sink.close()
    summary = summary_of("embed", rows, tally, progress_of.throttle, target, batches.budget_left())
    warn_incomplete(summary)
    if isinstance(sink, ParquetSink):
        sink.commit()
        return summary
    frame = join_inputs(index_frame(None, rows), embed_table(sink.columns, sink.dim or dim or 0))
    frame.attrs["batch"] = summary.to_dict()
    return frame

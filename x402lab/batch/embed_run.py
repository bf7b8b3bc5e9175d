"""``batch_embed``'s run: the texts a chunk at a time, one plan and run per chunk.

Texts in memory are one chunk; a generator, a file or a dataset is read a chunk at a time
(``inputs.embed_source``). One sink, one progress bar and one summary serve the whole batch
(``batch.chunks``), so only one chunk's texts, keys and items are in memory at a time, and
with ``out=`` the rows stream to Parquet.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from x402lab.batch.chunks import ChunkProgress, add_tallies
from x402lab.batch.incomplete import warn_incomplete
from x402lab.batch.inputs import index_frame
from x402lab.batch.items import Tally
from x402lab.batch.plan import plan_of
from x402lab.batch.progress import Throttle, resolve_progress
from x402lab.batch.results import BatchSummary, summary_of
from x402lab.batch.sinks import ColumnSink, ParquetSink
from x402lab.tables.batch import embed_table, join_inputs

if TYPE_CHECKING:
    import pandas as pd

    from x402lab.batch.embed_codec import EmbedCodec
    from x402lab.batch.inputs import Texts
    from x402lab.batch.options import RunOptions
    from x402lab.batch.pipeline import Pipeline


async def run_embed(
    pipeline: Pipeline,
    source: Texts,
    codec: EmbedCodec,
    options: RunOptions,
    *,
    per_request: int,
    out: Path | None,
    row_group_size: int,
) -> pd.DataFrame | BatchSummary:
    """Spends money: the embeddings of ``source``, one plan and run per chunk (each priced
    and refused when it cannot finish before it is paid, ``batch.preflight``). Returns the
    frame (indexed as ``source``), or with ``out`` the summary once the file is in place."""
    in_memory = source.values is not None
    chunks = iter([source.values]) if in_memory else source.chunks
    assert chunks is not None
    total = len(source.values) if source.values is not None else source.total
    progress = ChunkProgress(Throttle(resolve_progress(options.progress)), total)
    dim = codec.params.get("dimensions")
    dim = dim if isinstance(dim, int) else None
    sink: Any = None
    tally, rows = Tally(), 0
    try:
        for texts in itertools.chain(chunks, [None]):
            if texts is None and sink is not None:
                break  # the source ended (an empty one still runs once, with no rows)
            plan = plan_of(codec, texts or [], per_request)
            if sink is None:
                await pipeline.check(plan, "batch_embed()", to_run=True)
                sink = (
                    ParquetSink(out, plan, row_group_size=row_group_size, dim=dim)
                    if out is not None
                    else ColumnSink(codec, plan=plan)
                )
            sink.use(plan)
            part = await pipeline.run(plan, sink, options, progress)
            progress.next_chunk(part, plan.rows)
            tally, rows = add_tallies(tally, part), rows + plan.rows
        progress.finish()
    finally:
        if isinstance(sink, ParquetSink):
            sink.close()
    summary = summary_of("embed", rows, tally, progress.throttle, out, pipeline.budget_left())
    warn_incomplete(summary)
    if isinstance(sink, ParquetSink):
        sink.commit()
        return summary
    index = source.index if in_memory else None
    frame = join_inputs(index_frame(index, rows), embed_table(sink.columns, sink.dim or dim or 0))
    frame.attrs["batch"] = summary.to_dict()
    return frame

"""``batch_embed``'s run: the texts a chunk at a time, one plan and run per chunk.

Texts in memory are one chunk; a generator, a file or a dataset is read a chunk at a time
(``inputs.embed_source``). One sink, one progress bar and one summary serve the whole batch
(``_chunks``), so only one chunk's texts, keys and items are in memory at a time, and
with ``out=`` the rows stream to Parquet. The input's other columns (an ``id``) are kept
beside each row's vector, in the frame and in the file.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from x402lab.batch.inputs import index_frame
from x402lab.batch.output import (
    EMBED_METADATA,
    BatchSummary,
    Tally,
    Throttle,
    batch_embed_schema,
    embed_table,
    join_inputs,
    resolve_progress,
    summary_of,
    warn_incomplete,
)
from x402lab.batch.prepare import plan_of
from x402lab.batch.run._chunks import ChunkProgress, add_tallies
from x402lab.batch.run._sinks import ColumnSink, ParquetSink, hand_back_memory
from x402lab.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from x402lab.batch.inputs import Texts
    from x402lab.batch.kinds import EmbedCodec
    from x402lab.batch.options import RunOptions
    from x402lab.batch.run._pipeline import Pipeline


async def run_embed(
    pipeline: Pipeline,
    source: Texts,
    codec: EmbedCodec,
    options: RunOptions,
    *,
    per_request: int,
    out: Path | None,
    row_group_size: int,
    width: int | None = None,
) -> pd.DataFrame | BatchSummary:
    """Spends money: the embeddings of ``source``, one plan and run per chunk (each priced
    and refused when it cannot finish before it is paid, ``batch.prepare._preflight``). Returns the
    frame (indexed as ``source``, its other columns first), or with ``out`` the summary once
    the file is in place. ``width``: the model's published vector width, the width of a
    result without any vector (so every file of a model has one schema)."""
    in_memory = source.values is not None
    chunks: Iterator[tuple[list[str], pa.Table | None]]
    if source.values is not None:
        others = source.others
        table = pa.Table.from_pandas(others, preserve_index=False) if others is not None else None
        chunks = iter([(source.values, table)])
    else:
        assert source.chunks is not None
        chunks = source.chunks
    total = len(source.values) if source.values is not None else source.total
    progress = ChunkProgress(Throttle(resolve_progress(options.progress)), total)
    sink: Any = None
    tally, rows = Tally(), 0
    try:
        for texts, others in itertools.chain(chunks, [(None, None)]):
            if texts is None and sink is not None:
                break  # the source ended (an empty one still runs once, with no rows)
            plan = plan_of(codec, texts or [], per_request)
            if sink is None:
                _check_others(others)
                await pipeline.check(plan, "batch_embed()", to_run=True)
                sink = (
                    ParquetSink(
                        out, plan, row_group_size=row_group_size, dim=width,
                        metadata=embed_metadata(codec),
                    )
                    if out is not None
                    else ColumnSink(codec, plan=plan)
                )  # fmt: skip
            if isinstance(sink, ParquetSink):
                sink.use(plan, others)
            else:
                sink.use(plan)
            part = await pipeline.run(plan, sink, options, progress)
            progress.next_chunk(part, plan.rows)
            tally, rows = add_tallies(tally, part), rows + plan.rows
        progress.finish()
    finally:
        if isinstance(sink, ParquetSink):
            sink.close()
            hand_back_memory()
    summary = summary_of("embed", rows, tally, progress.throttle, out, pipeline.budget_left())
    warn_incomplete(summary)
    if isinstance(sink, ParquetSink):
        sink.commit()
        return summary
    index = source.index if in_memory else None
    inputs = source.others if source.others is not None else index_frame(index, rows)
    frame = join_inputs(inputs, embed_table(sink.columns, sink.dim or width or 0))
    frame.attrs["batch"] = summary.to_dict()
    frame.attrs["embed"] = asked(codec)
    return frame


def asked(codec: EmbedCodec) -> dict[str, Any]:
    """What a batch asked for, as plain data: the model and the body fields that shape a
    vector (``dimensions``...; not ``encoding_format``, which only shapes the wire). A
    search embeds its queries with the same (``x402lab.search``)."""
    params = {k: v for k, v in codec.params.items() if k != "encoding_format"}
    return {"model": codec.model, "params": params}


def embed_metadata(codec: EmbedCodec) -> dict[bytes, bytes]:
    """``asked(codec)`` as Parquet schema metadata (key ``EMBED_METADATA``)."""
    return {EMBED_METADATA: json.dumps(asked(codec), sort_keys=True).encode()}


def _check_others(others: pa.Table | None) -> None:
    """Refuse, before anything is paid, input columns named as result columns."""
    if others is None:
        return
    clash = [name for name in others.column_names if name in batch_embed_schema(0).names]
    if clash:
        raise ConfigError(
            f"input columns clash with result columns: {', '.join(clash)}; rename or drop"
            " them before batch_embed()"
        )

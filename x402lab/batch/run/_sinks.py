"""Where emitted rows go: column lists in memory, or Parquet row groups on disk."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

from x402lab.batch.kinds import Codec
from x402lab.batch.output import Emitted, ItemResult, batch_embed_schema, embed_table, shown
from x402lab.batch.prepare import Plan
from x402lab.errors import ConfigError
from x402lab.private import private_file, private_folder

COST_COLUMNS = (
    "quoted_atomic",
    "paid_atomic",
    "cost_atomic",
    "upstream_usd",
    "tx_hash",
    "status",
    "error",
    "latency_s",
    "request_key",
)


class ColumnSink:
    """Collects rows as column lists (``columns``), in input order."""

    def __init__(self, codec: Codec, plan: Plan | None = None) -> None:
        self.codec = codec
        self.plan = plan  # given for embeddings: rows carry their text
        names = (("text",) if plan is not None else ()) + codec.columns + COST_COLUMNS
        self.columns: dict[str, list[Any]] = {name: [] for name in names}
        self.dim: int | None = None
        self.rows = 0

    def __call__(self, rows: list[Emitted]) -> None:
        columns, codec, plan = self.columns, self.codec, self.plan
        for row, result, duplicate in rows:
            if plan is not None:
                columns["text"].append(plan.item_payloads[int(plan.row_items[row])])
            data = result.data if result.data is not None else codec.empty()
            for name, value in zip(codec.columns, data, strict=True):
                columns[name].append(value)
            if self.dim is None and codec.kind == "embed" and data[0] is not None:
                self.dim = len(data[0])
            row_shows = shown(result, duplicate)
            columns["quoted_atomic"].append(result.quoted_atomic)
            columns["paid_atomic"].append(row_shows.paid_atomic)
            columns["cost_atomic"].append(cost_of(result, duplicate))
            columns["upstream_usd"].append(None if duplicate else result.upstream_usd)
            columns["tx_hash"].append(None if duplicate else result.tx_hash)
            columns["status"].append(row_shows.status)
            columns["error"].append(row_shows.error)
            fresh = result.fresh and not duplicate
            columns["latency_s"].append(result.latency_s if fresh else None)
            columns["request_key"].append(result.request_key)
        self.rows += len(rows)

    def use(self, plan: Plan) -> None:
        """Read the texts of the rows that come next from ``plan`` (the next chunk's)."""
        if self.plan is not None:
            self.plan = plan

    def take(self) -> dict[str, list[Any]]:
        """The collected columns; the sink starts empty again."""
        taken = self.columns
        self.columns = {name: [] for name in taken}
        self.rows = 0
        return taken


#: Rows whose answer (kept or lost) came from a settled payment: their share is a cost.
_PAID_FOR = ("ok", "cached", "paid_not_stored")


def cost_of(result: ItemResult, duplicate: bool) -> int | None:
    """A row's ``cost_atomic``: its exact share of the payment its answer came from (this
    run's or the earlier run's that stored it: ``ItemResult.paid_atomic``); 0 for a duplicate
    (its first identical row carries the answer's cost, counted once); None where nothing
    was paid or the outcome is unknown."""
    paid_for = result.status in _PAID_FOR or result.tx_hash is not None
    if not paid_for or result.paid_atomic is None:
        return None
    return 0 if duplicate else result.paid_atomic


class ParquetSink:
    """Streams embedding rows to ``path`` in row groups of ``row_group_size`` rows; holds at
    most about one row group in memory.

    Writes ``<path>.partial`` and renames it to ``path`` on ``commit()``. The vector width is
    fixed by the first vector seen (rows before it wait in the buffer); ``dim`` (the model's
    published width) is used only when no row has a vector at all, so a file of failed rows
    has the width of the others. The rows' own columns of the input (``others`` of each
    chunk, ``use``) come first in each row, and ``metadata`` (what was asked: the model and
    its parameters) is kept in the file's schema.
    """

    def __init__(
        self,
        path: Path,
        plan: Plan,
        *,
        row_group_size: int,
        dim: int | None,
        metadata: dict[bytes, bytes] | None = None,
    ) -> None:
        if path.suffix != ".parquet":
            raise ConfigError(f"out must be a .parquet path, got {str(path)!r}")
        private_folder(path.parent)  # the answers bought are the owner's alone: 0700 / 0600
        self.path = path
        self.partial = path.with_name(path.name + ".partial")
        self.row_group_size = row_group_size
        self.metadata = metadata
        self._buffer = ColumnSink(plan.codec, plan=plan)
        self._dim: int | None = None
        self._fallback_dim = dim or 0
        self._others: pa.Table | None = None
        self._other_parts: list[pa.Table] = []
        self._other_schema: pa.Schema | None = None
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._writer: Any = None

    def use(self, plan: Plan, others: pa.Table | None = None) -> None:
        """Read the texts of the rows that come next from ``plan`` (the next chunk's), and
        their own columns from ``others`` (one row per row of the plan)."""
        self._buffer.use(plan)
        self._others = others
        if others is not None and self._other_schema is None:
            self._other_schema = others.schema

    def __call__(self, rows: list[Emitted]) -> None:
        self._buffer(rows)
        if self._others is not None:
            self._other_parts.append(self._others.take([row for row, _, _ in rows]))
        if self._dim is None:
            self._dim = self._buffer.dim
        if self._dim is not None:
            self._move_buffer(self._dim)
            while self._pending_rows >= self.row_group_size:
                self._write(self.row_group_size)

    def _move_buffer(self, dim: int) -> None:
        if self._buffer.rows:
            count = self._buffer.rows
            table = embed_table(self._buffer.take(), dim)
            if self._other_parts:
                others = pa.concat_tables(self._other_parts)
                self._other_parts = []
                table = pa.Table.from_arrays(
                    [*others.columns, *table.columns],
                    names=others.column_names + table.column_names,
                )
            self._pending.append(table.cast(self._schema(dim)))
            self._pending_rows += count

    def _schema(self, dim: int) -> pa.Schema:
        fields = [*(self._other_schema or []), *batch_embed_schema(dim)]
        return pa.schema(fields, metadata=self.metadata)

    def _write(self, rows: int) -> None:
        import pyarrow.parquet as pq

        dim = self._dim if self._dim is not None else self._fallback_dim
        schema = self._schema(dim)
        if self._writer is None:
            private_file(self.partial)  # 0600 before pyarrow opens it (and keeps its mode)
            # Float vectors neither compress nor repeat: written plain, they are written and
            # read faster (a search reads them a row group at a time) at the same size.
            others = [name for name in schema.names if name != "vector"]
            self._writer = pq.ParquetWriter(
                self.partial,
                schema,
                use_dictionary=others,
                compression={**dict.fromkeys(others, "snappy"), "vector": "none"},
            )
        if not rows:
            return
        table = pa.concat_tables(self._pending)
        self._writer.write_table(table.slice(0, rows), row_group_size=rows)
        rest = table.slice(rows)
        # The rest is copied out of the written table's buffers, so they are freed now.
        self._pending = [rest.combine_chunks()] if rest.num_rows else []
        self._pending_rows = rest.num_rows

    def close(self) -> None:
        """Write what is buffered and close the file (a valid Parquet file either way)."""
        if self._dim is None:
            self._dim = self._fallback_dim
        self._move_buffer(self._dim)
        self._write(self._pending_rows)
        self._writer.close()

    def commit(self) -> None:
        """Move the finished file to ``path``."""
        os.replace(self.partial, self.path)


def one_vector_width(files: list[Path]) -> None:
    """Give every file of a folder of ``batch_embed`` partitions the vector width of the
    others: a file without any vector (every row failed, or none, and the model publishes
    no width) was written with width 0; it is rewritten (it holds no vectors, so it is
    small) with the width the files with vectors have, so the folder reads as one table."""
    import pyarrow.parquet as pq

    widths = {path: pq.read_schema(path).field("vector").type.list_size for path in files}
    found = {width for width in widths.values() if width}
    if len(found) != 1:
        return  # none has a vector, or they disagree (the gateway's answers did)
    (width,) = found
    for path in (path for path, seen in widths.items() if seen == 0):
        table = pq.read_table(path)
        column = table.schema.get_field_index("vector")
        vectors = pa.nulls(table.num_rows, pa.list_(pa.float32(), width))
        field = table.schema.field(column).with_type(vectors.type)
        widened = table.set_column(column, field, vectors)
        partial = path.with_name(path.name + ".partial")
        pq.write_table(widened.replace_schema_metadata(table.schema.metadata), partial)
        os.replace(partial, path)


def hand_back_memory() -> None:
    """Give the memory a streamed batch freed back to the system (docs/embeddings.md): Arrow's
    allocator keeps the pages of freed row groups for reuse (about 50 MB after a batch of
    1024-dimension vectors), and glibc's malloc keeps its arenas' freed tops (about 20 MB of
    answers' JSON and vectors); both are released here, once per batch."""
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim`` (None elsewhere: other allocators hand pages back on their own
    or offer no call for it)."""
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # musl and others have no malloc_trim
        return None

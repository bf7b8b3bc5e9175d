"""An embedded corpus read a block at a time: a ``batch_embed`` frame, or the Parquet file or
folder (a Dask run's partitions) it wrote.

Each ``Block`` holds some rows' unit vectors (float32) and their positions in the corpus, so
a cosine is one dot product; the rows' own columns (the input's, ``text``; not the batch's
cost and status columns) are read afterwards for the rows a search kept (``rows_at``). A
file's vectors come from the copy of its unit vectors kept beside it (``search.sidecar``),
made by its first search from its row groups (only the vector column, one row group at a
time and the next one read meanwhile), so the memory a search holds is one block and its
winners, whatever the corpus's size. Rows without a vector (a failed or refused row) are
left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from x402lab.batch.output import EMBED_METADATA, batch_embed_schema
from x402lab.errors import ConfigError
from x402lab.search.sidecar import unit_blocks

#: Rows per block of a corpus held in memory (a frame): 32 MB of vectors at dimension 1024.
FRAME_BLOCK_ROWS = 8192


@dataclass
class Block:
    """Some rows of a corpus: their unit ``vectors`` (n × dim, float32; a zero vector stays
    zero) and their ``positions`` among all the corpus's rows (0-based, in reading order)."""

    vectors: np.ndarray
    positions: np.ndarray


def kept_columns(names: list[str]) -> list[str]:
    """The corpus's own columns among ``names``: all but the vector and the batch's
    bookkeeping (costs, status, tokens), ``text`` kept."""
    batch = set(batch_embed_schema(0).names) - {"text"}
    return [name for name in names if name not in batch]


def blocks(corpus: Any) -> Iterator[Block]:
    """The blocks of ``corpus`` (a frame with a ``vector`` column, a Parquet file or a folder
    of them), each file's from its copy of unit vectors when it has one (``search.sidecar``).
    Raises ConfigError naming what is wrong with it."""
    if isinstance(corpus, pd.DataFrame):
        yield from _frame_blocks(corpus)
        return
    before = 0  # rows of the folder's earlier files
    for path, file in _opened(corpus):
        for vectors, positions in unit_blocks(path, partial(_file_blocks, file)):
            yield Block(vectors, positions + before)
        before += file.metadata.num_rows


def rows_at(corpus: Any, positions: np.ndarray) -> pa.Table:
    """The own columns (``kept_columns``) of the rows of ``corpus`` at ``positions``, in
    that order (a position may repeat): a file's are read only from the row groups that
    hold them."""
    positions = np.asarray(positions, dtype=np.int64)
    if isinstance(corpus, pd.DataFrame):
        own = kept_columns([str(name) for name in corpus.columns])
        return pa.Table.from_pandas(corpus.iloc[positions][own], preserve_index=False)
    order = np.argsort(positions, kind="stable")
    ordered = positions[order]
    parts: list[pa.Table] = []
    first, empty = 0, None
    for _, file in _opened(corpus):
        own = kept_columns(file.schema_arrow.names)
        empty = empty or file.schema_arrow.empty_table().select(own)
        for group in range(file.num_row_groups):
            count = file.metadata.row_group(group).num_rows
            low, high = np.searchsorted(ordered, [first, first + count])
            if high > low:
                table = file.read_row_group(group, columns=own)
                parts.append(table.take(pa.array(ordered[low:high] - first)))
            first += count
    if not parts:
        return empty if empty is not None else pa.table({})
    joined = pa.concat_tables(parts, promote_options="permissive")
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    return joined.take(pa.array(back))


def parquet_files(corpus: Any) -> list[Path]:
    """The Parquet files of a corpus given as a path (a file, or a folder of ``*.parquet``)."""
    if not isinstance(corpus, str | Path):
        raise ConfigError(
            "corpus must be a batch_embed frame or the Parquet file or folder it wrote, got"
            f" {type(corpus).__name__}"
        )
    path = Path(corpus).expanduser()
    if path.is_dir():
        files = sorted(path.glob("*.parquet"))
        if not files:
            raise ConfigError(f"no .parquet files in the folder {str(path)!r}")
        return files
    if not path.is_file():
        raise ConfigError(f"no such corpus file or folder: {str(path)!r}")
    return [path]


def corpus_rows(corpus: Any) -> int:
    """How many rows the Parquet file or folder ``corpus`` holds (from the files' footers)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(path).metadata.num_rows for path in parquet_files(corpus))


def asked(corpus: Any) -> dict[str, Any] | None:
    """What the corpus's vectors were asked with (``{"model", "params"}``), as its batch
    recorded it (a frame's ``attrs["embed"]``, a file's schema metadata); None when unknown."""
    if isinstance(corpus, pd.DataFrame):
        found = corpus.attrs.get("embed")
        return dict(found) if isinstance(found, dict) else None
    import pyarrow.parquet as pq

    metadata = pq.read_schema(parquet_files(corpus)[0]).metadata or {}
    raw = metadata.get(EMBED_METADATA)
    return json.loads(raw) if raw else None


def _opened(corpus: Any) -> Iterator[tuple[Path, Any]]:
    """Each Parquet file of ``corpus`` opened (its footer read), checked for a vector."""
    import pyarrow.parquet as pq

    for path in parquet_files(corpus):
        # Not memory-mapped: a mapped file's pages count in the process's RSS until the
        # system reclaims them (+435 MB searching 400 MB, against +74 MB read a row group
        # at a time).
        file = pq.ParquetFile(path)
        if "vector" not in file.schema_arrow.names:
            raise ConfigError(f"{path.name} has no 'vector' column: give a file batch_embed wrote")
        yield path, file


def _frame_blocks(frame: pd.DataFrame) -> Iterator[Block]:
    if "vector" not in frame.columns:
        raise ConfigError(
            "the corpus frame has no 'vector' column: give the frame batch_embed returned"
        )
    for start in range(0, len(frame), FRAME_BLOCK_ROWS):
        part = frame["vector"].iloc[start : start + FRAME_BLOCK_ROWS]
        present = part.map(lambda v: v is not None and len(v) > 0).to_numpy(bool)
        if present.any():
            vectors = np.stack(part[present].to_numpy()).astype(np.float32)
            yield Block(unit_rows(vectors), start + np.flatnonzero(present))


def _file_blocks(file: Any) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Each row group's unit vectors and their positions in the file (a row group without
    any vector gives none). Only the vector column is read."""
    groups = file.num_row_groups

    def read(group: int) -> pa.Table:
        return file.read_row_group(group, columns=["vector"])

    first = 0
    # The next row group is read (Parquet decoding, which releases the GIL) while this one is
    # scaled: two row groups in memory at most, and the reads stay in one thread.
    with ThreadPoolExecutor(max_workers=1) as reader:
        ahead = reader.submit(read, 0) if groups else None
        for group in range(groups):
            assert ahead is not None
            column = ahead.result().column("vector").combine_chunks()
            ahead = reader.submit(read, group + 1) if group + 1 < groups else None
            present = column.is_valid()
            if column.type.list_size and pc.any(present).as_py():
                positions = first + np.flatnonzero(present.to_numpy(zero_copy_only=False))
                if column.null_count:
                    column = column.filter(present)
                yield unit_rows(matrix_of(column)), positions
            first += len(present)


def matrix_of(column: pa.FixedSizeListArray) -> np.ndarray:
    """A ``fixed_size_list<float32>[dim]`` array without nulls as an n × dim float32 matrix
    (a view of Arrow's buffer where it can be)."""
    width = column.type.list_size
    values = column.values.slice(column.offset * width, len(column) * width)
    return values.to_numpy(zero_copy_only=False).reshape(len(column), width)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` scaled to unit length (a zero vector stays zero), as a new float32 array."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.divide(vectors, norms, dtype=np.float32)

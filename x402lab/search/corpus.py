"""An embedded corpus read a block at a time: a ``batch_embed`` frame, or the Parquet file or
folder (a Dask run's partitions) it wrote.

Each ``Block`` holds its rows' vectors (float32, as stored: a view of Arrow's buffer where
it can be) with their lengths, so a cosine is a dot product divided by them, and the rows'
own columns (the input's, ``text``; not the batch's cost and status columns). A file is
read one row group at a time, so the memory a search holds is one row group's vectors (and
the next one's, read meanwhile) and its winners, whatever the corpus's size. Rows without a
vector (a failed or refused row) are left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from x402lab.batch.output import EMBED_METADATA, batch_embed_schema
from x402lab.errors import ConfigError

#: Rows per block of a corpus held in memory (a frame): 32 MB of vectors at dimension 1024.
FRAME_BLOCK_ROWS = 8192


@dataclass
class Block:
    """Some rows of a corpus: ``vectors`` (n × dim), their own ``rows``, and their
    ``positions`` among all the corpus's rows (0-based, in reading order)."""

    vectors: np.ndarray
    rows: pa.Table
    positions: np.ndarray

    @property
    def norms(self) -> np.ndarray:
        """Each vector's length (1 for a zero vector, whose cosines are then 0)."""
        norms = np.sqrt(np.einsum("ij,ij->i", self.vectors, self.vectors))
        norms[norms == 0] = 1.0
        return norms


def kept_columns(names: list[str]) -> list[str]:
    """The corpus's own columns among ``names``: all but the vector and the batch's
    bookkeeping (costs, status, tokens), ``text`` kept."""
    batch = set(batch_embed_schema(0).names) - {"text"}
    return [name for name in names if name not in batch]


def blocks(corpus: Any) -> Iterator[Block]:
    """The blocks of ``corpus`` (a frame with a ``vector`` column, a Parquet file or a folder
    of them). Raises ConfigError naming what is wrong with it."""
    if isinstance(corpus, pd.DataFrame):
        yield from _frame_blocks(corpus)
        return
    before = 0  # rows of the folder's earlier files
    for path in parquet_files(corpus):
        rows = 0
        for block, count in _file_blocks(path):
            if block is not None:
                block.positions += before
                yield block
            rows += count
        before += rows


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


def _frame_blocks(frame: pd.DataFrame) -> Iterator[Block]:
    if "vector" not in frame.columns:
        raise ConfigError(
            "the corpus frame has no 'vector' column: give the frame batch_embed returned"
        )
    own = kept_columns([str(name) for name in frame.columns])
    for start in range(0, len(frame), FRAME_BLOCK_ROWS):
        part = frame.iloc[start : start + FRAME_BLOCK_ROWS]
        present = part["vector"].map(lambda v: v is not None and len(v) > 0).to_numpy(bool)
        if not present.any():
            continue
        part = part[present]
        vectors = np.stack(part["vector"].to_numpy()).astype(np.float32)
        rows = pa.Table.from_pandas(part[own], preserve_index=False)
        positions = start + np.flatnonzero(present)
        yield Block(vectors, rows, positions)


def _file_blocks(path: Path) -> Iterator[tuple[Block | None, int]]:
    """Each row group's block (None when it holds no vector; positions from the file's
    first row) and its count of rows."""
    import pyarrow.parquet as pq

    # Not memory-mapped: a mapped file's pages count in the process's RSS until the system
    # reclaims them (+435 MB searching 400 MB, against +74 MB read a row group at a time).
    file = pq.ParquetFile(path)
    names = file.schema_arrow.names
    if "vector" not in names:
        raise ConfigError(f"{path.name} has no 'vector' column: give a file batch_embed wrote")
    own = kept_columns(names)
    groups = file.num_row_groups

    def read(group: int) -> pa.Table:
        return file.read_row_group(group, columns=["vector", *own])

    first = 0
    # The next row group is read (Parquet decoding, which releases the GIL) while this one is
    # searched: two row groups in memory at most, and the reads stay in one thread.
    with ThreadPoolExecutor(max_workers=1) as reader:
        ahead = reader.submit(read, 0) if groups else None
        for group in range(groups):
            assert ahead is not None
            table = ahead.result()
            ahead = reader.submit(read, group + 1) if group + 1 < groups else None
            yield _group_block(table, first), table.num_rows
            first += table.num_rows


def _group_block(table: pa.Table, first: int) -> Block | None:
    """One row group's block (positions from ``first``); None when it holds no vector
    (failed rows, or a file without any)."""
    column = table.column("vector").combine_chunks()
    present = column.is_valid()
    if column.type.list_size == 0 or not pc.any(present).as_py():
        return None
    positions = first + np.flatnonzero(present.to_numpy(zero_copy_only=False))
    if column.null_count:
        table = table.filter(present)
        column = table.column("vector").combine_chunks()
    return Block(matrix_of(column), table.drop_columns(["vector"]), positions)


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

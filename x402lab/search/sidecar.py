"""The unit vectors of a corpus file kept beside it, so a search reads float32 rows, not Parquet.

Decoding a Parquet ``fixed_size_list<float32>`` column costs a level per element (1,024 a
row), which made reading the file most of a search's time. The first search of a file writes
its rows' vectors, scaled to unit length, to ``.<file name>.x402lab-vectors`` in the file's
folder (hidden, so ``pq.read_table(folder)`` and Dask never take it for a partition): a
header, the present rows' float32 vectors one after the other, and their positions in the
file. Later searches read it a block at a time into one reused buffer (``readinto``: the
page cache is not mapped into the process, so RSS stays one block).

The copy names the file it was made from (its size, modification time and a digest of its
Parquet footer, which holds every row group's offsets and statistics): a file changed since
is read from Parquet again and its copy made anew. A folder that cannot be written to gets
no copy, and every search reads the Parquet file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

MAGIC = b"X402LAB-UNIT-F32"
#: Bytes before the vectors (the header, padded): the vectors start on a page boundary.
HEADER = 4096
#: Rows per block read from a copy: 32 MB at dimension 1024.
BLOCK_ROWS = 8192

#: One block of a file: its rows' unit vectors (n × dim) and positions in the file.
UnitBlock = tuple[np.ndarray, np.ndarray]


def sidecar_path(path: Path) -> Path:
    """Where the unit vectors of the corpus file ``path`` are kept."""
    return path.with_name(f".{path.name}.x402lab-vectors")


def source_stamp(path: Path) -> dict[str, object]:
    """What names the file's content: its size, modification time and footer digest."""
    stat = path.stat()
    with path.open("rb") as file:
        file.seek(max(0, stat.st_size - 8))
        tail = file.read(8)
        footer = int.from_bytes(tail[:4], "little") if len(tail) == 8 else 0
        file.seek(max(0, stat.st_size - 8 - footer))
        digest = hashlib.sha256(file.read(footer + 8)).hexdigest()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "footer_sha256": digest}


def unit_blocks(path: Path, from_parquet: Callable[[], Iterator[UnitBlock]]) -> Iterator[UnitBlock]:
    """The unit vectors of the corpus file ``path`` a block at a time: from its copy when
    the copy names the file as it is now, else from ``from_parquet()`` (the file's row
    groups, already scaled), writing the copy meanwhile. A block read from the copy is a
    view of a reused buffer: valid until the next block is asked for."""
    stamp = source_stamp(path)
    copy = sidecar_path(path)
    header = _header(copy)
    if header is not None and header.get("source") == stamp:
        yield from _read(copy, header)
        return
    yield from _written(copy, stamp, from_parquet())


def _header(copy: Path) -> dict | None:
    """The copy's header, or None when there is none or it is not whole."""
    try:
        with copy.open("rb") as file:
            raw = file.read(HEADER)
            size = os.fstat(file.fileno()).st_size
    except OSError:
        return None
    if len(raw) < HEADER or not raw.startswith(MAGIC):
        return None
    try:
        header = json.loads(raw[len(MAGIC) :].rstrip(b"\0"))
        rows, dim = int(header["rows"]), int(header["dim"])
    except (ValueError, KeyError, TypeError):
        return None
    whole = size == HEADER + rows * dim * 4 + rows * 8
    return header if whole else None


def _read(copy: Path, header: dict) -> Iterator[UnitBlock]:
    rows, dim = int(header["rows"]), int(header["dim"])
    positions = np.fromfile(copy, dtype="<i8", count=rows, offset=HEADER + rows * dim * 4)
    buffer = np.empty((min(BLOCK_ROWS, rows), dim), dtype="<f4")
    with copy.open("rb", buffering=0) as file:
        file.seek(HEADER)
        for start in range(0, rows, BLOCK_ROWS):
            block = buffer[: min(BLOCK_ROWS, rows - start)]
            view = block.data.cast("B")
            filled = 0
            while filled < len(view):
                got = file.readinto(view[filled:])
                if not got:
                    raise OSError(f"{copy} ended early")
                filled += got
            yield block, positions[start : start + len(block)]


def _written(copy: Path, stamp: dict, blocks: Iterator[UnitBlock]) -> Iterator[UnitBlock]:
    """``blocks`` passed on, each also appended to a new copy; the copy takes its name only
    once every block was written (a search stopped early, or a folder that refuses the
    write, leaves none)."""
    partial = copy.with_name(f"{copy.name}.{os.getpid()}.partial")
    try:
        file = partial.open("wb")
    except OSError:
        yield from blocks
        return
    positions: list[np.ndarray] = []
    rows, dim, whole = 0, 0, True
    try:
        whole = _wrote(file, b"\0" * HEADER)
        for vectors, where in blocks:
            if whole:
                whole = _wrote(file, np.ascontiguousarray(vectors, dtype="<f4").tobytes())
                positions.append(np.asarray(where, dtype="<i8"))
                rows, dim = rows + len(vectors), vectors.shape[1]
            yield vectors, where
        header = MAGIC + json.dumps({"rows": rows, "dim": dim, "source": stamp}).encode()
        whole = whole and _wrote(file, np.concatenate([np.zeros(0, "<i8"), *positions]).tobytes())
        if whole and _wrote(file, header, at=0):
            file.close()
            with contextlib.suppress(OSError):
                os.replace(partial, copy)
    finally:
        file.close()
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)


def _wrote(file: BinaryIO, data: bytes, *, at: int | None = None) -> bool:
    """Whether ``data`` was written (at offset ``at``, else where the file is): a full disk
    or a refused write leaves the copy unmade, never the search failed."""
    try:
        if at is not None:
            file.seek(at)
        file.write(data)
    except OSError:
        return False
    return True

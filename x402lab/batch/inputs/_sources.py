"""Any input an analyst has, as the rows of a batch.

Lists and tuples, pandas and polars Series and DataFrames, Arrow arrays, tables and datasets,
any iterable or generator of strings, and paths to CSV, Parquet, JSON Lines or text files
(``column=`` picks the column). ``chat_frame`` gives ``batch_chat`` its input frame (held in
memory: its rows come back with their answers). ``embed_source`` gives ``batch_embed`` its
texts: in memory as they are, or, for a generator, an iterator, a file or a dataset, as
chunks read lazily so a corpus of any length streams to Parquet in bounded memory.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from x402lab.errors import ConfigError

#: Texts read per chunk from a lazy source (a generator, a file, a dataset).
CHUNK_ROWS = 32_768
FILE_SUFFIXES = (".csv", ".parquet", ".pq", ".jsonl", ".ndjson", ".json", ".txt")
_ACCEPTED = (
    "a list of strings, a pandas or polars Series/DataFrame/LazyFrame, an Arrow"
    " array/table/dataset,"
    " an iterable or generator of strings, or a path to a CSV, Parquet, JSON Lines or text"
    " file"
)


@dataclass
class Texts:
    """The texts of an embedding batch: ``values`` in memory (with a Series's ``index``, and
    a table's other columns as ``others``, the rows' own columns kept beside their vectors),
    or ``chunks``, an iterator of (texts, their rows' other columns or None) read lazily
    (``total`` when known)."""

    values: list[str] | None = None
    index: pd.Index | None = None
    chunks: Iterator[tuple[list[str], pa.Table | None]] | None = None
    total: int | None = None
    others: pd.DataFrame | None = None


def refuse_dask(value: Any) -> None:
    """A Dask collection is never read as rows here: iterated, a Dask DataFrame gives its
    column names (an estimate of one row named after a column, not of the corpus)."""
    if "dask" not in sys.modules:  # a Dask collection means dask is already imported
        return
    import dask

    if dask.is_dask_collection(value):
        raise ConfigError(
            f"a Dask {type(value).__name__} is not read in this process: batch_chat() and"
            " batch_embed() take it as it is and run on the current cluster; estimate() reads"
            " its rows here, so pass a pandas sample (ddf.head(1000), then scale the total)"
            " or ddf.compute()"
        )


def is_polars(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "polars"


def polars_to_pandas(value: Any) -> Any:
    """A polars Series or DataFrame as pandas; a LazyFrame (``pl.scan_parquet(...)``) is
    collected first."""
    if not hasattr(value, "to_pandas") and hasattr(value, "collect"):
        value = value.collect()
    return value.to_pandas()


def _is_dataset(value: Any) -> bool:
    # A Dataset exists only once its module is loaded: importing it here would cost the first
    # batch of a session about 0.4 s for a list of prompts.
    ds = sys.modules.get("pyarrow.dataset")
    return ds is not None and isinstance(value, ds.Dataset)


def as_path(value: Any) -> Path | None:
    """``value`` as a file path when it names one (a PathLike, or a string with a known
    suffix or naming an existing file), else None."""
    if isinstance(value, os.PathLike):
        return Path(value).expanduser()
    if isinstance(value, str) and "\n" not in value:
        path = Path(value).expanduser()
        if path.suffix.lower() in FILE_SUFFIXES or path.is_file():
            return path
    return None


def _file_kind(path: Path) -> str:
    if not path.is_file():
        raise ConfigError(f"no such file: {str(path)!r}")
    suffix = path.suffix.lower()
    kinds = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".txt": "text"}
    if suffix in kinds:
        return kinds[suffix]
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    raise ConfigError(
        f"cannot read {path.name}: give a .csv, .parquet, .jsonl or .txt file (one text a line)"
    )


def _pick(names: Sequence[str], column: str | None, default: str, where: str) -> str:
    name = column or default
    if name not in names:
        shown = ", ".join(map(str, names[:8]))
        raise ConfigError(f"no column {name!r} in {where} (columns: {shown}): pass column='...'")
    return name


# -- batch_chat: a frame in memory -----------------------------------------------------------


def read_file(path: Path) -> pd.DataFrame:
    """A whole CSV, Parquet, JSON Lines or text file as a DataFrame (a text file is one
    ``text`` row per line)."""
    kind = _file_kind(path)
    if kind == "csv":
        return pd.read_csv(path)
    if kind == "parquet":
        return pd.read_parquet(path)
    if kind == "jsonl":
        return pd.read_json(path, lines=True)
    lines = path.read_text(encoding="utf-8").splitlines()
    return pd.DataFrame({"text": pd.Series([x for x in lines if x.strip()], dtype="str")})


def _list_frame(values: list[Any]) -> pd.DataFrame:
    # Typed even when empty, so an empty batch has the dtypes of a full one.
    dtype = "str" if all(isinstance(v, str) for v in values) else object
    return pd.DataFrame({"prompt": pd.Series(values, dtype=dtype)})


def as_pandas(rows: Any, *, values_as_they_are: bool = False) -> Any:
    """``rows`` in pandas where they are a file, a polars frame, an Arrow table, array or
    dataset (a DataFrame, or a Series for an array); anything else as given. An Arrow array
    of strings is a ``str`` Series, unless ``values_as_they_are`` (every array's values as
    Python objects: numbers, bytes). Raises ConfigError for a Dask collection."""
    refuse_dask(rows)
    path = as_path(rows)
    if path is not None:
        return read_file(path)
    if is_polars(rows):
        return polars_to_pandas(rows)
    if isinstance(rows, pa.Array | pa.ChunkedArray):
        strings = pa.types.is_string(rows.type) and not values_as_they_are
        return pd.Series(rows.to_pylist(), dtype="str" if strings else object)
    if isinstance(rows, pa.Table):
        return rows.to_pandas()
    if _is_dataset(rows):
        return rows.to_table().to_pandas()
    return rows


def chat_frame(rows: Any, column: str | None = None, prompt: str | None = None) -> pd.DataFrame:
    """The input frame of ``batch_chat`` from any input (see the module docstring): a
    DataFrame as given; a list, Series or array as a ``prompt`` column; ``column=`` names
    the column holding the prompts (renamed ``prompt``). A Series is the texts whatever its
    name, its index kept; it keeps its name only where the ``prompt`` template names it
    (``df["review"]`` with ``prompt="Classify: {review}"``). Raises ConfigError."""
    rows = as_pandas(rows)
    if isinstance(rows, pd.DataFrame):
        if column is not None:
            name = _pick(list(rows.columns), column, column, "the rows")
            if name != "prompt":
                if "prompt" in rows.columns:
                    raise ConfigError(f"column={column!r}: the rows already have a 'prompt'")
                rows = rows.rename(columns={name: "prompt"})
        return rows
    if isinstance(rows, pd.Series):
        name = rows.name
        named = isinstance(name, str) and prompt is not None and f"{{{name}}}" in prompt
        return rows.to_frame(name=name if named else "prompt")
    if isinstance(rows, str | bytes | dict) or not isinstance(rows, Iterable):
        raise ConfigError(f"rows must be {_ACCEPTED}; got {type(rows).__name__}")
    return _list_frame(list(rows))


def _rendered(message: Any) -> str:
    if isinstance(message, str):
        return message
    lines = []
    for turn in message:
        content = turn.get("content") if isinstance(turn, dict) else turn
        if isinstance(content, list):
            content = " ".join(
                str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("text")
            )
        role = turn.get("role", "user") if isinstance(turn, dict) else "user"
        lines.append(f"{role}: {content}")
    return "\n".join(lines)


def with_prompt(inputs: pd.DataFrame, messages: list[Any]) -> pd.DataFrame:
    """``inputs`` with a ``prompt`` column of what each row sends (a filled template, or a
    message list as ``role: content`` lines), unless the input has its own ``prompt``."""
    if "prompt" in inputs.columns:
        return inputs
    rendered = pd.Series([_rendered(m) for m in messages], index=inputs.index, dtype="str")
    return inputs.assign(prompt=rendered)


# -- batch_embed: texts in memory, or chunks read lazily -------------------------------------


def _strings(values: list[Any], offset: int = 0) -> list[str]:
    bad = next((i for i, v in enumerate(values) if not isinstance(v, str)), None)
    if bad is not None:
        raise ConfigError(f"text {offset + bad} is not a string: {values[bad]!r}")
    return values


def _chunked(items: Iterable[Any], size: int) -> Iterator[list[str]]:
    chunk: list[Any] = []
    seen = 0
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield _strings(chunk, seen)
            seen += len(chunk)
            chunk = []
    if chunk:
        yield _strings(chunk, seen)


def _plain_chunks(items: Iterable[Any]) -> Iterator[tuple[list[str], pa.Table | None]]:
    """Chunks of texts that have no other columns (a generator, JSON Lines, a text file)."""
    return ((chunk, None) for chunk in _chunked(items, CHUNK_ROWS))


def _table_chunks(
    batches: Iterable[pa.RecordBatch], name: str
) -> Iterator[tuple[list[str], pa.Table | None]]:
    """Chunks of about ``CHUNK_ROWS`` rows of a table read in record batches: the ``name``
    column's texts and the rows' other columns (None when there are none)."""
    pending: list[pa.RecordBatch] = []
    rows = seen = 0
    for batch in itertools.chain(batches, [None]):
        if batch is not None and batch.num_rows:
            pending.append(batch)
            rows += batch.num_rows
        if pending and (rows >= CHUNK_ROWS or batch is None):
            table = pa.Table.from_batches(pending)
            texts = _strings(table.column(name).to_pylist(), seen)
            others = table.drop_columns([name])
            yield texts, others.combine_chunks() if others.num_columns else None
            seen += rows
            pending, rows = [], 0


def _file_chunks(
    path: Path, column: str | None
) -> tuple[Iterator[tuple[list[str], pa.Table | None]], int | None]:
    """The chunks of a file, read lazily, and their count when the format says it freely."""
    kind = _file_kind(path)
    if kind == "parquet":
        import pyarrow.parquet as pq

        file = pq.ParquetFile(path)
        name = _pick(file.schema_arrow.names, column, "text", path.name)
        batches = file.iter_batches(batch_size=CHUNK_ROWS)
        return _table_chunks(batches, name), file.metadata.num_rows
    if kind == "csv":
        import pyarrow.csv as csv

        reader = csv.open_csv(path, read_options=csv.ReadOptions(block_size=1 << 22))
        name = _pick(reader.schema.names, column, "text", path.name)
        return _table_chunks(reader, name), None
    if kind == "jsonl":
        return _plain_chunks(_jsonl_texts(path, column)), None
    return _plain_chunks(_text_lines(path)), None


def _jsonl_texts(path: Path, column: str | None) -> Iterator[Any]:
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            record = json.loads(line)
            if isinstance(record, str):
                yield record
                continue
            name = column or "text"
            if not isinstance(record, dict) or name not in record:
                raise ConfigError(f"{path.name} line {number} has no {name!r}: pass column='...'")
            yield record[name]


def _text_lines(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            text = line.rstrip("\r\n")
            if text.strip():
                yield text


def embed_source(texts: Any, column: str | None = None) -> Texts:
    """The texts of ``batch_embed`` from any input (see the module docstring); a table's
    other columns (an ``id``) come with them. Raises ConfigError (a lazy source's bad value
    is found when its chunk is read)."""
    refuse_dask(texts)
    path = as_path(texts)
    if path is not None:
        chunks, total = _file_chunks(path, column)
        return Texts(chunks=chunks, total=total)
    if _is_dataset(texts):
        name = _pick(texts.schema.names, column, "text", "the dataset")
        return Texts(chunks=_table_chunks(texts.to_batches(batch_size=CHUNK_ROWS), name))
    if is_polars(texts):
        texts = polars_to_pandas(texts)
    if isinstance(texts, pa.Table):
        texts = texts.to_pandas()
    if isinstance(texts, pd.DataFrame):
        name = _pick(list(texts.columns), column, "text", "the DataFrame")
        others = texts.drop(columns=[name])
        source = embed_source(texts[name])
        source.others = others if len(others.columns) else None
        return source
    if isinstance(texts, pd.Series):
        return Texts(values=_strings(texts.tolist()), index=texts.index)
    if isinstance(texts, pa.Array | pa.ChunkedArray):
        return Texts(values=_strings(texts.to_pylist()))
    if isinstance(texts, Sequence) and not isinstance(texts, str | bytes):
        return Texts(values=_strings(list(texts)))
    if isinstance(texts, str | bytes | dict) or not isinstance(texts, Iterable):
        raise ConfigError(f"texts must be {_ACCEPTED}; got {type(texts).__name__}")
    return Texts(chunks=_plain_chunks(texts), total=None)


def all_texts(source: Texts) -> tuple[list[str], pd.Index | None]:
    """Every text of ``source`` in memory (``estimate`` quotes them all at once)."""
    if source.values is not None:
        return source.values, source.index
    assert source.chunks is not None
    return [text for chunk, _ in source.chunks for text in chunk], None


def index_frame(index: Any, n: int) -> pd.DataFrame:
    """An empty frame with ``index`` (or 0..n-1): the rows results are joined to."""
    return pd.DataFrame(index=index if index is not None else pd.RangeIndex(n))

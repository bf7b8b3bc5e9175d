"""A route batch's rows: the input frame, and each row's arguments to the route's method.

``rows`` is a list, tuple, pandas or polars Series, Arrow array or any iterable of values,
each the method's first argument (``lab.search``: the query; ``lab.parse_document``: the
document, bytes or a path); or a table (a pandas or polars DataFrame, an Arrow table, a CSV,
Parquet or JSON Lines file), whose column ``column=`` (else the one named as that argument,
``query``, ``url``...) gives the first argument. A string or path is a file of rows, as in
``batch_chat``. Keyword arguments go to every row's call: a string with ``{column}`` fields
is filled from the row (``prompt="a photo of {thing}"``), ``xl.col("name")`` passes the
row's value of that column as it is (a number, bytes, a path, a list), anything else is the
same for every row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from x402lab.batch.inputs import as_pandas, fill_template
from x402lab.errors import ConfigError


@dataclass(frozen=True)
class col:  # noqa: N801 (used as a function: ``xl.col("size")``)
    """A column whose values go to a parameter as they are, one row's value per call:
    ``lab.batch(lab.upscale_image, df, image=xl.col("path"), scale=xl.col("scale"))``."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"col() takes a column name, got {self.name!r}")


def input_frame(rows: Any, first: str, column: str | None) -> pd.DataFrame:
    """The rows as a frame holding the first argument's column (see the module docstring);
    a Series keeps its index, and its name when it has one."""
    rows = as_pandas(rows, values_as_they_are=True)
    if isinstance(rows, pd.DataFrame):
        if column is not None and column not in rows.columns:
            shown = ", ".join(map(str, list(rows.columns)[:8]))
            raise ConfigError(f"column={column!r} names no column of the rows (columns: {shown})")
        return rows
    if isinstance(rows, pd.Series):
        name = rows.name if isinstance(rows.name, str) and rows.name else first
        return rows.to_frame(name=name)
    if isinstance(rows, str | bytes | dict) or not isinstance(rows, Iterable):
        raise ConfigError(
            "rows must be a list, Series or Arrow array of values, a DataFrame or Arrow table,"
            f" or a path to a CSV, Parquet, JSON Lines or text file; got {type(rows).__name__}"
        )
    values = list(rows)
    dtype = "str" if values and all(isinstance(v, str) for v in values) else object
    return pd.DataFrame({first: pd.Series(values, dtype=dtype)})


def first_column(inputs: pd.DataFrame, first: str, column: str | None, given: bool) -> str | None:
    """The column holding each row's first argument: ``column``, else the one named as the
    argument, else the only column of a list's frame; None when the argument is given as a
    keyword (``given``). ConfigError when none can be told."""
    if column is not None:
        return column
    if given:
        return None
    if first in inputs.columns:
        return first
    if len(inputs.columns) == 1:
        return str(inputs.columns[0])
    shown = ", ".join(map(str, list(inputs.columns)[:8]))
    raise ConfigError(
        f"which column is {first}? Pass column='...', {first}='... {{column}} ...' or"
        f" {first}=xl.col('...') (columns: {shown})"
    )


def row_arguments(
    inputs: pd.DataFrame, first: str, column: str | None, arguments: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Each row's keyword arguments to the route's method. ConfigError naming the row and
    column of a missing value, a template field or ``col`` that names no column."""
    n = len(inputs)
    per_row: dict[str, list[Any]] = {}
    constant: dict[str, Any] = {}
    source = first_column(inputs, first, column, first in arguments)
    if source is not None:
        per_row[first] = _values(inputs, source, first)
    for name, value in arguments.items():
        if isinstance(value, col):
            if value.name not in inputs.columns:
                shown = ", ".join(map(str, list(inputs.columns)[:8]))
                raise ConfigError(f"{name}=col({value.name!r}): no such column ({shown})")
            per_row[name] = _values(inputs, value.name, name)
        elif isinstance(value, str) and "{" in value:
            per_row[name] = fill_template(value, inputs)
        else:
            constant[name] = value
    return [{**constant, **{k: v[i] for k, v in per_row.items()}} for i in range(n)]


def _values(inputs: pd.DataFrame, column: str, parameter: str) -> list[Any]:
    """The column's values as they are; ConfigError naming the first row without one."""
    values = inputs[column].tolist()
    for label, value in zip(inputs.index, values, strict=True):
        if _missing(value):
            raise ConfigError(
                f"row {label!r} has no {parameter} (column {column!r} is {value!r} there):"
                " fill it or drop the row (df.dropna(subset=[...]))"
            )
    return values


def _missing(value: Any) -> bool:
    if value is None or (isinstance(value, str) and not value.strip()):
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list, an array: not one missing value
        return False

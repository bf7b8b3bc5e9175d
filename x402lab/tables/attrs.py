"""JSON-safe ``DataFrame.attrs``: what every frame x402lab returns carries beside its rows.

pandas JSON-encodes ``df.attrs`` into the file when a frame is written to Parquet or Feather
(and ``pd.read_parquet`` gives them back), so ``to_parquet`` raises on an attr that JSON
cannot hold, and Feather silently drops them all. Every attr is therefore plain data:
``str``, ``int``, ``float``, ``bool``, ``None`` and lists and dicts of those; an instant is
an ISO 8601 string in UTC at microsecond precision (``pd.Timestamp(value)`` reads it back,
and two of them compare in time order as strings); a rich object (``BatchSummary``) is its
``to_dict()``, rebuilt by its own ``of()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime
from os import PathLike
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["iso_utc", "json_safe", "set_attrs"]


def iso_utc(instant: datetime) -> str:
    """``instant`` as ISO 8601 in UTC with microseconds (fixed width: compares in time order).

    A naive datetime is taken as UTC (x402lab's timestamps are UTC throughout).
    """
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=UTC)
    return str(instant.astimezone(UTC).isoformat(timespec="microseconds"))


def json_safe(value: Any, *, name: str = "value") -> Any:
    """``value`` as plain JSON data (see the module docstring); ``name`` is for the error.

    Raises TypeError naming the attr for a value that has no plain form: a defect in the
    code that set it, caught here rather than when an analyst calls ``to_parquet``.
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime):  # pd.Timestamp is one too
        return iso_utc(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, PathLike):
        return str(value)
    item = getattr(value, "item", None)  # numpy scalars: np.int64(3) -> 3
    if callable(item) and getattr(value, "ndim", None) == 0:
        return json_safe(item(), name=name)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and not hasattr(value, "columns"):  # a DataFrame is no attr
        return json_safe(to_dict(), name=name)
    if isinstance(value, Mapping):
        return {str(key): json_safe(v, name=f"{name}[{key!r}]") for key, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [json_safe(v, name=f"{name}[{i}]") for i, v in enumerate(items)]
    raise TypeError(
        f"attrs {name} is a {type(value).__name__}, which JSON cannot hold (to_parquet would"
        " fail): store plain data (str, int, float, bool, None, lists and dicts, ISO 8601 times)"
    )


def set_attrs(frame: pd.DataFrame, **attrs: Any) -> pd.DataFrame:
    """Set ``attrs`` on ``frame`` as plain JSON data (``json_safe``); returns the frame."""
    for key, value in attrs.items():
        frame.attrs[key] = json_safe(value, name=repr(key))
    return frame

"""The DataFrame's own front door: ``df.x402.chat(...)``, ``.embed(...)``, ``.batch(call, ...)``.

A pandas DataFrame or Series, or a polars DataFrame, runs ``batch_chat``, ``batch_embed`` or
``batch`` of the current lab: the last one ``connect()`` made that is still open in this
process (as Dask's current Client); ``df.x402.using(lab)`` picks another. The lab's own
rules hold (the exact quote, the budget, claims, the cost columns). A pandas frame comes back
with the caller's index; a polars frame comes back as a polars frame (through Arrow: the
money columns stay exact decimals).

The pandas accessors are registered when the first lab is made; polars' namespace too when
polars is imported by then (polars takes most of a second to import, so x402lab never
imports it itself): after a later ``import polars``, ``xl.register_accessors()`` adds it.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from x402lab.errors import ConfigError

NAME = "x402"
_open: list[weakref.ref[Any]] = []  # the labs connect() made, oldest first, while open
_registered: set[str] = set()


def opened(lab: Any) -> None:
    """``lab`` (a sync Lab) is the current lab from now on; registers the accessors."""
    _open[:] = [ref for ref in _open if ref() is not None]  # labs collected unclosed
    _open.append(weakref.ref(lab))
    register_accessors()


def closed(async_lab: Any) -> None:
    """The lab over ``async_lab`` is closed: it is no longer anyone's current lab."""
    _open[:] = [ref for ref in _open if (lab := ref()) is not None and lab.async_ is not async_lab]


def current_lab() -> Any:
    """The last lab ``connect()`` made that is still open; ConfigError when there is none."""
    for ref in reversed(_open):
        lab = ref()
        if lab is not None:
            return lab
    raise ConfigError(
        "df.x402 runs on the current lab, and no lab is open: lab = xl.connect() first, or"
        " pick one with df.x402.using(lab)"
    )


def register_accessors() -> None:
    """Register ``x402`` on pandas DataFrames and Series, and on polars DataFrames when
    polars is imported (once each)."""
    if "pandas" not in _registered:
        import pandas as pd

        pd.api.extensions.register_dataframe_accessor(NAME)(FrameBatches)
        pd.api.extensions.register_series_accessor(NAME)(FrameBatches)
        _registered.add("pandas")
    polars = sys.modules.get("polars")
    if polars is not None and "polars" not in _registered:
        polars.api.register_dataframe_namespace(NAME)(FrameBatches)
        _registered.add("polars")


class FrameBatches:
    """``x402`` on a DataFrame (see the module docstring): ``chat``, ``embed``, ``batch``,
    ``using``."""

    def __init__(self, frame: Any, lab: Any = None) -> None:
        self._frame = frame
        self._lab = lab

    def using(self, lab: Any) -> FrameBatches:
        """The same front door on ``lab`` instead of the current one."""
        if not hasattr(lab, "batch_chat"):
            raise ConfigError(f"using() takes a lab from xl.connect(), got {type(lab).__name__}")
        return FrameBatches(self._frame, lab)

    @property
    def lab(self) -> Any:
        """The lab the batches run on."""
        return self._lab if self._lab is not None else current_lab()

    def chat(self, **kwargs: Any) -> Any:
        """Spends money: ``lab.batch_chat(frame, **kwargs)`` (``model=``, ``prompt="...
        {column} ..."``, every option of ``batch_chat``)."""
        return self._back(self.lab.batch_chat(self._frame, **kwargs))

    def embed(self, **kwargs: Any) -> Any:
        """Spends money: ``lab.batch_embed(frame, **kwargs)`` (``model=``, ``column=`` the
        texts' column, default ``"text"``, every option of ``batch_embed``)."""
        return self._back(self.lab.batch_embed(self._frame, **kwargs))

    def batch(self, call: Any, **kwargs: Any) -> Any:
        """Spends money (unless ``dry_run=True``): ``lab.batch(call, frame, **kwargs)``;
        ``call`` is the lab's method (``lab.search``) or its name (``"search"``). A method of
        a lab runs on that lab."""
        owner = getattr(call, "__self__", None)
        lab = self._lab or (owner if hasattr(owner, "batch") else None) or current_lab()
        return self._back(lab.batch(call, self._frame, **kwargs))

    def _back(self, result: Any) -> Any:
        """A polars caller gets a polars frame back (an estimate or summary as it is)."""
        polars = sys.modules.get("polars")
        if polars is None or not isinstance(self._frame, polars.DataFrame):
            return result
        import pandas as pd
        import pyarrow as pa

        if not isinstance(result, pd.DataFrame):
            return result
        return polars.from_arrow(pa.Table.from_pandas(result, preserve_index=False))

"""Gold labels for ``lab.compare``: the true answers of a sample, in the forms analysts keep
them (a list in the sample's order, a Series aligned with its index, one of its columns, or a
DataFrame of fields for a schema), checked against the sample and the fields before
anything is signed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from x402lab.batch.kinds import OutputSpec
from x402lab.errors import ConfigError


def gold_labels(
    reference: Any, frame: pd.DataFrame, spec: OutputSpec, models: list[str]
) -> tuple[pd.DataFrame | None, pd.DataFrame]:
    """The gold answers (one column per field, in the sample's order) when ``reference``
    holds them, and the sample to send (a gold column named by ``reference`` left out);
    (None, sample) when ``reference`` names a configuration. Raises ConfigError for gold
    labels that do not fit the sample or the fields."""
    names = spec.names
    if reference is None or isinstance(reference, tuple):
        return None, frame
    if isinstance(reference, str):
        if reference not in frame.columns:
            return None, frame  # a model id: checked with the others
        if reference in models:
            raise ConfigError(
                f"reference={reference!r} is both a column of the sample and a model id: pass"
                f" the column's values (sample[{reference!r}]) or (model, 1)"
            )
        if len(names) != 1:
            raise ConfigError(
                "a column name as reference gives one field: with several fields pass a"
                f" DataFrame with columns {names}"
            )
        values = frame[reference]
        gold = pd.DataFrame({names[0]: values.to_numpy()})
        return _checked(gold, spec, len(frame)), frame.drop(columns=[reference])
    if isinstance(reference, pd.DataFrame):
        missing = [n for n in names if n not in reference.columns]
        if missing:
            raise ConfigError(
                f"the gold DataFrame has no column(s) {missing}; it has {list(reference.columns)}"
            )
        gold = _aligned(reference[names], frame)
    elif isinstance(reference, pd.Series):
        gold = _aligned(reference.to_frame(names[0]), frame) if len(names) == 1 else None
    elif isinstance(reference, Sequence | np.ndarray) and not isinstance(reference, str | bytes):
        values = list(reference)
        if len(values) != len(frame):
            raise ConfigError(
                f"reference holds {len(values)} gold labels for a sample of {len(frame)} rows:"
                " give one per row, in the sample's order"
            )
        gold = pd.DataFrame({names[0]: values}) if len(names) == 1 else None
    else:
        raise ConfigError(
            "reference is a model id, (model, rows_per_request), or gold labels: a list, a"
            f" Series, a column name or a DataFrame; got {type(reference).__name__}"
        )
    if gold is None:
        raise ConfigError(
            f"gold labels for several fields ({names}) come as a DataFrame with those columns"
        )
    return _checked(gold, spec, len(frame)), frame


def _aligned(gold: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    missing = frame.index.difference(gold.index)
    if len(missing):
        raise ConfigError(
            f"the gold labels have no row for {len(missing)} sample rows (index"
            f" {list(missing[:3])}...): align them with the sample's index"
        )
    return gold.loc[frame.index].reset_index(drop=True)


def _checked(gold: pd.DataFrame, spec: OutputSpec, rows: int) -> pd.DataFrame:
    assert len(gold) == rows
    for f in spec.fields:
        column = gold[f.name]
        if column.isna().any():
            raise ConfigError(
                f"{int(column.isna().sum())} gold labels of {f.name} are missing: label every"
                " sample row, or leave the unlabelled rows out of the sample"
            )
        if f.kind == "enum":
            wrong = sorted({str(v) for v in column if v not in f.values})
            if wrong:
                raise ConfigError(f"gold labels {wrong} of {f.name} are not among {list(f.values)}")
    return gold.reset_index(drop=True)


def values_without_gold(gold: pd.DataFrame, spec: OutputSpec) -> list[str]:
    """A sentence for each enum field with allowed values that no gold row has: measured on
    this sample, a configuration's accuracy says nothing about them."""
    notes = []
    for f in spec.fields:
        if f.kind != "enum":
            continue
        present = set(gold[f.name])
        absent = [v for v in f.values if v not in present]
        if absent:
            what = "label(s)" if len(spec.fields) == 1 else f"value(s) of {f.name}"
            notes.append(
                f"no gold row has the {what} {', '.join(map(repr, absent))}: the accuracy says"
                f" nothing about rows of {'it' if len(absent) == 1 else 'them'}; label a sample"
                " that holds every value (xl.gold_sample(frame, n, by=...))"
            )
    return notes

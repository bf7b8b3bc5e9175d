"""Prompt templates of ``batch_chat``: ``prompt="About {city}"`` filled from each row.

The template and the columns it uses are checked once per batch, before anything is sent:
its syntax (positional ``{}`` fields, lone braces, fields that are literal JSON braces), its
field names against the columns (with the closest column), and the used columns' values
(None, NaN or empty text would be sent as "About nan" and paid for). Every refusal is a
ConfigError naming the rows, the column and the fix.
"""

from __future__ import annotations

import difflib
import re
import string
from collections.abc import Iterator, Sequence
from typing import Any

import pandas as pd

from x402lab.errors import ConfigError

_SHOWN_ROWS = 5
_NAME = re.compile(r"[^\W\d]\w*\Z")  # a field that names a column: an identifier


def fill_template(template: str, inputs: pd.DataFrame) -> list[str]:
    """Each row's prompt: ``template`` with the row's columns filled in.

    Raises ConfigError for a malformed template, a field that names no column, or a used
    column with missing or empty values (naming the rows and how to fill or drop them).
    """
    if not isinstance(template, str):
        raise ConfigError(f"prompt must be a template string, got {type(template).__name__}")
    columns = template_columns(template, inputs.columns)
    for column in columns:
        check_filled(inputs, column, what="prompt template uses")
    prompts = []
    for label, record in zip(inputs.index, inputs.to_dict("records"), strict=True):
        try:
            prompts.append(template.format_map(record))
        except (ValueError, TypeError, AttributeError, IndexError, KeyError) as exc:
            raise ConfigError(
                f"prompt template cannot be filled for row {label!r}: {type(exc).__name__}:"
                f" {exc} (template {template!r})"
            ) from None
    return prompts


def template_columns(template: str, columns: Sequence[Any]) -> list[str]:
    """The columns ``template`` uses, in order. Raises ConfigError for a positional field,
    a lone brace, or a field that names no column (with the closest one)."""
    names = [str(c) for c in columns]
    shown = ", ".join(names) or "none"
    used: list[str] = []
    try:
        fields = list(_fields(template))
    except ValueError as exc:
        raise ConfigError(
            f"prompt template {template!r} is not a valid template ({exc}): write {{column}}"
            " for a value of the row, and double the braces that are text ({{ and }})"
            f" (columns: {shown})"
        ) from None
    for field in fields:
        root = re.split(r"[.\[]", field, maxsplit=1)[0]
        if root == "" or root.isdigit():
            raise ConfigError(
                f"prompt template {template!r} has a positional field {{{field}}}: name a"
                f" column instead, for example {{{names[0] if names else 'column'}}}"
                f" (columns: {shown}); write {{{{ }}}} for a literal brace"
            )
        if root in names:
            used.append(root)
            continue
        if _NAME.match(root.strip()) is None:
            # '{"city": "{city}"}': braces meant as text.
            raise ConfigError(
                f"prompt template {template!r} has a field {{{field}}} that names no column:"
                " braces that are part of the text must be doubled, as in"
                f" {escape_braces(template, names)!r} (columns: {shown})"
            )
        close = difflib.get_close_matches(root.strip(), names, n=1, cutoff=0.6)
        hint = f"; did you mean {{{close[0]}}}?" if close else ""
        raise ConfigError(
            f"prompt template {template!r} names column {root!r}, which the rows do not"
            f" have{hint} (columns: {shown}); write {{{{{root}}}}} if the braces are text"
        )
    return list(dict.fromkeys(used))


def _fields(template: str, depth: int = 0) -> Iterator[str]:
    """Field names of a format string, those nested in format specs included."""
    for _, field, spec, _ in string.Formatter().parse(template):
        if field is not None:
            yield field
        if spec and depth < 2:
            yield from _fields(spec, depth + 1)


def escape_braces(template: str, columns: Sequence[str]) -> str:
    """``template`` with every brace doubled except those around a column name: the
    template the user most likely meant when braces are part of the text (JSON, code)."""
    doubled = template.replace("{", "{{").replace("}", "}}")
    for name in sorted(columns, key=len, reverse=True):
        doubled = doubled.replace("{{" + name + "}}", "{" + name + "}")
    return doubled


def check_filled(inputs: pd.DataFrame, column: str, *, what: str) -> None:
    """Raise ConfigError when ``column`` holds None, NaN or empty text in some rows, naming
    those rows (index labels) and how to fill or drop them."""
    values = inputs[column]
    if isinstance(values, pd.DataFrame):
        raise ConfigError(f"the rows have more than one column named {column!r}: rename them")
    missing = values.isna().to_numpy()
    empty = values.map(lambda v: isinstance(v, str) and not v.strip()).to_numpy(dtype=bool)
    bad = missing | empty
    if not bad.any():
        return
    labels = list(inputs.index[bad])
    listed = ", ".join(repr(label) for label in labels[:_SHOWN_ROWS])
    if len(labels) > _SHOWN_ROWS:
        listed += f" and {len(labels) - _SHOWN_ROWS} more"
    kinds = " or ".join(
        kind for kind, found in (("None/NaN", missing.any()), ("empty text", empty.any())) if found
    )
    fixes = []
    if missing.any():
        fixes.append(f"fill them (rows[{column!r}] = rows[{column!r}].fillna(...))")
        fixes.append(f"drop them (rows = rows.dropna(subset=[{column!r}]))")
    if empty.any():
        fixes.append(f"drop the empty ones (rows = rows[rows[{column!r}].str.strip() != ''])")
    raise ConfigError(
        f"{what} column {column!r}, which is {kinds} in {len(labels)} of {len(values)} rows"
        f" (index {listed}); they would be sent as they are and paid for. Before the batch,"
        f" {' or '.join(fixes)}. Nothing was sent."
    )

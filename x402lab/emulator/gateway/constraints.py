"""JSON Schema constraints in the simulated structured answers: nullable fields, values kept
inside their bounds, and the fault that breaks them on purpose.

- ``nullable(schema)``: whether null is allowed (``"type": [..., "null"]``, an ``anyOf``
  branch ``{"type": "null"}``, ``None`` among the ``enum`` values) and the schema of the
  non-null value.
- ``bounded``/``fit_string``/``fit_list``: a derived value moved inside ``minimum``,
  ``maximum``, their exclusive forms, ``multipleOf``, ``maxLength``, ``minItems`` and
  ``maxItems``; strings under a ``pattern`` are found in the item's text (``pattern_match``).
- ``break_constraints`` (``Faults.constraint_violation_rate``): each entry of an answer, at
  that rate, gets one field of the right type outside its constraints: a number past a bound,
  a string that misses its pattern or length or format, a list longer than ``maxItems``, a
  string outside an enum. A client must catch it by validating against the whole schema.
"""

from __future__ import annotations

import math
import random
import re
from typing import Any

Schema = dict[str, Any]

#: ``outside``'s "this schema has no constraint to break" (None is a value a field may hold).
_NOTHING = object()
_FORMAT_PATTERNS = {
    "date": r"\b\d{4}-\d{2}-\d{2}\b",
    "email": r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b",
    "date-time": r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:Z|[+-]\d{2}:\d{2})\b",
}
_FORMAT_DEFAULTS = {
    "date": "2024-01-01",
    "email": "someone@example.com",
    "date-time": "2024-01-01T00:00:00Z",
}


def nullable(schema: Schema) -> tuple[bool, Schema]:
    """(whether ``schema`` allows null, the schema of a non-null value)."""
    branches = schema.get("anyOf")
    if isinstance(branches, list):
        others = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
        if len(others) == 1 and len(others) < len(branches) and isinstance(others[0], dict):
            rest = {k: v for k, v in schema.items() if k != "anyOf"}
            return True, {**rest, **others[0]}
    kind = schema.get("type")
    allows = isinstance(kind, list) and "null" in kind
    out = dict(schema)
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        out["type"] = kinds[0] if kinds else "null"
    if isinstance(schema.get("enum"), list) and None in schema["enum"]:
        allows = True
        out["enum"] = [v for v in schema["enum"] if v is not None]
    return allows, out


def bounded(value: float, schema: Schema, *, integer: bool) -> int | float:
    """``value`` moved inside the schema's numeric bounds (and onto its ``multipleOf``)."""
    step = 1.0 if integer else 0.01
    low, high = schema.get("minimum"), schema.get("maximum")
    xlow, xhigh = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(xlow, int | float):
        low = max(low, xlow + step) if isinstance(low, int | float) else xlow + step
    if isinstance(xhigh, int | float):
        high = min(high, xhigh - step) if isinstance(high, int | float) else xhigh - step
    multiple = schema.get("multipleOf")
    if isinstance(multiple, int | float) and multiple > 0:
        value = round(value / multiple) * multiple
    if isinstance(low, int | float) and value < low:
        value = math.ceil(low / multiple) * multiple if multiple else low
    if isinstance(high, int | float) and value > high:
        value = math.floor(high / multiple) * multiple if multiple else high
    if integer:
        return int(math.floor(value + 1e-9)) if value >= 0 else int(math.ceil(value - 1e-9))
    return round(value, 6 if multiple else 2)


def pattern_match(schema: Schema, text: str) -> str | None:
    """A part of ``text`` that matches the string schema's ``pattern`` or ``format`` whole
    (None when the text holds none, or the schema asks for neither)."""
    pattern = schema.get("pattern")
    if not isinstance(pattern, str):
        pattern = _FORMAT_PATTERNS.get(str(schema.get("format")))
    if pattern is None:
        return None
    bare = pattern.removeprefix("^").removesuffix("$")
    try:
        for match in re.finditer(bare, text):
            if match.group(0) and re.search(pattern, match.group(0)):
                return match.group(0)
    except re.error:
        return None
    return None


def asks_for_shape(schema: Schema) -> bool:
    """Whether a string schema asks for a shape (``pattern`` or a known ``format``)."""
    return isinstance(schema.get("pattern"), str) or schema.get("format") in _FORMAT_PATTERNS


def fit_string(value: str, schema: Schema) -> str:
    """``value`` cut to ``maxLength`` and padded to ``minLength``; a string under a ``format``
    it does not follow becomes that format's placeholder."""
    found = pattern_match(schema, value) if asks_for_shape(schema) else value
    if found is None:
        found = _FORMAT_DEFAULTS.get(str(schema.get("format")), value)
    most, least = schema.get("maxLength"), schema.get("minLength")
    if isinstance(most, int):
        found = found[:most]
    if isinstance(least, int) and len(found) < least:
        found = found + "." * (least - len(found))
    return found


def fit_list(values: list[Any], schema: Schema, fillers: list[str]) -> list[Any]:
    """``values`` without repeats, cut to ``maxItems`` and filled to ``minItems`` (from
    ``fillers`` first: an enum's own values)."""
    out = list(dict.fromkeys(values))
    most, least = schema.get("maxItems"), schema.get("minItems")
    if isinstance(most, int):
        out = out[:most]
    spare = [f for f in fillers if f not in out]
    while isinstance(least, int) and len(out) < least:
        out.append(spare.pop(0) if spare else f"item{len(out)}")
    return out


def break_constraints(value: Any, entry_schema: Schema, rng: random.Random, rate: float) -> Any:
    """``value`` (an answer whose entries follow ``entry_schema``; a pack's ``{"items":
    [...]}`` is broken entry by entry) with, at ``rate`` per entry, one field of the right
    type outside its constraints."""
    if isinstance(value, list):
        return [_break_entry(e, entry_schema, rng) if rng.random() < rate else e for e in value]
    return _break_entry(value, entry_schema, rng) if rng.random() < rate else value


def _break_entry(entry: Any, schema: Schema, rng: random.Random) -> Any:
    props = schema.get("properties") or {}
    if not isinstance(entry, dict):
        return entry
    options = []
    for name, sub in props.items():
        broken = outside(entry.get(name), sub) if isinstance(sub, dict) else _NOTHING
        if broken is not _NOTHING:
            options.append((name, broken))
    if not options:
        return entry
    name, broken = options[int(rng.random() * len(options))]
    return {**entry, name: broken}


def outside(value: Any, schema: Schema) -> Any:
    """A value of the schema's type that breaks one of its constraints (``_NOTHING`` when
    it has none to break)."""
    _, schema = nullable(schema)
    kind = schema.get("type")
    if isinstance(schema.get("enum"), list) and kind in ("string", None):
        return "something else"
    if kind in ("integer", "number"):
        one = 1 if kind == "integer" else 0.5
        for key, past in (
            ("maximum", one),
            ("exclusiveMaximum", 0),
            ("minimum", -one),
            ("exclusiveMinimum", 0),
        ):
            bound = schema.get(key)
            if isinstance(bound, int | float) and not isinstance(bound, bool):
                return bound + past
        return _NOTHING
    if kind == "string":
        return _outside_string(value, schema)
    if kind == "array":
        most, least = schema.get("maxItems"), schema.get("minItems")
        if isinstance(most, int):
            return [f"extra{i}" for i in range(most + 1)]
        if isinstance(least, int) and least > 0:
            return []
        if schema.get("uniqueItems") is True:
            return ["twice", "twice"]
        items = schema.get("items")
        if isinstance(items, dict) and isinstance(items.get("enum"), list):
            return ["something else"]
    return _NOTHING


def _outside_string(value: Any, schema: Schema) -> Any:
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        for candidate in (f"~{value if isinstance(value, str) else ''}~", "~", " "):
            try:
                if not re.search(pattern, candidate):
                    return candidate
            except re.error:
                return _NOTHING
    most, least = schema.get("maxLength"), schema.get("minLength")
    if isinstance(most, int):
        return "x" * (most + 1)
    if isinstance(least, int) and least > 0:
        return ""
    if schema.get("format") in _FORMAT_PATTERNS:
        return "not a " + str(schema["format"])
    return _NOTHING

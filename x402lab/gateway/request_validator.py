"""A published request schema as ``jsonschema_rs`` validates it, with what a Python client
needs around that validator.

- ``compile_schema``: the route's schema is rewritten once (``RequestSchema`` caches it per
  route) for what OpenAPI 3.0 documents still say: ``nullable: true`` becomes ``"null"``
  among the types, a boolean ``exclusiveMinimum``/``exclusiveMaximum`` the 3.1 number. A
  ``pattern`` the regex engine cannot compile is dropped: it refuses nothing. Local ``$ref``s
  point into the document's components. Nothing remote is fetched: a schema that needs
  another document, or that does not compile, gives no validator, and the gateway's own 4xx,
  before any payment, stays the check.
- ``json_value``: the caller's value as the JSON it stands for, which is all the validator
  takes: a tuple is an array, any Mapping an object, numpy scalars and str/int/float
  subclasses (enums) plain values. NaN, infinities and objects JSON cannot hold come back as
  problems of their own (the validator would read NaN as ``null``), never as a guess.

``jsonschema_rs`` imports in milliseconds, where ``jsonschema`` pulls format checkers that
take a second or more (rfc3987-syntax builds a grammar at import where Jupyter is installed).
Benchmark (``benchmarks/schema_validation.py``, 2 shared cores, load 1.6): one
``RequestSchema.check`` of a valid chat body, 12 µs of CPU, against 57 µs for ``jsonschema``
listing the errors of the same body (4.8x); importing the validator, 23 ms against 1.2 s.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from jsonschema_rs import Draft202012Validator, ReferencingError, ValidationError

Where = tuple[str | int, ...]
#: A value the validator cannot be given: where it is, the value, what it must be instead.
Unfit = tuple[Where, Any, str]

# Keywords whose values are data, not schemas: nothing in them is rewritten.
_DATA = frozenset({"enum", "const", "default", "examples", "example"})
# Keywords whose values map names (or patterns) to schemas.
_NAMED = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_BOUNDS = (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum"))


@dataclass(frozen=True)
class CompiledSchema:
    """The validator, and the schema document its errors' ``schema_path`` points into."""

    root: Mapping[str, Any]
    validator: Draft202012Validator

    def errors(self, value: Any) -> list[ValidationError]:
        """Every error of ``value`` (a ``json_value``), none when it is valid."""
        if self.validator.is_valid(value):  # the common case, and the cheap one
            return []
        return list(self.validator.iter_errors(value))


def compile_schema(schema: Mapping[str, Any], document: Mapping[str, Any]) -> CompiledSchema | None:
    """The validator of a route's ``schema``; None when it cannot be built offline."""
    # "#/components/..." references are pointers into the root: the root carries the
    # document's components beside the schema (a key that is no keyword checks nothing).
    root = _rewritten({"allOf": [schema], "components": document.get("components", {})})
    try:
        return CompiledSchema(root, Draft202012Validator(root, offline=True))
    except (ValueError, ReferencingError):  # jsonschema_rs.ValidationError is a ValueError
        return None


def _rewritten(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_rewritten(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DATA:
            out[key] = value
        elif key in _NAMED and isinstance(value, Mapping):
            out[key] = {name: _rewritten(sub) for name, sub in value.items()}
        elif key == "pattern" and isinstance(value, str) and not _compiles(value):
            continue
        else:
            out[key] = _rewritten(value)
    kinds = out.get("type")
    if out.get("nullable") is True and kinds is not None:
        listed = kinds if isinstance(kinds, list) else [kinds]
        out["type"] = listed if "null" in listed else [*listed, "null"]
    for exclusive, inclusive in _BOUNDS:  # OpenAPI 3.0: a flag on minimum/maximum
        flag = out.get(exclusive)
        if isinstance(flag, bool):
            del out[exclusive]
            if flag and inclusive in out:
                out[exclusive] = out.pop(inclusive)
    return out


@cache
def _compiles(pattern: str) -> bool:
    try:
        Draft202012Validator({"pattern": pattern})
    except ValueError:
        return False
    return True


def json_value(value: Any, where: Where = ()) -> tuple[Any, list[Unfit]]:
    """``value`` as the JSON it stands for, and the parts of it JSON cannot hold (each
    replaced by None in the value, so the rest is still checked)."""
    unfit: list[Unfit] = []
    return _json(value, where, unfit), unfit


def _json(value: Any, where: Where, unfit: list[Unfit]) -> Any:
    if value is None or type(value) in (str, int, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)  # a str subclass (a StrEnum): its text, as json writes it
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isfinite(number):
            return number
        unfit.append((where, value, "a finite number (NaN and infinities are not JSON)"))
        return None
    if isinstance(value, Mapping):
        named = {_key(k): v for k, v in value.items()}
        return {k: _json(v, (*where, k), unfit) for k, v in named.items()}
    if isinstance(value, list | tuple):
        return [_json(v, (*where, i), unfit) for i, v in enumerate(value)]
    kind = f"{type(value).__module__}.{type(value).__qualname__}".removeprefix("builtins.")
    unfit.append((where, value, f"a JSON value (str, number, bool, None, list, dict), not {kind}"))
    return None


def _key(key: Any) -> str:
    if isinstance(key, str):
        return str.__str__(key)
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)  # as json writes a key: 1 -> "1", True -> "true"
    return str(key)


def at_pointer(document: Any, pointer: Any) -> Any:
    """The part of ``document`` at ``pointer`` (keys and indexes); None when absent."""
    for part in pointer:
        if isinstance(document, Mapping):
            document = document.get(str(part))
        elif isinstance(document, list | tuple) and isinstance(part, int) and part < len(document):
            document = document[part]
        else:
            return None
    return document

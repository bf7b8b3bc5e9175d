"""Typed answers of ``batch_chat``: ``labels=`` and ``schema=`` become a JSON Schema the
gateway's ``response_format`` carries, typed columns cast through a declared Arrow schema, and
a strict check of every answer (an answer that does not validate is ``invalid``, never
coerced).

``OutputSpec`` is built once per batch, before anything is signed: a malformed ``labels`` or
``schema`` is a TypeError or ConfigError naming the problem. The supported field types are
those an analyst's column holds: ``str``, ``int``, ``float``, ``bool``, ``list[str]`` and an
enum (a list of allowed strings); given as a mapping of name to type, as a JSON Schema object,
or as a pydantic model class.

Every typed request is a *pack* (``batch.packing``): one user message holding a JSON array
of items, each with an ``id``, and a response schema asking for ``{"items": [{"id": ...,
<fields>}]}``. A single row is a pack of one, so a row's request is the same whatever pack
size a later run uses, and its answer is stored under its own key.
"""

from __future__ import annotations

import json
import math
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from x402lab.errors import ConfigError

#: The one property of a pack's answer: the array of per-item entries.
ITEMS = "items"

# Tokens an answer's field may take at most, by type (about four characters a token): they
# bound ``max_tokens`` so the gateway's price estimate (which charges for max_tokens) is tight.
_STRING_TOKENS = 64
_LIST_TOKENS = 48
_SCALAR_TOKENS = 6
_ENTRY_OVERHEAD_TOKENS = 8  # braces, the id and separators of one entry


@dataclass(frozen=True)
class Field:
    """One typed column: its name, kind (str, int, float, bool, enum, list) and enum values."""

    name: str
    kind: str
    values: tuple[str, ...] = ()

    def json_schema(self) -> dict[str, Any]:
        if self.kind == "enum":
            return {"type": "string", "enum": list(self.values)}
        if self.kind == "list":
            items: dict[str, Any] = {"type": "string"}
            if self.values:
                items["enum"] = list(self.values)
            return {"type": "array", "items": items}
        return {"type": _JSON_TYPES[self.kind]}

    def arrow_type(self) -> pa.DataType:
        if self.kind == "list":
            return pa.list_(pa.string())
        return _ARROW_TYPES[self.kind]

    def max_tokens(self) -> int:
        name = math.ceil((len(self.name) + 4) / 4)
        if self.kind == "enum":
            return name + math.ceil(max(len(v) for v in self.values) / 4) + 2
        if self.kind == "list":
            return name + _LIST_TOKENS
        if self.kind == "str":
            return name + _STRING_TOKENS
        return name + _SCALAR_TOKENS

    def check(self, value: Any) -> str | None:
        """Why ``value`` is not a valid answer for this field, or None."""
        if self.kind == "enum":
            if not isinstance(value, str) or value not in self.values:
                return f"{self.name}={value!r} is not one of {list(self.values)}"
            return None
        if self.kind == "list":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                return f"{self.name}={value!r} is not a list of strings"
            if self.values and any(v not in self.values for v in value):
                return f"{self.name}={value!r} holds a value not in {list(self.values)}"
            return None
        ok = {
            "str": isinstance(value, str),
            "int": isinstance(value, int) and not isinstance(value, bool),
            "float": isinstance(value, int | float) and not isinstance(value, bool),
            "bool": isinstance(value, bool),
        }[self.kind]
        return None if ok else f"{self.name}={value!r} is not {_JSON_TYPES[self.kind]}"


_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_ARROW_TYPES = {
    "str": pa.string(),
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "enum": pa.string(),
}
_PYTHON_TYPES = {str: "str", int: "int", float: "float", bool: "bool"}
_SUPPORTED = "str, int, float, bool, list[str] or a list of allowed strings (an enum)"


@dataclass(frozen=True)
class OutputSpec:
    """The typed columns of a batch and the JSON Schema its answers must follow."""

    fields: tuple[Field, ...]

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def entry_schema(self) -> dict[str, Any]:
        """The JSON Schema of one item's entry in a pack's answer (``id`` plus the fields)."""
        properties = {"id": {"type": "string"}}
        properties.update({f.name: f.json_schema() for f in self.fields})
        return {
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        }

    def pack_schema(self) -> dict[str, Any]:
        """The JSON Schema of a pack's whole answer."""
        return {
            "type": "object",
            "properties": {ITEMS: {"type": "array", "items": self.entry_schema()}},
            "required": [ITEMS],
            "additionalProperties": False,
        }

    def response_format(self) -> dict[str, Any]:
        """``response_format`` as the upstream API defines it (strict JSON Schema)."""
        return {
            "type": "json_schema",
            "json_schema": {"name": "rows", "strict": True, "schema": self.pack_schema()},
        }

    def tokens_per_row(self) -> int:
        """An upper bound of one entry's tokens in a pack's answer."""
        return _ENTRY_OVERHEAD_TOKENS + sum(f.max_tokens() for f in self.fields)

    def check(self, entry: Any) -> str | None:
        """Why ``entry`` (one item's answer, its ``id`` removed) is not valid, or None."""
        if not isinstance(entry, dict):
            return f"the answer is {type(entry).__name__}, not an object"
        missing = [n for n in self.names if n not in entry]
        if missing:
            return f"missing field(s): {', '.join(missing)}"
        extra = [n for n in entry if n not in self.names]
        if extra:
            return f"field(s) not in the schema: {', '.join(map(str, extra))}"
        for field in self.fields:
            problem = field.check(entry[field.name])
            if problem is not None:
                return problem
        return None

    def arrow_schema(self) -> pa.Schema:
        """The declared Arrow schema of the typed columns (all nullable: a row that has no
        valid answer has nulls there)."""
        return pa.schema([pa.field(f.name, f.arrow_type()) for f in self.fields])

    def table(self, answers: Sequence[str | None], valid: Sequence[bool]) -> pa.Table:
        """The typed columns of rows whose raw answers are ``answers`` (JSON text of each
        row's entry); rows not ``valid`` get nulls."""
        values: dict[str, list[Any]] = {name: [] for name in self.names}
        for raw, ok in zip(answers, valid, strict=True):
            entry = json.loads(raw) if ok and raw is not None else None
            for name in self.names:
                values[name].append(entry[name] if entry is not None else None)
        schema = self.arrow_schema()
        arrays = [pa.array(values[f.name], type=f.type) for f in schema]
        return pa.table(arrays, schema=schema)


def output_spec(labels: Any = None, schema: Any = None) -> OutputSpec | None:
    """The OutputSpec of ``labels=`` or ``schema=`` (None when neither is given).

    Raises TypeError when both are given or a type is not supported, ConfigError for empty or
    duplicated labels, a non-string enum value or an empty schema.
    """
    if labels is not None and schema is not None:
        raise TypeError(
            "give labels= or schema=, not both (labels=[...] is schema={'label': [...]})"
        )
    if labels is not None:
        return OutputSpec((Field("label", "enum", _enum_values("labels", labels)),))
    if schema is None:
        return None
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return _from_json_schema(schema.model_json_schema(), f"pydantic model {schema.__name__}")
    if isinstance(schema, Mapping) and schema.get("type") == "object" and "properties" in schema:
        return _from_json_schema(schema, "the JSON Schema")
    if isinstance(schema, Mapping):
        if not schema:
            raise ConfigError("schema is empty: give at least one field, e.g. {'topic': str}")
        return OutputSpec(tuple(_field_of(name, kind) for name, kind in schema.items()))
    raise TypeError(
        "schema must be a mapping of column name to type ({'topic': str, 'rating': int}),"
        " a JSON Schema object ({'type': 'object', 'properties': ...}) or a pydantic model"
        f" class, not {type(schema).__name__}"
    )


def _enum_values(what: str, values: Any) -> tuple[str, ...]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise TypeError(f"{what} must be a list of strings, e.g. ['positive', 'negative']")
    if not values:
        raise ConfigError(f"{what} is empty: give the allowed values, e.g. ['yes', 'no']")
    bad = [v for v in values if not isinstance(v, str) or not v]
    if bad:
        raise ConfigError(f"{what} must be non-empty strings; {bad[0]!r} is not")
    seen: set[str] = set()
    dupes = [v for v in values if v in seen or seen.add(v)]  # type: ignore[func-returns-value]
    if dupes:
        raise ConfigError(f"{what} lists {dupes[0]!r} twice; each value once")
    return tuple(values)


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.isidentifier():
        raise ConfigError(
            f"schema field name {name!r} must be an identifier (letters, digits, _), as it"
            " becomes a column"
        )
    if name == "id":
        raise ConfigError("schema field 'id' is reserved (it names each row in a pack)")
    return name


def _field_of(name: Any, kind: Any) -> Field:
    name = _check_name(name)
    if isinstance(kind, type) and kind in _PYTHON_TYPES:
        return Field(name, _PYTHON_TYPES[kind])
    if isinstance(kind, list | tuple):
        return Field(name, "enum", _enum_values(f"schema[{name!r}]", list(kind)))
    if typing.get_origin(kind) is list and typing.get_args(kind) == (str,):
        return Field(name, "list")
    if isinstance(kind, types.GenericAlias | type):
        raise TypeError(f"schema[{name!r}] = {kind!r} is not supported; use {_SUPPORTED}")
    raise TypeError(f"schema[{name!r}] = {kind!r} is not a type; use {_SUPPORTED}")


def _from_json_schema(schema: Mapping[str, Any], where: str) -> OutputSpec:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        raise ConfigError(f"{where} has no properties: give at least one field")
    defs = schema.get("$defs") or schema.get("definitions") or {}
    fields = []
    for name, prop in properties.items():
        fields.append(_field_of_json(_check_name(name), _resolve(prop, defs), defs, where))
    return OutputSpec(tuple(fields))


def _resolve(prop: Any, defs: Mapping[str, Any]) -> Any:
    if isinstance(prop, Mapping) and isinstance(prop.get("$ref"), str):
        return defs.get(prop["$ref"].rsplit("/", 1)[-1], prop)
    if (
        isinstance(prop, Mapping)
        and isinstance(prop.get("allOf"), list)
        and len(prop["allOf"]) == 1
    ):
        return _resolve(prop["allOf"][0], defs)
    return prop


def _field_of_json(name: str, prop: Any, defs: Mapping[str, Any], where: str) -> Field:
    if not isinstance(prop, Mapping):
        raise TypeError(f"{where}: property {name!r} is not a schema object")
    if "enum" in prop:
        return Field(name, "enum", _enum_values(f"{where} property {name!r} enum", prop["enum"]))
    kind = prop.get("type")
    if kind == "array":
        items = _resolve(prop.get("items") or {}, defs)
        if isinstance(items, Mapping) and "enum" in items:
            return Field(name, "list", _enum_values(f"{where} {name!r} items", items["enum"]))
        if isinstance(items, Mapping) and items.get("type") == "string":
            return Field(name, "list")
    by_json = {v: k for k, v in _JSON_TYPES.items()}
    if isinstance(kind, str) and kind in by_json:
        return Field(name, by_json[kind])
    raise TypeError(
        f"{where}: property {name!r} ({dict(prop)!r}) is not supported; use string, integer,"
        " number, boolean, an enum of strings or an array of strings"
    )

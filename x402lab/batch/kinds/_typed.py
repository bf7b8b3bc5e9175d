"""Typed answers of ``batch_chat``: their schema, their columns and the check of each answer.

``labels=`` and ``schema=`` of ``batch_chat`` become a JSON Schema the
gateway's ``response_format`` carries, typed columns cast through a declared Arrow schema, and
a check of every answer against the whole schema the user gave (``answer_schema``: by
``jsonschema_rs``, or by a pydantic model's own validation). An answer that does not validate is
``invalid``, never coerced.

``OutputSpec`` is built once per batch, before anything is signed: a malformed ``labels`` or
``schema`` is a TypeError or ConfigError naming the problem. The supported field types are
those an analyst's column holds: ``str``, ``int``, ``float``, ``bool``, ``list[str]`` and an
enum (a list of allowed strings), each optionally nullable (``int | None``, a JSON Schema
``"type": ["integer", "null"]`` or ``anyOf`` with ``{"type": "null"}``, a pydantic
``Optional``); given as a mapping of name to type, as a JSON Schema object, or as a pydantic
model class. A nullable field is null when the item does not say (the task text asks for
that): extraction without nulls makes values up.

Every typed request is a *pack* (``_typed_codec``): one user message holding a JSON array
of items, each with an ``id``, and a response schema asking for ``{"items": [{"id": ...,
<fields>}]}``. A single row is a pack of one, so a row's request is the same whatever pack
size a later run uses, and its answer is stored under its own key.
"""

from __future__ import annotations

import functools
import json
import math
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from x402lab.batch.kinds import _answer_schema as answer_schema
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
    """One typed column: its name, kind (str, int, float, bool, enum, list), enum values, and
    whether the answer may be null (the item does not say)."""

    name: str
    kind: str
    values: tuple[str, ...] = ()
    nullable: bool = False

    def json_schema(self) -> dict[str, Any]:
        """The field's JSON Schema, for a schema given as a mapping of Python types."""
        if self.kind == "enum":
            schema: dict[str, Any] = {"type": "string", "enum": list(self.values)}
        elif self.kind == "list":
            items: dict[str, Any] = {"type": "string"}
            if self.values:
                items["enum"] = list(self.values)
            schema = {"type": "array", "items": items}
        else:
            schema = {"type": _JSON_TYPES[self.kind]}
        if self.nullable:
            schema["type"] = [schema["type"], "null"]
            if "enum" in schema:
                schema["enum"] = [*schema["enum"], None]
        return schema

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

    def column_value(self, value: Any) -> Any:
        """A valid answer's value as its column holds it (JSON Schema calls 3.0 an integer)."""
        if self.kind == "int" and isinstance(value, float) and value.is_integer():
            return int(value)
        return value


_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_ARROW_TYPES = {
    "str": pa.string(),
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "enum": pa.string(),
}
_PYTHON_TYPES = {str: "str", int: "int", float: "float", bool: "bool"}
_SUPPORTED = (
    "str, int, float, bool, list[str] or a list of allowed strings (an enum), each optionally"
    " with None (int | None, Optional[float], ['yes', 'no', None])"
)
_NULL_RULE = (
    " A field whose schema allows null is null when the item does not give its value; never"
    " guess one."
)


@dataclass(frozen=True)
class OutputSpec:
    """The typed columns of a batch and the JSON Schema its answers must follow.

    ``properties`` holds each field's whole JSON Schema (every keyword the user gave, local
    ``$ref`` inlined): answers are checked against all of it (``answer_schema``), while the
    request carries only what a strict ``response_format`` can and says the rest in words.
    ``model``: the pydantic model whose own validation checks answers instead.
    """

    fields: tuple[Field, ...]
    properties: Mapping[str, Mapping[str, Any]]
    model: Any = None

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def answer_schema(self) -> dict[str, Any]:
        """The JSON Schema one item's answer (its ``id`` removed) must validate against."""
        return {
            "type": "object",
            "properties": {name: dict(prop) for name, prop in self.properties.items()},
            "required": self.names,
            "additionalProperties": False,
        }

    @functools.cached_property
    def _wire(self) -> tuple[dict[str, Any], list[str]]:
        wire, rules = answer_schema.split_wire(self.answer_schema(), "")
        rules = [rule.lstrip(".") for rule in rules]
        return wire, rules

    def entry_schema(self) -> dict[str, Any]:
        """The wire JSON Schema of one item's entry in a pack's answer (``id`` plus the
        fields, as much of each as a strict ``response_format`` carries)."""
        wire, _ = self._wire
        return {
            **wire,
            "properties": {"id": {"type": "string"}, **wire["properties"]},
            "required": ["id", *self.names],
        }

    def pack_schema(self) -> dict[str, Any]:
        """The JSON Schema of a pack's whole answer."""
        return {
            "type": "object",
            "properties": {ITEMS: {"type": "array", "items": self.entry_schema()}},
            "required": [ITEMS],
            "additionalProperties": False,
        }

    def response_format(self) -> Mapping[str, Any]:
        """``response_format`` as the upstream API defines it (strict JSON Schema): one
        object per batch, held by every request body of it (a body is sent, never changed)."""
        return self._response_format

    @functools.cached_property
    def _response_format(self) -> Mapping[str, Any]:
        return {
            "type": "json_schema",
            "json_schema": {"name": "rows", "strict": True, "schema": self.pack_schema()},
        }

    def instructions(self) -> str:
        """What the task text says besides the wire schema: answer null where a nullable
        field has no value, and the rules the wire schema could not carry ("" if none)."""
        return self._instructions

    @functools.cached_property
    def _instructions(self) -> str:
        text = _NULL_RULE if any(f.nullable for f in self.fields) else ""
        _, rules = self._wire
        if rules:
            text += " Each entry must also follow these rules: " + "; ".join(rules) + "."
        return text

    def tokens_per_row(self) -> int:
        """An upper bound of one entry's tokens in a pack's answer."""
        return _ENTRY_OVERHEAD_TOKENS + sum(f.max_tokens() for f in self.fields)

    @functools.cached_property
    def _validator(self) -> Any:
        return answer_schema.validator(self.answer_schema())

    def check(self, entry: Any) -> str | None:
        """Why ``entry`` (one item's answer, its ``id`` removed) is not valid, or None."""
        return self.read(entry, json.dumps(entry, ensure_ascii=False))[1]

    def read(self, entry: Any, raw: str) -> tuple[tuple[Any, ...] | None, str | None]:
        """One item's answer checked once: its column values (in ``fields`` order, as the
        columns hold them) and None when it is valid, else None and why not (the message
        of ``jsonschema_rs``, or of the pydantic model's own validation). ``entry`` is the
        answer (its ``id`` removed; None: parsed from ``raw`` when needed) and ``raw`` its
        JSON text, which a pydantic model validates; its values are then the model's."""
        if self.model is not None:
            found, problem = answer_schema.model_read(self.model, raw)
        else:
            found = json.loads(raw) if entry is None else entry
            problem = answer_schema.schema_problem(self._validator, found)
        if problem is not None or found is None:
            return None, problem
        return tuple(f.column_value(found.get(f.name)) for f in self.fields), None

    def arrow_schema(self) -> pa.Schema:
        """The declared Arrow schema of the typed columns (all nullable: a row that has no
        valid answer, or a field answered null, has nulls there)."""
        return pa.schema([pa.field(f.name, f.arrow_type()) for f in self.fields])

    def table(self, values: Sequence[tuple[Any, ...] | None]) -> pa.Table:
        """The typed columns of rows whose column values are ``values`` (``read``'s: None
        for a row without a valid answer, whose columns are null)."""
        nulls = (None,) * len(self.fields)
        rows = [nulls if row is None else row for row in values]
        schema = self.arrow_schema()
        arrays = [pa.array([row[i] for row in rows], type=f.type) for i, f in enumerate(schema)]
        return pa.table(arrays, schema=schema)


def output_spec(labels: Any = None, schema: Any = None) -> OutputSpec | None:
    """The OutputSpec of ``labels=`` or ``schema=`` (None when neither is given).

    Raises TypeError when both are given or a type is not supported, ConfigError for empty or
    duplicated labels, a non-string enum value, an empty schema or an invalid JSON Schema.
    """
    if labels is not None and schema is not None:
        raise TypeError(
            "give labels= or schema=, not both (labels=[...] is schema={'label': [...]})"
        )
    if labels is not None:
        return _from_fields([Field("label", "enum", _enum_values("labels", labels))])
    if schema is None:
        return None
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        where = f"pydantic model {schema.__name__}"
        return replace(_from_json_schema(schema.model_json_schema(), where), model=schema)
    if isinstance(schema, Mapping) and schema.get("type") == "object" and "properties" in schema:
        return _from_json_schema(schema, "the JSON Schema")
    if isinstance(schema, Mapping):
        if not schema:
            raise ConfigError("schema is empty: give at least one field, e.g. {'topic': str}")
        return _from_fields([_field_of(name, kind) for name, kind in schema.items()])
    raise TypeError(
        "schema must be a mapping of column name to type ({'topic': str, 'year': int | None}),"
        " a JSON Schema object ({'type': 'object', 'properties': ...}) or a pydantic model"
        f" class, not {type(schema).__name__}"
    )


def _from_fields(fields: list[Field]) -> OutputSpec:
    return OutputSpec(tuple(fields), {f.name: f.json_schema() for f in fields})


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
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        others = [a for a in typing.get_args(kind) if a is not type(None)]
        if len(others) == 1 and len(others) < len(typing.get_args(kind)):
            return replace(_field_of(name, others[0]), nullable=True)
        raise TypeError(
            f"schema[{name!r}] = {kind!r} is not supported: a column holds one type, or"
            f" None; use {_SUPPORTED}"
        )
    if isinstance(kind, type) and kind in _PYTHON_TYPES:
        return Field(name, _PYTHON_TYPES[kind])
    if isinstance(kind, list | tuple):
        values = [v for v in kind if v is not None]
        nullable = len(values) < len(kind)
        return Field(name, "enum", _enum_values(f"schema[{name!r}]", values), nullable)
    if typing.get_origin(kind) is list and typing.get_args(kind) == (str,):
        return Field(name, "list")
    if isinstance(kind, types.GenericAlias | type):
        raise TypeError(f"schema[{name!r}] = {kind!r} is not supported; use {_SUPPORTED}")
    raise TypeError(f"schema[{name!r}] = {kind!r} is not a type; use {_SUPPORTED}")


def _from_json_schema(schema: Mapping[str, Any], where: str) -> OutputSpec:
    answer_schema.check_schema(schema, where)
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        raise ConfigError(f"{where} has no properties: give at least one field")
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    fields, props = [], {}
    for name, prop in properties.items():
        whole = answer_schema.inline_refs(prop, defs, f"{where} property {name!r}")
        fields.append(_field_of_json(_check_name(name), whole, where))
        props[name] = whole
    return OutputSpec(tuple(fields), props)


def _field_of_json(name: str, prop: Any, where: str) -> Field:
    """The column of one property: its kind from ``type`` (or ``enum``/``const``), nullable
    when ``null`` is one of its types, of its ``anyOf`` branches or of its ``enum`` values."""
    if not isinstance(prop, Mapping):
        raise TypeError(f"{where}: property {name!r} is not a schema object")
    branches = prop.get("anyOf")
    if isinstance(branches, list):
        others = [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]
        if len(others) == 1 and len(others) < len(branches):
            return replace(_field_of_json(name, others[0], where), nullable=True)
    kind = prop.get("type")
    nullable = False
    if isinstance(kind, list):
        nullable = "null" in kind
        rest = [k for k in kind if k != "null"]
        kind = rest[0] if len(rest) == 1 else None
    if "enum" in prop or isinstance(prop.get("const"), str):
        given = prop["enum"] if "enum" in prop else [prop["const"]]
        values = [v for v in given if v is not None] if isinstance(given, list) else given
        nullable = nullable or (isinstance(given, list) and len(values) < len(given))
        what = f"{where} property {name!r} enum"
        return Field(name, "enum", _enum_values(what, values), nullable)
    if kind == "array":
        items = prop.get("items") or {}
        if isinstance(items, Mapping) and "enum" in items:
            values = _enum_values(f"{where} {name!r} items", items["enum"])
            return Field(name, "list", values, nullable)
        if isinstance(items, Mapping) and items.get("type") == "string":
            return Field(name, "list", (), nullable)
    by_json = {v: k for k, v in _JSON_TYPES.items()}
    if isinstance(kind, str) and kind in by_json:
        return Field(name, by_json[kind], (), nullable)
    raise TypeError(
        f"{where}: property {name!r} ({dict(prop)!r}) is not supported; use string, integer,"
        " number, boolean, an enum of strings or an array of strings, each optionally with"
        ' null ("type": ["integer", "null"], or anyOf with {"type": "null"})'
    )

"""The JSON Schema side of typed answers: what the gateway is sent, what the task text must
say besides, and the check of every answer against the whole schema the user gave.

A strict ``response_format`` carries a subset of JSON Schema (the one OpenAI-compatible
strict structured outputs accept: types, ``enum``/``const``, ``anyOf``, object and array
structure, ``pattern``, ``format``, numeric bounds and ``multipleOf``,
``minItems``/``maxItems``). What
it cannot carry (``minLength``, ``uniqueItems``, ``oneOf``, ...) is left out of the wire
schema and said in words in the task text (``split_wire``); every answer is still checked
against all of it here, by ``jsonschema`` (Draft 2020-12, ``format`` checked where
``jsonschema`` can), or by a pydantic model's own validation (its validators and
constraints), in strict mode: an answer is valid or not, never coerced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from x402lab.errors import ConfigError

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

# jsonschema is imported where a schema is checked, not with this module: with the optional
# format checkers installed (Jupyter brings rfc3987-syntax) its import builds grammars for a
# second or more, which `import x402lab` and every batch that is not typed should not pay.

#: Keywords a strict ``response_format`` carries; the rest is said in the task text.
WIRE_KEYWORDS = frozenset(
    {
        "type",
        "enum",
        "const",
        "anyOf",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "description",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)
#: Annotations that constrain nothing: dropped from the wire schema without a word.
ANNOTATIONS = frozenset(
    {
        "title",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$schema",
        "$id",
        "$defs",
        "definitions",
    }
)
_MAX_DEPTH = 32


def check_schema(schema: Mapping[str, Any], where: str) -> None:
    """Raises ConfigError when ``schema`` is not a valid Draft 2020-12 JSON Schema."""
    from jsonschema import Draft202012Validator, SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        at = "/".join(str(p) for p in exc.absolute_path) or "the root"
        raise ConfigError(f"{where} is not a valid JSON Schema at {at}: {exc.message}") from exc


def inline_refs(schema: Any, defs: Mapping[str, Any], where: str, depth: int = 0) -> Any:
    """``schema`` with every local ``$ref`` (``#/$defs/X``) replaced by its definition, so a
    field's schema stands on its own inside a pack's schema. Raises ConfigError for a
    recursive or unknown reference (a column cannot hold a recursive value)."""
    if depth > _MAX_DEPTH:
        raise ConfigError(f"{where} nests too deep (a recursive $ref?): columns hold flat values")
    if isinstance(schema, list):
        return [inline_refs(s, defs, where, depth + 1) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if not ref.startswith("#/") or name not in defs:
            raise ConfigError(f"{where}: $ref {ref!r} names no definition of the schema's $defs")
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return inline_refs({**defs[name], **rest}, defs, where, depth + 1)
    return {k: inline_refs(v, defs, where, depth + 1) for k, v in schema.items()}


def split_wire(schema: Mapping[str, Any], path: str) -> tuple[dict[str, Any], list[str]]:
    """(the part of ``schema`` a strict ``response_format`` carries, the rules left out, each
    as ``"path: keyword value"`` for the task text)."""
    wire: dict[str, Any] = {}
    rules: list[str] = []
    for key, value in schema.items():
        if key in ANNOTATIONS:
            continue
        if key not in WIRE_KEYWORDS:
            rules.append(f"{path}: {key} {json.dumps(value, ensure_ascii=False)}")
            continue
        if key == "properties" and isinstance(value, Mapping):
            wire[key] = {}
            for name, sub in value.items():
                wire[key][name], more = _split_sub(sub, f"{path}.{name}")
                rules += more
        elif key == "items" and isinstance(value, Mapping):
            wire[key], more = _split_sub(value, f"{path}[]")
            rules += more
        elif key == "anyOf" and isinstance(value, list):
            parts = [_split_sub(sub, path) for sub in value]
            wire[key] = [part for part, _ in parts]
            rules += [rule for _, more in parts for rule in more]
        else:
            wire[key] = value
    return wire, rules


def _split_sub(schema: Any, path: str) -> tuple[Any, list[str]]:
    return split_wire(schema, path) if isinstance(schema, Mapping) else (schema, [])


def validator(schema: Mapping[str, Any]) -> Draft202012Validator:
    """A Draft 2020-12 validator of ``schema`` that checks ``format`` where it can."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def schema_problem(check: Draft202012Validator, entry: Any) -> str | None:
    """The validator's message for the error that matters most (``best_match``), led by the
    field it is about; None when ``entry`` is valid."""
    from jsonschema.exceptions import best_match

    error = best_match(check.iter_errors(entry))
    if error is None:
        return None
    at = ".".join(str(p) for p in error.absolute_path)
    return f"{at}: {error.message}" if at else error.message


def model_problem(model: Any, raw: str) -> str | None:
    """pydantic's own messages (``field: message``, joined by ``; ``) when the JSON text
    ``raw`` does not validate as ``model`` in strict mode; None when it does."""
    import pydantic

    try:
        model.model_validate_json(raw, strict=True)
    except pydantic.ValidationError as exc:
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" if e["loc"] else e["msg"]
            for e in exc.errors(include_url=False)
        )
    return None


def model_values(model: Any, raw: str) -> dict[str, Any]:
    """The field values of a valid answer as ``model`` reads them (JSON types)."""
    return dict(model.model_validate_json(raw, strict=True).model_dump(mode="json"))

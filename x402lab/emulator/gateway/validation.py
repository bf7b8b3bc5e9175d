"""Request bodies checked against the schemas /openapi.json publishes, before any handler.

The gateway accepts a JSON body only if it is valid against the route's published schema, so
the description and the server cannot drift apart: a body the schema calls invalid gets a 400
``invalid_request`` naming the field, never a 402 or a 200. The one exception is the model
field: its errors are left to the handler, whose 400 (``model_required``,
``model_not_found``, ``model_wrong_type``, ``model_unpriced``) carries a hint naming close ids.

``violations(value, schema)`` implements the JSON Schema 2020-12 keywords the gateway's
schemas use (type, enum, const, properties, required, items, minItems, maxItems, minLength,
maxLength, minimum, maximum, exclusiveMinimum, exclusiveMaximum, pattern, anyOf); ``format``
is an annotation, as the standard says. tests/emulator checks it against ``jsonschema``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from starlette.requests import Request

from x402lab.emulator.gateway.errors import bad_request
from x402lab.emulator.gateway.fields import is_multipart, read_body

Schema = dict[str, Any]
MODEL_FIELDS = frozenset({"model", "modelId"})
_MAX_VIOLATIONS = 20


@dataclass(frozen=True)
class Violation:
    """Where (``path``) a value breaks which ``keyword``; ``names`` for required/anyOf."""

    path: tuple[str | int, ...]
    keyword: str
    message: str
    names: frozenset[str] = frozenset()

    @property
    def where(self) -> str:
        text = ""
        for part in self.path:
            text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
        return text or "body"


def _is_type(value: Any, name: str) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "string":
        return isinstance(value, str)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if name == "integer":
        return isinstance(value, int) or value.is_integer()
    return name == "number"


def _equal(a: Any, b: Any) -> bool:
    # JSON equality: 1 == 1.0, but true is not 1 and "1" is not 1.
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


def violations(value: Any, schema: Schema, path: tuple[str | int, ...] = ()) -> list[Violation]:
    """Every way ``value`` breaks ``schema`` (at most a few dozen), outermost first."""
    found: list[Violation] = []

    def add(keyword: str, message: str, names: frozenset[str] = frozenset()) -> None:
        found.append(Violation(path, keyword, message, names))

    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(_is_type(value, t) for t in names):
            add("type", f"must be {' or '.join(names)}, got {_short(value)}")
            return found  # other keywords would only repeat the type error
    if "const" in schema and not _equal(value, schema["const"]):
        add("const", f"must be {_short(schema['const'])}")
    if "enum" in schema and not any(_equal(value, option) for option in schema["enum"]):
        options = ", ".join(str(option) for option in schema["enum"][:12])
        more = ", ..." if len(schema["enum"]) > 12 else ""
        add("enum", f"{_short(value)} is not one of {options}{more}")
    if "anyOf" in schema:
        branches = schema["anyOf"]
        if not any(not violations(value, branch, path) for branch in branches):
            required = frozenset(name for branch in branches for name in branch.get("required", []))
            add("anyOf", "matches none of the allowed forms", required)
    if isinstance(value, str):
        length = len(value)
        if "minLength" in schema and length < schema["minLength"]:
            add("minLength", f"must be at least {schema['minLength']} characters")
        if "maxLength" in schema and length > schema["maxLength"]:
            add("maxLength", f"must be at most {schema['maxLength']} characters")
        if "pattern" in schema and not _regex(schema["pattern"]).search(value):
            add("pattern", f"{_short(value)} does not match {schema['pattern']}")
    elif _is_number(value):
        if "minimum" in schema and value < schema["minimum"]:
            add("minimum", f"must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            add("maximum", f"must be <= {schema['maximum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            add("exclusiveMinimum", f"must be > {schema['exclusiveMinimum']}")
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            add("exclusiveMaximum", f"must be < {schema['exclusiveMaximum']}")
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            add("minItems", f"must hold at least {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            add("maxItems", f"must hold at most {schema['maxItems']} items")
        if "items" in schema:
            for index, item in enumerate(value):
                found += violations(item, schema["items"], (*path, index))
                if len(found) >= _MAX_VIOLATIONS:
                    break
    elif isinstance(value, dict):
        missing = [name for name in schema.get("required", []) if name not in value]
        if missing:
            add("required", f"needs {', '.join(missing)}", frozenset(missing))
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                found += violations(value[name], sub, (*path, name))
                if len(found) >= _MAX_VIOLATIONS:
                    break
    return found[:_MAX_VIOLATIONS]


def _about_the_model(violation: Violation) -> bool:
    if violation.path:
        return violation.path[0] == "model"
    return (
        violation.keyword in ("required", "anyOf")
        and bool(violation.names)
        and (violation.names <= MODEL_FIELDS)
    )


async def check_body(request: Request, schema: Schema | None) -> None:
    """Raise a 400 ``invalid_request`` when the JSON body breaks the route's ``schema``.

    Bodies that are not JSON, multipart forms and model errors are left to the handler.
    """
    if schema is None or is_multipart(request):
        return
    raw = await read_body(request)
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return  # the handler answers 400 invalid_json
    if schema.get("type") == "object" and not isinstance(value, dict):
        return
    for violation in violations(value, schema):
        if not _about_the_model(violation):
            about = _description(schema, violation)
            raise bad_request(
                f"{violation.where}: {violation.message}",
                code="invalid_request",
                hint=(f"{about} " if about else "")
                + "(the request schema of this route is in GET /openapi.json)",
            )


def _description(schema: Schema, violation: Violation) -> str | None:
    """The published description of the field a violation is about, if it has one."""
    path: list[str | int] = list(violation.path)
    if violation.keyword == "required" and len(violation.names) == 1:
        path.append(next(iter(violation.names)))
    node: Any = schema
    for part in path:
        node = node.get("items") if isinstance(part, int) else node.get("properties", {}).get(part)
        if not isinstance(node, dict):
            return None
    text = node.get("description")
    return text if isinstance(text, str) and node is not schema else None

"""Request bodies checked against the schemas /openapi.json publishes, before any handler.

The gateway accepts a JSON body only if it is valid against the route's published schema, so
the description and the server cannot drift apart: a body the schema calls invalid gets a 400
``invalid_request`` naming the field, never a 402 or a 200. The one exception is the model
field: its errors are left to the handler, whose 400 (``model_required``,
``model_not_found``, ``model_wrong_type``, ``model_unpriced``) carries a hint naming close ids.

Bodies are validated by ``jsonschema_rs`` (Draft 2020-12; ``format`` is an annotation, as the
standard says; no remote ``$ref`` is ever fetched); this module only turns its errors into the
gateway's 400.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from jsonschema_rs import Draft202012Validator, ValidationError, ValidationErrorKind
from starlette.requests import Request

from x402lab.emulator.gateway.errors import bad_request
from x402lab.emulator.gateway.fields import is_multipart, read_body

Schema = dict[str, Any]
MODEL_FIELDS = frozenset({"model", "modelId"})
_MAX_VIOLATIONS = 20
_MAX_MESSAGE = 160


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


@dataclass(frozen=True)
class BodyValidator:
    """One route's published body schema and its compiled validator (built once per route)."""

    schema: Schema
    compiled: Draft202012Validator


def body_validator(schema: Schema) -> BodyValidator:
    """The validator of one route's published body schema; nothing remote is fetched."""
    return BodyValidator(schema, _compiled(json.dumps(schema, sort_keys=True)))


@functools.lru_cache(maxsize=256)
def _compiled(schema_json: str) -> Draft202012Validator:
    # Compiled once per process for each schema: every emulator started (one per test, and
    # each embedded lab) publishes the same schemas, and compiling them was half of the
    # gateway app's construction. A compiled validator is immutable, so emulators share it.
    return Draft202012Validator(json.loads(schema_json), offline=True)


def violations(value: Any, validator: BodyValidator) -> list[Violation]:
    """Every way ``value`` breaks the validator's schema (at most a few dozen), outermost
    first."""
    errors = sorted(validator.compiled.iter_errors(value), key=lambda e: len(e.instance_path))
    return [_violation(error, validator.schema) for error in errors[:_MAX_VIOLATIONS]]


def _violation(error: ValidationError, schema: Schema) -> Violation:
    names: frozenset[str] = frozenset()
    kind = error.kind
    if isinstance(kind, ValidationErrorKind.Required):
        names = frozenset({kind.property})
    elif isinstance(kind, ValidationErrorKind.AnyOf):
        # schema_path is a pointer into the published schema: the anyOf's branches are there.
        branches = _at(schema, error.schema_path)
        listed = branches if isinstance(branches, list) else []
        names = frozenset(n for b in listed if isinstance(b, dict) for n in b.get("required", ()))
    message = error.message
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 3] + "..."
    return Violation(tuple(error.instance_path), kind.name, message, names)


def _at(schema: Any, pointer: list[str | int]) -> Any:
    for part in pointer:
        if isinstance(schema, dict):
            schema = schema.get(str(part))
        elif isinstance(schema, list) and isinstance(part, int) and part < len(schema):
            schema = schema[part]
        else:
            return None
    return schema


def _about_the_model(violation: Violation) -> bool:
    if violation.path:
        return violation.path[0] == "model"
    return (
        violation.keyword in ("required", "anyOf")
        and bool(violation.names)
        and (violation.names <= MODEL_FIELDS)
    )


async def check_body(request: Request, validator: BodyValidator | None) -> None:
    """Raise a 400 ``invalid_request`` when the JSON body breaks the route's schema.

    Bodies that are not JSON, multipart forms and model errors are left to the handler.
    """
    if validator is None or is_multipart(request):
        return
    schema = validator.schema
    raw = await read_body(request)
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return  # the handler answers 400 invalid_json
    if schema.get("type") == "object" and not isinstance(value, dict):
        return
    for violation in violations(value, validator):
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

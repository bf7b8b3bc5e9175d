"""What each paid gateway route accepts, checked before anything is signed.

The gateway publishes one request schema per route in its ``/openapi.json`` (OpenAPI 3.1, so
JSON Schema 2020-12); ``Catalog`` fetches and caches that document, and this module reads it.
The rules of a route are the gateway's own description, kept nowhere else:

- ``routes_of`` / ``find_route``: the published operations, paid or free, and the one a
  ``METHOD path`` is (a ``{name}`` segment matches one path segment).
- ``RequestSchema.check``: a top-level field the schema does not list raises TypeError, like
  Python's own "got an unexpected keyword argument", with a did-you-mean and the way out
  (``extra_body={...}``, sent unchecked, as in openai-python); a value outside the schema's
  types and ranges raises ConfigError naming the field, the value and what the route takes.

Without a published schema none of this runs: the gateway's 4xx, before any payment, stays
the check. ``jsonschema_rs`` validates (Draft 2020-12, local ``$ref``s, nothing fetched;
``request_validator`` reads OpenAPI 3.0's ``nullable``, tuples as arrays, refuses NaN and
drops a pattern the regex engine cannot compile); this module puts its errors in the
caller's words. Unknown keywords never refuse.
"""

from __future__ import annotations

import difflib
import math
import numbers
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from jsonschema_rs import ValidationError, ValidationErrorKind

from x402lab.errors import ArgumentError, ConfigError
from x402lab.gateway.request_validator import (
    CompiledSchema,
    Where,
    at_pointer,
    compile_schema,
    json_value,
)

BODY_CALLERS = ("call()", "quote()")

_HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
# The catalog check owns model ids (with close ids as suggestions, and validate_models=False
# to hand them to the gateway), so a schema's enum of ids is not a second check.
_MODEL_FIELDS = ("model", "modelId")
_MISSING = object()
_BOUNDS = (
    ("minimum", "≥"),
    ("exclusiveMinimum", ">"),
    ("maximum", "≤"),
    ("exclusiveMaximum", "<"),
)


# -- routes --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """One operation of the published document."""

    method: str
    path: str  # as published: "{network}" stands for one path segment
    paid: bool
    operation: Mapping[str, Any]

    def __str__(self) -> str:
        return f"{self.method} {self.path}"

    def matches(self, path: str) -> bool:
        if "{" not in self.path:
            return self.path == path
        parts = re.split(r"(\{[^/{}]*\})", self.path)
        pattern = "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts)
        return re.fullmatch(pattern, path) is not None


def routes_of(openapi: Any) -> list[Route]:
    """Every operation of an OpenAPI document; paid ones have ``x-payment-info`` or a 402."""
    paths = openapi.get("paths") if isinstance(openapi, Mapping) else None
    found = []
    for path, item in (paths or {}).items():
        if not isinstance(item, Mapping):
            continue
        for method, operation in item.items():
            if method.lower() in _HTTP_METHODS and isinstance(operation, Mapping):
                responses = operation.get("responses")
                paid = "x-payment-info" in operation or (
                    isinstance(responses, Mapping) and "402" in responses
                )
                found.append(Route(method.upper(), str(path), paid, operation))
    return found


def find_route(listed: Sequence[Route], method: str, path: str) -> Route | None:
    """The published route ``METHOD path`` is (a literal path before a template)."""
    method = method.upper()
    candidates = [r for r in listed if r.method == method and r.matches(path)]
    candidates.sort(key=lambda r: "{" in r.path)
    return candidates[0] if candidates else None


# -- request schemas -------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One value a schema does not allow: where, what was given, what the route takes."""

    where: Where
    value: Any
    takes: str

    def __str__(self) -> str:
        name = _where(self.where)
        if self.value is _MISSING:
            return f"{name} is required"
        return f"{name}={_show(self.value)} is not allowed: it must be {self.takes}"


@dataclass(frozen=True)
class RequestSchema:
    """The published JSON request schema of one route, and the document its ``$ref``s use."""

    route: Route
    schema: Mapping[str, Any]
    document: Mapping[str, Any]

    @property
    def fields(self) -> tuple[str, ...] | None:
        """Top-level fields the schema lists; None when it lists none or allows any."""
        names: dict[str, None] = {}
        pending = [self.schema]
        while pending:
            schema = _resolve(pending.pop(), self.document)
            extra = schema.get("additionalProperties")
            if extra is not None and extra is not False:
                return None  # the gateway says it takes fields it does not list
            properties = schema.get("properties")
            if isinstance(properties, Mapping):
                names.update(dict.fromkeys(map(str, properties)))
            for key in ("allOf", "anyOf", "oneOf"):
                branches = schema.get(key)
                if isinstance(branches, list):
                    pending.extend(b for b in branches if isinstance(b, Mapping))
        return tuple(names) or None

    @cached_property
    def _compiled(self) -> CompiledSchema | None:
        return compile_schema(self.schema, self.document)

    def check(
        self,
        body: Any,
        *,
        caller: str,
        own: Collection[str] = (),
    ) -> None:
        """Raise TypeError for a top-level field the schema does not list (``own``: fields
        the calling method sets itself, left to the gateway), ConfigError for a value it
        does not allow. Returns None when the body fits."""
        fields = self.fields
        if fields is not None and isinstance(body, Mapping):
            unknown = [str(k) for k in body if k not in fields and k not in own]
            if unknown:
                # call() and quote() take a body, the route methods keyword arguments.
                noun = "body field" if caller in BODY_CALLERS else "keyword argument"
                raise _unexpected(caller, noun, unknown, body, fields, self.route)
        compiled = self._compiled
        if compiled is None:
            return  # a reference outside the document: the gateway's own 4xx decides
        value, unfit = json_value(body)
        errors = compiled.errors(value)
        if not errors and not unfit:
            return
        first = [Problem(where, given, takes) for where, given, takes in unfit]
        found = [
            p
            for p in _problems(first, errors, compiled.root, body)
            if not (p.where[:1] and p.where[0] in _MODEL_FIELDS and p.value is not _MISSING)
        ]
        if found:
            listed = "; ".join(str(p) for p in found[:3])
            more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
            raise ConfigError(
                f"{caller}: {listed}{more}. That is the request schema {self.route} publishes;"
                " nothing was sent."
            )


def request_schema_of(document: Mapping[str, Any], route: Route) -> RequestSchema | None:
    """The JSON request schema of ``route``; None when it publishes none (or only a form)."""
    body = _resolve(route.operation.get("requestBody"), document)
    content = body.get("content")
    if not isinstance(content, Mapping):
        return None
    media = next((m for m in content if str(m).split(";")[0].strip().endswith("json")), None)
    entry = content.get(media) if media is not None else None
    schema = entry.get("schema") if isinstance(entry, Mapping) else None
    if not isinstance(schema, Mapping) or not schema:
        return None
    return RequestSchema(route, schema, document)


def _unexpected(
    caller: str,
    noun: str,
    unknown: list[str],
    body: Mapping[str, Any],
    fields: Sequence[str],
    route: Route,
) -> ArgumentError:
    plural = "s" if len(unknown) > 1 else ""
    names = ", ".join(repr(n) for n in unknown)
    guesses = {n: difflib.get_close_matches(n, fields, n=1, cutoff=0.6) for n in unknown}
    means = [
        f"{g[0]!r}" + (f" for {n!r}" if len(unknown) > 1 else "") for n, g in guesses.items() if g
    ]
    hint = f"; did you mean {', '.join(means)}?" if means else "."
    extra = "{" + ", ".join(f"{n!r}: {_show(body[n])}" for n in unknown) + "}"
    return ArgumentError(
        f"{caller} got an unexpected {noun}{plural} {names}{hint} {route} takes"
        f" {', '.join(fields)} (its published request schema). To send a field the schema"
        f" does not list, pass it unchecked as extra_body={extra}."
    )


def with_extra_body(body: Any, extra_body: Mapping[str, Any] | None, *, caller: str) -> Any:
    """``body`` with the unchecked fields of ``extra_body`` added (they win, as in
    openai-python). Raises TypeError when ``extra_body`` is not a mapping of names."""
    if extra_body is None:
        return body
    if not isinstance(extra_body, Mapping) or not all(isinstance(k, str) for k in extra_body):
        raise TypeError(f"{caller}: extra_body must be a dict of field names to values")
    if not isinstance(body, Mapping):
        raise ConfigError(f"{caller}: extra_body adds fields to a JSON object body; this has none")
    return {**body, **extra_body}


#: The largest int a float holds exactly (every smaller one too).
_EXACT_INT = 2**53


def positive_int(name: str, value: Any, meaning: str) -> int:
    """``value`` as an int when it is a whole number ≥ 1; else ConfigError naming ``name``."""
    # A plain int (what callers pass) is told apart without ``numbers.Real``'s ABC check,
    # which a batch paid for once a row (3.4 % of its event loop on loopback); up to 2**53
    # it is what the float round trip below gives.
    if type(value) is int and 1 <= value <= _EXACT_INT:
        return value
    if _integer(value) and float(value) >= 1:
        return int(float(value))
    raise ConfigError(
        f"{name} must be a whole number ≥ 1 ({meaning}), got {_show(value)}: pass for example"
        f" {name}=256, or leave it out"
    )


# -- errors in words ----------------------------------------------------------------------
#
# jsonschema_rs finds what a body breaks; what follows only says it the way a caller reads it:
# where, the value given, and what the route takes ("an integer ≥ 1", "one of 'a', 'b'").


def _resolve(schema: Any, document: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` with its local ``$ref`` followed (siblings kept, 2020-12); {} when unknown."""
    for _ in range(32):
        if not isinstance(schema, Mapping):
            return {}
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            return schema
        if not ref.startswith("#"):
            return {}  # a remote reference: nothing to check here
        target: Any = document
        for part in filter(None, ref[1:].split("/")):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, Mapping) else None
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**target, **siblings} if isinstance(target, Mapping) else {}
    return {}


def _finite_number(value: Any) -> bool:
    # NaN and infinities are not JSON numbers; a bool is not a number.
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _integer(value: Any) -> bool:
    return _finite_number(value) and float(value).is_integer()


def _problems(
    first: list[Problem], errors: list[ValidationError], root: Mapping[str, Any], body: Any
) -> list[Problem]:
    found: dict[Where, Problem] = {p.where: p for p in first}
    for error in errors:
        for problem in _problems_of(error, root, body):
            found.setdefault(problem.where, problem)  # one problem a place, the outermost
    return sorted(found.values(), key=lambda p: len(p.where))


def _problems_of(error: ValidationError, root: Mapping[str, Any], body: Any) -> list[Problem]:
    """``error`` in words; its ``schema_path`` points into ``root`` (the compiled schema)."""
    where = tuple(error.instance_path)
    kind = error.kind
    if isinstance(kind, ValidationErrorKind.Required):
        return [Problem((*where, kind.property), _MISSING, "")]
    if isinstance(kind, ValidationErrorKind.AdditionalProperties):
        if not where:
            return []  # unknown top-level fields are check()'s TypeError, with extra_body
        listed = ", ".join(map(str, _subschema(root, error).get("properties") or {})) or "none"
        takes = f"absent (the fields are {listed})"
        return [
            Problem((*where, n), _given(body, (*where, n), None), takes) for n in kind.unexpected
        ]
    if isinstance(kind, ValidationErrorKind.AnyOf | ValidationErrorKind.OneOfNotValid):
        return _choice_problems(error, kind.context, root, body)
    given = _given(body, where, error.instance)
    return [Problem(where, given, _describe(_subschema(root, error), root))]


def _choice_problems(
    error: ValidationError,
    context: list[list[ValidationError]],
    root: Mapping[str, Any],
    body: Any,
) -> list[Problem]:
    """Name what went wrong in a choice: "model or modelId is required", the problems inside
    the one branch of the value's own type, or else every form the choice takes."""
    where = tuple(error.instance_path)
    found = at_pointer(root, error.schema_path)
    branches = found if isinstance(found, list) else []
    required = [[_required(s) for s in subs] for subs in context]
    if context and all(names and None not in names for names in required):
        missing = dict.fromkeys(_where((*where, str(n))) for names in required for n in names)
        return [Problem((" or ".join(missing),), _MISSING, "")]
    typed = [
        subs
        for branch, subs in zip(branches, context, strict=False)
        if "type" in _resolve(branch, root)
        and not any(
            isinstance(s.kind, ValidationErrorKind.Type) and tuple(s.instance_path) == where
            for s in subs
        )
    ]
    if len(typed) == 1:
        return [p for s in typed[0] for p in _problems_of(s, root, body)]
    takes = " or ".join(dict.fromkeys(_describe(b, root) for b in branches))
    return [Problem(where, _given(body, where, error.instance), takes)]


def _required(error: ValidationError) -> str | None:
    kind = error.kind
    return kind.property if isinstance(kind, ValidationErrorKind.Required) else None


def _subschema(root: Mapping[str, Any], error: ValidationError) -> Mapping[str, Any]:
    """The schema holding the keyword ``error`` is about."""
    found = at_pointer(root, error.schema_path[:-1])
    return found if isinstance(found, Mapping) else {}


def _given(body: Any, where: Where, instance: Any) -> Any:
    """The caller's own value at ``where`` (a tuple stays a tuple in the message)."""
    found = at_pointer(body, where)
    return instance if found is None else found


def _describe(schema: Any, document: Mapping[str, Any]) -> str:
    """What ``schema`` takes, in words: "an integer ≥ 1", "one of 'float', 'base64'"."""
    schema = _resolve(schema, document)
    if "const" in schema:
        return _show(schema["const"])
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        shown = ", ".join(_show(e) for e in enum[:8]) + (", ..." if len(enum) > 8 else "")
        return f"one of {shown}"
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches and "type" not in schema:
            return " or ".join(dict.fromkeys(_describe(b, document) for b in branches))
    kinds = schema.get("type")
    options = kinds if isinstance(kinds, list) else [kinds] if kinds else []
    return " or ".join(_describe_type(str(k), schema) for k in options) or "what its schema allows"


def _describe_type(kind: str, schema: Mapping[str, Any]) -> str:
    if kind in ("integer", "number"):
        name = "an integer" if kind == "integer" else "a number"
        limits = [f"{sign} {schema[k]!r}" for k, sign in _BOUNDS if _finite_number(schema.get(k))]
        return f"{name} {' and '.join(limits)}".strip()
    if kind in ("string", "array"):
        low, high = ("minLength", "maxLength") if kind == "string" else ("minItems", "maxItems")
        unit = "characters" if kind == "string" else "items"
        name = "a string" if kind == "string" else "a list"
        lo, hi = schema.get(low), schema.get(high)
        if isinstance(lo, int) and isinstance(hi, int):
            name += f" of {lo} to {hi} {unit}"
        elif isinstance(hi, int):
            name += f" of at most {hi} {unit}"
        elif lo == 1:
            name = f"a non-empty {name[2:]}"
        elif isinstance(lo, int):
            name += f" of at least {lo} {unit}"
        if isinstance(schema.get("pattern"), str):
            name += f" matching {schema['pattern']}"
        return name
    return {"boolean": "True or False", "null": "None", "object": "a dict"}.get(kind, kind)


def _where(path: Where) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "the body"


def _show(value: Any) -> str:
    if isinstance(value, str) and len(value) > 60:
        return f"<a string of {len(value):,} characters>"
    if isinstance(value, list | tuple | Mapping) and len(repr(value)) > 60:
        return f"<a {type(value).__name__} of {len(value)} items>"
    return repr(value)

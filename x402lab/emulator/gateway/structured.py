"""Structured output (``response_format``) of the simulated upstream: answers that follow the
request's JSON Schema and derive from each item's own content.

This is a simulation, written so that typed batches and comparisons have something to show
offline; no model runs (docs/emulator.md). What it does:

- ``{"type": "json_object"}``: a small JSON object about the prompt.
- ``{"type": "json_schema", "json_schema": {...}}`` (the schema under ``schema``, as OpenAI
  writes it, or the object itself, as the upstream's own example does): a JSON value valid
  under the schema. When the schema's one property is an array of objects with an ``id`` and
  the last user message holds a JSON array of objects with an ``id`` (a packed request), the
  answer has one entry per item, in order, each derived from that item alone; so an item gets
  the same answer alone or in a pack.
- Derivation: an enum value named in the text (or a common synonym of it) wins, else one is
  picked by a stable hash of the text; a string is a short phrase of the text; an integer or
  number is one written in the text, else one derived from its length; a boolean says whether
  the field's name (``mentions_price``: "price") occurs in the text; a list of strings holds
  words of the text (or the enum values named in it). Values stay inside the schema's
  constraints (bounds, lengths, ``maxItems``; a ``pattern`` or ``format`` is looked for in the
  text). A nullable field is null when the item holds no value for it: a number when the
  text has no digit, a string when the text is under 20 characters (or holds nothing of the
  pattern asked), an enum when no value is named (``constraints``).
- Simulated mistakes: each model answers each field wrongly (another valid value) as the
  seeded quality model (``quality``) says: skill rising with price, items of varying
  difficulty, accuracy falling with an item's position in a long pack. ``truth`` is the
  answer with no mistakes (the gold labels of ``data/reviews.csv``).
- ``Faults.schema_violation_rate`` breaks whole answers on purpose (``violate``);
  ``Faults.constraint_violation_rate`` puts right-typed values outside the constraints
  (``constraints.break_constraints``).
"""

from __future__ import annotations

import json
import math
import random
import re
from typing import Any

from x402lab.emulator.gateway import constraints, quality

Schema = dict[str, Any]

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")
# A minus sign only where it starts a number ("-3"), not inside a code ("ORD-1234").
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")
#: Words that name an enum value without spelling it (a review says "broken", not "negative").
_SYNONYMS = {
    "positive": {
        "good",
        "great",
        "love",
        "loved",
        "excellent",
        "perfect",
        "happy",
        "fast",
        "recommend",
        "amazing",
        "works",
        "best",
        "nice",
        "solid",
        "lovely",
        "quick",
        "friendly",
        "early",
    },
    "negative": {
        "bad",
        "broken",
        "terrible",
        "awful",
        "slow",
        "poor",
        "hate",
        "refund",
        "worst",
        "late",
        "disappointed",
        "cracked",
        "useless",
        "never",
        "rude",
        "overpriced",
        "flickers",
        "drains",
        "died",
        "dead",
        "crushed",
    },
    "neutral": {"okay", "ok", "fine", "average", "expected", "decent", "usual"},
    "mixed": {"but", "however", "although", "though"},
    "screen": {"display", "pixels", "colours", "colors", "dim"},
    "delivery": {"arrived", "box", "packed", "shipping"},
    "price": {"value", "cheap", "expensive", "overpriced", "deal", "priced"},
    "battery": {"charges", "charge", "drains", "charging"},
    "support": {"replied", "help", "contact", "team"},
}
#: The kinds of a broken answer ``violate`` produces, in the order it picks them.
VIOLATIONS = ("invalid_json", "missing_item", "duplicated_item", "outside_enum", "truncated")


_unit = quality.unit


def requested_schema(body: dict[str, Any]) -> tuple[str, Schema | None] | None:
    """("json_schema", schema) or ("json_object", None) from a chat body's
    ``response_format``; None for text answers."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return None
    kind = fmt.get("type")
    if kind == "json_object":
        return "json_object", None
    if kind == "json_schema" and isinstance(fmt.get("json_schema"), dict):
        inner = fmt["json_schema"]
        schema = inner.get("schema") if isinstance(inner.get("schema"), dict) else inner
        return "json_schema", schema
    return None


def pack_items(text: str) -> list[dict[str, Any]] | None:
    """The JSON array of objects with an ``id`` inside ``text`` (a packed request), or None."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\[", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if (
            isinstance(value, list)
            and value
            and all(isinstance(v, dict) and "id" in v for v in value)
        ):
            return value
    return None


def _entry_schema(schema: Schema) -> tuple[str, Schema] | None:
    """(array property, entry schema) when ``schema`` is an object whose one property is an
    array of objects with an ``id`` property (the answer of a packed request)."""
    props = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(props, dict) or len(props) != 1:
        return None
    ((name, prop),) = props.items()
    entry = prop.get("items") if isinstance(prop, dict) else None
    if (
        isinstance(prop, dict)
        and prop.get("type") == "array"
        and isinstance(entry, dict)
        and isinstance(entry.get("properties"), dict)
        and "id" in entry["properties"]
    ):
        return name, entry
    return None


class Deriver:
    """Values under a schema derived from one item's text, with a model's simulated mistakes
    (``quality``: a model of ``skill`` answering the item at ``position`` of its pack; an
    infinite skill makes none)."""

    def __init__(
        self, text: str, *, model_id: str, skill: float, position: int = 0, seed: int = 0
    ) -> None:
        self.text = text
        self.words = [w.lower() for w in _WORD.findall(text)]
        self.model_id = model_id
        self.skill = skill
        self.position = position
        self.seed = seed

    def _wrong(self, field: str, *, ambiguous: bool = False) -> bool:
        if math.isinf(self.skill):
            return False
        return quality.answers_wrongly(
            self.seed, self.model_id, self.skill, self.text, field, self.position,
            ambiguous=ambiguous,
        )  # fmt: skip

    def value(self, schema: Schema, field: str) -> Any:
        allows_null, schema = constraints.nullable(schema)
        if allows_null and self._absent(schema):
            return None
        kind = schema.get("type")
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self._enum([v for v in schema["enum"]], field)
        if kind == "object":
            return self.obj(schema, field)
        if kind == "array":
            return self._array(schema, field)
        if kind == "integer":
            return self._number(schema, field, integer=True)
        if kind == "number":
            return self._number(schema, field, integer=False)
        if kind == "boolean":
            return self._boolean(field)
        if kind == "null":
            return None
        return constraints.fit_string(self._phrase(field), schema)

    def _absent(self, schema: Schema) -> bool:
        """Whether the item holds no value for a nullable field: no digit for a number, too
        short a text (under 20 characters) or no part of the shape asked for a string, no
        value named for an enum, nothing to list for an array."""
        kind = schema.get("type")
        if "enum" in schema:
            return not any(isinstance(v, str) and self._named(v) for v in schema["enum"])
        if kind in ("integer", "number"):
            return not any(c.isdigit() for c in self.text)
        if kind == "string":
            if constraints.asks_for_shape(schema):
                return constraints.pattern_match(schema, self.text) is None
            return len(self.text) < 20
        if kind == "array":
            return not self._array(schema, "")
        return False

    def obj(self, schema: Schema, field: str = "") -> dict[str, Any]:
        props = schema.get("properties") or {}
        return {
            name: self.value(sub if isinstance(sub, dict) else {}, f"{field}.{name}")
            for name, sub in props.items()
        }

    def _named(self, value: str) -> bool:
        lowered = value.lower()
        return lowered in self.words or bool(_SYNONYMS.get(lowered, set()) & set(self.words))

    def _enum(self, values: list[Any], field: str) -> Any:
        named = [v for v in values if isinstance(v, str) and self._named(v)]
        if "mixed" in values and {"positive", "negative"} <= set(named):
            right: Any = "mixed"
        elif named:
            right = named[0]
        else:
            right = values[int(_unit("enum", self.text, field) * len(values))]
        ambiguous = len(named) != 1
        if len(values) > 1 and self._wrong(field, ambiguous=ambiguous):
            others = [v for v in values if v != right]
            return others[int(_unit("other", self.text, field) * len(others))]
        return right

    def _number(self, schema: Schema, field: str, *, integer: bool) -> int | float:
        found = _NUMBER.findall(self.text)
        value = float(found[0]) if found else float(len(self.words) % 5 + 1)
        if self._wrong(field):
            value += 1
        return constraints.bounded(value, schema, integer=integer)

    def _boolean(self, field: str) -> bool:
        name = field.rsplit(".", 1)[-1]
        hints = [w for w in re.split(r"[_\W]+", name.lower()) if len(w) > 3]
        hints = [w for w in hints if w not in {"mentions", "contains", "about", "has", "is"}]
        right = any(h in self.words or h + "s" in self.words for h in hints)
        return (not right) if self._wrong(field) else right

    def _phrase(self, field: str) -> str:
        words = self.text.split()
        return " ".join(words[:5]) if words else "n/a"

    def _array(self, schema: Schema, field: str) -> list[Any]:
        items = schema.get("items") or {}
        if "enum" in items:
            named = [v for v in items["enum"] if isinstance(v, str) and self._named(v)]
            return constraints.fit_list(named[:3], schema, list(items["enum"]))
        long = list(dict.fromkeys(w for w in self.words if len(w) > 3))
        return constraints.fit_list(long[:3], schema, [])


def _item_text(item: dict[str, Any]) -> str:
    rest = {k: v for k, v in item.items() if k != "id"}
    if len(rest) == 1:
        (only,) = rest.values()
        return only if isinstance(only, str) else json.dumps(only, sort_keys=True)
    return json.dumps(rest, sort_keys=True)


def answer(
    kind: str,
    schema: Schema | None,
    prompt: str,
    *,
    model_id: str,
    output_usd_per_m: float,
    seed: int = 0,
) -> Any:
    """The JSON value a request asks for (see the module docstring)."""
    if kind == "json_object" or schema is None:
        words = _WORD.findall(prompt)[:6]
        return {"answer": " ".join(words) or "n/a", "words": len(_WORD.findall(prompt))}
    items = pack_items(prompt)
    packed = _entry_schema(schema)
    skill = quality.skill(model_id, output_usd_per_m)
    if packed is not None and items is not None:
        name, entry = packed
        entries = []
        for position, item in enumerate(items):
            derive = Deriver(
                _item_text(item), model_id=model_id, skill=skill, position=position, seed=seed
            )
            entries.append(derive.obj(entry) | {"id": item["id"]})
        return {name: entries}
    return Deriver(prompt, model_id=model_id, skill=skill, seed=seed).value(schema, "")


def truth(text: str, entry: Schema) -> dict[str, Any]:
    """The true answer for an item of ``text`` under ``entry`` (the object schema of one
    item of a pack): what every model answers when it makes no mistake."""
    return Deriver(text, model_id="", skill=math.inf).obj(entry)


def break_constraints(value: Any, schema: Schema, dice: random.Random, rate: float) -> Any:
    """``value`` with right-typed values outside the schema's constraints, at ``rate`` per
    entry of a packed answer (or for the whole answer): ``constraints.break_constraints``."""
    packed = _entry_schema(schema)
    if packed is not None and isinstance(value, dict) and isinstance(value.get(packed[0]), list):
        name, entry = packed
        return {name: constraints.break_constraints(value[name], entry, dice, rate)}
    return constraints.break_constraints(value, schema, dice, rate)


def violate(value: Any, schema: Schema | None, roll: float) -> tuple[str, str | None]:
    """A broken form of ``value``: (JSON text, forced finish reason or None). ``roll`` in
    [0, 1) picks the kind among ``VIOLATIONS``; a kind that does not apply to this answer
    (no array of items, no enum) falls back to invalid JSON."""
    kind = VIOLATIONS[int(roll * len(VIOLATIONS))]
    packed = _entry_schema(schema) if schema is not None else None
    entries = value.get(packed[0]) if packed and isinstance(value, dict) else None
    if kind == "missing_item" and entries:
        return json.dumps({packed[0]: entries[1:]}), None  # type: ignore[index]
    if kind == "duplicated_item" and entries:
        return json.dumps({packed[0]: [entries[0], *entries]}), None  # type: ignore[index]
    if kind == "outside_enum" and entries and packed:
        enum_field = next(
            (k for k, s in packed[1]["properties"].items() if isinstance(s, dict) and "enum" in s),
            None,
        )
        if enum_field is not None:
            broken = [dict(e) for e in entries]
            broken[0][enum_field] = "something else"
            return json.dumps({packed[0]: broken}), None
    text = json.dumps(value)
    if kind == "truncated":
        return text[: max(1, len(text) // 2)], "length"
    return text[:-1] + ",}", None

"""Structured output on the gateway: ``response_format`` published, accepted and followed by
the simulated upstream (answers derive from each item's own text), refused for a model
without ``supportsResponseSchema`` before any payment, and broken on purpose by
``Faults(schema_violation_rate=...)``.

The answers are judged by ``jsonschema``, the reference implementation, not by the
``jsonschema_rs`` x402lab validates with: what the emulator answers must hold for any client.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import pytest
from support.gateway import Gateway, error_of

from x402lab.emulator.gateway.structured import answer

CHAT = "/api/v1/chat/completions"
MODEL = "zai-org-glm-4.7-flash"
NO_SCHEMA_MODEL = "llama-3.2-3b"
ACCURATE_MODEL = "openai-gpt-54-pro"  # the dearest model errs least (simulated)

SENTIMENT = {
    "type": "object",
    "properties": {
        "sentiment": {"type": "string", "enum": ["positive", "negative", "neutral"]},
        "topic": {"type": "string"},
        "stars": {"type": "integer", "minimum": 1, "maximum": 5},
        "mentions_price": {"type": "boolean"},
        "keywords": {"type": "array", "items": {"type": "string"}},
        "detail": {
            "type": "object",
            "properties": {"summary": {"type": "string"}},
            "required": ["summary"],
            "additionalProperties": False,
        },
    },
    "required": ["sentiment", "topic", "stars", "mentions_price", "keywords", "detail"],
    "additionalProperties": False,
}
PACKED = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "string"}} | SENTIMENT["properties"],
                "required": ["id", *SENTIMENT["required"]],
                "additionalProperties": False,
            },
        }
    },
    "required": ["items"],
    "additionalProperties": False,
}
REVIEWS = [
    "Battery lasts two days, great value",
    "Delivery was slow and the box arrived broken",
    "Screen is fine, price is a bit high",
    "Support never answered my emails, terrible",
    "It works. Nothing special.",
]


def _format(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "r", "strict": True, "schema": schema}}


def _body(text: str, schema: dict[str, Any], model: str = MODEL, **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": text}],
        "response_format": _format(schema),
        **extra,
    }


def _packed_text(items: list[tuple[str, str]]) -> str:
    rows = [{"id": i, "text": t} for i, t in items]
    return "Classify each review; answer one entry per id.\n" + json.dumps(rows)


@pytest.fixture
def gw(emulator, payer):
    with httpx.Client(base_url=emulator.gateway_url, timeout=30) as client:
        yield Gateway(client, payer)


def _answer(response: httpx.Response) -> tuple[str, dict[str, Any]]:
    assert response.status_code == 200, response.text
    body = response.json()
    return body["choices"][0]["message"]["content"], body


def test_response_format_is_published_in_openapi(gw):
    spec = gw.get("/openapi.json").json()
    text = json.dumps(spec)
    assert "response_format" in text and "json_schema" in text and "json_object" in text
    assert '"strict"' in text  # the upstream's json_schema shape: name, strict, schema


def test_an_answer_validates_under_the_requested_schema(gw):
    for review in REVIEWS:
        content, body = _answer(gw.pay(CHAT, json=_body(review, SENTIMENT)))
        jsonschema.validate(json.loads(content), SENTIMENT)
        assert body["choices"][0]["finish_reason"] == "stop"


def test_answers_derive_from_the_text(gw):
    good, _ = _answer(gw.pay(CHAT, json=_body("I love it, excellent and great", SENTIMENT)))
    bad, _ = _answer(gw.pay(CHAT, json=_body("Terrible, broken and awful", SENTIMENT)))
    assert json.loads(good)["sentiment"] == "positive"
    assert json.loads(bad)["sentiment"] == "negative"
    assert json.loads(good) != json.loads(bad)


def test_a_packed_answer_has_one_entry_per_item_in_order(gw):
    items = [(f"r{i}", text) for i, text in enumerate(REVIEWS)]
    content, _ = _answer(gw.pay(CHAT, json=_body(_packed_text(items), PACKED)))
    value = json.loads(content)
    jsonschema.validate(value, PACKED)
    assert [entry["id"] for entry in value["items"]] == [i for i, _ in items]


def test_the_same_item_gets_the_same_answer_alone_and_in_a_small_pack(gw):
    # The simulated mistakes (about 1% of fields for an expensive model at small packs, seeded
    # by the pack size) are the only differences allowed: nearly every field must agree.
    items = [(f"r{i}", text) for i, text in enumerate(REVIEWS)]
    body = _body(_packed_text(items), PACKED, model=ACCURATE_MODEL)
    packed, _ = _answer(gw.pay(CHAT, json=body))
    entries = {e["id"]: e for e in json.loads(packed)["items"]}
    same = total = 0
    for item_id, text in items:
        body = _body(_packed_text([(item_id, text)]), PACKED, model=ACCURATE_MODEL)
        alone, _ = _answer(gw.pay(CHAT, json=body))
        (entry,) = json.loads(alone)["items"]
        for field in SENTIMENT["properties"]:
            total += 1
            same += entry[field] == entries[item_id][field]
    assert same >= total - 2, (same, total)
    assert len({json.dumps(e | {"id": ""}, sort_keys=True) for e in entries.values()}) > 1


def test_the_same_request_gets_the_same_answer(gw):
    body = _body(_packed_text([("a", REVIEWS[0]), ("b", REVIEWS[1])]), PACKED)
    first, _ = _answer(gw.pay(CHAT, json=body))
    second, _ = _answer(gw.pay(CHAT, json=body))
    assert first == second


def test_a_model_without_response_schema_is_refused_before_payment(gw, emulator):
    catalog = gw.get("/api/v1/models").json()
    entries = catalog.get("data", catalog) if isinstance(catalog, dict) else catalog
    text_models = {
        m["id"]: m["model_spec"]["capabilities"]["supportsResponseSchema"]
        for m in entries
        if "supportsResponseSchema" in m.get("model_spec", {}).get("capabilities", {})
    }
    assert text_models[NO_SCHEMA_MODEL] is False
    assert sum(text_models.values()) >= 3
    response = gw.post(CHAT, json=_body("hello", SENTIMENT, model=NO_SCHEMA_MODEL))
    body = error_of(response, 400, response.json().get("error", "?"))
    assert "supportsResponseSchema" in json.dumps(body) or "response_format" in body["message"]
    assert "payment-required" not in response.headers


def test_a_bad_response_format_is_a_400(gw):
    bad = {"model": MODEL, "messages": [{"role": "user", "content": "x"}]}
    for fmt in ({"type": "yaml"}, {"type": "json_schema", "json_schema": "x"}, "json"):
        response = gw.post(CHAT, json=bad | {"response_format": fmt})
        assert response.status_code == 400, (fmt, response.text)


def test_json_object_answers_a_json_object(gw):
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Describe the battery"}],
        "response_format": {"type": "json_object"},
    }
    content, _ = _answer(gw.pay(CHAT, json=body))
    assert isinstance(json.loads(content), dict)


def test_completion_tokens_grow_with_the_json(gw):
    def tokens(n: int) -> int:
        items = [(f"r{i}", REVIEWS[i % len(REVIEWS)] + f" #{i}") for i in range(n)]
        content, body = _answer(gw.pay(CHAT, json=_body(_packed_text(items), PACKED)))
        assert body["usage"]["completion_tokens"] >= len(content) // 4
        return int(body["usage"]["completion_tokens"])

    assert tokens(1) < tokens(4) < tokens(12)


def test_max_tokens_prices_the_402_and_truncates_with_length(gw):
    items = [(f"r{i}", REVIEWS[i % len(REVIEWS)]) for i in range(10)]
    body = _body(_packed_text(items), PACKED)
    small = gw.amount(CHAT, json=body | {"max_tokens": 20})
    large = gw.amount(CHAT, json=body | {"max_tokens": 200_000})
    assert small <= large
    content, answer = _answer(gw.pay(CHAT, json=body | {"max_tokens": 20}))
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"]["completion_tokens"] <= 20
    with pytest.raises(ValueError):
        json.loads(content)


def _violation(content: str, finish: str, ids: list[str]) -> str:
    if finish == "length":
        return "truncated"
    try:
        value = json.loads(content)
    except ValueError:
        return "invalid_json"
    got = [e["id"] for e in value["items"]]
    if len(got) < len(ids):
        return "missing_item"
    if len(got) > len(ids):
        return "duplicated_item"
    enum = SENTIMENT["properties"]["sentiment"]["enum"]
    if any(e["sentiment"] not in enum for e in value["items"]):
        return "outside_enum"
    return "none"


def test_each_schema_violation_kind_appears(emulator_factory, payer):
    emulator = emulator_factory(schema_violation_rate=1.0)
    seen: dict[str, int] = {}
    with httpx.Client(base_url=emulator.gateway_url, timeout=30) as client:
        gw = Gateway(client, payer)
        for n in range(40):
            items = [(f"r{n}-{i}", f"{REVIEWS[i]} (order {n})") for i in range(3)]
            content, body = _answer(gw.pay(CHAT, json=_body(_packed_text(items), PACKED)))
            kind = _violation(content, body["choices"][0]["finish_reason"], [i for i, _ in items])
            seen[kind] = seen.get(kind, 0) + 1
    assert set(seen) == {
        "truncated",
        "invalid_json",
        "missing_item",
        "duplicated_item",
        "outside_enum",
    }, seen


def test_no_violation_without_the_fault(gw):
    for n in range(5):
        items = [(f"r{n}-{i}", f"{REVIEWS[i]} (order {n})") for i in range(3)]
        content, body = _answer(gw.pay(CHAT, json=_body(_packed_text(items), PACKED)))
        assert _violation(content, body["choices"][0]["finish_reason"], []) != "truncated"
        jsonschema.validate(json.loads(content), PACKED)


def test_embeddings_take_a_list_and_answer_one_vector_per_input_in_order(gw):
    texts = ["battery", "delivery was slow", "battery"]
    response = gw.pay("/api/v1/embeddings", json={"model": _embed_model(gw), "input": texts})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert [d["index"] for d in data] == [0, 1, 2]
    assert data[0]["embedding"] == data[2]["embedding"] != data[1]["embedding"]


def _embed_model(gw: Gateway) -> str:
    catalog = gw.get("/api/v1/models", params={"type": "embedding"}).json()
    entries = catalog.get("data", catalog) if isinstance(catalog, dict) else catalog
    return next(m["id"] for m in entries if m.get("type") == "embedding")


def test_simulated_mistakes_grow_with_the_pack_and_differ_between_models():
    texts = [f"Great battery number {i}, love it" for i in range(400)]

    def wrong(model: str, price: float, size: int) -> int:
        errors = 0
        for start in range(0, len(texts), size):
            chunk = texts[start : start + size]
            prompt = json.dumps([{"id": str(i), "text": t} for i, t in enumerate(chunk)])
            value = answer("json_schema", PACKED, prompt, model_id=model, output_usd_per_m=price)
            errors += sum(e["sentiment"] != "positive" for e in value["items"])
        return errors

    assert wrong("cheap", 0.4, 40) > wrong("cheap", 0.4, 1)
    assert wrong("cheap", 0.4, 40) > wrong("dear", 225.0, 40)


CONSTRAINED = {
    "type": "object",
    "properties": {
        "stars": {"type": ["integer", "null"], "minimum": 1, "maximum": 5},
        "score": {"anyOf": [{"type": "number", "exclusiveMaximum": 10}, {"type": "null"}]},
        "summary": {"type": ["string", "null"]},
        "order": {"type": ["string", "null"], "pattern": "^ORD-[0-9]{4}$"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "topic": {"type": ["string", "null"], "enum": ["battery", "screen", None]},
    },
    "required": ["stars", "score", "summary", "order", "tags", "topic"],
    "additionalProperties": False,
}


def test_nullable_fields_are_null_when_the_item_holds_no_value(gw):
    cases = {
        "Order ORD-1234: battery died after 20 days": {"stars": 5, "order": "ORD-1234"},
        "No number in this screen review at all": {"stars": None, "score": None, "order": None},
        "Too short": {"stars": None, "summary": None, "topic": None},
    }
    for text, expected in cases.items():
        content, _ = _answer(gw.pay(CHAT, json=_body(text, CONSTRAINED)))
        value = json.loads(content)
        jsonschema.validate(value, CONSTRAINED)  # inside every bound, pattern and maxItems
        assert {k: value[k] for k in expected} == expected, (text, value)


def test_constraint_violations_are_right_typed_values_outside_the_schema(emulator_factory, payer):
    emulator = emulator_factory(constraint_violation_rate=1.0)
    validator = jsonschema.Draft202012Validator(PACKED_CONSTRAINED)
    broken: set[str] = set()
    with httpx.Client(base_url=emulator.gateway_url, timeout=30) as client:
        gw = Gateway(client, payer)
        for n in range(12):
            items = [(f"r{n}-{i}", f"Order ORD-{1000 + n} battery, {i} days") for i in range(3)]
            content, body = _answer(
                gw.pay(CHAT, json=_body(_packed_text(items), PACKED_CONSTRAINED))
            )
            value = json.loads(content)  # still JSON, every item there, finish "stop"
            assert [e["id"] for e in value["items"]] == [i for i, _ in items]
            assert body["choices"][0]["finish_reason"] == "stop"
            errors = list(validator.iter_errors(value))
            assert len(errors) == 3  # one field of each entry, at rate 1.0
            for error in errors:
                assert error.validator in {
                    "maximum",
                    "anyOf",  # the nullable score past its exclusiveMaximum
                    "pattern",
                    "maxItems",
                    "enum",
                }
                broken.add(str(error.validator))
    assert {"maximum", "pattern", "maxItems"} <= broken


PACKED_CONSTRAINED = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                **CONSTRAINED,
                "properties": {"id": {"type": "string"}} | CONSTRAINED["properties"],
                "required": ["id", *CONSTRAINED["required"]],
            },
        }
    },
    "required": ["items"],
    "additionalProperties": False,
}

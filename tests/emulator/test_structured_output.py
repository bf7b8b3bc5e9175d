"""The emulator's structured output: ``response_format`` published and honoured, answers valid
under the request's schema and derived from each item, models without it refused before any
payment, and ``schema_violation_rate`` breaking answers in each documented way."""

from __future__ import annotations

import json
import secrets
from collections import Counter

import httpx
import jsonschema
import pytest

import x402lab as xl
from x402lab.emulator.gateway.structured import VIOLATIONS, answer, violate

CHAT = "/api/v1/chat/completions"
MODEL = "zai-org-glm-4.7-flash"
ENTRY = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "label": {"type": "string", "enum": ["positive", "negative", "neutral"]},
        "stars": {"type": "integer", "minimum": 1, "maximum": 5},
        "mentions_price": {"type": "boolean"},
        "words": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["id", "label", "stars", "mentions_price", "words"],
    "additionalProperties": False,
}
PACK = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": ENTRY}},
    "required": ["items"],
    "additionalProperties": False,
}
TEXTS = ["Great battery, love it", "Arrived broken, want a refund", "Price is fine, 3 stars"]


def body(texts: list[str], model: str = MODEL, schema: dict = PACK, **extra) -> dict:
    items = [{"id": str(i), "text": t} for i, t in enumerate(texts)]
    return {
        "model": model,
        "messages": [{"role": "user", "content": "Classify.\nItems:\n" + json.dumps(items)}],
        "max_tokens": 400,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "rows", "schema": schema},
        },
        **extra,
    }


@pytest.fixture
def lab(emulator, tmp_path):
    lab = xl.connect(
        emulator.gateway_url, emulator.reports_url,
        wallet=xl.Wallet.from_key("0x" + secrets.token_hex(32)), ledger=tmp_path / "l.sqlite",
    )  # fmt: skip
    yield lab
    lab.close()


def content(result) -> tuple[str, dict]:
    choice = result.data["choices"][0]
    return choice["message"]["content"], result.data["usage"] | {"finish": choice["finish_reason"]}


def test_response_format_is_published_in_the_chat_request_schema(emulator):
    spec = httpx.get(f"{emulator.gateway_url}/openapi.json").json()
    chat = spec["paths"][CHAT]["post"]["requestBody"]["content"]["application/json"]["schema"]
    forms = chat["properties"]["response_format"]["anyOf"]
    kinds = {k for form in forms for k in form["properties"]["type"]["enum"]}
    assert kinds == {"json_schema", "json_object", "text"}


def test_a_packed_answer_is_valid_and_each_item_answers_for_itself(lab):
    text, usage = content(lab.call("POST", CHAT, body(TEXTS)))
    value = json.loads(text)
    jsonschema.validate(value, PACK)
    assert [e["id"] for e in value["items"]] == ["0", "1", "2"]
    assert [e["label"] for e in value["items"]] == ["positive", "negative", "neutral"]
    assert value["items"][2]["stars"] == 3 and value["items"][2]["mentions_price"] is True
    assert usage["completion_tokens"] == -(-len(text) // 4) and usage["finish"] == "stop"
    # The same item alone gets the same answer (no simulated mistake at these sizes here).
    alone = json.loads(content(lab.call("POST", CHAT, body(TEXTS[1:2])))[0])["items"][0]
    assert {k: v for k, v in alone.items() if k != "id"} == {
        k: v for k, v in value["items"][1].items() if k != "id"
    }


def test_simulated_mistakes_grow_with_the_pack_and_differ_between_models():
    texts = [f"Great battery number {i}, love it" for i in range(400)]

    def wrong(model: str, price: float, size: int) -> int:
        errors = 0
        for start in range(0, len(texts), size):
            chunk = texts[start : start + size]
            prompt = json.dumps([{"id": str(i), "text": t} for i, t in enumerate(chunk)])
            value = answer("json_schema", PACK, prompt, model_id=model, output_usd_per_m=price)
            errors += sum(e["label"] != "positive" for e in value["items"])
        return errors

    assert wrong("cheap", 0.4, 40) > wrong("cheap", 0.4, 1)
    assert wrong("cheap", 0.4, 40) > wrong("dear", 225.0, 40)


def test_json_object_answers_an_object(lab):
    request = body(["hello there"])
    request["response_format"] = {"type": "json_object"}
    text, _ = content(lab.call("POST", CHAT, request))
    assert isinstance(json.loads(text), dict)


def test_a_model_without_structured_output_is_refused_before_payment(lab, emulator):
    with pytest.raises(xl.ApiError, match="does not support response_format json_schema"):
        lab.call("POST", CHAT, body(TEXTS, model="llama-3.2-3b"))
    assert emulator.chain.transfers() == []
    models = httpx.get(f"{emulator.gateway_url}/api/v1/models", params={"type": "text"}).json()
    flags = {
        m["id"]: m["model_spec"]["capabilities"]["supportsResponseSchema"] for m in models["data"]
    }
    assert flags["llama-3.2-3b"] is False and flags[MODEL] is True


def test_answers_are_cut_at_max_tokens(lab):
    text, usage = content(lab.call("POST", CHAT, body(TEXTS, max_tokens=10)))
    assert usage["finish"] == "length" and usage["completion_tokens"] == 10
    with pytest.raises(ValueError):
        json.loads(text)


def test_each_violation_kind_breaks_the_answer_its_own_way():
    value = answer("json_schema", PACK, json.dumps([{"id": "0", "t": "a"}, {"id": "1", "t": "b"}]),
                   model_id=MODEL, output_usd_per_m=0.4)  # fmt: skip
    seen = Counter()
    for i, kind in enumerate(VIOLATIONS):
        text, finish = violate(value, PACK, (i + 0.5) / len(VIOLATIONS))
        seen[kind] += 1
        if kind in ("invalid_json", "truncated"):
            with pytest.raises(ValueError):
                json.loads(text)
            assert (finish == "length") == (kind == "truncated")
            continue
        broken = json.loads(text)
        with pytest.raises(
            jsonschema.ValidationError if kind == "outside_enum" else AssertionError
        ):
            jsonschema.validate(broken, PACK)
            ids = [e["id"] for e in broken["items"]]
            assert ids == ["0", "1"], ids
    assert set(seen) == set(VIOLATIONS)


def test_the_violation_rate_breaks_about_that_share_of_answers(emulator_factory, tmp_path):
    emulator = emulator_factory(schema_violation_rate=0.5, seed=3)
    lab = xl.connect(
        emulator.gateway_url, emulator.reports_url,
        wallet=xl.Wallet.from_key("0x" + secrets.token_hex(32)), ledger=tmp_path / "l.sqlite",
    )  # fmt: skip
    try:
        broken = 0
        for i in range(20):
            text, _ = content(lab.call("POST", CHAT, body([f"review {i} great"] + TEXTS)))
            try:
                jsonschema.validate(json.loads(text), PACK)
                ids = [e["id"] for e in json.loads(text)["items"]]
                broken += ids != ["0", "1", "2", "3"]
            except (ValueError, jsonschema.ValidationError):
                broken += 1
        assert 4 <= broken <= 16
    finally:
        lab.close()

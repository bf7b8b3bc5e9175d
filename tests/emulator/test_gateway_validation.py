"""The gateway refuses what its published request schemas call invalid, and only that.

The emulator checks JSON bodies with its own small JSON Schema reader (no run-time
dependency); here it is compared with ``jsonschema`` on the schemas /openapi.json publishes,
over generated bodies, and the answers of the running gateway are checked for the requests
schemathesis once found accepted although the schema called them invalid.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from x402lab.emulator.gateway.catalog import Catalog
from x402lab.emulator.gateway.route_table import ROUTES as ROUTE_SPECS
from x402lab.emulator.gateway.route_table import request_schemas
from x402lab.emulator.gateway.validation import violations

sys.path.append(str(Path(__file__).parent))
from test_gateway_support import Gateway, error_of  # noqa: E402

SCHEMAS = request_schemas(Catalog.from_fixtures())
ROUTES = sorted(path for _, path in SCHEMAS)

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=5000),
    st.floats(min_value=-10, max_value=20000, allow_nan=False),
    st.sampled_from(["", "x", "user", "robot", "5s", "60", "http://a.example", "https://www."]),
    st.text(max_size=12),
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=6,
)


# A valid body per route (the route table's examples, and these for routes without one).
BASES: dict[str, dict[str, Any]] = {
    spec.path: dict(spec.example) for spec in ROUTE_SPECS if spec.example
} | {
    "/api/v1/audio/quote": {"model": "ace-step-15", "duration_seconds": 60},
    "/api/v1/audio/retrieve": {"model": "ace-step-15", "queue_id": "q"},
    "/api/v1/audio/complete": {"model": "ace-step-15", "queue_id": "q"},
    "/api/v1/video/quote": {"model": "wan-2-7-text-to-video", "duration": "5s"},
    "/api/v1/video/retrieve": {"model": "wan-2-7-text-to-video", "queue_id": "q"},
    "/api/v1/video/complete": {"model": "wan-2-7-text-to-video", "queue_id": "q"},
}


def _values_for(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values near a property's schema: its enum members, its alternatives, or any JSON."""
    options: list[st.SearchStrategy[Any]] = [_JSON]
    if "enum" in schema:
        options.append(st.sampled_from(schema["enum"]))
    for branch in schema.get("anyOf", []):
        options.append(_values_for(branch))
    items = schema.get("items")
    if isinstance(items, dict):
        options.append(st.lists(_values_for(items), max_size=3))
    if "properties" in schema:
        options.append(
            st.fixed_dictionaries(
                {}, optional={k: _values_for(v) for k, v in schema["properties"].items()}
            )
        )
    return st.one_of(*options)


@st.composite
def _mutated(draw: st.DrawFn, path: str) -> Any:
    """The route's valid body with up to two properties dropped or replaced."""
    schema = SCHEMAS[("POST", path)]
    body = dict(BASES[path])
    properties = schema.get("properties", {})
    names = sorted({*properties, *body})
    for _ in range(draw(st.integers(0, 2))):
        name = draw(st.sampled_from(names))
        if draw(st.booleans()):
            body.pop(name, None)
        else:
            body[name] = draw(_values_for(properties.get(name, {})))
    return body if draw(st.integers(0, 19)) else draw(_JSON)


def test_every_route_has_a_valid_base_body():
    assert set(BASES) >= set(ROUTES)
    for path in ROUTES:
        assert violations(BASES[path], SCHEMAS[("POST", path)]) == [], path


@pytest.mark.parametrize("path", ROUTES)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_emulator_reads_schemas_like_jsonschema(path, data):
    schema = SCHEMAS[("POST", path)]
    body = data.draw(_mutated(path))
    expected = jsonschema.Draft202012Validator(schema).is_valid(body)
    found = violations(body, schema)
    assert (not found) == expected, (body, found)


def test_a_violation_names_the_field_and_the_rule():
    schema = SCHEMAS[("POST", "/api/v1/chat/completions")]
    body = {"model": "m", "messages": [{"role": "robot", "content": "hi"}]}
    [role] = [v for v in violations(body, schema) if v.path[:1] == ("messages",)]
    assert role.where == "messages[0].role" and role.keyword == "enum"


@pytest.fixture
def gw(emulator, payer):
    with httpx.Client(base_url=emulator.gateway_url) as client:
        yield Gateway(client, payer)


CHAT = {"model": "zai-org-glm-4.7-flash", "messages": [{"role": "user", "content": "hi"}]}
EDIT = {
    "model": "firered-image-edit",
    "prompt": "combine",
    "images": ["https://example.org/a.png"],
}

# Requests schemathesis found accepted (200 or 402) although the published schema refuses them.
REFUSED = [
    ("/api/v1/chat/completions", {**CHAT, "messages": [{"role": "robot", "content": "hi"}]}),
    ("/api/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": 5}]}),
    ("/api/v1/chat/completions", {**CHAT, "messages": [{"role": "user"}]}),
    ("/api/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": ["x"]}]}),
    ("/api/v1/audio/quote", {"model": "ace-step-15", "duration_seconds": None}),
    ("/api/v1/image/multi-edit", {**EDIT, "return_binary": None}),
    ("/api/v1/image/generate", {"model": "z-image-turbo", "prompt": "a", "return_binary": None}),
    ("/api/v1/image/generate", {"model": "z-image-turbo", "prompt": "a", "seed": "7"}),
    ("/api/v1/images/generations", {"model": "z-image-turbo", "prompt": "a", "size": "640x480"}),
    ("/api/v1/images/generations", {"model": "z-image-turbo", "prompt": "a", "n": "2"}),
]


@pytest.mark.parametrize(("path", "body"), REFUSED)
def test_a_body_the_schema_refuses_is_400_before_any_402(gw, emulator, path, body):
    error = error_of(gw.post(path, json=body), 400, "invalid_request")
    assert "openapi.json" in error["hint"]
    assert emulator.chain.transfers() == []


@pytest.mark.parametrize("kind", ["audio", "video"])
def test_complete_refuses_an_unknown_model_but_not_an_unknown_id(gw, kind):
    model = {"audio": "ace-step-15", "video": "wan-2-7-text-to-video"}[kind]
    path = f"/api/v1/{kind}/complete"
    error_of(gw.post(path, json={"model": "AAA", "queue_id": "0"}), 400, "model_not_found")
    answer = gw.post(path, json={"model": model, "queue_id": "no-such-job"})
    assert answer.status_code == 200
    assert answer.json() == {"success": True, "alreadyCompleted": True}
    # ... and the published description allows that answer.
    operation = gw.get("/openapi.json").json()["paths"][path]["post"]
    published = operation["responses"]["200"]["content"]["application/json"]["schema"]
    jsonschema.validate(answer.json(), published)


def test_a_huge_token_count_is_charge_exceeds_max_not_a_server_error(gw):
    body = {"model": "zai-org-glm-4.7-flash", "input": "hi", "max_output_tokens": 10**40}
    error_of(gw.post("/api/v1/responses", json=body), 400, "charge_exceeds_max")
    error_of(
        gw.post("/api/v1/chat/completions", json={**CHAT, "max_tokens": 10**40}),
        400,
        "charge_exceeds_max",
    )

"""The gateway refuses what its published request schemas call invalid, and only that.

The emulator checks JSON bodies with ``jsonschema_rs`` against the schemas /openapi.json
publishes; here every route's example body passes, a violation names its field and keyword,
and the answers of the running gateway are checked for the requests schemathesis once found
accepted although the schema called them invalid. An answer's fit to its published schema is
judged by ``jsonschema``, the reference implementation (what any client would use).
"""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema
import pytest
from support.gateway import Gateway, error_of

from x402lab.emulator.gateway.catalog import Catalog
from x402lab.emulator.gateway.route_table import ROUTES as ROUTE_SPECS
from x402lab.emulator.gateway.route_table import request_schemas
from x402lab.emulator.gateway.validation import body_validator, violations

SCHEMAS = request_schemas(Catalog.from_fixtures())
ROUTES = sorted(path for _, path in SCHEMAS)

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


def test_every_route_has_a_valid_base_body():
    assert set(BASES) >= set(ROUTES)
    for path in ROUTES:
        assert violations(BASES[path], body_validator(SCHEMAS[("POST", path)])) == [], path


def test_a_violation_names_the_field_and_the_rule():
    schema = SCHEMAS[("POST", "/api/v1/chat/completions")]
    body = {"model": "m", "messages": [{"role": "robot", "content": "hi"}]}
    found = violations(body, body_validator(schema))
    [role] = [v for v in found if v.path[:1] == ("messages",)]
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

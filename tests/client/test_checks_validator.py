"""The request-schema reader on schemas the emulator does not publish but a gateway may:
``$ref`` to components, nullable, open objects, nested closed objects, keywords it does not
know (which never refuse), and paths with parameters."""

from __future__ import annotations

from typing import Any

import pytest

import x402lab as xl
from x402lab.gateway.params import RequestSchema, find_route, request_schema_of, routes_of

DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "paths": {
        "/v1/things/{kind}": {
            "parameters": [{"name": "kind", "in": "path"}],
            "post": {
                "responses": {"402": {"description": "pay"}},
                "requestBody": {"$ref": "#/components/requestBodies/Thing"},
            },
        },
        "/v1/things/special": {"post": {"x-payment-info": {}, "responses": {}}},
        "/v1/open": {
            "post": {
                "responses": {"402": {}},
                "requestBody": {
                    "content": {
                        "application/json": {
                            "schema": {"type": "object", "additionalProperties": True}
                        }
                    }
                },
            }
        },
        "/v1/free": {"get": {"responses": {"200": {}}}},
    },
    "components": {
        "requestBodies": {
            "Thing": {
                "content": {
                    "application/json; charset=utf-8": {
                        "schema": {"$ref": "#/components/schemas/T"}
                    }
                }
            }
        },
        "schemas": {
            "T": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "minLength": 1, "x-unknown-keyword": 3},
                    "size": {"type": ["integer", "null"], "exclusiveMinimum": 0},
                    "note": {"type": "string", "nullable": True, "format": "no-such-format"},
                    "tags": {"type": "array", "maxItems": 2, "items": {"enum": ["a", "b"]}},
                    "options": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"fast": {"type": "boolean"}},
                    },
                    "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                },
            }
        },
    },
}


def schema_of(method: str, path: str) -> RequestSchema:
    route = find_route(routes_of(DOCUMENT), method, path)
    assert route is not None
    found = request_schema_of(DOCUMENT, route)
    assert found is not None
    return found


def test_routes_templates_and_paid_marks():
    listed = routes_of(DOCUMENT)
    assert [str(r) for r in listed if r.paid] == [
        "POST /v1/things/{kind}",
        "POST /v1/things/special",
        "POST /v1/open",
    ]
    assert find_route(listed, "post", "/v1/things/special").path == "/v1/things/special"
    assert find_route(listed, "POST", "/v1/things/red").path == "/v1/things/{kind}"
    assert find_route(listed, "POST", "/v1/things/red/blue") is None
    assert find_route(listed, "POST", "/v1/free") is None
    assert request_schema_of(DOCUMENT, find_route(listed, "POST", "/v1/things/special")) is None


def test_a_body_that_fits_passes_and_unknown_keywords_refuse_nothing():
    schema = schema_of("POST", "/v1/things/red")
    assert schema.fields == ("name", "size", "note", "tags", "options", "code")
    schema.check(
        {"name": "x", "size": None, "note": None, "tags": ["a"], "options": {"fast": True}},
        caller="thing()",
    )
    schema.check({"name": "x", "size": 2.0, "code": "ABC"}, caller="thing()")  # 2.0 is whole


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({}, "name is required"),
        ({"name": ""}, "name='' is not allowed: it must be a non-empty string"),
        ({"name": "x", "size": 0}, "size=0 is not allowed: it must be an integer > 0 or None"),
        ({"name": "x", "size": True}, "size=True is not allowed"),
        ({"name": "x", "tags": ["a", "c"]}, "tags[1]='c' is not allowed: it must be one of 'a'"),
        ({"name": "x", "tags": ["a"] * 3}, "a list of at most 2 items"),
        ({"name": "x", "options": {"slow": 1}}, "options.slow=1 is not allowed: it must be absent"),
        ({"name": "x", "code": "abc"}, "it must be a string matching ^[A-Z]{3}$"),
        ({"name": "x", "size": float("nan")}, "size=nan is not allowed"),
    ],
)
def test_values_the_schema_refuses(body, says):
    with pytest.raises(xl.ConfigError) as caught:
        schema_of("POST", "/v1/things/red").check(body, caller="thing()")
    assert str(caught.value).startswith("thing(): ")
    assert says in str(caught.value)
    assert "POST /v1/things/{kind} publishes" in str(caught.value)


def test_unknown_fields_own_fields_and_open_schemas():
    schema = schema_of("POST", "/v1/things/red")
    with pytest.raises(TypeError, match="unexpected keyword arguments 'nme', 'colour'"):
        schema.check({"nme": "x", "colour": 1}, caller="thing()")
    schema.check({"name": "x", "internal": 1}, caller="thing()", own=("internal",))
    with pytest.raises(TypeError, match="call\\(\\) got an unexpected body field 'nam'"):
        schema.check({"nam": "x"}, caller="call()")
    open_schema = schema_of("POST", "/v1/open")
    assert open_schema.fields is None
    open_schema.check({"anything": [1, 2]}, caller="open()")

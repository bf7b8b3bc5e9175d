"""The request-schema reader on schemas the emulator does not publish but a gateway may:
``$ref`` to components, nullable, open objects, nested closed objects, keywords it does not
know (which never refuse), and paths with parameters."""

from __future__ import annotations

from typing import Any

import pytest
from support.http_server import QuietHandler, serving

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


def schema_for(properties: dict[str, Any], **components: Any) -> RequestSchema:
    """The request schema of a one-route document whose body has ``properties``."""
    document = {
        "paths": {
            "/v1/x": {
                "post": {
                    "responses": {"402": {}},
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {"type": "object", "properties": properties}
                            }
                        }
                    },
                }
            }
        },
        "components": components,
    }
    found = request_schema_of(document, routes_of(document)[0])
    assert found is not None
    return found


def refused(schema: RequestSchema, body: Any) -> str:
    with pytest.raises(xl.ConfigError) as caught:
        schema.check(body, caller="x()")
    return str(caught.value)


def test_python_values_are_read_as_the_json_they_stand_for():
    import enum
    from types import MappingProxyType

    import numpy as np

    class Colour(enum.StrEnum):
        RED = "red"

    schema = schema_for(
        {
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "options": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "colour": {"enum": ["red", "blue"]},
            "shade": {"enum": ["red", "blue"]},
            "n": {"type": "integer", "minimum": 1},
            "scale": {"type": "number"},
        }
    )
    schema.check(
        {
            "tags": ("a", "b"),  # a tuple is an array
            "options": MappingProxyType({"n": np.int64(2)}),  # any Mapping is an object
            "colour": Colour.RED,  # a str enum is its value
            "shade": np.str_("blue"),  # a str subclass (numpy's, from an array) is its text
            "n": np.int64(3),
            "scale": np.float32(0.5),
        },
        caller="x()",
    )
    # The caller's own value is shown: the tuple they gave, not the list it was read as.
    assert "tags=('a', 'b', 'c') is not allowed: it must be a list of at most 2 items" in (
        refused(schema, {"tags": ("a", "b", "c")})
    )
    assert "options.n='2' is not allowed: it must be an integer" in refused(
        schema, {"options": MappingProxyType({"n": "2"})}
    )
    assert "n=np.int64(0) is not allowed: it must be an integer ≥ 1" in refused(
        schema, {"n": np.int64(0)}
    )


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (float("nan"), "scale=nan is not allowed: it must be a finite number"),
        (float("-inf"), "scale=-inf is not allowed: it must be a finite number"),
        (True, "scale=True is not allowed: it must be a number"),  # a bool is no number
        (None, "scale=None is not allowed: it must be a number"),  # NaN is not read as null
    ],
)
def test_nan_infinities_and_bools_are_not_numbers(value, says):
    assert says in refused(schema_for({"scale": {"type": "number"}}), {"scale": value})


def test_an_object_json_cannot_hold_is_named_and_the_rest_still_checked():
    from decimal import Decimal

    message = refused(
        schema_for({"price": {"type": "number"}, "n": {"type": "integer"}}),
        {"price": Decimal("1.5"), "n": "x"},
    )
    assert "price=Decimal('1.5') is not allowed: it must be a JSON value" in message
    assert "not decimal.Decimal" in message
    assert "n='x' is not allowed: it must be an integer" in message


def test_openapi_30_nullable_and_boolean_exclusive_bounds():
    schema = schema_for(
        {
            "note": {"type": "string", "nullable": True, "maxLength": 3},
            "size": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
            "top": {"type": "integer", "maximum": 9, "exclusiveMaximum": False},
        }
    )
    schema.check({"note": None, "size": 1, "top": 9}, caller="x()")
    assert "note=5 is not allowed: it must be a string of at most 3 characters or None" in (
        refused(schema, {"note": 5})
    )
    assert "size=0 is not allowed: it must be an integer > 0" in refused(schema, {"size": 0})
    assert "top=10 is not allowed: it must be an integer ≤ 9" in refused(schema, {"top": 10})


def test_a_pattern_the_regex_engine_cannot_compile_refuses_nothing():
    schema = schema_for(
        {"code": {"type": "string", "pattern": "(unclosed"}, "n": {"type": "integer"}}
    )
    schema.check({"code": "anything"}, caller="x()")
    assert "n='1' is not allowed" in refused(
        schema, {"code": "anything", "n": "1"}
    )  # still checked


def test_a_remote_or_missing_reference_is_left_to_the_gateway_and_never_fetched():
    asked: list[str] = []

    class Schemas(QuietHandler):
        def do_GET(self) -> None:  # a schema that would refuse the body below
            asked.append(self.path)
            self.reply(b'{"type": "integer"}', "application/schema+json")

    with serving(Schemas) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/n.json"
        remote = schema_for({"n": {"$ref": url}})
        remote.check({"n": "not an integer"}, caller="x()")  # not checked here: the gateway's
        assert asked == []  # and nothing was fetched
    missing = schema_for({"n": {"$ref": "#/components/schemas/Gone"}}, schemas={})
    missing.check({"n": "anything at all"}, caller="x()")
    local = schema_for(
        {"n": {"$ref": "#/components/schemas/N"}}, schemas={"N": {"type": "integer"}}
    )
    assert "n='1' is not allowed: it must be an integer" in refused(local, {"n": "1"})

"""Typed answers an analyst can trust: nullable fields in each schema form, the whole JSON
Schema enforced (bounds, pattern, maxItems) under the emulator's constraint-violation fault,
a pydantic model's own validators, and exact decimal money that adds up to the chain."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Optional

import jsonschema
import jsonschema_rs
import pandas as pd
import pyarrow as pa
import pytest
from support.batch import CHEAP, chain_atomic

import x402lab as xl
from x402lab.batch.kinds import output_spec

# Texts with a year, without any digit (20 characters or more), and short (under 20).
TEXTS = [
    "Bought it in 2019 and the battery still works",
    "The screen is bright and the support team was friendly",
    "Arrived broken",
    "Great value, I paid 40 for it",
    "Delivery was slow but the price is right",
    "Meh",
]
HAS_DIGIT = [any(c.isdigit() for c in t) for t in TEXTS]
SHORT = [len(t) < 20 for t in TEXTS]


def reviews(n: int = len(TEXTS)) -> pd.DataFrame:
    return pd.DataFrame({"review": [TEXTS[i % len(TEXTS)] for i in range(n)]})


def extract(lab, frame, schema, **kwargs):
    kwargs.setdefault("rows_per_request", 6)
    return lab.batch_chat(
        frame, prompt="Extract from this review: {review}", model=CHEAP, schema=schema,
        progress=None, **kwargs,
    )  # fmt: skip


def pydantic_review():
    import pydantic

    class Review(pydantic.BaseModel):
        year: int | None = None
        summary: Optional[str] = None  # noqa: UP045 (the spelling users write)
        rating: int

    return Review


NULLABLE_FORMS = {
    "mapping": {"year": int | None, "summary": Optional[str], "rating": int},  # noqa: UP045
    "json_schema": {
        "type": "object",
        "properties": {
            "year": {"type": ["integer", "null"]},
            "summary": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "rating": {"type": "integer"},
        },
        "required": ["year", "summary", "rating"],
    },
    "pydantic": pydantic_review,
}


@pytest.mark.parametrize("form", list(NULLABLE_FORMS))
def test_a_nullable_field_is_null_where_the_item_has_no_value_in_every_schema_form(
    emulator, lab_factory, form
):
    schema = NULLABLE_FORMS[form]
    schema = schema() if callable(schema) else schema
    lab = lab_factory(emulator)
    frame = extract(lab, reviews(), schema)
    assert set(frame["status"]) == {"ok"}
    # Null where the item gives no value (no digit; under 20 characters), never 0 or "".
    assert frame["year"].isna().tolist() == [not d for d in HAS_DIGIT]
    assert frame.loc[HAS_DIGIT, "year"].tolist() == [2019, 40, 40][: sum(HAS_DIGIT)]
    assert frame["summary"].isna().tolist() == SHORT
    assert not frame["summary"].eq("").any()
    assert frame["rating"].notna().all()  # not nullable: always answered
    assert str(frame["year"].dtype) == "Int64"  # the nullable integer dtype
    # The request told the model to answer null, and the raw answers hold JSON nulls.
    assert all(json.loads(r)["year"] is None for r in frame.loc[~pd.Series(HAS_DIGIT), "response"])
    spec = output_spec(schema=schema)
    assert spec is not None and "null when the item does not give its value" in spec.instructions()


def test_a_list_of_allowed_strings_with_none_is_a_nullable_enum(emulator, lab_factory):
    lab = lab_factory(emulator)
    frame = extract(lab, reviews(), {"topic": ["battery", "screen", "price", None]})
    assert set(frame["status"]) == {"ok"}
    # Null where the review names none of them (nor a word for one: "value" names price).
    named = ["battery", "screen", None, "price", "price", None]
    assert frame["topic"].isna().tolist() == [n is None for n in named]
    assert set(frame["topic"].dropna()) <= {"battery", "screen", "price"}


BOUNDED = {
    "type": "object",
    "properties": {
        "rating": {"type": "integer", "minimum": 1, "maximum": 5},
        "order": {"type": ["string", "null"], "pattern": "^ORD-[0-9]{4}$"},
        "keywords": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    },
    "required": ["rating", "order", "keywords"],
}


def test_the_whole_json_schema_is_enforced_under_constraint_violations(
    emulator_factory, lab_factory
):
    emulator = emulator_factory(constraint_violation_rate=0.3, seed=5)
    lab = lab_factory(emulator)
    frame = pd.DataFrame(
        {"review": [f"Order ORD-{1000 + i} arrived, rated {i % 7} of 5" for i in range(120)]}
    )
    with pytest.warns(xl.IncompleteBatchWarning, match="invalid"):
        out = extract(lab, frame, BOUNDED, rows_per_request=10)
    assert set(out["status"]) == {"ok", "invalid"}
    # The outside judge is the reference implementation, jsonschema: every ok row validates
    # against the whole schema the user gave (nothing was clamped), every invalid row does not.
    judge = jsonschema.Draft202012Validator(BOUNDED)
    ok = out[out["status"] == "ok"]
    for raw in ok["response"]:
        assert list(judge.iter_errors(json.loads(raw))) == []
    assert ok["rating"].between(1, 5).all() and ok["order"].str.fullmatch(r"ORD-\d{4}").all()
    assert (ok["keywords"].map(len) <= 2).all()
    # The others are invalid with one of the validator's own messages, their typed columns null.
    invalid = out[out["status"] == "invalid"]
    assert len(invalid) >= 1
    check = jsonschema_rs.Draft202012Validator(BOUNDED)
    for raw, error in zip(invalid["response"], invalid["error"], strict=True):
        answer = json.loads(raw)
        assert not judge.is_valid(answer)
        messages = [e.message for e in check.iter_errors(answer)]
        assert any(m in error for m in messages), (error, messages)
    assert invalid[["rating", "order", "keywords"]].isna().all().all()
    # Rows were asked again (more payments than packs), and every share is on a row:
    # the rows' paid_usd add up exactly to the chain's transfers.
    assert len(emulator.chain.transfers()) > 12
    assert out["paid_usd"].dtype == pd.ArrowDtype(pa.decimal128(18, 6))
    paid = sum(out["paid_usd"].dropna(), Decimal(0))
    assert paid == Decimal(chain_atomic(emulator)).scaleb(-6)
    assert Decimal(out["paid_usd"].sum()) == paid  # pandas' own sum is exact too


def test_a_pydantic_models_field_validator_is_enforced(emulator, lab_factory):
    import pydantic

    class Purchase(pydantic.BaseModel):
        year: int | None = None
        rating: int = pydantic.Field(ge=1, le=5)

        @pydantic.field_validator("year")
        @classmethod
        def recent(cls, value: int | None) -> int | None:
            if value is not None and value < 2000:
                raise ValueError("year must be 2000 or later")
            return value

    lab = lab_factory(emulator)
    with pytest.warns(xl.IncompleteBatchWarning, match="invalid"):
        frame = extract(lab, reviews(), Purchase)
    too_old = [d and "2019" not in t for d, t in zip(HAS_DIGIT, TEXTS, strict=True)]
    assert (frame["status"] == "invalid").tolist() == too_old  # "paid 40": year 40
    assert frame.loc[too_old, "error"].str.contains("year must be 2000 or later").all()
    assert frame.loc[too_old, "year"].isna().all()
    ok = frame[frame["status"] == "ok"]
    assert ok["year"].dropna().ge(2000).all() and ok["rating"].between(1, 5).all()
    # A re-run pays nothing and the validator still decides for stored answers.
    before = len(emulator.chain.transfers())
    with pytest.warns(xl.IncompleteBatchWarning, match="invalid"):
        again = extract(lab, reviews(), Purchase)
    assert len(emulator.chain.transfers()) == before
    assert (again["status"] == "invalid").tolist() == too_old


def test_rules_a_strict_response_format_cannot_carry_are_stated_and_still_enforced():
    spec = output_spec(
        schema={
            "type": "object",
            "properties": {
                "summary": {"type": "string", "maxLength": 12},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            },
        }
    )
    assert spec is not None
    sent = json.dumps(spec.response_format())
    assert "maxLength" not in sent and "uniqueItems" not in sent
    assert "summary: maxLength 12" in spec.instructions()
    assert "tags: uniqueItems true" in spec.instructions()
    too_long = spec.check({"summary": "x" * 13, "tags": []})
    assert too_long == f'summary: "{"x" * 13}" is longer than 12 characters'
    assert (
        spec.check({"summary": "ok", "tags": ["a", "a"]})
        == 'tags: ["a","a"] has non-unique elements'
    )

    assert spec.check({"summary": "ok", "tags": ["a"]}) is None


def typed_object(**properties):
    return {"type": "object", "properties": properties, "required": list(properties)}


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        (
            typed_object(rating={"type": "integer", "minimum": "1"}),
            'the JSON Schema is not valid at properties/rating/minimum: "1" is not of type'
            ' "number"',
        ),
        (
            typed_object(code={"type": "string", "pattern": "(unclosed"}),
            'the JSON Schema is not valid at properties/code/pattern: "(unclosed" is not a "regex"',
        ),
        (
            {"$schema": "https://schemas.example.org/own", **typed_object(n={"type": "integer"})},
            "the JSON Schema names a meta-schema x402lab does not know ($schema 'https://schemas.example.org/own')",
        ),
        (
            typed_object(n={"$ref": "https://schemas.example.org/n.json"}),
            "the JSON Schema cannot be used to check answers: Resource"
            " 'https://schemas.example.org/n.json' is not present in a registry and retrieving it"
            " failed: Retrieval is disabled, cannot fetch https://schemas.example.org/n.json (a"
            " $ref must point into the schema itself, for example #/$defs/Name)",
        ),
    ],
)
def test_a_schema_that_cannot_check_answers_is_refused_before_anything_is_sent(schema, says):
    with pytest.raises(xl.ConfigError) as caught:
        output_spec(schema=schema)
    assert says in str(caught.value)


def test_the_error_that_matters_most_is_the_outermost_and_inside_the_branch_of_its_type():
    spec = output_spec(
        schema=typed_object(
            summary={"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]},
            email={"type": "string", "format": "email"},
            tags={"type": "array", "items": {"type": "string", "minLength": 2}},
        )
    )
    assert spec is not None
    valid = {"summary": None, "email": "a@b.example", "tags": ["ab"]}
    assert spec.check(valid) is None
    # A missing field (at the answer's top) before a bad item inside another field.
    assert spec.check({"summary": None, "tags": ["a"]}) == '"email" is a required property'
    # The branch of the value's own type says why, not "valid under none of the schemas".
    assert spec.check({**valid, "summary": "too long"}) == (
        'summary: "too long" is longer than 5 characters'
    )
    # No branch of its type: the choice itself is the error.
    assert spec.check({**valid, "summary": 5}) == (
        "summary: 5 is not valid under any of the schemas listed in the 'anyOf' keyword"
    )
    assert spec.check({**valid, "email": "nobody"}) == 'email: "nobody" is not a "email"'
    assert spec.check({**valid, "tags": ["ab", "c"]}) == 'tags.1: "c" is shorter than 2 characters'

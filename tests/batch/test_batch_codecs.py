"""The codec of each batch kind (its request bodies, answers, storage and re-asking), the plan
built through it, and RunOptions: pure pieces, no service needed."""

from __future__ import annotations

import json
from decimal import Decimal

import numpy as np
import pytest

from x402lab.batch.concurrency import AutoConcurrency
from x402lab.batch.kinds import ChatCodec, EmbedCodec, TypedCodec, output_spec
from x402lab.batch.options import QUOTES_IN_FLIGHT, RunOptions
from x402lab.batch.prepare import ChatTask, plan_of
from x402lab.batch.prepare._request_plan import BodyKeys, namespaced_key
from x402lab.errors import ConfigError
from x402lab.gateway.paid import request_key
from x402lab.routes import CHAT


def _typed(**params: object) -> TypedCodec:
    spec = output_spec(labels=["yes", "no"])
    assert spec is not None
    return TypedCodec("m", spec, "Is it good?", None, spec.tokens_per_row(), params)


def test_chat_codec_builds_each_row_request_and_keeps_every_answer():
    codec = ChatCodec("m", system="be brief", max_tokens=5, params={"temperature": 0})
    body = codec.body(["hello"])
    assert body == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hello"},
        ],
        "max_tokens": 5,
        "temperature": 0,
    }
    answer = {
        "choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
    (row,) = codec.split(answer, 1)
    assert row[0] == "hi" and row[2:] == ("stop", 3, 1)
    assert codec.decode(codec.encode(row)) == row
    assert codec.reask is None
    with pytest.raises(ConfigError, match="max_tokens"):
        ChatCodec("m", max_tokens=0).body(["x"])


def test_embed_codec_sends_one_text_as_a_string_and_several_as_a_list():
    codec = EmbedCodec("e", {"dimensions": 4})
    assert codec.body(["a"]) == {"model": "e", "input": "a", "dimensions": 4}
    assert codec.body(["a", "b"])["input"] == ["a", "b"]
    answer = {"data": [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [2, 3]}]}
    first, second = codec.split(answer, 2)
    assert first[0].tolist() == [2.0, 3.0] and second[0].tolist() == [0.0, 1.0]
    vector, tokens = codec.decode(codec.encode((np.array([1.5, 2.5]), 7)))
    assert vector.dtype == np.float32 and vector.tolist() == [1.5, 2.5] and tokens == 7
    with pytest.raises(ValueError, match="2 embeddings for 3 texts"):
        codec.split(answer, 3)
    with pytest.raises(ConfigError, match="model is required"):
        EmbedCodec("")


def test_typed_codec_reads_a_pack_back_per_row_and_asks_the_invalid_ones_again():
    codec = _typed()
    body = codec.body([{"input": "great"}, {"input": "awful"}])
    assert body["max_tokens"] == 16 + 2 * codec.tokens_per_row
    assert '"id": "1"' in body["messages"][1]["content"]
    entries = [{"id": "0", "label": "yes"}, {"id": "1", "label": "maybe"}]
    content = json.dumps({"items": entries})
    answer = {"choices": [{"message": {"content": content}, "finish_reason": "stop"}]}
    good, bad = codec.split(answer, 2)
    assert json.loads(good.response) == {"label": "yes"}
    assert (good.pack_size, good.invalid, good.values) == (2, None, ("yes",))
    assert codec.reask.why(good) is None
    assert "maybe" in (codec.reask.why(bad) or "") and bad.values is None
    # Stored without its values, read back checked again into the same record.
    assert json.loads(codec.encode(good)) == list(good[:-1])
    assert codec.decode(codec.encode(good)) == good
    assert codec.decode(codec.encode(bad)) == bad
    again = codec.reask.again(body, 1)
    assert again["messages"][0]["content"].endswith("(Asked again, round 1.)")
    assert body["messages"][0]["content"] != again["messages"][0]["content"]  # body untouched


def test_a_plan_keys_each_distinct_item_by_its_own_request_and_asks_again_under_a_new_key():
    codec = _typed()
    items = [{"input": t} for t in ["a", "b", "a", "c"]]
    plan = plan_of(codec, items, per_request=2)
    assert plan.rows == 4 and len(plan.item_keys) == 3 and plan.units == 2
    assert plan.row_items.tolist() == [0, 1, 0, 2]
    assert plan.item_keys[0] == plan.key_of(codec.body([items[0]]))  # a pack of one
    assert plan.unit_keys[0] == plan.key_of(codec.body(items[:2]))
    key, body = plan.asked_again(plan.unit_body(0), 1)
    assert key == plan.key_of(body) and key != plan.unit_keys[0]
    with pytest.raises(AssertionError, match="never asked again"):
        plan_of(ChatCodec("m"), ["x"]).asked_again({}, 1)


def test_body_keys_are_the_request_keys_whatever_the_bodies_share():
    codec = _typed(temperature=0, provider={"order": ["a"]})
    bodies = [codec.body([{"input": t}]) for t in ["a", "b", "a"]] + [
        codec.body([{"input": "a"}, {"input": "é"}]),
        {"model": "m", "messages": [], "price": Decimal("0.5"), "nested": {"b": 1, "a": [2]}},
    ]
    for namespace in (None, "compare:2:abc"):
        keys = BodyKeys(CHAT, namespace)
        assert [keys(b) for b in bodies] == [namespaced_key(CHAT, b, namespace) for b in bodies]
    assert namespaced_key(CHAT, bodies[0], None) == request_key("POST", CHAT, bodies[0])


def test_run_options_are_checked_when_made():
    assert RunOptions().quotes_in_flight == QUOTES_IN_FLIGHT
    assert RunOptions(concurrency=3).quotes_in_flight == 3
    assert RunOptions(concurrency=AutoConcurrency(ceiling=2)).quotes_in_flight == 2
    assert RunOptions(rebuy="lost").rebuy == "lost"
    with pytest.raises(ConfigError, match='rebuy must be True, False or "lost"'):
        RunOptions(rebuy="some")
    with pytest.raises(ConfigError, match='concurrency must be "auto"'):
        RunOptions(concurrency=0)


def test_a_chat_task_refuses_packing_plain_rows_and_a_second_response_format():
    packed = ChatTask("m", rows_per_request="auto", spec=output_spec(["a"]))
    assert packed.rows_per_request == "auto"
    with pytest.raises(ConfigError, match="rows_per_request packs typed rows"):
        ChatTask("m", rows_per_request=2)
    with pytest.raises(ConfigError, match="rows_per_request must be an int"):
        ChatTask("m", rows_per_request=0)
    with pytest.raises(TypeError, match="response_format is set by labels"):
        ChatTask("m", spec=output_spec(["a"]), params={"response_format": {}})

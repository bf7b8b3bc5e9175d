"""Careless inputs that used to cost money or confuse (issue 15's table), one test each.

Each is refused before anything is signed with a clear error naming the row, the column,
the parameter and the fix; the ledger has no row, the emulator's chain no transfer, and the
gateway saw no paid request (no 402 challenge was even asked for, but the two free probes a
fresh lab's batch sends while its checks fetch the catalog, ``batch.prepare._price_probe``).
"""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest
from support.client import CHAT_MODEL

import x402lab as xl

CHAT = "/api/v1/chat/completions"


def payments_seen(lab: Any) -> dict[str, Any]:
    """The emulated gateway's own payment counters (challenges issued, settled...)."""
    answer = httpx.get(f"{lab.emulator.gateway_url}/api/x402/stats", timeout=10)
    return answer.json()["payments"]


def assert_nothing_paid(lab: Any, *, probes: int = 0) -> None:
    assert lab.ledger.rows() == []
    assert lab.emulator.chain.transfers() == []
    seen = payments_seen(lab)
    assert (seen["challenges"], seen["verified"], seen["settled"]) == (probes, 0, 0)


def test_none_and_nan_in_a_template_column_name_the_rows_and_the_fix(lab):
    rows = pd.DataFrame(
        {"city": ["Lyon", None, "Oslo", np.nan, ""]}, index=["a", "b", "c", "d", "e"]
    )
    with pytest.raises(xl.ConfigError) as caught:
        lab.batch_chat(rows, model=CHAT_MODEL, prompt="About {city}", progress=None)
    message = str(caught.value)
    assert "column 'city'" in message and "3 of 5 rows" in message
    assert "index 'b', 'd', 'e'" in message  # the row labels, not "About nan"
    assert "fillna" in message and "dropna(subset=['city'])" in message
    assert "str.strip()" in message  # the empty text too
    assert_nothing_paid(lab)


def test_a_typo_in_a_keyword_is_a_type_error_with_a_did_you_mean(lab):
    with pytest.raises(TypeError) as caught:
        lab.chat("hi", model=CHAT_MODEL, temprature=0.2)
    message = str(caught.value)
    assert message.startswith("chat() got an unexpected keyword argument 'temprature'")
    assert "did you mean 'temperature'?" in message
    assert "extra_body={'temprature': 0.2}" in message  # the way out, spelled out
    assert_nothing_paid(lab)


def test_a_typo_in_a_batch_keyword_refuses_the_whole_batch_once(lab):
    rows = [f"row {i}" for i in range(20)]
    with pytest.raises(TypeError, match=r"^batch_chat\(\) got an unexpected keyword argument"):
        lab.batch_chat(rows, model=CHAT_MODEL, temprature=0.2, progress=None)
    assert_nothing_paid(lab, probes=2)  # checked against the catalog fetched meanwhile
    # The way out named by the message: the field goes through unchecked, and is paid.
    done = lab.batch_chat(
        rows[:2], model=CHAT_MODEL, max_tokens=8, extra_body={"temprature": 0.2}, progress=None
    )
    assert done["status"].tolist() == ["ok", "ok"]


def test_a_prompt_far_above_the_context_window_is_refused_naming_a_larger_model(lab):
    prompt = "x" * 2_000_000  # about 500,000 tokens for a 128,000-token model
    with pytest.raises(xl.ConfigError) as caught:
        lab.chat(prompt, model=CHAT_MODEL, max_tokens=16)
    message = str(caught.value)
    assert "about 500,004 tokens" in message and "2,000,000 characters" in message
    assert "at most 128,000 tokens" in message
    assert "Shorten the input" in message
    assert "'zai-org-glm-5-2' (1,000,000 tokens)" in message  # a model that takes it
    assert_nothing_paid(lab)  # and no aiohttp warning: nothing was sent (-W error)


def test_a_negative_max_tokens_refuses_the_batch_once(lab):
    with pytest.raises(xl.ConfigError) as caught:
        lab.batch_chat(["one", "two", "three"], model=CHAT_MODEL, max_tokens=-5, progress=None)
    message = str(caught.value)
    assert "max_tokens must be a whole number ≥ 1" in message and "got -5" in message
    assert "leave it out" in message
    assert_nothing_paid(lab)


def test_a_positional_template_field_asks_for_a_column_name(lab):
    rows = pd.DataFrame({"city": ["Lyon", "Oslo"]})
    with pytest.raises(xl.ConfigError) as caught:
        lab.batch_chat(rows, model=CHAT_MODEL, prompt="Tell me about {}", progress=None)
    message = str(caught.value)
    assert "positional field {}" in message and "for example {city}" in message
    assert "Format string contains positional fields" not in message
    assert_nothing_paid(lab)


def test_json_braces_in_a_template_suggest_doubling_them(lab):
    rows = pd.DataFrame({"city": ["Lyon", "Oslo"]})
    with pytest.raises(xl.ConfigError) as caught:
        lab.batch_chat(rows, model=CHAT_MODEL, prompt='JSON {"city": "{city}"}', progress=None)
    message = str(caught.value)
    assert "must be doubled" in message
    assert """'JSON {{"city": "{city}"}}'""" in message  # the template that was meant
    assert_nothing_paid(lab)


def test_an_unknown_column_names_the_closest_one(lab):
    rows = pd.DataFrame({"city": ["Lyon", "Oslo"]})
    with pytest.raises(xl.ConfigError, match=r"'cty'.*did you mean \{city\}"):
        lab.batch_chat(rows, model=CHAT_MODEL, prompt="About {cty}", progress=None)
    assert_nothing_paid(lab)


def test_a_path_that_is_no_paid_route_lists_the_close_ones(lab):
    body = {"model": CHAT_MODEL, "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(xl.ConfigError) as caught:
        lab.quote("POST", "/api/v1/chat", body)
    message = str(caught.value)
    assert "POST /api/v1/chat is not a paid route" in message
    assert "Did you mean POST /api/v1/chat/completions?" in message
    assert "lab.discovery().paid_routes" in message
    with pytest.raises(xl.ConfigError, match="Did you mean POST /api/v1/augment/search"):
        lab.call("POST", "/api/v1/augment/serch", {"query": "x402"})
    with pytest.raises(xl.ConfigError, match="free route"):
        lab.call("POST", "/api/v1/audio/quote", {"model": "ace-step-15"})
    assert_nothing_paid(lab)

"""Chat: thinking models, finish_reason length, streaming with the cost known at the end,
and the sync API called from inside a running event loop (the Jupyter case)."""

from __future__ import annotations

import asyncio

import pytest
from support.client import CHAT_MODEL, THINKING_MODEL, settings

import x402lab as xl
from x402lab.gateway.results import ChatResult


def test_chat_pays_and_answers(lab):
    result = lab.chat("Say hello", model=CHAT_MODEL, system="Be brief.", max_tokens=200)
    assert isinstance(result, ChatResult)
    assert result.text.startswith("Simulated answer") and str(result) == result.text
    assert result.finish_reason == "stop" and not result.truncated
    assert result.prompt_tokens > 0 and result.completion_tokens > 0
    assert result.cost.status == "settled"
    row = lab.ledger.row(result.cost.ledger_id)
    assert (row["model"], row["status"]) == (CHAT_MODEL, "settled")


def test_thinking_model_empty_content_with_reasoning_is_success(lab):
    result = lab.chat("Why is the sky blue?", model=THINKING_MODEL, max_tokens=400)
    assert result.text == ""
    assert result.reasoning and result.reasoning.startswith("Simulated answer")
    assert result.cost.status == "settled"
    assert "(reasoning)" in repr(result)
    plain = lab.chat(
        "Why is the sky blue?",
        model=THINKING_MODEL,
        max_tokens=400,
        provider_parameters={"disable_thinking": True},
    )
    assert plain.text and plain.reasoning is None


def test_finish_reason_length_is_reported(lab):
    result = lab.chat("Tell me everything", model=CHAT_MODEL, max_tokens=5)
    assert result.finish_reason == "length" and result.truncated
    assert result.completion_tokens == 5
    assert "cut at max_tokens" in repr(result)


def test_chat_refuses_stream_flag(lab):
    with pytest.raises(xl.ConfigError, match="chat_stream"):
        lab.chat("hi", model=CHAT_MODEL, stream=True)
    assert lab.ledger.rows() == []


def test_chat_stream_sync_yields_deltas_and_cost_at_the_end(lab):
    stream = lab.chat_stream("Tell me a story", model=CHAT_MODEL, max_tokens=30)
    assert "not started" in repr(stream) and stream.cost is None
    deltas = list(stream)
    assert len(deltas) > 1
    assert stream.done and stream.text == "".join(deltas)
    assert stream.finish_reason == "length" and stream.truncated
    assert stream.usage["completion_tokens"] == 30
    assert stream.cost.status == "settled" and stream.cost.amount_atomic > 0
    whole = stream.result
    assert isinstance(whole, ChatResult) and whole.text == stream.text
    assert whole.cost == stream.cost
    # The same request unstreamed answers the same text (the upstream is seeded).
    assert lab.chat("Tell me a story", model=CHAT_MODEL, max_tokens=30).text == stream.text
    assert [r["status"] for r in lab.ledger.rows()] == ["settled", "settled"]


def test_chat_stream_thinking_model_with_reasoning(lab):
    quiet = lab.chat_stream("Think", model=THINKING_MODEL, max_tokens=20)
    assert list(quiet) == []
    assert quiet.result.reasoning and quiet.result.text == "" and quiet.cost.status == "settled"
    loud = lab.chat_stream("Think", model=THINKING_MODEL, max_tokens=20, include_reasoning=True)
    assert "".join(loud) == loud.reasoning == quiet.reasoning


def test_chat_stream_stopped_early_keeps_the_payment(lab):
    stream = lab.chat_stream("A long story", model=CHAT_MODEL, max_tokens=60)
    for delta in stream:
        assert delta
        break
    assert stream.done  # leaving the loop closed the connection
    assert (
        0 < len(stream.text) < len(lab.chat("A long story", model=CHAT_MODEL, max_tokens=60).text)
    )
    assert stream.cost.status == "settled"
    with lab.chat_stream("Another story", model=CHAT_MODEL, max_tokens=60) as other:
        next(iter(other))
    assert other.done and other.cost.status == "settled"
    assert [r["status"] for r in lab.ledger.rows()] == ["settled"] * 3


def test_chat_stream_async_and_collect(tmp_path):
    """A stream read whole is a stored answer: the same stream again is that answer, paid
    once; ``rebuy=True`` streams (and pays) again."""

    async def main() -> tuple[list[str], ChatResult, ChatResult, ChatResult, int]:
        async with xl.connect_async(
            ledger=tmp_path / "ledger.sqlite", emulator_settings=settings()
        ) as alab:
            stream = alab.chat_stream("Tell me a story", model=CHAT_MODEL, max_tokens=30)
            deltas = [delta async for delta in stream]
            collected = await alab.chat_stream(
                "Tell me a story", model=CHAT_MODEL, max_tokens=30
            ).collect()
            again = await alab.chat_stream(
                "Tell me a story", model=CHAT_MODEL, max_tokens=30, rebuy=True
            ).collect()
            assert alab.emulator is not None
            return deltas, stream.result, collected, again, len(alab.emulator.chain.transfers())

    deltas, result, collected, again, transfers = asyncio.run(main())
    assert "".join(deltas) == result.text == collected.text
    assert result.cost.status == collected.cost.status == again.cost.status == "settled"
    assert not result.cost.cached and collected.cost.cached and not again.cost.cached
    assert result.cost.tx_hash == collected.cost.tx_hash != again.cost.tx_hash
    assert transfers == 2


def test_sync_calls_work_inside_a_running_event_loop(lab):
    """The Jupyter case: a cell's code runs while an event loop is running in the thread."""

    async def cell() -> tuple[ChatResult, list[str], int]:
        asyncio.get_running_loop()  # a loop is running here, as in a notebook cell
        answer = lab.chat("hello from a cell", model=CHAT_MODEL, max_tokens=10)
        deltas = list(lab.chat_stream("stream from a cell", model=CHAT_MODEL, max_tokens=10))
        return answer, deltas, len(lab.models())

    answer, deltas, models = asyncio.run(cell())
    assert answer.cost.status == "settled"
    assert deltas and models > 0

"""The parts of a plan that need no kernel: answer pieces, the records file, the table."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

from x402lab.planning.answers import Answers, Source, body_text
from x402lab.planning.records import Connected, PricedCall, Recorder, read_new
from x402lab.planning.table import CellPlan, plan_frame

ANSWER = {"choices": [{"message": {"content": "Ledgers record every payment.\nThey help audits."}}]}


def test_a_request_quoting_an_answer_is_found_and_an_echo_is_not() -> None:
    answers = Answers()
    asked = body_text(json.dumps({"messages": [{"content": "What do ledgers do?"}]}).encode())
    answers.add(ANSWER, asked, Source(call=7, max_tokens=40))
    quoting = json.dumps({"messages": [{"content": "Shorter: Ledgers record every payment."}]})
    assert {s.call for s in answers.found_in(body_text(quoting.encode())).values()} == {7}
    assert answers.found_in(body_text(b'{"messages": [{"content": "What do ledgers do?"}]}')) == {}
    # A piece the request itself held is an echo, not an answer.
    echo = Answers()
    echo.add(
        {"text": "Ledgers record every payment."}, "Ledgers record every payment.", Source(1, None)
    )
    assert echo.found_in("Ledgers record every payment.") == {}


def test_records_are_read_per_cell_and_a_half_written_line_waits(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    recorder = Recorder(path)
    recorder.write(Connected("http://g", None, "b", 5_000_000, 4_000_000, None))
    recorder.write(PricedCall(1, "gateway", "POST", "/api/v1/chat/completions", 10_000))
    found, offset = read_new(path, 0)
    assert [type(r) for r in found] == [Connected, PricedCall]
    with path.open("a") as out:
        out.write('{"kind": "call", "seq": 2')  # still being written
    assert read_new(path, offset) == ([], offset)


def test_the_table_totals_bounds_and_budget() -> None:
    calls = [
        CellPlan(3, "a = lab.chat('x')", [PricedCall(1, "gateway", "POST", "/c", 65_974)]),
        CellPlan(
            4,
            "b = lab.chat(a.text)",
            [PricedCall(2, "gateway", "POST", "/c", 52_177, depends_on=[1], high_atomic=63_127)],
        ),
        CellPlan(
            5,
            "import random\nfor _ in range(random.randint(1, 3)):\n    lab.chat('y')",
            [PricedCall(3, "gateway", "POST", "/c", 10_000)],
        ),
        CellPlan(6, "1 / 0", error="ZeroDivisionError: division by zero"),
        CellPlan(7, "print('free')"),
    ]
    frame = plan_frame(calls, [Connected(None, None, "nb", 100_000, 100_000, None)])
    assert list(frame["cell"]) == [3, 4, 5, 6]
    assert list(frame["exact"]) == [True, False, False, False]
    assert frame["usd"].sum() == Decimal("0.128151")
    assert frame.loc[1, "usd_high"] == Decimal("0.063127") and "cell 3" in frame.loc[1, "note"]
    assert "randomness" in frame.loc[2, "note"] and frame["usd_high"].isna().tolist()[2]
    assert "runs out here" in frame.loc[1, "note"]  # 0.065974 + 0.052177 > 0.10 left
    plan = json.loads(frame.to_plan_json())
    assert plan["total_usd"] == "0.128151" and plan["total_usd_high"] is None
    assert plan["budget"] == {"name": "nb", "usd": "0.1", "left_usd": "0.1", "fits": False}
    assert plan["cells"][0] == {
        "cell": 3, "source": "a = lab.chat('x')", "calls": 1, "usd": "0.065974",
        "usd_high": "0.065974", "exact": True, "note": None,
    }  # fmt: skip

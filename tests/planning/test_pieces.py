"""The parts of a plan that need no kernel: answer pieces, the records file, the table."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

import x402lab as xl
from x402lab.planning.answers import Answers, Source, body_text
from x402lab.planning.records import Connected, PricedCall, Recorder, read_new
from x402lab.planning.scratch import LARGE_FILE_BYTES, Scratch
from x402lab.planning.table import CellPlan, plan_frame
from x402lab.private import PLAN_FOLDER_ENV, write_private

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


def test_the_table_totals_bounds_and_budgets() -> None:
    refusal = "batch_chat() refused before paying: ... and the budget 'small' has 0.05 USD left."
    calls = [
        CellPlan(3, "a = lab.chat('x')", [PricedCall(1, "gateway", "POST", "/c", 65_974, lab=1)]),
        CellPlan(
            4,
            "b = lab.chat(a.text)",
            [PricedCall(2, "gateway", "POST", "/c", 52_177, depends_on=[1], high_atomic=3, lab=1)],
        ),
        CellPlan(
            5,
            "import random\nfor _ in range(random.randint(1, 3)):\n    lab.chat('y',\n"
            "             max_tokens=4)",
            [PricedCall(3, "gateway", "POST", "/c", 10_000, lab=2, line=4)],
        ),
        CellPlan(6, "1 / 0", error="ZeroDivisionError: division by zero"),
        CellPlan(7, "print('free')"),
        CellPlan(8, "x = 1\nsmall.batch_chat(rows)", error=f"BudgetExceeded: {refusal}",
                 refused=refusal),
    ]  # fmt: skip
    connects = [
        Connected(None, None, "nb", 100_000, 100_000, None, lab=1, ledger="a"),
        Connected(None, None, "small", 50_000, 50_000, None, lab=2, ledger="a"),
    ]
    frame = plan_frame(calls, connects, writes=["out.parquet (new)"])
    assert list(frame["cell"]) == [3, 4, 5, 6, 8]
    assert list(frame["exact"]) == [True, False, False, False, True]
    assert frame["usd"].sum() == Decimal("0.128151")
    assert frame.loc[1, "usd_high"] == Decimal("0.052177") and "cell 3" in frame.loc[1, "note"]
    assert "randomness" in frame.loc[2, "note"] and frame["usd_high"].isna().tolist()[2]
    # The paying statement, from its first line, not the cell's first line.
    assert frame.loc[2, "source"] == "lab.chat('y',"
    assert frame.loc[4, "usd"] == 0 and "budget 'small'" in frame.loc[4, "note"]
    budgets = frame.attrs["plan"]["budgets"]
    assert [(b["name"], b["planned_usd"], b["fits"]) for b in budgets] == [
        ("nb", "0.118151", False),  # 0.065974 + 0.052177 > 0.10 left
        ("small", "0.01", False),  # cell 8 refused
    ]
    assert budgets[1]["refused_cells"] == [8] and budgets[1]["planned_usd_high"] is None
    summary = frame.summary()
    assert "budget 'nb': plans 0.118151 USD of 0.100000 USD left: does NOT fit" in summary
    assert "budget 'small'" in summary and "refused cell 8" in summary
    assert "out.parquet (new)" in summary
    plan = json.loads(frame.to_plan_json())
    assert plan["total_usd"] == "0.128151" and plan["total_usd_high"] is None
    assert plan["budget"] == budgets[0] and plan["writes"] == ["out.parquet (new)"]
    assert plan["cells"][0] == {
        "cell": 3, "source": "a = lab.chat('x')", "calls": 1, "usd": "0.065974",
        "usd_high": "0.065974", "exact": True, "note": None,
    }  # fmt: skip


def test_the_scratch_copy_and_what_a_rehearsal_may_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = tmp_path / "analysis"
    (mine / ".git").mkdir(parents=True)
    (mine / ".git" / "HEAD").write_text("ref")
    (mine / "data").mkdir()
    (mine / "data" / "small.csv").write_text("a,b\n1,2\n")
    with (mine / "data" / "big.bin").open("wb") as big:  # sparse: nothing to write
        big.truncate(LARGE_FILE_BYTES + 1)
    (mine / "old.parquet").write_bytes(b"real answers")
    scratch = Scratch.copy(mine, tmp_path / "plan")
    copied = scratch.folder
    assert not (copied / ".git").exists() and (copied / "data" / "small.csv").is_file()
    assert (copied / "data" / "big.bin").is_symlink() and scratch.linked == ["data/big.bin"]
    (copied / "old.parquet").write_bytes(b"rehearsed answers")
    (copied / "out").mkdir()
    (copied / "out" / "new.png").write_bytes(b"png")
    assert scratch.written() == ["old.parquet (changed)", "out/new.png (new)"]
    assert (mine / "old.parquet").read_bytes() == b"real answers"
    with pytest.raises(xl.ConfigError, match="too big to copy"):
        Scratch.copy(mine, tmp_path / "again", max_files=2)

    # In a plan's kernel x402lab writes in the scratch copy, never in the notebook's folder.
    monkeypatch.setenv(PLAN_FOLDER_ENV, str(mine))
    assert write_private(copied / "report.html", "ok").read_text() == "ok"
    with pytest.raises(xl.ConfigError, match="a plan's rehearsal does not write"):
        write_private(mine / "report.html", "rehearsed")
    assert not (mine / "report.html").exists()

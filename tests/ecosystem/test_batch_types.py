"""What a type checker (and so an IDE) sees ``batch_chat`` and ``batch_embed`` return: a Dask
DataFrame for a Dask collection, the BatchSummary with ``out=``, a pandas DataFrame otherwise,
on the sync ``Lab`` and on ``AsyncLab`` alike."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

import x402lab as xl

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = """\
import dask.bag as db
import dask.dataframe as dd
import x402lab as xl
def sync(lab: xl.Lab, frame: dd.DataFrame, bag: db.Bag, texts: list[str]) -> None:
    reveal_type(lab.batch_chat(frame, model="m"))
    reveal_type(lab.batch_chat(bag, model="m"))
    reveal_type(lab.batch_embed(texts, model="m", out="vectors.parquet"))
    reveal_type(lab.batch_embed(frame, model="m", out="folder"))
    reveal_type(lab.batch_chat(texts, model="m"))
    reveal_type(lab.batch_embed(texts, model="m"))
async def run(alab: xl.AsyncLab, frame: dd.DataFrame, texts: list[str]) -> None:
    reveal_type(await alab.batch_chat(frame, model="m"))
    reveal_type(await alab.batch_embed(texts, model="m", out="vectors.parquet"))
    lab_summary: int = await alab.batch_embed(texts, model="m", out="vectors.parquet")
"""

DASK = "dask.dataframe.dask_expr._collection.DataFrame"
SUMMARY = "x402lab.batch.output._results.BatchSummary"


def test_the_overloads_are_there_at_run_time_for_help_and_editors():
    for cls in (xl.Lab, xl.AsyncLab):
        chat = typing.get_overloads(cls.batch_chat)
        embed = typing.get_overloads(cls.batch_embed)
        assert [f.__annotations__["return"] for f in chat] == [
            "BatchEstimate",  # dry_run=True
            "dd.DataFrame",
            "pd.DataFrame",
        ]
        assert [f.__annotations__["return"] for f in embed] == [
            "BatchEstimate",
            "dd.DataFrame",
            "BatchSummary",
            "pd.DataFrame",
        ]


# One xdist worker runs both mypy tests (the other is in tests/test_sync_facade.py), one after the
# other: the second reads the first's .mypy_cache instead of checking x402lab, pandas and
# dask again beside it (cold, each run takes 50 s of CPU; on the first's cache, 8 s).
@pytest.mark.xdist_group("mypy")
def test_mypy_sees_a_dask_frame_for_dask_input_and_the_summary_with_out(monkeypatch):
    import mypy.api  # a dev dependency: missing, this test fails rather than skips

    monkeypatch.chdir(ROOT)  # the checkout's x402lab and its mypy settings
    stdout, stderr, _ = mypy.api.run(
        ["-c", SNIPPET, "--config-file", str(ROOT / "pyproject.toml"), "--no-error-summary"]
    )
    by_line: dict[int, str] = {}
    for line in stdout.splitlines():
        if line.startswith("<string>:"):
            number = int(line.split(":")[1])
            by_line[number] = by_line.get(number, "") + line
    report = stdout + stderr
    for number in (5, 6, 12):
        assert f'Revealed type is "{DASK}"' in by_line[number], report
    for number in (7, 8, 13):
        assert f'Revealed type is "{SUMMARY}"' in by_line[number], report
    for number in (9, 10):  # pandas (Any where pandas ships no types): never Dask or summary
        assert "Revealed type" in by_line[number], report
        assert DASK not in by_line[number] and SUMMARY not in by_line[number], report
    assert "Incompatible types in assignment" in by_line[14], report  # a checked type
    errors = [line for n, line in by_line.items() if n != 14 and ": error:" in line]
    assert not errors, report

"""Every folder and file x402lab creates is its owner's alone (0700 / 0600) under umask 022.

(``x402lab demo --out D`` under umask 022 is checked where the demo runs once,
tests/analysis/test_cli.py.) In this process under that umask, one lab on the emulator
writes what a notebook writes: a batch's ``out=`` Parquet, media saved from single
calls and from a music job, a cost report saved and exported, and ``x402lab ledger export``
in both formats. Each new folder must be 0700 and each file 0600; a folder that was already
there keeps its mode (it is the user's).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.client import IMAGE_MODEL, TTS_MODEL
from support.files import everything_private, mode

import x402lab as xl
from x402lab.cli import main
from x402lab.emulator.settings import EmulatorSettings


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.mark.timeout(300)
def test_every_file_a_lab_writes_is_private(tmp_path: Path, umask_022) -> None:
    mine = tmp_path / "mine"  # a folder of the user's: kept as it is
    mine.mkdir(mode=0o755)
    work = mine / "work"
    lab = xl.connect(
        ledger=work / "ledger.sqlite", emulator_settings=EmulatorSettings(job_seconds=0.2)
    )
    try:
        vectors = lab.batch_embed(
            ["a", "b", "c"], model="text-embedding-bge-m3", out=work / "out" / "v.parquet",
            progress=None,
        )  # fmt: skip
        assert (vectors.to_pandas()["status"] == "ok").all()
        lab.speech("Hello", model=TTS_MODEL).save(work / "media" / "hello.wav")
        images = lab.generate_image("two moons", model=IMAGE_MODEL, n=2, width=32, height=32)
        images.save_all(work / "moons")
        job = lab.music("a calm piano loop", model="ace-step-15", duration_seconds=60)
        job.save(work / "songs" / "loop.wav")
        report = lab.cost_report(batches={"embed": vectors.to_pandas()})
        report.save(work / "report")
        report.plot("by_route").save(work / "figures" / "by_route.png")
    finally:
        lab.close()
    for target in ("rows.parquet", "rows.csv"):
        assert main(["ledger", "export", str(work / "exports" / target), "--ledger",
                     str(work / "ledger.sqlite")]) == 0  # fmt: skip
    files = {p.relative_to(work).as_posix() for p in everything_private(work)}
    assert mode(mine) == 0o755  # the user's own folder keeps its mode
    expected = {
        "ledger.sqlite", "out/v.parquet", "media/hello.wav", "moons/image-0.png",
        "songs/loop.wav", "report/cost_report.html", "report/totals.parquet",
        "figures/by_route.png", "exports/rows.parquet", "exports/rows.csv",
    }  # fmt: skip
    assert expected <= files, sorted(files)
    assert any(name.startswith("media/") and name != "media/hello.wav" for name in files)

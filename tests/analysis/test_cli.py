"""The analysis commands as a user runs them: ``python -m x402lab ...``.

Each command family (ledger, catalog, demo) runs once as a real subprocess, so the entry
point, the exit status and the streams are those a shell sees. The other calls, which test
what a command prints or writes, run ``main([...])`` in this process: a subprocess costs a
second of imports and would prove nothing more about the output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import pyarrow.parquet as pq
import pytest
from support.files import everything_private

from x402lab.cli import main
from x402lab.ledger import ledger_schema
from x402lab.money import format_usd


def x402lab(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The command as a shell runs it, under the usual umask (022)."""
    env = {**os.environ, "MPLBACKEND": "Agg"}
    return subprocess.run(
        [sys.executable, "-m", "x402lab", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
        umask=0o022,
    )


class Ran(NamedTuple):
    """What an in-process command gave: the fields of a finished subprocess it is read by."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Ran]:
    """``cli(*args)``: ``main([...args])`` in this process, with its status and streams."""

    def run(*args: str | Path) -> Ran:
        capsys.readouterr()  # drop what came before
        status = main([str(arg) for arg in args])
        return Ran(status, *capsys.readouterr())

    return run


def settled_atomic(frame: pd.DataFrame) -> int:
    return int(frame.loc[frame["status"] == "settled", "amount_atomic"].sum())


def test_ledger_summary(workload, cli):
    done = x402lab("ledger", "summary", "--ledger", workload.ledger_path)
    assert done.returncode == 0, done.stderr
    total = settled_atomic(workload.lab.ledger.to_pandas())
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"settled {format_usd(total)} in ")
    assert (
        f"unknown exposure {format_usd(workload.received(workload.faulty))} (1 payments)" in first
    )
    assert "/api/intel/reports" in done.stdout
    assert "/api/v1/audio/queue" in done.stdout
    by_budget = cli("ledger", "summary", "--ledger", workload.ledger_path, "--by", "budget,day")
    assert by_budget.returncode == 0, by_budget.stderr
    assert workload.main_budget in by_budget.stdout
    assert workload.faulty_budget in by_budget.stdout


def test_ledger_export_parquet_and_csv_read_back(workload, tmp_path, cli):
    rows = workload.lab.ledger.to_pandas()
    parquet = tmp_path / "ledger.parquet"
    done = cli("ledger", "export", parquet, "--ledger", workload.ledger_path)
    assert done.returncode == 0, done.stderr
    assert f"wrote {len(rows)} ledger rows" in done.stdout
    table = pq.read_table(parquet)
    assert table.schema.equals(ledger_schema(), check_metadata=False)
    back = table.to_pandas()
    assert list(back["nonce"]) == list(rows["nonce"])
    assert settled_atomic(back) == settled_atomic(rows)

    csv = tmp_path / "out" / "ledger.csv"
    done = cli("ledger", "export", csv, "--ledger", workload.ledger_path)
    assert done.returncode == 0, done.stderr
    back = pd.read_csv(csv)
    assert list(back.columns) == ledger_schema().names
    assert len(back) == len(rows)
    assert settled_atomic(back) == settled_atomic(rows)

    spend_csv = tmp_path / "spend.csv"
    done = cli("ledger", "export", spend_csv, "--ledger", workload.ledger_path, "--by", "model")
    assert done.returncode == 0, done.stderr
    spend = pd.read_csv(spend_csv)
    # USD by default; --atomic adds the exact integer columns.
    assert not [name for name in spend.columns if name.endswith("_atomic")]
    assert spend["settled_usd"].sum() == pytest.approx(settled_atomic(rows) / 1e6)
    args = ("--ledger", workload.ledger_path, "--by", "model", "--atomic")
    done = cli("ledger", "export", spend_csv, *args)
    assert done.returncode == 0, done.stderr
    spend = pd.read_csv(spend_csv)
    assert int(spend["settled_atomic"].sum()) == settled_atomic(rows)
    assert int(spend["unknown_atomic"].sum()) == workload.received(workload.faulty)


def test_ledger_commands_refuse_bad_paths(workload, tmp_path, cli):
    missing = cli("ledger", "summary", "--ledger", tmp_path / "nope.sqlite")
    assert missing.returncode == 2
    assert "no ledger at" in missing.stderr
    assert not (tmp_path / "nope.sqlite").exists()
    wrong = cli("ledger", "export", tmp_path / "x.txt", "--ledger", workload.ledger_path)
    assert wrong.returncode == 2
    assert ".parquet or .csv" in wrong.stderr


@pytest.mark.parametrize(
    ("command", "suffix"), [("models", "parquet"), ("prices", "csv")], ids=["models", "prices"]
)
def test_catalog_commands(workload, tmp_path, cli, command, suffix):
    url = workload.main.gateway_url
    if command == "models":
        # The catalog family's one real subprocess.
        shown = x402lab(command, "--gateway-url", url, "--type", "embedding")
        expected = workload.lab.models(type="embedding")
        assert workload.text_model not in shown.stdout
    else:
        shown = cli(command, "--gateway-url", url)
        expected = workload.lab.prices()
    assert shown.returncode == 0, shown.stderr
    assert workload.embed_model in shown.stdout
    assert len(shown.stdout.splitlines()) == len(expected) + 1  # a header, then one per row
    target = tmp_path / f"{command}.{suffix}"
    done = cli(command, "--gateway-url", url, "--out", target)
    assert done.returncode == 0, done.stderr
    back = pq.read_table(target).to_pandas() if suffix == "parquet" else pd.read_csv(target)
    everything = workload.lab.models() if command == "models" else expected
    assert list(back["id"]) == list(everything["id"])


def test_demo_writes_the_cost_report(tmp_path, cli):
    out = tmp_path / "demo"
    done = x402lab("demo", "--out", out, "--job-seconds", "0.2", timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    page = Path(next(line for line in lines if line.endswith("cost_report.html")))
    assert page == out.resolve() / "cost_report.html"
    # It ends by saying how to read its ledger, with a command that works (run below).
    ledger_path = out.resolve() / "ledger.sqlite"
    assert f"x402lab ledger summary --ledger {ledger_path}" in lines[-2]
    html = page.read_text()
    for figure in ("spend_over_time", "by_route", "unit_costs", "drift", "padding", "rates"):
        assert (out / f"{figure}.png").stat().st_size > 1000
        assert f"src='{figure}.png'" in html
    # Every capability ran: catalog, quote, chat, embed, batches, music, reports.
    for line in ("catalog:", "quote (free):", "chat:", "embed:", "music:", "reports:"):
        assert any(text.startswith(line) for text in done.stdout.splitlines()), line
    assert "not available" not in done.stdout
    assert (out / "music.wav").read_bytes()[:4] == b"RIFF"
    ledger = pq.read_table(out / "timeline.parquet").to_pandas()
    totals = pq.read_table(out / "totals.parquet").to_pylist()[0]
    assert totals["settled_atomic"] == int(ledger["amount_atomic"].sum()) > 0
    paths = set(pq.read_table(out / "by_route.parquet").to_pandas()["path"])
    assert {
        "/api/v1/chat/completions",
        "/api/v1/embeddings",
        "/api/v1/audio/queue",
        "/api/intel/reports",
    } <= paths
    status = pq.read_table(out / "batch_status.parquet").to_pandas().set_index("batch")
    assert status.loc["batch_chat", "cached_rows"] == 1
    # Under umask 022 the demo's folder is 0700 and all it wrote 0600 (its ledger, media,
    # report and figures).
    assert {"ledger.sqlite", "music.wav", "cost_report.html"} <= {
        p.name for p in everything_private(out)
    }
    summary = cli("ledger", "summary", "--ledger", out / "ledger.sqlite")
    assert summary.returncode == 0, summary.stderr
    assert summary.stdout.startswith(f"settled {format_usd(totals['settled_atomic'])} in ")

"""A plan of a notebook with two labs and two budgets, then the real run, then a plan of the
notebook grown by more texts.

The second lab's budget (0.05 USD) cannot hold a 12-row batch: the real run refuses it
before paying, then spends what is left on the same batch with ``partial=True``. The plan
must show both as the run has them (the refused cell at 0 USD and why, the partial cell at
what it spends), total what the run pays to the atomic unit, and name each budget in its
verdict. Every row says the statement that paid, not its cell's first line. The notebook
writes ``out="vectors.parquet"`` in its folder: the plan writes it in a scratch copy and says
so, and a plan after the real run (with more texts) leaves the real file's bytes as they are.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from decimal import Decimal
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbformat.v4 import new_code_cell, new_notebook

import x402lab as xl
from x402lab.emulator.settings import EmulatorSettings
from x402lab.wallet import Wallet

CHAT = "qwen-3-8-27b"
EMBED = "text-embedding-bge-m3"


def _cells(gateway: str, reports: str, ledger: Path, texts: int, report: Path) -> list[str]:
    where = f"gateway_url={gateway!r}, reports_url={reports!r}, ledger={str(ledger)!r}"
    return [
        "import x402lab as xl\n"
        f"texts = [f'note {{i}} on ledgers' for i in range({texts})]\n"
        "prompts = [f'Say {i} in one word' for i in range(12)]",
        f"lab = xl.connect({where}, wallet=xl.Wallet.from_env(),\n"
        "                 budget=xl.Budget(usd=5, per_call_usd=1, name='main'))",
        "print('a free line first')\n"
        f"hello = lab.chat('Say hello to the planner', model={CHAT!r}, max_tokens=20)",
        f"small = xl.connect({where}, wallet=xl.Wallet.from_env(),\n"
        "                   budget=xl.Budget(usd=0.05, name='small'))",
        f"whole = small.batch_chat(prompts, model={CHAT!r}, max_tokens=5, progress=None)",
        "import warnings\n"
        "warnings.simplefilter('ignore')\n"
        f"part = small.batch_chat(prompts, model={CHAT!r}, max_tokens=5,\n"
        "                        partial=True, progress=None)",
        f"vectors = lab.batch_embed(texts, model={EMBED!r}, rows_per_request=4,\n"
        "                          out='vectors.parquet', progress=None)",
        # An absolute path into the notebook's folder: written by the real run only.
        f"saved = lab.cost_report().save({str(report)!r})",
    ]


def _write(path: Path, cells: list[str]) -> Path:
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook = new_notebook(cells=[new_code_cell(c) for c in cells])
    notebook.metadata["kernelspec"] = kernelspec
    nbformat.write(notebook, path)
    return path


def _paid(chain, payer: str) -> int:
    return sum(t.amount_atomic for t in chain.transfers() if t.payer.lower() == payer.lower())


async def _run_for_real(path: Path, chain, payer: str) -> dict[int, int]:
    """Run the notebook in its folder, cell by cell; what each cell paid on the chain."""
    notebook = nbformat.read(path, as_version=4)
    resources = {"metadata": {"path": str(path.parent)}}
    client = NotebookClient(notebook, timeout=300, kernel_name="python3", resources=resources)
    paid: dict[int, int] = {}
    errors: dict[int, str] = {}
    async with client.async_setup_kernel():
        for index, cell in enumerate(notebook.cells):
            before = _paid(chain, payer)
            try:
                await client.async_execute_cell(cell, index)
            except CellExecutionError as exc:  # the refused batch is refused for real too
                errors[index + 1] = exc.ename
            paid[index + 1] = _paid(chain, payer) - before
    assert errors == {5: "BudgetExceeded"}, errors
    return paid


@pytest.mark.timeout(600)
def test_plan_prices_each_lab_on_its_budget_and_writes_nothing_of_the_users(
    tmp_path: Path, emulator_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = emulator_factory(EmulatorSettings(price_mult=0.73, job_seconds=0.3))
    key = "0x" + secrets.token_hex(32)
    payer = Wallet.from_key(key).address
    monkeypatch.setenv("X402LAB_PRIVATE_KEY", key)
    folder = tmp_path / "analysis"
    folder.mkdir()
    ledger = tmp_path / "ledger" / "notebook.sqlite"
    where = target.gateway_url, target.reports_url, ledger
    path = _write(folder / "budgets.ipynb", _cells(*where, 8, folder / "report"))

    plan = xl.plan(path, progress=None)
    assert target.chain.transfers() == []  # nothing moved on the target's chain
    assert not ledger.exists() and sorted(p.name for p in folder.iterdir()) == ["budgets.ipynb"]
    rows = {int(r.cell): r for r in plan.itertuples(index=False)}
    assert set(rows) == {3, 5, 6, 7, 8}, plan.to_text()
    assert "a plan's rehearsal does not write" in rows[8].note and rows[8].calls == 0
    # The statement that paid, not the cell's first line (a print).
    assert rows[3].source.startswith("hello = lab.chat("), rows[3].source
    assert rows[6].source == "part = small.batch_chat(prompts, model='qwen-3-8-27b', max_tokens=5,"
    assert rows[5].usd == 0 and rows[5].calls == 0 and rows[5].exact
    assert "refused before paying by budget 'small'" in rows[5].note
    assert 0 < rows[6].usd <= Decimal("0.05") and rows[6].calls < 12
    budgets = {b["name"]: b for b in plan.attrs["plan"]["budgets"]}
    assert budgets["small"]["fits"] is False and budgets["small"]["refused_cells"] == [5]
    assert Decimal(budgets["small"]["planned_usd"]) == rows[6].usd
    assert budgets["main"]["fits"] is True
    assert Decimal(budgets["main"]["planned_usd"]) == rows[3].usd + rows[7].usd
    summary = plan.summary()
    assert "budget 'main'" in summary and "budget 'small'" in summary, summary
    assert "does NOT fit (refused cell 5)" in summary
    assert plan.attrs["plan"]["writes"] == ["vectors.parquet (new)"]
    assert "vectors.parquet (new)" in summary

    paid = asyncio.run(_run_for_real(path, target.chain, payer))
    assert paid[5] == 0 and paid[6] > 0
    for cell, row in rows.items():
        assert row.usd * 10**6 == paid[cell], (cell, plan.to_text(), paid)
    assert (folder / "report" / "cost_report.html").exists()  # the real run wrote it
    assert Decimal(plan.attrs["plan"]["total_usd"]) * 10**6 == sum(paid.values())

    # The notebook grows by 4 texts; its plan writes the file in the scratch copy only.
    written = (folder / "vectors.parquet").read_bytes()
    page = (folder / "report" / "cost_report.html").read_bytes()
    grown = _write(path, _cells(*where, 12, folder / "report"))
    transfers = len(target.chain.transfers())
    again = xl.plan(grown, progress=None)
    assert (folder / "vectors.parquet").read_bytes() == written
    assert len(target.chain.transfers()) == transfers
    assert again.attrs["plan"]["writes"] == ["vectors.parquet (changed)"]
    grown_rows = {int(r.cell): r for r in again.itertuples(index=False)}
    assert grown_rows[7].calls == 1  # the 8 texts bought are held, the 4 new ones are one request
    assert "a plan's rehearsal does not write" in grown_rows[8].note
    assert key not in json.dumps(again.attrs["plan"]) and key not in again.to_text()
    assert (folder / "report" / "cost_report.html").read_bytes() == page


def test_a_plan_leaves_no_folder_of_its_own_behind(tmp_path, monkeypatch):
    # The scratch copy of the notebook's folder, the records and the kernel's sockets live in
    # one temporary folder per plan: gone once the plan returns, what it found still listed.
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(temporary))
    user = tmp_path / "work"
    user.mkdir()
    (user / "data.csv").write_text("a,b\n1,2\n")
    notebook = _write(
        user / "writes.ipynb",
        ["import x402lab as xl\nlab = xl.connect()", "open('out.txt', 'w').write('hi')"],
    )
    planned = xl.plan(notebook)
    assert "out.txt (new)" in planned.attrs["plan"]["writes"]
    assert list(temporary.iterdir()) == []
    assert sorted(p.name for p in user.iterdir()) == ["data.csv", "writes.ipynb"]

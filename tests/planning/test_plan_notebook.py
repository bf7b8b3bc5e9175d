"""``x402lab.plan`` against the emulator started as the "real" services, then the real run.

The target runs with a price multiplier that is not the default (0.73), so every price in
the plan must come from the target, not from the rehearsal's own emulator (0.5). The
notebook holds single chat calls (one quoting an earlier answer), a packed typed batch, a
music job, a report purchase, a paid request through ``lab.http_client()`` (a client handed
to another library) and a cell that fails. The plan must match what the real run
then pays on the target's chain (exactly for every row marked exact, within 2% in total),
move nothing on that chain and leave the notebook's ledger unwritten. A second plan after
the run prices what the ledger now holds at 0. (How long a plan takes against the run:
benchmarks/plan_notebook.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from decimal import Decimal
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

import x402lab as xl
from x402lab.emulator.settings import EmulatorSettings
from x402lab.money import atomic_to_decimal
from x402lab.wallet import Wallet

CELLS = [
    "import os\nimport x402lab as xl\nCHAT = 'openai-gpt-54-pro'  # priced above the minimum",
    "lab = xl.connect(gateway_url=os.environ['PLAN_GW'], reports_url=os.environ['PLAN_RP'],\n"
    "                 wallet=xl.Wallet.from_env(), ledger=os.environ['PLAN_LEDGER'],\n"
    "                 budget=xl.Budget(usd=5, per_call_usd=1, name='notebook'))",
    "hello = lab.chat('Say hello to the planner', model=CHAT, max_tokens=400)",
    "again = lab.chat('Say it shorter: ' + hello.text, model=CHAT, max_tokens=300)",
    "reviews = ['good phone', 'bad phone', 'ok phone', 'great screen', 'broken box', 'fine']\n"
    "typed = lab.batch_chat(reviews, model='qwen-3-8-27b', rows_per_request=3,\n"
    "                       labels=['positive', 'negative', 'neutral'], progress=None)",
    "job = lab.music('a calm piano loop', model='ace-step-15', duration_seconds=60)\njob.wait()",
    "menu = lab.reports.menu('solarmoth')\n"
    "bought = lab.reports.buy('solarmoth', ids=list(menu['report_id'][:2]))",
    # A client handed to another library (here httpx itself) is priced like the lab's calls.
    "body = {'model': CHAT, 'messages': [{'role': 'user', 'content': 'Name a colour'}],\n"
    "        'max_tokens': 50}\n"
    "with lab.http_client() as http:\n"
    "    http.post('/api/v1/chat/completions', json=body).raise_for_status()",
    "undefined_name + 1",
    "lab.close()",
]


def _notebook(path: Path) -> Path:
    cells = [new_markdown_cell("# A notebook to plan"), *map(new_code_cell, CELLS)]
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(new_notebook(cells=cells, metadata={"kernelspec": kernelspec}), path)
    return path


def _paid(chain, payer: str) -> int:
    return sum(t.amount_atomic for t in chain.transfers() if t.payer.lower() == payer.lower())


async def _run_for_real(path: Path, chain, payer: str) -> dict[int, int]:
    """Run the notebook cell by cell; what each cell (1-based position) paid on the chain."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=300, kernel_name="python3")
    paid: dict[int, int] = {}
    async with client.async_setup_kernel():
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code":
                continue
            before = _paid(chain, payer)
            with contextlib.suppress(CellExecutionError):  # the failing cell fails for real too
                await client.async_execute_cell(cell, index)
            paid[index + 1] = _paid(chain, payer) - before
    return paid


@pytest.mark.timeout(600)
def test_plan_matches_what_the_run_pays_and_moves_nothing(
    tmp_path: Path, emulator_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = emulator_factory(EmulatorSettings(price_mult=0.73, job_seconds=0.3))
    key = "0x" + secrets.token_hex(32)
    payer = Wallet.from_key(key).address
    ledger = tmp_path / "ledger" / "notebook.sqlite"
    monkeypatch.setenv("PLAN_GW", target.gateway_url)
    monkeypatch.setenv("PLAN_RP", target.reports_url)
    monkeypatch.setenv("PLAN_LEDGER", str(ledger))
    monkeypatch.setenv("X402LAB_PRIVATE_KEY", key)
    path = _notebook(tmp_path / "to_plan.ipynb")

    lines: list[str] = []
    plan = xl.plan(path, progress=lambda cell, done, total: lines.append(cell.first_line))
    assert target.chain.transfers() == []  # nothing moved on the target's chain
    assert not ledger.exists()  # the notebook's ledger was not written (not even created)
    assert len(lines) == len(CELLS)  # a progress report per code cell

    rows = {int(r.cell): r for r in plan.itertuples(index=False)}
    assert set(rows) == {4, 5, 6, 7, 8, 9, 10}, plan.to_text()
    assert "NameError" in rows[10].note and rows[10].calls == 0
    assert not rows[5].exact and "cell 4" in rows[5].note  # it quotes cell 4's answer
    assert rows[5].usd_high is not None and rows[5].usd_high >= rows[5].usd
    assert rows[6].calls == 2  # 6 rows, 3 per request
    assert all(rows[c].exact for c in (4, 6, 7, 8, 9))
    assert "total" in plan._repr_html_() and "budget 'notebook'" in plan.to_text()

    # The rehearsal's own emulator (the default multiplier) would have priced it otherwise.
    default = emulator_factory()
    with xl.connect(gateway_url=default.gateway_url, wallet=Wallet.create()) as other:
        body = {
            "model": "openai-gpt-54-pro",
            "messages": [{"role": "user", "content": "Say hello to the planner"}],
            "max_tokens": 400,
        }
        assert other.quote("POST", "/api/v1/chat/completions", body).amount_atomic != int(
            rows[4].usd * 10**6
        )

    paid = asyncio.run(_run_for_real(path, target.chain, payer))

    for cell, row in rows.items():
        if row.exact:
            assert row.usd == atomic_to_decimal(paid[cell]), (cell, plan.to_text(), paid)
    total_paid = atomic_to_decimal(sum(paid.values()))
    total_plan = Decimal(plan.attrs["plan"]["total_usd"])
    assert total_paid > 0 and all(paid[c] > 0 for c in (4, 5, 6, 7, 8, 9))
    assert abs(total_plan - total_paid) <= total_paid * Decimal("0.02"), (total_plan, total_paid)

    # Planned again after the run: the batch rows, the job, the reports and the single chat
    # calls are held or stored (0 USD); the client handed to another library pays again.
    transfers = len(target.chain.transfers())
    size = ledger.stat().st_size, ledger.stat().st_mtime_ns
    again = xl.plan(path, progress=None)
    assert len(target.chain.transfers()) == transfers
    assert (ledger.stat().st_size, ledger.stat().st_mtime_ns) == size
    priced = {int(r.cell): int(r.calls) for r in again.itertuples(index=False) if r.calls}
    assert priced == {9: 1}, again.to_text()
    assert os.environ["X402LAB_PRIVATE_KEY"] not in again.to_plan_json()

"""Planning: how long ``xl.plan`` takes against running the notebook, and how close it is.

Run with ``python benchmarks/plan_notebook.py`` (``--job-seconds S``, ``--latency S``). The
emulator is started as the "real" services with a price multiplier of 0.73 (the rehearsal's
own emulator prices at 0.5, so every price in the plan must come from the target), answering
a paid request in ``--latency`` seconds and making music in ``--job-seconds``, as real
services take time to infer and generate. A notebook with single chat calls (one quoting an
earlier answer), a packed typed batch, a music job and a report purchase is planned, then
run in a fresh kernel. It prints both durations and their ratio, the planned and paid
totals, and the transfers on the target's chain during each.

Goals (issue of planning): the plan takes less time than the run; its total within 2% of
what the run pays; 0 transfers during the plan.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import tempfile
import time
from decimal import Decimal
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

import x402lab as xl
from x402lab.emulator.server import start_emulator
from x402lab.emulator.settings import EmulatorSettings, Faults
from x402lab.money import atomic_to_decimal
from x402lab.wallet import Wallet

CELLS = [
    "import os\nimport x402lab as xl\nCHAT = 'openai-gpt-54-pro'\n"
    "lab = xl.connect(gateway_url=os.environ['PLAN_GW'], reports_url=os.environ['PLAN_RP'],\n"
    "                 wallet=xl.Wallet.from_env(), ledger=os.environ['PLAN_LEDGER'],\n"
    "                 budget=xl.Budget(usd=5, name='notebook'))",
    "hello = lab.chat('Say hello to the planner', model=CHAT, max_tokens=400)",
    "again = lab.chat('Say it shorter: ' + hello.text, model=CHAT, max_tokens=300)",
    "reviews = ['good phone', 'bad phone', 'ok phone', 'great screen', 'broken box', 'fine'] * 4\n"
    "typed = lab.batch_chat(reviews, model='qwen-3-8-27b', rows_per_request=6,\n"
    "                       labels=['positive', 'negative', 'neutral'], progress=None)",
    "job = lab.music('a calm piano loop', model='ace-step-15', duration_seconds=60)\njob.wait()",
    "menu = lab.reports.menu('solarmoth')\n"
    "bought = lab.reports.buy('solarmoth', ids=list(menu['report_id'][:2]))",
    "lab.close()",
]


async def run_for_real(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    await NotebookClient(notebook, timeout=600, kernel_name="python3").async_execute()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job-seconds", type=float, default=8.0)
    parser.add_argument("--latency", type=float, default=0.5)
    args = parser.parse_args()
    settings = EmulatorSettings(
        price_mult=0.73, job_seconds=args.job_seconds, faults=Faults(paid_latency_s=args.latency)
    )
    work = Path(tempfile.mkdtemp(prefix="x402lab-bench-plan-"))
    key = "0x" + secrets.token_hex(32)
    payer = Wallet.from_key(key).address
    path = work / "mixed.ipynb"
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cells = [new_code_cell(c) for c in CELLS]
    nbformat.write(new_notebook(cells=cells, metadata={"kernelspec": kernelspec}), path)
    with start_emulator(settings) as target:
        os.environ.update(
            PLAN_GW=target.gateway_url,
            PLAN_RP=target.reports_url,
            PLAN_LEDGER=str(work / "ledger.sqlite"),
            X402LAB_PRIVATE_KEY=key,
        )
        started = time.perf_counter()
        plan = xl.plan(path, progress=None)
        plan_s = time.perf_counter() - started
        during_plan = len(target.chain.transfers())
        started = time.perf_counter()
        asyncio.run(run_for_real(path))
        run_s = time.perf_counter() - started
        transfers = [t for t in target.chain.transfers() if t.payer.lower() == payer.lower()]
    planned = Decimal(plan.attrs["plan"]["total_usd"])
    paid = atomic_to_decimal(sum(t.amount_atomic for t in transfers))
    print(plan.to_text())
    print(f"plan: {plan_s:.1f} s, {planned} USD, {during_plan} transfers on the target's chain")
    print(f"run:  {run_s:.1f} s, {paid} USD in {len(transfers)} transfers")
    print(f"plan/run time: {plan_s / run_s:.2f}; plan/paid: {planned / paid:.4f}")


if __name__ == "__main__":
    main()

"""A small real workload on two emulators sharing one ledger, run once per test module.

``main``: chats (some at the minimum charge, one above it), embeddings, a music job, two
report purchases (the second partly owned) and a chat refused by ``max_usd``. ``faulty``: an
emulator that settles and then answers 500, so its chat leaves an ``unknown`` ledger row.
Both chains are kept, so tests can compare the report with what actually moved on chain.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import pytest

import x402lab as xl
from x402lab.emulator.server import RunningEmulator, start_emulator
from x402lab.emulator.settings import EmulatorSettings, Faults

matplotlib.use("Agg")
os.environ.setdefault("MPLBACKEND", "Agg")

MAIN_BUDGET = "analysis-main"
FAULTY_BUDGET = "analysis-faulty"


@dataclass
class Workload:
    lab: Any
    faulty_lab: Any
    main: RunningEmulator
    faulty: RunningEmulator
    ledger_path: Path
    purchases: list[Any]
    text_model: str
    embed_model: str
    main_budget: str = MAIN_BUDGET
    faulty_budget: str = FAULTY_BUDGET

    def received(self, emulator: RunningEmulator) -> int:
        """Base units the emulator's receiver got on its chain."""
        return int(emulator.chain.received(emulator.settings.pay_to))


def _run(lab: Any, faulty_lab: Any) -> tuple[list[Any], str, str]:
    models = lab.models(type="text").dropna(subset=["output_usd_per_1m"])
    models = models.sort_values("output_usd_per_1m")
    cheap, dear = models["id"].iloc[0], models["id"].iloc[-1]
    embed_model = lab.models(type="embedding")["id"].iloc[0]
    lab.chat("Say hello.", model=cheap, max_tokens=8)
    lab.chat("Say hello.", model=cheap, max_tokens=8, rebuy=True)  # a stored answer, bought again
    lab.chat("Write a long story about ledgers.", model=dear, max_tokens=2000)
    lab.embed(["alpha", "beta", "gamma"], model=embed_model)
    lab.embed("delta", model=embed_model)
    job = lab.music("calm piano", model="ace-step-15", duration_seconds=60, poll_s=0.05)
    job.wait()
    handle = lab.reports.shelf()["username"].iloc[0]
    menu = lab.reports.menu(handle)
    first = lab.reports.buy(handle, ids=list(menu["report_id"].iloc[:2]))
    second = lab.reports.buy(handle, select="all")
    with pytest.raises(xl.PaymentRefused):
        lab.chat("Too dear for this cap.", model=dear, max_tokens=2000, max_usd=0.001)
    with pytest.raises(xl.SettlementUnknown):
        faulty_lab.chat("Say hello.", model=cheap, max_tokens=8, rebuy=True)
    return [first, second], str(cheap), str(embed_model)


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workload]:
    """The workload above, with its labs open for the module's tests."""
    ledger_path = tmp_path_factory.mktemp("analysis") / "ledger.sqlite"
    main = start_emulator(EmulatorSettings(job_seconds=0.2))
    faulty = start_emulator(EmulatorSettings(faults=Faults(paid_then_500_rate=1.0)))
    labs = []
    try:
        for emulator, budget in ((main, MAIN_BUDGET), (faulty, FAULTY_BUDGET)):
            labs.append(
                xl.connect(
                    emulator.gateway_url,
                    emulator.reports_url,
                    wallet=xl.Wallet.create(),
                    budget=xl.Budget(usd=5.0, per_call_usd=1.0, name=budget),
                    ledger=ledger_path,
                )
            )
        purchases, text_model, embed_model = _run(*labs)
        yield Workload(
            labs[0], labs[1], main, faulty, ledger_path, purchases, text_model, embed_model
        )
    finally:
        for lab in labs:
            lab.close()
        main.stop()
        faulty.stop()

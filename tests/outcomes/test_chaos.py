"""Chaos, small (``benchmarks/chaos.py`` is the same at scale): three processes on one ledger
file and one named budget against one emulator with every fault at 5%, one of them killed
with SIGKILL and started again, then one ``lab.reconcile()``. Every payment outcome is known
and the money rules of docs/money.md hold to the atomic unit, read on the chain over
JSON-RPC."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from x402lab.emulator.server import start_emulator
from x402lab.emulator.settings import EmulatorSettings, Faults

# Its worker processes start inside benchmarks/chaos.py, out of the lane's sight.
pytestmark = pytest.mark.spawns

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "chaos.py"


def _chaos():
    spec = importlib.util.spec_from_file_location("chaos_benchmark", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_outcome_is_known_after_faults_a_kill_and_one_reconcile(tmp_path):
    chaos = _chaos()
    emulator = start_emulator(
        EmulatorSettings(balance_usd=1000, seed=7, faults=Faults(**chaos.FAULTS))
    )
    try:
        figures = chaos.run_chaos(
            calls=300,
            workers=3,
            concurrency=6,
            gateway=emulator.gateway_url,
            chain=emulator.chain_url,
            folder=tmp_path,
        )
    finally:
        emulator.stop()
    print(figures.report())
    assert figures.killed
    assert figures.settled_twice == 0
    assert figures.chain_settled_atomic <= figures.cap_atomic
    assert figures.chain_not_settled_in_ledger == 0
    assert figures.settled_absent_from_chain == 0
    assert figures.left_open == 0
    assert figures.ledger_settled_atomic == figures.chain_settled_atomic > 0
    # The faults did happen, and sending the same payload again resolved them.
    assert figures.resent_rows > 0 and figures.resolved_by_resend > 0
    assert figures.statuses.get("rejected", 0) > 0  # settlement failures: refused, held
    # The emulator's own books agree with the chain read over JSON-RPC.
    assert figures.chain_settled_atomic == sum(t.amount_atomic for t in emulator.chain.transfers())

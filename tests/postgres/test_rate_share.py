"""Two processes paying from one wallet share what they learn of a rate limit through the
ledger (``batch.concurrency``), in SQLite and in PostgreSQL: the second starts at the rate the
first learned, they split it, a cut met by one reaches the other, and a later run starts from
the rate remembered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from x402lab.batch.concurrency._rate import BETA, HOLD_S
from x402lab.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]
PAYER = "0x1a642f0E3c3aF545E7AcBD38b07251B3990914F1"

# One process's controller and share, driven line by line: "sync", "limit SENT" (a request
# meets a 429 after SENT requests of the wallet over the last second), "leave".
WORKER = textwrap.dedent(
    f"""
    import json, math, sys, time
    from x402lab.batch.concurrency._rate import RateController
    from x402lab.batch.concurrency._rate_share import RateShare
    from x402lab.ledger import Ledger

    ledger = Ledger(sys.argv[1])
    share = RateShare(ledger.db, {PAYER!r}, "gateway")
    controller = RateController(clock=time.time)
    for line in sys.stdin:
        command, *args = line.split()
        if command == "sync":
            share.sync(controller)
        elif command == "limit":
            started = controller.start()
            sent = int(args[0])  # evenly over the last second
            at = [started - 1 + i / sent for i in range(sent)]
            controller.limited_429(started, 0.0, wallet_sent=at)
            controller.released()
            share.sync(controller)
        elif command == "leave":
            share.leave(controller)
        wallet = controller.wallet_rate
        print(json.dumps({{
            "wallet_rate": wallet if math.isfinite(wallet) else None,
            "members": controller.members,
        }}), flush=True)
    """
)


class Worker:
    def __init__(self, ledger_url: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER, ledger_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def __call__(self, command: str) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"the worker died on {command!r}"
        return json.loads(line)

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=30)
        self.process.stdout.close()
        assert code == 0


@pytest.fixture
def workers(ledger_url):
    Ledger(ledger_url).close()  # migrated once, before the processes open it
    started: list[Worker] = []

    def start() -> Worker:
        worker = Worker(ledger_url)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.close()


def test_two_processes_converge_on_one_learned_rate(workers):
    first, second = workers(), workers()
    assert first("sync") == {"wallet_rate": None, "members": 1}
    learned = first("limit 40")["wallet_rate"]
    assert learned is not None and 10 < learned < 40
    # The second process starts at what the first learned, without a 429 of its own.
    assert second("sync") == {"wallet_rate": learned, "members": 2}
    assert first("sync") == {"wallet_rate": learned, "members": 2}
    # A limit met by the second is a cut for both.
    time.sleep(HOLD_S + 0.1)
    cut = second("limit 20")["wallet_rate"]
    assert cut == pytest.approx(BETA * learned)
    assert first("sync")["wallet_rate"] == pytest.approx(cut)
    # Once both have left, a new run starts from the rate they learned.
    second("leave")
    assert first("sync")["members"] == 1
    first("leave")
    assert workers()("sync") == {"wallet_rate": pytest.approx(cut), "members": 1}

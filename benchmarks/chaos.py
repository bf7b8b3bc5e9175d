"""Chaos: every payment outcome known, under faults, across processes, after a SIGKILL.

Run with ``python benchmarks/chaos.py`` (``--calls N``, ``--workers W``, ``--concurrency C``,
``--in-process``). The emulator runs with every fault at 5% (429 and 5xx before any payment
is looked at, settlement failure, settle-then-500) and a little latency, as a subprocess
(``x402lab serve``) unless ``--in-process``. W worker processes share one wallet, one ledger
file and one named budget (capped below what the calls would cost) and run ``batch_chat``
over their own prompts plus some of their neighbour's (the same request keys raced from two
processes). Worker 0 is killed with SIGKILL a quarter of the way in and started again with
the same rows. Then one ``lab.reconcile()`` against the emulator's chain (read over
JSON-RPC), and the figures, which must hold exactly:

- 0 requests settled twice (transfers on the chain per request key);
- spend on the chain within the budget's cap;
- 0 nonces settled on the chain that the ledger calls anything but settled (or lacks);
- 0 settled rows absent from the chain; 0 rows left ``signed`` or ``unknown``;
- the ledger's settled total equal to the chain's, to the atomic unit.

It prints how the ambiguous outcomes were resolved: by sending the same signed payload
again, by the chain confirming a lost answer, at the restarted process's ``connect()``, or
by the final reconciliation. ``run_chaos`` is what ``tests/outcomes/test_chaos.py`` runs
small. The worker is this script too (``python benchmarks/chaos.py worker ...``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODEL = "zai-org-glm-4.7-flash"
KEY = "0x" + "c4" * 32
BUDGET = "chaos"
PRICE_ATOMIC = 10_000  # the minimum charge: what each of these short chats costs
FAULTS = {
    "rate_429": 0.05,
    "rate_5xx": 0.05,
    "settle_fail_rate": 0.05,
    "paid_then_500_rate": 0.05,
    "retry_after_s": 0.05,
    "latency_s": 0.005,
}


@dataclass
class Figures:
    """What one chaos run shows (the invariants are the ``zero_*`` and ``*_total`` ones)."""

    calls: int = 0
    workers: int = 0
    seconds: float = 0.0
    killed: bool = False
    cap_atomic: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    batch_statuses: dict[str, int] = field(default_factory=dict)
    unknown_rows: list[str] = field(default_factory=list)  # batch rows shown unknown: why
    signed: int = 0
    resent_rows: int = 0
    resends: int = 0
    resolved_by_resend: int = 0
    answers_lost: int = 0
    concurrency: int = 0
    #: rows the resumed worker 0 showed ``paid_not_stored``: answers the kill lost
    lost_per_kill: int = 0
    orphaned: int = 0
    reconciled_at_end: int = 0
    settled_twice: int = 0
    chain_not_settled_in_ledger: int = 0
    settled_absent_from_chain: int = 0
    left_open: int = 0
    ledger_settled_atomic: int = 0
    chain_settled_atomic: int = 0

    @property
    def holds(self) -> bool:
        return (
            self.settled_twice == 0
            and self.chain_settled_atomic <= self.cap_atomic
            and self.chain_not_settled_in_ledger == 0
            and self.settled_absent_from_chain == 0
            and self.left_open == 0
            and self.ledger_settled_atomic == self.chain_settled_atomic
            and self.lost_per_kill <= self.concurrency
        )

    def report(self) -> str:
        usd = 1_000_000
        lines = [
            f"{self.calls} rows over {self.workers} processes in {self.seconds:.1f} s"
            f" (worker 0 SIGKILLed and resumed: {'yes' if self.killed else 'no'});"
            f" every fault at 5%",
            f"  batch rows:  {dict(sorted(self.batch_statuses.items()))}",
            *(f"    shown unknown then: {note[:160]}" for note in self.unknown_rows[:5]),
            f"  ledger rows: {dict(sorted(self.statuses.items()))}; {self.signed} signed",
            f"  ambiguous outcomes resolved: {self.resent_rows} payments sent again"
            f" ({self.resends} re-sends): {self.resolved_by_resend} settled or refused by a"
            f" re-send, {self.answers_lost} answers lost (confirmed on the chain);"
            f" {self.orphaned} left in flight by the killed process;"
            f" {self.reconciled_at_end} changed by the final reconcile()",
            f"  requests settled twice:                     {self.settled_twice}",
            f"  spend on chain within the cap:              {self.chain_settled_atomic / usd:.2f}"
            f" of {self.cap_atomic / usd:.2f} USD"
            f" ({'yes' if self.chain_settled_atomic <= self.cap_atomic else 'NO'})",
            f"  chain nonces the ledger calls otherwise:    {self.chain_not_settled_in_ledger}",
            f"  settled rows absent from the chain:         {self.settled_absent_from_chain}",
            f"  rows left signed or unknown:                {self.left_open}",
            f"  answers lost by the kill (paid_not_stored): {self.lost_per_kill}"
            f" (at most the concurrency, {self.concurrency}:"
            f" {'yes' if self.lost_per_kill <= self.concurrency else 'NO'})",
            f"  ledger settled == chain settled:            {self.ledger_settled_atomic}"
            f" == {self.chain_settled_atomic} atomic"
            f" ({'yes' if self.ledger_settled_atomic == self.chain_settled_atomic else 'NO'})",
            f"  invariants hold: {'yes' if self.holds else 'NO'}",
        ]
        return "\n".join(lines)


# -- the emulator ----------------------------------------------------------------------------


def start_emulator(in_process: bool, seed: int = 0) -> tuple[str, str, Callable[[], None]]:
    """(gateway URL, chain URL, stop) of an emulator with every fault at 5%."""
    if in_process:
        from x402lab.emulator.server import start_emulator as start
        from x402lab.emulator.settings import EmulatorSettings, Faults

        emulator = start(EmulatorSettings(balance_usd=10_000, seed=seed, faults=Faults(**FAULTS)))
        return emulator.gateway_url, emulator.chain_url, emulator.stop
    flags = ["--balance-usd", "10000", "--seed", str(seed)]
    for name, value in FAULTS.items():
        flag = {"retry_after_s": "retry-after", "latency_s": "latency"}.get(name, name)
        flags += [f"--{flag.replace('_', '-')}", str(value)]
    process = subprocess.Popen(
        [sys.executable, "-m", "x402lab", "serve", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout is not None
    urls = dict(process.stdout.readline().strip().split(": ", 1) for _ in range(3))

    def stop() -> None:
        process.terminate()
        process.wait(timeout=10)
        assert process.stdout is not None
        process.stdout.close()

    return urls["gateway"], urls["chain"], stop


# -- one worker process ----------------------------------------------------------------------


def prompts_of(worker: int, workers: int, calls: int, overlap: int) -> list[str]:
    """Worker ``worker``'s share of ``calls`` prompts, plus the first ``overlap`` of its
    neighbour's (the same request keys, raced from two processes)."""
    share = [f"chaos question {i}" for i in range(worker, calls, workers)]
    neighbour = [f"chaos question {i}" for i in range((worker + 1) % workers, calls, workers)]
    return share + neighbour[:overlap]


def worker(args: argparse.Namespace) -> None:
    import x402lab as xl

    lab = xl.connect(
        args.gateway,
        args.gateway,
        wallet=xl.Wallet.from_key(KEY),
        ledger=args.ledger,
        budget=xl.Budget(usd=args.cap_usd, name=BUDGET),
        chain_rpc_url=args.chain,
        retry=xl.lab.RetryPolicy(attempts=10, base_delay_s=0.05, max_delay_s=1.0),
    )
    try:
        prompts = prompts_of(args.index, args.workers, args.calls, args.overlap)
        # The shared cap binds before the end (run_chaos): a worker that starts after the
        # others spent most of it pays for what is left (partial=True) instead of refusing.
        frame = lab.batch_chat(
            prompts,
            model=MODEL,
            max_tokens=8,
            concurrency=args.concurrency,
            progress=None,
            partial=True,
        )
        unclear = frame[frame["status"] == "unknown"]
        notes = [f"{k}: {e}" for k, e in zip(unclear["request_key"], unclear["error"], strict=True)]
        lost = frame[frame["status"] == "paid_not_stored"]["request_key"].tolist()
        found = {"counts": dict(Counter(frame["status"])), "unknown": notes, "lost": lost}
        print(json.dumps(found), flush=True)
    finally:
        lab.close()


# -- the run ---------------------------------------------------------------------------------


def _spawn(index: int, common: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "worker", "--index", str(index), *common],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _finish(process: subprocess.Popen[str], counts: Counter[str], notes: list[str]) -> list[str]:
    out, err = process.communicate(timeout=3600)
    if process.returncode != 0:
        raise RuntimeError(f"a worker failed ({process.returncode}):\n{err[-3000:]}")
    found = json.loads(out.strip().splitlines()[-1])
    counts.update(found["counts"])
    notes.extend(found["unknown"])
    return list(found["lost"])


def run_chaos(
    *,
    calls: int,
    workers: int = 3,
    concurrency: int = 8,
    gateway: str,
    chain: str,
    folder: Path,
    kill_at: float = 0.25,
    overlap: int = 10,
) -> Figures:
    """Run the workers on one ledger and budget, kill and resume worker 0, reconcile, and
    measure (see the module docstring)."""
    import x402lab as xl

    ledger_path = folder / "ledger.sqlite"
    cap_atomic = int(calls * PRICE_ATOMIC * 0.9)  # the budget binds before the end
    common = [
        "--gateway", gateway, "--chain", chain, "--ledger", str(ledger_path),
        "--cap-usd", str(cap_atomic / 1_000_000), "--workers", str(workers),
        "--calls", str(calls), "--concurrency", str(concurrency), "--overlap", str(overlap),
    ]  # fmt: skip
    figures = Figures(calls=calls, workers=workers, cap_atomic=cap_atomic, concurrency=concurrency)
    counts: Counter[str] = Counter()
    started = time.perf_counter()
    running = [_spawn(index, common) for index in range(workers)]
    watch, killed_pid, lost_keys = None, None, []
    while running[0].poll() is None:
        if watch is None and ledger_path.exists():
            watch = xl.Ledger(ledger_path)
        settled = watch.budget_state(BUDGET).settled_atomic if watch else 0
        if settled >= kill_at * calls * PRICE_ATOMIC:
            killed_pid = running[0].pid
            running[0].send_signal(signal.SIGKILL)
            running[0].communicate()
            figures.killed = True
            running[0] = _spawn(0, common)  # the same rows again
            break
        time.sleep(0.05)
    for index, process in enumerate(running):
        found = _finish(process, counts, figures.unknown_rows)
        if index == 0 and figures.killed:
            lost_keys = found
    if watch is not None:
        watch.close()
    figures.batch_statuses = dict(counts)

    lab = xl.connect(
        gateway,
        gateway,
        wallet=xl.Wallet.from_key(KEY),
        ledger=ledger_path,
        budget=xl.Budget(usd=cap_atomic / 1_000_000, name=BUDGET),
        chain_rpc_url=chain,
    )
    try:
        figures.reconciled_at_end = len(lab.reconcile())
        rows = lab.ledger.rows()
        payer = lab.wallet.address
    finally:
        lab.close()
    figures.seconds = time.perf_counter() - started
    _measure(figures, rows, chain_transfers(chain, payer))
    # Answers the kill lost: rows the resumed worker showed paid_not_stored whose payment
    # was settled by the killed process with its receipt (a settle-then-500 fault's lost
    # answers are counted apart, in ``answers_lost``).
    with contextlib.closing(sqlite3.connect(ledger_path)) as db:
        settled_by = {
            key: str(owner or "").split(":")[1:2]
            for key, owner in db.execute(
                "SELECT request_key, owner FROM payments WHERE status = 'settled'"
                " AND COALESCE(error, '') NOT LIKE '%answer was lost%'"
            )
        }
    figures.lost_per_kill = sum(settled_by.get(key) == [str(killed_pid)] for key in set(lost_keys))
    return figures


def chain_transfers(chain_url: str, payer: str) -> dict[str, int]:
    """Every authorization of ``payer`` used on the chain: lowercase nonce -> amount moved
    (read over JSON-RPC: the AuthorizationUsed and Transfer logs of each transaction)."""
    from x402lab._loop import run
    from x402lab.chain import ChainClient
    from x402lab.chain.rpc import AUTHORIZATION_USED, TRANSFER, word_of_address
    from x402lab.x402.tokens import BASE_USDC

    async def logs() -> list[dict[str, Any]]:
        client = ChainClient(chain_url, timeout_s=120)
        try:
            query = {
                "address": BASE_USDC.address,
                "fromBlock": "0x0",
                "toBlock": "latest",
                "topics": [[AUTHORIZATION_USED, TRANSFER], word_of_address(payer)],
            }
            return list(await client.call("eth_getLogs", [query]))
        finally:
            await client.aclose()

    nonce_of: dict[str, str] = {}
    amount_of: dict[str, int] = {}
    for log in run(logs()):
        topic, tx = log["topics"][0].lower(), log["transactionHash"]
        if topic == AUTHORIZATION_USED:
            assert tx not in nonce_of, f"transaction {tx} used two authorizations"
            nonce_of[tx] = log["topics"][2].lower()
        elif topic == TRANSFER:
            amount_of[tx] = amount_of.get(tx, 0) + int(log["data"], 16)
    out: dict[str, int] = {}
    for tx, nonce in nonce_of.items():
        assert nonce not in out, f"nonce {nonce} used twice"
        out[nonce] = amount_of.get(tx, 0)
    return out


def _measure(figures: Figures, rows: list[dict[str, Any]], chain: dict[str, int]) -> None:
    """Fill ``figures`` from the ledger's rows and the chain's used authorizations."""
    by_nonce = {str(r["nonce"]).lower(): r for r in rows if r["nonce"]}
    figures.statuses = dict(Counter(r["status"] for r in rows))
    figures.signed = len(by_nonce)
    resent = [r for r in rows if r["resends"]]
    figures.resent_rows = len(resent)
    figures.resends = sum(r["resends"] for r in rows)
    figures.resolved_by_resend = sum(r["resolved_by"] == "resend" for r in resent)
    figures.answers_lost = sum("answer was lost" in (r["error"] or "") for r in rows)
    figures.orphaned = sum("stopped before an answer arrived" in (r["error"] or "") for r in rows)
    figures.unknown_rows += [
        f"row {r['id']}: {r['error']}" for r in rows if "could not be asked" in (r["error"] or "")
    ]
    keys = Counter(by_nonce[n]["request_key"] if n in by_nonce else f"?{n}" for n in chain)
    figures.settled_twice = sum(1 for count in keys.values() if count > 1)
    figures.chain_not_settled_in_ledger = sum(
        1 for n in chain if n not in by_nonce or by_nonce[n]["status"] != "settled"
    )
    settled = [r for r in rows if r["status"] == "settled"]
    figures.settled_absent_from_chain = sum(str(r["nonce"]).lower() not in chain for r in settled)
    figures.left_open = sum(r["status"] in ("signed", "unknown") for r in rows)
    figures.ledger_settled_atomic = sum(r["amount_atomic"] for r in settled)
    figures.chain_settled_atomic = sum(chain.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    one = sub.add_parser("worker")
    for name in ("--gateway", "--chain", "--ledger"):
        one.add_argument(name, required=True)
    for name in ("--index", "--workers", "--calls", "--concurrency", "--overlap"):
        one.add_argument(name, type=int, required=True)
    one.add_argument("--cap-usd", type=float, required=True)
    parser.add_argument("--calls", type=int, default=2000, help="rows over all workers")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--in-process", action="store_true", help="emulator in this process")
    args = parser.parse_args()
    if args.command == "worker":
        worker(args)
        return
    gateway, chain, stop = start_emulator(args.in_process, args.seed)
    try:
        figures = run_chaos(
            calls=args.calls,
            workers=args.workers,
            concurrency=args.concurrency,
            gateway=gateway,
            chain=chain,
            folder=Path(tempfile.mkdtemp(prefix="x402lab-chaos-")),
            overlap=max(10, args.calls // 50),
        )
    finally:
        stop()
    print(figures.report())
    sys.exit(0 if figures.holds else 1)


if __name__ == "__main__":
    main()

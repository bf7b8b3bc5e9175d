"""Paid calls per second at concurrency 32: x402lab batch_chat, the x402 SDK, bare aiohttp.

Run with ``python benchmarks/batch_throughput.py`` (``--calls N``, ``--rounds R``,
``--concurrency C``, ``--latency S``, ``--in-process``, ``--clients x402lab,bare,sdk``: which
clients run, ``--gateway URL``: an emulator already running, ``--json``: each round's figures
for ``benchmarks/before_after.py``, ``--fresh``: x402lab's timed batch is
a fresh lab's first, with no warm-up batch before it, its catalog and price unknown; the
default with ``--latency``, where ``--warm`` times a batch after a warm-up one instead).
The emulator runs as a subprocess
(``python -m x402lab serve``) so the server does not share the clients' GIL; on a 2-core
machine it gets one core and the client the other. ``--latency S`` makes the emulator wait
S seconds before every answer (both trips of a two-trip call pay it), as a real network
would. Every client runs in this process, so the process CPU time spent during a client's
timed calls (``time.process_time``) is that client's CPU alone: the emulator's is in the
subprocess. Each client pays for the same number of distinct short
chat completions (one 402 and one paid request each) with its own fresh wallet, in rounds
that alternate between the clients so a change in machine load hits all three alike (the
load average is printed: other work on the machine moves these figures; x402lab and bare
run back to back in each round, their CPU ratio being the tightest goal):

- x402lab: ``AsyncLab.batch_chat`` with a budget, the SQLite ledger (write-ahead, fsync),
  dedup, each row claimed in the ledger before it is paid and its answer stored there (the
  full paid path, as every batch runs);
- the official x402 SDK: ``x402HttpxClient`` with ``x402Client`` + ``ExactEvmClientScheme`` +
  ``EthAccountSigner``, spend controls off, tasks bounded by a semaphore;
- bare: an aiohttp session that reads the challenge and signs with eth-account's
  ``Account.sign_typed_data``; no budget, no ledger, no checks.

Prints calls/s and client CPU per paid call for each, and x402lab's ratios to bare whenever
both ran (goals, issue 45: on loopback >= 0.9x bare's calls/s and <= 1.2x its CPU per call; a
fresh lab's batch of 400 at 250 ms >= 0.86 of the one-trip floor, concurrency / latency, whose
reach with no client CPU at all is 0.893: one round trip to learn the catalog and the price,
then ceil(400 / 32) trips). With latency it also prints how busy x402lab's process was (CPU
over wall time): as that nears one core (the ledger's disk waits take the rest), its event
loop is saturated, every await waits a long loop iteration, and calls/s follow the CPU per
call rather than the latency.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import platform
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

MODEL = "zai-org-glm-4.7-flash"
#: ``--fresh``: x402lab's timed batch is a fresh lab's first (no warm-up batch before it).
FRESH = False
PATH = "/api/v1/chat/completions"


def body(client: str, i: int) -> dict:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"{client} question {i}"}],
        "max_tokens": 16,
    }


# -- the emulator ----------------------------------------------------------------------------


def start_server(in_process: bool, latency_s: float) -> tuple[str, Callable[[], None]]:
    if in_process:
        from x402lab.emulator.server import start_emulator
        from x402lab.emulator.settings import EmulatorSettings, Faults

        settings = EmulatorSettings(balance_usd=10_000, faults=Faults(latency_s=latency_s))
        emulator = start_emulator(settings)
        return emulator.gateway_url, emulator.stop
    process = subprocess.Popen(
        [sys.executable, "-m", "x402lab", "serve", "--balance-usd", "10000"]
        + ["--latency", str(latency_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    gateway = process.stdout.readline().split()[-1]
    process.stdout.readline()  # the reports URL

    def stop() -> None:
        process.terminate()
        process.wait(timeout=10)
        assert process.stdout is not None
        process.stdout.close()

    return gateway, stop


# -- the three clients -----------------------------------------------------------------------


async def run_x402lab(
    gateway: str, calls: int, concurrency: int, round_: int, sync: str = "FULL"
) -> tuple[float, float]:
    import x402lab as xl

    folder = Path(tempfile.mkdtemp(prefix="x402lab-bench-"))
    lab = xl.connect_async(
        gateway,
        gateway,
        wallet=xl.Wallet.create(),
        budget=xl.Budget(usd=10_000),
        ledger=folder / "ledger.sqlite",
    )
    if sync != "FULL":
        # Diagnostic only (--diagnose): how much of the time is the ledger's fsync (every
        # commit without it). x402lab itself never lowers durability.
        db = lab.ledger.db
        commit = db.transaction
        db.transaction = lambda **kw: commit(**{**kw, "durable": False})  # type: ignore[method-assign]
        lab.ledger.write_ahead._wal = None  # no fsync of the write-ahead rows either
    try:
        clock = Clock()  # --fresh: the lab's first batch, its catalog and price unknown
        if not FRESH:
            await lab.batch_chat(  # warm-up: connections, catalog check
                [f"warm {i}" for i in range(concurrency)],
                model=MODEL,
                max_tokens=16,
                concurrency=concurrency,
                progress=None,
            )
            clock = Clock()
        prompts = [f"x402lab round {round_} question {i}" for i in range(calls)]
        frame = await lab.batch_chat(
            prompts, model=MODEL, max_tokens=16, concurrency=concurrency, progress=None
        )
        spent = clock.stop()
        assert (frame["status"] == "ok").all(), frame["status"].value_counts()
        return spent
    finally:
        await lab.aclose()


class Clock:
    """Wall and process CPU seconds since it was made (``stop()``: both, as a pair)."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


async def bounded(
    calls: int, concurrency: int, one: Callable[[int], Awaitable[None]]
) -> tuple[float, float]:
    """Wall and CPU seconds for ``calls`` calls of ``one``, at most ``concurrency`` at a time."""
    semaphore = asyncio.Semaphore(concurrency)

    async def task(i: int) -> None:
        async with semaphore:
            await one(i)

    await asyncio.gather(*(task(-1 - i) for i in range(concurrency)))  # warm-up
    clock = Clock()
    await asyncio.gather(*(task(i) for i in range(calls)))
    return clock.stop()


async def run_sdk(gateway: str, calls: int, concurrency: int, round_: int) -> tuple[float, float]:
    import httpx
    from eth_account import Account
    from x402 import x402Client
    from x402.http.clients.httpx import x402HttpxClient
    from x402.mechanisms.evm.exact import ExactEvmClientScheme
    from x402.mechanisms.evm.signers import EthAccountSigner

    client = x402Client()
    client.register("eip155:8453", ExactEvmClientScheme(EthAccountSigner(Account.from_key(_key()))))
    client.set_spend_controls(False)  # no per-payment cap in the way
    limits = httpx.Limits(max_connections=2 * concurrency, max_keepalive_connections=concurrency)
    async with x402HttpxClient(client, timeout=60, limits=limits) as http:

        async def one(i: int) -> None:
            response = await http.post(f"{gateway}{PATH}", json=body(f"sdk {round_}", i))
            assert response.status_code == 200, response.text

        return await bounded(calls, concurrency, one)


def bare_payer(key: str) -> Callable[[str], str]:
    """A bare client's payment: the PAYMENT-SIGNATURE header answering a PAYMENT-REQUIRED
    challenge, signed with eth-account's ``Account.sign_typed_data``; no checks."""
    from eth_account import Account

    account = Account.from_key(key)
    types = {
        "TransferWithAuthorization": [
            {"name": "from", "type": "address"},
            {"name": "to", "type": "address"},
            {"name": "value", "type": "uint256"},
            {"name": "validAfter", "type": "uint256"},
            {"name": "validBefore", "type": "uint256"},
            {"name": "nonce", "type": "bytes32"},
        ]
    }

    def pay(header: str) -> str:
        challenge = json.loads(base64.b64decode(header))
        req = challenge["accepts"][0]
        now = int(time.time())
        auth = {
            "from": account.address,
            "to": req["payTo"],
            "value": str(req["amount"]),
            "validAfter": str(now - 600),
            "validBefore": str(now + int(req["maxTimeoutSeconds"])),
            "nonce": "0x" + os.urandom(32).hex(),
        }
        signed = account.sign_typed_data(
            domain_data={
                "name": req["extra"]["name"],
                "version": req["extra"]["version"],
                "chainId": int(req["network"].split(":")[1]),
                "verifyingContract": req["asset"],
            },
            message_types=types,
            message_data={
                **auth,
                "value": int(auth["value"]),
                "validAfter": int(auth["validAfter"]),
                "validBefore": int(auth["validBefore"]),
                "nonce": bytes.fromhex(auth["nonce"][2:]),
            },
        )
        payload = {
            "x402Version": 2,
            "resource": challenge.get("resource"),
            "accepted": req,
            "payload": {"signature": "0x" + bytes(signed.signature).hex(), "authorization": auth},
        }
        return base64.b64encode(json.dumps(payload).encode()).decode()

    return pay


async def run_bare(gateway: str, calls: int, concurrency: int, round_: int) -> tuple[float, float]:
    import aiohttp

    pay = bare_payer(_key())
    connector = aiohttp.TCPConnector(limit=2 * concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(i: int) -> None:
            url, data = f"{gateway}{PATH}", body(f"bare {round_}", i)
            async with session.post(url, json=data) as first:
                assert first.status == 402
                await first.read()
                header = first.headers["PAYMENT-REQUIRED"]
            headers = {"PAYMENT-SIGNATURE": pay(header)}
            async with session.post(url, json=data, headers=headers) as paid:
                assert paid.status == 200, await paid.text()
                await paid.read()

        return await bounded(calls, concurrency, one)


def _key() -> str:
    return "0x" + secrets.token_hex(32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="paid calls per client per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--latency", type=float, default=0.0, help="the emulator's delay before every answer (s)"
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="emulator in this process (its CPU then counts as the clients')",
    )
    parser.add_argument(
        "--diagnose",
        action="store_true",
        help="also run x402lab with the ledger's fsync off (a measurement, not a setting)",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="time x402lab's first batch on a fresh lab (catalog, schema and price unknown);"
        " the default with --latency",
    )
    parser.add_argument(
        "--warm", action="store_true", help="with --latency: time a batch after a warm-up one"
    )
    parser.add_argument(
        "--clients", default="x402lab,bare,sdk", help="which clients run (comma-separated)"
    )
    parser.add_argument(
        "--gateway", help="an emulator already running (its latency is --latency's)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print each round's wall and CPU seconds as JSON"
    )
    args = parser.parse_args()
    global FRESH
    FRESH = args.fresh or (args.latency > 0 and not args.warm)
    if args.gateway:
        gateway, stop = args.gateway, lambda: None
    else:
        gateway, stop = start_server(args.in_process, args.latency)
    where = "in this process" if args.in_process else "in a subprocess"
    # A process pays for importing what batches use once, whichever lab is first: it is timed
    # here apart, not charged to round 1's fresh lab alone.
    imports = Clock()
    import x402lab.connection  # noqa: F401

    print(f"one-time imports of this process (x402lab): {imports.stop()[0]:.2f} s")
    print(
        f"python {platform.python_version()}, {os.cpu_count()} cores, load average"
        f" {os.getloadavg()[0]:.1f}; emulator {where}, latency {args.latency * 1000:.0f} ms;"
        f" {args.rounds} rounds of {args.calls} paid chat calls per client at concurrency"
        f" {args.concurrency}; x402lab's timed batch is"
        f" {'a fresh lab' + chr(39) + 's first' if FRESH else 'after a warm-up batch'}"
    )
    # x402lab and bare run back to back in each round: their CPU ratio is the tightest goal,
    # and a change in machine load between two adjacent runs is smaller than across the
    # SDK's longer run.
    named = {"x402lab": ("x402lab", run_x402lab), "bare": ("bare", run_bare)}
    named["sdk"] = ("x402 SDK", run_sdk)
    clients: list[tuple[str, Callable[..., Awaitable[tuple[float, float]]]]] = [
        named[name] for name in args.clients.split(",")
    ]
    if args.diagnose:

        async def no_fsync(*run_args: Any) -> tuple[float, float]:
            return await run_x402lab(*run_args, sync="NORMAL")

        clients.append(("x402lab, ledger fsync off (diagnostic)", no_fsync))
    wall = dict.fromkeys((name for name, _ in clients), 0.0)
    cpu = dict(wall)
    # Each round's x402lab / bare ratios: how far one run's figures move on this machine.
    per_round: list[tuple[float, float, float]] = []
    rounds: list[dict[str, tuple[float, float]]] = []  # each client's wall and CPU seconds
    try:
        for round_ in range(args.rounds):
            this_round: dict[str, tuple[float, float]] = {}
            for name, run in clients:
                spent_wall, spent_cpu = asyncio.run(
                    run(gateway, args.calls, args.concurrency, round_)
                )
                wall[name] += spent_wall
                cpu[name] += spent_cpu
                this_round[name] = (spent_wall, spent_cpu)
            rounds.append(this_round)
            if args.json or not {"x402lab", "bare"} <= this_round.keys():
                continue
            lab_round, bare_round = this_round["x402lab"], this_round["bare"]
            per_round.append(  # calls/s, CPU, x402lab's calls/s
                (
                    bare_round[0] / lab_round[0],
                    lab_round[1] / bare_round[1],
                    args.calls / lab_round[0],
                )
            )
    finally:
        stop()
    if args.json:  # for benchmarks/before_after.py: the figures alone
        print(json.dumps({"calls": args.calls, "rounds": rounds}))
        return
    calls = args.calls * args.rounds
    rates = {name: calls / spent for name, spent in wall.items()}
    per_call_ms = {name: 1000 * spent / calls for name, spent in cpu.items()}
    for name, rate in rates.items():
        print(
            f"{name:>9}: {rate:8.1f} paid calls/s, client CPU {per_call_ms[name]:5.2f} ms"
            " per paid call"
        )
    if args.in_process:
        print("(emulator in this process: the CPU figures include the server's)")
    if args.diagnose:
        print("(the diagnostic row is not a configuration x402lab offers)")
    if not {"x402lab", "bare"} <= rates.keys():  # --clients: the ratios need both
        return
    lab, bare = rates["x402lab"], rates["bare"]
    cpu_to_bare = per_call_ms["x402lab"] / per_call_ms["bare"]
    if "x402 SDK" in rates:
        print(f"x402lab / SDK : {lab / rates['x402 SDK']:5.2f}x calls/s")
        print(f"x402lab / SDK : {per_call_ms['x402lab'] / per_call_ms['x402 SDK']:5.2f}x CPU")
    if args.latency == 0:
        # The loopback goals: the client's own CPU, with no latency to hide it.
        met = _met(lab / bare >= 0.9)
        print(f"x402lab / bare: {lab / bare:5.2f}x calls/s (goal >= 0.9x: {met})")
    else:
        # A paid call whose challenge is known pays with its first request: one trip each.
        floor = args.concurrency / args.latency
        goal = 0.86 if FRESH else 0.70
        print(f"x402lab / bare: {lab / bare:5.2f}x calls/s")
        print(
            f"x402lab / one-trip floor ({floor:.0f} calls/s): {lab / floor:5.2f}"
            f" (goal >= {goal}: {_met(lab / floor >= goal)}); bare two-trip client"
            f" {bare / floor:5.2f}"
        )
        # The client is one process on one event loop: past about one core's worth of CPU
        # its loop is saturated, and latency no longer hides the work of each call.
        busy = cpu["x402lab"] / wall["x402lab"]
        print(
            f"x402lab client busy {busy:.0%} of one core; at {per_call_ms['x402lab']:.2f} ms"
            f" per call one core tops out at {1000 / per_call_ms['x402lab']:.0f} calls/s"
        )
    print(
        f"x402lab / bare: {cpu_to_bare:5.2f}x CPU per call"
        f" (goal <= 1.2x: {_met(cpu_to_bare <= 1.2)})"
    )
    if len(per_round) > 1:
        rates_ratio = [r for r, _, _ in per_round]
        cpu_ratio = [c for _, c, _ in per_round]
        print(
            "rounds alone, x402lab / bare: calls/s "
            + " ".join(f"{r:.2f}x" for r in rates_ratio)
            + "; CPU per call "
            + " ".join(f"{c:.2f}x" for c in cpu_ratio)
        )
        if args.latency > 0:
            floor = args.concurrency / args.latency
            print(
                "rounds alone, x402lab / one-trip floor: "
                + " ".join(f"{lab_rate / floor:.2f}" for _, _, lab_rate in per_round)
            )
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


if __name__ == "__main__":
    main()

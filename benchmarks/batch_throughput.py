"""Paid calls per second at concurrency 32: x402lab batch_chat, the x402 SDK, bare aiohttp.

Run with ``python benchmarks/batch_throughput.py`` (``--calls N``, ``--rounds R``,
``--concurrency C``, ``--in-process``). The emulator runs as a subprocess (``python -m
x402lab serve``) so the server does not share the clients' GIL; on a 2-core machine it gets
one core and the client the other. Each client pays for the same number of distinct short
chat completions (one 402 and one paid request each) with its own fresh wallet, in rounds
that alternate between the clients so a change in machine load hits all three alike (the
load average is printed: other work on the machine moves these figures):

- x402lab: ``AsyncLab.batch_chat`` with a budget, the SQLite ledger (write-ahead, fsync),
  dedup, each row claimed in the ledger before it is paid and its answer stored there (the
  full paid path, as every batch runs);
- the official x402 SDK: ``x402HttpxClient`` with ``x402Client`` + ``ExactEvmClientScheme`` +
  ``EthAccountSigner``, spend controls off, tasks bounded by a semaphore;
- bare: an aiohttp session that reads the challenge and signs with eth-account's
  ``Account.sign_typed_data``; no budget, no ledger, no checks.

Prints calls/s for each and the ratios (goal: x402lab >= 3x the SDK and >= half of bare).
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
PATH = "/api/v1/chat/completions"


def body(client: str, i: int) -> dict:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"{client} question {i}"}],
        "max_tokens": 16,
    }


# -- the emulator ----------------------------------------------------------------------------


def start_server(in_process: bool) -> tuple[str, Callable[[], None]]:
    if in_process:
        from x402lab.emulator.server import start_emulator
        from x402lab.emulator.settings import EmulatorSettings

        emulator = start_emulator(EmulatorSettings(balance_usd=10_000))
        return emulator.gateway_url, emulator.stop
    process = subprocess.Popen(
        [sys.executable, "-m", "x402lab", "serve", "--balance-usd", "10000"],
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
) -> float:
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
        db.transaction = lambda *, durable=False: commit(durable=False)  # type: ignore[method-assign]
    try:
        await lab.batch_chat(  # warm-up: connections, catalog check
            [f"warm {i}" for i in range(concurrency)],
            model=MODEL,
            max_tokens=16,
            concurrency=concurrency,
            progress=None,
        )
        prompts = [f"x402lab round {round_} question {i}" for i in range(calls)]
        start = time.perf_counter()
        frame = await lab.batch_chat(
            prompts, model=MODEL, max_tokens=16, concurrency=concurrency, progress=None
        )
        elapsed = time.perf_counter() - start
        assert (frame["status"] == "ok").all(), frame["status"].value_counts()
        return elapsed
    finally:
        await lab.aclose()


async def bounded(calls: int, concurrency: int, one: Callable[[int], Awaitable[None]]) -> float:
    """Seconds for ``calls`` calls of ``one``, at most ``concurrency`` at a time."""
    semaphore = asyncio.Semaphore(concurrency)

    async def task(i: int) -> None:
        async with semaphore:
            await one(i)

    await asyncio.gather(*(task(-1 - i) for i in range(concurrency)))  # warm-up
    start = time.perf_counter()
    await asyncio.gather(*(task(i) for i in range(calls)))
    return time.perf_counter() - start


async def run_sdk(gateway: str, calls: int, concurrency: int, round_: int) -> float:
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


async def run_bare(gateway: str, calls: int, concurrency: int, round_: int) -> float:
    import aiohttp
    from eth_account import Account

    account = Account.from_key(_key())
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
    parser.add_argument("--calls", type=int, default=500, help="paid calls per client per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--in-process", action="store_true", help="emulator in this process")
    parser.add_argument(
        "--diagnose",
        action="store_true",
        help="also run x402lab with the ledger's fsync off (a measurement, not a setting)",
    )
    args = parser.parse_args()
    gateway, stop = start_server(args.in_process)
    where = "in this process" if args.in_process else "in a subprocess"
    print(
        f"python {platform.python_version()}, {os.cpu_count()} cores, load average"
        f" {os.getloadavg()[0]:.1f}; emulator {where}; {args.rounds} rounds of {args.calls}"
        f" paid chat calls per client at concurrency {args.concurrency}"
    )
    clients: list[tuple[str, Callable[..., Awaitable[float]]]] = [
        ("x402lab", run_x402lab),
        ("x402 SDK", run_sdk),
        ("bare", run_bare),
    ]
    if args.diagnose:

        async def no_fsync(*run_args: Any) -> float:
            return await run_x402lab(*run_args, sync="NORMAL")

        clients.append(("x402lab, ledger fsync off (diagnostic)", no_fsync))
    seconds = dict.fromkeys((name for name, _ in clients), 0.0)
    try:
        for round_ in range(args.rounds):
            for name, run in clients:
                seconds[name] += asyncio.run(run(gateway, args.calls, args.concurrency, round_))
    finally:
        stop()
    rates = {name: args.calls * args.rounds / spent for name, spent in seconds.items()}
    for name, rate in rates.items():
        print(f"{name:>9}: {rate:8.1f} paid calls/s")
    if args.diagnose:
        print("(the diagnostic row is not a configuration x402lab offers)")
    to_sdk = rates["x402lab"] / rates["x402 SDK"]
    to_bare = rates["x402lab"] / rates["bare"]
    print(f"x402lab / SDK : {to_sdk:5.2f}x (goal >= 3x: {'met' if to_sdk >= 3 else 'NOT met'})")
    print(
        f"x402lab / bare: {to_bare:5.2f}x (goal >= 0.5x: {'met' if to_bare >= 0.5 else 'NOT met'})"
    )
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

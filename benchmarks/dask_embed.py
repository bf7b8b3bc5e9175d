"""A Dask embedding run over two workers, one of them killed mid-run, against one process.

Run with ``python benchmarks/dask_embed.py`` (``--texts N``, ``--workers W``,
``--partitions P``, ``--concurrency C`` per worker, ``--kill-at F``, ``--latency S``,
``--ledger URL``). The emulator runs in this process (its chain is inspected directly); this
process does nothing else while the batches run. Two runs embed N distinct texts each (one
text per paid request, so the requests needed are N):

1. one process: ``lab.batch_embed(list)`` in a child process, with ``W x C`` requests in
   flight (the same as the cluster's);
2. Dask: ``lab.batch_embed(dask_series)`` on a ``LocalCluster`` of W single-threaded worker
   processes (started before the clock starts); when a fraction F of the texts has settled,
   one worker process is killed with SIGKILL (its nanny starts a new one, Dask runs its
   partitions again).

Both share one ledger (``--ledger postgresql://...`` for PostgreSQL, else an SQLite file)
and one wallet whose key the workers read from an environment variable. The Dask run must
show, exactly: every text once in the result; one transfer on the emulator's chain per
text's request key and as many transfers as texts (the requests needed: nothing paid
twice); the chain's spend within the budget's cap and equal to the ledger's settled spend.
Rows whose answer died with the killed worker are reported (``paid_not_stored``: paid once,
never bought again). Printed: both wall times and their ratio. Spends emulated money only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

MODEL = "text-embedding-3-small"
KEY_VARIABLE = "X402LAB_BENCH_KEY"
PRICE_ATOMIC = 10_000  # one short text costs the minimum charge


def corpus(n: int, tag: str) -> list[str]:
    """n distinct short texts; ``tag`` keeps each run's texts apart from earlier runs'."""
    words = "river stone market garden signal winter copper lantern harbor meadow".split()
    return [
        f"{tag} note {i}: " + " ".join(words[(i * 7 + k) % len(words)] for k in range(10))
        for i in range(n)
    ]


def connect(args: argparse.Namespace, urls: dict[str, str], budget: str, cap_usd: float) -> Any:
    import x402lab as xl

    return xl.connect(
        urls["gateway"],
        urls["reports"],
        wallet=xl.Wallet.from_env(KEY_VARIABLE),
        budget=xl.Budget(usd=cap_usd, name=budget),
        ledger=args.ledger,
        chain_rpc_url=urls["chain"],
    )


def child(spec: str) -> None:
    """The one-process run (``dask_embed.py child JSON``): prints its figures as JSON."""
    args = argparse.Namespace(**json.loads(spec))
    lab = connect(args, args.urls, args.budget, args.cap_usd)
    texts = corpus(args.texts, args.tag)
    started = time.perf_counter()
    frame = lab.batch_embed(
        texts,
        model=MODEL,
        dimensions=args.dimensions,
        concurrency=args.concurrency * args.workers,
        progress=None,
    )
    elapsed = time.perf_counter() - started
    lab.close()
    print(json.dumps({"seconds": elapsed, "statuses": frame["status"].value_counts().to_dict()}))


def single_process(args: argparse.Namespace, urls: dict[str, str]) -> dict[str, Any]:
    spec = {
        **vars(args),
        "urls": urls,
        "tag": f"single-{secrets.token_hex(4)}",
        "budget": f"bench-single-{secrets.token_hex(4)}",
        "cap_usd": args.texts * PRICE_ATOMIC * 1.05 / 1e6,
    }
    done = subprocess.run(
        [sys.executable, __file__, "child", json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the one-process run failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def dask_run(args: argparse.Namespace, urls: dict[str, str], emulator: Any) -> dict[str, Any]:
    import dask.dataframe as dd
    import pandas as pd
    from distributed import Client, LocalCluster

    cap_atomic = int(args.texts * PRICE_ATOMIC * 1.05)
    lab = connect(args, urls, f"bench-dask-{secrets.token_hex(4)}", cap_atomic / 1e6)
    texts = corpus(args.texts, f"dask-{secrets.token_hex(4)}")
    series = dd.from_pandas(pd.Series(texts, name="text"), npartitions=args.partitions)
    cluster = LocalCluster(
        n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = Client(cluster)
    try:
        # Connect every worker's lab before the clock starts, as a warm single process is.
        lab.batch_embed(
            dd.from_pandas(pd.Series(["warm up"]), npartitions=args.workers),
            model=MODEL,
            dimensions=args.dimensions,
            progress=None,
        ).compute()
        before = len(emulator.chain.transfers())
        pid = sorted(client.run(os.getpid).items())[0][1]
        killed: list[int] = []
        threshold = before + int(args.texts * args.kill_at)

        def watch() -> None:
            while not killed and len(emulator.chain.transfers()) < threshold:
                time.sleep(0.01)
            if not killed:
                os.kill(pid, signal.SIGKILL)
                killed.append(len(emulator.chain.transfers()) - before)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        started = time.perf_counter()
        frame = lab.batch_embed(
            series,
            model=MODEL,
            dimensions=args.dimensions,
            concurrency=args.concurrency,
            progress=None,
        ).compute()
        elapsed = time.perf_counter() - started
        killed.append(-1)  # stops the watcher if the run ended first
        watcher.join(timeout=2)
        figures = check(lab, emulator, frame, texts, cap_atomic)
        figures.update(seconds=elapsed, killed_after=killed[0])
        return figures
    finally:
        client.close()
        cluster.close()
        lab.close()


def check(lab: Any, emulator: Any, frame: Any, texts: list[str], cap_atomic: int) -> dict[str, Any]:
    """The figures of the Dask run, read from the result, the ledger and the chain."""
    keys = set(frame["request_key"])
    budget = lab.budget.name
    # Every payment of this run's budget (the warm-up's too), and the request key it paid for.
    key_of = {
        row["nonce"].lower(): row["request_key"]
        for row in lab.ledger.rows()
        if row["nonce"] is not None and row["budget"] == budget
    }
    transfers = [t for t in emulator.chain.transfers() if t.nonce.lower() in key_of]
    per_key = Counter(key_of[t.nonce.lower()] for t in transfers)
    chain_atomic = sum(t.amount_atomic for t in transfers)
    state = lab.budget.state()
    return {
        "rows": len(frame),
        "texts_once": Counter(frame["text"]) == Counter(texts),
        "statuses": frame["status"].value_counts().to_dict(),
        "requests_needed": len(texts),
        "transfers": sum(n for key, n in per_key.items() if key in keys),
        "keys_settled_twice": sum(1 for n in per_key.values() if n > 1),
        "keys_never_settled": len(keys - set(per_key)),
        "chain_usd": chain_atomic / 1e6,
        "ledger_settled_usd": state.settled_atomic / 1e6,
        "cap_usd": cap_atomic / 1e6,
        "within_cap": chain_atomic <= cap_atomic and state.committed_atomic <= cap_atomic,
        "ledger_equals_chain": state.settled_atomic == chain_atomic,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=8, help="per worker")
    parser.add_argument("--dimensions", type=int, default=64)
    parser.add_argument("--kill-at", type=float, default=0.3, help="fraction settled")
    parser.add_argument("--latency", type=float, default=0.0, help="emulator's paid latency")
    parser.add_argument("--ledger", default=None, help="postgresql://... (default: SQLite)")
    args = parser.parse_args()
    if args.ledger is None:
        args.ledger = str(Path(tempfile.mkdtemp(prefix="x402lab-dask-")) / "ledger.sqlite")
    # Workers and the child inherit the key through the environment; it is never printed.
    os.environ[KEY_VARIABLE] = "0x" + secrets.token_hex(32)

    from x402lab.emulator.server import start_emulator
    from x402lab.emulator.settings import EmulatorSettings, Faults

    settings = EmulatorSettings(balance_usd=100_000.0, faults=Faults(paid_latency_s=args.latency))
    with start_emulator(settings) as emulator:
        urls = {
            "gateway": emulator.gateway_url,
            "reports": emulator.reports_url,
            "chain": emulator.chain_url,
        }
        single = single_process(args, urls)
        spread = dask_run(args, urls, emulator)

    ledger = "PostgreSQL" if args.ledger.startswith("postgres") else "SQLite"
    print(
        f"python {platform.python_version()}, {os.cpu_count()} cores; {args.texts:,} texts,"
        f" one per paid request; {ledger} ledger; emulator in this process"
        f" (paid latency {args.latency} s)"
    )
    print(
        f"one process ({args.workers * args.concurrency} in flight):"
        f" {single['seconds']:.1f} s, {args.texts / single['seconds']:.0f} texts/s,"
        f" {single['statuses']}"
    )
    print(
        f"dask, {args.workers} workers x {args.concurrency} in flight, {args.partitions}"
        f" partitions, "
        + (
            f"one worker SIGKILLed after {spread['killed_after']:,} transfers:"
            if spread["killed_after"] >= 0
            else "no worker killed:"
        )
        + f" {spread['seconds']:.1f} s, {args.texts / spread['seconds']:.0f} texts/s"
    )
    print(f"wall time one process / dask: {single['seconds'] / spread['seconds']:.2f}x")
    print(
        f"every text once in the result: {spread['texts_once']} ({spread['rows']:,} rows,"
        f" {spread['statuses']})"
    )
    print(
        f"transfers on the chain: {spread['transfers']:,} for {spread['requests_needed']:,}"
        f" requests needed; keys settled twice: {spread['keys_settled_twice']}; keys never"
        f" settled: {spread['keys_never_settled']}"
    )
    print(
        f"budget: chain {spread['chain_usd']:.2f} USD, ledger settled"
        f" {spread['ledger_settled_usd']:.2f} USD, cap {spread['cap_usd']:.2f} USD;"
        f" within cap: {spread['within_cap']}; ledger equals chain:"
        f" {spread['ledger_equals_chain']}"
    )
    held = (
        spread["texts_once"]
        and spread["transfers"] == spread["requests_needed"]
        and spread["keys_settled_twice"] == 0
        and spread["within_cap"]
        and spread["ledger_equals_chain"]
    )
    print("invariants: " + ("held" if held else "BROKEN"))
    if not held:
        raise SystemExit(1)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "child":
        child(sys.argv[2])
    else:
        main()

"""Batches against a rate-limited service: one process, then several sharing one wallet.

Run with ``python benchmarks/rate_limits.py`` (``--rpm N``, ``--latency S``, ``--rows N``
per run, ``--processes 1,4``, ``--log FILE``, ``--plot PNG``: the figure of
docs/rate-limits.md from that log; ``--processes ""`` only draws it). For each process count
it starts a fresh emulator (``x402lab serve --rpm N --latency S``, a subprocess) and a fresh
SQLite ledger, then that many worker processes, each a ``batch_chat`` of its share of the
rows, all paying from one wallet through that ledger, first with ``concurrency="auto"``, then
(same run, fresh emulator and ledger) with the fixed ``concurrency=8`` of earlier versions as
the baseline. It prints:

- the share of the limit reached: requests the server accepted over what its bucket could
  accept from the first request to the last answer (one second's burst plus rpm/60 a second);
- 429s per 100 paid requests (the bucket's 429s to paid and unpaid requests alike, from the
  emulator's ``/api/x402/stats``);
- transfers against rows (settlements on the emulated chain) and payments settled twice for
  one request key (read from the ledger: must be 0).

Goals (issue 36, ``--rpm 1200``, 50 ms answers, >= 600 rows a run): with auto, >= 0.90 of
the limit and <= 1 429 per 100 paid requests for one and for four processes, one transfer per
row, nothing paid twice. ``--log`` writes each worker's rate and in-flight count over time
(JSON lines), the data of docs/rate-limits.md's figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODEL = "zai-org-glm-4.7-flash"


def start_server(rpm: int, latency_s: float) -> tuple[str, subprocess.Popen[str]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "x402lab", "serve", "--balance-usd", "10000"]
        + (["--rpm", str(rpm)] if rpm else [])
        + ["--latency", str(latency_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    gateway = process.stdout.readline().split()[-1]
    process.stdout.readline()  # the reports URL
    return gateway, process


def stop_server(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(timeout=10)
    if process.stdout is not None:
        process.stdout.close()


# -- one worker process ------------------------------------------------------------------------


async def work(args: argparse.Namespace) -> dict[str, Any]:
    import x402lab as xl

    lab = xl.connect_async(
        args.gateway,
        args.gateway,
        wallet=xl.Wallet.from_env(),
        budget=xl.Budget(usd=10_000),
        ledger=args.ledger,
    )
    log = open(args.log, "a") if args.log else None  # noqa: SIM115 (closed below)

    def progress(p: Any) -> None:
        if log is None or p.pace is None:
            return
        line = {
            "run": args.run,
            "t": time.time(),
            "worker": args.worker,
            "mode": args.concurrency,
            "done": p.done,
            "rate": p.pace.rate,
            "in_flight": p.pace.in_flight,
            "limited": p.pace.limited,
        }
        log.write(json.dumps(line) + "\n")

    concurrency: Any = args.concurrency if args.concurrency == "auto" else int(args.concurrency)
    prompts = [f"worker {args.worker} {args.tag} question {i}" for i in range(args.rows)]
    try:
        started = time.time()
        frame = await lab.batch_chat(
            prompts,
            model=MODEL,
            max_tokens=16,
            concurrency=concurrency,
            progress=progress,
        )
        ended = time.time()
        summary = xl.BatchSummary.of(frame)
    finally:
        await lab.aclose()
        if log is not None:
            log.close()
    return {
        "started": started,
        "ended": ended,
        "rows": len(frame),
        "ok": int((frame["status"] == "ok").sum()),
        "rate_reached": summary.rate_reached,
        "rate_limited": summary.rate_limited,
    }


# -- one run: N workers against a fresh emulator ------------------------------------------------


def run(
    rpm: int, latency_s: float, processes: int, rows: int, concurrency: str, log: str | None
) -> dict[str, Any]:
    from x402lab.wallet import Wallet

    gateway, server = start_server(rpm, latency_s)
    folder = Path(tempfile.mkdtemp(prefix="x402lab-rates-"))
    ledger = folder / "ledger.sqlite"
    env = {**os.environ, "X402LAB_PRIVATE_KEY": "0x" + os.urandom(32).hex()}
    del Wallet
    tag = f"{concurrency}-{processes}-{time.time_ns()}"
    try:
        workers = [
            subprocess.Popen(
                [sys.executable, __file__, "--worker", str(i), "--gateway", gateway]
                + ["--ledger", str(ledger), "--rows", str(rows // processes)]
                + ["--concurrency", concurrency, "--tag", tag]
                + ["--run", f"{processes} process{'es' if processes > 1 else ''}, {rows} rows"]
                + (["--log", log] if log else []),
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            for i in range(processes)
        ]
        results = []
        for worker in workers:
            out, _ = worker.communicate(timeout=900)
            if worker.returncode != 0:
                raise SystemExit(f"a worker failed (exit {worker.returncode})")
            results.append(json.loads(out.strip().splitlines()[-1]))
        import httpx

        stats = httpx.get(f"{gateway}/api/x402/stats").json()
    finally:
        stop_server(server)
    with sqlite3.connect(ledger) as db:
        twice = db.execute(
            "SELECT COUNT(*) FROM (SELECT request_key FROM payments WHERE status = 'settled'"
            " GROUP BY request_key HAVING COUNT(*) > 1)"
        ).fetchone()[0]
    payments = stats["payments"]
    limited = stats["limits"]["rateLimited"]
    accepted = payments["requests"] - limited - payments["faults"]["rateLimited"]
    first = min(r["started"] for r in results)
    last = max(r["ended"] for r in results)
    per_s = rpm / 60 or math.inf
    could = max(1.0, per_s) + per_s * (last - first)
    return {
        "processes": processes,
        "concurrency": concurrency,
        "rows": sum(r["rows"] for r in results),
        "ok": sum(r["ok"] for r in results),
        "seconds": last - first,
        "share_of_limit": accepted / could,
        "limited_per_100_paid": 100 * limited / max(1, payments["settled"]),
        "limited": limited,
        "transfers": payments["settled"],
        "paid_twice": twice,
        "rate_reached": [round(r["rate_reached"], 1) for r in results],
    }


def plot(log: str, out: str, rpm: int) -> None:
    """The figure of docs/rate-limits.md: each auto run's rate over time (every process's
    learned rate, their sum, and the rows answered a second) against the limit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = [json.loads(line) for line in Path(log).read_text().splitlines() if line.strip()]
    runs: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        if line["mode"] == "auto":
            runs.setdefault(line["run"], []).append(line)
    fig, axes = plt.subplots(1, len(runs), figsize=(5.5 * len(runs), 3.6), sharey=True)
    axes = [axes] if len(runs) == 1 else list(axes)
    for ax, (run_name, points) in zip(axes, runs.items(), strict=True):
        t0 = min(p["t"] for p in points)
        workers = sorted({p["worker"] for p in points})
        for worker in workers:
            mine = [p for p in points if p["worker"] == worker and p["rate"] is not None]
            ax.step(
                [p["t"] - t0 for p in mine],
                [p["rate"] for p in mine],
                where="post",
                lw=1,
                label=f"process {worker}: its rate" if len(workers) > 1 else "learned rate",
            )
        if len(workers) > 1:  # the wallet's rate: the processes' rates added up
            latest_rate: dict[int, float] = {}
            ended = {w: max(p["t"] for p in points if p["worker"] == w) for w in workers}
            summed = []
            for p in sorted(points, key=lambda p: p["t"]):
                for gone in [w for w in latest_rate if ended[w] < p["t"]]:
                    del latest_rate[gone]  # a process that finished sends nothing more
                if p["rate"] is not None:
                    latest_rate[p["worker"]] = p["rate"]
                    summed.append((p["t"] - t0, sum(latest_rate.values())))
            ax.step(*zip(*summed, strict=True), where="post", lw=1.5, label="their sum")
        # rows answered a second, all processes together, over a sliding second
        done = sorted((p["t"] - t0, p["worker"], p["done"]) for p in points)
        latest: dict[int, int] = {}
        series = []
        for t, worker, count in done:
            latest[worker] = count
            series.append((t, sum(latest.values())))
        answered = []
        for t, total in series:
            before = [c for s, c in series if s <= t - 1.0]
            answered.append((t, total - (before[-1] if before else 0)))
        ax.plot(*zip(*answered, strict=True), color="black", lw=1.5, label="rows answered / s")
        ax.axhline(rpm / 60, color="red", ls="--", lw=1, label=f"limit ({rpm} rpm)")
        ax.set_title(run_name)
        ax.set_xlabel("seconds")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("requests / s")
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpm", type=int, default=1200)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--rows", type=int, default=600, help="rows a run (split among workers)")
    parser.add_argument("--processes", default="1,4")
    parser.add_argument("--log", help="append each worker's rate over time here (JSON lines)")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument(
        "--unlimited-rows",
        type=int,
        default=400,
        help="rows of the run without a limit, auto against concurrency=8 (0: skip it)",
    )
    # worker mode (started by the benchmark itself)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--gateway", help=argparse.SUPPRESS)
    parser.add_argument("--ledger", help=argparse.SUPPRESS)
    parser.add_argument("--concurrency", default="auto", help=argparse.SUPPRESS)
    parser.add_argument("--tag", default="", help=argparse.SUPPRESS)
    parser.add_argument("--run", default="", help=argparse.SUPPRESS)
    parser.add_argument("--plot", help="draw the rate over time of --log into this PNG")
    args = parser.parse_args()
    if args.plot and args.worker is None and not args.processes:
        plot(args.log, args.plot, args.rpm)
        return
    if args.worker is not None:
        print(json.dumps(asyncio.run(work(args))))
        return
    if args.log:
        Path(args.log).write_text("")
    print(
        f"rate limit {args.rpm} requests/min ({args.rpm / 60:g}/s), answers after"
        f" {args.latency * 1000:g} ms, {args.rows} rows a run; load {os.getloadavg()[0]:.2f}"
    )
    modes = ["auto"] if args.no_baseline else ["auto", "8"]
    rows = []
    for processes in (int(p) for p in args.processes.split(",")):
        for mode in modes:
            result = run(args.rpm, args.latency, processes, args.rows, mode, args.log)
            rows.append(result)
            print(
                f"{processes} process(es), concurrency={mode}: {result['ok']}/{result['rows']}"
                f" rows in {result['seconds']:.1f} s, {result['share_of_limit']:.2f} of the"
                f" limit, {result['limited_per_100_paid']:.1f} 429s per 100 paid requests"
                f" ({result['limited']}), {result['transfers']} transfers for"
                f" {result['rows']} rows, {result['paid_twice']} paid twice;"
                f" rate reached {result['rate_reached']}",
                flush=True,
            )
    for result in rows:
        if result["concurrency"] != "auto":
            continue
        ok = (
            result["share_of_limit"] >= 0.90
            and result["limited_per_100_paid"] <= 1.0
            and result["transfers"] == result["rows"]
            and result["paid_twice"] == 0
        )
        print(
            f"goal, {result['processes']} process(es): >= 0.90 of the limit, <= 1 429 per 100"
            " paid requests, one transfer per row, nothing paid twice:",
            "met" if ok else "NOT met",
        )
    if args.unlimited_rows:
        unlimited(args.unlimited_rows)
    if args.plot and args.log:
        plot(args.log, args.plot, args.rpm)
        print(f"figure: {args.plot}")


def unlimited(rows: int, latency_s: float = 0.25) -> None:
    """Without any limit, at 250 ms answers: auto against the fixed concurrency=8 (the goal)
    and concurrency=32 (what a user who knows there is no limit might choose)."""
    seconds: dict[str, list[float]] = {}
    for mode in ("8", "auto", "32") * 2:  # alternated: a change in load hits all three
        result = run(0, latency_s, 1, rows, mode, None)
        seconds.setdefault(mode, []).append(result["seconds"])
    runs = "; ".join(
        f"{mode}: " + ", ".join(f"{rows / s:.1f}" for s in spent) for mode, spent in seconds.items()
    )
    fixed, auto = min(seconds["8"]), min(seconds["auto"])
    print(
        f"no limit, answers after {latency_s * 1000:g} ms, {rows} rows, rows/s of each run"
        f" ({runs}); best of two: auto {rows / auto:.1f} against concurrency=8"
        f" {rows / fixed:.1f} ({fixed / auto:.2f}x) and concurrency=32"
        f" {rows / min(seconds['32']):.1f}; goal auto no slower than 8:"
        f" {'met' if auto <= fixed else 'NOT met'}"
    )


if __name__ == "__main__":
    main()

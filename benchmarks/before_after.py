"""x402lab's paid calls/s and CPU per call at two commits, in one run, rounds alternating.

Run with ``python benchmarks/before_after.py --before REV`` (``--after REV``, default the
working tree; ``--rounds R``, default 3; ``--calls N``, default 400; ``--concurrency C``,
default 32; ``--latency S``, default 0). One emulator runs as a subprocess for the whole run;
each round runs ``benchmarks/batch_throughput.py --rounds 1 --clients x402lab,bare`` twice
against it, in child processes: once importing x402lab from ``REV`` (``git archive`` into a
temporary folder), once from the other side, the order swapped every round so neither side
always goes first. Each child's bare client runs right after its x402lab batch, so its
x402lab / bare ratios are of one moment's machine load; the load moves between children,
which is why only those ratios are compared. With ``--latency`` x402lab's timed batch is a
fresh lab's first, as in ``batch_throughput.py``, and the ratio to the one-trip floor
(``concurrency / latency``) is printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from batch_throughput import start_server

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def source_tree(rev: str | None, into: Path) -> Path:
    """The folder x402lab is imported from: this working tree, or ``rev`` unpacked."""
    if rev is None:
        return REPO
    folder = into / rev.replace("/", "_")
    folder.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, "x402lab"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def one_round(tree: Path, gateway: str, args: argparse.Namespace) -> dict[str, list[float]]:
    """One child's wall and CPU seconds per client (``batch_throughput.py --json``)."""
    command = [sys.executable, str(HERE / "batch_throughput.py"), "--rounds", "1", "--json"]
    command += ["--clients", "x402lab,bare", "--gateway", gateway, "--calls", str(args.calls)]
    command += ["--concurrency", str(args.concurrency), "--latency", str(args.latency)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    figures: dict[str, list[float]] = json.loads(out.splitlines()[-1])["rounds"][0]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="a git revision (main, a commit)")
    parser.add_argument("--after", help="a git revision (default: this working tree)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args()
    floor = args.concurrency / args.latency if args.latency > 0 else None
    ratios: dict[str, list[tuple[float, float, float]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="x402lab-before-after-") as scratch:
        trees = {
            "before": source_tree(args.before, Path(scratch)),
            "after": source_tree(args.after, Path(scratch)),
        }
        gateway, stop = start_server(in_process=False, latency_s=args.latency)
        print(f"load average at the start: {os.getloadavg()[0]:.1f}")
        try:
            for round_ in range(args.rounds):
                order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
                for side in order:
                    got = one_round(trees[side], gateway, args)
                    (lab_wall, lab_cpu), (bare_wall, bare_cpu) = got["x402lab"], got["bare"]
                    rate = args.calls / lab_wall
                    ratios[side].append((bare_wall / lab_wall, lab_cpu / bare_cpu, rate))
                    to_floor = f", {rate / floor:.2f} of the floor" if floor else ""
                    print(
                        f"round {round_ + 1} {side:>6}: x402lab {rate:7.1f} calls/s,"
                        f" {1e6 * lab_cpu / args.calls:5.0f} us CPU per call; / bare"
                        f" {bare_wall / lab_wall:.2f}x calls/s, {lab_cpu / bare_cpu:.2f}x CPU"
                        f"{to_floor}; load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
        finally:
            stop()
    for side in ("before", "after"):
        speed, cpu, rate = (statistics.median(r[i] for r in ratios[side]) for i in range(3))
        to_floor = f", {rate / floor:.2f} of the one-trip floor" if floor else ""
        print(
            f"median {side:>6} ({args.before if side == 'before' else args.after or 'tree'}):"
            f" x402lab / bare {speed:.2f}x calls/s, {cpu:.2f}x CPU per call{to_floor}"
        )
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

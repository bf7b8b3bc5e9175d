"""Peak memory of batch_embed streaming a generator of texts to Parquet: flat in the corpus's
size (issue 47: at most +50 MB more for 5x the texts, at most +300 MB in all for 100,000
texts of dimension 1024, the memory handed back when the batch ends).

Run with ``python benchmarks/embed_memory.py`` (``--sizes 4000,20000,100000``,
``--per-request K``, default 256, the automatic pack; ``--model``, default a 1024-dimension
one; ``--concurrency C``). Each size runs in a fresh process of its own (``--one N``), so no
size inherits another's heap; the emulator runs as a subprocess, so only the client's
memory is measured. RSS is sampled every 20 ms by a thread from just before
``batch_embed`` until it returns; the growth is the peak minus the RSS before the call, and
"after" is the RSS once the call returned (what the batch did not hand back). Arrow's pool
(its allocator, bytes at most allocated during the call) is printed beside it: where the
native memory goes (docs/embeddings.md, "Memory: where it goes, and flat"). Every row is
claimed in the ledger and its vector stored there, as in every batch. Spends emulated money
only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

MODEL = "text-embedding-qwen3-0-6b"  # 1024 dimensions
WORDS = "river stone market garden signal winter copper lantern harbor meadow".split()
MB = 1024 * 1024


def texts(n: int) -> Iterator[str]:
    """n short distinct texts (a dozen words each), made one at a time."""
    for i in range(n):
        yield f"note {i}: " + " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(10))


class PeakRss:
    """Samples this process's RSS in a thread; ``peak`` is the highest seen."""

    def __init__(self, every_s: float = 0.02) -> None:
        self.process = psutil.Process()
        self.every_s = every_s
        self.peak = self.process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)


def one(n: int, gateway: str, per_request: int, concurrency: int) -> dict:
    """One batch of ``n`` texts in this process; its figures as a dict."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import x402lab as xl

    folder = Path(tempfile.mkdtemp(prefix="x402lab-embed-memory-"))
    lab = xl.connect(
        gateway,
        gateway,
        wallet=xl.Wallet.create(),
        budget=xl.Budget(usd=100_000),
        ledger=folder / "ledger.sqlite",
    )
    lab.batch_embed(["warm up"], model=MODEL, out=folder / "warm.parquet", progress=None)
    out = folder / "vectors.parquet"
    pool = pa.default_memory_pool()
    rss_before = psutil.Process().memory_info().rss
    pool_before = pool.max_memory()
    started, cpu_started = time.perf_counter(), time.process_time()
    with PeakRss() as peak:
        summary = lab.batch_embed(
            texts(n),
            model=MODEL,
            out=out,
            rows_per_request=per_request,
            concurrency=concurrency,
            progress=None,
        )
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    rss_after = psutil.Process().memory_info().rss
    lab.close()
    meta = pq.ParquetFile(out).metadata
    return {
        "texts": n,
        "rows": meta.num_rows,
        "row_groups": meta.num_row_groups,
        "requests": summary.requests,
        "seconds": elapsed,
        "cpu": cpu,
        "growth_mb": (peak.peak - rss_before) / MB,
        "after_mb": (rss_after - rss_before) / MB,
        "arrow_peak_mb": (pool.max_memory() - pool_before) / MB,
        "arrow_now_mb": pool.bytes_allocated() / MB,
        "arrow_backend": pool.backend_name,
    }


def main() -> None:
    global MODEL
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4000,20000,100000")
    parser.add_argument("--per-request", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--gateway", help=argparse.SUPPRESS)
    args = parser.parse_args()
    MODEL = args.model
    if args.one:
        print(json.dumps(one(args.one, args.gateway, args.per_request, args.concurrency)))
        return

    server = subprocess.Popen(
        [sys.executable, "-m", "x402lab", "serve", "--balance-usd", "100000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdout is not None
    gateway = server.stdout.readline().split()[-1]
    server.stdout.readline()
    results = []
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            child = [sys.executable, __file__, "--one", str(size), "--gateway", gateway]
            child += ["--per-request", str(args.per_request), "--model", MODEL]
            child += ["--concurrency", str(args.concurrency)]
            done = subprocess.run(child, capture_output=True, text=True, check=True)
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    finally:
        server.terminate()
        server.wait(timeout=10)
        server.stdout.close()

    load = os.getloadavg()
    print(
        f"python {platform.python_version()}, {os.cpu_count()} cores, load average"
        f" {load[0]:.2f}; {MODEL}, {args.per_request} texts per paid request, a generator"
        f" streamed to Parquet, each size in a fresh process"
    )
    for r in results:
        print(
            f"{r['texts']:>8,} texts: peak RSS +{r['growth_mb']:6.1f} MB,"
            f" after +{r['after_mb']:6.1f}"
            f" MB; Arrow pool peak {r['arrow_peak_mb']:5.1f} MB ({r['arrow_backend']}),"
            f" {r['arrow_now_mb']:.1f} MB held after; {r['rows']:,} rows in {r['row_groups']}"
            f" row groups, {r['requests']} paid requests, {r['seconds']:.1f} s,"
            f" client CPU {1e6 * r['cpu'] / r['texts']:.0f} us per text"
        )
    for small, big in zip(results, results[1:], strict=False):
        more = big["growth_mb"] - small["growth_mb"]
        ratio = big["texts"] / small["texts"]
        goal = "met" if more <= 50 else "NOT met"
        print(f"{ratio:.0f}x the texts ({big['texts']:,}): {more:+.1f} MB (goal <= +50: {goal})")
    largest = results[-1]
    if largest["texts"] >= 100_000:
        goal = "met" if largest["growth_mb"] <= 300 else "NOT met"
        print(f"{largest['texts']:,} texts: +{largest['growth_mb']:.1f} MB (goal <= 300: {goal})")


if __name__ == "__main__":
    main()

"""Peak memory of batch_embed streaming a generator of short texts to Parquet: 5x the 200k
corpus (1M texts) with RSS growth under 100 MB.

Run with ``python benchmarks/embed_memory.py`` (``--texts N`` per corpus, ``--scale S``
corpora, ``--per-request K``, ``--dimensions D``). The texts come from a generator, read
lazily a chunk at a time, so nothing the size of the corpus is ever held: the growth is the
same for 1x and 5x. The emulator runs as a subprocess, so only the client's memory is
measured, and the process CPU time during the call is the client's alone (wall time moves
with the machine's load; compare CPU between versions). RSS is sampled every 20 ms by a
thread from just before ``batch_embed`` until it returns; the growth is the peak minus the
RSS before the call. Every row is claimed in the
ledger and its vector stored there, as in every batch. Spends emulated money only.
"""

from __future__ import annotations

import argparse
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

MODEL = "text-embedding-3-small"
WORDS = "river stone market garden signal winter copper lantern harbor meadow".split()


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=200_000)
    parser.add_argument("--scale", type=int, default=5, help="corpora streamed (default 5)")
    parser.add_argument("--per-request", type=int, default=100)
    parser.add_argument("--dimensions", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()

    import pyarrow.parquet as pq

    import x402lab as xl

    server = subprocess.Popen(
        [sys.executable, "-m", "x402lab", "serve", "--balance-usd", "100000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdout is not None
    gateway = server.stdout.readline().split()[-1]
    reports = server.stdout.readline().split()[-1]
    folder = Path(tempfile.mkdtemp(prefix="x402lab-embed-"))
    try:
        lab = xl.connect(
            gateway,
            reports,
            wallet=xl.Wallet.create(),
            budget=xl.Budget(usd=100_000),
            ledger=folder / "ledger.sqlite",
        )
        lab.batch_embed(["warm up"], model=MODEL, dimensions=args.dimensions, progress=None)
        rss_start = psutil.Process().memory_info().rss
        total = args.texts * args.scale
        corpus = texts(total)
        rss_before = psutil.Process().memory_info().rss
        out = folder / "vectors.parquet"
        started, cpu_started = time.perf_counter(), time.process_time()
        with PeakRss() as peak:
            summary = lab.batch_embed(
                corpus,
                model=MODEL,
                out=out,
                per_request=args.per_request,
                dimensions=args.dimensions,
                encoding_format="base64",
                concurrency=args.concurrency,
                progress=None,
            )
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        lab.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
        server.stdout.close()

    meta = pq.ParquetFile(out).metadata
    mb = 1024 * 1024
    growth = (peak.peak - rss_before) / mb
    print(
        f"python {platform.python_version()}, {os.cpu_count()} cores; {total:,} texts"
        f" ({args.scale}x {args.texts:,}) from a generator,"
        f" {args.per_request} per paid request, {args.dimensions} dimensions"
    )
    print(
        f"rows written: {meta.num_rows:,} in {meta.num_row_groups} row groups,"
        f" {out.stat().st_size / mb:.1f} MB; {summary.requests} paid requests,"
        f" paid {summary.paid_usd:.2f} USD (emulated); {elapsed:.1f} s,"
        f" client CPU {cpu:.1f} s ({1e6 * cpu / total:.0f} us per text)"
    )
    del rss_start
    print(
        f"peak RSS growth during batch_embed: {growth:.1f} MB"
        f" (goal < 100 MB: {'met' if growth < 100 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()

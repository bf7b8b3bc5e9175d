"""Embedding vectors per second on the loopback emulator: x402lab's batch_embed against bare
two-trip clients asking for the same packs, as base64 and as JSON floats.

Run with ``python benchmarks/embed_speed.py`` (``--texts N``, default 20,000; ``--per-request
K``, default 256, the batch's automatic pack; ``--concurrency C``, default 8, for every
client; ``--model``, default a 1024-dimension one). The emulator runs as a subprocess, so the
process CPU time during a client's run (``time.process_time``) is that client's alone. Each
client pays for the same packs of distinct texts with its own fresh wallet, one after the
other in one run (the load average is printed: other work on the machine moves every figure):

- x402lab: ``AsyncLab.batch_embed`` into a frame, with its defaults (base64 asked where the
  route takes it), the SQLite ledger (write-ahead, fsync), each text claimed and its float32
  vector stored before the frame is built (the full paid path);
- bare base64 / bare floats: an aiohttp session that posts each pack, reads the 402, signs
  with eth-account (``batch_throughput.bare_payer``), posts again and decodes the vectors
  with numpy (``frombuffer`` of the base64, or ``asarray`` of the parsed JSON floats); no
  budget, no ledger, no checks.

Prints vectors/s and client CPU per vector for each, the ratios (goals, issue 47: x402lab
>= 0.8x bare base64 and >= 3x bare floats in vectors/s) and the ledger's bytes per vector
(goal <= 1.1 x 4 x dimension: the vector's float32 bytes plus its claim). ``--postgres URL``
(an empty database) runs x402lab once more with its ledger there and prints that ledger's
bytes per vector too: every table with its indexes and TOAST, after ``VACUUM``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import platform
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from batch_throughput import Clock, _key, bare_payer, start_server

from x402lab.routes import EMBEDDINGS

MODEL = "text-embedding-qwen3-0-6b"  # 1024 dimensions


def corpus(client: str, n: int) -> list[str]:
    """n distinct short texts (a client's own, so no client reuses another's answers)."""
    words = "river stone market garden signal winter copper lantern harbor meadow".split()
    return [
        f"{client} note {i}: " + " ".join(words[(i * 7 + k) % len(words)] for k in range(10))
        for i in range(n)
    ]


async def run_x402lab(
    gateway: str, texts: list[str], concurrency: int, postgres: str | None = None
) -> tuple[float, float, int]:
    import x402lab as xl

    folder = Path(tempfile.mkdtemp(prefix="x402lab-embed-speed-"))
    ledger: Path | str = postgres or folder / "ledger.sqlite"
    lab = xl.connect_async(
        gateway, gateway, wallet=xl.Wallet.create(), budget=xl.Budget(usd=10_000), ledger=ledger
    )
    try:
        await lab.batch_embed(["warm up"], model=MODEL, progress=None)  # connections, catalog
        clock = Clock()
        frame = await lab.batch_embed(texts, model=MODEL, concurrency=concurrency, progress=None)
        wall, cpu = clock.stop()
        assert (frame["status"] == "ok").all(), frame["status"].value_counts()
        assert frame["vector"].iloc[0].dtype == np.float32
    finally:
        await lab.aclose()
    if isinstance(ledger, str):
        return wall, cpu, postgres_bytes(ledger)
    # What the ledger keeps: its file once the write-ahead log is folded into it.
    with sqlite3.connect(ledger) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return wall, cpu, ledger.stat().st_size


def postgres_bytes(url: str) -> int:
    """What a PostgreSQL ledger keeps: its tables with their indexes and TOAST, once
    ``VACUUM`` has dropped the dead rows (a claim's update leaves one)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute("VACUUM")
        (size,) = db.execute(
            "SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'"
        ).fetchone()
    return int(size)


async def run_bare(
    gateway: str, texts: list[str], per_request: int, concurrency: int, encoding: str
) -> tuple[float, float]:
    import aiohttp

    pay: Callable[[str], str] = bare_payer(_key())
    packs = [texts[i : i + per_request] for i in range(0, len(texts), per_request)]
    semaphore = asyncio.Semaphore(concurrency)
    vectors = 0

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=2 * concurrency)) as s:

        async def post(body: dict, headers: dict[str, str] | None = None) -> tuple[int, bytes, str]:
            # A pooled connection the server closed while it idled (its keep-alive ran out
            # while the answers of other packs were computed) is sent again on a new one.
            for attempt in range(3):
                try:
                    async with s.post(f"{gateway}{EMBEDDINGS}", json=body, headers=headers) as r:
                        return r.status, await r.read(), r.headers.get("PAYMENT-REQUIRED", "")
                except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
                    if attempt == 2:
                        raise
            raise AssertionError("unreachable")

        async def one(pack: list[str]) -> None:
            nonlocal vectors
            body = {"model": MODEL, "input": pack, "encoding_format": encoding}
            async with semaphore:
                status, _, header = await post(body)
                assert status == 402
                status, raw, _ = await post(body, {"PAYMENT-SIGNATURE": pay(header)})
                assert status == 200, raw[:200]
                answer = json.loads(raw)
            data = sorted(answer["data"], key=lambda d: d["index"])
            if encoding == "base64":
                raw = b"".join(base64.b64decode(d["embedding"]) for d in data)
                matrix = np.frombuffer(raw, dtype="<f4").reshape(len(data), -1)
            else:
                matrix = np.asarray([d["embedding"] for d in data], dtype=np.float32)
            vectors += len(matrix)

        await one(["warm up"])
        vectors = 0
        clock = Clock()
        await asyncio.gather(*(one(pack) for pack in packs))
        spent = clock.stop()
    assert vectors == len(texts)
    return spent


def main() -> None:
    global MODEL
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=20_000)
    parser.add_argument("--per-request", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--postgres", help="an empty PostgreSQL database for a second ledger")
    args = parser.parse_args()
    MODEL = args.model
    import x402lab.connection  # noqa: F401  (one-time imports, not timed)

    gateway, stop = start_server(in_process=False, latency_s=0.0)
    try:
        n, k, c = args.texts, args.per_request, args.concurrency
        lab_wall, lab_cpu, stored = asyncio.run(run_x402lab(gateway, corpus("lab", n), c))
        b64_wall, b64_cpu = asyncio.run(run_bare(gateway, corpus("b64", n), k, c, "base64"))
        flt_wall, flt_cpu = asyncio.run(run_bare(gateway, corpus("flt", n), k, c, "float"))
        if args.postgres:
            pg_run = asyncio.run(run_x402lab(gateway, corpus("pg", n), c, args.postgres))
    finally:
        stop()
    dim = 1024 if MODEL == "text-embedding-qwen3-0-6b" else None
    load = os.getloadavg()
    print(
        f"python {platform.python_version()}, {os.cpu_count()} cores, load average"
        f" {load[0]:.2f} {load[1]:.2f}; {n:,} texts of {MODEL}, {k} per paid request,"
        f" concurrency {c}, loopback emulator (a subprocess)"
    )
    rows = (("x402lab", lab_wall, lab_cpu), ("bare base64", b64_wall, b64_cpu))
    for name, wall, cpu in (*rows, ("bare floats", flt_wall, flt_cpu)):
        print(
            f"{name:12s} {n / wall:9,.0f} vectors/s  {wall:6.2f} s"
            f"  client CPU {1e6 * cpu / n:6.0f} us per vector"
        )
    vs_b64, vs_flt = b64_wall / lab_wall, flt_wall / lab_wall
    print(f"x402lab / bare base64: {vs_b64:.2f}x (goal >= 0.8x: {_met(vs_b64 >= 0.8)})")
    print(f"x402lab / bare floats: {vs_flt:.2f}x (goal >= 3x: {_met(vs_flt >= 3)})")
    ledgers = [("ledger", stored)]
    if args.postgres:
        ledgers.append(("PostgreSQL ledger", pg_run[2]))
        print(f"x402lab on PostgreSQL {n / pg_run[0]:9,.0f} vectors/s  {pg_run[0]:6.2f} s")
    for name, size in ledgers if dim else ():
        per_vector = size / (n + 1)  # the warm-up's text too
        ratio = per_vector / (4 * dim)
        print(
            f"{name}: {per_vector:,.0f} bytes per vector = {ratio:.3f} x 4 x {dim}"
            f" (goal <= 1.1: {_met(ratio <= 1.1)})"
        )


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


if __name__ == "__main__":
    main()

"""``x402lab serve``: run both emulated services and the emulated chain's JSON-RPC endpoint
on 127.0.0.1 until interrupted; prints ``gateway: URL``, ``reports: URL`` and ``chain: URL``."""

from __future__ import annotations

import argparse
import gc
import signal
import sys
import time
from types import FrameType

HELP = "run the local emulator (gateway, report service, chain RPC) until interrupted"


#: The fault flags: (flag, the ``Faults`` field it sets, its default, its help).
FAULT_FLAGS = (
    ("--rate-429", "rate_429", 0.0, "answer 429 this often"),
    ("--retry-after", "retry_after_s", 1.0, "Retry-After of a 429"),
    ("--rate-5xx", "rate_5xx", 0.0, "answer 503 this often"),
    ("--settle-fail-rate", "settle_fail_rate", 0.0, "fail settlement this often"),
    ("--paid-then-500-rate", "paid_then_500_rate", 0.0, "settle, then answer 500"),
    (
        "--schema-violation-rate",
        "schema_violation_rate",
        0.0,
        "break structured (response_format) answers this often",
    ),
    (
        "--constraint-violation-rate",
        "constraint_violation_rate",
        0.0,
        "put structured answers' values outside the schema's constraints this often",
    ),
    ("--latency", "latency_s", 0.0, "delay before every answer"),
    ("--paid-latency", "paid_latency_s", 0.0, "extra delay after settling"),
    (
        "--answer-delay",
        "answer_delay_s",
        0.0,
        "delay between a settled answer's receipt (headers) and its body",
    ),
)


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0..65535, got {value}")
    return value


def _per_minute(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"a rate limit must be >= 1 a minute, got {value}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the serve flags (operator settings come from the environment: docs/services.md)."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--gateway-port", type=_port, default=0, help="0 picks a free port")
    parser.add_argument("--reports-port", type=_port, default=0, help="0 picks a free port")
    parser.add_argument(
        "--chain-port", type=_port, default=0, help="port of the chain's JSON-RPC endpoint"
    )
    parser.add_argument(
        "--job-seconds", type=float, default=3.0, help="duration of music/video jobs"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulated upstream")
    parser.add_argument(
        "--balance-usd", type=float, default=100.0, help="starting balance of every test payer"
    )
    limits = parser.add_argument_group("rate limits (token buckets per payer, as a real service)")
    limits.add_argument("--rpm", type=_per_minute, default=None, help="requests a minute")
    limits.add_argument(
        "--tpm", type=_per_minute, default=None, help="tokens a minute (prompt + max_tokens)"
    )
    faults = parser.add_argument_group("faults (probabilities in 0..1, delays in seconds)")
    for flag, _, default, text in FAULT_FLAGS:
        faults.add_argument(flag, type=float, default=default, help=text)


def connect_snippet(gateway_url: str, reports_url: str) -> str:
    """Python that connects to this emulator: a fresh wallet it funds, a ledger of its own
    (so emulated payments stay out of the real ledger)."""
    return (
        "connect from Python:\n"
        "    import x402lab as xl\n"
        f"    lab = xl.connect({gateway_url!r}, {reports_url!r},\n"
        '                     wallet=xl.Wallet.create(), ledger="emulated-ledger.sqlite")'
    )


def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT or SIGTERM; returns 0 on a clean stop, 1 if a server died, 2 if a
    port cannot be bound.

    Raises ConfigError for a bad flag or environment value (before anything listens).
    """
    from x402lab.emulator.settings import EmulatorSettings, Faults

    # argparse names each value after its flag (``--retry-after``: ``args.retry_after``).
    given = {field: getattr(args, flag[2:].replace("-", "_")) for flag, field, _, _ in FAULT_FLAGS}
    faults = Faults(**given)
    settings = EmulatorSettings.from_env(
        job_seconds=args.job_seconds,
        seed=args.seed,
        balance_usd=args.balance_usd,
        rate_limit_rpm=args.rpm,
        rate_limit_tpm=args.tpm,
        faults=faults,
    )
    # Imported once the settings are known good: the services take a second or two to
    # import, and a bad flag should be refused at once.
    from x402lab.emulator.server import start_emulator

    # The handler only records the signal: one that took a lock (``threading.Event.set``)
    # could deadlock when the signal lands while the main thread holds that same lock.
    stopping: list[int] = []

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            emulator = start_emulator(
                settings,
                host=args.host,
                gateway_port=args.gateway_port,
                reports_port=args.reports_port,
                chain_port=args.chain_port,
            )
        except OSError as exc:
            print(f"x402lab serve: {exc.strerror or exc}", file=sys.stderr)
            return 2
        # A server process keeps what it imported for its whole life: out of the collector's
        # walks (``gc.freeze``), a full collection walks the requests' objects only, not the
        # ~190,000 of its imports (a walk of ~110 ms on this machine, every answer held).
        gc.collect()
        gc.freeze()
        try:
            print(f"gateway: {emulator.gateway_url}", flush=True)
            print(f"reports: {emulator.reports_url}", flush=True)
            print(f"chain: {emulator.chain_url}", flush=True)
            print(connect_snippet(emulator.gateway_url, emulator.reports_url), file=sys.stderr)
            print("x402lab serve: running; press Ctrl+C to stop", file=sys.stderr, flush=True)
            while not stopping:
                if not emulator.running:
                    print("x402lab serve: a server stopped unexpectedly", file=sys.stderr)
                    return 1
                time.sleep(0.25)
        finally:
            emulator.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0

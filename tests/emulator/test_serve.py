"""``x402lab serve`` as a real subprocess, and start_emulator's lifecycle in process."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import httpx
import pytest

from x402lab.emulator.server import start_emulator
from x402lab.emulator.settings import EmulatorSettings

URL_LINE = re.compile(r"(gateway|reports|chain): (http://127\.0\.0\.1:\d+)$")
NAMES = ("gateway", "reports", "chain")
# The emulator must not pick up operator settings from the developer's shell.
_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("X402_", "INTEL_LIBRARY_SECRET"))}


def _read_urls(process: subprocess.Popen[str], timeout: float = 30.0) -> dict[str, str]:
    """The three URL lines serve prints first, in their order: gateway, reports, chain."""
    lines: list[str] = []
    done = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.strip())
            if len(lines) == len(NAMES):
                break
        done.set()

    threading.Thread(target=read, daemon=True).start()
    if not done.wait(timeout) or len(lines) < len(NAMES):
        if process.poll() is not None and process.stderr is not None:
            raise AssertionError(f"serve exited {process.returncode}: {process.stderr.read()}")
        raise AssertionError("serve did not print its URLs in time")
    matches = [URL_LINE.match(line) for line in lines]
    assert all(matches), lines
    urls = {m.group(1): m.group(2) for m in matches if m}
    assert tuple(urls) == NAMES, lines
    return urls


def _serve(*args: str, command: tuple[str, ...] | None = None) -> subprocess.Popen[str]:
    command = command or (sys.executable, "-m", "x402lab")
    return subprocess.Popen(
        [*command, "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_ENV,
    )


@pytest.fixture
def serve() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()  # our own child, by its handle
        process.wait(10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_three_urls_serves_and_exits_cleanly(serve, stop_signal):
    process = _serve("--seed", "3", "--job-seconds", "0.5")
    serve.append(process)
    urls = _read_urls(process)
    assert len(set(urls.values())) == 3
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"}
    assert httpx.post(urls["chain"], json=rpc, timeout=10).json()["result"] == "0x2105"
    shelf = httpx.get(f"{urls['reports']}/api/intel/list", timeout=10)
    assert shelf.status_code == 200
    assert shelf.json()["configured"] is True
    assert httpx.get(f"{urls['gateway']}/openapi.json", timeout=10).status_code == 200
    os.kill(process.pid, stop_signal)
    assert process.wait(15) == 0


def test_serve_listens_on_the_ports_asked_for(serve):
    ports = []
    for _ in range(3):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    flags = [f"--{name}-port" for name in NAMES]
    process = _serve(*(arg for pair in zip(flags, map(str, ports), strict=True) for arg in pair))
    serve.append(process)
    urls = _read_urls(process)
    assert urls == {
        name: f"http://127.0.0.1:{port}" for name, port in zip(NAMES, ports, strict=True)
    }
    os.kill(process.pid, signal.SIGTERM)
    assert process.wait(15) == 0


def test_serve_fault_flags_reach_the_services(serve):
    process = _serve("--rate-429", "1", "--retry-after", "3")
    serve.append(process)
    urls = _read_urls(process)
    params = {"username": "quantquill", "select": "all"}
    response = httpx.get(f"{urls['reports']}/api/intel/reports", params=params, timeout=10)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    # Free routes are not rate limited.
    assert httpx.get(f"{urls['reports']}/api/intel/list", timeout=10).status_code == 200
    os.kill(process.pid, signal.SIGTERM)
    assert process.wait(15) == 0


def test_serve_reads_operator_settings_from_the_environment(serve):
    process = subprocess.Popen(
        [sys.executable, "-m", "x402lab", "serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**_ENV, "X402_INTEL_REPORT_USD": "0.05"},
    )
    serve.append(process)
    urls = _read_urls(process)
    params = {"username": "quantquill", "select": "all"}
    body = httpx.get(f"{urls['reports']}/api/intel/reports", params=params, timeout=10).json()
    assert body["extensions"]["unitPriceUsd"] == 0.05
    os.kill(process.pid, signal.SIGTERM)
    assert process.wait(15) == 0


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("--rate-429", "2"), {}, "rate_429"),
        (("--latency", "-1"), {}, "latency_s"),
        ((), {"X402_PROVIDER_PRICE_MULT": "lots"}, "X402_PROVIDER_PRICE_MULT"),
    ],
)
def test_serve_refuses_bad_settings_with_exit_2(args, env, message):
    result = subprocess.run(
        [sys.executable, "-m", "x402lab", "serve", *args],
        capture_output=True,
        text=True,
        env={**_ENV, **env},
        timeout=60,
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_serve_port_in_use_fails_without_a_traceback():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "x402lab", "serve", "--reports-port", str(port)],
            capture_output=True,
            text=True,
            env=_ENV,
            timeout=60,
        )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert str(port) in result.stderr


@pytest.mark.skipif(shutil.which("x402lab") is None, reason="console script not installed")
def test_console_script_runs_serve(serve):
    process = _serve(command=(str(shutil.which("x402lab")),))
    serve.append(process)
    urls = _read_urls(process)
    assert httpx.get(f"{urls['reports']}/api/intel/list", timeout=10).status_code == 200
    os.kill(process.pid, signal.SIGINT)
    assert process.wait(15) == 0


def test_help_lists_serve():
    result = subprocess.run(
        [sys.executable, "-m", "x402lab", "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    assert "serve" in result.stdout


def test_start_emulator_context_manager_stops_every_server():
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber"}
    with start_emulator(EmulatorSettings(job_seconds=0.2)) as emulator:
        assert emulator.running
        assert httpx.get(f"{emulator.reports_url}/api/intel/list").status_code == 200
        assert httpx.get(f"{emulator.gateway_url}/llms.txt").status_code == 200
        assert httpx.post(emulator.chain_url, json=rpc).json()["result"] == "0x0"
    assert not emulator.running
    for url in (f"{emulator.reports_url}/api/intel/list", emulator.chain_url):
        with pytest.raises(httpx.ConnectError):
            httpx.get(url)
    emulator.stop()  # idempotent


def test_both_services_and_the_endpoint_share_one_chain(emulator):
    assert emulator.gateway_app is not None
    assert emulator.reports_app.state.gate.chain is emulator.chain
    assert emulator.chain_app.state.rpc.chain is emulator.chain

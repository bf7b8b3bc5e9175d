"""``x402lab serve`` as a real subprocess (each test that starts one tests the process: its
signals, flags, environment or exit status), and start_emulator's lifecycle in process."""

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
from pathlib import Path

import httpx
import pytest

from x402lab.cli import main
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


def _serve(
    *args: str, command: tuple[str, ...] | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    command = command or (sys.executable, "-m", "x402lab")
    return subprocess.Popen(
        [*command, "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or _ENV,
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


def _console_script() -> str:
    """The installed ``x402lab`` command, next to this Python first (a venv not on PATH)."""
    here = Path(sys.executable).parent
    found = shutil.which("x402lab", path=os.pathsep.join([str(here), os.environ.get("PATH", "")]))
    if found is None:
        pytest.fail("the x402lab console script is not installed: pip install -e .")
    return found


# Each way in stops on its own signal: ``python -m`` on SIGTERM (a service manager), the
# console script on SIGINT (Ctrl+C), so both signals and both entry points run once each.
# Both runs carry an operator setting in the environment, which the paid route must show.
@pytest.mark.parametrize(
    ("entry", "stop_signal"),
    [("module", signal.SIGTERM), ("script", signal.SIGINT)],
    ids=["python-m-sigterm", "console-script-sigint"],
)
def test_serve_prints_three_urls_serves_and_exits_cleanly(serve, entry, stop_signal):
    command = (_console_script(),) if entry == "script" else None
    env = {**_ENV, "X402_INTEL_REPORT_USD": "0.05"}
    process = _serve("--seed", "3", "--job-seconds", "0.5", command=command, env=env)
    serve.append(process)
    urls = _read_urls(process)
    assert len(set(urls.values())) == 3
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"}
    assert httpx.post(urls["chain"], json=rpc, timeout=10).json()["result"] == "0x2105"
    shelf = httpx.get(f"{urls['reports']}/api/intel/list", timeout=10)
    assert shelf.status_code == 200
    assert shelf.json()["configured"] is True
    params = {"username": "quantquill", "select": "all"}
    body = httpx.get(f"{urls['reports']}/api/intel/reports", params=params, timeout=10).json()
    assert body["extensions"]["unitPriceUsd"] == 0.05  # read from the environment
    assert httpx.get(f"{urls['gateway']}/openapi.json", timeout=10).status_code == 200
    os.kill(process.pid, stop_signal)
    assert process.wait(15) == 0


def test_serve_flags_set_the_ports_and_the_faults(serve):
    ports = []
    for _ in range(3):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    flags = [f"--{name}-port" for name in NAMES]
    port_args = (arg for pair in zip(flags, map(str, ports), strict=True) for arg in pair)
    process = _serve(*port_args, "--rate-429", "1", "--retry-after", "3")
    serve.append(process)
    urls = _read_urls(process)
    assert urls == {
        name: f"http://127.0.0.1:{port}" for name, port in zip(NAMES, ports, strict=True)
    }
    params = {"username": "quantquill", "select": "all"}
    response = httpx.get(f"{urls['reports']}/api/intel/reports", params=params, timeout=10)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    # Free routes are not rate limited.
    assert httpx.get(f"{urls['reports']}/api/intel/list", timeout=10).status_code == 200
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


def test_serve_port_in_use_fails_with_exit_2_and_a_message(capsys, monkeypatch):
    # In this process: what is tested is main()'s answer (exit 2 and the port named, no
    # exception escaping); how a status of 2 leaves the process is tested above.
    for name in os.environ:
        if name not in _ENV:
            monkeypatch.delenv(name)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        status = main(["serve", "--reports-port", str(port)])
    out, err = capsys.readouterr()
    assert status == 2
    assert str(port) in err
    assert out == ""


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

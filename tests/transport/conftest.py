"""A real forwarding proxy for the transport tests: Debian's tinyproxy on 127.0.0.1, with
its own configuration and log in ``tmp_path``, stopped by its PID.

Without the ``tinyproxy`` binary the tests that need it skip saying why; under ``CI=true``
they fail (``.ci/proxy-setup.sh`` installs it)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


class Proxy:
    """A running tinyproxy: its address and the requests it forwarded (read from its log)."""

    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.log = log

    def requests(self) -> list[str]:
        """The request lines it forwarded so far (``GET http://127.0.0.1:1234/path``)."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return re.findall(r"Request \(file descriptor \d+\): (\S+ \S+)", text)

    def count(self, fragment: str) -> int:
        """How many forwarded requests' lines contain ``fragment``."""
        return sum(fragment in line for line in self.requests())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Proxy]:
    """tinyproxy on a free port of 127.0.0.1, forwarding to any port of any host (no
    filter, no ``ConnectPort`` limit), clients from 127.0.0.1 only."""
    binary = shutil.which("tinyproxy")
    if binary is None:
        problem = "tinyproxy is not installed (apt-get install tinyproxy-bin; .ci/proxy-setup.sh)"
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    port = _free_port()
    log = tmp_path / "tinyproxy.log"
    config = tmp_path / "tinyproxy.conf"
    config.write_text(
        f"Port {port}\nListen 127.0.0.1\nTimeout 60\nMaxClients 200\nAllow 127.0.0.1\n"
        f'LogFile "{log}"\nLogLevel Info\nDisableViaHeader Yes\n'
    )
    process = subprocess.Popen(
        [binary, "-d", "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"tinyproxy did not start: {log.read_text()}") from None
                time.sleep(0.05)
        yield Proxy(f"http://127.0.0.1:{port}", log)
    finally:
        process.terminate()
        process.wait(timeout=10)

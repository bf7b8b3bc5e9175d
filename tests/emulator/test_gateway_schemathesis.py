"""schemathesis against the gateway's own /openapi.json: no input makes it answer 5xx.

Runs the schemathesis CLI in a subprocess (its own process, so its Hypothesis settings and
warnings stay out of this test session) against the emulator listening in this process. 402
is the normal handshake; the only check is ``not_a_server_error``. Bounded: a fixed seed, a
few examples per operation, and a subprocess timeout.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("schemathesis")


def test_schemathesis_finds_no_server_error(emulator, tmp_path):
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{emulator.gateway_url}/openapi.json",
        "--checks",
        "not_a_server_error",
        "--max-examples",
        "5",
        "--seed",
        "402",
        "--phases",
        "examples,coverage,fuzzing",
        "--no-color",
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "Server error" not in output and " passed" in output

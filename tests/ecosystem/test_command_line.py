"""The command line connects: ``--version``, defaults in ``--help``, and ``x402lab serve``
printing a ``connect(...)`` snippet that works as printed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import x402lab as xl


def _x402lab(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "x402lab", *args],
        capture_output=True,
        text=True,
        timeout=60,
        **kwargs,
    )


def test_version_and_defaults_in_help():
    done = _x402lab("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"x402lab {xl.__version__}"
    serve = _x402lab("serve", "--help").stdout
    assert "(default: 127.0.0.1)" in serve and "(default: 3.0)" in serve
    assert "(default: 0)" in serve  # a zero default is shown too
    demo = _x402lab("demo", "--help").stdout
    assert "default" in demo


def test_serve_prints_a_connect_snippet_that_works(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "x402lab", "serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        urls = [process.stdout.readline().strip() for _ in range(3)]
        assert [u.split(":")[0] for u in urls] == ["gateway", "reports", "chain"]
        lines = []
        while not lines or not lines[-1].startswith("x402lab serve: running"):
            lines.append(process.stderr.readline().rstrip("\n"))
        start = lines.index("connect from Python:")
        snippet = textwrap.dedent("\n".join(lines[start + 1 : -1]))
        assert "xl.Wallet.create()" in snippet
        code = snippet + (
            "\nr = lab.chat('hi', model='zai-org-glm-4.7-flash', max_tokens=8)"
            "\nprint(r.cost.status)\nlab.close()\n"
        )
        ran = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == "settled"
        assert (tmp_path / "emulated-ledger.sqlite").exists()
    finally:
        process.terminate()
        process.wait(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()

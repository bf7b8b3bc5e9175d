"""Processes of a team sharing one ledger and one named budget (run as
``python tests/support/teams.py STEP ...``; each prints one JSON line of what it did)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
KEY = "0x" + "7c" * 32
CHAT = "/api/v1/chat/completions"
CHAT_MODEL = "zai-org-glm-4.7-flash"


def run_step(*args: str, timeout: float = 120) -> dict[str, Any]:
    """This module run as a script in a new process (the repo importable); its JSON line.
    Fails the test, with the process's stderr, when it exits with an error."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def start_step(*args: str) -> subprocess.Popen[str]:
    """The same, started and left running (read its line with ``finish``)."""
    return subprocess.Popen(
        [sys.executable, str(Path(__file__)), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def _budget(name: str, usd: str) -> Any:
    import x402lab as xl

    return xl.Budget(usd=float(usd), name=name) if usd != "-" else xl.Budget(name=name)


def _lab(gateway: str, ledger: str, budget: Any, user: str) -> Any:
    import x402lab as xl

    return xl.connect(
        gateway, gateway, wallet=xl.Wallet.from_key(KEY), ledger=ledger, budget=budget, user=user
    )


# -- what the processes do -------------------------------------------------------------------


def connect_only(gateway: str, ledger: str, name: str, usd: str, user: str) -> None:
    """Connect naming budget ``name`` (with cap ``usd``; ``-``: none); print its caps, or
    the ConfigError that refused it."""
    import x402lab as xl

    try:
        lab = _lab(gateway, ledger, _budget(name, usd), user)
    except xl.ConfigError as exc:
        print(json.dumps({"refused": str(exc)}))
        return
    print(json.dumps({"cap": lab.budget.cap_atomic, "per_call": lab.budget.per_call_atomic}))
    lab.close()


def chat_until_refused(
    gateway: str, ledger: str, name: str, usd: str, user: str, calls: str, go: str
) -> None:
    """Wait for the file ``go``, then make ``calls`` distinct paid chat calls from budget
    ``name``, going on after a refusal; print how many were paid and refused."""
    import time

    import x402lab as xl

    lab = _lab(gateway, ledger, _budget(name, usd), user)
    while not os.path.exists(go):
        time.sleep(0.01)
    paid = refused = 0
    for i in range(int(calls)):
        body = {
            "model": CHAT_MODEL,
            "messages": [{"role": "user", "content": f"{user} question {i}"}],
            "max_tokens": 8,
        }
        try:
            lab.call("POST", CHAT, body)
            paid += 1
        except xl.BudgetExceeded:
            refused += 1
    print(json.dumps({"paid": paid, "refused": refused}))
    lab.close()


if __name__ == "__main__":
    steps = {"connect_only": connect_only, "chat_until_refused": chat_until_refused}
    steps[sys.argv[1]](*sys.argv[2:])

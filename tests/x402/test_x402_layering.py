"""The protocol layer stays pure: it imports only stdlib, the eth crypto libraries (with
safe-pysha3's ``sha3``) and x402lab.errors / x402lab.money (docs/design.md, "Layers")."""

import ast
import sys
from pathlib import Path

import x402lab.x402 as protocol

PACKAGE = Path(protocol.__file__).parent
ALLOWED_THIRD_PARTY = {"eth_account", "eth_abi", "eth_utils", "eth_hash", "sha3", "coincurve"}
ALLOWED_INTERNAL = {"x402lab.errors", "x402lab.money"}


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_protocol_layer_imports_only_allowed_modules():
    bad: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.glob("*.py")):
        for name in imported_modules(path):
            top = name.split(".")[0]
            if name.startswith("x402lab."):
                ok = name in ALLOWED_INTERNAL or name.startswith("x402lab.x402")
            else:
                ok = top in sys.stdlib_module_names or top in ALLOWED_THIRD_PARTY
            if not ok:
                bad.setdefault(path.name, []).append(name)
    assert bad == {}


def test_all_is_sorted_and_complete():
    assert protocol.__all__ == sorted(protocol.__all__)
    public = {
        name
        for name, value in vars(protocol).items()
        if not name.startswith("_") and not isinstance(value, type(protocol))
    }
    assert public == set(protocol.__all__)


def test_benchmark_script_runs():
    import os
    import subprocess

    script = PACKAGE.parents[1] / "benchmarks" / "sign_throughput.py"
    env = dict(os.environ, BENCH_SECONDS="0.05")
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "sign_payment (full payload)" in out.stdout

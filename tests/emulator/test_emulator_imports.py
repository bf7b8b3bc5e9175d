"""The emulator's import graph: no cycle, nothing of the client side, small modules.

Every ``import`` of every module of ``x402lab/emulator`` is read with ``ast``, including
imports inside functions and ``TYPE_CHECKING`` blocks, so a lazy import cannot hide a cycle.
An edge goes to the module an import names: ``from pkg import sub`` is an edge to
``pkg.sub`` when ``sub`` is a module, and to ``pkg`` (its ``__init__``) otherwise. The
implicit import of a parent package that Python runs first is not an edge: a package whose
``__init__`` re-exports its submodules is not a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import x402lab.emulator

EMULATOR_DIR = Path(x402lab.emulator.__file__).parent
PACKAGE = "x402lab.emulator"
# What the emulator may import of x402lab: the protocol, money and errors, the one helper for
# private files (its kept state is private too), and itself.
ALLOWED = ("x402lab.errors", "x402lab.money", "x402lab.private", "x402lab.x402", PACKAGE)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(EMULATOR_DIR).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(EMULATOR_DIR.rglob("*.py"))}


MODULES = _modules()


def _is_module(name: str) -> bool:
    if name in MODULES:
        return True
    root = Path(x402lab.emulator.__file__).parents[1]
    base = root.joinpath(*name.split(".")[1:])
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(name: str, path: Path) -> list[tuple[str, int]]:
    """(imported module, line) for every import statement anywhere in the file."""
    found: list[tuple[str, int]] = []
    is_package = path.name == "__init__.py"
    # ast.walk visits function bodies and ``if TYPE_CHECKING:`` blocks like any other node.
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(name, is_package, node)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.append((sub if _is_module(sub) else target, node.lineno))
    return found


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for target, _ in imports_of(name, path):
            if target in MODULES and target != name:
                graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path ``[a, b, ..., a]``, or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_cycle_search_finds_and_reports_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_the_reader_sees_lazy_and_type_checking_imports(tmp_path):
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from x402lab.emulator.chain import Chain\n"
        "def f():\n"
        "    from x402lab.emulator import serving\n"
        "    import x402lab.emulator.settings\n"
    )
    path = tmp_path / "probe.py"
    path.write_text(source)
    targets = {target for target, _ in imports_of(f"{PACKAGE}.probe", path)}
    assert {
        "x402lab.emulator.chain",
        "x402lab.emulator.serving",
        "x402lab.emulator.settings",
    } <= targets


def test_every_emulator_module_is_read():
    assert len(MODULES) > 20
    assert {f"{PACKAGE}.server", f"{PACKAGE}.serving", f"{PACKAGE}.reports"} <= set(MODULES)


def test_no_import_cycle_inside_the_emulator():
    cycle = find_cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_emulator_imports_nothing_of_the_client_side():
    wrong = [
        f"{name}:{line} imports {target}"
        for name, path in MODULES.items()
        for target, line in imports_of(name, path)
        if (target == "x402lab" or target.startswith("x402lab."))
        and not any(target == ok or target.startswith(ok + ".") for ok in ALLOWED)
    ]
    assert wrong == []

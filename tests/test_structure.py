"""A picture a reader can check (issue 11): the README's module map matches the tree, no
import cycle anywhere in ``x402lab/``, no SQL on the ``payments`` table outside the store
(``x402lab/ledger/``), and no client module over 450 lines.

Known exceptions are listed below with the reason, and each list is checked not to be stale:
once a file is fixed, the test fails until its entry is removed, so the rules only tighten.
Imports are read by the reader of ``tests/test_layers.py`` (every ``import`` statement, at
module level and inside functions, read with ``ast``).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"


def _load_layers() -> Any:
    # pytest runs in importlib mode: load the import reader of test_layers.py by path, under
    # its own name, as tests/client/conftest.py does with its support module.
    name = "layers_import_reader"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "test_layers.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


layers = _load_layers()
PACKAGE: Path = layers.PACKAGE

# -- no import cycle ---------------------------------------------------------------------------


def runtime_graph() -> dict[str, set[str]]:
    """Module -> the x402lab modules it imports when it runs (imports under ``TYPE_CHECKING``
    left out). ``from pkg import sub`` is an edge to ``pkg.sub`` when ``sub`` is a module, and
    to ``pkg`` when it imports a name defined there."""
    graph: dict[str, set[str]] = {
        layers.module_name(path): set() for path in sorted(PACKAGE.rglob("*.py"))
    }
    by_statement: dict[tuple[str, int, str | None], list[str]] = {}
    for found in layers.all_imports():
        if found.type_checking or not (found.target + ".").startswith("x402lab."):
            continue
        by_statement.setdefault((found.module, found.line, found.function), []).append(found.target)
    for (module, _, _), targets in by_statement.items():
        for target in targets:
            names = [t for t in targets if t.rpartition(".")[0] == target]
            if not layers._is_module_or_package(target):
                continue
            # ``from x402lab.media import job`` is an edge to the submodule only, as
            # ``import x402lab.media.job`` is; importing a name from x402lab.media is an edge
            # to the package.
            if names and all(layers._is_module_or_package(n) for n in names):
                continue
            if target != module:
                graph[module].add(target)
    return graph


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per strongly connected group of modules; [] when none."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [_cycle_within(graph, set(group)) for group in sorted(groups)]


def _cycle_within(graph: Mapping[str, Iterable[str]], group: set[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, inside the group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    return [*paths[node], start]
                if nxt in group and nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a strongly connected group has one


def test_the_cycle_finder_finds_a_cycle_in_a_small_graph():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_counts_lazy_imports_and_leaves_type_checking_ones_out():
    graph = runtime_graph()
    assert "x402lab.emulator.server" in graph["x402lab.lab"]  # inside connect's builder
    assert "x402lab.sync_lab" in graph["x402lab.lab"]
    assert "x402lab.lab" not in graph["x402lab.sync_lab"]  # for type checking only
    assert "x402lab.media.job" in graph["x402lab.media"]  # from-import of a submodule


def test_no_import_cycle_in_the_package():
    cycles = find_cycles(runtime_graph())
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


# -- no SQL on payments outside the store ------------------------------------------------------

PAYMENTS_SQL = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+payments\b", re.IGNORECASE)
STORE = "x402lab/ledger/"

# Known offenders, each with why, while it is moved behind the store's interface (the
# batch runner, job store and report library were, in issue 11). Remove an entry once its
# file has no such SQL: the test fails until then.
PAYMENTS_SQL_ALLOWED: set[str] = set()


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def sql_on_payments(source: str) -> list[int]:
    """Lines of string literals (docstrings aside) that read or write the payments table."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in prose
        and PAYMENTS_SQL.search(node.value)
    )


def _relative(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def test_the_sql_reader_sees_payments_sql_in_strings_only():
    source = (
        '"""Reads rows from payments, in prose."""\n'
        'Q = ("SELECT id FROM payments"\n     " WHERE id = ?")\n'
        'R = "update  Payments SET status = ?"\n'
        'S = "SELECT * FROM payments_archive"\n'
        "# INSERT INTO payments in a comment\n"
    )
    assert sql_on_payments(source) == [2, 4]


def test_no_sql_on_payments_outside_the_store():
    offenders = {
        _relative(path): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if not _relative(path).startswith(STORE)
        and (lines := sql_on_payments(path.read_text(encoding="utf-8")))
    }
    unexpected = {
        path: lines for path, lines in offenders.items() if path not in PAYMENTS_SQL_ALLOWED
    }
    assert unexpected == {}, f"SQL on payments belongs in {STORE} (file: lines): {unexpected}"
    fixed = sorted(PAYMENTS_SQL_ALLOWED - set(offenders))
    assert fixed == [], f"no SQL on payments any more: remove {fixed} from PAYMENTS_SQL_ALLOWED"


# -- small modules ---------------------------------------------------------------------------------

MAX_LINES = 450
EMULATOR = "x402lab/emulator/"  # tests/emulator checks its own sizes

# Modules over the limit while they are being split, each with its size then (issue 11 split
# batch/runner.py, ledger/claims.py, ledger/store.py and media/job_store.py). Remove an entry
# once its file is back under the limit: the test fails until then.
OVER_THE_LIMIT: set[str] = set()


# Generated source is read through what it is generated from, not by hand.
GENERATED = {"x402lab/sync_lab.py": "python tools/gen_sync.py"}


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_generated_modules_say_so_and_how():
    for path, command in GENERATED.items():
        first = (PACKAGE.parent / path).read_text(encoding="utf-8").splitlines()[0]
        assert "generated" in first and command in first, f"{path}: {first!r}"


def test_no_client_module_over_the_limit():
    sizes = {
        _relative(path): _lines(path)
        for path in sorted(PACKAGE.rglob("*.py"))
        if not _relative(path).startswith(EMULATOR) and _relative(path) not in GENERATED
    }
    over = {path: n for path, n in sizes.items() if n > MAX_LINES}
    unexpected = {path: n for path, n in over.items() if path not in OVER_THE_LIMIT}
    assert unexpected == {}, f"modules over {MAX_LINES} lines: {unexpected}; split them"
    fixed = sorted(set(OVER_THE_LIMIT) - set(over))
    assert fixed == [], f"back under {MAX_LINES} lines: remove {fixed} from OVER_THE_LIMIT"


# -- the README's module map -------------------------------------------------------------------

MAP_LINE = re.compile(r"^(x402lab/[\w.]+?(?:/|\.py))\s+\S")


def module_map(readme: str) -> list[str]:
    """The paths listed in the fenced block under ``## Layout`` (one per line: a path, then
    what it is)."""
    section = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", readme, re.S | re.M)
    assert section, "README.md has no '## Layout' section"
    block = re.search(r"^```[\w-]*\n(.*?)^```", section.group(1), re.S | re.M)
    assert block, "the Layout section of README.md has no fenced module map"
    paths = []
    for line in block.group(1).splitlines():
        if not line.strip():
            continue
        match = MAP_LINE.match(line)
        assert match, f"module map line is not 'x402lab/<name>(/ or .py)  <what it is>': {line!r}"
        paths.append(match.group(1))
    return paths


def _top_level() -> set[str]:
    found = set()
    for path in PACKAGE.iterdir():
        if path.is_dir() and (path / "__init__.py").is_file():
            found.add(f"x402lab/{path.name}/")
        elif path.suffix == ".py" and path.name != "__init__.py":
            found.add(f"x402lab/{path.name}")
    return found


def test_the_module_map_reader_needs_a_description_and_the_section():
    sample = (
        "## Layout\n\n```text\nx402lab/errors.py    one tree\nx402lab/ledger/   the store\n```\n"
    )
    assert module_map(sample) == ["x402lab/errors.py", "x402lab/ledger/"]
    assert not MAP_LINE.match("x402lab/errors.py")


def test_the_readme_module_map_matches_the_tree():
    listed = module_map(README.read_text(encoding="utf-8"))
    assert len(listed) == len(set(listed)), "a path is listed twice in the README's module map"
    missing = sorted(p for p in listed if not (PACKAGE.parent / p).exists())
    wrong_kind = sorted(
        p
        for p in listed
        if p.endswith("/") != (PACKAGE.parent / p).is_dir() and (PACKAGE.parent / p).exists()
    )
    unlisted = sorted(_top_level() - set(listed))
    assert missing == [], f"README.md lists paths that do not exist: {missing}"
    assert wrong_kind == [], f"packages end with '/', modules with '.py': {wrong_kind}"
    assert unlisted == [], f"add these to the module map under '## Layout' in README.md: {unlisted}"

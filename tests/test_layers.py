"""Import direction (docs/design.md, "Layers"): a layer imports only from the layers above it.

Every ``import`` in every module of ``x402lab/`` is read with ``ast`` (including imports
inside functions and ``TYPE_CHECKING`` blocks), so a lazy import cannot hide an upward
dependency. Reading of the layer list taken here:

- ``_loop``, ``sync`` and ``facade`` (the helper loop, the sync twins, a lab member declared
  for both facades) sit with ``errors`` and ``money`` at the top, and so do ``routes``
  (service names and paths) and ``pricing`` (pure price arithmetic): every layer below may
  need them.
- ``tables`` holds the declared schemas (the ledger's and the spend tables' too; a batch's
  own result schema lives with the batch, in ``batch.output``) and knows nothing of HTTP, so
  it sits just below the protocol: the store, services, batch and the presentation layers
  all build their results through it, and it imports none of them.
- ``payments`` (the money side of the handshake) sits between the store and ``transport``,
  and ``chain`` (the chain read over JSON-RPC, and reconciliation) between ``payments`` and
  ``transport``, which asks it about a payment whose answer was lost;
  ``session`` (HTTP clients, payer, store) between ``transport`` and the resources
  (``gateway``, ``media``, ``reports``), which share one layer.
- ``lab``, ``connection`` and the package ``__init__`` are the composition root and may
  import any layer; ``connection`` may import the emulator only inside ``_build`` (connect's
  embedded default), and either of them for type checking.
- The emulator imports only ``errors``, ``money``, ``private`` (its kept state is private
  too), ``x402`` and itself; ``cli`` may import it
  because ``x402lab serve`` is how the emulator is started from a shell.

Over the whole package, the imports that run when a module is imported (module level, type
checking aside) make no circle, and no client module (any but the emulator's) is over 450
lines: a longer one holds more than one idea. No module keeps a context variable but
``_loop``'s deferred warnings, off the paid path (a paid call's context goes on its
``CallInfo``), and none but ``x402lab serve`` runs the garbage collector.

Inside the ledger (``x402lab/ledger/``) the same holds one level down: its modules import one
another in one direction (``LEDGER_ORDER``), so there is no circle, type-only imports
included; and every caller outside it (the tests of other areas too) imports its face,
``x402lab.ledger``, never one of its modules.

Inside batch (``x402lab/batch/``) the parts, its subpackages and the few modules at its top,
import one another in one direction (``BATCH_ORDER``, the order its face's docstring lists
them in), type-only and lazy imports included, so there is no circle between them; at most
``MAX_BATCH_TOP`` modules sit at its top; a subpackage's modules are private (a leading
underscore) and every module outside that subpackage imports its face; every module of batch
says its one idea in the first paragraph of its docstring.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import x402lab

PACKAGE = Path(x402lab.__file__).parent

# Ordered top to bottom; a module may import its own layer and the layers before it.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "x402lab.errors",
        "x402lab.money",
        "x402lab._loop",
        "x402lab.sync",
        "x402lab.facade",
        "x402lab.routes",
        "x402lab.pricing",
        "x402lab.reprs",
        "x402lab.busy",
        "x402lab.private",
        "x402lab.keywords",
    ),
    ("x402lab.x402",),
    ("x402lab.tables",),
    ("x402lab.wallet", "x402lab.budget", "x402lab.ledger", "x402lab.world"),
    ("x402lab.payments",),
    ("x402lab.chain",),
    ("x402lab.transport",),
    ("x402lab.session",),
    ("x402lab.gateway", "x402lab.media", "x402lab.reports"),
    ("x402lab.batch", "x402lab.integrations"),
    (
        "x402lab.widgets",
        "x402lab.plots",
        "x402lab.analysis",
        "x402lab.planning",
        "x402lab.cli",
        "x402lab.search",
    ),
)
ROOT = ("x402lab", "x402lab.lab", "x402lab.connection", "x402lab.types", "x402lab.__main__")
EMULATOR = "x402lab.emulator"
EMULATOR_MAY_IMPORT = (
    "x402lab.errors",
    "x402lab.money",
    "x402lab.private",
    "x402lab.x402",
    EMULATOR,
)

# What each layer knows nothing of (docs/design.md, "Layers"), as third-party top-level packages.
HTTP = {"httpx", "httpx_aiohttp", "aiohttp", "requests", "urllib3", "starlette", "uvicorn"}
TABLES = {"pandas", "pyarrow"}
WIDGETS = {"ipywidgets", "IPython", "matplotlib"}
FORBIDDEN_THIRD_PARTY: dict[str, set[str]] = {
    "x402lab.x402": HTTP | TABLES | WIDGETS,
    "x402lab.wallet": HTTP | TABLES | WIDGETS,
    "x402lab.budget": HTTP | TABLES | WIDGETS,
    "x402lab.ledger": HTTP | WIDGETS,  # the ledger exports tables
    "x402lab.tables": HTTP | WIDGETS,
    "x402lab.payments": HTTP | TABLES | WIDGETS,
    "x402lab.chain": WIDGETS,  # JSON-RPC over httpx; tables through x402lab.tables
    "x402lab.transport": TABLES | WIDGETS,
    "x402lab.session": TABLES | WIDGETS,
    "x402lab.gateway": {"ipywidgets"},
    "x402lab.media": {"ipywidgets"},
    "x402lab.reports": {"ipywidgets"},
    "x402lab.batch": {"ipywidgets"},  # progress goes out through a callback
    "x402lab.integrations": TABLES | WIDGETS,  # paying httpx clients for other libraries
    EMULATOR: {"pandas", "pyarrow", "ipywidgets", "IPython", "matplotlib"},
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module (absolute)
    function: str | None  # the enclosing function, if any
    type_checking: bool  # inside ``if TYPE_CHECKING:``
    line: int
    names: tuple[str, ...] = ()  # what ``from target import ...`` takes


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(path: Path, package: Path = PACKAGE) -> list[Import]:
    module = module_name(path, package)
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, function: str | None, type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, child.name, type_checking)
            elif isinstance(child, ast.If) and (checking := _type_checking_test(child.test)):
                typed_only, run = child.body, child.orelse
                if checking == "not":  # ``if not TYPE_CHECKING:`` runs its body
                    typed_only, run = run, typed_only
                for stmt in typed_only:
                    visit(ast.Module(body=[stmt], type_ignores=[]), function, True)
                for stmt in run:
                    visit(ast.Module(body=[stmt], type_ignores=[]), function, type_checking)
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(Import(module, alias.name, function, type_checking, child.lineno))
            elif isinstance(child, ast.ImportFrom):
                target = _resolve(module, is_package, child)
                names = tuple(alias.name for alias in child.names)
                found.append(Import(module, target, function, type_checking, child.lineno, names))
                # ``from x402lab import lab`` imports the submodule x402lab.lab
                if _matches(target, package.name):
                    for alias in child.names:
                        found.append(
                            Import(
                                module,
                                f"{target}.{alias.name}",
                                function,
                                type_checking,
                                child.lineno,
                            )
                        )
            else:
                visit(child, function, type_checking)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), None, False)
    return found


def _type_checking_test(test: ast.expr) -> str | None:
    """``"is"`` for ``if TYPE_CHECKING:`` (``typing.TYPE_CHECKING`` too), ``"not"`` for
    ``if not TYPE_CHECKING:``, None for any other test."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return "not" if _type_checking_test(test.operand) == "is" else None
    named = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
    return "is" if named == "TYPE_CHECKING" else None


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer_of(name: str) -> int | None:
    """The index of ``name``'s layer; None for the root, the emulator and non-modules."""
    for index, prefixes in enumerate(LAYERS):
        if any(_matches(name, p) for p in prefixes):
            return index
    return None


def all_imports() -> list[Import]:
    return _all_imports(PACKAGE)


@functools.cache
def _all_imports(package: Path) -> list[Import]:
    return [found for path in sorted(package.rglob("*.py")) for found in imports_of(path)]


def _internal(target: str) -> bool:
    return _matches(target, "x402lab")


def _is_module_or_package(target: str, package: Path = PACKAGE) -> bool:
    """Whether ``target`` is a module or package of ``package`` (not a name in one)."""
    if not _matches(target, package.name):
        return False
    relative = target.split(".")[1:]
    base = package.joinpath(*relative)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def test_every_module_belongs_to_a_layer():
    unplaced = sorted(
        {
            module_name(path)
            for path in PACKAGE.rglob("*.py")
            if layer_of(module_name(path)) is None
            and module_name(path) not in ROOT
            and not _matches(module_name(path), EMULATOR)
        }
    )
    assert unplaced == [], f"place these modules in a layer of tests/test_layers.py: {unplaced}"


def test_no_upward_imports():
    upward = []
    for found in all_imports():
        if not _internal(found.target) or not _is_module_or_package(found.target):
            continue
        source, target = layer_of(found.module), layer_of(found.target)
        if source is None or target is None:
            continue  # root and emulator: their own tests below
        if target > source:
            upward.append(f"{found.module}:{found.line} imports {found.target}")
    assert upward == []


def test_the_emulator_imports_nothing_client_side():
    bad = [
        f"{found.module}:{found.line} imports {found.target}"
        for found in all_imports()
        if _matches(found.module, EMULATOR)
        and _internal(found.target)
        and _is_module_or_package(found.target)
        and not any(_matches(found.target, allowed) for allowed in EMULATOR_MAY_IMPORT)
    ]
    assert bad == []


def test_client_imports_the_emulator_only_in_connects_builder():
    bad = []
    for found in all_imports():
        if not _matches(found.target, EMULATOR) or _matches(found.module, EMULATOR):
            continue
        if found.module == "x402lab.connection" and found.function == "_build":
            continue
        if found.module in ("x402lab.lab", "x402lab.connection") and found.type_checking:
            continue
        if _matches(found.module, "x402lab.cli"):
            continue  # ``x402lab serve`` starts the emulator
        bad.append(f"{found.module}:{found.line} imports {found.target}")
    assert bad == []


def test_layers_do_not_import_what_they_know_nothing_of():
    bad = []
    for found in all_imports():
        for prefix, forbidden in FORBIDDEN_THIRD_PARTY.items():
            if _matches(found.module, prefix) and found.target.split(".")[0] in forbidden:
                bad.append(f"{found.module}:{found.line} imports {found.target}")
    assert bad == []


def test_the_checker_sees_lazy_and_relative_imports():
    # A guard against a checker that cannot fail: it must see connect's lazy emulator import
    # and classify it as inside _build.
    lazy = [f for f in imports_of(PACKAGE / "connection.py") if _matches(f.target, EMULATOR)]
    assert any(f.function == "_build" for f in lazy)
    assert layer_of("x402lab.gateway.generic") > layer_of("x402lab.transport.client")
    assert layer_of("x402lab.tables.catalog") < layer_of("x402lab.gateway.catalog")
    assert layer_of("x402lab.payments.payer") < layer_of("x402lab.transport.auth")


# -- the ledger: a room per thing, no circle, one face ------------------------------------------

LEDGER = "x402lab.ledger"
#: The ledger's modules (its face, ``__init__``, aside), each importing only those before it:
#: the order its face's docstring lists them in.
LEDGER_ORDER = tuple(
    f"{LEDGER}.{name}"
    for name in (
        "statuses",
        "database",
        "postgres",
        "sqlite",
        "write_ahead",
        "rate_limits",
        "ddl",
        "packs",
        "schema",
        "payments",
        "caps",
        "store",
        "claim_rows",
        "claims",
        "jobs",
        "library",
    )
)
#: Most lines a module of the ledger may have (the house rule for client modules).
MAX_LINES = 450
#: The ledger's own test suites, which test its internals (transition functions, the
#: PostgreSQL version table); every other caller imports the face.
LEDGER_TESTS = ("ledger", "postgres")


def import_graph(package: str) -> dict[str, set[str]]:
    """Each module of ``package`` -> the modules of ``package`` it imports, at any level and
    for type checking too (its own enclosing packages aside: importing a module always
    imports them first, and they are being initialised already)."""
    graph: dict[str, set[str]] = {}
    for found in all_imports():
        if not _matches(found.module, package) or not _matches(found.target, package):
            continue
        if not _is_module_or_package(found.target) or _matches(found.module, found.target):
            continue
        graph.setdefault(found.module, set()).add(found.target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: each group of modules that reach one another, sorted."""
    reach = {module: set(targets) for module, targets in graph.items()}
    changed = True
    while changed:  # the transitive closure (a few dozen modules: no need to be clever)
        changed = False
        for targets in reach.values():
            more = set().union(*(reach.get(target, set()) for target in targets)) - targets
            if more:
                targets |= more
                changed = True
    groups = {
        tuple(sorted({module} | {t for t in targets if module in reach.get(t, set())}))
        for module, targets in reach.items()
        if module in targets
    }
    return [list(group) for group in sorted(groups)]


def test_the_circle_finder_finds_circles():
    # A guard against a check that cannot fail.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert circles(graph) == [["a", "b", "c"], ["e"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_ledger_has_no_import_circle():
    assert circles(import_graph(LEDGER)) == []


def test_each_ledger_module_imports_only_those_before_it():
    modules = {module_name(path) for path in (PACKAGE / "ledger").glob("*.py")} - {LEDGER}
    assert modules == set(LEDGER_ORDER), "place a new ledger module in LEDGER_ORDER"
    # The ledger is laid out by table (payments, claims, jobs, library, rate_limits, ...) over
    # the database seam and its two backends (SQLite's write-ahead fsync a module of its own);
    # the face, ``__init__``, counts too.
    assert len(LEDGER_ORDER) + 1 <= 17
    graph = import_graph(LEDGER)
    bad = []
    for index, module in enumerate(LEDGER_ORDER):
        later = graph.get(module, set()) - set(LEDGER_ORDER[:index])
        bad += [f"{module} imports {target}" for target in sorted(later)]
    assert bad == []


def _imports_past_the_ledgers_face(path: Path, name: str) -> list[str]:
    """``path:line imports x402lab.ledger.<module>`` for each import that reaches past the face
    (``name`` is the importing module's name, for relative imports)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, path.name == "__init__.py", node)
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # code run in a child process (``python -c "from x402lab.ledger.x import y"``)
            targets = re.findall(r"\b(?:from|import)\s+(x402lab\.ledger\.\w+)", node.value)
        for target in targets:
            if _matches(target, LEDGER) and target != LEDGER and _is_module_or_package(target):
                found.append(f"{path}:{node.lineno} imports {target}")
    return found


def test_callers_outside_the_ledger_import_its_face():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if not _matches(module_name(path), LEDGER):
            bad += _imports_past_the_ledgers_face(path, module_name(path))
    tests = Path(__file__).parent
    for path in sorted(tests.rglob("*.py")):
        # This file's own strays (below) are what the check must find.
        if path.relative_to(tests).parts[0] not in LEDGER_TESTS and path != Path(__file__):
            bad += _imports_past_the_ledgers_face(path, "tests")
    assert bad == []


def test_the_face_check_sees_a_reach_past_it(tmp_path):
    stray = tmp_path / "stray.py"
    stray.write_text(
        "from x402lab.ledger import Ledger\n"
        "from x402lab.ledger.store import Ledger as Again\n"
        "import x402lab.ledger.claims\n"
        "from x402lab.ledger import statuses\n"
        'CODE = "from x402lab.ledger.payments import Settlement"\n'
    )
    found = _imports_past_the_ledgers_face(stray, "stray")
    assert [line.split(" imports ")[1] for line in found] == [
        "x402lab.ledger.store",
        "x402lab.ledger.claims",
        "x402lab.ledger.statuses",
        "x402lab.ledger.payments",
    ]


# -- the whole package: no import circle, no long client module -----------------------------------


def _enclosing(name: str) -> list[str]:
    """``a.b.c`` -> ``["a", "a.b", "a.b.c"]``: what importing ``a.b.c`` runs, in order."""
    parts = name.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts) + 1)]


def runtime_import_graph(package: Path = PACKAGE) -> dict[str, dict[str, int]]:
    """Each module of ``package`` -> the modules of ``package`` that importing it runs (and
    the line of the first import that does).

    Only the imports that run when the module is imported count: at module level (a class
    body's too), not inside a function nor under ``if TYPE_CHECKING:``. Importing ``a.b.c``
    runs the packages ``a`` and ``a.b`` first, so those count too, except the importer's own
    enclosing packages (being initialised already when it runs), unless it takes a name from
    one: ``from x402lab.batch import Batches`` in ``x402lab.batch.x`` needs
    ``x402lab/batch/__init__.py`` to have bound ``Batches`` first.
    """
    graph: dict[str, dict[str, int]] = {}
    for path in sorted(package.rglob("*.py")):
        module = module_name(path, package)
        targets = graph.setdefault(module, {})
        for found in imports_of(path, package):
            if found.function is not None or found.type_checking:
                continue
            if not _is_module_or_package(found.target, package):
                continue
            takes_a_name = any(
                not _is_module_or_package(f"{found.target}.{name}", package) for name in found.names
            )
            for step in _enclosing(found.target):
                own = _matches(module, step)
                if step == module or (own and not (step == found.target and takes_a_name)):
                    continue
                targets.setdefault(step, found.line)
    return graph


def _described(circle: list[str], graph: dict[str, dict[str, int]]) -> str:
    """A circle and the imports that close it (``module:line imports module``)."""
    edges = [
        f"{module}:{line} imports {target}"
        for module in circle
        for target, line in sorted(graph[module].items())
        if target in circle
    ]
    return f"{' <-> '.join(circle)}\n    " + "\n    ".join(edges)


def test_the_package_has_no_import_circle():
    graph = runtime_import_graph()
    found = [_described(circle, graph) for circle in circles(graph) if len(circle) > 1]
    assert found == [], "import circles (cut an import in each):\n" + "\n".join(found)


def test_the_circle_check_counts_what_runs_at_import(tmp_path):
    # A guard against a check that cannot fail, or that finds what is not there.
    files = {
        "__init__.py": "",
        # Type-only and function-level imports run nothing at import: no circle.
        "a.py": "from pkg import b\n",
        "b.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from pkg import a\n"
            "def later():\n    from pkg.a import x\n"
        ),
        # Importing pkg.sub.inner runs pkg/sub/__init__.py first, which imports face, which
        # imports c: a circle through a package's face.
        "c.py": "from pkg.sub.inner import x\n",
        "sub/__init__.py": "from pkg.sub.face import Thing\n",
        "sub/face.py": "import pkg.c\nclass Thing: ...\n",
        "sub/inner.py": "x = 1\n",
        # A module taking a name from its own package's face, which imports it: a circle.
        "two/__init__.py": "from pkg.two.user import Other\nfrom pkg.two.impl import Thing\n",
        "two/impl.py": "class Thing: ...\n",
        "two/user.py": "from pkg.two import Thing\nclass Other: ...\n",
        # A module importing a sibling module through its package: no circle.
        "three/__init__.py": "from pkg.three.user import y\n",
        "three/impl.py": "",
        "three/user.py": (
            "from pkg.three import impl\nif not TYPE_CHECKING:\n    from pkg import a\ny = 1\n"
        ),
    }
    package = tmp_path / "pkg"
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    graph = runtime_import_graph(package)
    assert graph["pkg.b"] == {}
    assert graph["pkg.three.user"] == {"pkg.three.impl": 1, "pkg.a": 3}
    assert [circle for circle in circles(graph) if len(circle) > 1] == [
        ["pkg.c", "pkg.sub", "pkg.sub.face"],
        ["pkg.two", "pkg.two.user"],
    ]
    assert _described(["pkg.two", "pkg.two.user"], graph) == (
        "pkg.two <-> pkg.two.user\n"
        "    pkg.two:1 imports pkg.two.user\n"
        "    pkg.two.user:1 imports pkg.two"
    )


def test_no_client_module_is_over_the_line_limit():
    long = {
        str(path.relative_to(PACKAGE.parent)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if not _matches(module_name(path), EMULATOR)
        and (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"client modules over {MAX_LINES} lines (split each by concept): {long}"


# Process-wide switches a library must not pull in the user's process: a full collection walks
# every object the notebook holds (a large DataFrame's too), and freezing or disabling the
# collector changes the user's program. Only ``x402lab serve``, a process of its own, may.
_PROCESS_WIDE_GC = {"collect", "freeze", "disable", "enable", "set_threshold"}
_MAY_TUNE_GC = ("x402lab.cli.serve",)


def gc_calls(path: Path, package: Path = PACKAGE) -> list[str]:
    """Calls of ``gc.collect()`` and the like in ``path``, as ``module:line gc.name``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{module_name(path, package)}:{node.lineno} gc.{node.func.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "gc"
        and node.func.attr in _PROCESS_WIDE_GC
    ]


def test_no_client_module_runs_the_garbage_collector():
    found = [
        call
        for path in sorted(PACKAGE.rglob("*.py"))
        if not _matches(module_name(path), EMULATOR) and module_name(path) not in _MAY_TUNE_GC
        for call in gc_calls(path)
    ]
    assert found == []


def test_the_gc_check_sees_a_collection(tmp_path):
    # A guard against a check that cannot fail.
    module = tmp_path / "x402lab" / "probe.py"
    module.parent.mkdir()
    module.write_text("import gc\n\ndef f():\n    gc.collect()\n", encoding="utf-8")
    assert gc_calls(module, module.parent) == ["x402lab.probe:4 gc.collect"]


# -- batch/: one part per concept, in one order, each behind its face ----------------------------

BATCH = "x402lab.batch"
#: batch/'s parts (a subpackage, or a module at its top), each importing only those before it:
#: the order ``x402lab/batch/__init__.py``'s docstring lists them in.
BATCH_ORDER = tuple(
    f"{BATCH}.{name}"
    for name in (
        "concurrency",
        "options",
        "inputs",
        "output",
        "kinds",
        "prepare",
        "run",
        "cluster",
        "api",
        "routes",
        "frames",
    )
)
#: Most modules at batch/'s top, its face ``__init__`` included: the rest live in subpackages.
MAX_BATCH_TOP = 10
#: Most lines of a module's summary, the first paragraph of its docstring: one idea, said short.
MAX_SUMMARY_LINES = 2


def batch_part(module: str) -> str | None:
    """The part of batch ``module`` is (or is in): ``x402lab.batch.run._runner`` ->
    ``x402lab.batch.run``; None for batch's face and for a module outside batch."""
    parts = module.split(".")
    return ".".join(parts[:3]) if _matches(module, BATCH) and len(parts) > 2 else None


def _private_module(name: str) -> bool:
    return name.split(".")[-1].startswith("_") and _is_module_or_package(name)


def test_batch_parts_are_placed_and_few_at_the_top():
    top = sorted(module_name(path) for path in (PACKAGE / "batch").glob("*.py"))
    subpackages = sorted(
        module_name(path.parent) for path in (PACKAGE / "batch").glob("*/__init__.py")
    )
    assert set(top + subpackages) - {BATCH} == set(BATCH_ORDER), "place it in BATCH_ORDER"
    assert len(top) <= MAX_BATCH_TOP, f"batch/ has {len(top)} modules at its top: {top}"


def test_each_batch_part_imports_only_those_before_it():
    bad = []
    for found in all_imports():
        source, target = batch_part(found.module), batch_part(found.target)
        if found.target == BATCH and source is not None:
            bad.append(f"{found.module}:{found.line} imports batch's face, which imports it")
        if source is None or target is None or source == target:
            continue
        if not _is_module_or_package(found.target):
            continue
        if BATCH_ORDER.index(target) > BATCH_ORDER.index(source):
            bad.append(f"{found.module}:{found.line} imports {found.target}, a later part")
    assert bad == []


def test_batch_parts_make_no_circle():
    graph = {}
    for module, targets in import_graph(BATCH).items():
        source = batch_part(module)
        if source is not None:
            parts = {batch_part(target) for target in targets} - {None, source}
            graph.setdefault(source, set()).update(parts)
    assert circles(graph) == []


def batch_faces_bypassed(found: Import) -> list[str]:
    """What ``found`` takes past a batch subpackage's face: one of its private modules, or a
    private name of its face, from a module outside that subpackage."""
    taken = [found.target] + [f"{found.target}.{name}" for name in found.names]
    return [
        f"{found.module}:{found.line} imports {name}"
        for name in taken
        if batch_part(name) not in (None, batch_part(found.module))
        and (_private_module(name) or name.split(".")[-1].startswith("_"))
    ]


def test_callers_import_a_batch_subpackage_through_its_face():
    # Tests of batch may still reach a private module to test it (as the ledger's do).
    bad = [line for found in all_imports() for line in batch_faces_bypassed(found)]
    assert bad == []


def test_the_batch_face_check_sees_a_reach_past_it():
    # A guard against a check that cannot fail: batch/routes reaching into inputs' privates.
    found = Import(
        "x402lab.batch.routes._rows", "x402lab.batch.inputs", None, False, 1, ("_helper",)
    )
    module = Import("x402lab.batch.api", "x402lab.batch.run._runner", None, False, 2)
    own = Import("x402lab.batch.run._buying", "x402lab.batch.run._drain", None, False, 3)
    assert batch_faces_bypassed(found) == [
        "x402lab.batch.routes._rows:1 imports x402lab.batch.inputs._helper"
    ]
    assert batch_faces_bypassed(module) == ["x402lab.batch.api:2 imports x402lab.batch.run._runner"]
    assert batch_faces_bypassed(own) == []


def summary_of(path: Path) -> str | None:
    """The first paragraph of ``path``'s module docstring (None without one)."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    return docstring.split("\n\n")[0].strip() if docstring else None


def test_every_batch_module_says_its_one_idea_first():
    bad = {}
    for path in sorted((PACKAGE / "batch").rglob("*.py")):
        summary = summary_of(path)
        if not summary or len(summary.splitlines()) > MAX_SUMMARY_LINES or summary[-1] not in ".:":
            bad[str(path.relative_to(PACKAGE.parent))] = summary
    assert bad == {}, f"say each module's one idea in at most {MAX_SUMMARY_LINES} lines: {bad}"


# State that rides along with a call instead of being passed: a context variable is seen by
# every task a call starts, so a reader cannot follow it by the calls. What a paid call needs
# (its group of commits, prepay tally, pacer and send turn) goes on its ``CallInfo``. The one
# context variable left is ``_loop``'s deferred warnings, which decides only where a warning
# shows; the packages of the paid path keep none.
PAID_PATH = (
    "x402lab.batch",
    "x402lab.transport",
    "x402lab.payments",
    "x402lab.ledger",
    "x402lab.gateway",
    "x402lab.budget",
)
_MAY_KEEP_CONTEXT = ("x402lab._loop",)


def context_variables(path: Path, package: Path = PACKAGE) -> list[str]:
    """Imports of ``contextvars`` and uses of ``ContextVar`` in ``path``, as ``module:line``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            hit = any(alias.name.split(".")[0] == "contextvars" for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            hit = node.module == "contextvars" or any(a.name == "ContextVar" for a in node.names)
        elif isinstance(node, ast.Attribute):
            hit = node.attr == "ContextVar"
        elif isinstance(node, ast.Name):
            hit = node.id == "ContextVar"
        else:
            continue
        if hit:
            found.append(f"{module_name(path, package)}:{node.lineno}")
    return found


def test_no_module_keeps_a_context_variable():
    assert not any(_matches(m, p) for m in _MAY_KEEP_CONTEXT for p in PAID_PATH)
    found = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if module_name(path) not in _MAY_KEEP_CONTEXT
        for hit in context_variables(path)
    ]
    assert found == [], f"context variables (pass the value on the call instead): {found}"


def test_the_paid_path_packages_are_all_there():
    # The list names real modules (a renamed package would leave its check empty).
    names = {module_name(path) for path in PACKAGE.rglob("*.py")}
    assert all(any(_matches(name, p) for name in names) for p in PAID_PATH)


@pytest.mark.parametrize(
    "source",
    [
        "import contextvars\n\nv = contextvars.ContextVar('v')\n",
        "from contextvars import ContextVar\n\nv = ContextVar('v')\n",
        "import contextvars as cv\n",
    ],
)
def test_the_context_check_sees_a_context_variable(tmp_path, source):
    # A guard against a check that cannot fail.
    module = tmp_path / "x402lab" / "probe.py"
    module.parent.mkdir()
    module.write_text(source, encoding="utf-8")
    assert context_variables(module, module.parent)[0] == "x402lab.probe:1"

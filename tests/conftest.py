"""Shared fixtures: the emulator running on real sockets, per test.

``emulator`` is both services with default settings and fast jobs; ``emulator_factory``
starts more with custom settings (``emulator_factory(rate_429=1.0)`` for a fault,
``emulator_factory(EmulatorSettings(...))`` for full control). Everything stops after the test.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import json
import linecache
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import types
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import postgres

from x402lab.emulator.chain import Chain
from x402lab.emulator.server import RunningEmulator, start_emulator
from x402lab.emulator.settings import EmulatorSettings, Faults

ROOT = Path(__file__).resolve().parent.parent

# Music and video jobs finish quickly in tests; everything else keeps its default.
FAST_JOB_SECONDS = 0.3

_FAULT_NAMES = {f.name for f in dataclasses.fields(Faults)}


def make_settings(settings: EmulatorSettings | None = None, **changes: Any) -> EmulatorSettings:
    """``settings`` (default: fast jobs) with ``changes``; fault names go into ``faults``."""
    base = settings or EmulatorSettings(job_seconds=FAST_JOB_SECONDS)
    faults = {k: changes.pop(k) for k in list(changes) if k in _FAULT_NAMES}
    if faults:
        base = dataclasses.replace(base, faults=dataclasses.replace(base.faults, **faults))
    return dataclasses.replace(base, **changes)


EmulatorFactory = Callable[..., RunningEmulator]


# -- a ledger on each backend ---------------------------------------------------------------
# PostgreSQL: a database per test module (``x402lab_test_<random>``, so parallel workers and
# other checkouts never share one), emptied per test. Without psycopg or a server the tests
# that need it skip saying why; under ``CI=true`` they fail.


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    """The URL of a role that may create databases (the tests' server)."""
    problem = postgres.server_problem()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    return postgres.ADMIN_URL


@pytest.fixture(scope="module")
def pg_database(pg_admin_url: str) -> Iterator[str]:
    """A database of this test module (``x402lab_test_<random>``); its URL."""
    name = postgres.create_database()
    try:
        yield postgres.database_url(name)
    finally:
        postgres.drop_database(name)


@pytest.fixture
def pg_url(pg_database: str) -> str:
    """The module's database, emptied for this test (no tables, no schema version)."""
    postgres.empty(pg_database)
    return pg_database


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """Where a ledger lives, once per backend: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "ledger.sqlite")
    return str(request.getfixturevalue("pg_url"))


# -- notebook kernels --------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    _start_a_dead_kernel_once_more()


def _start_a_dead_kernel_once_more() -> None:
    """nbval starts each notebook's kernel once. A kernel can die before it answers its first
    request ("Kernel died before replying to kernel_info", seen in one CI run out of many):
    jupyter_client hands it five TCP ports it found free by binding and releasing them, and
    until the kernel binds them any socket of the suite (its clients open thousands) can
    take one. A second start, on new ports, is what a person would do."""
    import nbval.kernel

    start = nbval.kernel.start_new_kernel

    def start_again_if_it_died(*args: Any, **kwargs: Any) -> Any:
        try:
            return start(*args, **kwargs)
        except RuntimeError as exc:
            if "Kernel died" not in str(exc):
                raise
            return start(*args, **kwargs)

    nbval.kernel.start_new_kernel = start_again_if_it_died


# -- the lane of tests that start other processes -------------------------------------------

#: What the source of a test, of a helper it calls or of a fixture it uses says when it starts
#: a process (a script, a kernel, a pool, a Dask cluster, mypy).
_SPAWNS = re.compile(
    r"\bsubprocess\.|\bPopen\(|sys\.executable|multiprocessing|get_context\(|\bspawn\("
    r"|\.Process\(|ProcessPoolExecutor|LocalCluster|nbclient|NotebookClient|execute_notebook|mypy\.api"
    r"|chromium"
)
#: Modules whose tests share one expensive module-scoped process (a cluster, a JupyterLab):
#: under pytest-xdist (``--dist loadgroup``) each runs whole on one worker, like a notebook.
_ONE_WORKER = ("tests/dask/", "tests/browser/")


def _source(thing: object) -> str:
    """The lines of ``thing``'s source (a function or a class; "" if it has none).

    ``inspect.getsource`` tokenizes each function again and parses its whole module once more
    for each class: every pytest process spent 1-2 s of its collection there. A function's
    lines are known from its code objects (the first line is its first decorator's, the last
    the last line any instruction of it or of a function inside it came from), a class's from
    its module parsed once."""
    try:
        path = inspect.getsourcefile(thing)  # type: ignore[arg-type]
    except TypeError:
        path = None
    if not path:  # built in, or no file of its source
        return ""
    lines = linecache.getlines(path)
    code = getattr(inspect.unwrap(thing), "__code__", None)  # type: ignore[arg-type]
    if code is not None:
        span = (code.co_firstlineno, _last_line(code))
    else:
        span = _class_spans(path).get(getattr(thing, "__qualname__", ""), (0, -1))
    return "".join(lines[span[0] - 1 : span[1]])


def _last_line(code: types.CodeType) -> int:
    inner = (const for const in code.co_consts if isinstance(const, types.CodeType))
    own = (line for _, _, line in code.co_lines() if line is not None)
    return max((*own, *map(_last_line, inner)), default=code.co_firstlineno)


@functools.cache
def _class_spans(path: str) -> dict[str, tuple[int, int]]:
    """Each class's qualified name in the module at ``path`` and its lines, decorators included."""
    spans: dict[str, tuple[int, int]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                spans[prefix + child.name] = (first, child.end_lineno or child.lineno)
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                local = "" if isinstance(child, ast.ClassDef) else ".<locals>"
                visit(child, f"{prefix}{child.name}{local}.")

    visit(ast.parse("".join(linecache.getlines(path))), "")
    return spans


@functools.cache
def _spawning_helpers(module: Any) -> re.Pattern[str] | None:
    """The names of ``module``'s own functions and classes that start a process, as a pattern."""
    name = getattr(module, "__name__", "")
    helpers = [
        helper
        for helper, value in vars(module).items()
        if (inspect.isfunction(value) or inspect.isclass(value))
        and value.__module__ == name
        and not helper.startswith("test_")
        and _SPAWNS.search(_source(value))
    ]
    return re.compile(rf"\b(?:{'|'.join(helpers)})\(") if helpers else None


@functools.cache
def _starts_processes(function: Any) -> bool:
    """Whether ``function`` (a test or a fixture) starts a process, itself or through a
    function or class of its own module (once per function: a fixture serves many tests)."""
    source = _source(function)
    helpers = _spawning_helpers(inspect.getmodule(function))
    return bool(_SPAWNS.search(source) or (helpers and helpers.search(source)))


def _spawns(item: pytest.Item) -> bool:
    if "nbval" in type(item).__module__ or item.get_closest_marker("browser"):
        return True
    if item.get_closest_marker("spawns") or item.nodeid.startswith(_ONE_WORKER):
        return True
    fixtures = getattr(item, "_fixtureinfo", None)
    for definitions in fixtures.name2fixturedefs.values() if fixtures else ():
        if any(_starts_processes(definition.func) for definition in definitions):
            return True
    function = getattr(item, "function", None)
    return function is not None and _starts_processes(function)


# First: pytest-xdist reads the xdist_group marks in its own hook of the same name.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that start processes (``spawns``: notebooks, Dask, the browser, killed
    workers, scripts), and run them first: they are the long ones, so under pytest-xdist the
    short tests fill the workers in the end instead of one long test ending the run alone.
    The README's command runs both lanes; ``-m "not spawns"`` is the quick one."""
    lane = [item for item in items if _spawns(item)]
    for item in lane:
        item.add_marker(pytest.mark.spawns)
        # A notebook's cells share one kernel, in order: the whole file on one worker.
        if item.nodeid.startswith(_ONE_WORKER) or "nbval" in type(item).__module__:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    chosen = set(map(id, lane))
    items[:] = lane + [item for item in items if id(item) not in chosen]


@pytest.fixture
def emulator_factory() -> Iterator[EmulatorFactory]:
    """Start emulators: ``factory(settings=None, *, chain=None, **setting_or_fault_changes)``."""
    running: list[RunningEmulator] = []

    def factory(
        settings: EmulatorSettings | None = None, *, chain: Chain | None = None, **changes: Any
    ) -> RunningEmulator:
        emulator = start_emulator(make_settings(settings, **changes), chain=chain)
        running.append(emulator)
        return emulator

    yield factory
    for emulator in running:
        emulator.stop()


@pytest.fixture
def emulator(emulator_factory: EmulatorFactory) -> RunningEmulator:
    """Both services with default settings and fast jobs; stopped after the test."""
    return emulator_factory()


KillWhen = Callable[..., None]


@pytest.fixture
def kill_when() -> KillWhen:
    """``kill_when(code, args, ready, what, timeout=60)``: run ``python -c code *args`` (this
    checkout's x402lab) and SIGKILL it as soon as ``ready()`` is true; fails with the end of
    its stderr if it ends first, or naming ``what`` if ``ready()`` is not true in time."""

    def run(
        code: str, args: list[str], ready: Callable[[], bool], what: str, timeout: float = 60
    ) -> None:
        process = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert process.stderr is not None
        try:
            deadline = time.monotonic() + timeout
            while not ready():
                assert process.poll() is None, process.stderr.read().decode()[-2000:]
                assert time.monotonic() < deadline, f"{what} did not happen in time"
                time.sleep(0.01)
            os.kill(process.pid, signal.SIGKILL)
        finally:
            process.wait(timeout=30)
            process.stderr.close()

    return run


#: A batch_chat run by ``killed_batch`` in a process of its own, to be killed.
_BATCH_WORKER = textwrap.dedent(
    """
    import json, sys
    import x402lab as xl
    gateway, ledger, key, model, concurrency, prompts = sys.argv[1:7]
    lab = xl.connect(gateway, gateway, wallet=xl.Wallet.from_key(key), ledger=ledger,
                     budget=xl.Budget(usd=100))
    lab.batch_chat(json.loads(prompts), model=model, max_tokens=8,
                   concurrency=int(concurrency), progress=None)
    lab.close()
    """
)


@pytest.fixture
def killed_batch(kill_when: KillWhen) -> Callable[..., dict[str, int]]:
    """``killed_batch(gateway, ledger, key, prompts, concurrency, ready, after_kill=None)``:
    ``batch_chat`` of ``prompts`` (model zai-org-glm-4.7-flash) in a worker SIGKILLed once
    ``ready()``, ``after_kill()`` (to read the ledger as the kill left it), then the same
    batch again here. Checks that the re-run answered every row and that at most
    ``concurrency`` rows (those on the wire at the kill) were paid without a stored answer;
    returns the re-run's status counts."""
    model = "zai-org-glm-4.7-flash"

    def run(
        gateway: str,
        ledger: str,
        key: str,
        prompts: list[str],
        concurrency: int,
        ready: Callable[[], bool],
        after_kill: Callable[[], object] | None = None,
    ) -> dict[str, int]:
        import x402lab as xl

        args = [gateway, ledger, key, model, str(concurrency), json.dumps(prompts)]
        kill_when(_BATCH_WORKER, args, ready, "the batch's settlements")
        if after_kill is not None:
            after_kill()
        lab = xl.connect(
            gateway, gateway, wallet=xl.Wallet.from_key(key), ledger=ledger,
            budget=xl.Budget(usd=100),
        )  # fmt: skip
        try:
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always", xl.IncompleteBatchWarning)
                frame = lab.batch_chat(
                    prompts, model=model, max_tokens=8, concurrency=concurrency, progress=None
                )
        finally:
            lab.close()
        counts: dict[str, int] = frame["status"].value_counts().to_dict()
        assert set(counts) <= {"cached", "ok", "paid_not_stored", "unknown"}, counts
        # Paid (or maybe paid: its outcome was on the wire) without a stored answer: only the
        # requests in flight at the kill.
        lost = counts.get("paid_not_stored", 0) + counts.get("unknown", 0)
        assert lost <= concurrency, counts
        # A re-run with such rows says so, naming each of their statuses with its count.
        said = [str(w.message) for w in warned if w.category is xl.IncompleteBatchWarning]
        assert len(said) == (1 if lost else 0), said
        for status in ("paid_not_stored", "unknown"):
            if counts.get(status):
                assert f"{counts[status]} {status}" in said[0], said
        return counts

    return run

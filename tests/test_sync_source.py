"""The typed sync source (``x402lab/sync_lab.py``) is current, complete, and known to mypy.

``tools/gen_sync.py`` writes the sync ``Lab`` (and the types of ``Reports``, ``Job`` and
``ChatStream``) from the async classes. These tests fail when the committed file is stale,
when an async method or property lacks a sync twin with the same parameters (names, kinds,
defaults), return type (the sync twin's where there is one) and docstring, and when mypy
cannot see a method of ``connect()``'s result. The comparison is read off the generated
source with ``ast``, independently of the generator, and is shown to catch a missing method.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import inspect
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import x402lab as xl
from x402lab.gateway.chat_stream import AsyncChatStream
from x402lab.gateway.results import ChatResult
from x402lab.lab import AsyncLab
from x402lab.media import AsyncJob
from x402lab.reports import AsyncReports

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "x402lab" / "sync_lab.py"
GENERATOR = ROOT / "tools" / "gen_sync.py"
REGENERATE = "run `python tools/gen_sync.py` and commit x402lab/sync_lab.py"

# Each async class and the name of its sync twin.
PAIRS: tuple[tuple[type, str], ...] = (
    (AsyncLab, "Lab"),
    (AsyncReports, "Reports"),
    (AsyncJob, "Job"),
    (AsyncChatStream, "ChatStream"),
)
# What a sync twin offers beyond its async class: the object behind it; ``reports`` and
# ``emulator`` are attributes of AsyncLab, properties of Lab.
EXTRA = {"Lab": {"async_", "emulator", "reports"}}
# How a return annotation reads on the sync side.
SYNC_NAMES = {cls.__name__: name for cls, name in PAIRS} | {"AsyncIterator": "Iterator"}

EMPTY = "<no default>"


@dataclass(frozen=True)
class Entry:
    kind: str  # "method" or "property"
    params: tuple[tuple[str, str, Any], ...]  # (name, kind, default), without self
    returns: str
    settable: bool
    doc: str


def _normal(annotation: Any) -> str:
    if annotation is inspect.Signature.empty or annotation is None:
        return ""
    return ast.unparse(ast.parse(str(annotation), mode="eval"))


def surface_of_class(cls: type) -> dict[str, Entry]:
    """The public methods and properties of a class, read at run time."""
    found: dict[str, Entry] = {}
    for name, value in inspect.getmembers(cls):
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            returns = inspect.signature(value.fget).return_annotation if value.fget else ""
            found[name] = Entry(
                "property",
                (),
                _normal(returns),
                value.fset is not None,
                inspect.getdoc(value) or "",
            )
        elif inspect.isfunction(value):
            signature = inspect.signature(value)
            params = tuple(
                (p.name, p.kind.name, EMPTY if p.default is p.empty else p.default)
                for p in list(signature.parameters.values())[1:]
            )
            found[name] = Entry(
                "method",
                params,
                _normal(signature.return_annotation),
                False,
                inspect.getdoc(value) or "",
            )
    return found


def _params(arguments: ast.arguments) -> tuple[tuple[str, str, Any], ...]:
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults: list[Any] = [EMPTY] * (len(positional) - len(arguments.defaults))
    defaults += [ast.literal_eval(d) for d in arguments.defaults]
    out = [
        (a.arg, "POSITIONAL_ONLY" if a in arguments.posonlyargs else "POSITIONAL_OR_KEYWORD", d)
        for a, d in zip(positional, defaults, strict=True)
    ]
    if arguments.vararg:
        out.append((arguments.vararg.arg, "VAR_POSITIONAL", EMPTY))
    for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        out.append((a.arg, "KEYWORD_ONLY", EMPTY if d is None else ast.literal_eval(d)))
    if arguments.kwarg:
        out.append((arguments.kwarg.arg, "VAR_KEYWORD", EMPTY))
    return tuple(out[1:])  # without self


def surface_of_source(source: str, class_name: str) -> dict[str, Entry]:
    """The public methods and properties of a class as written in ``source``."""
    classes = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ClassDef) and node.name == class_name
    ]
    assert len(classes) == 1, f"{class_name} is defined {len(classes)} times in the sync source"
    found: dict[str, Entry] = {}
    for node in classes[0].body:
        if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
            continue
        decorators = [ast.unparse(d) for d in node.decorator_list]
        if f"{node.name}.setter" in decorators:
            found[node.name] = Entry(**{**found[node.name].__dict__, "settable": True})
            continue
        kind = "property" if "property" in decorators else "method"
        found[node.name] = Entry(
            kind,
            _params(node.args) if kind == "method" else (),
            _normal(node.returns and ast.unparse(node.returns)),
            False,
            ast.get_docstring(node) or "",
        )
    return found


def sync_annotation(annotation: str) -> str:
    """How an async return annotation reads on the sync side (``AsyncJob`` -> ``Job``)."""
    renamed = re.sub(r"\b\w+\b", lambda m: SYNC_NAMES.get(m.group(), m.group()), annotation)
    return _normal(renamed)


def compare(async_side: dict[str, Entry], sync_side: dict[str, Entry], extra=()) -> list[str]:
    """What the sync side lacks or has differently; [] when they match."""
    problems = []
    for name, want in async_side.items():
        got = sync_side.get(name)
        if got is None:
            problems.append(f"{name}: no sync twin")
            continue
        if got.kind != want.kind:
            problems.append(f"{name}: a {want.kind} on the async side, a {got.kind} here")
        if got.params != want.params:
            problems.append(f"{name}: parameters {got.params} != async {want.params}")
        if got.returns != sync_annotation(want.returns):
            problems.append(f"{name}: returns {got.returns!r}, expected {want.returns!r} synced")
        if got.settable != want.settable:
            problems.append(f"{name}: settable {got.settable} != async {want.settable}")
        if got.doc != want.doc:
            problems.append(f"{name}: its docstring differs from the async one")
    for name in sorted(set(sync_side) - set(async_side) - set(extra)):
        problems.append(f"{name}: not in the async class")
    return problems


def _generator() -> Any:
    # tools/ is no package: load the script by path (registered by name, as dataclasses need).
    if "gen_sync" not in sys.modules:
        spec = importlib.util.spec_from_file_location("gen_sync", GENERATOR)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["gen_sync"] = module
        spec.loader.exec_module(module)
    return sys.modules["gen_sync"]


def test_the_committed_sync_source_is_what_the_generator_writes_now():
    fresh = _generator().render()
    committed = SOURCE.read_text(encoding="utf-8")
    if fresh != committed:
        diff = "".join(
            list(
                difflib.unified_diff(
                    committed.splitlines(keepends=True),
                    fresh.splitlines(keepends=True),
                    "x402lab/sync_lab.py (committed)",
                    "x402lab/sync_lab.py (generated now)",
                )
            )[:60]
        )
        pytest.fail(f"x402lab/sync_lab.py is stale: {REGENERATE}\n{diff}")


def test_the_generated_source_is_as_ruff_formats_it():
    # Otherwise `ruff format .` would make the committed file stale.
    ruff = shutil.which("ruff")
    assert ruff is not None, "ruff is a dev dependency: pip install -e '.[dev]'"
    done = subprocess.run(
        [ruff, "format", "--check", "--diff", str(SOURCE)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("async_cls", "name"), PAIRS, ids=[name for _, name in PAIRS])
def test_every_public_async_member_has_a_typed_sync_twin(async_cls, name):
    sync_side = surface_of_source(SOURCE.read_text(encoding="utf-8"), name)
    problems = compare(surface_of_class(async_cls), sync_side, EXTRA.get(name, {"async_"}))
    assert problems == [], f"{name} differs from {async_cls.__name__} ({REGENERATE}): {problems}"


def test_the_runtime_lab_matches_asynclab_and_never_returns_a_coroutine():
    problems = compare(surface_of_class(AsyncLab), surface_of_class(xl.Lab), EXTRA["Lab"])
    assert problems == []
    for name, value in inspect.getmembers(xl.Lab, inspect.isfunction):
        assert not inspect.iscoroutinefunction(value), name


def test_the_comparison_catches_a_missing_twin_and_a_drifted_signature():
    # A guard against a check that cannot fail: an async method the sync Lab lacks...
    class Extended(AsyncLab):
        async def brand_new(self, rows: int) -> int:
            """Free: a method added to the async side only."""
            return rows

    # (Measured against what the real pair reports, so only the comparison is tested here.)
    baseline = set(compare(surface_of_class(AsyncLab), surface_of_class(xl.Lab), EXTRA["Lab"]))
    problems = compare(surface_of_class(Extended), surface_of_class(xl.Lab), EXTRA["Lab"])
    assert set(problems) - baseline == {"brand_new: no sync twin"}

    # ...a sync method whose default drifted, and one the async side does not have.
    class Drifted(xl.Lab):
        def chat(self, messages: Any, *, model: str, system: str | None = "terse") -> ChatResult:
            raise NotImplementedError

        def leftover(self) -> None:
            """Free: gone from the async side."""

    problems = compare(surface_of_class(AsyncLab), surface_of_class(Drifted), EXTRA["Lab"])
    new = sorted(set(problems) - baseline)
    assert [p.split(":")[0] for p in new] == ["chat", "chat", "leftover"]
    assert "docstring" in new[0] and "parameters" in new[1]


def test_the_sync_source_imports_the_async_lab_only_for_type_checking():
    tree = ast.parse(SOURCE.read_text(encoding="utf-8"))
    runtime = []
    for node in tree.body:
        blocks = [node]
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            blocks = list(node.orelse)
        for block in blocks:
            for inner in ast.walk(block):
                if isinstance(inner, ast.ImportFrom):
                    runtime.append(inner.module)
    assert "x402lab.lab" not in runtime
    assert "x402lab._loop" in runtime  # the reader sees runtime imports at all


SNIPPET = """\
import x402lab as xl

lab = xl.connect()
reveal_type(lab.chat)
cost = lab.chat("hi", model="m").cost
job = lab.music("calm piano", model="m")
reveal_type(job.wait())
reveal_type(lab.reports.buy("handle"))
lab.nonexistent()
lab.chat("hi")
"""


def test_mypy_knows_the_methods_of_the_sync_lab(monkeypatch):
    import mypy.api  # a dev dependency: missing, this test fails rather than skips

    monkeypatch.chdir(ROOT)  # the checkout's x402lab and its mypy settings
    stdout, stderr, _ = mypy.api.run(
        ["-c", SNIPPET, "--config-file", str(ROOT / "pyproject.toml"), "--no-error-summary"]
    )
    mine = [line for line in stdout.splitlines() if line.startswith("<string>:")]
    by_line: dict[int, list[str]] = {}
    for line in mine:
        by_line.setdefault(int(line.split(":")[1]), []).append(line)
    report = "\n".join(mine) + stderr

    chat = " ".join(by_line.get(4, []))
    assert "*, model: str," in chat and chat.endswith('ChatResult"'), report
    assert not any("error" in line for n in (5, 6) for line in by_line.get(n, [])), report
    assert "Completed" in " ".join(by_line.get(7, [])), report
    assert "ReportSet" in " ".join(by_line.get(8, [])), report
    assert any('"Lab" has no attribute "nonexistent"' in line for line in by_line.get(9, [])), (
        report
    )
    assert any('Missing named argument "model"' in line for line in by_line.get(10, [])), report

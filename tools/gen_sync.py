"""Write ``x402lab/sync_lab.py``: the typed sync ``Lab``, generated from ``AsyncLab``.

    python tools/gen_sync.py           # rewrite x402lab/sync_lab.py from the async classes
    python tools/gen_sync.py --check   # exit 1 and print a diff when the file is stale

One async core, one thin sync facade (STYLE.md habit 4), as source an editor and mypy can
read. For every public method and property of ``AsyncLab`` the generated ``Lab`` has a method
with the same parameters, annotations (copied as written), defaults and docstring; its body
runs the coroutine on the helper loop thread (``x402lab._loop.run``) and wraps a result that
has a sync twin (``AsyncJob`` -> ``Job``). The names the annotations use are imported under
``TYPE_CHECKING`` from the module that defines them, so the generated module imports
``x402lab.lab`` for type checking only (no import cycle).

``Reports``, ``Job`` and ``ChatStream`` are still built at run time in their own modules
(``x402lab.sync.sync_twin``); the generated module declares their types for the type checker
(same rules, bodies left out) and imports the runtime classes otherwise.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import difflib
import importlib
import importlib.util
import inspect
import sys
import textwrap
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGET = ROOT / "x402lab" / "sync_lab.py"
COMMAND = "python tools/gen_sync.py"
LINE_LENGTH = 100
PACKAGE = "x402lab"
EMULATOR = "x402lab.emulator."

LAB_DOC = """The x402lab client, made by ``x402lab.connect()``; every method runs to completion.

Methods whose summary starts "Spends money" pay through the lab's budget and ledger; the rest
are free. Use it as a context manager, or call ``close()``. ``lab.async_`` is the ``AsyncLab``
behind it (the same methods as coroutines).
"""

Groups = tuple[tuple[str, tuple[str, ...]], ...]

# The table of contents of ``help(Lab)``: every public name of the sync ``Lab`` in one group
# (the generator refuses a name in none, so a new method has to be given its place here).
LAB_GROUPS: Groups = (
    (
        "Catalog and prices (free): what can be called, and at what price",
        (
            "models",
            "prices",
            "route_prices",
            "traits",
            "characters",
            "character",
            "image_styles",
            "rpc_networks",
            "discovery",
            "catalog_table",
        ),
    ),
    (
        "Chat, images, audio, tools: one paid call each (quote() prices any of them for free)",
        (
            "chat",
            "chat_stream",
            "responses",
            "embed",
            "generate_image",
            "edit_image",
            "multi_edit_image",
            "upscale_image",
            "remove_background",
            "speech",
            "transcribe",
            "clone_voice",
            "transcribe_video",
            "search",
            "scrape",
            "parse_document",
            "rpc",
            "quote",
            "call",
        ),
    ),
    (
        "Batches: many rows within the budget, priced first by estimate()",
        ("estimate", "batch_chat", "batch_embed", "compare"),
    ),
    (
        "Media jobs: queued music and video, paid once, then polled",
        ("quote_music", "quote_video", "music", "video", "jobs", "job", "media_dir"),
    ),
    (
        "Reports: lab.reports.shelf(), .menu(), .quote(), .buy(), .library()",
        ("reports",),
    ),
    (
        "Ledger, budget and costs: what was paid, what is committed, what it was for",
        ("spend", "cost_report", "reconcile", "budget", "ledger", "wallet", "payer"),
    ),
    (
        "Ecosystem: openai-python and httpx clients that pay through this lab",
        ("openai", "async_openai", "http_client", "async_http_client"),
    ),
    (
        "Lifecycle and settings",
        (
            "close",
            "aclose",
            "async_",
            "emulator",
            "gateway_url",
            "reports_url",
            "chain_rpc_url",
            "validate_models",
        ),
    ),
)

# Docstrings of the generated properties that expose the async lab's plain attributes.
ATTRIBUTE_DOCS = {
    "reports": "The report service: ``shelf()``, ``menu()``, ``quote()``, ``buy()``,"
    " ``library()``.",
    "emulator": "The embedded emulator of both services (None when connected to real ones).",
}
DUNDER_DOCS = {
    "__init__": "Wrap an ``AsyncLab``: make a ``Lab`` with ``x402lab.connect()`` instead.",
    "__dir__": "The public names, for tab completion (not the slots behind them).",
    "__repr__": "Where the lab is connected, its wallet address, budget and ledger.",
}


def contents(groups: Groups, names: Iterable[str], width: int) -> str:
    """A grouped table of contents for a class docstring: each group's title, then its names.

    Raises GenerationError for a public name in no group, or a group name that is not public.
    """
    public = set(names)
    grouped = [name for _, members in groups for name in members]
    missing = sorted(public - set(grouped))
    if missing:
        raise GenerationError(
            f"members in no group of the help() contents: {missing}; add them to LAB_GROUPS"
            " in tools/gen_sync.py"
        )
    unknown = sorted(set(grouped) - public)
    repeated = sorted({name for name in grouped if grouped.count(name) > 1})
    if unknown or repeated:
        raise GenerationError(f"LAB_GROUPS names {unknown or repeated}: not public or repeated")
    blocks = []
    for title, members in groups:
        lines = textwrap.wrap(
            "  ".join(members), width, initial_indent="    ", subsequent_indent="    "
        )
        blocks.append("\n".join([title, *lines]))
    return "\n\n".join(blocks)


class GenerationError(Exception):
    """The async classes use something this generator has no rule for."""


@dataclass(frozen=True)
class Twin:
    """A sync twin: ``generated`` ones are written here in full; the others are built at run
    time by ``x402lab.sync.sync_twin`` in the async class's module and only typed here."""

    module: str
    async_name: str
    name: str
    generated: bool
    doc: str | None = None
    groups: Groups | None = None  # a table of contents for its docstring (generated twins)

    @property
    def async_cls(self) -> type:
        cls: type = getattr(importlib.import_module(self.module), self.async_name)
        return cls


TWINS: tuple[Twin, ...] = (
    Twin("x402lab.lab", "AsyncLab", "Lab", generated=True, doc=LAB_DOC, groups=LAB_GROUPS),
    Twin("x402lab.reports.resource", "AsyncReports", "Reports", generated=False),
    Twin("x402lab.media.job", "AsyncJob", "Job", generated=False),
    Twin("x402lab.gateway.chat_stream", "AsyncChatStream", "ChatStream", generated=False),
)

# Async iterators become sync iterators of the same items.
_ITERATORS = dict.fromkeys(("AsyncIterator", "AsyncGenerator", "AsyncIterable"), "Iterator")


# -- where a name comes from ---------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Origin:
    """How to import a name: ``from module import name`` (or ``import module as name``)."""

    module: str
    name: str | None  # None: the name is the module itself
    bound: str  # the name the annotation uses

    def statement(self) -> str:
        """``import module [as bound]``, or the ``name [as bound]`` part of a from-import."""
        if self.name is None:
            alias = "" if self.bound == self.module else f" as {self.bound}"
            return f"import {self.module}{alias}"
        return self.name if self.name == self.bound else f"{self.name} as {self.bound}"


_TREES: dict[str, ast.Module] = {}


def _tree(module: str) -> ast.Module:
    if module not in _TREES:
        path = importlib.import_module(module).__file__
        if path is None:
            raise GenerationError(f"no source for {module}")
        _TREES[module] = ast.parse(Path(path).read_text(encoding="utf-8"), path)
    return _TREES[module]


def _top_level(body: Iterable[ast.stmt]) -> Iterable[ast.stmt]:
    """Module-level statements, including those inside ``if``/``try`` blocks."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body)


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    is_package = Path(importlib.import_module(module).__file__ or "").name == "__init__.py"
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def origin(module: str, name: str) -> Origin | None:
    """Where ``name`` as used in ``module`` is defined; None for builtins."""
    for node in _top_level(_tree(module).body):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name == name:
                return Origin(module, name, name)
        elif isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return Origin(module, name, name)
        elif isinstance(node, ast.AnnAssign):
            if isinstance(node.target, ast.Name) and node.target.id == name:
                return Origin(module, name, name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname == name:
                    return Origin(alias.name, None, name)
                if alias.asname is None and alias.name.split(".")[0] == name:
                    return Origin(name, None, name)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) != name:
                    continue
                source = _absolute(module, node)
                if _is_module(f"{source}.{alias.name}"):
                    return Origin(f"{source}.{alias.name}", None, name)
                if source == PACKAGE or source.startswith(PACKAGE + "."):
                    found = origin(source, alias.name)
                    if found is None:
                        raise GenerationError(f"{alias.name} not found in {source}")
                    return Origin(found.module, found.name, name)
                return Origin(source, alias.name, name)
    if hasattr(builtins, name):
        return None
    raise GenerationError(f"{name} (used in an annotation of {module}) is not defined there")


def _names(annotation: str) -> list[ast.Name]:
    """The names an annotation uses at its roots (``pd`` of ``pd.DataFrame``)."""
    try:
        tree = ast.parse(annotation, mode="eval")
    except SyntaxError as exc:
        raise GenerationError(f"cannot read the annotation {annotation!r}") from exc
    return [node for node in ast.walk(tree) if isinstance(node, ast.Name)]


@dataclass
class Imports:
    """The names the generated annotations use, by where they are defined."""

    found: dict[str, Origin] = field(default_factory=dict)
    overloads: bool = False  # the module then imports typing.overload at run time

    def add(self, annotation: str, module: str, local: Iterable[str] = ()) -> None:
        for node in _names(annotation):
            if node.id in local:
                continue
            self.add_name(node.id, module)

    def add_name(self, name: str, module: str) -> None:
        found = origin(module, name)
        if found is None:
            return
        if found.module.startswith(EMULATOR) and not module.startswith(EMULATOR):
            # The client reaches the emulator only through x402lab.lab (tests/test_layers.py):
            # take the name from the module whose annotation uses it.
            found = Origin(module, name, name)
        known = self.found.setdefault(name, found)
        if known != found:
            raise GenerationError(f"{name} means {known} in one annotation and {found} in another")

    def require(self, module: str, name: str) -> None:
        """A name the generated code itself uses (not read off an annotation)."""
        self.found.setdefault(name, Origin(module, name, name))

    def lines(self, indent: str) -> list[str]:
        """Import statements grouped as ruff's isort does (stdlib, third party, first party;
        plain imports before ``from`` imports)."""

        def section(module: str) -> int:
            top = module.split(".")[0]
            if top == PACKAGE:
                return 2
            return 0 if top in sys.stdlib_module_names else 1

        out: list[str] = []
        for number in range(3):
            chosen = [o for o in self.found.values() if section(o.module) == number]
            if not chosen:
                continue
            if out:
                out.append("")
            plain = sorted({o.statement() for o in chosen if o.name is None})
            out += [indent + line for line in plain]
            by_module: dict[str, set[str]] = {}
            for o in chosen:
                if o.name is not None:
                    by_module.setdefault(o.module, set()).add(o.statement())
            for module in sorted(by_module):
                out += _from_import(module, sorted(by_module[module], key=_member_order), indent)
        return out


def _member_order(name: str) -> tuple[int, str]:
    # ruff's isort order-by-type: CONSTANTS, then Classes, then functions and variables.
    bare = name.split(" as ")[0]
    if bare.isupper() and len(bare) > 1:
        kind = 0
    elif bare[:1].isupper():
        kind = 1
    else:
        kind = 2
    return (kind, bare.lower())


def _from_import(module: str, names: list[str], indent: str) -> list[str]:
    one = f"{indent}from {module} import {', '.join(names)}"
    if len(one) <= LINE_LENGTH:
        return [one]
    return (
        [f"{indent}from {module} import ("] + [f"{indent}    {n}," for n in names] + [f"{indent})"]
    )


# -- what an async class offers ------------------------------------------------------------


@dataclass
class Member:
    name: str
    kind: str  # "method", "property" or "attribute"
    module: str  # where its annotations were written
    func: Callable[..., Any] | None = None  # the method, or the property's getter
    mode: str = "sync"  # "async", "agen" or "sync"
    setter: Callable[..., Any] | None = None
    annotation: str = ""  # attributes

    @property
    def doc(self) -> str | None:
        return self.func.__doc__ if self.func is not None else None


def members(cls: type) -> list[Member]:
    """Public methods and properties of ``cls`` (its bases too), in the order written."""
    found: dict[str, Member] = {}
    for klass in cls.__mro__[:-1]:
        for name, value in vars(klass).items():
            if name.startswith("_") or name in found:
                continue
            if isinstance(value, property):
                if value.fget is None:
                    raise GenerationError(f"{cls.__name__}.{name} has no getter")
                getter = inspect.unwrap(value.fget)
                found[name] = Member(name, "property", getter.__module__, getter, setter=value.fset)
            elif inspect.isfunction(value):
                func = inspect.unwrap(value)
                if inspect.iscoroutinefunction(func):
                    mode = "async"
                elif inspect.isasyncgenfunction(func):
                    mode = "agen"
                else:
                    mode = "sync"
                found[name] = Member(name, "method", func.__module__, func, mode)
            else:
                raise GenerationError(
                    f"{cls.__name__}.{name} is a {type(value).__name__}: no sync twin rule for it"
                )
    return list(found.values())


def attributes(cls: type) -> list[Member]:
    """Public instance attributes: class-level annotations and ``self.x = ...`` in
    ``__init__``, with the annotation written or the one that can be read off the code."""
    found: dict[str, Member] = {}
    taken = {m.name for m in members(cls)}
    for klass in cls.__mro__[:-1]:
        for name, annotation in vars(klass).get("__annotations__", {}).items():
            if not name.startswith("_") and name not in taken and name not in found:
                found[name] = Member(name, "attribute", klass.__module__, annotation=annotation)
    for klass in cls.__mro__[:-1]:
        module = klass.__module__
        init = vars(klass).get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters
        source = textwrap.dedent(inspect.getsource(init))
        for node in ast.walk(ast.parse(source)):
            target, value, written = None, None, None
            if isinstance(node, ast.AnnAssign):
                target, value, written = node.target, node.value, ast.unparse(node.annotation)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            if not (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                continue
            name = target.attr
            if name.startswith("_") or name in taken or name in found:
                continue
            annotation = written or _read_type(value, params, module)
            found[name] = Member(name, "attribute", module, annotation=annotation)
    return list(found.values())


def _read_type(value: ast.expr | None, params: Any, module: str) -> str:
    if isinstance(value, ast.Name) and value.id in params:
        annotation = params[value.id].annotation
        if isinstance(annotation, str):
            return annotation
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        found = origin(module, value.func.id)
        if found is not None and found.name is not None:
            made = getattr(importlib.import_module(found.module), found.name, None)
            if isinstance(made, type):
                return value.func.id
    if isinstance(value, ast.Constant) and type(value.value) in (str, bool, int, float):
        return type(value.value).__name__
    return "Any"


# -- writing source ------------------------------------------------------------------------


def _twin_of(annotation: str, module: str) -> Twin | None:
    """The twin whose async class ``annotation`` names as a whole, if any."""
    nodes = _names(annotation)
    if len(nodes) != 1 or nodes[0].id != annotation.strip():
        return None
    found = origin(module, nodes[0].id)
    for twin in TWINS:
        if found is not None and (found.module, found.name) == (twin.module, twin.async_name):
            return twin
    return None


def _mentions_a_twin(annotation: str, module: str) -> bool:
    for node in _names(annotation):
        found = origin(module, node.id)
        if found is not None and any(
            (found.module, found.name) == (t.module, t.async_name) for t in TWINS
        ):
            return True
    return False


def _returns(member: Member) -> tuple[str, Twin | None]:
    """The sync return annotation of a method, and the twin that wraps its result."""
    assert member.func is not None
    written = inspect.signature(member.func).return_annotation
    where = f"{member.func.__module__}.{member.func.__qualname__}"
    if written is inspect.Signature.empty:
        raise GenerationError(f"{where} has no return annotation")
    if not isinstance(written, str):
        raise GenerationError(f"{where}: annotations must be strings (from __future__ import)")
    if member.mode == "agen":
        head = written.split("[", 1)[0].strip()
        if head not in _ITERATORS:
            raise GenerationError(f"{where}: an async generator annotated {written!r}")
        return _ITERATORS[head] + written[len(head) :], None
    twin = _twin_of(written, member.module)
    if twin is not None:
        return twin.name, twin
    if _mentions_a_twin(written, member.module):
        raise GenerationError(f"{where} returns {written!r}: no rule wraps that in sync twins")
    return written, None


def _default(value: Any, where: str) -> str:
    """A literal default as ruff formats it (double quotes)."""
    if isinstance(value, str):
        text = repr(value)
        if text.startswith("'") and '"' not in value:
            text = '"' + text[1:-1].replace("\\'", "'") + '"'
    elif value is None or isinstance(value, bool | int | float):
        text = repr(value)
    elif isinstance(value, tuple):
        items = [_default(item, where) for item in value]
        text = "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    else:
        raise GenerationError(f"{where}: the default {value!r} is not a literal")
    if ast.literal_eval(text) != value:
        raise GenerationError(f"{where}: the default {value!r} does not survive as {text}")
    return text


@dataclass
class Signature:
    params: list[str]  # as written, with ``*`` and ``/`` markers
    call: list[str]  # the arguments that pass them on
    annotations: list[tuple[str, str]]  # (annotation, module) to import


def signature(member: Member) -> Signature:
    assert member.func is not None
    where = f"{member.func.__module__}.{member.func.__qualname__}"
    parameters = list(inspect.signature(member.func).parameters.values())[1:]
    params: list[str] = []
    call: list[str] = []
    annotations: list[tuple[str, str]] = []
    kinds = inspect.Parameter
    starred = any(p.kind is kinds.VAR_POSITIONAL for p in parameters)
    for index, p in enumerate(parameters):
        if p.kind is kinds.KEYWORD_ONLY and not starred and "*" not in params:
            params.append("*")
        text = p.name
        if p.annotation is not inspect.Parameter.empty:
            if not isinstance(p.annotation, str):
                raise GenerationError(f"{where}: annotations must be strings")
            text += f": {p.annotation}"
            annotations.append((p.annotation, member.module))
        if p.default is not inspect.Parameter.empty:
            equals = " = " if p.annotation is not inspect.Parameter.empty else "="
            text += equals + _default(p.default, f"{where}({p.name})")
        if p.kind is kinds.VAR_POSITIONAL:
            text, passed = "*" + text, "*" + p.name
        elif p.kind is kinds.VAR_KEYWORD:
            text, passed = "**" + text, "**" + p.name
        elif p.kind is kinds.KEYWORD_ONLY:
            passed = f"{p.name}={p.name}"
        else:
            passed = p.name
        params.append(text)
        call.append(passed)
        is_last_positional_only = p.kind is kinds.POSITIONAL_ONLY and (
            index + 1 == len(parameters) or parameters[index + 1].kind is not kinds.POSITIONAL_ONLY
        )
        if is_last_positional_only:
            params.append("/")
    return Signature(params, call, annotations)


def _def(name: str, params: list[str], returns: str, indent: str) -> list[str]:
    one = f"{indent}def {name}({', '.join(['self', *params])}) -> {returns}:"
    if len(one) <= LINE_LENGTH:
        return [one]
    inner = indent + "    "
    return (
        [f"{indent}def {name}("]
        + [f"{inner}{p}," for p in ["self", *params]]
        + [f"{indent}) -> {returns}:"]
    )


def _docstring(doc: str | None, indent: str) -> list[str]:
    if not doc:
        return []
    text = inspect.cleandoc(doc)
    if '"""' in text or text.endswith('"'):
        raise GenerationError(f"a docstring this generator cannot quote: {text[:60]!r}")
    prefix = "r" if "\\" in text else ""
    lines = [line.rstrip() for line in text.splitlines()]
    if len(lines) == 1:
        return [f'{indent}{prefix}"""{lines[0]}"""']
    rest = [f"{indent}{line}" if line else "" for line in lines[1:]]
    return [f'{indent}{prefix}"""{lines[0]}', *rest, f'{indent}"""']


def _fit(doc: str | None, indent: str) -> str | None:
    """A class docstring with its over-long lines wrapped (method docstrings are copied as
    written, so ``help()`` on both sides reads the same)."""
    if not doc:
        return doc
    text = inspect.cleandoc(doc)
    # Room for the opening quotes, and the closing ones too on a one-line docstring.
    width = LINE_LENGTH - len(indent) - (6 if "\n" not in text else 3)
    return "\n\n".join(
        textwrap.fill(" ".join(p.split()), width, break_on_hyphens=False)
        if max(map(len, p.splitlines())) > width
        else p
        for p in text.split("\n\n")
    )


def _return(calls: list[str], args: list[str], indent: str) -> list[str]:
    """``return a(b(c(args)))``, on one line when it fits, else one argument a line."""
    opened = "(".join(calls) + "("
    one = f"{indent}return {opened}{', '.join(args)}{')' * len(calls)}"
    if len(one) <= LINE_LENGTH:
        return [one]
    lines = [f"{indent}return {calls[0]}("]
    for depth, call in enumerate(calls[1:], start=1):
        lines.append(f"{indent}{'    ' * depth}{call}(")
    lines += [f"{indent}{'    ' * len(calls)}{arg}," for arg in args]
    for depth in range(len(calls) - 1, -1, -1):
        lines.append(f"{indent}{'    ' * depth})")
    lines[-1] = f"{indent})"
    return lines


# -- the two kinds of class ----------------------------------------------------------------


def _overloads(member: Member, imports: Imports, indent: str) -> list[str]:
    """The ``@overload`` declarations of a method written with them (``typing.get_overloads``
    finds them through the wrappers, which keep the method's module and qualified name)."""
    assert member.func is not None
    lines: list[str] = []
    for variant in typing.get_overloads(member.func):
        item = Member(member.name, "method", variant.__module__, variant, member.mode)
        sig = signature(item)
        returns, twin = _returns(item)
        if twin is not None:
            raise GenerationError(f"{member.name}: no rule for an overload returning {returns}")
        for annotation, module in sig.annotations:
            imports.add(annotation, module)
        imports.add(returns, item.module)
        *head, last = _def(member.name, sig.params, returns, indent)
        lines += [f"{indent}@overload", *head, f"{last} ...", ""]
    imports.overloads = imports.overloads or bool(lines)
    return lines


def _method(member: Member, imports: Imports, indent: str, generated: bool) -> list[str]:
    sig = signature(member)
    returns, twin = _returns(member)
    for annotation, module in sig.annotations:
        imports.add(annotation, module)
    local = {t.name for t in TWINS}
    if member.mode == "agen":
        imports.require("collections.abc", "Iterator")
        local.add("Iterator")
    imports.add(returns, member.module, local=local)
    lines = _overloads(member, imports, indent) + _def(member.name, sig.params, returns, indent)
    doc = _docstring(member.doc, indent + "    ")
    lines += doc
    if not generated:
        return lines if doc else [*lines[:-1], lines[-1] + " ..."]
    if member.mode == "agen":
        raise GenerationError(f"{member.name}: a generated class has no rule for async generators")
    calls = [f"self._async.{member.name}"]
    if member.mode == "async":
        calls.insert(0, "run")
    if twin is not None:
        calls.insert(0, twin.name)
    return lines + _return(calls, sig.call, indent + "    ")


def _property(member: Member, imports: Imports, indent: str, generated: bool) -> list[str]:
    assert member.func is not None
    written = inspect.signature(member.func).return_annotation
    if not isinstance(written, str):
        raise GenerationError(f"{member.name}: the property needs a string return annotation")
    twin = _twin_of(written, member.module)
    returns = twin.name if twin else written
    if twin is None and _mentions_a_twin(written, member.module):
        raise GenerationError(f"property {member.name} returns {written!r}: no wrapping rule")
    imports.add(returns, member.module, local={t.name for t in TWINS})
    lines = [f"{indent}@property", f"{indent}def {member.name}(self) -> {returns}:"]
    doc = _docstring(member.doc, indent + "    ")
    lines += doc
    body = indent + "    "
    if generated:
        value = f"self._async.{member.name}"
        lines.append(f"{body}return {twin.name}({value})" if twin else f"{body}return {value}")
    elif not doc:
        lines[-1] += " ..."
    if member.setter is not None:
        value_param = list(inspect.signature(member.setter).parameters.values())[1]
        annotation = value_param.annotation
        if not isinstance(annotation, str):
            raise GenerationError(f"the setter of {member.name} needs a string annotation")
        imports.add(annotation, member.setter.__module__)
        lines += ["", f"{indent}@{member.name}.setter"]
        head = f"{indent}def {member.name}(self, value: {annotation}) -> None:"
        if generated:
            lines += [head, f"{body}self._async.{member.name} = value"]
        else:
            lines.append(head + " ...")
    return lines


def _with_blank_lines(blocks: list[list[str]]) -> list[str]:
    out: list[str] = []
    for block in blocks:
        if out:
            out.append("")
        out += block
    return out


def generated_class(twin: Twin, imports: Imports) -> list[str]:
    """A full sync class: each method runs its coroutine on the helper loop."""
    cls = twin.async_cls
    imports.add_name(twin.async_name, twin.module)
    # Plain attributes: one holding an async object with a twin is offered wrapped (made
    # once); a plain value (``emulator``) is read through; async resources (``catalog``,
    # ``media``...) are left out, since their methods are coroutines: ``lab.async_.media``.
    wrapped, plain = [], []
    for a in attributes(cls):
        found = _twin_of(a.annotation, a.module)
        if found is not None:
            wrapped.append((a, found))
        elif _holds_no_coroutines(a.annotation, a.module):
            plain.append(a)
    slots = ", ".join(f'"{name}"' for name in ["_async", *[f"_{a.name}" for a, _ in wrapped]])
    doc = _fit(twin.doc or cls.__doc__, "    ")
    if twin.groups is not None:
        names = ["async_", *(a.name for a, _ in wrapped), *(a.name for a in plain)]
        names += [m.name for m in members(cls)]
        toc = contents(twin.groups, names, LINE_LENGTH - len("    ") - 3)
        doc = f"{doc}\n\n{toc}" if doc else toc
    head = [f"class {twin.name}:", *_docstring(doc, "    ")]
    head += ["", f'    __slots__ = ({slots}, "__weakref__")']
    init = [
        f"    def __init__(self, inner: {twin.async_name}) -> None:",
        *_docstring(DUNDER_DOCS["__init__"], "        "),
        "        self._async = inner",
    ]
    init += [f"        self._{a.name} = {t.name}(inner.{a.name})" for a, t in wrapped]
    blocks = [head, init]
    blocks.append(
        [
            "    def __repr__(self) -> str:",
            *_docstring(DUNDER_DOCS["__repr__"], "        "),
            "        return repr(self._async)",
        ]
    )
    blocks.append(
        [
            "    def __dir__(self) -> list[str]:",
            *_docstring(DUNDER_DOCS["__dir__"], "        "),
            '        return [n for n in object.__dir__(self) if n.startswith("__") or n[0] != "_"]',
        ]
    )
    if hasattr(cls, "__aenter__"):
        blocks.append(
            [
                f"    def __enter__(self) -> {twin.name}:",
                "        return self",
            ]
        )
        blocks.append(
            [
                "    def __exit__(self, *exc: object) -> None:",
                "        self.close()",
            ]
        )
    blocks.append(
        [
            "    @property",
            f"    def async_(self) -> {twin.async_name}:",
            f'        """The ``{twin.async_name}`` behind this object (its methods are'
            ' coroutines)."""',
            "        return self._async",
        ]
    )
    for a, t in wrapped:
        blocks.append(
            [
                "    @property",
                f"    def {a.name}(self) -> {t.name}:",
                *_docstring(
                    ATTRIBUTE_DOCS.get(a.name, f"``{twin.async_name}.{a.name}`` as ``{t.name}``."),
                    "        ",
                ),
                f"        return self._{a.name}",
            ]
        )
    for a in plain:
        imports.add(a.annotation, a.module)
        blocks.append(
            [
                "    @property",
                f"    def {a.name}(self) -> {a.annotation}:",
                *_docstring(
                    ATTRIBUTE_DOCS.get(a.name, f"The ``{a.name}`` of the ``{twin.async_name}``."),
                    "        ",
                ),
                f"        return self._async.{a.name}",
            ]
        )
    for member in members(cls):
        render = _property if member.kind == "property" else _method
        blocks.append(render(member, imports, "    ", generated=True))
    return _with_blank_lines(blocks)


def _holds_no_coroutines(annotation: str, module: str) -> bool:
    """Whether every class ``annotation`` names is a plain one (no coroutine methods)."""
    for node in _names(annotation):
        if node.id == "Any":
            return False
        found = origin(module, node.id)
        if found is None or found.name is None:
            continue
        value = getattr(importlib.import_module(found.module), found.name, None)
        if isinstance(value, type) and any(
            inspect.iscoroutinefunction(f) or inspect.isasyncgenfunction(f)
            for klass in value.__mro__
            for f in vars(klass).values()
        ):
            return False
    return True


def declared_class(twin: Twin, imports: Imports) -> list[str]:
    """The types of a runtime twin, for the type checker only (bodies left out)."""
    cls = twin.async_cls
    runtime = getattr(importlib.import_module(twin.module), twin.name, None)
    sync_module = importlib.import_module("x402lab.sync")
    if runtime is None or sync_module.TWINS.get(cls) is not runtime:
        raise GenerationError(f"{twin.module}.{twin.name} is not the sync twin of {cls.__name__}")
    imports.add_name(twin.async_name, twin.module)
    indent = "        "
    head = [f"    class {twin.name}:", *_docstring(_fit(runtime.__doc__, indent), indent)]
    # The async object's plain attributes, which the runtime twin passes through.
    fields = []
    for a in attributes(cls):
        imports.add(a.annotation, a.module)
        if a.annotation == "Any":
            imports.require("typing", "Any")
        fields.append(f"{indent}{a.name}: {a.annotation}")
    blocks = [head, fields] if fields else [head]
    blocks.append([f"{indent}def __init__(self, inner: {twin.async_name}) -> None: ..."])
    if hasattr(cls, "__aiter__") and hasattr(cls, "__anext__"):
        item = inspect.signature(cls.__anext__).return_annotation
        imports.add(item, cls.__module__)
        imports.require("collections.abc", "Iterator")
        blocks.append([f"{indent}def __iter__(self) -> Iterator[{item}]: ..."])
    if hasattr(cls, "__aenter__"):
        blocks.append([f"{indent}def __enter__(self) -> {twin.name}: ..."])
        blocks.append([f"{indent}def __exit__(self, *exc: object) -> None: ..."])
    blocks.append(
        [
            f"{indent}@property",
            f"{indent}def async_(self) -> {twin.async_name}: ...",
        ]
    )
    for member in members(cls):
        render = _property if member.kind == "property" else _method
        blocks.append(render(member, imports, indent, generated=False))
    return _with_blank_lines(blocks)


HEADER = '''"""The typed sync ``Lab``, generated by ``{command}``: do not edit by hand.

Every public method and property of ``AsyncLab`` (x402lab/lab.py) appears here with its own
parameters, annotations and docstring; each runs its coroutine on the helper loop thread
(``x402lab._loop.run``) and wraps a result that has a sync twin. ``Reports``, ``Job`` and
``ChatStream`` are built at run time in their own modules (``x402lab.sync.sync_twin``); the
classes under ``TYPE_CHECKING`` declare their types for editors and mypy. After changing an
async class, run ``{command}`` (``--check`` in CI fails while this file is stale).
"""

from __future__ import annotations

from typing import {typing_names}

from x402lab._loop import run
'''


def render() -> str:
    """The source of x402lab/sync_lab.py as the async classes stand now."""
    imports = Imports()
    generated = [generated_class(t, imports) for t in TWINS if t.generated]
    declared = [declared_class(t, imports) for t in TWINS if not t.generated]
    runtime = sorted((t.module, t.name) for t in TWINS if not t.generated)
    typing_names = "TYPE_CHECKING, overload" if imports.overloads else "TYPE_CHECKING"
    lines = HEADER.format(command=COMMAND, typing_names=typing_names).splitlines()
    lines += ["", "if TYPE_CHECKING:", *imports.lines("    ")]
    for block in declared:
        lines += ["", *block]
    lines += ["else:"]
    lines += [f"    from {module} import {name}" for module, name in runtime]
    for block in generated:
        lines += ["", "", *block]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail with a diff when stale")
    args = parser.parse_args(argv)
    fresh = render()
    current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
    relative = TARGET.relative_to(ROOT)
    if args.check:
        if fresh == current:
            return 0
        diff = difflib.unified_diff(
            current.splitlines(keepends=True),
            fresh.splitlines(keepends=True),
            f"{relative} (committed)",
            f"{relative} (generated now)",
        )
        sys.stdout.writelines(diff)
        print(f"\n{relative} is stale: run `{COMMAND}` and commit the result.")
        return 1
    if fresh != current:
        TARGET.write_text(fresh, encoding="utf-8")
        print(f"wrote {relative}")
    else:
        print(f"{relative} is up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

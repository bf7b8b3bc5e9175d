"""The sync facade (``x402lab.lab.Lab`` and the twins in ``x402lab.sync``) mirrors the async
classes, is grouped by task in ``help()``, and is known to mypy with each async signature."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import x402lab as xl
from x402lab.gateway.chat_stream import AsyncChatStream, ChatStream
from x402lab.lab import AsyncLab
from x402lab.media import AsyncJob, Job
from x402lab.reports import AsyncReports, Reports

ROOT = Path(__file__).resolve().parents[1]


def public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def test_every_public_async_member_has_a_sync_twin_with_its_parameters_and_docstring():
    for async_cls, sync_cls in (
        (AsyncLab, xl.Lab),
        (AsyncReports, Reports),
        (AsyncJob, Job),
        (AsyncChatStream, ChatStream),
    ):
        for name in public(async_cls):
            # Job and ChatStream read their plain attributes through (queue_id, text...).
            if name not in public(sync_cls):
                assert sync_cls in (Job, ChatStream), f"{sync_cls.__name__}.{name} is missing"
                member = getattr(async_cls, name)
                assert not inspect.iscoroutinefunction(member), f"{sync_cls.__name__}.{name}"
                continue
            mine, theirs = getattr(sync_cls, name), getattr(async_cls, name)
            assert not inspect.iscoroutinefunction(mine), f"{sync_cls.__name__}.{name}"
            if callable(theirs) and not isinstance(theirs, type):
                assert inspect.getdoc(mine) == inspect.getdoc(theirs), name
                sync_params = list(inspect.signature(mine).parameters.values())
                async_params = list(inspect.signature(theirs).parameters.values())
                assert [(p.name, p.kind, p.default) for p in sync_params[1:]] == [
                    (p.name, p.kind, p.default) for p in async_params[1:]
                ], f"{sync_cls.__name__}.{name}"


def test_help_shows_the_sync_twin_a_wrapped_method_returns():
    assert inspect.signature(xl.Lab.music).return_annotation == "Job"
    assert inspect.signature(xl.Lab.job).return_annotation == "Job"
    assert inspect.signature(xl.Lab.chat_stream).return_annotation == "ChatStream"
    assert inspect.signature(xl.Lab.chat).return_annotation == "ChatResult"  # not wrapped


def test_help_groups_every_public_name_of_the_lab_by_task():
    doc = xl.Lab.__doc__ or ""
    groups = doc.split("\n\n")[2:]
    grouped = [word for group in groups for word in re.findall(r"^ {8}(.*)$", group, re.M)]
    names = [n for line in grouped for n in line.split()]
    assert len(names) == len(set(names)), "a name in two groups"
    assert set(names) == public(xl.Lab), set(names) ^ public(xl.Lab)


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
lab.spend(by_=("model",))
reveal_type(lab.chat_stream("hi", model="m"))
"""


# One xdist worker runs both mypy tests (the other is in tests/ecosystem/test_batch_types.py),
# one after the other: the second reads the first's .mypy_cache instead of checking x402lab,
# pandas and dask again beside it (cold, each run takes 50 s of CPU; on the first's cache, 8 s).
@pytest.mark.xdist_group("mypy")
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

    def on(n: int) -> str:
        return " ".join(by_line.get(n, []))

    assert "*, model: str," in on(4) and on(4).endswith('ChatResult"'), report
    assert "Coroutine" not in on(4) + on(7) + on(8), report  # sync results, not awaitables
    assert not any("error" in line for n in (5, 6) for line in by_line.get(n, [])), report
    assert "Completed" in on(7), report
    assert "ReportSet" in on(8), report
    assert '"Lab" has no attribute "nonexistent"' in on(9), report
    assert 'Missing named argument "model"' in on(10), report
    assert 'Unexpected keyword argument "by_"' in on(11), report
    assert on(12).endswith('chat_stream.ChatStream"'), report

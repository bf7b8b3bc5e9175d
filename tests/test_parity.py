"""One async core, one thin sync facade (docs/design.md, "Seams"): what the sync side does
when used.

The parameters and docstrings of the sync facade are compared with the async classes, and
mypy's view of them checked, in ``tests/test_sync_facade.py``; here the sync ``Lab`` runs
against the embedded emulator, and ``x402lab.__all__`` is checked to be sorted and complete.
"""

from __future__ import annotations

import asyncio
import inspect
import types

import pandas as pd

import x402lab
import x402lab as xl
from x402lab.emulator.settings import EmulatorSettings
from x402lab.gateway.chat_stream import ChatStream
from x402lab.media import AsyncJob, Job
from x402lab.reports import Reports

CHAT_MODEL = "zai-org-glm-4.7-flash"

GATEWAY_SURFACE = (
    "call",
    "character",
    "characters",
    "chat",
    "chat_stream",
    "clone_voice",
    "discovery",
    "edit_image",
    "embed",
    "generate_image",
    "image_styles",
    "models",
    "multi_edit_image",
    "parse_document",
    "prices",
    "quote",
    "remove_background",
    "responses",
    "route_prices",
    "rpc",
    "rpc_networks",
    "scrape",
    "search",
    "speech",
    "traits",
    "transcribe",
    "transcribe_video",
    "upscale_image",
)

PAID = {
    "call",
    "chat",
    "chat_stream",
    "clone_voice",
    "edit_image",
    "embed",
    "generate_image",
    "multi_edit_image",
    "parse_document",
    "remove_background",
    "responses",
    "rpc",
    "scrape",
    "search",
    "speech",
    "transcribe",
    "transcribe_video",
    "upscale_image",
}


def test_lab_has_the_gateway_surface_of_the_design():
    for name in GATEWAY_SURFACE:
        assert callable(getattr(x402lab.Lab, name, None)), name
        assert callable(getattr(x402lab.AsyncLab, name, None)), name
        assert not inspect.iscoroutinefunction(getattr(x402lab.Lab, name)), name


def test_anything_that_spends_money_says_so_first():
    for cls in (x402lab.AsyncLab, x402lab.Lab):
        for name in PAID:
            doc = inspect.getdoc(getattr(cls, name)) or ""
            assert doc.startswith("Spends money"), f"{cls.__name__}.{name}"
        for name in set(GATEWAY_SURFACE) - PAID:
            doc = inspect.getdoc(getattr(cls, name)) or ""
            assert "Spends money" not in doc.splitlines()[0], f"{cls.__name__}.{name}"


def _unreachable(twin: object) -> list[str]:
    """The names ``dir(twin)`` offers that raise AttributeError."""
    missing = []
    for name in dir(twin):
        try:
            getattr(twin, name)
        except AttributeError:
            missing.append(name)
    return missing


def test_the_sync_lab_runs_the_async_core_and_wraps_its_objects(tmp_path):
    with xl.connect(
        ledger=tmp_path / "ledger.sqlite", emulator_settings=EmulatorSettings(job_seconds=0.2)
    ) as lab:
        assert isinstance(lab.async_, xl.AsyncLab)
        assert lab.wallet.address in repr(lab)
        assert "chat" in dir(lab) and "_async" not in dir(lab)
        # Tab completion offers only what works (the async lab's resources are not reachable).
        assert _unreachable(lab) == [] and "session" not in dir(lab)

        models = lab.models()
        assert isinstance(models, pd.DataFrame) and len(models) > 0
        result = lab.chat("hi", model=CHAT_MODEL, max_tokens=8)
        assert result.cost is not None and result.cost.status == "settled"

        stream = lab.chat_stream("hi", model=CHAT_MODEL, max_tokens=8)
        assert isinstance(stream, ChatStream)
        assert "".join(stream) == stream.text != ""

        job = lab.music("calm piano", model="ace-step-15", duration_seconds=60)
        assert isinstance(job, Job) and isinstance(job.async_, AsyncJob)
        assert job.wait(timeout_s=30).name == "completed"
        assert isinstance(lab.job(job.queue_id), Job)
        assert "queue_id" in dir(job) and _unreachable(job) == []

        assert isinstance(lab.reports, Reports) and lab.reports is lab.reports
        assert isinstance(lab.reports.shelf(), pd.DataFrame)
        assert _unreachable(lab.reports) == [] and "buy" in dir(lab.reports)

        lab.validate_models = False
        assert lab.async_.validate_models is False

        # Inside a running event loop (a Jupyter cell): the helper loop thread does the work.
        async def in_a_notebook_cell() -> int:
            return len(lab.route_prices())

        assert asyncio.run(in_a_notebook_cell()) > 0
    assert not lab.async_.session.is_open and lab.async_.emulator is None


def test_all_is_sorted_and_complete():
    assert x402lab.__all__ == sorted(x402lab.__all__)
    public = {
        name
        for name in dir(x402lab)
        if not name.startswith("_") and not isinstance(getattr(x402lab, name), types.ModuleType)
    }
    assert public == set(x402lab.__all__)
    for name in x402lab.__all__:
        assert getattr(x402lab, name) is not None


def _x402lab_classes() -> dict[str, type]:
    """Every class defined in an imported x402lab module (the emulator's aside), by name."""
    import sys

    found: dict[str, type] = {}
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("x402lab.") or module_name.startswith("x402lab.emulator"):
            continue
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module_name:
                found.setdefault(value.__name__, value)
    return found


def test_every_type_a_lab_method_returns_is_importable_from_x402lab_types():
    import re

    import x402lab.types

    assert x402lab.types.__all__ == sorted(x402lab.types.__all__)
    exported = {getattr(x402lab.types, name) for name in x402lab.types.__all__}
    ours = _x402lab_classes()
    returned: dict[str, set[type]] = {}
    for owner in (xl.AsyncLab, xl.Lab, x402lab.reports.AsyncReports, Reports):
        for name, member in inspect.getmembers(owner, inspect.isfunction):
            if name.startswith("_"):
                continue
            annotation = inspect.signature(member).return_annotation
            if not isinstance(annotation, str):
                annotation = inspect.formatannotation(annotation)
            words = re.findall(r"[A-Za-z_]\w*", annotation)
            if classes := {ours[word] for word in words if word in ours}:
                returned[f"{owner.__name__}.{name}"] = classes
    assert len(returned) > 20  # the check sees the methods' annotations
    missing = {
        method: sorted(c.__name__ for c in classes - exported)
        for method, classes in returned.items()
        if classes - exported
    }
    assert missing == {}

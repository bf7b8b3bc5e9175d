"""One async core, one generated sync facade: every public async method of every registered
twin has its sync twin (STYLE.md habit 4), and ``x402lab.__all__`` is sorted and complete."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

import pytest

import x402lab
from x402lab.sync import TWINS

# Import every client module so that every sync_twin(...) registration has run. The
# emulator and the command line register none, and __main__ would run the CLI.
for _module in pkgutil.walk_packages(x402lab.__path__, "x402lab."):
    if not _module.name.startswith(("x402lab.emulator", "x402lab.cli", "x402lab.__main__")):
        importlib.import_module(_module.name)

PAIRS = sorted(TWINS.items(), key=lambda pair: pair[0].__qualname__)

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


def _public_members(cls: type) -> dict[str, object]:
    return {
        name: value
        for name, value in inspect.getmembers(cls)
        if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property))
    }


def test_twins_are_registered():
    names = {twin.__name__ for _, twin in PAIRS}
    assert {"Lab", "ChatStream"} <= names


@pytest.mark.parametrize(("async_cls", "twin"), PAIRS, ids=[t.__name__ for _, t in PAIRS])
def test_every_public_async_method_has_a_sync_twin(async_cls, twin):
    missing, still_async = [], []
    for name, member in _public_members(async_cls).items():
        counterpart = getattr(twin, name, None)
        if counterpart is None:
            missing.append(name)
            continue
        if isinstance(member, property):
            assert isinstance(counterpart, property), name
            continue
        if inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member):
            if inspect.iscoroutinefunction(counterpart) or inspect.isasyncgenfunction(counterpart):
                still_async.append(name)
            # Same parameters and documentation as the async method.
            assert inspect.signature(counterpart) == inspect.signature(member), name
            assert counterpart.__doc__ == member.__doc__, name
    assert missing == [], f"{twin.__name__} lacks {missing}"
    assert still_async == [], f"{twin.__name__}.{still_async} are still coroutines"
    extra = set(_public_members(twin)) - set(_public_members(async_cls)) - {"async_"}
    assert extra == set(), f"{twin.__name__} has methods its async class lacks: {extra}"


def test_lab_has_the_gateway_surface_of_the_design():
    for name in GATEWAY_SURFACE:
        assert callable(getattr(x402lab.Lab, name, None)), name
        assert callable(getattr(x402lab.AsyncLab, name, None)), name
        assert not inspect.iscoroutinefunction(getattr(x402lab.Lab, name)), name


def test_anything_that_spends_money_says_so_first():
    paid = {
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
    for name in paid:
        doc = inspect.getdoc(getattr(x402lab.AsyncLab, name)) or ""
        assert doc.startswith("Spends money"), name
    for name in set(GATEWAY_SURFACE) - paid:
        doc = inspect.getdoc(getattr(x402lab.AsyncLab, name)) or ""
        assert "Spends money" not in doc.splitlines()[0], name


def test_all_is_sorted_and_complete():
    assert x402lab.__all__ == sorted(x402lab.__all__)
    public = {
        name
        for name, value in vars(x402lab).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(x402lab.__all__)
    for name in x402lab.__all__:
        assert getattr(x402lab, name) is not None

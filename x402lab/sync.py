"""Sync twins of the async classes: one async core, one thin generated facade.

``sync_twin(AsyncThing)`` builds a class whose methods run the coroutine methods of
``AsyncThing`` on the helper loop thread. Results whose class has a twin are wrapped too, so
``lab.music(...)`` returns a sync job handle. A parity test checks every twin.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from x402lab._loop import run, submit

TWINS: dict[type, type] = {}


def wrap(value: Any) -> Any:
    """Wrap an async object in its sync twin (lists and tuples element-wise)."""
    twin = TWINS.get(type(value))
    if twin is not None:
        return twin(value)
    for cls, twin in TWINS.items():
        if isinstance(value, cls):
            return twin(value)
    if isinstance(value, list):
        return [wrap(item) for item in value]
    return value


def _iterate(agen: Any) -> Iterator[Any]:
    """Drive an async iterator from sync code, one item per round trip to the loop."""
    iterator = agen.__aiter__()
    try:
        while True:
            try:
                yield wrap(run(iterator.__anext__()))
            except StopAsyncIteration:
                return
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:
            submit(close())


def _sync_method(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return wrap(run(getattr(self._async, name)(*args, **kwargs)))

    elif inspect.isasyncgenfunction(func):

        @functools.wraps(func)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return _iterate(getattr(self._async, name)(*args, **kwargs))

    else:

        @functools.wraps(func)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = getattr(self._async, name)(*args, **kwargs)
            if inspect.isawaitable(result):
                return wrap(run(_await(result)))
            return wrap(result)

    return method


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _sync_property(name: str, prop: property) -> property:
    setter = None
    if prop.fset is not None:

        def setter(self: Any, value: Any) -> None:
            setattr(self._async, name, value)

    return property(lambda self: wrap(getattr(self._async, name)), setter, doc=prop.__doc__)


def sync_twin(async_cls: type, name: str | None = None, doc: str | None = None) -> type:
    """Build and register the sync twin of ``async_cls``."""
    namespace: dict[str, Any] = {
        "__doc__": doc or async_cls.__doc__,
        "__slots__": ("_async", "__weakref__"),
        "__init__": lambda self, inner: object.__setattr__(self, "_async", inner),
        "__repr__": lambda self: repr(self._async),
        "__getattr__": lambda self, attr: wrap(getattr(self._async, attr)),
        "__dir__": lambda self: sorted(set(dir(type(self))) | set(dir(self._async))),
        "async_": property(lambda self: self._async, doc="The async object behind this one."),
    }
    for attr, value in inspect.getmembers(async_cls):
        if attr.startswith("_") and attr not in ("_repr_html_", "_ipython_display_"):
            continue
        if isinstance(value, property):
            namespace[attr] = _sync_property(attr, value)
        elif inspect.isfunction(value):
            namespace[attr] = _sync_method(attr, value)
    twin_name = name or async_cls.__name__.removeprefix("Async")
    twin = type(twin_name, (), namespace)
    twin.__module__ = async_cls.__module__
    TWINS[async_cls] = twin
    return twin

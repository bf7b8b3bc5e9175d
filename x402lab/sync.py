"""Runtime sync twins of the async objects a ``Lab`` hands out: ``Reports``, ``Job``,
``ChatStream``.

``sync_twin(AsyncThing, "Thing")`` builds a class whose methods run the coroutine methods of
``AsyncThing`` on the helper loop thread. The ``Lab`` itself is generated as typed source
(``x402lab.sync_lab``, written by ``python tools/gen_sync.py``), which also declares the types
of these twins for editors and mypy; ``tests/test_sync_source.py`` checks both against the
async classes.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from x402lab._loop import run, submit

TWINS: dict[type, type] = {}


def wrap(value: Any) -> Any:
    """``value`` in its sync twin when its class has one, else unchanged."""
    for cls, twin in TWINS.items():
        if isinstance(value, cls):
            return twin(value)
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
            return wrap(getattr(self._async, name)(*args, **kwargs))

    return method


def _sync_property(name: str, prop: property) -> property:
    setter = None
    if prop.fset is not None:

        def setter(self: Any, value: Any) -> None:
            setattr(self._async, name, value)

    return property(lambda self: wrap(getattr(self._async, name)), setter, doc=prop.__doc__)


def sync_twin(async_cls: type, name: str, doc: str | None = None) -> type:
    """Build and register the sync twin of ``async_cls``: its public methods and properties,
    with every other attribute read through from the async object."""
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
        if attr.startswith("_"):
            continue
        if isinstance(value, property):
            namespace[attr] = _sync_property(attr, value)
        elif inspect.isfunction(value):
            namespace[attr] = _sync_method(attr, value)
    twin = type(name, (), namespace)
    twin.__module__ = async_cls.__module__
    TWINS[async_cls] = twin
    return twin

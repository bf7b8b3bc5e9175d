"""The sync side of the facade: delegators that run an async method on the helper loop thread.

``blocking(AsyncThing.method)`` makes a sync method with the async one's parameters and
docstring whose result is the coroutine's (``wrap=`` puts it in its sync twin, as ``Job``).
``Twin`` is the base of the sync twins (``Lab``, ``Reports``, ``Job``, ``ChatStream``): it holds
the async object; ``ReadThrough`` also reads the attributes it does not declare from it.
Being plain ParamSpec functions, the delegators keep each signature visible to mypy and
editors; there is no generated code.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from x402lab._loop import in_helper_thread, run, submit

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
A = TypeVar("A")

Async = Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]


class Twin(Generic[A]):
    """A sync object over the async object ``async_``; settings are written through to it."""

    __slots__ = ("_async", "__weakref__")
    _async: A

    def __init__(self, inner: A) -> None:
        """Wrap an async object (a ``Lab`` comes from ``x402lab.connect()``)."""
        object.__setattr__(self, "_async", inner)

    @property
    def async_(self) -> A:
        """The async object behind this one (its methods are coroutines)."""
        return self._async

    def __repr__(self) -> str:
        """The async object's repr (for a lab: where, wallet address, budget and ledger)."""
        return repr(self._async)

    def _repr_html_(self) -> str | None:
        html = getattr(self._async, "_repr_html_", None)
        return html() if html is not None else None

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._async, name, value)  # settings (validate_models, a job's timeout) live there

    def __dir__(self) -> list[str]:
        """The public names, for tab completion: those this class declares (the async
        object's own resources are not reachable from here, so they are not offered)."""
        return sorted(n for n in object.__dir__(self) if n.startswith("__") or n[0] != "_")


class ReadThrough(Twin[A]):
    """A ``Twin`` whose undeclared attributes (a job's ``queue_id``...) are the async object's."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._async, name)

    def __dir__(self) -> list[str]:
        """The declared names and the async object's public ones (both resolve here)."""
        names = set(super().__dir__()) | {n for n in dir(self._async) if n[0] != "_"}
        return sorted(names)


@overload
def blocking(method: Async[P, R]) -> Callable[Concatenate[Any, P], R]: ...
@overload
def blocking(method: Async[P, R], wrap: Callable[[R], T]) -> Callable[Concatenate[Any, P], T]: ...
def blocking(method: Async[P, Any], wrap: Callable[[Any], Any] | None = None) -> Any:
    """A sync method running ``method`` of ``self.async_`` to completion (then ``wrap``)."""

    @functools.wraps(method)
    def sync(self: Twin[Any], /, *args: P.args, **kwargs: P.kwargs) -> Any:
        __tracebackhide__ = True  # the caller's line and the error, not this plumbing
        result = run(method(self._async, *args, **kwargs))
        return wrap(result) if wrap is not None else result

    return _returning(sync, method, wrap)


@overload
def direct(method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]: ...
@overload
def direct(
    method: Callable[Concatenate[Any, P], R], wrap: Callable[[R], T]
) -> Callable[Concatenate[Any, P], T]: ...
def direct(method: Callable[..., Any], wrap: Callable[[Any], Any] | None = None) -> Any:
    """A sync method calling a plain (not async) ``method`` of ``self.async_`` (then ``wrap``)."""

    @functools.wraps(method)
    def sync(self: Twin[Any], /, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        result = method(self._async, *args, **kwargs)
        return wrap(result) if wrap is not None else result

    return _returning(sync, method, wrap)


def _returning(sync: Any, method: Callable[..., Any], wrap: Callable[[Any], Any] | None) -> Any:
    """``sync`` shown by ``help()`` and ``inspect.signature`` returning what ``wrap`` makes
    (the sync twin, ``Job``), not the async object ``method`` returns."""
    if wrap is not None:
        shown = getattr(wrap, "__name__", None) or inspect.Signature.empty
        sync.__signature__ = inspect.signature(method).replace(return_annotation=shown)
    return sync


def iterating(
    method: Callable[Concatenate[Any, P], AsyncIterator[T]],
) -> Callable[Concatenate[Any, P], Iterator[T]]:
    """A sync method iterating the async iterator ``method`` of ``self.async_`` returns."""

    @functools.wraps(method)
    def sync(self: Twin[Any], /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        return iterate(method(self._async, *args, **kwargs))

    return sync


async def _next(items: AsyncIterator[T]) -> T:
    return await items.__anext__()


def iterate(items: AsyncIterator[T], *, done: Callable[[], bool] = lambda: False) -> Iterator[T]:
    """Drive an async iterator from sync code, one item per round trip to the helper loop."""
    try:
        while True:
            try:
                yield run(_next(items))
            except StopAsyncIteration:
                return
    finally:
        # Leaving a for loop early closes the iterator; from the loop thread itself (a garbage
        # collection there) it can only be scheduled.
        close = getattr(items, "aclose", None)
        if close is not None and not done():
            if in_helper_thread():
                submit(close())
            else:
                run(close())

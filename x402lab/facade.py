"""A member of the lab declared once, for both facades: ``AsyncLab`` and its sync twin ``Lab``.

``x402lab.lab.LabMembers`` lists every method and setting of the lab, each under its task
(a ``Group``): ``models = CATALOG.method("catalog", Catalog.models)``. Read on an ``AsyncLab``
a ``Member`` is a delegator to the method of the lab's resource (``forwarding``: a coroutine
for an async method); read on a ``Lab`` (a ``Twin``) it runs that to completion on the helper
loop thread (``x402lab.sync.blocking``), then wraps the result in its sync twin (``Job``). An
``Attribute`` reads a setting of the ``AsyncLab`` from either. Both facades, their ``help()``
contents (``Group.contents``) and ``dir()`` follow from that one list; the ``__get__``
overloads give mypy each side's signature.
"""

from __future__ import annotations

import functools
import operator
import textwrap
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from x402lab.keywords import keywords_of, misspelled_keywords, named_keywords, unknown_keywords
from x402lab.sync import Twin, blocking, direct

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
A = TypeVar("A")
S = TypeVar("S")


def forwarding(
    resource: str, method: Callable[Concatenate[Any, P], R]
) -> Callable[Concatenate[Any, P], R]:
    """A method forwarding to ``method`` of the lab's ``resource``, with that method's docs.

    A keyword ``method`` does not take is refused here, with a guess of the one meant
    (``ArgumentError``, a TypeError): Python's own error would name the resource's class and
    guess nothing. For a method that takes any keyword (request fields), one that nearly
    spells one of its own is refused the same way."""

    owner = operator.attrgetter(resource)
    keywords = keywords_of(method)
    named = named_keywords(method) | frozenset(getattr(method, "renamed", ()))

    @functools.wraps(method)
    def forward(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if keywords is not None and not keywords.issuperset(kwargs):
            raise unknown_keywords(method, kwargs)
        if keywords is None and (error := misspelled_keywords(method, kwargs, named)):
            raise error  # (a method taking request fields: rows_per_reqest= is no field)
        return method(owner(self), *args, **kwargs)

    return forward


def _core(lab: Any) -> Any:
    """The ``AsyncLab`` behind ``lab`` (itself, or a ``Lab``'s)."""
    return lab._async if isinstance(lab, Twin) else lab


class Member(Generic[A, S]):
    """A method of both facades: ``A`` on an ``AsyncLab``, ``S`` on a ``Lab``; read on the
    class, the plain function (for ``help()`` and ``inspect``)."""

    def __init__(
        self, group: Group, on_async: Callable[..., Any], on_sync: Callable[..., Any]
    ) -> None:
        self._group, self._async, self._sync = group, on_async, on_sync

    def __set_name__(self, owner: type, name: str) -> None:
        self._group.names.append(name)

    @overload
    def __get__(self, lab: None, owner: type) -> Any: ...
    @overload
    def __get__(self, lab: Twin[Any], owner: type) -> S: ...  # type: ignore[overload-overlap]
    @overload
    def __get__(self, lab: object, owner: type) -> A: ...
    def __get__(self, lab: Any, owner: type) -> Any:
        function = self._sync if issubclass(owner, Twin) else self._async
        return function if lab is None else function.__get__(lab, owner)


class Attribute(Generic[T]):
    """A setting of both facades, read (and written, given ``write``) on the ``AsyncLab``."""

    def __init__(
        self,
        group: Group,
        read: Callable[[Any], T],
        write: Callable[[Any, T], None] | None = None,
    ) -> None:
        self._group, self._read, self._write = group, read, write
        self.__doc__ = read.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._group.names.append(name)
        self._name = name

    @overload
    def __get__(self, lab: None, owner: type) -> Attribute[T]: ...
    @overload
    def __get__(self, lab: object, owner: type) -> T: ...
    def __get__(self, lab: Any, owner: type) -> Any:
        return self if lab is None else self._read(_core(lab))

    def __set__(self, lab: Any, value: T) -> None:
        if self._write is None:
            raise AttributeError(f"{self._name} cannot be set")
        self._write(_core(lab), value)


class Group:
    """One task of the lab's ``help()`` contents: its title and the names declared under it
    (``names`` given here are the ones declared on one facade only)."""

    def __init__(self, title: str, *names: str) -> None:
        self.title, self.names = title, list(names)

    @overload
    def method(
        self, resource: str, method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]
    ) -> Member[Callable[P, Coroutine[Any, Any, R]], Callable[P, R]]: ...
    @overload
    def method(
        self,
        resource: str,
        method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]],
        wrap: Callable[[R], T],
    ) -> Member[Callable[P, Coroutine[Any, Any, R]], Callable[P, T]]: ...
    def method(
        self, resource: str, method: Callable[..., Any], wrap: Callable[[Any], Any] | None = None
    ) -> Member[Any, Any]:
        """A coroutine method of ``resource``: awaited on an AsyncLab, run on a Lab."""
        forward = forwarding(resource, method)
        sync = blocking(forward) if wrap is None else blocking(forward, wrap)
        return Member(self, forward, sync)

    @overload
    def plain(
        self, resource: str, method: Callable[Concatenate[Any, P], R]
    ) -> Member[Callable[P, R], Callable[P, R]]: ...
    @overload
    def plain(
        self, resource: str, method: Callable[Concatenate[Any, P], R], wrap: Callable[[R], T]
    ) -> Member[Callable[P, R], Callable[P, T]]: ...
    def plain(
        self, resource: str, method: Callable[..., Any], wrap: Callable[[Any], Any] | None = None
    ) -> Member[Any, Any]:
        """A method of ``resource`` that is not a coroutine (a client, a stream), the same on
        both facades but for ``wrap``."""
        forward = forwarding(resource, method)
        sync = direct(forward) if wrap is None else direct(forward, wrap)
        return Member(self, forward, sync)

    def overloaded(self, resource: str, on_async: A, on_sync: S) -> Member[A, S]:
        """A coroutine method with overloads: mypy maps overloads only through a generic
        function, so the two views are given (``awaited(m)`` and ``ran(m)``, both ``m``)."""
        return self.method(resource, on_async)  # type: ignore[call-overload, no-any-return]

    def attribute(
        self, read: Callable[[Any], T], write: Callable[[Any, T], None] | None = None
    ) -> Attribute[T]:
        """A setting read from the ``AsyncLab`` (``read(async_lab)``), ``write`` to set it."""
        return Attribute(self, read, write)

    @staticmethod
    def contents(groups: Iterable[Group], cls: type) -> str:
        """``cls``'s docstring followed by its contents for ``help()``: each group's title,
        then the names of it ``cls`` has, wrapped at 100 columns (indented as a docstring)."""
        blocks = [(cls.__doc__ or "").rstrip()]
        for group in groups:
            names = [name for name in group.names if hasattr(cls, name)]
            if names:
                lines = textwrap.wrap("  ".join(names), 92, break_on_hyphens=False)
                blocks.append("\n".join([" " * 4 + group.title, *(" " * 8 + n for n in lines)]))
        return "\n\n".join(blocks) + "\n    "


def awaited(
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """``method`` itself, typed as an AsyncLab's view of it (overloads kept)."""
    return method  # type: ignore[return-value]


def ran(method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]) -> Callable[P, R]:
    """``method`` itself, typed as a Lab's view of it (overloads kept)."""
    return method  # type: ignore[return-value]

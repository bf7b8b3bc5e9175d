"""The keywords a method takes: unknown ones refused with a guess, renamed ones translated.

Python's own TypeError for an unknown keyword names the class the method is defined on (a
resource the user never typed) and guesses nothing; the Lab's delegators check keywords here
first and raise ``ArgumentError`` (a ConfigError and a TypeError) with a did-you-mean.
A keyword renamed in this version keeps working for one more under its old name
(``renamed``): the call warns with a FutureWarning naming the new one and runs as if the new
one were given; the signature ``help()`` shows has only the new names.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import sys
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from x402lab.errors import ArgumentError

F = TypeVar("F", bound=Callable[..., Any])

#: Frames in this folder are the library's; a warning points at the first frame outside it.
_PACKAGE = str(Path(__file__).resolve().parent)
#: The version the old names of ``renamed`` stop working in.
_GONE_IN = "0.5"


def renamed(**old_to_new: str) -> Callable[[F], F]:
    """A decorator: ``method`` also takes each old keyword for one version, warning
    (FutureWarning) with the new name; both names at once is an ArgumentError."""

    def decorate(method: F) -> F:
        name = method.__name__

        @functools.wraps(method)
        def translating(*args: Any, **kwargs: Any) -> Any:
            for old in [k for k in kwargs if k in old_to_new]:
                new = old_to_new[old]
                if new in kwargs:
                    raise ArgumentError(
                        f"{name}() got {old}= and {new}=: give only {new}= (its new name)"
                    )
                warnings.warn(
                    f"{name}(): {old}= is now {new}=; the old name stops working in x402lab"
                    f" {_GONE_IN}",
                    FutureWarning,
                    stacklevel=_library_frames() + 1,
                )
                kwargs[new] = kwargs.pop(old)
            return method(*args, **kwargs)

        translating.renamed = dict(old_to_new)  # type: ignore[attr-defined]
        return translating  # type: ignore[return-value]

    return decorate


def _library_frames() -> int:
    """How many frames, from the caller of this function outwards, are x402lab's own."""
    frame = sys._getframe(1)
    count = 0
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        count += 1
        frame = frame.f_back  # type: ignore[assignment]
    return count


def keywords_of(method: Callable[..., Any]) -> frozenset[str] | None:
    """The keywords ``method`` takes (the old names of ``renamed`` too), or None when it
    takes any (``**kwargs``)."""
    named = _named(method)
    return None if named is None else named | frozenset(getattr(method, "renamed", ()))


def _named(method: Callable[..., Any]) -> frozenset[str] | None:
    """The keywords of ``method``'s signature (without ``self``), None for ``**kwargs``."""
    parameters = inspect.signature(method).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return named_keywords(method)


def named_keywords(method: Callable[..., Any]) -> frozenset[str]:
    """The keywords ``method`` names (without ``self``), whether or not it takes any."""
    parameters = inspect.signature(method).parameters.values()
    named = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return frozenset(p.name for p in parameters if p.kind in named) - {"self"}


def misspelled_keywords(
    method: Callable[..., Any], given: Mapping[str, Any], named: frozenset[str]
) -> ArgumentError | None:
    """For ``method`` taking any keyword (request fields): the error for a keyword of
    ``given`` that is not one of its ``named`` ones but nearly is (``rows_per_reqest``),
    which would otherwise be sent as a field; None when there is none."""
    near = [k for k in given if k not in named and _near(k, named)]
    if not near:
        return None
    current = named - frozenset(getattr(method, "renamed", ()))
    return unknown_keywords(method, {k: given[k] for k in near}, current)


@functools.lru_cache(maxsize=1024)
def _near(key: str, named: frozenset[str]) -> bool:
    return bool(difflib.get_close_matches(key, sorted(named), n=1, cutoff=0.85))


def unknown_keywords(
    method: Callable[..., Any],
    given: Mapping[str, Any],
    named: frozenset[str] | None = None,
) -> ArgumentError:
    """The error for the keywords of ``given`` that ``method`` does not take (of its
    ``named`` ones, when it takes any), guessing among its current names."""
    current = sorted(named if named is not None else _named(method) or ())
    accepted = keywords_of(method) or frozenset(current)
    unknown = [k for k in given if k not in accepted]
    guesses = [
        f"{guess[0]!r} for {k!r}" if len(unknown) > 1 else repr(guess[0])
        for k in unknown
        if (guess := difflib.get_close_matches(k, current, n=1, cutoff=0.6))
    ]
    plural = "s" if len(unknown) > 1 else ""
    hint = f"; did you mean {', '.join(guesses)}?" if guesses else "."
    return ArgumentError(
        f"{method.__name__}() got an unexpected keyword argument{plural}"
        f" {', '.join(repr(k) for k in unknown)}{hint} It takes: {', '.join(current)}."
        " Nothing was sent."
    )

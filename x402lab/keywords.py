"""Keywords a method does not take, refused with a guess of the one meant.

Python's own TypeError for an unknown keyword names the class the method is defined on (a
resource the user never typed) and guesses nothing; the Lab's delegators check keywords here
first and raise ``ArgumentError`` (a ConfigError and a TypeError) with a did-you-mean.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from x402lab.errors import ArgumentError


def keywords_of(method: Callable[..., Any]) -> frozenset[str] | None:
    """The keywords ``method`` takes, or None when it takes any (``**kwargs``)."""
    parameters = inspect.signature(method).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    named = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return frozenset(p.name for p in parameters if p.kind in named)


def unknown_keywords(
    name: str, given: Mapping[str, Any], keywords: frozenset[str]
) -> ArgumentError:
    """The error for the keywords of ``given`` that ``name()`` does not take."""
    unknown = [k for k in given if k not in keywords]
    guesses = [
        f"{guess[0]!r} for {k!r}" if len(unknown) > 1 else repr(guess[0])
        for k in unknown
        if (guess := difflib.get_close_matches(k, sorted(keywords - {"self"}), n=1, cutoff=0.6))
    ]
    plural = "s" if len(unknown) > 1 else ""
    hint = f"; did you mean {', '.join(guesses)}?" if guesses else "."
    takes = ", ".join(sorted(keywords - {"self"}))
    return ArgumentError(
        f"{name}() got an unexpected keyword argument{plural}"
        f" {', '.join(repr(k) for k in unknown)}{hint} It takes: {takes}. Nothing was sent."
    )

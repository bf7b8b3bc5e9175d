"""Small HTML cards for Jupyter reprs (``_repr_html_``): a title, a table of named figures,
and tables that scroll instead of being cut off. Every value is escaped here."""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

_CARD = "border:1px solid #d0d7de;border-radius:6px;padding:0.5em 0.8em;display:inline-block"
_KEY = "text-align:left;padding:0.1em 1em 0.1em 0;color:#57606a;font-weight:normal"
_VALUE = "text-align:left;padding:0.1em 0;font-family:monospace"
SCROLL = "max-height:24em;max-width:100%;overflow:auto"


def card(title: str, rows: Iterable[tuple[str, Any]], *, below: str = "") -> str:
    """A titled table of ``(name, value)`` rows (None values left out); ``below`` is HTML
    (already escaped) put under it."""
    cells = "".join(
        f'<tr><th style="{_KEY}">{html.escape(name)}</th>'
        f'<td style="{_VALUE}">{html.escape(str(value))}</td></tr>'
        for name, value in rows
        if value is not None
    )
    return (
        f'<div style="{_CARD}"><b>{html.escape(title)}</b>'
        f'<table style="border-collapse:collapse;margin-top:0.3em">{cells}</table>{below}</div>'
    )


def scrolling(table_html: str) -> str:
    """A table (HTML) in a box that scrolls both ways instead of being cut off."""
    return f'<div style="{SCROLL}">{table_html}</div>'


def text_block(text: str, *, lines: int = 12) -> str:
    """Long text, escaped, wrapped, at most ``lines`` lines high (then it scrolls)."""
    return (
        f'<div style="white-space:pre-wrap;max-height:{1.4 * lines:.1f}em;overflow:auto;'
        f'margin-top:0.3em">{html.escape(text)}</div>'
    )

"""A route batch's media in Jupyter: ``xl.media_table(frame)``, thumbnails and players.

The frame of ``lab.batch(lab.generate_image, ...)`` (or ``speech``...) names each row's saved
file in its ``path`` column. ``media_table`` shows the frame as an HTML table whose ``path``
cells are the pictures themselves (or audio and video players), inlined as data URLs so the
notebook shows them wherever it is opened; every other cell is escaped text. Files bigger
than ``max_bytes`` (and rows without a file) show their path instead.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from x402lab.reprs import scrolling

#: Files inlined at most: a table of large files would make the notebook heavy.
MAX_BYTES = 4_000_000


class MediaTable:
    """The HTML of a frame with its media shown (``_repr_html_``: Jupyter displays it)."""

    def __init__(self, html_text: str) -> None:
        self.html = html_text

    def _repr_html_(self) -> str:
        return self.html


def media_table(
    frame: Any,
    column: str = "path",
    *,
    width: int = 128,
    columns: list[str] | None = None,
    max_bytes: int = MAX_BYTES,
) -> MediaTable:
    """``frame`` as a table with the files named in ``column`` shown as thumbnails (images,
    ``width`` pixels wide) or players (audio, video); ``columns``: the other columns shown
    (default: the input's columns and ``status``, ``paid_usd``)."""
    if column not in frame.columns:
        raise KeyError(f"media_table(): the frame has no {column!r} column")
    kinds = frame["media_type"] if "media_type" in frame.columns else [None] * len(frame)
    shown = columns if columns is not None else _default_columns(frame, column)
    head = "".join(f"<th>{html.escape(str(name))}</th>" for name in [*shown, column])
    body = []
    for (_, row), kind in zip(frame.iterrows(), kinds, strict=True):
        cells = "".join(f"<td>{html.escape(str(row[name]))}</td>" for name in shown)
        body.append(f"<tr>{cells}<td>{_media(row[column], kind, width, max_bytes)}</td></tr>")
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return MediaTable(scrolling(table))


def _default_columns(frame: Any, column: str) -> list[str]:
    results = {"media_type", "size_bytes", "quoted_usd", "cost_usd", "upstream_usd", "tx_hash"}
    results |= {"error", "latency_s", "request_key", column}
    return [c for c in frame.columns if c not in results]


def _media(value: Any, kind: Any, width: int, max_bytes: int) -> str:
    path = Path(value) if isinstance(value, str) and value else None
    if path is None or not path.is_file() or path.stat().st_size > max_bytes:
        return html.escape("" if value is None else str(value))
    media_type = kind if isinstance(kind, str) and kind else "application/octet-stream"
    source = f"data:{html.escape(media_type)};base64,{base64.b64encode(path.read_bytes()).decode()}"
    major = media_type.split("/")[0]
    if major == "image":
        return f'<img src="{source}" width="{int(width)}" title="{html.escape(path.name)}"/>'
    if major in ("audio", "video"):
        return f'<{major} controls src="{source}"></{major}>'
    return html.escape(str(path))

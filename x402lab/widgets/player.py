"""An inline audio or video player for media on disk: small files embedded, large ones linked.

A notebook keeps whatever is embedded, so only small media goes in whole. A large WAV gets a
compressed preview (mono, 8 kHz, 8-bit, the first seconds: about 8 KB a second); other large
files are linked (when under the notebook's folder) or named by their path.
"""

from __future__ import annotations

import base64
import html
import io
import os
import wave
from pathlib import Path

import numpy as np

EMBED_LIMIT_BYTES = 1_000_000
PREVIEW_SECONDS = 30
PREVIEW_RATE = 8000
_WAV_TYPES = ("audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave")


def wav_preview(data: bytes, *, seconds: float = PREVIEW_SECONDS) -> bytes:
    """A compressed preview of a PCM WAV: mono, 8 kHz (or less), 8-bit, at most ``seconds``.

    Raises ValueError (wave.Error) for data that is not a PCM WAV.
    """
    with wave.open(io.BytesIO(data)) as source:
        channels, width, rate = source.getnchannels(), source.getsampwidth(), source.getframerate()
        frames = source.readframes(int(min(source.getnframes(), rate * seconds)))
    if width not in (1, 2, 4):
        raise wave.Error(f"unsupported sample width {width}")
    kinds = {1: np.uint8, 2: np.int16, 4: np.int32}
    samples = np.frombuffer(frames, dtype=kinds[width]).astype(np.float64)
    if width == 1:
        samples -= 128.0
    samples /= float(2 ** (8 * width - 1))
    if channels > 1:
        samples = samples[: len(samples) - len(samples) % channels]
        samples = samples.reshape(-1, channels).mean(axis=1)
    step = max(1, -(-rate // PREVIEW_RATE))  # ceil: never above PREVIEW_RATE
    if step > 1:
        # Average each block of `step` samples: a crude low-pass before dropping the rate.
        usable = len(samples) - len(samples) % step
        samples = samples[:usable].reshape(-1, step).mean(axis=1)
    pcm = np.clip(np.round(samples * 127.0) + 128.0, 0, 255).astype(np.uint8)
    out = io.BytesIO()
    with wave.open(out, "wb") as target:
        target.setnchannels(1)
        target.setsampwidth(1)
        target.setframerate(rate // step)
        target.writeframes(pcm.tobytes())
    return out.getvalue()


def file_link(path: Path, *, root: Path | None = None) -> str:
    """A link to ``path`` when it lies under ``root`` (the notebook's folder), else its path."""
    base = (root or Path.cwd()).resolve()
    target = path.resolve()
    shown = html.escape(str(path))
    try:
        relative = target.relative_to(base)
    except ValueError:
        return f"<code>{shown}</code>"
    href = html.escape(relative.as_posix(), quote=True)
    return f'<a href="{href}" target="_blank" download><code>{shown}</code></a>'


def player_html(
    path: Path,
    content_type: str | None,
    *,
    caption: str = "",
    embed_limit: int = EMBED_LIMIT_BYTES,
    root: Path | None = None,
) -> str:
    """The HTML of a player for the media at ``path`` (see the module docstring)."""
    kind = (content_type or "").split("/")[0]
    size = os.path.getsize(path)
    note = ""
    data: bytes | None = None
    source_type = content_type or "application/octet-stream"
    if size <= embed_limit:
        data = path.read_bytes()
    elif content_type in _WAV_TYPES:
        try:
            data = wav_preview(path.read_bytes())
        except (wave.Error, EOFError):
            data = None
        else:
            source_type = "audio/wav"
            note = f"preview: first {PREVIEW_SECONDS} s, mono 8 kHz · "
    parts = ['<div class="x402lab-player">']
    if data is not None and kind in ("audio", "video"):
        encoded = base64.b64encode(data).decode("ascii")
        source = f"data:{html.escape(source_type)};base64,{encoded}"
        size_attr = ' width="320"' if kind == "video" else ""
        parts.append(f'<{kind} controls preload="metadata"{size_attr} src="{source}"></{kind}>')
    megabytes = size / 1_000_000
    parts.append(
        f'<div style="font-size: 0.85em">{html.escape(caption)}{" · " if caption else ""}'
        f"{note}{megabytes:.2f} MB on disk: {file_link(path, root=root)}</div>"
    )
    parts.append("</div>")
    return "".join(parts)

"""What paid routes accept as files and images: bytes, a path, a URL or base64 text.

Images go into JSON bodies (``image_ref``); audio and documents go up as multipart forms,
keyed by the form fields and the file's hash (``form_key``).
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from x402lab.errors import ConfigError
from x402lab.gateway.paid import request_key

Binary = bytes | str | os.PathLike[str]


def read_binary(value: Binary) -> bytes:
    """The bytes given, or the file's bytes. Raises ConfigError when there is no such file."""
    if isinstance(value, bytes):
        return value
    path = Path(value).expanduser()
    if not path.is_file():
        raise ConfigError(f"no such file: {str(path)!r}")
    return path.read_bytes()


def is_file(value: str) -> bool:
    """True when ``value`` names an existing file (False for URLs and base64 text)."""
    try:
        return Path(value).expanduser().is_file()
    except (OSError, ValueError):  # base64 text can be too long or odd for a file name
        return False


def image_ref(value: Binary) -> str:
    """An image for a JSON body: a URL or base64 text as given; bytes or a file as base64."""
    if isinstance(value, str) and (
        value.startswith(("http://", "https://", "data:")) or not is_file(value)
    ):
        return value
    return base64.b64encode(read_binary(value)).decode("ascii")


def form_key(path: str, form: Mapping[str, Any], data: bytes) -> str:
    """The request key of a multipart upload: its form fields and the file's SHA-256."""
    return request_key("POST", path, {**form, "file_sha256": hashlib.sha256(data).hexdigest()})


def upload_name(value: Binary, given: str | None, default: str) -> str:
    """The file name to upload under: the one given, the file's own, else ``default``."""
    if given:
        return given
    if not isinstance(value, bytes) and not str(value).startswith(("http://", "https://")):
        return Path(value).name
    return default


def form_value(value: Any) -> str:
    """A form field's text (booleans as ``true``/``false``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)

"""Reading request bodies: JSON objects, multipart forms, and typed fields with 400s.

Every check here raises ``GatewayError`` 400, so a bad request is refused before any 402.
Multipart is parsed with the standard library's ``email`` parser (no python-multipart).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

from starlette.requests import Request

from x402lab.emulator.gateway.errors import GatewayError, bad_request

MAX_BODY_BYTES = 25 * 1024 * 1024


@dataclass(frozen=True)
class Upload:
    """One file part of a multipart form."""

    filename: str
    content_type: str
    data: bytes


async def read_body(request: Request) -> bytes:
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise GatewayError(413, "payload_too_large", "request body above 25 MB")
    return body


async def json_object(request: Request) -> dict[str, Any]:
    """The request body as a JSON object. Raises 400 invalid_json otherwise."""
    raw = await read_body(request)
    try:
        value = json.loads(raw) if raw.strip() else None
    except (ValueError, UnicodeDecodeError):
        raise bad_request("request body is not valid JSON", code="invalid_json") from None
    if not isinstance(value, dict):
        raise bad_request("request body must be a JSON object", code="invalid_json")
    return value


async def json_value(request: Request) -> Any:
    """The request body as any JSON value. Raises 400 invalid_json otherwise."""
    raw = await read_body(request)
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise bad_request("request body is not valid JSON", code="invalid_json") from None


def is_multipart(request: Request) -> bool:
    return request.headers.get("content-type", "").lower().startswith("multipart/form-data")


async def multipart_form(request: Request) -> tuple[dict[str, str], dict[str, Upload]]:
    """(text fields, file parts) of a multipart/form-data body. Raises 400 when malformed."""
    content_type = request.headers.get("content-type", "")
    if "boundary=" not in content_type.lower():
        raise bad_request("multipart body without a boundary", code="invalid_request")
    raw = await read_body(request)
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1", "replace")
    message = BytesParser(policy=HTTP).parsebytes(head + raw)
    if not message.is_multipart():
        raise bad_request("malformed multipart body", code="invalid_request")
    fields: dict[str, str] = {}
    files: dict[str, Upload] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        filename = part.get_filename()
        if filename is not None:
            files[name] = Upload(filename, part.get_content_type(), data)
        else:
            fields[name] = data.decode("utf-8", "replace")
    return fields, files


# -- typed fields ---------------------------------------------------------------------------


def string(
    body: dict[str, Any],
    key: str,
    *,
    required: bool = False,
    max_len: int | None = None,
    min_len: int = 0,
) -> str | None:
    value = body.get(key)
    if value is None:
        if required:
            raise bad_request(f"{key} is required")
        return None
    if not isinstance(value, str):
        raise bad_request(f"{key} must be a string")
    if required and not value.strip():
        raise bad_request(f"{key} must not be empty")
    if len(value) < min_len:
        raise bad_request(f"{key} must be at least {min_len} characters")
    if max_len is not None and len(value) > max_len:
        raise bad_request(f"{key} must be at most {max_len} characters")
    return value


def integer(
    body: dict[str, Any],
    key: str,
    *,
    low: int | None = None,
    high: int | None = None,
    allow_digits: bool = False,
) -> int | None:
    """An optional integer field (``allow_digits``: also a string of digits)."""
    value = body.get(key)
    if value is None:
        return None
    if allow_digits and isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"{key} must be an integer")
    if low is not None and value < low:
        raise bad_request(f"{key} must be >= {low}")
    if high is not None and value > high:
        raise bad_request(f"{key} must be <= {high}")
    return value


def number(
    body: dict[str, Any],
    key: str,
    *,
    low: float | None = None,
    high: float | None = None,
    positive: bool = False,
) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise bad_request(f"{key} must be a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise bad_request(f"{key} must be a number")
    if positive and value <= 0:
        raise bad_request(f"{key} must be > 0")
    if low is not None and value < low:
        raise bad_request(f"{key} must be >= {low}")
    if high is not None and value > high:
        raise bad_request(f"{key} must be <= {high}")
    return float(value)


def boolean(body: dict[str, Any], key: str, default: bool | None = None) -> bool | None:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise bad_request(f"{key} must be a boolean")
    return value


def obj(body: dict[str, Any], key: str) -> dict[str, Any]:
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad_request(f"{key} must be an object")
    return value


def url(body: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    """An http(s) URL field."""
    value = string(body, key, required=required, max_len=8192)
    if value is not None and not value.lower().startswith(("http://", "https://")):
        raise bad_request(f"{key} must be an http(s) URL")
    return value


def image_ref(body: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    """An image given as an http(s) URL, a data: URL or base64 text."""
    value = string(body, key, required=required, max_len=MAX_BODY_BYTES)
    if value is not None and len(value) < 8:
        raise bad_request(f"{key} must be an image URL or base64 data")
    return value

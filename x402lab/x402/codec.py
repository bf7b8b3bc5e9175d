"""Base64 JSON header codec for PAYMENT-REQUIRED, PAYMENT-SIGNATURE and PAYMENT-RESPONSE.

We emit what every peer accepts (compact JSON, standard base64 with padding) and decode
leniently, because gateways in the wild send urlsafe or unpadded values.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from itertools import accumulate
from typing import Any

from x402lab.errors import ProtocolError

# Far above any real challenge; stops a hostile header from costing much memory.
MAX_HEADER_CHARS = 1 << 20

_WHITESPACE = re.compile(r"\s+")
_BASE64_CHARS = re.compile(r"[A-Za-z0-9+/]*")
_URLSAFE = str.maketrans("-_", "+/")


#: How deeply a payment header's JSON may nest (a real one nests 4 levels).
MAX_JSON_DEPTH = 64

_ESCAPED = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"')
# Opening brackets become 2 and closing ones 0 (everything else is deleted): the running sum
# of (byte - 1) is the nesting depth.
_DEPTH_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))


def deeper_than(content: bytes, limit: int) -> int | None:
    """How deeply the JSON text ``content`` nests when that is more than ``limit`` levels,
    else None. Its opening brackets bound its depth (those inside strings too: still a bound),
    and counting them takes 1 µs where ``nesting_depth`` takes 9-12 µs on a chat answer or a
    payment header, as long as ``json.loads`` of it: a text with at most ``limit`` of them,
    as every answer and header of the paid path has, stops at the count."""
    if content.count(b"[") + content.count(b"{") <= limit:
        return None
    depth = nesting_depth(content)
    return depth if depth > limit else None


def nesting_depth(content: bytes) -> int:
    """How deeply the JSON text ``content`` nests its arrays and objects (strings skipped);
    linear time, in C, whatever the depth. Checked before ``json.loads`` runs: the parser
    recurses once per level, and a library that raises the recursion limit (py_ecc, which
    eth-account imports, sets 100,000) turns a deep text into a crash instead of a
    RecursionError."""
    brackets = _STRING.sub(b"", _ESCAPED.sub(b"", content)).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    return max(0, max(accumulate(step - 1 for step in brackets.translate(_DEPTH_STEPS))))


def preview(value: object, limit: int = 40) -> str:
    """A short repr of untrusted input for error messages (at most ``limit`` characters)."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) > limit:
        text = text[:limit] + "…"
    return repr(text) if isinstance(value, str) else text


#: Compact JSON text, NaN refused: what payment headers carry, and how httpx writes a
#: ``json=`` body. One encoder for every call (``json.dumps`` with options builds one each).
compact_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def encode_header(obj: Mapping[str, Any]) -> str:
    """Return ``obj`` as compact UTF-8 JSON in standard base64 with padding."""
    return base64.b64encode(compact_json(obj).encode("utf-8")).decode("ascii")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


#: One decoder for every header (``json.loads`` with an option builds a new one per call).
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _lenient_base64(value: str) -> bytes:
    """``value`` decoded as urlsafe or standard base64, padded or not, whitespace ignored."""
    text = _WHITESPACE.sub("", value).translate(_URLSAFE).rstrip("=")
    if not text:
        raise ProtocolError("bad base64 in header: empty value")
    if not _BASE64_CHARS.fullmatch(text) or len(text) % 4 == 1:
        raise ProtocolError(f"bad base64 in header: {preview(value)}")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProtocolError(f"bad base64 in header: {preview(value)}") from exc


def decode_header(value: str | bytes) -> dict[str, Any]:
    """Decode a base64 JSON header value into a dict.

    Accepts standard or urlsafe base64, with or without padding, and ignores whitespace.
    Raises ProtocolError naming the problem: bad base64, not UTF-8, not JSON, not an object.
    """
    if isinstance(value, bytes | bytearray):
        try:
            value = bytes(value).decode("ascii")
        except UnicodeDecodeError as exc:
            raise ProtocolError("bad base64 in header: non-ASCII bytes") from exc
    if not isinstance(value, str):
        raise ProtocolError(f"bad header value: want str or bytes, got {type(value).__name__}")
    if len(value) > MAX_HEADER_CHARS:
        raise ProtocolError(f"bad header value: {len(value)} characters is too long")
    try:
        # What we and the official SDK emit (standard alphabet, padded, no whitespace) is
        # decoded here in one strict C call; anything else takes the lenient way.
        raw = binascii.a2b_base64(value, strict_mode=True) if value else b""
    except (binascii.Error, ValueError):
        raw = b""
    if not raw:
        raw = _lenient_base64(value)
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError("header is not UTF-8 JSON: invalid UTF-8 bytes") from exc
    depth = deeper_than(raw, MAX_JSON_DEPTH)
    if depth is not None:
        raise ProtocolError(
            f"header JSON is nested {depth:,} levels deep (at most {MAX_JSON_DEPTH})"
        )
    try:
        obj = _DECODER.decode(decoded)
    except ValueError as exc:
        raise ProtocolError(f"header is not JSON: {preview(decoded)}") from exc
    if not isinstance(obj, dict):
        raise ProtocolError(f"header JSON is not an object: got {type(obj).__name__}")
    return obj

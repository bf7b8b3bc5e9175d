"""Strict readers for wire fields: each raises ProtocolError naming the field."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from x402lab.errors import ConfigError, ProtocolError
from x402lab.money import parse_atomic
from x402lab.x402.codec import preview

ADDRESS_RE = re.compile(r"0x[0-9a-fA-F]{40}")
NONCE_RE = re.compile(r"0x[0-9a-fA-F]{64}")
HEX_RE = re.compile(r"0x(?:[0-9a-fA-F]{2})+")

_MISSING = object()


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-like data (mappings become dicts, tuples lists).

    A JSON round trip runs in C: challenges carry large input schemas that are copied on
    every payment, and a Python-level walk of them was a quarter of a client's CPU.
    """
    if not isinstance(value, Mapping | list | tuple):
        return value
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):  # a non-dict Mapping inside, or a non-JSON value
        return _copy_walk(value)


def _copy_walk(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy_walk(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy_walk(v) for v in value]
    return value


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def need_object(value: object, where: str) -> Mapping[str, Any]:
    """``value`` as a mapping; raises ProtocolError when it is not a JSON object."""
    if not isinstance(value, Mapping):
        raise ProtocolError(f"{where}: want an object, got {_type_name(value)}")
    return value


def get_str(d: Mapping[str, Any], key: str, where: str, *, optional: bool = False) -> Any:
    """The string at ``d[key]`` (None when optional and absent or null)."""
    value = d.get(key, _MISSING)
    if value is _MISSING or value is None:
        if optional:
            return None
        raise ProtocolError(f"{where}{key}: missing")
    if not isinstance(value, str):
        raise ProtocolError(f"{where}{key}: want a string, got {_type_name(value)}")
    return value


def get_int(d: Mapping[str, Any], key: str, where: str) -> int:
    """The JSON integer at ``d[key]`` (booleans and floats are refused)."""
    value = d.get(key, _MISSING)
    if value is _MISSING:
        raise ProtocolError(f"{where}{key}: missing")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(f"{where}{key}: want an integer, got {_type_name(value)}")
    return value


def get_atomic(d: Mapping[str, Any], key: str, where: str, *, allow_int: bool = False) -> int:
    """The decimal-string amount at ``d[key]`` as an int (JSON numbers only if ``allow_int``)."""
    value = d.get(key, _MISSING)
    if value is _MISSING or value is None:
        raise ProtocolError(f"{where}{key}: missing")
    if isinstance(value, int) and not isinstance(value, bool) and not allow_int:
        raise ProtocolError(f"{where}{key}: want a string of digits, got a JSON number")
    try:
        return parse_atomic(value)
    except ConfigError:
        raise ProtocolError(
            f"{where}{key}: want a string of digits, got {preview(value)}"
        ) from None


def get_object(
    d: Mapping[str, Any], key: str, where: str, *, optional: bool = False
) -> Mapping[str, Any] | None:
    """The object at ``d[key]`` (None when optional and absent or null)."""
    value = d.get(key, _MISSING)
    if value is _MISSING or value is None:
        if optional:
            return None
        raise ProtocolError(f"{where}{key}: missing")
    return need_object(value, f"{where}{key}")


def get_address(d: Mapping[str, Any], key: str, where: str) -> str:
    """The 0x-prefixed 20-byte hex address at ``d[key]``, as given."""
    value = get_str(d, key, where)
    if not ADDRESS_RE.fullmatch(value):
        raise ProtocolError(f"{where}{key}: not a 0x address: {preview(value)}")
    return str(value)

"""What a batch will send: its rows, their distinct requests, and the paid requests.

A row's *item* is what that row asks on its own (a prompt, a text, a typed row's values);
identical rows share one item, so they are paid once. Items are grouped into *units*, the
requests actually paid: one item each for chat, ``per_request`` items each for embeddings and
typed packs. Units are cut from the distinct items in first-seen order. A unit some of whose
items need no buying pays for the rest in a smaller request. The plan's codec
(``batch.kinds._codec``) builds the body of every request from its items. Each item is claimed in
the store under its own key (the key of its request alone, with the key of the request that
carries it), so a re-run finds earlier payments and answers whatever the grouping.

A plan with a ``namespace`` (``lab.compare``'s configurations) keys every request by that name,
its grouping and its whole list of items as well: the same requests are sent, but no other
batch (a plain one, another pack size, another sample) shares a key with it, so answers it
stores are found only by the same plan run again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from x402lab.batch.kinds import Codec, Request
from x402lab.gateway.paid import request_key


@dataclass
class Plan:
    """Rows, distinct items and paid units of one batch, and the codec of its requests."""

    codec: Codec
    row_items: np.ndarray  # item index of every row
    item_keys: list[str]  # request key of each item's own request
    item_payloads: list[Any]  # each distinct item, as its codec takes it
    first_row: np.ndarray  # first row of each item
    last_row: np.ndarray  # last row of each item
    per_request: int
    unit_keys: list[str]  # request key of each paid unit
    #: The body of each pack (``per_request`` > 1), built once when its key was: every later
    #: use reads it. None for one item a unit: its body, cheap to build again from its item,
    #: is not held for each of a million rows (561 bytes a row against 121 for the plan).
    unit_bodies: list[dict[str, Any]] | None
    #: Keys of this plan's own (see the module docstring); None: a request's plain key.
    namespace: str | None = None

    @property
    def kind(self) -> str:
        return self.codec.kind

    @property
    def path(self) -> str:
        return self.codec.path

    @property
    def model(self) -> str | None:
        return self.codec.model

    def key_of(self, body: Mapping[str, Any]) -> str:
        """The key of a request of this plan carrying ``body``."""
        return namespaced_key(self.path, body, self.namespace)

    @property
    def rows(self) -> int:
        return len(self.row_items)

    @property
    def units(self) -> int:
        return len(self.unit_keys)

    def unit_items(self, unit: int) -> range:
        start = unit * self.per_request
        return range(start, min(start + self.per_request, len(self.item_keys)))

    def unit_body(self, unit: int) -> dict[str, Any]:
        if self.unit_bodies is None:
            return self.codec.body([self.item_payloads[unit]])
        return self.unit_bodies[unit]

    def request(self, unit: int) -> Request:
        """The request that goes out for ``unit`` (its codec's: a JSON body or a form)."""
        return self.codec.request(self.unit_keys[unit], self.unit_body(unit))

    def body_for(self, items: list[int]) -> dict[str, Any]:
        """The body of one request carrying ``items``."""
        return self.codec.body([self.item_payloads[i] for i in items])

    def request_for(self, unit: int, items: list[int]) -> tuple[str, dict[str, Any]]:
        """The key and body of the request that pays for ``items`` of ``unit``: the unit's own
        request, or a smaller one when some of its items need no buying (stored, paid).
        A single item's request key is its own item key."""
        if list(items) == list(self.unit_items(unit)):
            return self.unit_keys[unit], self.unit_body(unit)
        body = self.body_for(items)
        return self.key_of(body), body

    def asked_again(self, body: Mapping[str, Any], round: int) -> tuple[str, dict[str, Any]]:
        """The key and body of the request asking ``body``'s rows again in ``round`` (the
        codec's ``reask``)."""
        assert self.codec.reask is not None, f"{self.kind} answers are never asked again"
        again = self.codec.reask.again(body, round)
        return self.key_of(again), again


def _index(keys: Iterable[str]) -> tuple[np.ndarray, list[str], list[int]]:
    """Item index per row, the distinct keys in first-seen order, and each one's first row."""
    seen: dict[str, int] = {}
    rows: list[int] = []
    firsts: list[int] = []
    for row, key in enumerate(keys):
        item = seen.get(key)
        if item is None:
            item = seen[key] = len(seen)
            firsts.append(row)
        rows.append(item)
    return np.asarray(rows, dtype=np.int64), list(seen), firsts


def _last_rows(row_items: np.ndarray, items: int) -> np.ndarray:
    last = np.zeros(items, dtype=np.int64)
    last[row_items] = np.arange(len(row_items), dtype=np.int64)  # later rows win
    return last


def plan_of(
    codec: Codec,
    payloads: Sequence[Any],
    per_request: int = 1,
    namespace: str | None = None,
    keys: Sequence[str] | None = None,
) -> Plan:
    """The plan of ``payloads`` (one item a row) paid ``per_request`` distinct items at a
    time, each item keyed by its request alone (so a re-run with any grouping finds it
    again). ``namespace``: keys of the plan's own, derived from it, the grouping and every
    item's plain key (the module docstring). ``keys``: each payload's request key as its
    route's own call keys it (a route batch's uploads: ``gateway.uploads.form_key``), one
    item per request."""
    path = codec.path
    if keys is None:
        key_of = BodyKeys(path)
        keys = [key_of(codec.body([payload])) for payload in payloads]
    elif per_request != 1 or namespace is not None:
        raise ValueError("keys= plans one item per request, without a namespace")
    row_items, item_keys, firsts = _index(keys)
    distinct = [payloads[row] for row in firsts]
    if namespace is not None:
        whole = hashlib.sha256("\n".join(item_keys).encode()).hexdigest()[:32]
        namespace = f"{namespace}:{per_request}:{whole}"
        key_of = BodyKeys(path, namespace)
        item_keys = [key_of(codec.body([payload])) for payload in distinct]
    unit_keys, unit_bodies = item_keys, None
    if per_request > 1:
        unit_bodies = [
            codec.body(distinct[i : i + per_request]) for i in range(0, len(distinct), per_request)
        ]
        unit_keys = list(map(BodyKeys(path, namespace), unit_bodies))
    return Plan(
        codec=codec,
        row_items=row_items,
        item_keys=item_keys,
        item_payloads=distinct,
        first_row=np.asarray(firsts, dtype=np.int64),
        last_row=_last_rows(row_items, len(item_keys)),
        per_request=per_request,
        unit_keys=unit_keys,
        unit_bodies=unit_bodies,
        namespace=namespace,
    )


def namespaced_key(path: str, body: Mapping[str, Any], namespace: str | None) -> str:
    """The request key of ``body``, or with a ``namespace`` a key of that namespace alone."""
    if namespace is None:
        return request_key("POST", path, body)
    return request_key("POST", path, {"namespace": namespace, "body": body})


class BodyKeys:
    """The keys of many bodies of one route, the same as ``namespaced_key``'s (and so
    ``gateway.paid.request_key``'s), written as canonical JSON field by field: a field holding
    the same object as in the body keyed before (a typed batch's ``response_format``, a
    schema of a kilobyte or more) is written once, not once a row."""

    def __init__(self, path: str, namespace: str | None = None) -> None:
        self._head = f"POST {path}\n"
        self._namespace = None if namespace is None else _canonical(namespace)
        self._last: dict[str, tuple[Any, str]] = {}  # field: (its last object, its JSON)

    def __call__(self, body: Mapping[str, Any]) -> str:
        text = self._fields(body)
        if self._namespace is not None:
            text = f'{{"body":{text},"namespace":{self._namespace}}}'
        return hashlib.sha256(f"{self._head}{text}".encode()).hexdigest()[:32]

    def _fields(self, body: Mapping[str, Any]) -> str:
        if not all(isinstance(name, str) for name in body):
            return _canonical(body)
        parts = []
        for name in sorted(body):
            value = body[name]
            last = self._last.get(name)
            if last is not None and last[0] is value:
                text = last[1]
            else:
                text = _canonical(value)
                if isinstance(value, dict | list):
                    self._last[name] = (value, text)
            parts.append(f"{_canonical(name)}:{text}")
        return "{" + ",".join(parts) + "}"


def _canonical(value: Any) -> str:
    """The canonical JSON ``gateway.paid.request_key`` hashes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)

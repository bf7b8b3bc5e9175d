"""The payment header of a signed payload, without encoding its challenge's parts again.

A payment echoes three parts of its challenge unchanged: ``resource``, the ``accepted``
requirements and the ``extensions`` (for the gateway, a route's input schemas: most of the
header). Every payment signed for one challenge object (a price class pays thousands with
the same one, ``payments.prediction``) has the same JSON for them, so ``PaymentHeaders``
keeps that JSON text per challenge and writes only the signed part per payment. The result
is byte for byte ``encode_header(payload.to_wire())``.
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from typing import Any

from x402lab.x402.codec import compact_json
from x402lab.x402.models import PaymentPayload, PaymentRequired, PaymentRequirements


class PaymentHeaders:
    """Encodes payment headers, the challenge parts' JSON kept for the last ``size``
    challenge objects (held here, so an id is never reused while it is a key)."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._parts: OrderedDict[tuple[int, int], tuple[object, object, str, str]] = OrderedDict()

    def encode(
        self,
        payload: PaymentPayload,
        challenge: PaymentRequired,
        requirements: PaymentRequirements,
    ) -> str:
        """The base64 header of ``payload``, signed by ``sign_payment`` for ``challenge``
        and ``requirements`` (with no client extensions)."""
        key = (id(challenge), id(requirements))
        found = self._parts.get(key)
        if found is None or found[0] is not challenge or found[1] is not requirements:
            head: dict[str, Any] = {"x402Version": payload.x402_version}
            if payload.resource is not None:
                head["resource"] = payload.resource
            head["accepted"] = payload.accepted
            prefix = compact_json(head)[:-1] + ',"payload":'
            suffix = "}"
            if payload.extensions is not None:
                suffix = ',"extensions":' + compact_json(payload.extensions) + "}"
            found = (challenge, requirements, prefix, suffix)
            self._parts[key] = found
            while len(self._parts) > self._size:
                self._parts.popitem(last=False)
        signed = {"signature": payload.signature, "authorization": payload.authorization.to_wire()}
        text = found[2] + compact_json(signed) + found[3]
        return base64.b64encode(text.encode("utf-8")).decode("ascii")

"""x402 v2 wire models: frozen dataclasses with snake_case attributes, camelCase on the wire.

Every ``from_wire`` is strict and raises ProtocolError naming the offending field; every
``to_wire`` returns a plain JSON-ready dict. Unknown wire fields are kept in ``raw``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from x402lab.errors import ProtocolError
from x402lab.x402._wire import (
    HEX_RE,
    NONCE_RE,
    copy_json,
    get_address,
    get_atomic,
    get_int,
    get_object,
    get_str,
    need_object,
)
from x402lab.x402.codec import preview
from x402lab.x402.tokens import DEFAULT_MAX_TIMEOUT_SECONDS, token_for

X402_VERSION = 2


def _check_version(value: object, where: str) -> int:
    if value == X402_VERSION and not isinstance(value, bool):
        return X402_VERSION
    if isinstance(value, int) and not isinstance(value, bool):
        raise ProtocolError(f"unsupported x402Version {value}")
    raise ProtocolError(f"{where}x402Version: want the integer 2, got {preview(value)}")


@dataclass(frozen=True)
class ResourceInfo:
    """The paid resource a challenge is about."""

    url: str
    description: str | None = None
    mime_type: str | None = None
    service_name: str | None = None
    icon_url: str | None = None

    @classmethod
    def from_wire(cls, d: Mapping[str, Any], where: str = "resource.") -> ResourceInfo:
        """Parse a wire ``resource`` object; raises ProtocolError."""
        d = need_object(d, where.rstrip("."))
        return cls(
            url=get_str(d, "url", where),
            description=get_str(d, "description", where, optional=True),
            mime_type=get_str(d, "mimeType", where, optional=True),
            service_name=get_str(d, "serviceName", where, optional=True),
            icon_url=get_str(d, "iconUrl", where, optional=True),
        )

    def to_wire(self) -> dict[str, Any]:
        """The wire object (absent optional fields are omitted)."""
        out: dict[str, Any] = {"url": self.url}
        for key, value in (
            ("description", self.description),
            ("mimeType", self.mime_type),
            ("serviceName", self.service_name),
            ("iconUrl", self.icon_url),
        ):
            if value is not None:
                out[key] = value
        return out


_REQUIREMENT_KEYS = ("scheme", "network", "amount", "asset", "payTo", "maxTimeoutSeconds", "extra")


@dataclass(frozen=True)
class PaymentRequirements:
    """One ``accepts[]`` entry. ``raw`` is the verbatim wire entry, echoed as ``accepted``.

    Built by hand with an empty ``raw``, it gets ``raw = to_wire()``. ``filled`` names the
    fields that ``normalize_challenge`` supplied because the wire entry lacked them.
    """

    scheme: str
    network: str
    amount: int
    asset: str
    pay_to: str
    max_timeout_seconds: int
    extra: Mapping[str, Any] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict)
    filled: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.raw:
            object.__setattr__(self, "raw", self.to_wire())

    @classmethod
    def from_wire(cls, d: Mapping[str, Any], where: str = "") -> PaymentRequirements:
        """Parse a standard v2 entry; raises ProtocolError naming the field."""
        d = need_object(d, where.rstrip(".") or "payment requirements")
        extra = get_object(d, "extra", where, optional=True) or {}
        return cls(
            scheme=get_str(d, "scheme", where),
            network=get_str(d, "network", where),
            amount=get_atomic(d, "amount", where),
            asset=get_str(d, "asset", where),
            pay_to=get_str(d, "payTo", where),
            max_timeout_seconds=get_int(d, "maxTimeoutSeconds", where),
            extra=copy_json(dict(extra)),
            raw=copy_json(dict(d)),
        )

    def to_wire(self) -> dict[str, Any]:
        """The standard v2 entry; unknown fields of ``raw`` follow the standard ones."""
        out: dict[str, Any] = {
            "scheme": self.scheme,
            "network": self.network,
            "amount": str(self.amount),
            "asset": self.asset,
            "payTo": self.pay_to,
            "maxTimeoutSeconds": self.max_timeout_seconds,
            "extra": copy_json(dict(self.extra)),
        }
        for key, value in self.raw.items():
            if key not in _REQUIREMENT_KEYS:
                out[key] = copy_json(value)
        return out


@dataclass(frozen=True)
class PaymentRequired:
    """A 402 challenge. ``raw`` is the verbatim wire object."""

    x402_version: int
    accepts: tuple[PaymentRequirements, ...]
    error: str | None = None
    resource: ResourceInfo | None = None
    extensions: Mapping[str, Any] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.raw:
            object.__setattr__(self, "raw", self.to_wire())

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> PaymentRequired:
        """Parse a standard v2 challenge; raises ProtocolError (bad version, empty accepts...)."""
        d = need_object(d, "challenge")
        version = _check_version(d.get("x402Version"), "")
        entries = _accepts_list(d)
        accepts = tuple(
            PaymentRequirements.from_wire(entry, f"accepts[{i}].")
            for i, entry in enumerate(entries)
        )
        return cls._build(d, version, accepts)

    @classmethod
    def _build(
        cls,
        d: Mapping[str, Any],
        version: int,
        accepts: tuple[PaymentRequirements, ...],
        owned: bool = False,
    ) -> PaymentRequired:
        resource = get_object(d, "resource", "", optional=True)
        extensions = get_object(d, "extensions", "", optional=True) or {}
        raw = dict(d) if owned else copy_json(dict(d))
        # ``extensions`` shares the private copy in ``raw``: one deep copy of the (often
        # large) input schemas instead of two.
        return cls(
            x402_version=version,
            accepts=accepts,
            error=get_str(d, "error", "", optional=True),
            resource=None if resource is None else ResourceInfo.from_wire(resource),
            extensions=raw.get("extensions") or {} if extensions else {},
            raw=raw,
        )

    def to_wire(self) -> dict[str, Any]:
        """The standard v2 challenge object."""
        out: dict[str, Any] = {"x402Version": self.x402_version}
        if self.error is not None:
            out["error"] = self.error
        if self.resource is not None:
            out["resource"] = self.resource.to_wire()
        out["accepts"] = [entry.to_wire() for entry in self.accepts]
        if self.extensions:
            out["extensions"] = copy_json(dict(self.extensions))
        return out


def _accepts_list(d: Mapping[str, Any]) -> list[Any]:
    entries = d.get("accepts")
    if entries is None:
        raise ProtocolError("accepts: missing")
    if not isinstance(entries, list):
        raise ProtocolError(f"accepts: want an array, got {type(entries).__name__}")
    if not entries:
        raise ProtocolError("accepts: empty (the challenge offers no way to pay)")
    return entries


def normalize_challenge(d: Mapping[str, Any], *, owned: bool = False) -> PaymentRequired:
    """Parse a standard v2 challenge or a report-service 402 body into a PaymentRequired.

    Missing ``scheme``, ``extra`` name/version and ``maxTimeoutSeconds`` are filled only for a
    known token (``filled`` records which); ``raw`` stays verbatim. ``owned=True`` says the
    caller hands over ``d`` (freshly decoded, used nowhere else), so it is kept, not copied.
    Raises ProtocolError.
    """
    d = need_object(d, "challenge")
    entries = _accepts_list(d)
    if "x402Version" in d:
        version = _check_version(d["x402Version"], "")
    elif all(isinstance(e, Mapping) and e.get("version") == X402_VERSION for e in entries):
        version = X402_VERSION
    else:
        raise ProtocolError("x402Version: missing")
    accepts = tuple(_normalize_entry(entry, f"accepts[{i}].") for i, entry in enumerate(entries))
    return PaymentRequired._build(d, version, accepts, owned)


def _normalize_entry(entry: Any, where: str) -> PaymentRequirements:
    entry = need_object(entry, where.rstrip("."))
    protocol = entry.get("protocol")
    if protocol is not None and protocol != "x402":
        raise ProtocolError(f"{where}protocol: want 'x402', got {preview(protocol)}")
    if "version" in entry:
        _check_version(entry["version"], where)
    extra = entry.get("extra")
    missing = [key for key in ("scheme", "maxTimeoutSeconds", "extra") if entry.get(key) is None]
    token = token_for(get_str(entry, "network", where), get_str(entry, "asset", where))
    # An extra without the domain is completed for a known token; for any other token it is
    # left alone (the checks refuse it later) so one foreign entry cannot spoil the challenge.
    if isinstance(extra, Mapping) and not ("name" in extra and "version" in extra) and token:
        missing.append("extra")
    if not missing:
        return PaymentRequirements.from_wire(entry, where)
    if token is None:
        network, asset = entry["network"], entry["asset"]
        raise ProtocolError(
            f"{where}{', '.join(missing)}: missing, and asset {preview(asset)} on {network} "
            "is not a known token (refusing to guess its EIP-712 domain)"
        )
    filled = dict(entry)
    if "scheme" in missing:
        filled["scheme"] = "exact"
    if "maxTimeoutSeconds" in missing:
        filled["maxTimeoutSeconds"] = DEFAULT_MAX_TIMEOUT_SECONDS
    if "extra" in missing:
        # Only absent keys are filled: a wrong name the server sent stays visible to the checks.
        filled["extra"] = {"name": token.name, "version": token.version, **(extra or {})}
    parsed = PaymentRequirements.from_wire(filled, where)
    return replace(parsed, raw=copy_json(dict(entry)), filled=frozenset(missing))


@dataclass(frozen=True)
class Authorization:
    """An EIP-3009 TransferWithAuthorization message."""

    from_address: str
    to: str
    value: int
    valid_after: int
    valid_before: int
    nonce: str

    @classmethod
    def from_wire(
        cls, d: Mapping[str, Any], where: str = "payload.authorization."
    ) -> Authorization:
        """Parse a wire authorization; raises ProtocolError naming the field."""
        d = need_object(d, where.rstrip("."))
        nonce = get_str(d, "nonce", where)
        if not NONCE_RE.fullmatch(nonce):
            raise ProtocolError(f"{where}nonce: want 0x + 64 hex digits, got {preview(nonce)}")
        return cls(
            from_address=get_address(d, "from", where),
            to=get_address(d, "to", where),
            value=get_atomic(d, "value", where, allow_int=True),
            valid_after=get_atomic(d, "validAfter", where, allow_int=True),
            valid_before=get_atomic(d, "validBefore", where, allow_int=True),
            nonce=nonce,
        )

    def to_wire(self) -> dict[str, str]:
        """The wire object, numbers as decimal strings."""
        return {
            "from": self.from_address,
            "to": self.to,
            "value": str(self.value),
            "validAfter": str(self.valid_after),
            "validBefore": str(self.valid_before),
            "nonce": self.nonce,
        }


@dataclass(frozen=True)
class PaymentPayload:
    """What the client sends in PAYMENT-SIGNATURE."""

    x402_version: int
    accepted: Mapping[str, Any]
    signature: str
    authorization: Authorization
    resource: Mapping[str, Any] | None = None
    extensions: Mapping[str, Any] | None = None

    @classmethod
    def from_wire(cls, d: Mapping[str, Any], *, owned: bool = False) -> PaymentPayload:
        """Parse a wire payload (any integer x402Version); raises ProtocolError.

        ``owned=True``: the caller hands over ``d`` (freshly decoded, never changed later),
        so its nested objects are kept, not copied (an echoed input schema is large)."""
        d = need_object(d, "payment payload")
        payload = get_object(d, "payload", "")
        assert payload is not None
        signature = get_str(payload, "signature", "payload.")
        if not HEX_RE.fullmatch(signature):
            raise ProtocolError(f"payload.signature: not 0x hex: {preview(signature)}")
        authorization = get_object(payload, "authorization", "payload.")
        assert authorization is not None
        accepted = get_object(d, "accepted", "")
        resource = get_object(d, "resource", "", optional=True)
        extensions = get_object(d, "extensions", "", optional=True)
        clone = _same if owned else copy_json
        return cls(
            x402_version=get_int(d, "x402Version", ""),
            accepted=clone(dict(accepted or {})),
            signature=signature,
            authorization=Authorization.from_wire(authorization),
            resource=None if resource is None else clone(dict(resource)),
            extensions=None if extensions is None else clone(dict(extensions)),
        )

    def to_wire(self, *, copy: bool = True) -> dict[str, Any]:
        """The wire object; ``resource`` and ``extensions`` are omitted when None.

        ``copy=False`` shares this payload's nested objects, for a caller that serializes
        the result at once and never changes it (the payment header).
        """
        clone = copy_json if copy else _same
        out: dict[str, Any] = {"x402Version": self.x402_version}
        if self.resource is not None:
            out["resource"] = clone(self.resource)
        out["accepted"] = clone(self.accepted)
        out["payload"] = {
            "signature": self.signature,
            "authorization": self.authorization.to_wire(),
        }
        if self.extensions is not None:
            out["extensions"] = clone(self.extensions)
        return out


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class SettlementResponse:
    """What the server returns in PAYMENT-RESPONSE. ``raw`` keeps the verbatim wire object."""

    success: bool
    transaction: str
    network: str
    payer: str | None = None
    error_reason: str | None = None
    amount: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.raw:
            object.__setattr__(self, "raw", self.to_wire())

    @classmethod
    def from_wire(cls, d: Mapping[str, Any], *, owned: bool = False) -> SettlementResponse:
        """Parse a wire settlement response; raises ProtocolError naming the field.

        ``owned=True``: the caller hands over ``d`` (freshly decoded), kept as ``raw``."""
        d = need_object(d, "settlement response")
        success = d.get("success")
        if not isinstance(success, bool):
            raise ProtocolError(f"success: want a boolean, got {preview(success)}")
        amount = None
        if d.get("amount") is not None:
            amount = get_atomic(d, "amount", "", allow_int=True)
        return cls(
            success=success,
            transaction=get_str(d, "transaction", "", optional=True) or "",
            network=get_str(d, "network", ""),
            payer=get_str(d, "payer", "", optional=True),
            error_reason=get_str(d, "errorReason", "", optional=True),
            amount=amount,
            raw=dict(d) if owned else copy_json(dict(d)),
        )

    def to_wire(self) -> dict[str, Any]:
        """The wire object; absent optional fields are omitted."""
        out: dict[str, Any] = {
            "success": self.success,
            "transaction": self.transaction,
            "network": self.network,
        }
        if self.payer is not None:
            out["payer"] = self.payer
        if self.error_reason is not None:
            out["errorReason"] = self.error_reason
        if self.amount is not None:
            out["amount"] = str(self.amount)
        return out

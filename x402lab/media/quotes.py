"""Free music and video quotes, and the video constraints checked before anything is sent."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from x402lab.errors import ApiError, ModelNotFound, QuoteRejected
from x402lab.money import atomic_to_decimal, format_usd

# Catalog keys of the allowed video values; the upstream catalog uses the plural names.
_CONSTRAINT_KEYS = {
    "duration": ("durations", "duration"),
    "aspect_ratio": ("aspect_ratios", "aspect_ratio"),
    "resolution": ("resolutions", "resolution"),
}
_DURATION = re.compile(r"^\s*(\d+)\s*s?\s*$")


@dataclass(frozen=True)
class MediaQuote:
    """A free music or video quote: the agent charge the queue will ask for."""

    kind: str
    model: str
    amount_atomic: int
    upstream_usd: float | None
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def amount_usd(self) -> Decimal:
        """The amount, exact."""
        return atomic_to_decimal(self.amount_atomic)

    def __repr__(self) -> str:
        upstream = f" (upstream {self.upstream_usd:g} USD)" if self.upstream_usd is not None else ""
        shown = " ".join(f"{k}={v}" for k, v in self.params.items())
        return (
            f"<MediaQuote {self.kind} {self.model}: {format_usd(self.amount_atomic)}{upstream}"
            + (f" {shown}>" if shown else ">")
        )


def normalize_duration(value: Any) -> str:
    """A video duration as the catalog writes it: 5, "5" and "5s" all give "5s"."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    match = _DURATION.match(str(value)) if not isinstance(value, bool) else None
    if match is None:
        raise QuoteRejected(
            f"video duration {value!r} is not a number of seconds like '5s'",
            code="constraint_violation",
        )
    return f"{int(match.group(1))}s"


def check_video_constraints(model: Mapping[str, Any], body: dict[str, Any]) -> None:
    """Refuse a video body whose duration, aspect_ratio or resolution the model does not list.

    Raises QuoteRejected naming the allowed values (nothing is sent).
    """
    spec = model.get("model_spec") or {}
    constraints = spec.get("constraints") or {}
    for name, keys in _CONSTRAINT_KEYS.items():
        if body.get(name) is None:
            continue
        allowed = next((constraints[k] for k in keys if isinstance(constraints.get(k), list)), None)
        if allowed is None:
            continue
        value = body[name]
        if name == "duration":
            allowed = [normalize_duration(v) for v in allowed]
            value = body[name] = normalize_duration(value)
        if value not in allowed:
            raise QuoteRejected(
                f"{name} {value!r} is not offered by {model.get('id')}: allowed"
                f" {', '.join(map(str, allowed))}",
                code="constraint_violation",
            )


def quote_error(exc: ApiError) -> ApiError:
    if exc.status == 400 and not isinstance(exc, ModelNotFound):
        return QuoteRejected(
            exc.message, status=exc.status, code=exc.code, body=exc.body, url=exc.url
        )
    return exc

"""Prices of the paid routes (docs/services.md, "Price rule").

Every price is ``agent charge = upstream USD × priceMult``, rounded to whole USDC base units
(half to even, like ``x402lab.money``), then raised to ``minChargeUsd``. A charge above
``maxChargeUsd`` fails closed with ``charge_exceeds_max``.

Readings where the gateway is silent (the live 402 always decides what is paid):

- ``charge_exceeds_max`` is a 400 with the JSON error body, like every other "the gateway will
  not price this" answer (unknown model, rejected quote); never a 402, so no client can pay it.
- Chat input tokens are estimated as ceil(characters / 4) over the text of every message, plus
  4 tokens of framing per message and 256 tokens per non-text part (an image, an audio clip).
  Output tokens are ``max_completion_tokens``, else ``max_tokens``, else 4096.
- Embeddings pay the input rate on the same token estimate (no output tokens).
- Augment routes cost a configured upstream 0.005 USD each, the YouTube transcription route a
  configured 0.01 USD; both then take the multiplier and the minimum like everything else.
- Crypto RPC: credits = base credits of the chain × method tier (1, 2 or 4), summed over a
  batch; a method the emulator answers with a JSON-RPC error costs 5 credits.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal, getcontext
from typing import Any

from x402lab.emulator.gateway.accuracy import ROUTE_ACCURACY
from x402lab.emulator.gateway.catalog import Model
from x402lab.emulator.gateway.errors import GatewayError, bad_request
from x402lab.money import ATOMIC_PER_USD, usd_to_atomic

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
NON_TEXT_PART_TOKENS = 256
DEFAULT_OUTPUT_TOKENS = 4096
RPC_USD_PER_CREDIT = Decimal("0.0000007")
RPC_ERROR_CREDITS = 5
MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Price:
    """What one request costs: upstream USD, the agent charge in atomic units, and why."""

    upstream_usd: Decimal
    agent_atomic: int
    accuracy: str
    basis: dict[str, Any] = field(default_factory=dict)

    @property
    def agent_usd(self) -> float:
        return self.agent_atomic / ATOMIC_PER_USD


def usd(entry: Any) -> Decimal:
    """The ``usd`` of a fixture price object ``{"usd": x, ...}`` as an exact Decimal."""
    if isinstance(entry, dict):
        entry = entry.get("usd")
    if isinstance(entry, bool) or not isinstance(entry, int | float | str):
        raise LookupError("price entry without usd")
    return Decimal(str(entry))


class Pricer:
    """Applies the operator settings (priceMult, min and max charge) to upstream costs."""

    def __init__(self, settings: Any) -> None:
        self.price_mult = Decimal(str(settings.price_mult))
        self.min_atomic = usd_to_atomic(settings.min_charge_usd)
        self.max_atomic = usd_to_atomic(settings.max_charge_usd)

    def agent_atomic(self, upstream_usd: Decimal) -> int:
        """upstream × priceMult in atomic units, minimum applied. Raises charge_exceeds_max."""
        scaled = upstream_usd * self.price_mult
        if (scaled * ATOMIC_PER_USD).adjusted() >= getcontext().prec:
            # Too many digits to round to atomic units (Decimal would overflow): far above
            # any maximum charge.
            raise self._exceeds(float(scaled), upstream_usd)
        atomic = max(usd_to_atomic(scaled), self.min_atomic)
        if atomic > self.max_atomic:
            raise self._exceeds(atomic / ATOMIC_PER_USD, upstream_usd)
        return atomic

    def _exceeds(self, charge_usd: float, upstream_usd: Decimal) -> GatewayError:
        return GatewayError(
            400,
            "charge_exceeds_max",
            f"the computed charge {charge_usd:.6f} USD is above the maximum "
            f"charge {self.max_atomic / ATOMIC_PER_USD:g} USD; the request fails closed",
            hint="ask for less (fewer tokens, a shorter or smaller job, a cheaper model)",
            chargeUsd=charge_usd,
            maxChargeUsd=self.max_atomic / ATOMIC_PER_USD,
            upstreamUsd=float(upstream_usd),
        )

    def agent_usd_unclamped(self, upstream_usd: Decimal) -> float:
        return float(upstream_usd * self.price_mult)

    def price(self, upstream_usd: Decimal, accuracy: str, **basis: Any) -> Price:
        return Price(upstream_usd, self.agent_atomic(upstream_usd), accuracy, basis)

    def extensions(self, price: Price) -> dict[str, Any]:
        """The gateway's pricing extensions of a 402: upstreamUsd and priceMult."""
        return {"upstreamUsd": float(price.upstream_usd), "priceMult": float(self.price_mult)}

    # -- text --------------------------------------------------------------------------------

    def chat(self, model: Model, body: dict[str, Any]) -> Price:
        input_tokens = estimate_message_tokens(body.get("messages", []))
        output_tokens = requested_output_tokens(body, ("max_completion_tokens", "max_tokens"))
        return self._tokens(model, input_tokens, output_tokens)

    def responses(self, model: Model, body: dict[str, Any]) -> Price:
        input_tokens = estimate_responses_input_tokens(body)
        output_tokens = requested_output_tokens(body, ("max_output_tokens",))
        return self._tokens(model, input_tokens, output_tokens)

    def _tokens(self, model: Model, input_tokens: int, output_tokens: int) -> Price:
        pricing = model.pricing or {}
        upstream = (
            input_tokens * usd(pricing["input"]) + output_tokens * usd(pricing["output"])
        ) / MILLION
        return self.price(
            upstream, "estimate", inputTokens=input_tokens, outputTokens=output_tokens
        )

    def embeddings(self, model: Model, texts: list[str]) -> Price:
        tokens = sum(estimate_tokens(t) for t in texts)
        upstream = tokens * usd((model.pricing or {})["input"]) / MILLION
        return self.price(upstream, "estimate", inputTokens=tokens)

    # -- images ------------------------------------------------------------------------------

    def image(self, model: Model, *, n: int, resolution: str | None = None) -> Price:
        unit = image_unit_usd(model, resolution)
        return self.price(unit * n, "list_rate", unitUsd=float(unit), n=n)

    def edit(self, model: Model) -> Price:
        unit = usd((model.pricing or {})["inpaint"])
        return self.price(unit, "list_rate", unitUsd=float(unit), n=1)

    def upscale(self, model: Model, scale: int) -> Price:
        unit = usd((model.pricing or {})["upscale"][f"{scale}x"])
        return self.price(unit, "list_rate", unitUsd=float(unit), n=1, scale=scale)

    # -- audio -------------------------------------------------------------------------------

    def speech(self, model: Model, characters: int) -> Price:
        rate = usd((model.pricing or {})["input"])
        return self.price(characters * rate / MILLION, "list_rate", characters=characters)

    def transcription(self, model: Model, seconds: float) -> Price:
        rate = usd((model.pricing or {})["per_audio_second"])
        return self.price(Decimal(str(seconds)) * rate, "list_rate", seconds=seconds)

    def voice_clone(self, model: Model) -> Price:
        unit = usd((model.pricing or {})["voice_clone"])
        return self.price(unit, "list_rate", unitUsd=float(unit))

    # -- configured rates and RPC ------------------------------------------------------------

    def configured(self, path: str) -> Price:
        upstream = ROUTE_ACCURACY[path].configured_upstream_usd
        assert upstream is not None
        return self.price(upstream, "configured_rate")

    def rpc(self, credits: int) -> Price:
        return self.price(credits * RPC_USD_PER_CREDIT, "exact_agent_charge", credits=credits)


# -- estimates ------------------------------------------------------------------------------


def estimate_tokens(text: str) -> int:
    """ceil(len(text) / 4): the gateway's documented token estimate."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _content_tokens(content: Any) -> int:
    if isinstance(content, str):
        return estimate_tokens(content)
    if isinstance(content, list):
        total = 0
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                total += estimate_tokens(part["text"])
            elif isinstance(part, str):
                total += estimate_tokens(part)
            else:
                total += NON_TEXT_PART_TOKENS
        return total
    return 0


def estimate_message_tokens(messages: Any) -> int:
    if not isinstance(messages, list):
        return 0
    total = 0
    for message in messages:
        if isinstance(message, dict):
            total += MESSAGE_OVERHEAD_TOKENS + _content_tokens(message.get("content"))
    return total


def estimate_responses_input_tokens(body: dict[str, Any]) -> int:
    total = 0
    if isinstance(body.get("instructions"), str):
        total += estimate_tokens(body["instructions"])
    value = body.get("input")
    if isinstance(value, str):
        total += MESSAGE_OVERHEAD_TOKENS + estimate_tokens(value)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                total += MESSAGE_OVERHEAD_TOKENS + _content_tokens(item.get("content"))
            elif isinstance(item, str):
                total += MESSAGE_OVERHEAD_TOKENS + estimate_tokens(item)
    return total


def requested_output_tokens(body: dict[str, Any], keys: tuple[str, ...]) -> int:
    """The first of ``keys`` present (a positive integer), else DEFAULT_OUTPUT_TOKENS."""
    for key in keys:
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise bad_request(f"{key} must be a positive integer")
        return value
    return DEFAULT_OUTPUT_TOKENS


def image_unit_usd(model: Model, resolution: str | None) -> Decimal:
    """The list price of one image of ``model`` at ``resolution``. Raises 400 for a bad one."""
    pricing = model.pricing or {}
    tiers = pricing.get("resolutions")
    if isinstance(tiers, dict) and tiers:
        chosen = resolution or model.constraints.get("defaultResolution") or next(iter(tiers))
        if chosen not in tiers:
            raise bad_request(
                f"resolution {chosen!r} is not offered by {model.id}",
                hint=f"one of {', '.join(tiers)}",
            )
        return usd(tiers[chosen])
    if resolution is not None and resolution not in ("1K",):
        raise bad_request(f"{model.id} has a single resolution", hint="omit resolution")
    return usd(pricing["generation"])


# -- music and video quotes ----------------------------------------------------------------

_VIDEO_DURATION = re.compile(r"^(\d+)\s*s?$")


def quote_rejected(message: str, hint: str | None = None) -> GatewayError:
    return GatewayError(400, "quote_rejected", message, hint=hint)


def music_upstream(
    model: Model, *, duration_seconds: int | None, character_count: int | None
) -> tuple[Decimal, dict[str, Any]]:
    """Upstream USD of one music/audio job and the parameters it was priced on.

    Raises quote_rejected (400) for a duration outside the model's tiers or limits, or a
    per-character model without character_count.
    """
    spec = model.spec
    pricing = model.pricing or {}
    if "durations" in pricing:
        tiers = pricing["durations"]
        seconds = duration_seconds if duration_seconds is not None else spec.get("default_duration")
        if seconds is None:
            raise quote_rejected(f"{model.id} needs duration_seconds")
        for key, tier in tiers.items():
            if int(tier["min_seconds"]) <= seconds <= int(tier["max_seconds"]):
                return usd(tier), {"duration_seconds": seconds, "tier": key}
        options = spec.get("duration_options")
        allowed = (
            f"one of {', '.join(str(o) for o in options)}"
            if options
            else f"between {spec.get('min_duration')} and {spec.get('max_duration')} seconds"
        )
        raise quote_rejected(
            f"duration_seconds {seconds} is not offered by {model.id}", hint=allowed
        )
    if "per_thousand_characters" in pricing:
        if character_count is None:
            raise quote_rejected(
                f"{model.id} is priced per character: send character_count",
                hint="character_count = the number of characters of the prompt you will queue",
            )
        limit = spec.get("prompt_character_limit")
        if limit is not None and character_count > int(limit):
            raise quote_rejected(
                f"character_count {character_count} is above the limit of {model.id}",
                hint=f"at most {limit} characters",
            )
        rate = usd(pricing["per_thousand_characters"])
        return character_count * rate / 1000, {"character_count": character_count}
    if "per_second" in pricing:
        seconds = duration_seconds if duration_seconds is not None else spec.get("default_duration")
        low, high = spec.get("min_duration", 1), spec.get("max_duration")
        if seconds is None or seconds < low or (high is not None and seconds > high):
            raise quote_rejected(
                f"duration_seconds {seconds} is outside the limits of {model.id}",
                hint=f"between {low} and {high} seconds",
            )
        return seconds * usd(pricing["per_second"]), {"duration_seconds": seconds}
    if "generation" in pricing:
        return usd(pricing["generation"]), {}
    raise quote_rejected(f"{model.id} cannot be quoted")


def normalize_video_duration(value: Any) -> str | None:
    """'5s' for 5, '5', '5s' or 5.0; None when absent. Raises 400 for anything else."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise quote_rejected("duration must be like '5s'")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    match = _VIDEO_DURATION.match(str(value).strip())
    if not match:
        raise quote_rejected(f"duration {value!r} is not like '5s'")
    return f"{int(match.group(1))}s"


def video_upstream(model: Model, body: dict[str, Any]) -> tuple[Decimal, dict[str, Any]]:
    """Upstream USD of one video job and its normalized parameters.

    Every parameter must be among ``model_spec.constraints`` (docs/services.md, "Job lifecycle");
    otherwise quote_rejected (400) naming the allowed values.
    """
    constraints = model.constraints
    pricing = model.pricing or {}
    durations = list(constraints.get("durations", []))
    ratios = list(constraints.get("aspect_ratios", []))
    resolutions = list(constraints.get("resolutions", []))
    try:
        duration = normalize_video_duration(body.get("duration"))
    except GatewayError as exc:
        raise quote_rejected(exc.message, hint=f"one of {', '.join(durations)}") from None
    if duration is None:
        raise quote_rejected("duration is required", hint=f"one of {', '.join(durations)}")
    if duration not in durations:
        raise quote_rejected(
            f"duration {duration} is not offered by {model.id}",
            hint=f"one of {', '.join(durations)}",
        )
    ratio = body.get("aspect_ratio", ratios[0] if ratios else None)
    if ratio not in ratios:
        raise quote_rejected(
            f"aspect_ratio {ratio!r} is not offered by {model.id}",
            hint=f"one of {', '.join(ratios)}",
        )
    resolution = body.get("resolution", resolutions[0] if resolutions else None)
    if resolution not in resolutions:
        raise quote_rejected(
            f"resolution {resolution!r} is not offered by {model.id}",
            hint=f"one of {', '.join(resolutions)}",
        )
    audio_value = body.get("audio")
    if audio_value is not None and not isinstance(audio_value, bool):
        raise quote_rejected("audio must be a boolean")
    has_audio = bool(constraints.get("audio"))
    if audio_value and not has_audio:
        raise quote_rejected(f"{model.id} does not generate audio", hint="omit audio or send false")
    if audio_value is False and has_audio and not constraints.get("audio_configurable"):
        raise quote_rejected(f"{model.id} always generates audio", hint="omit audio")
    audio = has_audio if audio_value is None else bool(audio_value)
    seconds = int(duration[:-1])
    upstream = seconds * usd(pricing["per_second"][resolution])
    if audio and "audio_per_second" in pricing:
        upstream += seconds * usd(pricing["audio_per_second"])
    params = {"duration": duration, "aspect_ratio": ratio, "resolution": resolution, "audio": audio}
    return upstream, params

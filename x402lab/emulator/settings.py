"""Operator settings and fault flags of the local emulator.

``EmulatorSettings.from_env()`` reads the services' operator variables (docs/services.md,
"Operator settings"); everything else (faults, ports, job speed) comes from the ``serve`` flags
or from code. Settings are frozen: a running emulator never changes price or behaviour under a
test's feet.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from x402lab.errors import ConfigError

# The emulator's receiver. An address nobody holds a key for, derived once from
# keccak256("x402lab emulator receiver"), so a payment to it is obviously emulated.
RECEIVER_ADDRESS = "0xf4C9A2DcAa9B9DD3Da5ffFB061B2d01246251973"

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


@dataclass(frozen=True)
class Faults:
    """Failures the emulator causes on purpose, each a probability in [0, 1] or a delay in s.

    ``rate_429`` and ``rate_5xx`` answer paid routes (paid or unpaid requests) before any
    payment is looked at, so nothing settles. ``settle_fail_rate`` refuses at settlement
    (402 with a ``success: false`` receipt, nothing moved). ``paid_then_500_rate`` settles
    and then answers 500 without body or receipt: the ambiguous case clients must survive.
    ``answer_delay_s`` sends a settled answer's headers (with its receipt) at once and its
    body that long after: the client knows the payment settled before it has the answer.
    """

    rate_429: float = 0.0
    retry_after_s: float = 1.0
    rate_5xx: float = 0.0
    settle_fail_rate: float = 0.0
    paid_then_500_rate: float = 0.0
    latency_s: float = 0.0
    paid_latency_s: float = 0.0
    answer_delay_s: float = 0.0
    #: Structured answers (``response_format``) broken on purpose: invalid JSON, a missing or
    #: duplicated item, a value outside an enum, or truncation with ``finish_reason: length``.
    schema_violation_rate: float = 0.0
    #: Structured answers whose values (one field of an entry, per entry at this rate) are of
    #: the right type but outside the schema's constraints: past a bound, off a pattern, too
    #: long, too many items, outside an enum.
    constraint_violation_rate: float = 0.0

    def __post_init__(self) -> None:
        for name in (
            "rate_429",
            "rate_5xx",
            "settle_fail_rate",
            "paid_then_500_rate",
            "schema_violation_rate",
            "constraint_violation_rate",
        ):
            _check_range(name, getattr(self, name), 0.0, 1.0)
        for name in ("retry_after_s", "latency_s", "paid_latency_s", "answer_delay_s"):
            _check_range(name, getattr(self, name), 0.0, math.inf)


@dataclass(frozen=True)
class EmulatorSettings:
    """Everything that shapes the two emulated services. Raises ConfigError on bad values."""

    price_mult: float = 0.5
    max_charge_usd: float = 50.0
    min_charge_usd: float = 0.01
    report_usd: float = 0.01
    test_mode: bool = True
    # When set (with test_mode), the only payer whose payments are accepted.
    test_wallet: str | None = None
    # A secret: never in a repr (nor in repr(RunningEmulator), which shows these settings).
    library_secret: str | None = field(default=None, repr=False)
    facilitator_url: str | None = None
    pay_to: str = RECEIVER_ADDRESS
    seed: int = 0
    job_seconds: float = 3.0
    balance_usd: float = 100.0
    kv_configured: bool = True
    settlement_configured: bool = True
    #: Rate limits per payer (``emulator.limits``): requests and tokens a minute; None is off.
    rate_limit_rpm: int | None = None
    rate_limit_tpm: int | None = None
    faults: Faults = field(default_factory=Faults)
    #: A folder that keeps the chain and the media jobs across runs (``emulator.journal``);
    #: None: everything lives in memory and ends with the process.
    state_dir: str | None = None

    def __post_init__(self) -> None:
        _check_range("price_mult", self.price_mult, 0.0, math.inf, open_low=True)
        _check_range("min_charge_usd", self.min_charge_usd, 0.0, math.inf)
        _check_range("max_charge_usd", self.max_charge_usd, 0.0, math.inf, open_low=True)
        _check_range("report_usd", self.report_usd, 0.0, math.inf, open_low=True)
        _check_range("job_seconds", self.job_seconds, 0.0, math.inf)
        _check_range("balance_usd", self.balance_usd, 0.0, math.inf)
        if self.min_charge_usd > self.max_charge_usd:
            raise ConfigError("min_charge_usd must not exceed max_charge_usd")
        if not _ADDRESS.fullmatch(self.pay_to):
            raise ConfigError(f"pay_to is not a 0x address: {self.pay_to!r}")
        if self.test_wallet is not None and not _ADDRESS.fullmatch(self.test_wallet):
            raise ConfigError(f"test_wallet is not a 0x address: {self.test_wallet!r}")
        for name in ("rate_limit_rpm", "rate_limit_tpm"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"{name} must be a positive int or None, got {value!r}")
        if not isinstance(self.faults, Faults):
            raise ConfigError("faults must be a Faults instance")

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> EmulatorSettings:
        """Settings from the services' operator variables, then ``overrides`` on top.

        Reads X402_PROVIDER_PRICE_MULT, X402_PROVIDER_MAX_CHARGE_USD, X402_INTEL_REPORT_USD,
        X402_AGENT_TEST_MODE, X402_AGENT_TEST_WALLET, INTEL_LIBRARY_SECRET and
        X402_FACILITATOR_URL from ``environ`` (default ``os.environ``). With test mode
        explicitly off and no facilitator, settlement is not configured (reports answer 501).
        Raises ConfigError naming the variable for a bad value, or for an unknown override.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        if (raw := env.get("X402_PROVIDER_PRICE_MULT")) is not None:
            values["price_mult"] = _env_float("X402_PROVIDER_PRICE_MULT", raw, positive=True)
        if (raw := env.get("X402_PROVIDER_MAX_CHARGE_USD")) is not None:
            values["max_charge_usd"] = _env_float("X402_PROVIDER_MAX_CHARGE_USD", raw, True)
        if (raw := env.get("X402_INTEL_REPORT_USD")) is not None:
            values["report_usd"] = _env_float("X402_INTEL_REPORT_USD", raw, positive=True)
        if (raw := env.get("X402_AGENT_TEST_MODE")) is not None:
            values["test_mode"] = _env_bool("X402_AGENT_TEST_MODE", raw)
        if raw := env.get("X402_AGENT_TEST_WALLET", "").strip():
            if not _ADDRESS.fullmatch(raw):
                raise ConfigError(f"X402_AGENT_TEST_WALLET is not a 0x address: {raw[:50]!r}")
            values["test_wallet"] = raw
        if secret := env.get("INTEL_LIBRARY_SECRET"):
            values["library_secret"] = secret
        if url := env.get("X402_FACILITATOR_URL", "").strip():
            if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", url):
                raise ConfigError(f"X402_FACILITATOR_URL is not an http(s) URL: {url[:80]!r}")
            values["facilitator_url"] = url.rstrip("/")
        if values.get("test_mode") is False and "facilitator_url" not in values:
            values["settlement_configured"] = False
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ConfigError(f"unknown emulator setting(s): {', '.join(unknown)}")
        values.update(overrides)
        return cls(**values)

    def with_faults(self, **changes: Any) -> EmulatorSettings:
        """A copy with some fault flags changed (``settings.with_faults(rate_429=1.0)``)."""
        return replace(self, faults=replace(self.faults, **changes))


def _check_range(
    name: str, value: object, low: float, high: float, *, open_low: bool = False
) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if value < low or (open_low and value == low) or value > high:
        bound = f"> {low}" if open_low else f">= {low}"
        if high != math.inf:
            bound += f" and <= {high}"
        raise ConfigError(f"{name} must be {bound}, got {value!r}")


def _env_float(name: str, raw: str, positive: bool = False) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ConfigError(f"{name} is not a number: {raw[:40]!r}") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ConfigError(f"{name} must be a {'positive' if positive else 'finite'} number")
    return value


def _env_bool(name: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{name} must be true or false, got {raw[:40]!r}")

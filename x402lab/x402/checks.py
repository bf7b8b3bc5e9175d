"""Client-side checks of a challenge before anything is signed (docs/money.md, rule 1)."""

from __future__ import annotations

from dataclasses import dataclass

from x402lab.errors import PaymentRefused
from x402lab.money import MAX_ATOMIC, format_usd
from x402lab.x402._wire import ADDRESS_RE
from x402lab.x402.models import X402_VERSION, PaymentRequired, PaymentRequirements
from x402lab.x402.tokens import BASE_USDC, usdc_for


@dataclass(frozen=True)
class ChallengePolicy:
    """What a client is willing to sign. ``per_call_cap`` is in atomic units (None: no cap)."""

    allowed_networks: frozenset[str] = frozenset({BASE_USDC.network})
    pay_to: str | None = None
    max_timeout_seconds: int = 3600
    per_call_cap: int | None = None


def _short(address: str) -> str:
    return address if len(address) <= 12 else f"{address[:6]}…{address[-4:]}"


def refusal(requirements: PaymentRequirements, policy: ChallengePolicy) -> str | None:
    """Why ``requirements`` fails ``policy``, in plain words with USD figures; None if it passes."""
    r = requirements
    if r.scheme != "exact":
        return f"scheme {r.scheme[:40]!r} not supported (only exact)"
    if r.network not in policy.allowed_networks:
        allowed = ", ".join(sorted(policy.allowed_networks)) or "none"
        return f"network {r.network[:40]} not allowed (allowed: {allowed})"
    usdc = usdc_for(r.network)
    if usdc is None or r.asset.lower() != usdc.address.lower():
        return f"asset {_short(r.asset)} is not the USDC contract of {r.network}"
    name, version = r.extra.get("name"), r.extra.get("version")
    if name != usdc.name or version != usdc.version:
        return (
            f"EIP-712 domain name={name!r} version={version!r} differs from the real USDC "
            f"domain on {r.network} (name={usdc.name!r} version={usdc.version!r})"
        )
    if not ADDRESS_RE.fullmatch(r.pay_to):
        return f"payTo {r.pay_to[:42]!r} is not an EVM address"
    if policy.pay_to is not None and r.pay_to.lower() != policy.pay_to.lower():
        return f"payTo {_short(r.pay_to)} differs from pinned payee {_short(policy.pay_to)}"
    if not 0 < r.max_timeout_seconds <= policy.max_timeout_seconds:
        return f"maxTimeoutSeconds {r.max_timeout_seconds} outside 1..{policy.max_timeout_seconds}"
    if r.amount <= 0:
        return f"amount {format_usd(r.amount)} is not positive"
    if r.amount > MAX_ATOMIC:
        digits = len(str(r.amount))
        return f"amount of {digits} digits is out of range (at most {MAX_ATOMIC} atomic units)"
    if policy.per_call_cap is not None and r.amount > policy.per_call_cap:
        return f"amount {format_usd(r.amount)} above per-call cap {format_usd(policy.per_call_cap)}"
    return None


def select_requirements(challenge: PaymentRequired, policy: ChallengePolicy) -> PaymentRequirements:
    """The first ``accepts`` entry that passes ``policy``.

    Raises PaymentRefused naming the first entry's failure when none passes.
    """
    if challenge.x402_version != X402_VERSION:
        raise PaymentRefused(f"unsupported x402Version {challenge.x402_version}")
    reasons: list[str] = []
    for requirements in challenge.accepts:
        reason = refusal(requirements, policy)
        if reason is None:
            return requirements
        reasons.append(reason)
    if not reasons:
        raise PaymentRefused("the challenge offers no payment option")
    raise PaymentRefused(reasons[0], all_reasons=tuple(reasons))

"""USDC amounts as integers of atomic units (6 decimals), and their USD display.

Money is an ``int`` everywhere in x402lab; floats appear only in ``*_usd`` display columns.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

from x402lab.errors import ConfigError

USDC_DECIMALS = 6
ATOMIC_PER_USD = 10**USDC_DECIMALS
#: The largest amount x402lab handles: what a ledger's 64-bit integer column holds (about
#: 9.2 trillion USD, far above USDC's whole supply). A challenge asking more is refused.
MAX_ATOMIC = 2**63 - 1


def usd_to_atomic(usd: float | int | str | Decimal) -> int:
    """Convert a USD amount to atomic units, rounding half to even at the 6th decimal.

    Raises ConfigError for a value that is not a finite number.
    """
    try:
        value = Decimal(str(usd)) if not isinstance(usd, Decimal) else usd
    except (InvalidOperation, ValueError) as exc:
        raise ConfigError(f"not a USD amount: {usd!r}") from exc
    if not value.is_finite():
        raise ConfigError(f"not a finite USD amount: {usd!r}")
    return int((value * ATOMIC_PER_USD).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def atomic_to_usd(atomic: int | None) -> float | None:
    """Display value in USD of an atomic amount (``None`` stays ``None``: unknown is not 0)."""
    if atomic is None:
        return None
    return int(atomic) / ATOMIC_PER_USD


def atomic_to_decimal(atomic: int) -> Decimal:
    """Exact USD value of an atomic amount."""
    return Decimal(int(atomic)) / ATOMIC_PER_USD


def exact_usd(atomic: int | None) -> Decimal | None:
    """The exact USD value of an atomic amount, as a Decimal (sums of them are exact);
    ``None`` stays ``None``: unknown is not 0. Every money figure a result object shows."""
    return None if atomic is None else atomic_to_decimal(atomic)


def format_usd(atomic: int | None) -> str:
    """``'0.012500 USD'``-style text, trimmed to at least 2 decimals; ``'unknown'`` for None."""
    if atomic is None:
        return "unknown"
    text = f"{atomic_to_decimal(atomic):.6f}".rstrip("0")
    whole, _, frac = text.partition(".")
    return f"{whole}.{frac.ljust(2, '0')} USD"


def budget_verdict(fits: bool, left_atomic: int) -> str:
    """How an estimate or a quote says whether it fits: ``'fits the budget left (0.40 USD)'``."""
    return f"{'fits' if fits else 'does NOT fit'} the budget left ({format_usd(left_atomic)})"


def parse_atomic(value: object) -> int:
    """Parse an atomic amount from the wire (a string of digits, or an int).

    Raises ConfigError for anything else (floats, signs, empty strings).
    """
    if isinstance(value, bool):
        raise ConfigError(f"not an atomic amount: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ConfigError(f"negative atomic amount: {value!r}")
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    raise ConfigError(f"not an atomic amount (want a string of digits): {value!r}")

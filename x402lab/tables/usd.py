"""USD money columns: exact decimals derived from int atomic amounts, in one place.

Every ``*_usd`` column that holds an amount of money (paid, quoted, settled, spent, saved) is
``decimal128(18, 6)`` in Arrow and ``pd.ArrowDtype(pa.decimal128(18, 6))`` in pandas: six
decimals are USDC's base unit, so a sum of the column equals the chain's transfers to the
atomic unit and prints without float noise (``0.100000``, not ``0.10000000000000003``). They
group, sum, compare and compute with numbers; ``.astype(float)`` gives floats for what pandas
does not do on decimals (``describe()``, ``cumsum()``). One value is a ``decimal.Decimal``
and a null is ``pd.NA``. Rates and ratios (``usd_per_1m``, ``usd_per_1k``), the provider's
``upstream_usd`` and the price list's ``estimate_usd`` stay float64: they are not amounts
paid.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from x402lab.money import USDC_DECIMALS, atomic_to_decimal

#: The Arrow type of a USD amount: 18 digits, 6 of them decimals (USDC's base unit).
USD = pa.decimal128(18, USDC_DECIMALS)
#: The pandas dtype of a USD amount.
USD_DTYPE = pd.ArrowDtype(USD)

_QUANTUM = Decimal(1).scaleb(-USDC_DECIMALS)
_ONE_ATOMIC = pa.scalar(_QUANTUM, pa.decimal128(USDC_DECIMALS + 1, USDC_DECIMALS))


def usd_array(atomic: Sequence[int | None] | pa.Array | pa.ChunkedArray) -> pa.Array:
    """Atomic amounts (None for unknown) as an exact USD array, nulls kept."""
    ints = (
        atomic if isinstance(atomic, pa.Array | pa.ChunkedArray) else pa.array(atomic, pa.int64())
    )
    exact = pc.multiply(pc.cast(ints, pa.decimal128(19, 0)), _ONE_ATOMIC)  # int64 has 19 digits
    return pc.cast(exact, USD)


def usd_value(atomic: int | None) -> Decimal | None:
    """One atomic amount as the exact USD value a USD column holds (None stays None)."""
    return None if atomic is None else atomic_to_decimal(atomic).quantize(_QUANTUM)


def usd_series(atomic: pd.Series) -> pd.Series:
    """An atomic amount column (int64 or Int64) as an exact USD column, index kept."""
    ints = pa.array(atomic.astype("Int64"), pa.int64(), from_pandas=True)
    return pd.Series(usd_array(ints), index=atomic.index, name=atomic.name, dtype=USD_DTYPE)


def atomic_of(usd: pd.Series) -> pd.Series:
    """A USD column (exact decimal, or floats or Decimals saved before the columns were exact)
    back to Int64 atomic amounts: exact for a decimal column, a float rounded to the nearest
    base unit (it was atomic / 10**6, so that is exact too)."""
    if isinstance(usd.dtype, pd.ArrowDtype) and pa.types.is_decimal(usd.dtype.pyarrow_dtype):
        scaled = pc.multiply(pa.array(usd), pa.scalar(10**USDC_DECIMALS, pa.int64()))
        ints = pc.cast(scaled, pa.int64()).to_pylist()
        return pd.Series(ints, index=usd.index, name=usd.name, dtype="Int64")
    values = pd.to_numeric(usd, errors="coerce").astype("Float64")
    return (values * 10**USDC_DECIMALS).round().astype("Int64")

"""How sure a share measured on a sample is: the Wilson score interval, and the sample size
at which a measured share would clear a target.

The Wilson interval (Wilson, 1927) stays inside [0, 1] and keeps its coverage near 95% for
the small samples (50 to 200 labelled rows) and the shares near 1 that choosing a model
involves, where the textbook ``p ± 1.96·sqrt(p(1-p)/n)`` gives intervals past 1 or of width 0.
"""

from __future__ import annotations

import math

#: The normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054


def wilson(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval (low, high) of ``successes`` out of ``n`` (nan, nan for
    ``n`` = 0)."""
    if n <= 0:
        return math.nan, math.nan
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def rows_to_reach(share: float, n: int, target: float, limit: int = 1_000_000) -> int | None:
    """The fewest rows (``n`` or more) at which a measured ``share`` would have its Wilson
    low bound at ``target`` or above; None when no sample size would (``share`` below the
    target, or a target of 1) or more than ``limit`` rows are needed."""
    if not share >= target or target >= 1.0:
        return None

    def reaches(rows: int) -> bool:
        return wilson(share * rows, rows)[0] >= target

    if reaches(n):
        return n
    low, high = n, max(n, 1)
    while not reaches(high):  # the low bound rises with the rows at a fixed share
        low, high = high, high * 2
        if high > limit:
            return None
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high

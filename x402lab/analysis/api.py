"""The cost-analysis methods of the Lab."""

from __future__ import annotations


class CostMixin:
    """``spend`` and ``cost_report``."""

"""Cost analysis: spend tables and plots from the ledger.

``spend`` (pure functions over ledger rows), ``pricing`` (minimum-charge padding, rates),
``batches`` (batch results: cost per row, drift, cache savings), ``plots`` (matplotlib figures,
Agg-safe), ``report`` (``CostReport`` and ``build_report``), ``api`` (the Lab methods).
"""

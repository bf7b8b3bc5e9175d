"""Cost analysis: spend tables and plots from the ledger.

``spend`` (pure functions over ledger rows), ``pricing`` (minimum-charge padding, rates),
``batches`` (batch results: paid vs cost, cost per row, drift, cache savings), ``budgets``
(caps, what is left, burn rate and forecast, paid answers lost: over a ledger, no lab
needed), ``jobs`` (media quote vs
queue payment), ``library`` (report library savings, charged vs paid), ``plots``
(matplotlib figures, Agg-safe), ``report`` (``CostReport`` and ``build_report``),
``schemas`` (the declared Arrow schemas) and ``api`` (``lab.spend``, ``lab.cost_report``).

Population estimates from a few gold labels (``xl.shares``, ``xl.mean``, ``xl.gold_sample``;
docs/estimates.md): ``estimates`` (the functions), ``estimates_math`` (PPI++ in numpy),
``estimates_gold`` (checking the gold rows), ``estimates_sample`` (drawing them),
``estimates_result`` (the ``Estimates`` card) and ``estimates_plot`` (its figure).
"""

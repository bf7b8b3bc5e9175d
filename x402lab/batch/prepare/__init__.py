"""Everything decided before the first signature: what a batch will send, what it costs, and
the refusal of what cannot finish.

``_request_plan`` (rows, their distinct items and the paid requests: ``Plan``), ``_chat_task``
(a chat batch's task and plan, plain or typed), ``_packing`` (rows per typed request),
``_estimate`` (the free, exact quote: each distinct request's 402), ``_price_probe`` (a fresh
lab's price learned with the catalog) and ``_preflight`` (the quote against the budget).
"""

from x402lab.batch.prepare._chat_task import ChatTask, plan_chat
from x402lab.batch.prepare._estimate import quote_plan
from x402lab.batch.prepare._packing import rows_per_request_of
from x402lab.batch.prepare._preflight import (
    LastQuote,
    payable_within,
    per_call_cap,
    refuse_unfit,
    requests_to_buy,
)
from x402lab.batch.prepare._price_probe import checked_and_priced
from x402lab.batch.prepare._request_plan import Plan, plan_of

__all__ = [
    "ChatTask",
    "LastQuote",
    "Plan",
    "checked_and_priced",
    "payable_within",
    "per_call_cap",
    "plan_chat",
    "plan_of",
    "quote_plan",
    "refuse_unfit",
    "requests_to_buy",
    "rows_per_request_of",
]

"""How many rows a typed request carries, and what each row's item is.

A typed batch sends its rows in packs (``typed_codec``: the bodies, the answers per row,
re-asking). ``rows_per_request=N`` packs N rows; ``"auto"`` picks the fewest rows whose
pack's price reaches the gateway's minimum charge, so no pack pays padding, within the model's
limits.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pandas as pd

from x402lab.batch.kinds import TypedCodec
from x402lab.errors import ConfigError
from x402lab.pricing import estimate_tokens, raw_estimate_usd
from x402lab.routes import CHAT as CHAT_PATH

#: The largest pack ``rows_per_request="auto"`` picks. Past a few dozen rows the minimum
#: charge is already divided to under 3% of a single-row price, while a longer answer is more
#: likely to be cut at max_tokens or to drop an item, models err more per row in longer
#: packs, and one broken answer sends more rows back to be asked again.
AUTO_MAX_ROWS = 40
#: Share of the model's context window a pack's prompt may fill with ``"auto"``.
AUTO_CONTEXT_SHARE = 0.5


def typed_items(
    inputs: pd.DataFrame, prompt: str | None, messages: list[Any]
) -> tuple[str, list[dict[str, Any]]]:
    """The task text and each row's item: with a ``prompt`` template, the template is the
    task and an item holds the row's values of the columns it names (so a word of the task
    is never read as a word of the row); else the row's prompt text is the item.

    Raises ConfigError for rows given as message lists (a typed batch takes text).
    """
    from x402lab.batch.inputs import template_columns

    if prompt is not None:
        columns = template_columns(prompt, inputs.columns)
        names = [str(column) for column in columns]
        if not names:  # a task that names no column: every row's item is empty
            return prompt, [{} for _ in range(len(inputs))]
        values = [inputs[column].astype(str).tolist() for column in columns]
        return prompt, [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]
    if any(not isinstance(m, str) for m in messages):
        raise ConfigError(
            "a typed batch (labels= or schema=) takes text prompts, not message lists: give"
            " a 'prompt' column of text or prompt='... {column} ...'"
        )
    return "", [{"input": m} for m in messages]


def rows_per_request_of(value: Any) -> int | str:
    """``rows_per_request`` checked: an int ≥ 1 or ``"auto"``. Raises ConfigError."""
    if value == "auto":
        return "auto"
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"rows_per_request must be an int ≥ 1 or 'auto', got {value!r}")
    return value


def auto_rows_per_request(
    codec: TypedCodec,
    items: Sequence[Mapping[str, Any]],
    pricing: Mapping[str, Any],
    entry: Mapping[str, Any] | None,
) -> int:
    """The pack size ``"auto"`` picks: the fewest rows whose pack's price reaches the minimum
    charge (so no pack pays padding), within the model's output limit and
    ``AUTO_CONTEXT_SHARE`` of its context window, and at most ``AUTO_MAX_ROWS``."""
    if not items:
        return 1
    spec = (entry or {}).get("model_spec") or {}
    out_limit = spec.get("maxCompletionTokens")
    context = spec.get("availableContextTokens")
    sample = list(items[:AUTO_MAX_ROWS])
    row_tokens = max(
        1, math.ceil(sum(estimate_tokens(json.dumps(i)) for i in sample) / len(sample))
    )
    limit = AUTO_MAX_ROWS
    if isinstance(out_limit, int) and out_limit > 0:
        limit = min(limit, max(1, (out_limit - 16) // codec.tokens_per_row))
    if isinstance(context, int) and context > 0:
        limit = min(limit, max(1, int(context * AUTO_CONTEXT_SHARE) // (row_tokens + 8)))
    minimum = pricing.get("minChargeUsd")
    if not isinstance(minimum, int | float):
        return limit
    price_mult = Decimal(str(pricing.get("priceMult", 1)))
    for n in range(1, limit + 1):
        pack = [sample[i % len(sample)] for i in range(n)]
        raw = raw_estimate_usd(CHAT_PATH, codec.body(pack), pricing)
        if raw is not None and raw * price_mult >= Decimal(str(minimum)):
            return n
    return limit

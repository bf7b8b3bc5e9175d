"""Packed typed requests: several rows in one paid chat request, and their answers per row.

At the gateway's minimum charge (0.01 USD a request against a few millionths of a dollar of
model work for a one-line classification) one row per request is almost all padding. A pack
sends the rows as one JSON array of items (``{"id": "0", ...}`` in the pack's order) and asks
for ``{"items": [{"id": "0", <fields>}, ...]}`` under a strict JSON Schema
(``typed.OutputSpec``). ``TypedCodec.split`` reads a pack's answer back per row: an entry
missing, duplicated or not valid under the whole schema (``typed.OutputSpec.check``:
``jsonschema``, or the pydantic model's own validation) marks its row to be asked again; the runner
asks those rows again in smaller packs, then singly (``REASKS``), then leaves them
``invalid``, raw text and error kept. Every row is claimed and stored under its own key (the
key of its request as a pack of one), so a re-run with any pack size pays nothing for a row
already answered. The rows of a pack share its payment in atomic units (``items.split_atomic``),
re-asks included: the shares add up exactly to what was paid.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

import pandas as pd

from x402lab.batch.items import ItemResult, split_atomic
from x402lab.batch.plan import ChatCodec
from x402lab.batch.typed import ITEMS, OutputSpec
from x402lab.errors import ConfigError
from x402lab.gateway.results import ChatResult
from x402lab.pricing import estimate_tokens, raw_estimate_usd
from x402lab.routes import CHAT as CHAT_PATH

#: Rounds of asking again for the rows of a pack whose answer did not hold them validly: the
#: first in packs half the size of the pack that failed (its failed rows together), the
#: second one row per request; then the row is ``invalid``.
REASKS = 2
#: The largest pack ``rows_per_request="auto"`` picks. Past a few dozen rows the minimum
#: charge is already divided to under 3% of a single-row price, while a longer answer is more
#: likely to be cut at max_tokens or to drop an item, models err more per row in longer
#: packs, and one broken answer sends more rows back to be asked again.
AUTO_MAX_ROWS = 40
#: Share of the model's context window a pack's prompt may fill with ``"auto"``.
AUTO_CONTEXT_SHARE = 0.5

_TASK = (
    "Answer each item of the JSON array below on its own, following the task. Reply with one"
    ' JSON object {"items": [...]} holding exactly one entry per item, with the item\'s "id"'
    " and the fields of the schema, and nothing else."
)


@dataclass(frozen=True)
class TypedRequests:
    """How a typed batch's items become request bodies: the task, the schema and the model."""

    model: str
    spec: OutputSpec
    instruction: str
    system: str | None
    tokens_per_row: int
    params: Mapping[str, Any]

    def body(self, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The chat body of one pack (its items numbered in order from "0")."""
        numbered = [{"id": str(i), **item} for i, item in enumerate(items)]
        protocol = _TASK + self.spec.instructions()
        system = protocol if self.system is None else f"{self.system}\n\n{protocol}"
        task = f"Task: {self.instruction}\n\n" if self.instruction else ""
        user = f"{task}Items (JSON):\n{json.dumps(numbered, ensure_ascii=False)}"
        return {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "max_tokens": 16 + self.tokens_per_row * len(items),
            "response_format": self.spec.response_format(),
            **self.params,
        }


def typed_items(
    inputs: pd.DataFrame, prompt: str | None, messages: list[Any]
) -> tuple[str, list[dict[str, Any]]]:
    """The task text and each row's item: with a ``prompt`` template, the template is the
    task and an item holds the row's values of the columns it names (so a word of the task
    is never read as a word of the row); else the row's prompt text is the item.

    Raises ConfigError for rows given as message lists (a typed batch takes text).
    """
    from x402lab.batch.templates import template_columns

    if prompt is not None:
        columns = template_columns(prompt, inputs.columns)
        records = inputs[columns].astype(str).to_dict("records")
        return prompt, [{str(k): v for k, v in r.items()} for r in records]
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
    requests: TypedRequests,
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
        limit = min(limit, max(1, (out_limit - 16) // requests.tokens_per_row))
    if isinstance(context, int) and context > 0:
        limit = min(limit, max(1, int(context * AUTO_CONTEXT_SHARE) // (row_tokens + 8)))
    minimum = pricing.get("minChargeUsd")
    if not isinstance(minimum, int | float):
        return limit
    price_mult = Decimal(str(pricing.get("priceMult", 1)))
    for n in range(1, limit + 1):
        pack = [sample[i % len(sample)] for i in range(n)]
        raw = raw_estimate_usd(CHAT_PATH, requests.body(pack), pricing)
        if raw is not None and raw * price_mult >= Decimal(str(minimum)):
            return n
    return limit


@dataclass(frozen=True)
class Reasked:
    """Rows being asked again: the round (1, 2, ...) and each row's result so far, whose
    quoted and paid shares the next request's shares are added to."""

    round: int
    before: dict[int, ItemResult] = field(default_factory=dict)

    @classmethod
    def after(cls, asked: Reasked | None, results: Mapping[int, ItemResult]) -> Reasked:
        return cls(
            (asked.round if asked else 0) + 1, {**(asked.before if asked else {}), **results}
        )

    def request(
        self, body: Mapping[str, Any], key_of: Callable[[Mapping[str, Any]], str]
    ) -> tuple[str, dict[str, Any]]:
        """The key (``key_of``: the plan's) and body of the request asking again: the pack's
        body with the round said in its system message, so it is a request of its own (never
        the same key as the request whose answer failed, which settled)."""
        messages = [dict(m) for m in body["messages"]]
        messages[0]["content"] = f"{messages[0]['content']}\n(Asked again, round {self.round}.)"
        again = {**body, "messages": messages}
        return key_of(again), again

    def carry(self, item: int, result: ItemResult) -> ItemResult:
        """``result`` with the shares the row paid before added (the shares of every request
        a row was in add up to what those requests paid)."""
        earlier = self.before.get(item)
        if earlier is None:
            return result
        return replace(
            result,
            quoted_atomic=_add(result.quoted_atomic, earlier.quoted_atomic),
            paid_atomic=_add(result.paid_atomic, earlier.paid_atomic),
        )


def _add(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b


class TypedCodec(ChatCodec):
    """Typed answers per row: the row's entry as JSON text (``response``), the size of the
    pack that answered it, and why it is not valid (``invalid``, None when it is), stored as
    JSON with the row (``ChatCodec``'s storage)."""

    columns = (*ChatCodec.columns, "pack_size", "invalid")

    def __init__(self, spec: OutputSpec) -> None:
        self.spec = spec

    def split(self, body: Any, n: int) -> list[tuple[Any, ...]]:
        result = ChatResult.from_response(CHAT_PATH, body, None)
        text, finish = result.text or "", result.finish_reason
        prompt = split_atomic(result.prompt_tokens, n)
        completion = split_atomic(result.completion_tokens, n)

        def row(i: int, raw: str | None, problem: str | None) -> tuple[Any, ...]:
            return (raw, result.reasoning, finish, prompt[i], completion[i], n, problem)

        entries, problem = _entries(text, finish)
        if entries is None:
            return [row(i, text, problem) for i in range(n)]
        by_id: dict[str, list[Any]] = {}
        for entry in entries:
            if isinstance(entry, dict):
                by_id.setdefault(str(entry.get("id")), []).append(entry)
        rows = []
        for i in range(n):
            found = by_id.get(str(i), [])
            if len(found) != 1:
                why = "missing from" if not found else f"{len(found)} times in"
                rows.append(row(i, text if n == 1 else None, f"item {i} {why} the answer"))
                continue
            entry = {k: v for k, v in found[0].items() if k != "id"}
            raw = json.dumps(entry, ensure_ascii=False)
            rows.append(row(i, raw, self.spec.check(entry)))
        return rows

    @staticmethod
    def retry(data: tuple[Any, ...] | None) -> str | None:
        """Why a row's answer must be asked again (None when it is valid)."""
        return None if data is None else data[-1]


def _entries(text: str, finish: str | None) -> tuple[list[Any] | None, str | None]:
    """The entries of a pack's answer, or None and why it cannot be read."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        cut = " (cut at max_tokens)" if finish == "length" else ""
        return None, f"the answer is not valid JSON{cut}: {exc}"
    entries = value.get(ITEMS) if isinstance(value, dict) else None
    if not isinstance(entries, list):
        return None, f'the answer has no "{ITEMS}" array'
    return entries, None


def with_typed_columns(
    frame: pd.DataFrame, spec: OutputSpec, to_pandas: Callable[[Any], pd.DataFrame]
) -> pd.DataFrame:
    """``frame`` (a batch_chat result with the codec's ``invalid`` column) with one typed
    column per field after ``response``; an invalid row's status is ``invalid`` and its error
    says why. A stored answer is checked again: a pydantic validator is not part of the
    request, so one made stricter since the answer was bought still decides."""
    rows = zip(frame.pop("invalid"), frame["status"], frame["response"], strict=True)
    problems = [
        spec.check(json.loads(raw)) if status == "cached" and pd.isna(why) and isinstance(raw, str)
        else why
        for why, status, raw in rows
    ]  # fmt: skip
    invalid = pd.Series(problems, index=frame.index, dtype=object)
    frame["pack_size"] = frame["pack_size"].astype("Int64")
    answered = frame["status"].isin(["ok", "cached"])
    bad = answered & invalid.notna()
    frame.loc[bad, "status"] = "invalid"
    frame.loc[bad, "error"] = invalid[bad]
    valid = (answered & invalid.isna()).tolist()
    typed = to_pandas(spec.table(frame["response"].tolist(), valid))
    typed.index = frame.index
    at = frame.columns.get_loc("response")
    assert isinstance(at, int)
    return pd.concat([frame.iloc[:, :at], typed, frame.iloc[:, at:]], axis=1)

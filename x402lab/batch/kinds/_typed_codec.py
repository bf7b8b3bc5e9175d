"""Typed chat batches: packs of rows in one paid request, their answers per row, re-asking.

At the gateway's minimum charge (0.01 USD a request against a few millionths of a dollar of
model work for a one-line classification) one row per request is almost all padding. A pack
sends the rows as one JSON array of items (``{"id": "0", ...}`` in the pack's order) and asks
for ``{"items": [{"id": "0", <fields>}, ...]}`` under a strict JSON Schema
(``typed.OutputSpec``); a single row is a pack of one. ``TypedCodec.split`` reads a pack's
answer back per row: an entry missing, duplicated or not valid under the whole schema
(``typed.OutputSpec.read``: ``jsonschema_rs``, or the pydantic model's own validation) marks
its row to be asked again (``AskAgain``): the runner asks those rows again in smaller packs,
then singly, then leaves them ``invalid``, raw text and error kept. Every row is claimed and
stored under its own key (the key of its request as a pack of one), so a re-run with any pack
size pays nothing for a row already answered. The rows of a pack share its payment in atomic
units (``items.split_atomic``), re-asks included: the shares add up exactly to what was paid.
How many rows a pack holds is ``batch.prepare._packing``'s.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import pandas as pd
import pyarrow as pa

from x402lab.batch.kinds._codec import Answer, JsonRequests
from x402lab.batch.kinds._typed import ITEMS, OutputSpec
from x402lab.batch.output import chat_table, join_inputs, split_atomic
from x402lab.gateway.results import ChatResult
from x402lab.routes import CHAT

#: Rounds of asking again for the rows of a pack whose answer did not hold them validly: the
#: first in packs half the size of the pack that failed (its failed rows together), the
#: second one row per request; then the row is ``invalid``.
REASKS = 2
#: What a request asking rows again adds to its system message (the planning router
#: recognises such requests by it).
ASKED_AGAIN = "(Asked again, round {round}.)"

_TASK = (
    "Answer each item of the JSON array below on its own, following the task. Reply with one"
    ' JSON object {"items": [...]} holding exactly one entry per item, with the item\'s "id"'
    " and the fields of the schema, and nothing else."
)


class TypedAnswer(NamedTuple):
    """One typed row's answer, read and checked once (``TypedCodec.split``, or ``decode``
    for a stored one) and carried as it is to the result frame. The ledger stores every
    field but ``values`` (``TypedCodec.encode``), which are derived from ``response``."""

    #: The row's entry as JSON text (its ``id`` removed), or the whole answer's text when
    #: no entry of the row could be read from it.
    response: str | None
    reasoning: str | None
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    #: How many rows the request that answered it carried.
    pack_size: int | None
    #: Why the answer does not hold the row validly; None when it does.
    invalid: str | None
    #: The typed columns' values (``OutputSpec.read``), None unless the answer is valid.
    values: tuple[Any, ...] | None = None


#: How many fields of a ``TypedAnswer`` the ledger stores (all but ``values``), in order.
_STORED = len(TypedAnswer._fields) - 1
_NO_ANSWER = TypedAnswer(*(None,) * len(TypedAnswer._fields))


@dataclass(frozen=True)
class AskAgain:
    """A typed row is asked again while its answer is not valid (its ``invalid``),
    ``REASKS`` rounds, the round said in the request's system message."""

    rounds: int = REASKS

    def why(self, answer: Answer | None) -> str | None:
        return answer.invalid if isinstance(answer, TypedAnswer) else None

    def again(self, body: Mapping[str, Any], round: int) -> dict[str, Any]:
        messages = [dict(m) for m in body["messages"]]
        note = ASKED_AGAIN.format(round=round)
        messages[0]["content"] = f"{messages[0]['content']}\n{note}"
        return {**body, "messages": messages}


@dataclass(frozen=True)
class TypedCodec(JsonRequests):
    """Typed answers per row (``TypedAnswer``), stored as JSON with the row (as a chat row
    is). An item is a mapping of the row's values."""

    model: str
    spec: OutputSpec
    #: The task every item is answered under (a ``prompt`` template), or "".
    instruction: str
    system: str | None
    #: The longest answer of one row, in tokens (a pack's ``max_tokens`` grows with it).
    tokens_per_row: int
    params: Mapping[str, Any] = field(default_factory=dict)
    unchecked: frozenset[str] = frozenset()

    kind = "chat"
    path = CHAT
    columns = TypedAnswer._fields
    reask: ClassVar[AskAgain] = AskAgain()

    @functools.cached_property
    def _system(self) -> str:
        """The system message of every pack (the same text, built once per batch)."""
        protocol = _TASK + self.spec.instructions()
        return protocol if self.system is None else f"{self.system}\n\n{protocol}"

    @functools.cached_property
    def _task(self) -> str:
        return f"Task: {self.instruction}\n\n" if self.instruction else ""

    def body(self, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The chat body of one pack (its items numbered in order from "0"); its system
        message and ``response_format`` are the batch's, shared by every body."""
        numbered = [{"id": str(i), **item} for i, item in enumerate(items)]
        user = f"{self._task}Items (JSON):\n{json.dumps(numbered, ensure_ascii=False)}"
        return {
            "model": self.model,
            "messages": [
                {"role": "system", "content": self._system},
                {"role": "user", "content": user},
            ],
            "max_tokens": 16 + self.tokens_per_row * len(items),
            "response_format": self.spec.response_format(),
            **self.params,
        }

    def split(self, answer: Any, n: int) -> list[Answer]:
        """Each of the ``n`` rows' ``TypedAnswer`` from a pack's paid answer: its entry found
        by id, checked once against the whole schema."""
        result = ChatResult.from_response(CHAT, answer, None)
        text, finish = result.text or "", result.finish_reason
        prompt = split_atomic(result.prompt_tokens, n)
        completion = split_atomic(result.completion_tokens, n)

        def row(
            i: int, raw: str | None, problem: str | None, values: tuple[Any, ...] | None = None
        ) -> TypedAnswer:
            return TypedAnswer(
                raw, result.reasoning, finish, prompt[i], completion[i], n, problem, values
            )

        entries, problem = _entries(text, finish)
        if entries is None:
            return [row(i, text, problem) for i in range(n)]
        by_id: dict[str, list[Any]] = {}
        for entry in entries:
            if isinstance(entry, dict):
                by_id.setdefault(str(entry.get("id")), []).append(entry)
        rows: list[Answer] = []
        for i in range(n):
            found = by_id.get(str(i), [])
            if len(found) != 1:
                why = "missing from" if not found else f"{len(found)} times in"
                rows.append(row(i, text if n == 1 else None, f"item {i} {why} the answer"))
                continue
            entry = {k: v for k, v in found[0].items() if k != "id"}
            raw = json.dumps(entry, ensure_ascii=False)
            values, problem = self.spec.read(entry, raw)
            rows.append(row(i, raw, problem, values))
        return rows

    def encode(self, answer: Answer) -> bytes:
        """A typed row's answer as the ledger stores it: a JSON array of its fields but
        ``values`` (the stored form since typed rows were first stored)."""
        return json.dumps(answer[:_STORED]).encode()

    def decode(self, blob: bytes) -> TypedAnswer:
        """A stored answer, checked again: a pydantic validator is not part of the request,
        so one made stricter since the answer was bought still decides."""
        answer = TypedAnswer(*json.loads(blob))
        if answer.invalid is not None or not isinstance(answer.response, str):
            return answer
        values, problem = self.spec.read(None, answer.response)
        return answer._replace(invalid=problem, values=values)

    def empty(self) -> Answer:
        return _NO_ANSWER


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


def typed_frame(
    inputs: pd.DataFrame, columns: dict[str, list[Any]], spec: OutputSpec
) -> pd.DataFrame:
    """The result of a typed batch: the ``inputs`` joined to the rows' ``columns``
    (``TypedCodec.columns`` and the cost columns, ``sinks.ColumnSink``), one typed column
    per field (from each row's ``values``, read when its answer was) before ``response``,
    and ``pack_size`` last. Statuses and errors are the sink's (``output.shown``)."""
    values = columns.pop("values")
    pack_size = pa.array(columns.pop("pack_size"), type=pa.int64())
    del columns["invalid"]  # an invalid row's status and error say it
    typed, chat = spec.table(values), chat_table(columns)
    table = pa.Table.from_arrays(
        [*typed.columns, *chat.columns, pack_size],
        schema=pa.schema([*typed.schema, *chat.schema, pa.field("pack_size", pa.int64())]),
    )
    return join_inputs(inputs, table)

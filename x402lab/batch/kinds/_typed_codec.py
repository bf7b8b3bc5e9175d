"""Typed chat batches: packs of rows in one paid request, their answers per row, re-asking.

At the gateway's minimum charge (0.01 USD a request against a few millionths of a dollar of
model work for a one-line classification) one row per request is almost all padding. A pack
sends the rows as one JSON array of items (``{"id": "0", ...}`` in the pack's order) and asks
for ``{"items": [{"id": "0", <fields>}, ...]}`` under a strict JSON Schema
(``typed.OutputSpec``); a single row is a pack of one. ``TypedCodec.split`` reads a pack's
answer back per row: an entry missing, duplicated or not valid under the whole schema
(``typed.OutputSpec.check``: ``jsonschema_rs``, or the pydantic model's own validation) marks
its row to be asked again (``AskAgain``): the runner asks those rows again in smaller packs,
then singly, then leaves them ``invalid``, raw text and error kept. Every row is claimed and
stored under its own key (the key of its request as a pack of one), so a re-run with any pack
size pays nothing for a row already answered. The rows of a pack share its payment in atomic
units (``items.split_atomic``), re-asks included: the shares add up exactly to what was paid.
How many rows a pack holds is ``batch.prepare._packing``'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd
import pyarrow as pa

from x402lab.batch.kinds._chat_codec import CHAT_COLUMNS, decode_json, encode_json
from x402lab.batch.kinds._codec import Answer, JsonRequests
from x402lab.batch.kinds._typed import ITEMS, OutputSpec
from x402lab.batch.output import chat_table, join_inputs, split_atomic
from x402lab.gateway.results import ChatResult
from x402lab.routes import CHAT
from x402lab.tables.ledger import arrow_to_pandas

#: Rounds of asking again for the rows of a pack whose answer did not hold them validly: the
#: first in packs half the size of the pack that failed (its failed rows together), the
#: second one row per request; then the row is ``invalid``.
REASKS = 2
#: What a request asking rows again adds to its system message (the planning router
#: recognises such requests by it).
ASKED_AGAIN = "(Asked again, round {round}.)"

#: The columns a typed row adds to a chat row's, as stored and as shown.
_EXTRA_TYPES = {"pack_size": pa.int64(), "invalid": pa.string()}

_TASK = (
    "Answer each item of the JSON array below on its own, following the task. Reply with one"
    ' JSON object {"items": [...]} holding exactly one entry per item, with the item\'s "id"'
    " and the fields of the schema, and nothing else."
)


@dataclass(frozen=True)
class AskAgain:
    """A typed row is asked again while its answer is not valid (its ``invalid`` column),
    ``REASKS`` rounds, the round said in the request's system message."""

    rounds: int = REASKS

    def why(self, answer: Answer | None) -> str | None:
        return None if answer is None else answer[-1]

    def again(self, body: Mapping[str, Any], round: int) -> dict[str, Any]:
        messages = [dict(m) for m in body["messages"]]
        note = ASKED_AGAIN.format(round=round)
        messages[0]["content"] = f"{messages[0]['content']}\n{note}"
        return {**body, "messages": messages}


@dataclass(frozen=True)
class TypedCodec(JsonRequests):
    """Typed answers per row: the row's entry as JSON text (``response``), the size of the
    pack that answered it, and why it is not valid (``invalid``, None when it is), stored as
    JSON with the row (as a chat row is). An item is a mapping of the row's values."""

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
    columns = (*CHAT_COLUMNS, "pack_size", "invalid")
    reask: ClassVar[AskAgain] = AskAgain()

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

    def split(self, answer: Any, n: int) -> list[Answer]:
        result = ChatResult.from_response(CHAT, answer, None)
        text, finish = result.text or "", result.finish_reason
        prompt = split_atomic(result.prompt_tokens, n)
        completion = split_atomic(result.completion_tokens, n)

        def row(i: int, raw: str | None, problem: str | None) -> Answer:
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

    def encode(self, answer: Answer) -> bytes:
        return encode_json(answer)

    def decode(self, blob: bytes) -> Answer:
        return decode_json(blob)

    def empty(self) -> Answer:
        return (None,) * len(self.columns)


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
    (``TypedCodec.columns`` and the cost columns, ``sinks.ColumnSink``), with one typed column
    per field after ``response`` and ``pack_size``; an invalid row's status is ``invalid``
    and its error says why. A stored answer is checked again: a pydantic validator is not
    part of the request, so one made stricter since the answer was bought still decides."""
    extra = {name: columns.pop(name) for name in _EXTRA_TYPES}
    table = chat_table(columns)
    for name, values in extra.items():
        table = table.append_column(name, pa.array(values, type=_EXTRA_TYPES[name]))
    frame = join_inputs(inputs, table)
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
    typed = arrow_to_pandas(spec.table(frame["response"].tolist(), valid))
    typed.index = frame.index
    at = frame.columns.get_loc("response")
    assert isinstance(at, int)
    return pd.concat([frame.iloc[:, :at], typed, frame.iloc[:, at:]], axis=1)

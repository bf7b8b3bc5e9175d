"""What a chat batch asks (``ChatTask``) and its plan: the rows' prompts, the codec (plain or
typed) and the requests, all checked before anything is signed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from x402lab.batch.inputs import chat_frame, with_prompt
from x402lab.batch.kinds import ChatCodec, OutputSpec, TypedCodec
from x402lab.batch.output import batch_chat_schema
from x402lab.batch.prepare._packing import auto_rows_per_request, rows_per_request_of, typed_items
from x402lab.batch.prepare._request_plan import Plan, plan_of
from x402lab.errors import ConfigError
from x402lab.gateway.params import positive_int
from x402lab.routes import CHAT

if TYPE_CHECKING:
    import pandas as pd

    from x402lab.gateway import Catalog

_RESULT_NAMES = (*batch_chat_schema().names, "pack_size", "prompt")


@dataclass(frozen=True)
class ChatTask:
    """What a chat batch asks of every row: the model, how a row's prompt is made
    (``prompt`` template, ``column``, ``system``), the answer's size and shape (``max_tokens``,
    ``spec`` for typed answers, ``rows_per_request``) and the other body fields."""

    model: str
    prompt: str | None = None
    system: str | None = None
    max_tokens: int | None = None
    column: str | None = None
    #: Typed answers (``labels=`` or ``schema=``), or None for plain text.
    spec: OutputSpec | None = None
    #: Rows in one paid request (typed batches): an int ≥ 1 or "auto".
    rows_per_request: int | str = 1
    #: Further body fields; those named in ``unchecked`` (``extra_body``) go unchecked.
    params: Mapping[str, Any] = field(default_factory=dict)
    unchecked: frozenset[str] = frozenset()
    #: Keys of the plan's own (``_request_plan``; ``lab.compare``), or None.
    namespace: str | None = None

    def __post_init__(self) -> None:
        per_request = rows_per_request_of(self.rows_per_request)
        if self.spec is None and per_request != 1:
            raise ConfigError(
                "rows_per_request packs typed rows: give labels=[...] or schema=... too"
            )
        if self.spec is not None and "response_format" in self.params:
            raise TypeError("response_format is set by labels= or schema=; do not pass it too")
        object.__setattr__(self, "rows_per_request", per_request)


def chat_messages(inputs: pd.DataFrame, prompt: str | None) -> list[Any]:
    """Each row's prompt text (or message list), checked once for the whole batch.

    Raises ConfigError naming what is missing: a template field that names no column (or is
    malformed), or rows whose used column is None, NaN or empty (``batch.inputs._templates``).
    """
    from x402lab.batch.inputs import check_filled, fill_template

    if prompt is not None:
        return fill_template(prompt, inputs)
    for column in ("prompt", "messages"):
        if column in inputs.columns:
            check_filled(inputs, column, what="the batch sends")
            values = inputs[column].tolist()
            bad = [i for i, v in enumerate(values) if not isinstance(v, str | list | tuple)]
            if bad:
                raise ConfigError(
                    f"row {inputs.index[bad[0]]!r} has no {column}: {values[bad[0]]!r}"
                )
            return values
    raise ConfigError(
        "rows need a 'prompt' (or 'messages') column, or pass prompt='... {column} ...'"
    )


def check_clash(inputs: pd.DataFrame, names: list[str]) -> None:
    """ConfigError when an input column has the name of a result column."""
    clash = [name for name in names if name in inputs.columns]
    if clash:
        raise ConfigError(
            f"input columns clash with result columns: {', '.join(clash)} (rename them)"
        )


async def plan_chat(
    rows: Any, task: ChatTask, catalog: Catalog, result_names: list[str]
) -> tuple[pd.DataFrame, Plan]:
    """The input frame and the plan of a chat batch, checked before anything is signed
    (no input column may have one of the ``result_names``). A typed batch (``task.spec``):
    the model must say ``supportsResponseSchema``, the typed columns must not clash with the
    input's or the result's, and ``response_format`` is the batch's own (schema= sets it)."""
    inputs = chat_frame(rows, task.column, task.prompt)
    check_clash(inputs, result_names)
    messages = chat_messages(inputs, task.prompt)
    inputs = with_prompt(inputs, messages)
    spec = task.spec
    if spec is None:
        codec = ChatCodec(task.model, task.system, task.max_tokens, task.params, task.unchecked)
        return inputs, plan_of(codec, messages, 1, task.namespace)
    clash = [n for n in spec.names if n in inputs.columns or n in _RESULT_NAMES]
    if clash:
        raise ConfigError(
            f"typed column(s) {', '.join(clash)} clash with input or result columns:"
            " rename the field or the input column"
        )
    entry = await _schema_entry(catalog, task.model)
    instruction, items = typed_items(inputs, task.prompt, messages)
    per_row = (
        positive_int("max_tokens", task.max_tokens, "the longest answer of one row, in tokens")
        if task.max_tokens is not None
        else spec.tokens_per_row()
    )
    typed = TypedCodec(
        task.model, spec, instruction, task.system, per_row, task.params, task.unchecked
    )
    per_request = task.rows_per_request
    if per_request == "auto":
        per_request = auto_rows_per_request(typed, items, await catalog.price_list(), entry)
    assert isinstance(per_request, int)
    return inputs, plan_of(typed, items, per_request, task.namespace)


async def _schema_entry(catalog: Catalog, model: str) -> Mapping[str, Any] | None:
    """The catalog entry of ``model``, which must support structured output."""
    await catalog.check_model(model, CHAT)
    entries = await catalog.entries("text")
    entry = entries.get(model)
    if entry is not None and not _supports_schema(entry):
        able = sorted(k for k, e in entries.items() if _supports_schema(e))
        raise ConfigError(
            f"model {model} does not support structured output (its catalog entry says"
            f" supportsResponseSchema: false); models that do: {', '.join(able)}"
        )
    return entry


def _supports_schema(entry: Mapping[str, Any]) -> bool:
    spec = entry.get("model_spec") if isinstance(entry.get("model_spec"), Mapping) else {}
    capabilities = spec.get("capabilities") if isinstance(spec, Mapping) else None
    return isinstance(capabilities, Mapping) and capabilities.get("supportsResponseSchema") is True

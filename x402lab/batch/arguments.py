"""The arguments of a batch call checked before anything is sent, and the frames its rows
are joined to (``batch.api`` runs the call)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from x402lab.batch.pacing import concurrency_of
from x402lab.errors import ConfigError
from x402lab.routes import EMBEDDINGS

if TYPE_CHECKING:
    import pandas as pd

    from x402lab.batch.inputs import Texts
    from x402lab.gateway import Catalog

#: Texts per request of ``batch_embed(per_request="auto")`` where the gateway takes a list: at
#: the minimum charge of 0.01 USD and embedding prices of cents per million tokens, a request
#: of 256 one-line texts is still under the minimum, yet its body stays small (tens of kB)
#: and one failed request holds back few rows.
EMBED_AUTO_TEXTS = 256
#: Free quotes in flight under ``concurrency="auto"``: the fixed default batches had before.
QUOTES_IN_FLIGHT = 8
#: How a batch runs: concurrency, max_usd, rebuy, partial, and the body fields sent unchecked.
Run = tuple[Any, float | None, bool | str, bool, Mapping[str, Any]]


def quote_concurrency(value: Any) -> int:
    """The free requests a quote keeps in flight for a batch's ``concurrency``: the number
    given, or for "auto" ``QUOTES_IN_FLIGHT`` (a quote learns no rate; two at a time, a
    400-request quote at 250 ms took 50 s); ConfigError otherwise."""
    checked = concurrency_of(value)
    return checked if isinstance(checked, int) else min(checked.ceiling, QUOTES_IN_FLIGHT)


def body_params(
    call: str, params: dict[str, Any], extra_body: Mapping[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The extra request fields of a batch call, and apart the ``extra_body`` ones among them
    (sent unchecked); refuses ``checkpoint=`` (removed) with what to do instead."""
    # Without this, it would land in the request body. None (what a caller written for the
    # old signature passes by default) asks for nothing: dropped.
    if params.pop("checkpoint", None) is not None:
        raise TypeError(
            f"{call}() no longer takes checkpoint=: batches now resume from the ledger by"
            " default. Run the same call again: settled rows are reused (their answers are"
            " stored in the ledger) and nothing is paid twice. Remove checkpoint=;"
            " rebuy=True buys everything again."
        )
    unchecked = dict(extra_body or {})
    return {**params, **unchecked}, unchecked


def check_clash(inputs: pd.DataFrame, names: list[str]) -> None:
    """ConfigError when an input column has the name of a result column."""
    clash = [name for name in names if name in inputs.columns]
    if clash:
        raise ConfigError(
            f"input columns clash with result columns: {', '.join(clash)} (rename them)"
        )


def all_texts(source: Texts) -> tuple[list[str], pd.Index | None]:
    """Every text of ``source`` in memory (``estimate`` quotes them all at once)."""
    if source.values is not None:
        return source.values, source.index
    assert source.chunks is not None
    return [text for chunk in source.chunks for text in chunk], None


def index_frame(index: Any, n: int) -> pd.DataFrame:
    """An empty frame with ``index`` (or 0..n-1): the rows results are joined to."""
    import pandas as pd

    return pd.DataFrame(index=index if index is not None else pd.RangeIndex(n))


def rebuy_of(value: Any) -> bool | str:
    """``rebuy=``: False, True (buy every row again) or ``"lost"`` (buy again exactly the rows
    paid without a stored answer); ConfigError otherwise."""
    if isinstance(value, bool) or value == "lost":
        return value  # type: ignore[no-any-return]
    raise ConfigError(f'rebuy must be True, False or "lost", got {value!r}')


async def embed_pack_size(catalog: Catalog, per_request: int | str, model: str) -> int:
    """``per_request`` of ``batch_embed``; ``"auto"``: ``EMBED_AUTO_TEXTS`` texts per request
    when the gateway's published request schema takes a list ``input`` (the minimum charge
    then buys many texts), else one (the gateway's own shape)."""
    if per_request != "auto":
        if isinstance(per_request, str):
            raise ConfigError(f"per_request must be an int or 'auto', got {per_request!r}")
        return per_request
    published = await catalog.request_schema("POST", EMBEDDINGS)
    if published is None:
        return 1
    try:
        published.check({"model": model, "input": ["a", "b"]}, caller="batch_embed()")
    except (TypeError, ConfigError):
        return 1
    return EMBED_AUTO_TEXTS

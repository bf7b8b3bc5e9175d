"""What a batch hands back besides its rows: the run's summary and the free estimate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from x402lab.errors import ConfigError
from x402lab.money import atomic_to_usd, budget_verdict, format_usd
from x402lab.reprs import card, scrolling

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from x402lab.batch.output._items import Tally
    from x402lab.batch.output._progress import Throttle


@dataclass(frozen=True)
class BatchSummary:
    """One batch run in numbers (money in atomic units).

    ``requests``: requests sent by this run; ``paid_requests``: those whose payment settled.
    ``paid_atomic``: settled by this run. ``saved_atomic``: the quotes of duplicate rows,
    answered by the first identical row instead of paying again. ``from_store``: rows answered
    by answers an earlier run stored in the ledger; ``cached_atomic``: what those rows cost
    when that run paid them. ``lost_atomic``: paid by an earlier run whose answer was never
    stored (``paid_not_stored`` rows). ``unknown_atomic``: payments whose settlement is
    unknown (a risk, counted against the budget).
    ``out``: the Parquet file of ``batch_embed(..., out=...)``, read with ``to_pandas()``.
    ``prepay_hits``: payments sent with the first request (a predicted challenge) that the
    server took, one round trip each; ``prepay_misses``: those it refused with a 402 (a stale
    prediction; nothing settled, the row ``rejected``/``prepay_refused``); ``extra_signatures``:
    the fresh challenges then signed (at most one per miss). ``rate_reached``: the highest
    request rate (requests a second) a ``concurrency="auto"`` batch reached once it met the
    service's limit (0: it met none); ``rate_limited``: the 429s it met (nothing was paid
    for them, and nothing signed again).

    A batch's DataFrame carries its summary as plain data in ``frame.attrs["batch"]``
    (``to_dict()``: these fields plus ``paid_usd`` and ``saved_usd``), so the frame can be
    written to Parquet; ``BatchSummary.of(frame)`` rebuilds this object from the frame, from
    the frame ``pd.read_parquet`` gives back, or from that dict.
    """

    kind: str
    rows: int
    requests: int
    paid_requests: int
    counts: Mapping[str, int]
    paid_atomic: int
    saved_atomic: int
    cached_atomic: int
    lost_atomic: int
    unknown_atomic: int
    duplicates: int
    from_store: int
    budget_left_atomic: int | None
    out: str | None = None
    progress_error: str | None = field(default=None, repr=False)
    prepay_hits: int = 0
    prepay_misses: int = 0
    extra_signatures: int = 0
    #: Packed typed batches: rows per request, and what the rows this run paid for would have
    #: cost at one row per request (one row's exact quote times those rows).
    rows_per_request: int = 1
    one_per_request_atomic: int | None = None
    rate_reached: float = 0.0
    rate_limited: int = 0
    #: The money on the distinct rows of each status (paid, or at risk for ``unknown``).
    status_atomic: Mapping[str, int] = field(default_factory=dict)

    @property
    def packing_saved_atomic(self) -> int | None:
        """What packing saved against one row per request in this run (None unpacked)."""
        if self.one_per_request_atomic is None:
            return None
        return self.one_per_request_atomic - self.paid_atomic

    def _packing_text(self) -> str | None:
        saved = self.packing_saved_atomic
        if saved is None or self.one_per_request_atomic is None:
            return None
        return (
            f"{self.rows_per_request} rows per request saved {format_usd(saved)}"
            f" ({format_usd(self.one_per_request_atomic)} at one row per request)"
        )

    @classmethod
    def of(cls, source: Any) -> BatchSummary:
        """The summary of a batch from its DataFrame (``attrs["batch"]``, also after a
        Parquet round trip), from that dict, or a BatchSummary as is.

        Raises ConfigError when the frame carries no summary (pandas drops ``attrs`` in some
        operations, e.g. a merge) or the dict lacks fields.
        """
        attrs = getattr(source, "attrs", None)
        if isinstance(attrs, Mapping) and hasattr(source, "columns"):
            if "batch" not in attrs:
                raise ConfigError(
                    "this DataFrame has no attrs['batch'] for BatchSummary.of(): pass the"
                    " frame batch_chat()/batch_embed() returned (or read back from its"
                    " Parquet file); pandas drops attrs in some operations, e.g. a merge"
                )
            source = attrs["batch"]
        if isinstance(source, BatchSummary):  # also in a frame pickled before attrs were plain
            return source
        if not isinstance(source, Mapping):
            raise ConfigError(
                "BatchSummary.of() takes a pandas DataFrame of batch_chat()/batch_embed(), its"
                f" attrs['batch'] dict or a BatchSummary, got {type(source).__name__}"
            )
        known = {f.name: f for f in fields(cls)}
        missing = [
            name
            for name, f in known.items()
            if f.default is MISSING and f.default_factory is MISSING and name not in source
        ]
        if missing:
            raise ConfigError(f"not a batch summary (missing: {', '.join(missing)})")
        values = {name: source[name] for name in known if name in source}
        values["counts"] = dict(values["counts"])
        values["status_atomic"] = dict(values.get("status_atomic") or {})
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The summary as plain JSON data (what ``frame.attrs["batch"]`` holds): the fields,
        then ``paid_usd`` and ``saved_usd`` for reading (``of`` ignores them)."""
        plain = asdict(self)
        plain["counts"] = dict(self.counts)
        plain["status_atomic"] = dict(self.status_atomic)
        return {**plain, "paid_usd": self.paid_usd, "saved_usd": self.saved_usd}

    @property
    def paid_usd(self) -> float:
        return float(atomic_to_usd(self.paid_atomic) or 0.0)

    @property
    def saved_usd(self) -> float:
        return float(atomic_to_usd(self.saved_atomic) or 0.0)

    def describe(self) -> str:
        counts = ", ".join(f"{n} {status}" for status, n in sorted(self.counts.items()) if n)
        parts = [
            f"{self.kind} batch: {self.rows} rows ({counts or 'none'}), {self.requests}"
            f" requests sent, {self.paid_requests} paid: {format_usd(self.paid_atomic)}"
        ]
        if self.duplicates:
            parts.append(
                f"{self.duplicates} duplicate rows paid once, saved {format_usd(self.saved_atomic)}"
            )
        if self.from_store:
            parts.append(
                f"{self.from_store} rows answered by an earlier run (paid then:"
                f" {format_usd(self.cached_atomic)})"
            )
        if self.lost_atomic or self.counts.get("paid_not_stored"):
            parts.append(self._lost_text())
        if self.unknown_atomic:
            parts.append(f"settlement unknown: {format_usd(self.unknown_atomic)}")
        if self.prepay_hits or self.prepay_misses:
            parts.append(self._prepay_text())
        packing = self._packing_text()
        if packing is not None:
            parts.append(packing)
        if self.rate_limited or self.rate_reached:
            parts.append(self._rate_text())
        if self.budget_left_atomic is not None:
            parts.append(f"budget left {format_usd(self.budget_left_atomic)}")
        return "; ".join(parts)

    def _lost_text(self) -> str:
        n = self.counts.get("paid_not_stored", 0)
        return (
            f"{n} rows paid earlier but not stored ({format_usd(self.lost_atomic)}):"
            f' rebuy="lost" buys exactly them again, for about what they cost then'
        )

    def _prepay_text(self) -> str:
        return (
            f"paid with the first request: {self.prepay_hits} (stale: {self.prepay_misses},"
            f" extra signatures: {self.extra_signatures})"
        )

    def _rate_text(self) -> str:
        reached = f"{self.rate_reached:.1f} requests/s reached"
        return f"rate limit: {self.rate_limited} 429s met, {reached}"

    def __repr__(self) -> str:
        where = f" -> {self.out}" if self.out else ""
        return f"<BatchSummary {self.describe()}{where}>"

    def _repr_html_(self) -> str:
        """Jupyter: rows by status and the money of the run."""
        counts = ", ".join(f"{n} {status}" for status, n in sorted(self.counts.items()) if n)
        left = self.budget_left_atomic
        rows: list[tuple[str, object]] = [
            ("rows", f"{self.rows} ({counts or 'none'})"),
            ("requests", f"{self.requests} sent, {self.paid_requests} paid"),
            ("paid", format_usd(self.paid_atomic)),
            ("saved by duplicates", format_usd(self.saved_atomic) if self.duplicates else None),
            (
                "from an earlier run",
                f"{self.from_store} rows (paid then {format_usd(self.cached_atomic)})"
                if self.from_store
                else None,
            ),
            ("paid, not stored", self._lost_text() if self.counts.get("paid_not_stored") else None),
            (
                "settlement unknown",
                format_usd(self.unknown_atomic) if self.unknown_atomic else None,
            ),
            (
                "paid with the first request",
                self._prepay_text() if self.prepay_hits or self.prepay_misses else None,
            ),
            ("packing", self._packing_text()),
            ("rate limit", self._rate_text() if self.rate_limited or self.rate_reached else None),
            ("budget left", format_usd(left) if left is not None else "no cap"),
            ("written to", self.out),
        ]
        return card(f"BatchSummary · {self.kind}", rows)

    def to_arrow(self, columns: list[str] | None = None) -> pa.Table:
        """The rows written to ``out`` as an Arrow table. Raises ConfigError without ``out``."""
        import pyarrow.parquet as pq

        if self.out is None:
            raise ConfigError("this batch returned its rows as a DataFrame; nothing was written")
        return pq.read_table(self.out, columns=columns)

    def to_pandas(self, columns: list[str] | None = None) -> pd.DataFrame:
        """The rows written to ``out`` as a DataFrame (``columns`` to read only some)."""
        from x402lab.ledger import arrow_to_pandas

        return arrow_to_pandas(self.to_arrow(columns))

    @property
    def path(self) -> Path | None:
        return Path(self.out) if self.out else None


def summary_of(
    kind: str, rows: int, tally: Tally, throttle: Throttle, out: Path | None, left: int | None
) -> BatchSummary:
    """The BatchSummary of a run: its ``tally``, where it wrote (``out``) and the budget left."""
    # Every field of Tally is one of BatchSummary's.
    totals = {f.name: getattr(tally, f.name) for f in fields(tally)}
    return BatchSummary(
        kind=kind,
        rows=rows,
        **{**totals, "counts": dict(tally.counts), "status_atomic": dict(tally.status_atomic)},
        budget_left_atomic=left,
        out=str(out) if out is not None else None,
        progress_error=repr(throttle.error) if throttle.error is not None else None,
    )


@dataclass(frozen=True)
class BatchEstimate:
    """The free, exact price of a batch: each row's 402 quote, nothing signed.

    ``requests``: the distinct requests a run would pay for. ``rows``: the input columns
    plus ``request_key``, ``quoted_usd`` (exact, from the 402), ``upstream_usd``,
    ``price_mult``, ``estimate_usd`` (the published price list's estimate, null where it
    cannot tell), ``duplicate`` and ``status`` (``quoted``; ``cached``, ``paid_not_stored``,
    ``unknown`` or ``pending`` for rows a run would not buy now, read from the ledger's
    claims; ``failed`` with ``error``). ``total_atomic`` sums what a run would pay: each
    distinct request once.
    """

    rows: pd.DataFrame
    total_atomic: int
    local_total_usd: float | None
    requests: int
    failed: int
    budget_left_atomic: int | None
    #: Packed typed batches: what the same rows would cost at one row per request (one
    #: row's exact quote times the rows to buy), the figure packing saves against.
    one_per_request_atomic: int | None = None
    rows_per_request: int = 1

    @property
    def total_usd(self) -> float:
        return float(atomic_to_usd(self.total_atomic) or 0.0)

    @property
    def saving(self) -> str | None:
        """What packing saves against one row per request, in words (None unpacked)."""
        single = self.one_per_request_atomic
        if single is None or self.rows_per_request == 1:
            return None
        ratio = f"{single / self.total_atomic:.1f}x less" if self.total_atomic else "nothing paid"
        return (
            f"{self.rows_per_request} rows per request: {format_usd(self.total_atomic)} against"
            f" {format_usd(single)} at one row per request ({ratio})"
        )

    @property
    def fits_budget(self) -> bool | None:
        """Whether the whole batch fits what the budget has left (None without a cap)."""
        if self.budget_left_atomic is None:
            return None
        return self.total_atomic <= self.budget_left_atomic

    def describe(self) -> str:
        local = f"{self.local_total_usd:.6f} USD" if self.local_total_usd is not None else "n/a"
        text = (
            f"{len(self.rows)} rows, {self.requests} requests to pay: exact total"
            f" {format_usd(self.total_atomic)} (price list estimate {local})"
        )
        if self.failed:
            text += f"; {self.failed} rows could not be quoted"
        if self.saving is not None:
            text += f"; {self.saving}"
        if self.budget_left_atomic is not None:
            text += f"; {budget_verdict(self.fits_budget is True, self.budget_left_atomic)}"
        return text

    def __repr__(self) -> str:
        return f"<BatchEstimate {self.describe()}>"

    def _repr_html_(self) -> str:
        """Jupyter: the total and whether it fits, then the rows (scrolling)."""
        local = f"{self.local_total_usd:.6f} USD" if self.local_total_usd is not None else None
        fits = self.fits_budget
        left = self.budget_left_atomic
        rows: list[tuple[str, object]] = [
            ("exact total", format_usd(self.total_atomic)),
            ("price list estimate", local),
            ("packing", self.saving),
            ("rows", f"{len(self.rows)} ({self.requests} requests to pay)"),
            ("could not be quoted", self.failed or None),
            (
                "budget left",
                None
                if left is None
                else f"{format_usd(left)}: {'fits' if fits else 'does NOT fit'}",
            ),
        ]
        table = self.rows.to_html(max_rows=200, notebook=True)
        return card("BatchEstimate (nothing signed)", rows, below=scrolling(table))

    def to_pandas(self) -> pd.DataFrame:
        return self.rows

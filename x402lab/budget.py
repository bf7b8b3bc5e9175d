"""Spending caps. A budget holds money before anything is signed.

The cap covers settled, in-flight, unknown and held spend (a signed payment the server
refused counts until its authorization expires), so concurrent requests can never push spend
past it. Reservations live in the ledger's database: atomic across threads, tasks and
processes sharing the file, and a named budget keeps its spend across kernel restarts.
A named budget has one cap, kept in the ledger (the first process to name it with a cap sets
it; a change is an explicit ``set_cap``), so every process reserves against the same figure.
"""

from __future__ import annotations

import html
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING

from x402lab.errors import ConfigError
from x402lab.ledger import BudgetState, PaymentMeta, SignedAuthorization, left_under_cap
from x402lab.money import format_usd, usd_to_atomic

if TYPE_CHECKING:
    from x402lab.ledger import BudgetCaps, CommitGroup, Ledger


def _cap(value: float | None, what: str) -> int | None:
    if value is None:
        return None
    atomic = usd_to_atomic(value)
    if atomic <= 0:
        raise ConfigError(f"{what} must be a positive USD amount, got {value!r}")
    return atomic


class _Keep:
    """The per-call cap of ``Budget.set_cap`` when not given: kept as it is."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP = _Keep()


class Budget:
    """A spending cap in USD, with an optional cap per call.

    ``Budget(usd=5.0, per_call_usd=0.50, name="exp-1")``. Without a name the budget lives for
    this session only; with a name its spend is read back from the ledger after a restart.
    ``usd=None`` means no total cap (the per-call cap still applies); for a named budget
    whose caps the ledger already keeps, it means "the stored caps" (one cap per budget:
    ``bind``).
    """

    def __init__(
        self, usd: float | None = None, per_call_usd: float | None = None, name: str | None = None
    ) -> None:
        self.cap_atomic = _cap(usd, "usd")
        self.per_call_atomic = _cap(per_call_usd, "per_call_usd")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ConfigError(f"budget name must be a non-empty string, got {name!r}")
        self.named = name is not None
        self.name = name if name is not None else f"session-{secrets.token_hex(4)}"
        self._ledger: Ledger | None = None

    def bind(self, ledger: Ledger) -> Budget:
        """Attach to the ledger that keeps this budget's reservations; returns self.

        A named budget has one cap, kept in the ledger: the first process that names it with
        a cap sets it; naming it without ``usd=`` (and ``per_call_usd=``) takes the stored
        caps; asking for other caps raises ConfigError showing both (``set_cap`` changes
        them)."""
        if self._ledger is not None and self._ledger.db.url != ledger.db.url:
            raise ConfigError(f"budget {self.name!r} is already bound to {self._ledger.db.url}")
        caps = ledger.caps.agree(self.name, self.cap_atomic, self.per_call_atomic)
        self.cap_atomic, self.per_call_atomic = caps.cap_atomic, caps.per_call_atomic
        self._ledger = ledger
        return self

    def set_cap(self, usd: float | None, per_call_usd: float | None | _Keep = KEEP) -> Budget:
        """Change this budget's caps for every process that uses it (None: no cap; the
        per-call cap is kept unless given), recorded in the ledger with who (the ledger's
        user) and when. Reservations of other processes are measured against the new total
        cap at once (it is read in their transaction); they take a new per-call cap when they
        next read the budget (``state()``, ``remaining_atomic()``, a batch's start). Returns
        self."""
        cap = _cap(usd, "usd")
        if isinstance(per_call_usd, _Keep):
            stored = self.caps()
            per_call = stored.per_call_atomic if stored is not None else self.per_call_atomic
        else:
            per_call = _cap(per_call_usd, "per_call_usd")
        caps = self.ledger.caps.set(self.name, cap, per_call)
        self.cap_atomic, self.per_call_atomic = caps.cap_atomic, caps.per_call_atomic
        return self

    def caps(self) -> BudgetCaps | None:
        """The caps the ledger keeps for this budget now (another process may have changed
        them with ``set_cap``), with who set them and when."""
        return self.ledger.caps.read(self.name)

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            raise ConfigError(f"budget {self.name!r} is not bound to a ledger (use connect())")
        return self._ledger

    def reserve(
        self,
        amount_atomic: int,
        meta: PaymentMeta,
        sign: Callable[[], SignedAuthorization] | None = None,
        *,
        durable: bool = True,
        group: CommitGroup | None = None,
    ) -> int:
        """Hold ``amount_atomic`` before signing; returns the ledger row id.

        With ``sign``, it runs while the amount is held and the row is committed as
        ``signed`` (see ``Ledger.reserve``; ``durable=False``: made durable later by
        ``ledger.write_ahead``, in a batch run's ``group`` of commits when given). Raises
        BudgetExceeded (a ``refused`` row is recorded) when the cap would be passed.
        """
        return self.ledger.reserve(
            budget=self.name,
            cap_atomic=self.cap_atomic,
            amount_atomic=amount_atomic,
            meta=meta,
            sign=sign,
            durable=durable,
            group=group,
        )

    def state(self) -> BudgetState:
        """Settled, in-flight, unknown and held spend right now (``committed_atomic`` is
        their sum, the same as ``committed`` in ``lab.spend(by="budget")``), against the cap
        the ledger keeps now."""
        self._follow_stored_caps()
        return self.ledger.budget_state(self.name, self.cap_atomic)

    def _follow_stored_caps(self) -> None:
        """Take the caps the ledger keeps (another process may have changed them)."""
        stored = self.ledger.caps.read(self.name)
        if stored is not None and stored.is_set:
            self.cap_atomic, self.per_call_atomic = stored.cap_atomic, stored.per_call_atomic

    def committed_atomic(self) -> int:
        """``state().committed_atomic`` (what counts against the cap now) from the running
        total, without reading every payment of the budget."""
        return self.ledger.budget_committed(self.name)

    def remaining_atomic(self) -> int | None:
        """``state().remaining_atomic`` the same way (None without a total cap)."""
        self._follow_stored_caps()
        if self.cap_atomic is None:
            return None  # without asking the ledger
        return left_under_cap(self.cap_atomic, self.committed_atomic())

    @property
    def spent_usd(self) -> float:
        """Settled spend in USD."""
        return self.state().settled_atomic / 1_000_000

    @property
    def remaining_usd(self) -> float | None:
        """What is left to reserve (None without a total cap)."""
        remaining = self.state().remaining_atomic
        return None if remaining is None else remaining / 1_000_000

    def figures(self) -> dict[str, int | None]:
        """What the budget stands at now, in atomic units: ``spent`` (settled), ``held``
        (signed and not yet known, reserved, or refused by the server and still valid: it
        may yet be spent, so it counts), ``free`` (what is left to reserve; None without a
        cap) and ``cap``. ``spent + held`` is ``lab.spend()``'s ``committed``."""
        state = self.state()
        return {
            "spent": state.settled_atomic,
            "held": state.committed_atomic - state.settled_atomic,
            "free": state.remaining_atomic,
            "cap": state.cap_atomic,
        }

    def __repr__(self) -> str:
        cap = format_usd(self.cap_atomic) if self.cap_atomic is not None else "no cap"
        per_call = format_usd(self.per_call_atomic) if self.per_call_atomic is not None else "none"
        text = f"Budget(name={self.name!r}, cap={cap}, per_call={per_call}"
        if self._ledger is not None:
            state = self.state()
            free = state.remaining_atomic
            text += (
                f", spent={format_usd(state.settled_atomic)}"
                f", held={format_usd(state.committed_atomic - state.settled_atomic)}"
                f" (in flight {format_usd(state.in_flight_atomic)},"
                f" unknown {format_usd(state.unknown_atomic)},"
                f" refused {format_usd(state.held_atomic)})"
                f", free={format_usd(free) if free is not None else 'no cap'}"
            )
        return text + ")"

    def _repr_html_(self) -> str:
        """Jupyter: spent, held and free, as a bar and three figures."""
        name = html.escape(self.name)
        if self._ledger is None:
            return f"<div><b>Budget {name}</b>: not bound to a ledger</div>"
        state = self.state()
        held = state.committed_atomic - state.settled_atomic
        free = state.remaining_atomic
        bar = ""
        if state.cap_atomic:
            spent_pct = min(100.0, 100.0 * state.settled_atomic / state.cap_atomic)
            held_pct = min(100.0 - spent_pct, 100.0 * held / state.cap_atomic)
            bar = (
                '<div style="display:flex;width:24em;height:0.8em;background:#e8e8e8">'
                f'<div style="width:{spent_pct:.2f}%;background:#3b7dd8"></div>'
                f'<div style="width:{held_pct:.2f}%;background:#f0a030"></div></div>'
            )
        parts = (
            f"held {format_usd(held)} (in flight {format_usd(state.in_flight_atomic)},"
            f" unknown {format_usd(state.unknown_atomic)}, refused and still valid"
            f" {format_usd(state.held_atomic)})"
        )
        left = format_usd(free) if free is not None else "no cap"
        return (
            f"<div><b>Budget {name}</b>: spent {format_usd(state.settled_atomic)}, {parts},"
            f" free {left}{bar}</div>"
        )

"""``lab.spend()``: exact sums from the ledger, any grouping, same schema empty or full; USD
by default, the exact integer columns with ``atomic=True``."""

from __future__ import annotations

import itertools
from decimal import Decimal

import pandas as pd
import pytest

from x402lab.analysis.spend import spend
from x402lab.errors import ConfigError
from x402lab.ledger import Ledger
from x402lab.tables.spend import BUDGET_VALUES, SPEND_KEYS, spend_schema

# Totals, every key alone, every pair and all keys together (30 of the 2^7 = 128 subsets).
# ``spend`` treats each key on its own (``path`` cut to its route, ``day`` floored, a null a
# group of its own) and hands the key list to one groupby, so a subset can only go wrong
# through a key or through two keys meeting (nulls of one inside the groups of another, the
# column order); singles and pairs reach every such case and all keys checks the widest.
GROUPINGS = [
    (),
    *itertools.combinations(SPEND_KEYS, 1),
    *itertools.combinations(SPEND_KEYS, 2),
    SPEND_KEYS,
]


@pytest.fixture(scope="module")
def totals(workload):
    """The workload's one row of totals, read once for the module."""
    return workload.lab.spend(by=(), atomic=True)


def ledger_sum(lab, status: str, **where: str) -> int:
    rows = lab.ledger.to_pandas()
    mask = rows["status"] == status
    for column, value in where.items():
        mask &= rows[column] == value
    return int(rows.loc[mask, "amount_atomic"].sum())


def test_totals_equal_the_ledger_and_the_chain(workload, totals):
    lab = workload.lab
    assert len(totals) == 1
    row = totals.iloc[0]
    settled = ledger_sum(lab, "settled")
    assert settled > 0
    assert int(totals["settled_atomic"].iloc[0]) == settled
    # What the two receivers got on chain: the main one every settled payment, the faulty
    # one the payment it settled before answering 500 (the ledger's unknown row).
    assert settled == workload.received(workload.main)
    assert int(totals["unknown_atomic"].iloc[0]) == workload.received(workload.faulty) > 0
    assert row["unknown_count"] == 1
    assert row["refused_count"] == 1
    assert row["in_flight_count"] == 0
    assert int(totals["committed_atomic"].iloc[0]) == settled + workload.received(workload.faulty)
    assert row["payments"] == len(lab.ledger.to_pandas())
    assert row["settled_usd"] == Decimal(settled).scaleb(-6)  # exact


@pytest.mark.parametrize("keys", GROUPINGS, ids=lambda keys: ",".join(keys) or "totals")
def test_every_grouping_sums_to_the_totals(workload, totals, keys):
    table = workload.lab.spend(by=keys, atomic=True)
    assert list(table.columns) == spend_schema(keys, atomic=True).names
    for column in ("payments", "settled_atomic", "unknown_atomic", "refused_count"):
        assert table[column].dtype == "int64"
        assert int(table[column].sum()) == int(totals[column].iloc[0])
    if keys:
        assert not table.duplicated(list(keys)).any()


def test_groups_by_route_model_budget_and_day(workload):
    lab = workload.lab
    by_route = lab.spend(by=("service", "path", "model"), atomic=True)
    reports = by_route[by_route["service"] == "reports"]
    # Report purchases carry their selection in the query; the route is one path.
    assert list(reports["path"]) == ["/api/intel/reports"]
    assert int(reports["settled_atomic"].iloc[0]) == ledger_sum(lab, "settled", service="reports")
    chat = by_route[
        (by_route["path"] == "/api/v1/chat/completions")
        & (by_route["model"] == workload.text_model)
    ]
    assert int(chat["settled_count"].sum()) == 2
    by_budget = lab.spend(by="budget", atomic=True).set_index("budget")
    assert int(by_budget.loc[workload.main_budget, "unknown_count"]) == 0
    assert int(by_budget.loc[workload.faulty_budget, "unknown_count"]) == 1
    assert int(by_budget.loc[workload.faulty_budget, "settled_atomic"]) == 0
    by_day = lab.spend(by="day")
    assert str(by_day["day"].dtype) == "datetime64[us, UTC]"
    assert (by_day["day"] == by_day["day"].dt.floor("D")).all()
    only_faulty = lab.spend(by=(), budget=workload.faulty_budget)
    assert int(only_faulty["payments"].iloc[0]) == 1


def test_refused_rows_keep_the_amount_asked_but_spend_nothing(workload):
    by_route = workload.lab.spend(by=("path", "model"), atomic=True)
    refused = by_route[by_route["refused_count"] > 0]
    assert len(refused) == 1
    assert int(refused["refused_atomic"].iloc[0]) > 1000  # above the 0.001 USD cap
    assert int(refused["settled_atomic"].iloc[0]) == ledger_sum(
        workload.lab, "settled", model=refused["model"].iloc[0]
    )


@pytest.mark.parametrize("keys", GROUPINGS, ids=lambda keys: ",".join(keys) or "totals")
def test_an_empty_ledger_gives_an_empty_table_with_the_same_columns(workload, tmp_path, keys):
    empty = Ledger(tmp_path / "empty.sqlite")
    for atomic in (False, True):
        blank = spend(empty, keys, atomic=atomic)
        full = workload.lab.spend(by=keys, atomic=atomic)
        assert len(blank) == 0
        assert list(blank.columns) == list(full.columns)
        assert blank.dtypes.equals(full.dtypes)
        # Arrow tables and DataFrames of the ledger give the same answer as the Ledger itself.
        assert spend(empty.to_arrow(), keys, atomic=atomic).dtypes.equals(full.dtypes)
        # The caps (and the forecast from them) are the ledger's, not its payment rows'.
        same = [name for name in full.columns if name not in BUDGET_VALUES.names]
        assert spend(workload.lab.ledger.to_arrow(), keys, atomic=atomic)[same].equals(full[same])


def test_unknown_or_repeated_keys_are_refused(workload):
    with pytest.raises(ConfigError, match="cannot group spend by"):
        workload.lab.spend(by=("service", "wallet"))
    with pytest.raises(ConfigError, match="repeat"):
        workload.lab.spend(by=("model", "model"))


def test_spend_is_free(workload):
    before = workload.lab.ledger.to_pandas()
    workload.lab.spend(by=("service", "day"))
    pd.testing.assert_frame_equal(workload.lab.ledger.to_pandas(), before)


def test_usd_by_default_and_the_exact_integers_with_atomic(workload):
    keys = ("service", "model")
    shown = workload.lab.spend(by=keys)
    exact = workload.lab.spend(by=keys, atomic=True)
    assert not [name for name in shown.columns if name.endswith("_atomic")]
    assert {"settled_usd", "unknown_usd", "held_usd", "committed_usd", "refused_usd"} <= set(
        shown.columns
    )
    # atomic=True adds the integer columns; every other column is the same.
    added = [name for name in exact.columns if name not in shown.columns]
    assert added and all(name.endswith("_atomic") for name in added)
    pd.testing.assert_frame_equal(exact[list(shown.columns)], shown)
    for name in ("settled", "unknown", "in_flight", "held", "committed", "refused"):
        assert exact[f"{name}_atomic"].dtype == "int64"
        assert (exact[f"{name}_usd"] == exact[f"{name}_atomic"] / 1_000_000).all(), name

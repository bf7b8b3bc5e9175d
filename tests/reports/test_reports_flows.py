"""lab.reports against the emulator: shelf, menu, free quotes, buys that never pay twice."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import parse_qs, urlsplit

import httpx
import pandas as pd
import pytest

import x402lab as xl
from x402lab.emulator.report_data import build_library
from x402lab.ledger import Claims, report_scope
from x402lab.reports import AsyncReports, Reports

UNIT = 10_000  # atomic USDC per report at the default 0.01 USD


def _query(path: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(path).query)


def test_shelf_is_newest_first_and_says_configured(lab):
    assert lab.reports.configured is None  # nothing fetched yet
    shelf = lab.reports.shelf()
    assert shelf.attrs["configured"] is True
    assert lab.reports.configured is True
    assert list(shelf.columns[:5]) == [
        "username",
        "display_name",
        "report_count",
        "post_count",
        "gathered_at",
    ]
    assert shelf.columns[-1] == "fetched_at"
    assert len(shelf) == len(build_library())
    assert shelf["gathered_at"].is_monotonic_decreasing
    assert str(shelf["gathered_at"].dtype) == "datetime64[us, UTC]"
    assert str(shelf["report_count"].dtype) == "Int64"
    # Fields the service leaves open are kept as extra columns.
    assert {"followers", "avatar_url"} <= set(shelf.columns)
    wire = httpx.get(f"{lab.reports_url}/api/intel/list").json()["entries"]
    assert shelf["username"].tolist() == [entry["username"] for entry in wire]


def test_shelf_of_a_deployment_without_store_is_empty_with_the_same_dtypes(
    emulator_factory, lab_for, lab
):
    full = lab.reports.shelf()
    empty_lab = lab_for(emulator_factory(kv_configured=False))
    empty = empty_lab.reports.shelf()
    assert empty.attrs["configured"] is False
    assert empty_lab.reports.configured is False
    assert empty.empty
    declared = ["username", "display_name", "report_count", "post_count", "gathered_at"]
    assert empty[declared].dtypes.tolist() == full[declared].dtypes.tolist()


def test_menu_flattens_the_date_range_and_marks_owned(lab):
    menu = lab.reports.menu("@LedgerLark")  # the service ignores case and the @
    wire = httpx.get(
        f"{lab.reports_url}/api/intel/reports", params={"username": "ledgerlark"}
    ).json()
    assert menu.attrs["handle"] == "ledgerlark"
    assert menu.attrs["report_count"] == wire["reportCount"] == len(menu)
    assert "dateRange" not in menu.columns and "date_range" not in menu.columns
    first = wire["reports"][0]
    row = menu.iloc[0]
    assert row["report_id"] == first["id"]
    assert row["date_from"] == pd.Timestamp(first["dateRange"]["from"])
    assert row["date_to"] == pd.Timestamp(first["dateRange"]["to"])
    assert row["created_at"] == pd.Timestamp(first["createdAt"])
    assert row["post_count"] == first["postCount"]
    assert not menu["owned"].any()
    lab.reports.buy("ledgerlark", ids=[first["id"]])
    assert lab.reports.menu("ledgerlark")["owned"].tolist() == [True] + [False] * (len(menu) - 1)


def test_quote_is_free_and_reads_the_402(lab, emulator, chain_view, payments):
    before = chain_view(emulator)
    menu = lab.reports.menu("quantquill")
    quote = lab.reports.quote("quantquill")
    assert quote.select == "all"
    assert quote.report_count == len(menu)
    assert quote.unit_price_usd == 0.01
    assert quote.amount_atomic == UNIT * len(menu)
    assert quote.owned == 0 and quote.to_pay_atomic == quote.amount_atomic
    assert quote.resource == "/api/intel/reports?username=quantquill&select=all"
    two = lab.reports.quote("quantquill", ids=menu.report_id[:2].tolist())
    assert (two.select, two.report_count, two.amount_atomic) == ("range", 2, 2 * UNIT)
    # A date range counts what the menu's createdAt strings fall in (inclusive).
    since = menu["created_at"].iloc[2]
    ranged = lab.reports.quote("quantquill", from_=since.to_pydatetime())
    assert ranged.report_count == int((menu["created_at"] >= since).sum()) == 3
    assert chain_view(emulator) == before
    assert payments(lab) == []


def test_buy_all_then_buy_again_pays_nothing(lab, emulator, chain_view, payments):
    menu = lab.reports.menu("solarmoth")
    before = chain_view(emulator)
    bought = lab.reports.buy("solarmoth")
    n = len(menu)
    assert bought.newly_bought == menu.report_id.tolist()
    assert bought.already_owned == []
    assert bought.paid_atomic == n * UNIT
    assert bought.charged_usd == pytest.approx(n * 0.01)
    assert chain_view(emulator) == (before[0] + 1, before[1] + n * UNIT)
    rows = payments(lab)
    assert [(r["status"], r["amount_atomic"]) for r in rows] == [("settled", n * UNIT)]
    assert _query(rows[0]["path"]) == {"username": ["solarmoth"], "select": ["all"]}
    assert bought.costs[0].tx_hash == emulator.chain.transfers()[-1].tx_hash

    ledger_before = lab.ledger.to_pandas()
    chain_before = chain_view(emulator)
    stats_before = emulator.reports_app.state.gate.stats()
    again = lab.reports.buy("solarmoth")
    assert again.paid_atomic == 0
    assert again.charged_usd == 0
    assert again.costs == ()
    assert again.newly_bought == []
    assert again.already_owned == bought.report_ids
    assert again.snapshots == bought.snapshots
    pd.testing.assert_frame_equal(lab.ledger.to_pandas(), ledger_before)
    assert chain_view(emulator) == chain_before
    # No paid request left: not even the unpaid half of the handshake reached the gate.
    assert emulator.reports_app.state.gate.stats() == stats_before


def test_partly_owned_handle_pays_only_for_the_missing_reports(lab, emulator, chain_view, payments):
    menu = lab.reports.menu("bytebarista")
    ids = menu.report_id.tolist()
    owned = [ids[1], ids[4]]
    first = lab.reports.buy("bytebarista", ids=owned)
    assert first.paid_atomic == 2 * UNIT
    assert sorted(first.newly_bought) == sorted(owned)

    quote = lab.reports.quote("bytebarista")
    assert (quote.owned, quote.to_pay_atomic) == (2, (len(ids) - 2) * UNIT)
    before = chain_view(emulator)
    rest = lab.reports.buy("bytebarista")
    missing = [i for i in ids if i not in owned]
    assert rest.paid_atomic == len(missing) * UNIT == 60_000
    assert chain_view(emulator) == (before[0] + 1, before[1] + 60_000)
    assert emulator.chain.transfers()[-1].amount_atomic == 60_000
    row = payments(lab)[-1]
    assert (row["status"], row["amount_atomic"]) == ("settled", 60_000)
    assert _query(row["path"]) == {
        "username": ["bytebarista"],
        "select": ["range"],
        "ids": [",".join(missing)],
    }
    assert rest.newly_bought == missing
    assert rest.already_owned == owned
    assert rest.report_ids == ids  # the whole selection, newest first
    assert rest.charged_usd == pytest.approx(0.06)


def test_a_date_range_buys_what_it_covers_minus_what_is_owned(lab, payments):
    menu = lab.reports.menu("orbitalfinch")
    created = menu["created_at"]
    # The three newest reports, by an inclusive lower bound on createdAt.
    since = created.iloc[2].strftime("%Y-%m-%dT%H:%M:%S.000Z")
    newest = menu.report_id[:3].tolist()
    lab.reports.buy("orbitalfinch", ids=[newest[0]])
    bought = lab.reports.buy("orbitalfinch", from_=since)
    assert bought.report_ids == newest
    assert bought.already_owned == [newest[0]]
    assert bought.newly_bought == newest[1:]
    assert bought.paid_atomic == 2 * UNIT
    assert _query(payments(lab)[-1]["path"])["ids"] == [",".join(newest[1:])]
    # A range with nothing owned is sent as asked.
    older = created.iloc[-1].strftime("%Y-%m-%dT%H:%M:%S.000Z")
    last = lab.reports.buy("orbitalfinch", to=older)
    assert last.newly_bought == [menu.report_id.iloc[-1]]
    assert _query(payments(lab)[-1]["path"]) == {
        "username": ["orbitalfinch"],
        "select": ["range"],
        "to": [older],
    }


def test_snapshots_are_kept_verbatim_and_survive_a_new_lab(emulator, lab_for, tmp_path, chain_view):
    ledger = tmp_path / "shared.sqlite"
    first = lab_for(emulator, ledger=ledger)
    bought = first.reports.buy("quantquill")
    served = {r["id"]: r for r in build_library()["quantquill"].reports}
    assert [s["id"] for s in bought.snapshots] == [r["id"] for r in served.values()]
    for snapshot in bought.snapshots:
        assert snapshot == served[snapshot["id"]]  # every field, nested ones included
    # The stored JSON is the one received: a field this client does not know stays.
    claims = Claims(first.ledger.db).all(report_scope(emulator.reports_url))
    stored = [json.loads(claim.answer) for claim in claims if claim.answer is not None]
    assert {snapshot["id"] for snapshot in stored} == set(served)
    assert all("narrative" in snapshot for snapshot in stored)
    first.close()

    before = chain_view(emulator)
    second = lab_for(emulator, ledger=ledger)
    again = second.reports.buy("quantquill")
    assert again.paid_atomic == 0
    assert again.snapshots == bought.snapshots
    assert chain_view(emulator) == before


def test_library_lists_what_is_owned_with_its_receipt(lab, emulator):
    empty = lab.reports.library()
    assert empty.empty
    lab.reports.buy("solarmoth")
    menu = lab.reports.menu("ledgerlark")
    lab.reports.buy("ledgerlark", ids=menu.report_id[:2].tolist())
    library = lab.reports.library()
    assert len(library) == 3 + 2
    assert set(library["username"]) == {"solarmoth", "ledgerlark"}
    assert library.dtypes.tolist() == empty.dtypes.tolist()
    assert (library["price_atomic"] == UNIT).all()
    assert not library["first_party"].any()
    assert set(library["tx_hash"]) == {t.tx_hash for t in emulator.chain.transfers()}
    settled = {row["id"]: row for row in lab.ledger.rows() if row["status"] == "settled"}
    assert set(library["ledger_id"]) == set(settled)
    for _, row in library.iterrows():
        assert settled[row["ledger_id"]]["tx_hash"] == row["tx_hash"]
    assert str(library["bought_at"].dtype) == "datetime64[us, UTC]"
    assert lab.reports.library("ledgerlark")["report_id"].tolist() == menu.report_id[:2].tolist()


def test_report_set_tables_keep_structs_in_arrow_and_flatten_in_pandas(lab):
    bought = lab.reports.buy("ledgerlark")
    table = bought.to_arrow()
    assert table.num_rows == len(bought) == 5
    assert str(table.schema.field("date_range").type).startswith("struct<from: timestamp")
    assert table.schema.field("analytics").type.num_fields > 0  # nested struct kept
    assert str(table.schema.field("created_at").type) == "timestamp[us, tz=UTC]"
    frame = bought.to_pandas()
    assert len(frame) == 5
    assert {"date_from", "date_to", "narrative_headline", "analytics_sentiment_overall"} <= set(
        frame.columns
    )
    assert not any("." in name for name in frame.columns)
    snapshot = bought.snapshots[0]
    row = frame.iloc[0]
    assert row["analytics_sentiment_overall"] == snapshot["analytics"]["sentiment"]["overall"]
    assert row["date_from"] == pd.Timestamp(snapshot["dateRange"]["from"])
    assert row["ledger_id"] == bought.costs[0].ledger_id
    assert str(frame["source_collected_at"].dtype) == "datetime64[us, UTC]"
    assert frame.attrs["paid_atomic"] == bought.paid_atomic


def test_async_lab_and_concurrent_buys_pay_once(emulator, tmp_path, chain_view):
    async def main() -> tuple[object, object, int]:
        alab = xl.connect_async(
            emulator.gateway_url,
            emulator.reports_url,
            wallet=xl.Wallet.create(),
            ledger=tmp_path / "async.sqlite",
        )
        try:
            assert isinstance(alab.reports, AsyncReports)
            one, two = await asyncio.gather(
                alab.reports.buy("solarmoth"), alab.reports.buy("solarmoth")
            )
            library = await alab.reports.library()
            return one, two, len(library)
        finally:
            await alab.aclose()

    before = chain_view(emulator)
    one, two, owned = asyncio.run(main())
    assert sorted([one.paid_atomic, two.paid_atomic]) == [0, 3 * UNIT]
    assert owned == 3
    assert chain_view(emulator) == (before[0] + 1, before[1] + 3 * UNIT)


def test_sync_reports_is_the_registered_twin(lab):
    assert isinstance(lab.reports, Reports)
    for name in ("shelf", "menu", "quote", "buy", "library"):
        assert callable(getattr(Reports, name))
    assert "Spends money" in Reports.buy.__doc__.splitlines()[0]

"""The report tables on their own: declared columns, unknown fields kept, sensible names."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from x402lab.tables.reports import (
    LIBRARY_SCHEMA,
    REPORT_SCHEMA,
    OwnedReport,
    ReportSet,
    library_table,
    menu_table,
    shelf_table,
    snake,
)

NOW = datetime(2025, 8, 1, tzinfo=UTC)


def _report(report_id: str, created: str, **extra: object) -> OwnedReport:
    snapshot = {
        "id": report_id,
        "username": "h",
        "createdAt": created,
        "model": "m",
        "postCount": 3,
        "dateRange": {"from": "2025-01-01T00:00:00.000Z", "to": "2025-01-08T00:00:00Z"},
        **extra,
    }
    return OwnedReport(report_id=report_id, handle="h", snapshot=snapshot, owned_before=False)


def test_names_become_snake_case():
    assert snake("displayName") == "display_name"
    assert snake("peakHourUtc") == "peak_hour_utc"
    assert snake("totalLikes") == "total_likes"
    assert snake("URLCount") == "url_count"


def test_an_empty_report_set_has_the_declared_columns_and_dtypes():
    full = ReportSet("h", (_report("a", "2025-02-01T00:00:00.000Z"),)).to_pandas()
    empty = ReportSet("h", ()).to_pandas()
    assert empty.empty
    declared = [c for c in full.columns if c in empty.columns]
    assert declared == list(empty.columns)
    assert empty.dtypes.tolist() == full[declared].dtypes.tolist()
    assert ReportSet("h", ()).to_arrow().schema == REPORT_SCHEMA


def test_unknown_and_nested_fields_are_kept_and_flattened():
    reports = (
        _report(
            "new",
            "2025-03-01T00:00:00.000Z",
            scores={"risk": {"level": 2, "seenAt": "2025-03-01T10:00:00Z"}},
            tags=["a", "b"],
        ),
        # An older report without the new field, and a field whose type changed.
        _report("old", "2025-02-01T00:00:00.000Z", tags="single"),
    )
    report_set = ReportSet("h", reports)
    table = report_set.to_arrow()
    assert pa.types.is_struct(table.schema.field("scores").type)
    # Mixed types cannot share an Arrow type: kept as JSON text, not dropped.
    assert table.column("tags").to_pylist() == ['["a", "b"]', '"single"']
    frame = report_set.to_pandas()
    assert frame["scores_risk_level"].tolist()[0] == 2
    assert frame["scores_risk_level"].isna().tolist() == [False, True]
    assert frame["scores_risk_seen_at"].iloc[0] == datetime(2025, 3, 1, 10, tzinfo=UTC)
    assert frame["date_to"].iloc[0] == datetime(2025, 1, 8, tzinfo=UTC)
    assert report_set.snapshots[0]["scores"]["risk"]["seenAt"] == "2025-03-01T10:00:00Z"


def test_shelf_menu_and_library_tables_keep_their_declared_schema_when_empty():
    shelf = shelf_table([], fetched_at=NOW)
    assert shelf.schema.names == [
        "username",
        "display_name",
        "report_count",
        "post_count",
        "gathered_at",
        "fetched_at",
    ]
    entries = [
        {"username": "b", "gatheredAt": "2025-01-01T00:00:00Z", "followers": 3},
        {"username": "a", "gatheredAt": "2025-02-01T00:00:00Z", "followers": 5},
    ]
    full = shelf_table(entries, fetched_at=NOW)
    assert full.column("username").to_pylist() == ["a", "b"]  # newest first
    assert full.schema.names[-2:] == ["followers", "fetched_at"]
    assert menu_table("h", [], set(), fetched_at=NOW).num_rows == 0
    assert library_table([]).schema == LIBRARY_SCHEMA

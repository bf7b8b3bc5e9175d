"""One way to change a status (docs/money.md, money rule 8).

The source of x402lab (the emulator aside: a separate server with its own tables) writes
``payments.status`` and ``claims.status`` only in the one transition function of each table,
in the table's own module (``ledger/payments.py``: ``move_payments`` with its one-statement
settle; ``ledger/claim_rows.py``: ``move_claims``), and new rows only through each table's
inserter, which takes the initial statuses alone. The transition functions refuse a move
their table does not allow, naming the row, the status it is in and the one asked for.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from support.ledger import meta, signed

import x402lab
import x402lab as xl
from x402lab.ledger import Claims, Ledger
from x402lab.ledger.claim_rows import insert_rows, move_claims
from x402lab.ledger.payments import insert_payment, move_payments
from x402lab.ledger.statuses import (
    CLAIM_INITIAL,
    CLAIM_TRANSITIONS,
    INITIAL,
    TRANSITIONS,
    UNRESOLVED,
    ClaimStatus,
    PaymentStatus,
)

ROOT = Path(x402lab.__file__).parent
C, P = ClaimStatus, PaymentStatus

#: Where each table's status may be changed: (file under x402lab/, enclosing function).
MOVERS = {
    "payments": {
        ("ledger/payments.py", "move_payments"),
        ("ledger/payments.py", "_settle_in_flight"),
    },
    "claims": {("ledger/claim_rows.py", "move_claims")},
}
#: Where each table's rows may be inserted with a status: the inserter, which takes only the
#: initial statuses, and the schema step that copies the claims of earlier stores.
INSERTERS = {
    "payments": {("ledger/payments.py", "insert_payment")},
    "claims": {("ledger/claim_rows.py", "_COLUMNS"), ("ledger/schema.py", "_CLAIM_INSERT")},
}
#: ``held`` follows a payment's status: set by its moves, cleared by the running totals.
HELD_WRITERS = {
    ("ledger/payments.py", "move_payments"),
    ("ledger/payments.py", "_settle_in_flight"),
    ("ledger/payments.py", "_unhold"),  # expire_held and release_prepay_miss write through it
}

_TABLE = r"(?P<table>payments|claims)\b"
_UPDATE = re.compile(rf"\bUPDATE\s+{_TABLE}(?:\s+(?:AS\s+)?\w+)?\s+SET\b(?P<sets>.*)", re.I | re.S)
_INSERT = re.compile(
    rf"\b(?:INSERT\s+(?:OR\s+\w+\s+)?|REPLACE\s+)INTO\s+{_TABLE}\s*(?P<rest>.*)", re.I | re.S
)
_UPSERT = re.compile(r"\bDO\s+UPDATE\s+SET\b(?P<sets>.*)", re.I | re.S)
_SET_END = re.compile(r"\b(WHERE|RETURNING|FROM)\b", re.I)
#: A dynamic part of an SQL string (an f-string's ``{...}``, or a value added with ``+``).
HOLE = "\x00"


def _render(node: ast.AST) -> str | None:
    """The text of a string expression, its dynamic parts as ``HOLE``; None if not text."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        return "".join(_render(part) or HOLE for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _render(node.left), _render(node.right)
        if left is None and right is None:
            return None
        return (left or HOLE) + (right or HOLE)
    return None


def _strings(tree: ast.Module) -> list[tuple[int, str, str]]:
    """Every string expression of a module (docstrings aside): (line, text, where), where
    ``where`` is the innermost enclosing function, else the module-level name assigned."""
    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, where: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            where = node.name
        elif isinstance(node, ast.Assign | ast.AnnAssign) and where == "<module>":
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            for child in ast.iter_child_nodes(node):
                visit(child, names[0] if names else where)
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return  # a docstring or a bare string: prose, not SQL that runs
        text = _render(node) if isinstance(node, ast.expr) else None
        if text is not None:
            found.append((node.lineno, " ".join(text.split()), where))
            return  # its parts are in ``text``
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    visit(tree, "<module>")
    return found


def _writes_column(sets: str, column: str) -> bool:
    """Whether an SQL SET list assigns ``column`` (or assigns columns named at run time)."""
    sets = _SET_END.split(sets, maxsplit=1)[0]
    return bool(re.search(rf"(?<![\w.]){column}\s*=", sets, re.I)) or HOLE in sets


def status_writes(source: str, path: str) -> list[str]:
    """The writes of ``payments.status``, ``claims.status`` or ``payments.held`` in one
    module's source that happen outside the places allowed above, as ``path:line: why``."""
    problems: list[str] = []
    for line, sql, where in _strings(ast.parse(source)):
        here = (path, where)
        update = _UPDATE.search(sql)
        insert = _INSERT.search(sql)
        sets = update["sets"] if update else None
        table = update["table"].lower() if update else None
        if insert:
            table = insert["table"].lower()
            upsert = _UPSERT.search(insert["rest"])
            sets = upsert["sets"] if upsert else None
            columns = re.match(r"\(([^)]*)\)", insert["rest"].strip())
            names = columns[1] if columns else "*"  # no column list: every column
            sets_status = names == "*" or re.search(r"\bstatus\b", names, re.I) or HOLE in names
            if sets_status and here not in INSERTERS[table]:
                problems.append(
                    f"{path}:{line}: inserts {table} rows with a status outside"
                    f" {sorted(INSERTERS[table])} (new rows start there, in an initial status)"
                )
        if table is None or sets is None:
            continue
        if _writes_column(sets, "status") and here not in MOVERS[table]:
            problems.append(
                f"{path}:{line}: writes {table}.status in {where}, outside its transition"
                f" function {sorted(MOVERS[table])}"
            )
        if table == "payments" and _writes_column(sets, "held") and here not in HELD_WRITERS:
            problems.append(f"{path}:{line}: writes payments.held in {where}")
    return problems


def _sources() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if "emulator" not in p.relative_to(ROOT).parts)


def test_status_is_written_only_by_each_tables_transition_function():
    problems: list[str] = []
    for path in _sources():
        problems += status_writes(path.read_text(), path.relative_to(ROOT).as_posix())
    assert not problems, "\n".join(problems)


def test_the_transition_functions_and_inserters_are_where_the_scan_expects_them():
    # A renamed function would leave the scan allowing nothing (or something else).
    allowed = set().union(*MOVERS.values(), *INSERTERS.values(), HELD_WRITERS)
    seen = set()
    for file, _ in allowed:
        seen |= {(file, where) for _, _, where in _strings(ast.parse((ROOT / file).read_text()))}
    assert allowed <= seen, allowed - seen


STRAY = """
SQL = "UPDATE claims SET error = ? WHERE id = ?"  # not a status write

def settle_quietly(tx, row_id):
    tx.execute(
        "UPDATE payments SET tx_hash = ?,"
        " status = 'settled' WHERE id = ?",
        ("0x1", row_id),
    )

def close(tx, ids, status):
    tx.executemany(f"UPDATE claims SET error = NULL, status = ? WHERE id = ?", ids)

def upsert(tx):
    tx.execute("INSERT INTO claims (scope, key) VALUES (?, ?)"
               " ON CONFLICT (scope, key) DO UPDATE SET status = excluded.status")

def copy(tx, row):
    tx.execute("INSERT INTO payments (id, status) VALUES (?, ?)", row)

def assign(tx, sets):
    tx.execute("UPDATE payments SET " + sets + " WHERE id = ?", (1,))

def unhold(tx):
    tx.execute("UPDATE payments SET held = 0 WHERE id = 1")

def replace(tx, row):
    tx.execute("REPLACE INTO claims VALUES (?, ?, ?)", row)
"""


def test_the_scan_names_file_and_line_of_every_stray_write():
    found = status_writes(STRAY, "x402lab/stray.py")
    lines = [int(problem.split(":")[1]) for problem in found]
    assert lines == [6, 12, 15, 19, 22, 22, 25, 28], found
    assert "writes payments.status in settle_quietly" in found[0]
    assert "writes claims.status in close" in found[1]
    assert "inserts payments rows with a status" in found[3]
    assert "writes payments.held in unhold" in found[-2]
    assert "inserts claims rows with a status" in found[-1]


# -- the transition functions refuse what their table does not allow -------------------------


def test_the_declared_moves_cover_every_status_and_leave_final_ones_final():
    assert set(TRANSITIONS) | set(INITIAL) == set(PaymentStatus)
    assert set(CLAIM_TRANSITIONS) | set(CLAIM_INITIAL) == set(ClaimStatus)
    assert C.DONE not in {s for sources in CLAIM_TRANSITIONS.values() for s in sources}
    # move_payment's one-statement settle starts from in-flight rows only (UNRESOLVED).
    assert set(UNRESOLVED) <= set(TRANSITIONS[P.SETTLED])


def test_an_illegal_payment_move_raises_naming_row_and_statuses(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", user="t")
    good = signed(ledger, "k1", 10_000)
    released = ledger.reserve(budget="b", cap_atomic=None, amount_atomic=5_000, meta=meta("k2"))
    ledger.release(released)
    before = ledger.budget_committed("b")
    with pytest.raises(
        xl.ConfigError, match=rf"ledger row {released} cannot move to 'settled' from 'released'"
    ):
        ledger.record_settled(released, tx_hash="0xabc", payer="0xPayer")
    # A bulk move with one illegal row moves none of them (the transaction rolls back).
    with (
        pytest.raises(
            xl.ConfigError, match=rf"ledger row {released} cannot move to 'failed' from 'released'"
        ),
        ledger.db.transaction() as tx,
    ):
        move_payments(tx, [good, released], P.FAILED, 1, {"error": "no"})
    assert ledger.row(good)["status"] == "signed"
    assert ledger.row(released)["status"] == "released"
    assert ledger.budget_committed("b") == before == 10_000
    with pytest.raises(
        xl.ConfigError, match="ledger row 999 cannot move to 'expired' from 'missing'"
    ):
        ledger.record_expired(999)


def test_a_settled_payment_ignores_a_move_that_says_less(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", user="t")
    row = signed(ledger, "k", 10_000)
    ledger.record_settled(row, tx_hash=None, payer="0xPayer")
    ledger.record_unknown(row, "the answer was lost")
    ledger.record_failed(row, "late")
    with ledger.db.transaction() as tx:
        move_payments(tx, [row], P.SETTLED, 1, {"tx_hash": "0xfound"})
    found = ledger.row(row)
    assert (found["status"], found["tx_hash"], found["error"]) == ("settled", "0xfound", None)
    with pytest.raises(xl.ConfigError, match=rf"ledger row {row} cannot move to 'expired'"):
        ledger.record_expired(row)


def test_a_bulk_payment_move_keeps_held_and_the_running_total(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", user="t")
    rows = [signed(ledger, f"k{i}", 1_000 * (i + 1)) for i in range(4)]
    unsigned = ledger.reserve(budget="b", cap_atomic=None, amount_atomic=50, meta=meta("r"))
    assert ledger.budget_committed("b") == 10_050
    with ledger.db.transaction() as tx:
        move_payments(tx, rows[:2], P.REJECTED, 7, {"error": "refused"})  # held: still counted
        move_payments(tx, rows[2:], P.EXPIRED, 7)
        move_payments(tx, [unsigned], P.RELEASED, 7)
    assert ledger.budget_committed("b") == 3_000 == ledger.budget_state("b").committed_atomic
    assert [ledger.row(r)["held"] for r in rows] == [True, True, False, False]


def test_a_new_row_starts_only_in_an_initial_status(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", user="t")
    with pytest.raises(xl.ConfigError, match="a new ledger row cannot start as 'settled'"):
        with ledger.db.transaction() as tx:
            insert_payment(tx, "b", 1, meta("k"), P.SETTLED, (1, "me", "t"))
    # scope, key, status, payment key, ledger id, floor, owner, label, times, error, answer
    row = ("s", "k", str(C.FAILED), "k", None, 0, "me", None, 1, 1, None, None)
    with pytest.raises(xl.ConfigError, match="a new claim row cannot start as 'failed'"):
        with ledger.db.transaction() as tx:
            insert_rows(tx, [row])
    assert ledger.rows() == [] and Claims(ledger.db).history() == []


def test_an_illegal_claim_move_raises_naming_row_and_statuses(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", user="t")
    claims = Claims(ledger.db, now=lambda: 1000.0)
    claimed = claims.claim("s", [f"k{i}" for i in range(3)])
    ids = [claimed[f"k{i}"].record.id for i in range(3)]
    claims.complete("s", [("k1", b"answer")], ledger_id=None)
    done = ids[1]
    # Done is final: moving it (alone or among legal moves) refuses, and nothing moves.
    with (
        pytest.raises(
            xl.ConfigError,
            match=rf"claim row {done} \(s 'k1'\) cannot move to 'failed' from 'done'",
        ),
        ledger.db.transaction() as tx,
    ):
        move_claims(tx, [(i, "gave up") for i in ids], C.FAILED, 5, sets="error = ?")
    assert [claims.get("s", [k])[k].status for k in ("k0", "k1", "k2")] == [
        "pending",
        "done",
        "pending",
    ]
    with (
        pytest.raises(
            xl.ConfigError, match=rf"claim row {done} \(s 'k1'\) cannot move to 'done' from 'done'"
        ),
        ledger.db.transaction() as tx,
    ):
        move_claims(tx, [(done,)], C.DONE, 5)
    with (
        pytest.raises(
            xl.ConfigError, match="claim row 999 cannot move to 'unknown' from 'missing'"
        ),
        ledger.db.transaction() as tx,
    ):
        move_claims(tx, [(999,)], C.UNKNOWN, 5)
    with pytest.raises(xl.ConfigError, match="sets status and updated_us itself"):
        with ledger.db.transaction() as tx:
            move_claims(tx, [(ids[0], "done")], C.FAILED, 5, sets="status = ?")


def test_a_bulk_claim_move_reads_nothing_per_row(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", user="t")
    claims = Claims(ledger.db)
    keys = [f"k{i}" for i in range(3_000)]
    claims.claim("s", keys)
    assert set(claims.release("s", keys, "no answer").values()) == {C.FAILED}
    statements: list[str] = []
    ledger.db._db.set_trace_callback(statements.append)
    try:
        assert len(claims.complete("s", [(k, b"a") for k in keys])) == len(keys)
    finally:
        ledger.db._db.set_trace_callback(None)
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(reads) <= 3 * len(keys) // 500, len(reads)  # a few reads per chunk of 500
    assert sum(s.startswith("UPDATE claims SET status") for s in statements) == len(keys)
    assert {r.status for r in claims.all("s")} == {C.DONE}


def test_a_bulk_settle_of_rows_in_flight_is_one_statement(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", user="t")
    rows = [signed(ledger, f"k{i}", 1_000) for i in range(3)]
    ledger.record_unknown(rows[1], "dropped")
    statements: list[str] = []
    ledger.db._db.set_trace_callback(statements.append)
    try:
        with ledger.db.transaction() as tx:
            move_payments(tx, rows, P.SETTLED, 9, {"tx_hash": "0xt", "payer": "0xPayer"})
    finally:
        ledger.db._db.set_trace_callback(None)
    assert [s.split()[0] for s in statements] == ["BEGIN", "UPDATE", "COMMIT"]
    assert {(ledger.row(r)["status"], ledger.row(r)["tx_hash"]) for r in rows} == {
        ("settled", "0xt")
    }
    # Settled already (a receipt without its hash) among rows in flight: the full rules.
    late = signed(ledger, "late", 1_000)
    ledger.record_settled(late, tx_hash=None, payer="0xPayer")
    more = signed(ledger, "more", 1_000)
    with ledger.db.transaction() as tx:
        move_payments(tx, [late, more], P.SETTLED, 10, {"tx_hash": "0xu"})
    assert [ledger.row(r)["tx_hash"] for r in (late, more)] == ["0xu", "0xu"]
    assert ledger.budget_committed("b") == 5_000 == ledger.budget_state("b").settled_atomic

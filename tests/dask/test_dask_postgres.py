"""A Dask batch whose ledger and budget live in PostgreSQL: the workers open the same
database (its password, when there is one, from their own environment, never through Dask)."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest
from support.dask_cluster import EMBED, postgres_database, require, texts, transfers_per_key

import x402lab as xl

require("dask.dataframe")
require("distributed")
import dask.dataframe as dd  # noqa: E402


@pytest.fixture(scope="module")
def pg_ledger() -> Iterator[str]:
    url, drop = postgres_database()
    try:
        yield url
    finally:
        drop()


def test_workers_share_one_postgresql_ledger_and_budget(cluster, emulator, team_lab, pg_ledger):
    lab = team_lab(emulator, usd=0.8, ledger=pg_ledger)  # 80 texts at the minimum charge
    assert lab.ledger.db.dialect == "postgresql"
    words = texts(120, "pg")
    series = dd.from_pandas(pd.Series(words, name="text"), npartitions=4)

    # partial=True: each partition spends what the shared budget has left, then skips; the
    # driver warns once for the whole batch.
    with pytest.warns(xl.IncompleteBatchWarning, match="of 120 rows not answered"):
        frame = lab.batch_embed(
            series, model=EMBED, dimensions=8, rows_per_request=1, progress=None, partial=True
        ).compute()
    assert frame["text"].tolist() == words
    spent = sum(t.amount_atomic for t in emulator.chain.transfers())
    assert spent <= 800_000 and (frame["status"] == "ok").sum() == len(emulator.chain.transfers())
    assert set(frame["status"]) == {"ok", "skipped_budget"}
    per_key = transfers_per_key(lab, emulator)
    assert set(per_key.values()) == {1}
    assert lab.budget.state().committed_atomic == spent

    with pytest.warns(xl.IncompleteBatchWarning, match="skipped_budget"):
        again = lab.batch_embed(
            series, model=EMBED, dimensions=8, rows_per_request=1, progress=None, partial=True
        ).compute()
    assert set(again["status"]) == {"cached", "skipped_budget"}
    assert transfers_per_key(lab, emulator) == per_key  # a re-run pays nothing again


def test_a_database_password_reaches_the_workers_from_their_environment_only(
    cluster, emulator, team_lab, pg_ledger
):
    import pickle
    import secrets

    import psycopg
    from support.dask_cluster import POSTGRES_ADMIN_URL

    from x402lab.batch.cluster import recipe_of
    from x402lab.errors import ConfigError
    from x402lab.ledger import Ledger

    role, password = f"x402lab_dask_{secrets.token_hex(3)}", secrets.token_hex(12)
    dbname = pg_ledger.rsplit("/", 1)[1]
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        admin.execute(f"GRANT ALL ON DATABASE {dbname} TO {role}")
    Ledger(pg_ledger).db.close()  # the tables exist (made by the owner), then granted
    with psycopg.connect(pg_ledger, autocommit=True) as owner:
        owner.execute(f"GRANT ALL ON SCHEMA public TO {role}")
        owner.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
        owner.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}")
        port = owner.info.port
    url = f"postgresql://{role}:{password}@127.0.0.1:{port}/{dbname}"
    lab = team_lab(emulator, ledger=url)
    recipe = recipe_of(lab.async_.session, lab.async_.batches.connection, "batch_embed()")
    assert password.encode() not in pickle.dumps(recipe) and f"{role}@127.0.0.1" in recipe.ledger
    series = dd.from_pandas(pd.Series(texts(6, "password"), name="text"), npartitions=2)
    try:
        with pytest.raises(ConfigError, match="PGPASSWORD") as refused:
            lab.batch_embed(series, model=EMBED, progress=None)
        assert password not in str(refused.value) and emulator.chain.transfers() == []
        cluster.run(_set_env, "PGPASSWORD", password)
        frame = lab.batch_embed(series, model=EMBED, rows_per_request=1, progress=None).compute()
        assert set(frame["status"]) == {"ok"} and len(emulator.chain.transfers()) == 6
    finally:
        cluster.run(_set_env, "PGPASSWORD", None)
        lab.close()
        with psycopg.connect(pg_ledger, autocommit=True) as owner:
            owner.execute(f"DROP OWNED BY {role}")
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f"DROP ROLE {role}")


def _set_env(name: str, value: str | None) -> None:
    """On a worker: set (or remove) one environment variable."""
    import os

    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value

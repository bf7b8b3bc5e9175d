"""Which database a ledger location names: a SQLite file path (or ``sqlite://`` URL), or a
``postgresql://`` (``postgres://``) URL."""

from __future__ import annotations

import os

from x402lab.errors import ConfigError
from x402lab.ledger.database import Database
from x402lab.ledger.postgres import PostgresDatabase
from x402lab.ledger.sqlite import SQLiteDatabase


def open_database(target: str | os.PathLike[str] | Database) -> Database:
    """The database at ``target``: a ``Database`` as is, a SQLite file path or ``sqlite://``
    URL, or a ``postgresql://`` (``postgres://``) URL.

    Raises ConfigError for a URL of another scheme (naming the supported ones) and for a
    database that cannot be opened; a password in the URL is never repeated.
    """
    if isinstance(target, Database):
        return target
    text = os.fspath(target)
    scheme = text.split("://", 1)[0].lower() if "://" in text else None
    if scheme in ("postgresql", "postgres"):
        return PostgresDatabase(text)
    if scheme is not None and scheme != "sqlite":
        where = text.split("://", 1)[1].split("@")[-1]
        raise ConfigError(
            f"ledger {scheme}://{where}: {scheme!r} is not a supported ledger scheme; use a"
            " SQLite file path (or sqlite:///path) or a PostgreSQL URL"
            " (postgresql://user@host:port/dbname)"
        )
    if scheme == "sqlite":
        text = text.split("://", 1)[1]
    return SQLiteDatabase(text)

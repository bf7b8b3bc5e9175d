"""Where a PostgreSQL ledger is, said safely: its URL without the password, the server's
host and port, the local folder for its files, and a connection error in words a person can
act on (``postgres.PostgresDatabase`` uses it; nothing here imports psycopg)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

#: What libpq says when no server answers there.
_UNREACHABLE = (
    "connection refused",
    "could not connect",
    "timeout expired",
    "no such file or directory",
    "could not translate host name",
    "name or service not known",
    "network is unreachable",
    "no route to host",
)


class PgTarget:
    """The parts of a ledger URL a message may show (``params``: libpq's, from
    ``conninfo_to_dict``); the password is kept only to be scrubbed from messages."""

    def __init__(self, params: dict[str, Any]) -> None:
        self._password = params.get("password")
        host = params.get("host") or params.get("hostaddr")
        port = params.get("port")
        #: ``host:port``, or "the local socket".
        self.where = f"{host}:{port or 5432}" if host else "the local socket"
        # libpq's defaults: the database is named after the user, the user after the login.
        self.dbname = str(params.get("dbname") or params.get("user") or _login())
        user = f"{params['user']}@" if params.get("user") else ""
        #: ``postgresql://user@host:port/dbname``: never the password.
        self.url = f"postgresql://{user}{host or ''}{f':{port}' if port else ''}/{self.dbname}"
        folder = f"{host or 'local'}-{port or 5432}-{self.dbname}"
        folder = "".join(char if char.isalnum() or char in "-_." else "_" for char in folder)
        #: Files that belong next to the ledger (downloaded media) stay on this machine.
        self.folder = Path("~/.x402lab/postgresql").expanduser() / folder

    def explain(self, exc: Exception) -> str:
        """What a failed connection means and what to do (never with the password)."""
        text = str(exc).strip()
        # libpq says "connection to server at "h", port p failed: <why>": keep the why.
        first = text.splitlines()[0] if text else type(exc).__name__
        detail = first.rsplit("failed: ", 1)[-1].removeprefix("FATAL:").strip()
        detail = scrub(detail, self._password)
        text = text.lower()
        if "does not exist" in text and "database" in text:
            return (
                f"the PostgreSQL database {self.dbname!r} does not exist on {self.where}:"
                f" create it (createdb {self.dbname}, or CREATE DATABASE {self.dbname}) or"
                " name another one in the ledger URL"
            )
        if "password" in text or "authentication" in text:
            return (
                f"the PostgreSQL server at {self.where} refused the login of {self.url}:"
                f" {detail}. Check the user and password (PGPASSWORD or ~/.pgpass)"
            )
        if "role" in text and "does not exist" in text:
            return f"the PostgreSQL server at {self.where} has no such user: {detail}"
        if any(sign in text for sign in _UNREACHABLE):
            return (
                f"the PostgreSQL server at {self.where} is not reachable ({detail}):"
                " check the host and port of the ledger URL and that the server is running"
            )
        return f"cannot open the PostgreSQL ledger {self.url}: {detail}"


def scrub(text: str, password: str | None) -> str:
    """``text`` with the password and any ``user:password@`` part of a URL removed."""
    if password:
        text = text.replace(password, "***")
    return re.sub(r"(://[^/:@\s]*):[^@/\s]*@", r"\1@", text)


def _login() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return ""

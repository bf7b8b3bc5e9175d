"""Files private to their owner, whatever the umask: the ledger and the media it points at.

The ledger holds prompts, answers, bought report bodies and signed payments, so on a shared
host (JupyterHub) nobody else may read it. The folders we create are 0700 (``~/.x402lab``
always, as it is ours); the database file and its ``-wal`` and ``-shm`` are 0600. SQLite gives
the ``-wal`` and ``-shm`` it creates the mode of the database file, so creating that file 0600
before SQLite opens it covers all three; files already there are brought to 0600 too.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

FOLDER_MODE = 0o700
FILE_MODE = 0o600
#: Our own folder, private even when it already exists (it holds only our files).
HOME_FOLDER = "~/.x402lab"
_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def private_folder(folder: Path) -> None:
    """Create ``folder`` (and missing parents) 0700; ``~/.x402lab`` is made 0700 even if it exists.

    A folder the user already had is left as it is: it is theirs, not ours.
    """
    missing: list[Path] = []
    current = folder
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    folder.mkdir(parents=True, exist_ok=True)
    for created in missing:
        with contextlib.suppress(OSError):  # a race with another process creating it
            os.chmod(created, FOLDER_MODE)
    home = Path(HOME_FOLDER).expanduser().resolve()
    if folder.resolve() == home or home in folder.resolve().parents:
        with contextlib.suppress(OSError):
            os.chmod(home, FOLDER_MODE)


def private_database_file(path: Path) -> None:
    """Create the database file 0600 if missing, and bring it and its side files to 0600."""
    private_folder(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    os.close(fd)
    for suffix in ("", *_SQLITE_SIDE_FILES):
        target = path.with_name(path.name + suffix)
        with contextlib.suppress(FileNotFoundError):
            if target.stat().st_mode & 0o777 != FILE_MODE:
                os.chmod(target, FILE_MODE)

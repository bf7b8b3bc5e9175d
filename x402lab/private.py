"""Files and folders private to their owner, whatever the umask: the one helper for all of them.

Everything x402lab creates on disk can hold what the owner paid for or signed (prompts and
answers, bought report bodies, media, signed payments, the embedded world's wallet), so on a
shared host (JupyterHub) nobody else may read it. Every path that creates a folder or a file
goes through this module: folders we create are 0700 (``~/.x402lab`` always, as it is ours),
files 0600. A folder the user already had is left as it is: it is theirs, not ours.

In a plan's kernel (``x402lab plan``: ``PLAN_FOLDER_ENV`` names the notebook's own folder)
a rehearsal must change nothing of the user's: x402lab writes only in the temporary folder
(where the plan's scratch copy of the notebook's folder and its ledger copies are), never in
the notebook's own folder, and refuses any other path with a ConfigError naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
from collections.abc import AsyncIterable, Iterator
from pathlib import Path
from typing import IO

from x402lab.errors import ConfigError

#: Set by the planner in the kernel it starts: the notebook's real folder (see above).
PLAN_FOLDER_ENV = "X402LAB_PLAN_FOLDER"
FOLDER_MODE = 0o700
FILE_MODE = 0o600
#: Our own folder, private even when it already exists (it holds only our files).
HOME_FOLDER = "~/.x402lab"


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_rehearsal_write(path: str | os.PathLike[str]) -> None:
    """In a plan's kernel, raise ConfigError unless x402lab may write ``path`` there (in the
    temporary folder, outside the notebook's own folder); elsewhere, nothing."""
    protected = os.environ.get(PLAN_FOLDER_ENV)
    if not protected:
        return
    target = Path(path).expanduser().resolve()
    scratch = Path(tempfile.gettempdir()).resolve()
    if _within(target, scratch) and not _within(target, Path(protected).resolve()):
        return
    raise ConfigError(
        f"a plan's rehearsal does not write {target}: it would change a file of yours with"
        " rehearsed answers. Write by a path relative to the notebook's folder (the plan then"
        " writes it in its scratch copy and lists it), or plan a copy of the notebook that"
        " writes elsewhere"
    )


def private_folder(folder: str | os.PathLike[str]) -> Path:
    """Create ``folder`` (and missing parents) 0700 and return it; ``~/.x402lab`` is made 0700
    even if it exists. Folders that were already there keep their mode. In a plan's kernel a
    folder it may not write is refused (``check_rehearsal_write``)."""
    folder = Path(folder)
    missing: list[Path] = []
    current = folder
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    if missing:
        check_rehearsal_write(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for created in missing:
        with contextlib.suppress(OSError):  # a race with another process creating it
            os.chmod(created, FOLDER_MODE)
    home = Path(HOME_FOLDER).expanduser().resolve()
    resolved = folder.resolve()
    if resolved == home or home in resolved.parents:
        with contextlib.suppress(OSError):
            os.chmod(home, FOLDER_MODE)
    return folder


def private_file(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` empty if missing (its folder private), and bring it to 0600."""
    path = Path(path)
    check_rehearsal_write(path)
    private_folder(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    os.close(fd)
    if path.stat().st_mode & 0o777 != FILE_MODE:
        os.chmod(path, FILE_MODE)
    return path


@contextlib.contextmanager
def open_private(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO]:
    """Write ``path`` whole or not at all: a 0600 temporary file beside it, renamed over it on
    success (so a reader never sees half a file, and a crash leaves the old one)."""
    if not mode.startswith("w"):
        raise ValueError(f"open_private writes files; mode {mode!r} is not a write mode")
    path = Path(path)
    check_rehearsal_write(path)
    private_folder(path.parent)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, mode) as handle:  # mkstemp creates it 0600
            yield handle
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def write_private(path: str | os.PathLike[str], data: bytes | str) -> Path:
    """Write ``data`` to ``path`` as a 0600 file in a private folder (whole or not at all)."""
    with open_private(path, "wb" if isinstance(data, bytes) else "w") as handle:
        handle.write(data)
    return Path(path)


async def stream_private(
    path: str | os.PathLike[str], chunks: AsyncIterable[bytes]
) -> tuple[int, str]:
    """Write ``chunks`` to ``path`` as they arrive, whole or not at all (``open_private``:
    a 0600 temporary file beside it), so a body of any size never sits in memory. The file
    is fsync'd before it is renamed into place and the folder after, so once this returns
    the file survives a crash; if reading the chunks raises (a limit, a lost connection),
    the temporary file is removed and nothing is left under ``path``. Returns the size and
    the SHA-256 (hex) of what was written."""
    digest = hashlib.sha256()
    size = 0
    with open_private(path, "wb") as handle:
        async for chunk in chunks:
            handle.write(chunk)
            digest.update(chunk)
            size += len(chunk)
        handle.flush()
        await asyncio.to_thread(os.fsync, handle.fileno())
    await asyncio.to_thread(_sync_folder, Path(path).parent)
    return size, digest.hexdigest()


def _sync_folder(folder: Path) -> None:
    """fsync a folder, so a rename into it is on disk (a no-op where folders cannot be
    opened, as on Windows)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

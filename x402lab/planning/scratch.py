"""The folder a plan's kernel runs in: a scratch copy of the notebook's own.

A notebook writes files as it runs (a batch's ``out=`` Parquet, a saved job, a report, its
own CSVs), mostly by paths relative to its folder. Rehearsed, those writes would put
emulator answers over the user's files, so the kernel runs in a copy of the notebook's folder
and what it writes lands in the copy; the plan then lists what the notebook would have
written (``Scratch.written``). The copy leaves out what a notebook does not read (version
control, caches, virtual environments); a file over ``LARGE_FILE_BYTES`` is not copied but
linked, read in place (the plan says which), since copying a large data set for a rehearsal
would cost more than the plan. A folder too big to copy (``MAX_FILES``, ``MAX_BYTES``: a
notebook saved in a home folder) is refused before anything runs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from x402lab.errors import ConfigError
from x402lab.private import private_folder

#: Folders a notebook does not read from its folder: not copied, and not listed as written.
SKIPPED = frozenset(
    {
        ".git", ".hg", ".svn", ".ipynb_checkpoints", "__pycache__", ".venv", "venv",
        "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox",
    }
)  # fmt: skip
LARGE_FILE_BYTES = 256 * 2**20
MAX_FILES = 20_000
MAX_BYTES = 2 * 2**30

Snapshot = dict[str, tuple[int, int]]


def _files(root: Path) -> Snapshot:
    """Every regular file under ``root`` (not in ``SKIPPED`` folders, not through a linked
    folder): its path relative to ``root``, size and modification time."""
    found: Snapshot = {}
    for folder, folders, names in os.walk(root):
        folders[:] = [
            f for f in folders if f not in SKIPPED and not os.path.islink(os.path.join(folder, f))
        ]
        for name in names:
            path = os.path.join(folder, name)
            try:
                status = os.stat(path)
            except OSError:  # a dangling link
                continue
            found[os.path.relpath(path, root)] = (status.st_size, status.st_mtime_ns)
    return found


class Scratch:
    """A scratch copy of a notebook's folder (``folder``, the kernel's working folder) and
    what it held when made (so what the notebook then writes can be told)."""

    def __init__(self, original: Path, folder: Path, linked: list[str]) -> None:
        self.original = original
        self.folder = folder
        self.linked = linked  # large files read in place, not copied
        self._before = _files(folder)

    @classmethod
    def copy(
        cls, original: Path, into: Path, *, max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES
    ) -> Scratch:
        """Copy ``original`` into ``into`` (a private folder). Raises ConfigError, before
        copying anything, when ``original`` holds more than ``max_files`` files or
        ``max_bytes`` bytes to copy."""
        original = original.resolve()
        files = _files(original)
        small = [size for size, _ in files.values() if size <= LARGE_FILE_BYTES]
        if len(files) > max_files or sum(small) > max_bytes:
            raise ConfigError(
                f"the notebook's folder {original} holds {len(files)} files"
                f" ({sum(small) / 2**20:.0f} MiB): a plan runs the notebook in a scratch copy of"
                " its folder, so that it writes nothing of yours, and this one is too big to"
                f" copy (at most {max_files} files, {max_bytes / 2**30:g} GiB). Move the"
                " notebook, with what it reads, to a folder of its own."
            )
        folder = private_folder(into) / original.name
        linked: list[str] = []

        def copy_or_link(source: str, target: str) -> None:
            if os.path.getsize(source) > LARGE_FILE_BYTES:
                os.symlink(source, target)
                linked.append(os.path.relpath(source, original))
            else:
                shutil.copy2(source, target)

        def ignored(parent: str, names: list[str]) -> set[str]:
            def linked_folder(name: str) -> bool:
                path = os.path.join(parent, name)
                return os.path.islink(path) and os.path.isdir(path)

            return {name for name in names if name in SKIPPED or linked_folder(name)}

        try:
            shutil.copytree(
                original,
                folder,
                ignore=ignored,
                copy_function=copy_or_link,
                ignore_dangling_symlinks=True,
            )
        except (shutil.Error, OSError) as exc:
            raise ConfigError(
                f"cannot copy the notebook's folder {original} for its rehearsal ({exc}): a plan"
                " runs the notebook in a scratch copy, so it needs to read every file there"
            ) from None
        return cls(original, folder, sorted(linked))

    def written(self) -> list[str]:
        """What the notebook wrote in the copy, relative to its folder: ``name (new)`` or
        ``name (changed)``."""
        now = _files(self.folder)
        writes = []
        for name, state in sorted(now.items()):
            if name not in self._before:
                writes.append(f"{name} (new)")
            elif state != self._before[name]:
                writes.append(f"{name} (changed)")
        return writes

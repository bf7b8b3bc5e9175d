"""Checks on the files x402lab leaves on disk."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def everything_private(top: Path) -> list[Path]:
    """Every folder under ``top`` (itself too) is 0700 and every file 0600: fails naming one
    that is not. Returns the files."""
    assert mode(top) == 0o700, (top, oct(mode(top)))
    files = []
    for folder, folders, names in os.walk(top):
        for name in folders:
            assert mode(Path(folder, name)) == 0o700, Path(folder, name)
        for name in names:
            path = Path(folder, name)
            assert mode(path) == 0o600, (path, oct(mode(path)))
            files.append(path)
    return files

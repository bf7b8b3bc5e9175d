"""The README's editable install works from any folder, the clone's parent included.

A checkout named ``x402lab`` beside a notebook is a folder without ``__init__.py`` in the
notebook's working folder. Python's path search takes such a folder as a namespace package
only when no real package named ``x402lab`` is on ``sys.path``; an editable install that
puts the checkout on ``sys.path`` (a ``.pth`` line, as hatchling's does) keeps the real
package found first. An editable install made of an import hook (setuptools') is asked only
after that search, and lost to the namespace package.

The test copies the package into a folder named ``x402lab``, installs it editable into a
fresh virtual environment (pip, as the README does; offline, its dependencies taken from
this environment), and runs a notebook whose working folder is the copy's parent: it must
import the copy's package and pay a call on the embedded emulator.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

ROOT = Path(__file__).resolve().parents[2]

RUN = textwrap.dedent(
    """
    import sys
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(sys.argv[1], as_version=4)
    resources = {"metadata": {"path": sys.argv[2]}}
    NotebookClient(notebook, timeout=120, kernel_name="python3", resources=resources).execute()
    print("".join(o.get("text", "") for o in notebook.cells[0].outputs))
    """
)


@pytest.mark.timeout(300)
def test_an_editable_install_imports_from_the_clones_parent(tmp_path: Path) -> None:
    clone = tmp_path / "x402lab"
    clone.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, clone / name)
    shutil.copytree(
        ROOT / "x402lab", clone / "x402lab", ignore=shutil.ignore_patterns("__pycache__")
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    target = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # The dependencies (and pip, hatchling, nbclient) from this environment: a path line,
    # so this environment's own .pth files (its editable x402lab) are not run there.
    Path(target, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    install = subprocess.run(
        [python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
         "-q", "-e", str(clone)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=240,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]

    cells = [
        "import x402lab as xl\n"
        "print(xl.__file__)\n"
        "lab = xl.connect()\n"
        "answer = lab.chat('Say hi', model='qwen-3-8-27b', max_tokens=5)\n"
        "print('paid', answer.cost.amount_atomic > 0)\n"
        "lab.close()"
    ]
    notebook = tmp_path / "beside_the_clone.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell(c) for c in cells]), notebook)
    ran = subprocess.run(
        [python, "-c", RUN, str(notebook), str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=240,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    printed = ran.stdout.split()
    assert printed[0] == str(clone / "x402lab" / "__init__.py"), ran.stdout
    assert printed[1:] == ["paid", "True"], ran.stdout

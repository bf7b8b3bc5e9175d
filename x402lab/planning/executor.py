"""Runs a notebook in rehearsal, one cell at a time, and reads what each cell priced.

A fresh kernel (nbclient) is started with ``X402LAB_REHEARSAL`` naming a records file, so
every ``connect()`` in it rehearses (``planning.rehearsal``). The kernel works in a scratch
copy of the notebook's folder (``planning.scratch``: what it writes changes nothing of the
user's) and its environment holds no key or password of the user's
(``planning.environment``: nothing in it can sign for real). After each cell the executor
reads the records the kernel appended meanwhile: that cell's priced requests. A cell that
fails is kept with its error and the next cells run (those that needed it fail in turn, and
say so); a cell its budget refused (a BudgetExceeded) is kept as refused.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from x402lab.errors import ConfigError
from x402lab.money import format_usd
from x402lab.planning.environment import without_credentials
from x402lab.planning.records import REHEARSAL_ENV, Connected, PricedCall, read_new
from x402lab.planning.scratch import Scratch
from x402lab.planning.table import CellPlan, PlanFrame, plan_frame
from x402lab.private import PLAN_FOLDER_ENV, private_file


def _progress(progress: Any) -> Callable[[CellPlan, int, int], None] | None:
    if progress is None:
        return None
    if callable(progress):
        return progress  # type: ignore[no-any-return]
    if progress == "text":
        return lambda cell, done, total: print(describe(cell, done, total), flush=True)
    raise ConfigError(f"progress must be 'text', None or a callable, got {progress!r}")


def describe(cell: CellPlan, done: int, total: int) -> str:
    """The progress line of ``cell``, the ``done``-th of ``total`` code cells."""
    head = f"[{done}/{total}] cell {cell.cell}: {cell.paying_line[:50]}"
    if cell.refused is not None:
        tail = f"refused by its budget: {cell.refused[:80]}"
    elif cell.error is not None:
        tail = f"failed: {cell.error[:80]}"
    elif cell.calls:
        tail = f"{len(cell.calls)} paid call(s), {format_usd(cell.amount_atomic)}"
    else:
        tail = "free"
    return f"{head} ... {tail}"


def plan_notebook(
    path: str | os.PathLike[str],
    *,
    progress: Any = "text",
    timeout_s: float = 600.0,
    kernel_name: str | None = None,
) -> PlanFrame:
    """``x402lab.plan``'s work (its docstring says what it returns and raises)."""
    try:
        import nbclient  # noqa: F401
        import nbformat
    except ImportError as exc:
        raise ConfigError(
            f"planning a notebook needs nbclient and nbformat ({exc}): pip install 'x402lab[plan]'"
        ) from None
    source = Path(path).expanduser()
    try:
        notebook = nbformat.read(source, as_version=4)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the notebook {source}: {exc}") from None
    report = _progress(progress)
    result: dict[str, Any] = {}
    stop = threading.Event()

    # The kernel is driven by nbclient's async API on an event loop of this thread's own
    # (closed at the end), so a plan can be made from a Jupyter cell, whose loop is already
    # running, as from a shell.
    def work() -> None:
        try:
            result["cells"] = asyncio.run(
                _execute(notebook, source, report, timeout_s, kernel_name, stop)
            )
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            result["error"] = exc

    thread = threading.Thread(target=work, name="x402lab-plan", daemon=True)
    thread.start()
    try:
        thread.join()
    except KeyboardInterrupt:
        # The first Ctrl+C ends the plan after the running cell and shuts the kernel down.
        stop.set()
        thread.join()
        raise
    if "error" in result:
        raise result["error"]
    cells, connects, writes, notes = result["cells"]
    return plan_frame(cells, connects, writes, notes)


async def _execute(
    notebook: Any,
    source: Path,
    report: Callable[[CellPlan, int, int], None] | None,
    timeout_s: float,
    kernel_name: str | None,
    stop: threading.Event,
) -> tuple[list[CellPlan], list[Connected], list[str], list[str]]:
    # The plan's folder (the scratch copy of the notebook's, the records, the kernel's
    # sockets) is removed once the kernel is down: a copy of a data folder per plan would
    # otherwise pile up in the temporary folder. Linked large files are links: removing
    # them leaves what they point at.
    with tempfile.TemporaryDirectory(prefix="x402lab-plan-", ignore_cleanup_errors=True) as tmp:
        return await _rehearse(Path(tmp), notebook, source, report, timeout_s, kernel_name, stop)


async def _rehearse(
    folder: Path,
    notebook: Any,
    source: Path,
    report: Callable[[CellPlan, int, int], None] | None,
    timeout_s: float,
    kernel_name: str | None,
    stop: threading.Event,
) -> tuple[list[CellPlan], list[Connected], list[str], list[str]]:
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    records = private_file(folder / "records.jsonl")
    scratch = Scratch.copy(source.parent, folder / "notebook")
    name = kernel_name or notebook.metadata.get("kernelspec", {}).get("name") or "python3"
    # The kernel talks over Unix sockets in the plan's own folder, not TCP: a TCP port is
    # picked free and then bound by the kernel, and two kernels starting at once (a suite
    # of notebooks, two plans) can pick the same one, the second dying before it answers.
    manager = AsyncKernelManager(kernel_name=name, transport="ipc", ip=str(folder / "kernel"))
    client = NotebookClient(
        notebook,
        km=manager,
        timeout=int(timeout_s),
        kernel_name=name,
        resources={"metadata": {"path": str(scratch.folder)}},
    )
    env, replaced = without_credentials(os.environ)
    env[REHEARSAL_ENV] = str(records)
    env[PLAN_FOLDER_ENV] = str(scratch.original)  # x402lab writes nothing there

    code = [
        (i, c) for i, c in enumerate(notebook.cells) if c.cell_type == "code" and c.source.strip()
    ]
    cells: list[CellPlan] = []
    connects: list[Connected] = []
    offset = 0
    dead: str | None = None
    # cleanup_kc: nbclient shuts down only a kernel whose manager it made itself.
    async with client.async_setup_kernel(env=env, cleanup_kc=True):
        for done, (index, cell) in enumerate(code, start=1):
            if stop.is_set():
                break
            plan = CellPlan(cell=index + 1, source=cell.source)
            if dead is not None:
                plan.error = dead
            else:
                try:
                    await client.async_execute_cell(cell, index)
                except CellExecutionError as exc:
                    plan.error = f"{exc.ename}: {exc.evalue}".strip(": ")
                    if exc.ename == "BudgetExceeded":
                        plan.refused = exc.evalue
                except CellTimeoutError:
                    plan.error = f"timed out after {timeout_s:g} s"
                except DeadKernelError as exc:
                    dead = f"the kernel died ({exc}); not run"
                    plan.error = f"the kernel died: {exc}"
            found, offset = read_new(records, offset)
            for record in found:
                if isinstance(record, PricedCall):
                    plan.calls.append(record)
                else:
                    connects.append(record)
            cells.append(plan)
            if report is not None:
                report(plan, done, len(code))
    notes = []
    if replaced:
        notes.append(
            "the kernel ran with stand-ins for these variables (keys and secrets of yours are"
            " not in a plan's kernel): " + ", ".join(replaced)
        )
    if scratch.linked:
        notes.append(
            "large files were read in place, not copied into the scratch folder (a cell writing"
            " over one would change it): " + ", ".join(scratch.linked)
        )
    return cells, connects, scratch.written(), notes

"""Self-study progress: which visible checks of the learner's saved notebooks pass.

This module is not part of the student package: ``autograder student-repo`` writes its source
into the first code cell of the student repository's ``progress.ipynb``, whose second cell
calls :func:`show`. It needs only what the student environment has (nbclient, nbformat,
ipywidgets, IPython), and no instructor, gradebook or hidden test: it runs each saved notebook
under ``release/`` headless, in a fresh kernel, and reads the outcome of every visible test cell.
"""
import html
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from autograder.inside import output_widget

CELL_TIMEOUT = 120  # seconds; a cell that runs longer (an endless loop) is interrupted and fails


@dataclass
class Check:
    exercise: str
    points: float
    status: str = "not run"  # "passes", "fails" or "not run"
    message: str = ""


@dataclass
class Unit:
    name: str
    path: Path
    checks: list = field(default_factory=list)
    error: str = ""  # why the notebook could not be run to the end, if it could not

    @property
    def passed(self):
        return sum(c.points for c in self.checks if c.status == "passes")

    @property
    def total(self):
        return sum(c.points for c in self.checks)


def notebooks(folder="."):
    """The saved notebooks of every unit, ``release/<unit>/<notebook>.ipynb``, in unit order."""
    return sorted(Path(folder).glob("release/*/*.ipynb"))


def _test_cells(nb):
    """(index, check) for every visible test cell: a locked, graded code cell."""
    out = []
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade"):
            exercise = meta.get("grade_id", cell.get("id", str(i))).removeprefix("test_")
            out.append((i, Check(exercise, meta.get("points", 0))))
    return out


def _error_line(cell):
    """The one line that says why a cell failed: the checks' ``[task] ...`` message, else
    ``Error: message``, of its first error output."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            first = (output.get("evalue") or "").strip().splitlines()
            text = first[0] if first else ""
            return text if text.startswith("[") else f"{output.get('ename')}: {text}"
    return ""


def run_unit(path, on_cell=None):
    """Run one saved notebook headless in a fresh kernel (the file is not changed); return its Unit.

    ``on_cell(unit_name, done, total)`` is called after every code cell."""
    path = Path(path)
    unit = Unit(path.parent.name, path)
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # a notebook saved broken: say so, check the other units
        unit.error = f"cannot read {path.name}: {exc}"
        return unit
    cells = _test_cells(nb)
    unit.checks = [check for _, check in cells]
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]

    def executed(cell, cell_index, execute_reply):
        if on_cell:
            on_cell(unit.name, code.index(cell_index) + 1, len(code))

    client = output_widget.install(NotebookClient(
        nb, timeout=CELL_TIMEOUT, interrupt_on_timeout=True, allow_errors=True, kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}}, on_cell_executed=executed))
    try:
        client.execute()
    except Exception as exc:  # a dead kernel: the checks that did not run stay "not run"
        unit.error = f"the notebook stopped: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    for i, check in cells:
        cell = nb.cells[i]
        if cell.get("execution_count") is None and not cell.get("outputs"):
            continue
        message = _error_line(cell)
        check.status, check.message = ("fails", message) if message else ("passes", "")
    return unit


def _bar_text(unit, width=30):
    filled = round(width * unit.passed / unit.total) if unit.total else 0
    return "#" * filled + "." * (width - filled)


class Report:
    """Every unit's checks; shows as one bar per unit and a line per exercise."""

    def __init__(self, units):
        self.units = units

    def __repr__(self):
        lines = []
        for u in self.units:
            lines.append(f"{u.name:32} [{_bar_text(u)}] {u.passed:g} / {u.total:g} points")
            lines += [f"    {c.exercise:28} {c.status:8} {c.message}".rstrip() for c in u.checks]
            if u.error:
                lines.append(f"    {u.error}")
        return "\n".join(lines)

    def _repr_html_(self):
        colour = {"passes": "#2e7d32", "fails": "#c62828", "not run": "#757575"}
        parts = []
        for u in self.units:
            share = 100 * u.passed / u.total if u.total else 0
            parts.append(
                f"<h4 style='margin:0.8em 0 0.2em'>{html.escape(u.name)}: {u.passed:g} / {u.total:g} points</h4>"
                f"<div style='background:#e0e0e0;width:24em;height:0.9em;border-radius:3px'>"
                f"<div style='background:#2e7d32;width:{share:.1f}%;height:100%;border-radius:3px'></div></div>")
            rows = "".join(
                f"<tr><td style='text-align:left'><code>{html.escape(c.exercise)}</code></td>"
                f"<td style='text-align:left;color:{colour[c.status]}'>{c.status}</td>"
                f"<td style='text-align:left'>{html.escape(c.message)}</td></tr>" for c in u.checks)
            parts.append(f"<table>{rows}</table>")
            if u.error:
                parts.append(f"<p>{html.escape(u.error)}</p>")
        return "".join(parts)


def check_all(folder=".", on_cell=None):
    """Run every unit's saved notebook in turn; return the :class:`Report`."""
    return Report([run_unit(path, on_cell) for path in notebooks(folder)])


class Progress:
    """A run of :func:`check_all` in a background thread, with a progress bar and the report
    shown below it when it ends."""

    def __init__(self, folder="."):
        import ipywidgets as widgets
        from IPython.display import display

        self.folder = folder
        self.bar = widgets.IntProgress(value=0, min=0, max=max(1, len(notebooks(folder))), description="units")
        self.label = widgets.Label("starting")
        self.report = None
        display(widgets.HBox([self.bar, self.label]))
        self._result = display("The report appears here when every unit has run.", display_id=True)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_cell(self, unit, done, total):
        self.label.value = f"{unit}: cell {done} of {total}"

    def _run(self):
        units = []
        try:
            for path in notebooks(self.folder):
                units.append(run_unit(path, self._on_cell))
                self.bar.value = len(units)
            self.report = Report(units)
            self.label.value = "done"
            self._result.update(self.report)
        except Exception:  # show what went wrong where the report would have been
            self.label.value = "stopped"
            self._result.update(traceback.format_exc())

    def wait(self, timeout=None):
        """Block until every unit has run (headless runs of progress.ipynb); return the report."""
        self._thread.join(timeout)
        return self.report


def show(folder="."):
    """Start checking every unit in the background; the bar and then the report show below."""
    return Progress(folder)

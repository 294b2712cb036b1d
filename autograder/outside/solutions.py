"""``autograder release-solutions ID``: the solutions notebook an instructor publishes after the deadline.

It is the student notebook of ``release/`` with every exercise filled in: each solution cell
(code, and the explain cells' model answers) comes from ``source/`` with the ``### BEGIN
SOLUTION`` / ``### END SOLUTION`` lines dropped. The test cells stay the release's, so the
hidden tests stay hidden; :func:`leaks` checks that before anything is written.
"""
import copy
import json
from pathlib import Path

import nbformat

from . import build, release
from .course import BY_ID, ROOT

SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN_MARKERS = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
NOTE = ("**Solutions.** The reference solution of every exercise and the model answer of every "
        "explain cell, published after the deadline. Run the notebook top to bottom: every visible "
        "check passes.")


def solutions_notebook(assignment, root=ROOT):
    """The release notebook of ``assignment`` (under ``root``) with the solutions filled in."""
    source = nbformat.read(assignment.source_path(root), as_version=4)
    answers = {c.id: c.source for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")}
    nb = copy.deepcopy(nbformat.read(assignment.release_path(root), as_version=4))
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            lines = answers[cell.id].splitlines()
            cell.source = "\n".join(line for line in lines if line.strip() not in SOLUTION_MARKERS)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(NOTE, id="solutions-note"))
    nbformat.validate(nb)
    return nb


def leaks(nb, assignment, root=ROOT):
    """Hidden tests in a solutions notebook: a marker, or a line of a hidden-test region."""
    source = nbformat.read(assignment.source_path(root), as_version=4)
    # a hidden test may repeat a line of the reference solution, which this notebook publishes
    secret = (release.hidden_lines(source, starts=("### BEGIN HIDDEN TESTS",))
              - release.hidden_lines(source, starts=("### BEGIN SOLUTION",)))
    out = []
    for cell in nb.cells:
        text = json.dumps(cell.source)
        out += [f"cell {cell.id} contains {m!r}" for m in HIDDEN_MARKERS + SOLUTION_MARKERS if m in text]
        lines = {line.strip() for line in cell.source.splitlines()}
        out += [f"cell {cell.id} contains a hidden-test line: {line!r}" for line in sorted(lines & secret)]
    return out


def write(aid, out_dir=None, root=ROOT):
    """Write ``<out_dir>/<id>/<notebook>.ipynb`` (default ``<root>/solutions``); return its path."""
    assignment = BY_ID[aid]
    nb = solutions_notebook(assignment, root)
    problems = leaks(nb, assignment, root)
    if problems:
        raise RuntimeError(f"{aid}: refusing to write solutions that show hidden tests:\n  " + "\n  ".join(problems))
    path = Path(out_dir or Path(root) / "solutions") / aid / f"{assignment.notebook}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(build.dumps(nb), encoding="utf-8")
    return path

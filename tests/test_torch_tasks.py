"""The exercises where torch is the point are declared, and only their checks let torch run.

An assignment names them in ``Assignment.torch_tasks`` (for the grading tools), the unit names
them in a module-level ``TORCH_TASKS`` of its setup cell (for the student), and their test cells
call the checks with ``numpy_only=False``. The three must agree: a test cell that lifts the
NumPy-only rule for any other exercise would let a torch delegation score.
"""
import ast

import nbformat
import pytest

from autograder.outside.course import authored

UNITS = authored()


def _cells(a):
    nb = nbformat.read(a.source_path(), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells if "nbgrader" in c.metadata}


def _lifts_numpy_only(source):
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.keyword) and node.arg == "numpy_only":
            if not (isinstance(node.value, ast.Constant) and node.value.value is True):
                return True
    return False


def _declared_in_setup(source):
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "TORCH_TASKS" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return ()


@pytest.mark.parametrize("aid", [a.id for a in UNITS])
def test_torch_tasks_are_declared_where_the_checks_allow_torch(aid):
    a = next(u for u in UNITS if u.id == aid)
    cells = _cells(a)
    lifted = {gid for gid, c in cells.items()
              if c.cell_type == "code" and c.metadata["nbgrader"].get("grade") and _lifts_numpy_only(c.source)}
    tasks = {t for t in a.torch_tasks}
    assert lifted == {f"test_{t}" for t in tasks}, (
        f"test cells that let torch run: {sorted(lifted)}; Assignment.torch_tasks: {sorted(tasks)}")
    assert set(_declared_in_setup(cells["setup"].source)) == tasks, "the setup cell's TORCH_TASKS differs"
    for t in tasks:
        assert t in cells and cells[t].metadata["nbgrader"].get("solution"), f"{t} is not a solution cell"

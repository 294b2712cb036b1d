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


# The torch units' mixed classes: the reference, the blank release, mistakes and an alternative of
# their torch exercises (1.8's partial credit and the planted engines' order included).
TORCH_CLASSES = {
    "1.6-tensor-layout": ("shares_storage_tensor_data_ptr", "shares_storage_no_null_check", "assert_view_no_messages"),
    "1.8-mini-project": ("property_test_elementwise_only", "property_test_passes_by_position",
                         "property_test_asserts_nothing"),
}


@pytest.mark.parametrize("aid", [pytest.param(aid, marks=pytest.mark.xdist_group(f"torch-equality-{aid}"))
                                 for aid in TORCH_CLASSES])
def test_trusted_verdicts_of_torch_units_equal_plain_nbgrader(aid, tmp_path):
    """Their kernels have torch; their tensors, and 1.8's engines, cross the wire: the grader's
    scores equal plain nbgrader's, cell by cell, partial credit included."""
    from autograder.outside import catalogue, grader, grading, state

    ref = grading.reference_submission(aid)
    variants = {v.name: v for v in catalogue.load(aid)}
    subs = {"reference": ref, "blank": grading.blank_submission(aid),
            **{name: grading.apply_variant(ref, variants[name], aid) for name in TORCH_CLASSES[aid]}}
    plain = grading.autograde(aid, subs, tmp_path / "plain")
    root = tmp_path / "trusted"
    grading.prepare_course(root, aid)
    for student, nb in subs.items():
        grading.submit(root, aid, student, nb)
    records = grader.grade(root, aid, grader.Options(progress=False))
    assert all(r.status == "graded" for r in records.values()), {s: r.reason for s, r in records.items()}
    assert grading.read_grades(state.sqlite_url(root), aid) == plain
    if aid == "1.8-mini-project":  # a share of the points: the cell's last value, which the grader kept
        assert 0 < plain["property_test_elementwise_only"]["test_differential_tests"][0] < 20

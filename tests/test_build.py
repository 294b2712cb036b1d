"""The generated layers are fresh, deterministic, leak-free and valid for nbgrader."""
import re

import nbformat
import pytest
from nbgrader.nbgraderformat import MetadataValidator

from autograder.outside import build, release
from autograder.outside.course import authored

UNITS = authored()
IDS = [a.id for a in UNITS]


def test_committed_source_and_release_are_fresh():
    """A fresh build equals the committed one, byte for byte.

    The committed notebooks came from an earlier build in another process, so this is also the
    proof that the build is deterministic.
    """
    assert build.stale(UNITS) == [], "run `make build` and commit source/ and release/"


@pytest.mark.parametrize("aid", IDS)
def test_release_contains_no_solution_hidden_test_or_engine_ref(aid):
    problems = release.leaks(next(u for u in UNITS if u.id == aid))
    assert not problems, "\n".join(problems)


def test_model_answers_are_not_released():
    for a in UNITS:
        source = nbformat.read(a.source_path(), as_version=4)
        release = nbformat.read(a.release_path(), as_version=4)
        answers = [c.source for c in source.cells
                   if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("solution")]
        text = "\n".join(c.source for c in release.cells)
        for answer in answers:
            assert answer.strip() not in text


@pytest.mark.parametrize("aid", IDS)
def test_source_metadata_is_valid_for_nbgrader(aid):
    a = next(u for u in UNITS if u.id == aid)
    nb = nbformat.read(a.source_path(), as_version=4)
    MetadataValidator().validate_nb(nb)
    metas = [c.metadata["nbgrader"] for c in nb.cells if "nbgrader" in c.metadata]
    ids = [m["grade_id"] for m in metas]
    assert len(ids) == len(set(ids)), "duplicate grade_id"
    for m in metas:
        assert m["schema_version"] == 3
        if m["grade"]:
            assert m.get("points", 0) > 0, f"{m['grade_id']} is graded but has no points"
    assert sum(m.get("points", 0) for m in metas if m["grade"]) == 100, "each assignment is worth 100 points"


@pytest.mark.parametrize("aid", IDS)
def test_task_ids_match_headings_and_tests(aid):
    """Every exercise's ID is its solution cell's grade_id, its test cell's grade_id and a heading."""
    a = next(u for u in UNITS if u.id == aid)
    nb = nbformat.read(a.source_path(), as_version=4)
    ids = {c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "nbgrader" in c.metadata}
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for cell in nb.cells:
        m = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and m.get("solution") and m.get("grade_id"):
            task = m["grade_id"]
            assert f"test_{task}" in ids, f"solution cell {task} has no test cell test_{task}"
            assert re.search(rf"`{re.escape(task)}`", prose), f"no heading or prose names `{task}`"


@pytest.mark.parametrize("aid", IDS)
def test_solution_marker_follows_the_docstring(aid):
    a = next(u for u in UNITS if u.id == aid)
    nb = nbformat.read(a.source_path(), as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("solution"):
            continue
        src = cell.source
        if src.lstrip().startswith("def ") and "### BEGIN SOLUTION" in src:
            head = src.split("### BEGIN SOLUTION")[0]
            assert '"""' in head, f"{cell.metadata['nbgrader']['grade_id']}: docstring must precede BEGIN SOLUTION"


@pytest.mark.parametrize("aid", IDS)
def test_test_cells_do_not_end_in_a_bare_expression(aid):
    """nbgrader gives full marks to a cell whose last line is a bare boolean, whatever its value."""
    import ast

    a = next(u for u in UNITS if u.id == aid)
    nb = nbformat.read(a.source_path(), as_version=4)
    for cell in nb.cells:
        m = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and m.get("grade") and not m.get("solution"):
            body = ast.parse(cell.source).body
            last = body[-1]
            bare = isinstance(last, ast.Expr) and not isinstance(last.value, ast.Call)
            assert not bare, f"{m['grade_id']} ends in a bare expression"
            assert not any(isinstance(n, ast.Expr) and isinstance(n.value, (ast.Compare, ast.BoolOp))
                           for n in body), f"{m['grade_id']} has a bare comparison; use assert"

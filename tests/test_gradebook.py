"""The worker's gradebook preprocessors (autograder.outside.gradebook) leave what nbgrader's own leave.

Each test runs nbgrader's ``OverwriteCells`` or ``SaveAutoGrades`` and ours on the same notebooks,
tampered ones among them, in one scratch course: the notebooks that come out, and the rows of the
gradebook, must be equal. Ours read the notebook's rows in a few queries, where nbgrader's ask
for each cell: the SQL statements are counted too (nbgrader's opening of the gradebook alone
takes about ten), so that a change that undoes the batching fails here.
"""
import copy
import json

import nbformat
import pytest
import sqlalchemy
from nbgrader.api import Gradebook
from nbgrader.preprocessors import OverwriteCells, SaveAutoGrades
from nbgrader.utils import is_grade, is_locked

from autograder.outside import execute, grading, state
from autograder.outside.course import BY_ID
from autograder.outside.gradebook import OverwriteCellsPrefetched, SaveAutoGradesAtOnce

AID = "1.1-affine-logits"
NOTEBOOK = BY_ID[AID].notebook


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("gradebook")
    grading.prepare_course(root, AID)
    return state.sqlite_url(root)


def _resources(db_url, student=None):
    return {"nbgrader": {"db_url": db_url, "assignment": AID, "notebook": NOTEBOOK, "student": student}}


class _Statements:
    """Counts the SQL statements run on any engine while it is open."""

    def __enter__(self):
        self.count = 0
        sqlalchemy.event.listen(sqlalchemy.engine.Engine, "before_cursor_execute", self._one)
        return self

    def _one(self, *args):
        self.count += 1

    def __exit__(self, *exc):
        sqlalchemy.event.remove(sqlalchemy.engine.Engine, "before_cursor_execute", self._one)


def _tampered():
    """The reference submission, and copies with a locked cell rewritten, a test cell's points and
    lock changed, a locked markdown cell made code, and a cell whose grade id the gradebook lacks."""
    ref = grading.reference_submission(AID)
    out = {"reference": ref, "blank": grading.blank_submission(AID)}
    nb = copy.deepcopy(ref)
    locked = next(c for c in nb.cells if c.cell_type == "code" and is_locked(c) and not is_grade(c))
    locked.source += "\nprint('rewritten')"
    test = next(c for c in nb.cells if is_grade(c) and is_locked(c))
    test.metadata.nbgrader["points"] = 1000
    test.metadata.nbgrader["locked"] = False
    markdown = next(c for c in nb.cells if c.cell_type == "markdown" and "nbgrader" in c.metadata)
    markdown.cell_type, markdown.outputs, markdown.execution_count = "code", [], None
    stranger = copy.deepcopy(test)
    stranger.metadata.nbgrader["grade_id"] = "not_in_the_gradebook"
    nb.cells.append(stranger)
    out["tampered"] = nb
    return out


def _text(nb):
    """The notebook's cells and metadata, but for the cells' ids (a cell that OverwriteCells makes gets a random one)."""
    return json.dumps([nb.metadata, [{k: v for k, v in c.items() if k != "id"} for c in nb.cells]], sort_keys=True)


@pytest.mark.parametrize("name", ["reference", "blank", "tampered"])
def test_overwrite_cells_restores_the_same_notebook_in_a_few_queries(course, name):
    nb = _tampered()[name]
    with _Statements() as theirs:
        expected, _ = OverwriteCells().preprocess(copy.deepcopy(nb), _resources(course))
    with _Statements() as ours:
        got, _ = OverwriteCellsPrefetched().preprocess(copy.deepcopy(nb), _resources(course))
    assert _text(got) == _text(expected)
    if name == "tampered":  # (nbgrader restored the cells: the comparison saw its work)
        assert _text(expected) != _text(nb)
    assert ours.count < 20 and theirs.count > 3 * ours.count, (ours.count, theirs.count)


def _graded(nb, db_url, failing=()):
    """``nb`` as the autograde pipeline leaves it for SaveAutoGrades: cells restored by OverwriteCells
    (which sets their checksums), and an error output on each test cell named in ``failing``."""
    nb, _ = OverwriteCells().preprocess(copy.deepcopy(nb), _resources(db_url))
    for c in nb.cells:
        if is_grade(c) and c.metadata.nbgrader["grade_id"] in failing:
            c.outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="wrong", traceback=[])]
    return nb


def _test_ids(db_url):
    with Gradebook(db_url) as gb:
        return [c.name for c in gb.find_notebook(NOTEBOOK, AID).grade_cells]


def _rows(db_url, student):
    with Gradebook(db_url) as gb:
        submitted = gb.find_submission_notebook(NOTEBOOK, AID, student)
        grades = {(g.name, g.cell.type): (g.auto_score, g.manual_score, g.needs_manual_grade) for g in submitted.grades}
        comments = {(c.name, c.cell.type): (c.auto_comment, c.manual_comment) for c in submitted.comments}
    return grades, comments


def _submit(db_url, student, manual=None):
    """A fresh submission of ``student``, with a grader's manual score on the grade cell ``manual``."""
    with Gradebook(db_url) as gb:
        gb.update_or_create_student(student)
        gb.update_or_create_submission(AID, student)
        if manual is not None:
            gb.find_grade(manual, NOTEBOOK, AID, student).manual_score = 0.5
            gb.db.commit()


@pytest.mark.parametrize("name", ["reference", "blank"])
def test_save_auto_grades_writes_the_same_grades_and_comments_in_a_few_queries(course, name):
    test_ids = _test_ids(course)
    nb = _graded(_tampered()[name], course, failing=test_ids[::2])
    for student in (f"{name}-nbgrader", f"{name}-ours"):
        _submit(course, student, manual=test_ids[1])
    with _Statements() as theirs:
        SaveAutoGrades().preprocess(copy.deepcopy(nb), _resources(course, f"{name}-nbgrader"))
    with _Statements() as ours:
        SaveAutoGradesAtOnce().preprocess(copy.deepcopy(nb), _resources(course, f"{name}-ours"))
    expected = _rows(course, f"{name}-nbgrader")
    assert _rows(course, f"{name}-ours") == expected
    scores = {v[0] for v in expected[0].values()}
    assert len(scores) > 1 and any(v[2] for v in expected[0].values())  # (zeros, full marks, a manual grade)
    assert ours.count < 30 and theirs.count > 2 * ours.count, (ours.count, theirs.count)


def test_save_auto_grades_at_once_writes_nothing_when_a_cell_fails(course, monkeypatch):
    """Its one commit comes after the last cell: a grading that fails midway leaves the previous grades."""
    student = "fails-midway"
    _submit(course, student)
    test_ids = _test_ids(course)
    SaveAutoGradesAtOnce().preprocess(_graded(grading.reference_submission(AID), course), _resources(course, student))
    before = _rows(course, student)
    calls = []

    def determine_grade(cell, log=None):
        calls.append(cell)
        if len(calls) == 3:
            raise RuntimeError("a failure in the third graded cell")
        return 0.0, float(cell.metadata.nbgrader["points"])

    monkeypatch.setattr("nbgrader.preprocessors.saveautogrades.utils.determine_grade", determine_grade)
    with pytest.raises(RuntimeError):
        SaveAutoGradesAtOnce().preprocess(_graded(grading.reference_submission(AID), course, failing=test_ids),
                                          _resources(course, student))
    assert _rows(course, student) == before and {v[0] for v in before[0].values()} != {0.0}


def test_the_worker_grades_with_them():
    assert OverwriteCellsPrefetched in execute.SANITIZE_PREPROCESSORS and OverwriteCells not in execute.SANITIZE_PREPROCESSORS
    assert SaveAutoGradesAtOnce in execute.AUTOGRADE_PREPROCESSORS and SaveAutoGrades not in execute.AUTOGRADE_PREPROCESSORS

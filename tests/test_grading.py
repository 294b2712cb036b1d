"""Proof that the grader grades: real nbgrader runs over each unit's catalogue of submissions.

For every authored unit, one scratch course grades the reference solution, the blank release
and every catalogued variant with ``autograder grade`` (nbgrader's own autograde, its kernels
in the sandbox; tests/test_grader.py proves it scores exactly as plain nbgrader does, with and
without trusted verdicts); then each expectation is its own test:

* the reference scores full marks on every autograded cell, the blank release scores 0;
* each catalogued mistake loses points on every test cell it names;
* each correct alternative keeps full marks;
* the visible checks alone (what a self-study learner runs) catch at least 95% of the mistakes:
  the scratch course marks where each test cell's hidden part starts, so a test cell that failed
  before that mark failed visibly.
"""
import tempfile
from pathlib import Path

import pytest

import nbformat

from autograder.outside import catalogue, grader, grading, state, template
from autograder.outside.course import authored

UNITS = [a for a in authored() if catalogue.load(a.id)]
_RESULTS = {}
_MESSAGES = {}  # per unit, per student: the error line of each failed test cell


def graded(aid):
    """``(scores, visible failures)`` per student of the unit's sample class, graded once."""
    if aid not in _RESULTS:
        with tempfile.TemporaryDirectory(prefix="grading-") as course:
            course = Path(course).resolve()
            grading.prepare_course(course, aid, mark_hidden=True)
            for student, nb in grading.sample_class(aid).items():
                grading.submit(course, aid, student, nb)
            records = grader.grade(course, aid, grader.Options(progress=False))
            failed = {s: r.reason for s, r in records.items() if r.status != "graded"}
            assert not failed, f"submissions that could not be graded: {failed}"
            scores = grading.read_grades(state.sqlite_url(course), aid)
            visible = {s: grading.visible_failures(course, aid, s) for s in records}
            _MESSAGES[aid] = {s: grading.failure_messages(course, aid, s) for s in records}
            _RESULTS[aid] = scores, visible
    return _RESULTS[aid]


def grades(aid):
    return graded(aid)[0]


VISIBLE_SHARE = 0.95


def _variant_params(kind):
    out = []
    for a in UNITS:
        for v in catalogue.load(a.id):
            if v.is_mistake == (kind == "mistake"):
                out.append(pytest.param(a.id, v, id=f"{a.id}:{v.name}", marks=pytest.mark.xdist_group(a.id)))
    return out


UNIT_PARAMS = [pytest.param(a.id, id=a.id, marks=pytest.mark.xdist_group(a.id)) for a in UNITS]


@pytest.mark.parametrize("aid", UNIT_PARAMS)
def test_catalogue_is_big_enough(aid):
    variants = catalogue.load(aid)
    assert sum(v.is_mistake for v in variants) >= 8
    assert sum(not v.is_mistake for v in variants) >= 2
    assert any("torch" in (v.code or v.replace or "") for v in variants if v.is_mistake), "no torch delegation"


def _lost(aid, student):
    """``{cell: (score, max, the error the cell ended in)}`` for each cell where ``student`` lost points."""
    scores = grades(aid)[student]
    messages = _MESSAGES[aid].get(student, {})
    return {k: (*s, messages.get(k, "no error")) for k, s in scores.items() if s[0] != s[1]}


@pytest.mark.parametrize("aid", UNIT_PARAMS)
def test_reference_scores_full_marks(aid):
    assert grades(aid)["reference"]
    lost = _lost(aid, "reference")
    assert not lost, f"the reference solution lost points: {lost}"


@pytest.mark.parametrize("aid", UNIT_PARAMS)
def test_blank_release_scores_zero(aid):
    scores = grades(aid)["blank"]
    earned = {k: s for k, s in scores.items() if s[0] != 0}
    assert not earned, f"the blank release earned points: {earned}"


@pytest.mark.parametrize("aid, variant", _variant_params("mistake"))
def test_mistake_loses_points(aid, variant):
    scores = grades(aid)[grading.student_name(variant)]
    kept = [cell for cell in variant.loses if scores[cell][0] >= scores[cell][1]]
    assert not kept, f"{variant.name} ({variant.why}) kept full marks on {kept}"


@pytest.mark.parametrize("aid, variant", _variant_params("alternative"))
def test_correct_alternative_keeps_full_marks(aid, variant):
    lost = _lost(aid, grading.student_name(variant))
    assert not lost, f"{variant.name} is correct but lost points: {lost}"


@pytest.mark.parametrize("aid", UNIT_PARAMS)
def test_visible_checks_catch(aid):
    """A self-study learner's only grader is the visible part of each test cell."""
    visible = graded(aid)[1]
    mistakes = [v for v in catalogue.load(aid) if v.is_mistake]
    missed = [v.name for v in mistakes if not visible[grading.student_name(v)]]
    share = 1 - len(missed) / len(mistakes)
    assert share >= VISIBLE_SHARE, (
        f"the visible checks catch {share:.0%} of {len(mistakes)} catalogued mistakes; they miss {missed}")


@pytest.mark.parametrize("aid", UNIT_PARAMS)
def test_the_reference_passes_every_visible_check(aid):
    assert not graded(aid)[1]["reference"]


@pytest.mark.parametrize("aid", UNIT_PARAMS)
def test_every_failure_message_starts_with_its_task(aid):
    """A student reads the task first: in every graded submission (the blank release, each
    catalogued mistake), each failed test cell's error says `[task] ...`, whichever check failed."""
    graded(aid)
    unit = next(a for a in UNITS if a.id == aid)
    solution_ids = [c.metadata["nbgrader"]["grade_id"] for c in nbformat.read(unit.source_path(), as_version=4).cells
                    if c.metadata.get("nbgrader", {}).get("solution")]
    wrong = [(student, gid, line) for student, failed in _MESSAGES[aid].items() for gid, line in failed.items()
             if not line.split(": ", 1)[-1].startswith(f"[{template.task_of(gid, solution_ids)}] ")]
    assert len(_MESSAGES[aid]) > 1 and not wrong, wrong

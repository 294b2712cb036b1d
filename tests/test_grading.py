"""Proof that the grader grades: real nbgrader runs over each unit's catalogue of submissions.

For every authored unit, one scratch course grades the reference solution, the blank release
and every catalogued variant with ``autograder grade`` (nbgrader's own autograde, its kernels
in the sandbox; tests/test_grader.py proves it scores exactly as plain nbgrader does); then
each expectation is its own test:

* the reference scores full marks on every autograded cell, the blank release scores 0;
* each catalogued mistake loses points on every test cell it names;
* each correct alternative keeps full marks.
"""
import tempfile
from pathlib import Path

import pytest

from autograder import catalogue, grader, grading, state
from autograder.course import authored

UNITS = [a for a in authored() if catalogue.load(a.id)]
_RESULTS = {}


def grades(aid):
    if aid not in _RESULTS:
        with tempfile.TemporaryDirectory(prefix="grading-") as course:
            course = Path(course).resolve()
            grading.prepare_course(course, aid)
            for student, nb in grading.sample_class(aid).items():
                grading.submit(course, aid, student, nb)
            records = grader.grade(course, aid, grader.Options(progress=False))
            failed = {s: r.reason for s, r in records.items() if r.status != "graded"}
            assert not failed, f"submissions that could not be graded: {failed}"
            _RESULTS[aid] = grading.read_grades(state.sqlite_url(course), aid)
    return _RESULTS[aid]


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


@pytest.mark.parametrize("aid", UNIT_PARAMS)
def test_reference_scores_full_marks(aid):
    scores = grades(aid)["reference"]
    assert scores
    lost = {k: s for k, s in scores.items() if s[0] != s[1]}
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
    scores = grades(aid)[grading.student_name(variant)]
    lost = {k: s for k, s in scores.items() if s[0] != s[1]}
    assert not lost, f"{variant.name} is correct but lost points: {lost}"

"""Make submissions and autograde them with nbgrader's own pipeline, in a scratch course.

Used by the tests that prove the grader grades, and by ``autograder demo``:

* :func:`reference_submission` is the release notebook with every solution cell filled in
  from the source notebook (the reference solution, as a student would have typed it);
* :func:`blank_submission` is the release notebook untouched;
* :func:`apply_variant` applies one catalogue entry (a mistake or a correct alternative);
* :func:`autograde` runs ``generate_assignment`` and ``autograde`` through ``NbGraderAPI``
  and reads every grade back from the gradebook.
"""
import copy
import json
import shutil
from pathlib import Path

import nbformat

from . import catalogue
from .course import BY_ID, ROOT, nbgrader_api

MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN_START = "### BEGIN HIDDEN TESTS"
# Printed by a test cell of a measuring course when its visible part has passed (see mark_hidden_tests).
VISIBLE_PASSED = "<<the visible checks of this cell passed>>"


def sample_class(aid):
    """The demo class for one unit: the reference, the blank release, one student per variant."""
    ref = reference_submission(aid)
    subs = {"reference": ref, "blank": blank_submission(aid)}
    for v in catalogue.load(aid):
        subs[student_name(v)] = apply_variant(ref, v, aid)
    return subs


def broken_submissions(aid):
    """A few broken and hostile submissions, as raw file text: what a real class also hands in."""
    ref = reference_submission(aid)
    first = next(c for c in ref.cells if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code")

    def appended(code):
        nb = copy.deepcopy(ref)
        cell = by_grade_id(nb)[first.metadata["nbgrader"]["grade_id"]]
        cell.source += "\n" + code
        return nbformat.writes(nb)

    text = nbformat.writes(ref)
    return {
        "broken-invalid-json": text[: len(text) // 2],
        "broken-nbformat-3": json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {},
                                         "worksheets": [{"cells": [], "metadata": {}}]}),
        "hostile-infinite-loop": appended("while True:\n    pass"),
        "hostile-kills-its-kernel": appended("import os\nos._exit(1)"),
        "hostile-patches-the-checks": appended(
            "import numpy\nnumpy.allclose = lambda *a, **k: True\nchecks.against_torch = lambda *a, **k: None"),
    }


def student_name(variant):
    """The student id a catalogue variant is submitted under in a sample class.

    Hyphens only: LMS file-name conventions end the student id at the first underscore.
    """
    return f"{'mistake' if variant.is_mistake else 'alternative'}-{variant.name}".replace("_", "-")


def by_grade_id(nb):
    """``{grade_id: cell}`` for the nbgrader cells of ``nb``."""
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells if "nbgrader" in c.metadata}


def cell(nb, grade_id):
    """The cell of ``nb`` with this grade_id."""
    return by_grade_id(nb)[grade_id]


def cell_index(nb, grade_id):
    """The position in ``nb.cells`` of the cell with this grade_id."""
    return nb.cells.index(cell(nb, grade_id))


def strip_markers(text):
    """A solution region as the student would have written it: the marker lines dropped."""
    return "\n".join(line for line in text.split("\n") if line.strip() not in MARKERS)


def blank_submission(assignment_id, root=ROOT):
    a = BY_ID[assignment_id]
    return nbformat.read(a.release_path(root), as_version=4)


def reference_submission(assignment_id, root=ROOT):
    a = BY_ID[assignment_id]
    nb = blank_submission(assignment_id, root)
    source = by_grade_id(nbformat.read(a.source_path(root), as_version=4))
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            cell.source = strip_markers(source[meta["grade_id"]].source)
    return nb


def solution_region(text):
    """The lines between the solution markers of a source cell (the whole text if unmarked)."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.strip() == MARKERS[0]]
    ends = [i for i, line in enumerate(lines) if line.strip() == MARKERS[1]]
    if not starts:
        return None
    return starts[0], ends[0], lines


def apply_variant(nb, variant, assignment_id, root=ROOT):
    """A copy of the reference submission ``nb`` with ``variant`` applied to its cell."""
    nb = copy.deepcopy(nb)
    cell = by_grade_id(nb).get(variant.cell)
    if cell is None:
        raise KeyError(f"{variant.name}: no cell with grade_id {variant.cell!r}")
    if variant.code is not None:
        source = by_grade_id(nbformat.read(BY_ID[assignment_id].source_path(root), as_version=4))[variant.cell]
        start, end, lines = solution_region(source.source)
        indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
        body = [indent + line if line else line for line in variant.code.strip("\n").split("\n")]
        cell.source = "\n".join(lines[:start] + body + lines[end + 1:])
    else:
        count = cell.source.count(variant.find)
        if count != 1:
            raise ValueError(f"{variant.name}: {variant.find!r} occurs {count} times in cell {variant.cell!r}")
        cell.source = cell.source.replace(variant.find, variant.replace)
    return nb


def mark_hidden_tests(nb):
    """``nb`` with a line after each ``### BEGIN HIDDEN TESTS`` that prints :data:`VISIBLE_PASSED`.

    Graded with it, a failed test cell whose output lacks the marker failed in its visible
    part, the part a self-study learner runs: :func:`visible_failures` reads that back.
    """
    for c in nb.cells:
        if c.cell_type != "code" or not c.metadata.get("nbgrader", {}).get("grade"):
            continue
        lines = []
        for line in c.source.split("\n"):
            lines.append(line)
            if line.strip() == HIDDEN_START:
                lines.append(line[: len(line) - len(line.lstrip())] + f"print({VISIBLE_PASSED!r})")
        c.source = "\n".join(lines)
    return nb


def visible_failures(course_root, assignment_id, student):
    """The test cells of a graded submission that failed before their hidden part started.

    Only meaningful in a course prepared with ``mark_hidden=True``. A test cell with no hidden
    part is visible as a whole.
    """
    a = BY_ID[assignment_id]
    nb = nbformat.read(Path(course_root) / "autograded" / student / a.id / f"{a.notebook}.ipynb", as_version=4)
    out = set()
    for c in nb.cells:
        meta = c.metadata.get("nbgrader", {})
        if c.cell_type != "code" or not meta.get("grade"):
            continue
        failed = any(o.output_type == "error" or (o.output_type == "stream" and o.name == "stderr") for o in c.outputs)
        printed = "".join(o.get("text", "") for o in c.outputs if o.output_type == "stream" and o.name == "stdout")
        if failed and VISIBLE_PASSED not in printed:
            out.add(meta["grade_id"])
    return out


def prepare_course(course_root, assignment_id, db_url=None, mark_hidden=False):
    """Copy the repo's source notebook into a scratch course and release it there.

    Afterwards the course's gradebook knows the assignment and its cells. Returns the
    ``NbGraderAPI`` for the course. With ``mark_hidden``, the test cells mark where their hidden
    part starts (:func:`mark_hidden_tests`), for measuring what the visible checks catch.
    """
    a = BY_ID[assignment_id]
    src = Path(course_root) / "source" / a.id
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(ROOT / "source" / a.id, src)
    if mark_hidden:
        path = src / f"{a.notebook}.ipynb"
        nbformat.write(mark_hidden_tests(nbformat.read(path, as_version=4)), path)
    api = nbgrader_api(course_root, db_url)
    result = api.generate_assignment(a.id, force=True, create=True)
    if not result["success"]:
        raise RuntimeError(result.get("error") or result.get("log"))
    return api


def submit(course_root, assignment_id, student, nb):
    """Write ``nb`` where nbgrader looks for the student's submission; return its path."""
    a = BY_ID[assignment_id]
    path = Path(course_root) / "submitted" / student / a.id / f"{a.notebook}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def autograde(assignment_id, submissions, course_root, db_url=None):
    """Grade ``{student: notebook}`` with plain nbgrader; return ``{student: {grade_id: (score, max)}}``.

    ``course_root`` is a fresh scratch folder; the assignment's source notebook is copied in
    and released there first, so the gradebook knows its cells.
    """
    a = BY_ID[assignment_id]
    api = prepare_course(course_root, assignment_id, db_url)
    for student, nb in submissions.items():
        submit(course_root, assignment_id, student, nb)
        result = api.autograde(a.id, student, force=True, create=True)
        if not result["success"]:
            raise RuntimeError(f"autograde of {student} failed:\n{result.get('error') or result.get('log')}")
    return read_grades(api.coursedir.db_url, a.id)


def read_grades(db_url, assignment_id):
    """Every code cell's (score, max_score) per student who has a submission, from the gradebook."""
    from nbgrader.api import Gradebook

    a = BY_ID[assignment_id]
    out = {}
    with Gradebook(db_url) as gb:
        for sub in gb.assignment_submissions(a.id):
            nb = gb.find_submission_notebook(a.notebook, a.id, sub.student.id)
            out[sub.student.id] = {g.name: (g.score, g.max_score) for g in nb.grades if g.cell.cell_type == "code"}
    return out


def failure_messages(course_root, assignment_id, student):
    """``{test cell grade_id: "Error: message"}`` for each test cell of a graded submission that
    ended in an error: the line a student reads first."""
    a = BY_ID[assignment_id]
    nb = nbformat.read(Path(course_root) / "autograded" / student / a.id / f"{a.notebook}.ipynb", as_version=4)
    out = {}
    for c in nb.cells:
        meta = c.metadata.get("nbgrader", {})
        errors = [o for o in c.get("outputs", []) if o.output_type == "error"]
        if c.cell_type == "code" and meta.get("grade") and errors:
            out[meta["grade_id"]] = f"{errors[-1].ename}: {errors[-1].evalue}"
    return out

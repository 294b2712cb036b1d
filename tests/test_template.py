"""Every unit follows the template of docs/authoring.md, and every rule of the check can fail."""
import copy

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.outside import template
from autograder.outside.course import authored

UNITS = authored()


def _number(a):
    return a.id.split("-")[0]


@pytest.mark.parametrize("aid", [a.id for a in UNITS])
def test_unit_follows_the_template(aid):
    a = next(u for u in UNITS if u.id == aid)
    nb = nbformat.read(a.source_path(), as_version=4)
    assert template.problems(nb, _number(a), a.title) == []


def _cell(kind, gid=None, points=None, source=""):
    meta = {"grade_id": gid, "schema_version": 3, "task": False}
    meta.update({"locked": {"solution": False}.get(kind, True), "solution": kind in ("solution", "explain"),
                 "grade": kind in ("test", "explain")})
    if points is not None:
        meta["points"] = points
    make = new_markdown_cell if kind == "explain" else new_code_cell
    return make(source, metadata={"nbgrader": meta})


OPENING = """# 9.9 A unit
Why this unit.

## Learning goals
- one

## Readings
- a book

## How this notebook works
| part | task | points |
|---|---|---|
| 1 | `square` | 60 |
| 1 | concept check `answer` | 30 |
| 1 | `explain_square` (written, graded by hand) | 10 |
| | **total** | **100** |
"""


def good_notebook():
    md = new_markdown_cell
    return new_notebook(cells=[
        md(OPENING),
        _cell("locked", "setup", source="import numpy as np"),
        md("## 1. Squares\n**Worked example.** 3 squared is 9.\n\n### Exercise `square`"),
        _cell("solution", "square", source='def square(x):\n    """x squared."""\n    ### BEGIN SOLUTION\n'
                                             '    return x * x\n    ### END SOLUTION'),
        _cell("test", "test_square", 60, "assert square(3) == 9"),
        md("### Concept check `answer`"),
        _cell("solution", "answer", source="answer = None\n### BEGIN SOLUTION\nanswer = 9\n### END SOLUTION"),
        _cell("test", "test_answer", 30, 'checks.check_value("answer", "answer", answer, 9)'),
        md("### Explain `explain_square`\n(a) ... (Graded by hand; 10 points.)"),
        _cell("explain", "explain_square", 10, "**Model answer.**\n\n*(a) Why (10 points).* Because."),
        md("## 2. Figure: squares"),
        _cell("locked", "square_figure", source="pass"),
        md("## 3. Putting it together"),
        _cell("locked", "putting_it_together", source='with checks.when_written("this example"):\n    square(2)'),
        md("## Summary\n- squares"),
    ])


def _problems(nb):
    return template.problems(nb, "9.9", "A unit")


def test_the_good_notebook_has_no_problems():
    assert _problems(good_notebook()) == []


def _edit(index, old, new):
    def apply(nb):
        assert old in nb.cells[index].source
        nb.cells[index].source = nb.cells[index].source.replace(old, new)
    return apply


def _drop(index):
    return lambda nb: nb.cells.pop(index)


def _retag(index, gid):
    def apply(nb):
        nb.cells[index].metadata["nbgrader"]["grade_id"] = gid
    return apply


DRIFTS = {
    "bold Goals instead of a section": (_edit(0, "## Learning goals", "**Goals.**"), "in this order"),
    "sections out of order": (_edit(0, "## Readings\n- a book\n", "") , "in this order"),
    "wrong title": (_edit(0, "# 9.9 A unit", "# 9.9 Another unit"), "title line"),
    "table without a total": (_edit(0, "| | **total** | **100** |\n", ""), "no `| | **total**"),
    "table total is not the sum": (_edit(0, "| 60 |", "| 50 |"), "add up to 90"),
    "table does not match the cells": (_edit(0, "| 60 |\n| 1 | concept check `answer` | 30 |",
                                             "| 50 |\n| 1 | concept check `answer` | 40 |"), "does not match"),
    "concept check titled Exercise": (_edit(5, "### Concept check", "### Exercise"), "### Concept check `answer`"),
    "exercise with no heading": (_edit(2, "### Exercise `square`", ""), "### Exercise `square`"),
    "concept check without a None placeholder": (_edit(6, "answer = None\n", ""), "to None"),
    "concept check checked only by a bare assert": (
        _edit(7, 'checks.check_value("answer", "answer", answer, 9)', "assert answer is not None"), "visibly"),
    "concept check checked only in hidden tests": (
        _edit(7, 'checks.check_value(', '### BEGIN HIDDEN TESTS\nchecks.check_value('), "visibly"),
    "explain without a model answer": (_edit(9, "**Model answer.**\n\n", ""), "**Model answer.**"),
    "explain without points per part": (_edit(9, " (10 points)", ""), "points per part"),
    "explain parts do not add up": (_edit(9, "(10 points)", "(8 points)"), "points per part"),
    "explain with no heading": (_edit(8, "### Explain `explain_square`", "### Question"), "### Explain"),
    "parts not numbered in order": (_edit(12, "## 3.", "## 4."), "numbered"),
    "no figure part": (_edit(10, "Figure: squares", "Squares again"), "Figure"),
    "no figure cell": (_retag(11, "plot"), "figure cell"),
    "no putting-it-together part": (_edit(12, "Putting it together", "Epilogue"), "Putting it together"),
    "no putting-it-together cell": (_retag(13, "closing"), "putting_it_together"),
    "putting it together can stop Run All": (_edit(13, 'with checks.when_written("this example"):\n    ', ""),
                                             "does not stop Run All"),
    "no summary at the end": (_drop(14), "Summary"),
    "no setup cell first": (_retag(1, "imports"), "setup"),
    "a test cell of no exercise": (_retag(4, "check_square"), "not test_<id>"),
}


@pytest.mark.parametrize("drift", list(DRIFTS))
def test_each_drift_is_reported(drift):
    edit, expected = DRIFTS[drift]
    nb = copy.deepcopy(good_notebook())
    edit(nb)
    found = _problems(nb)
    assert any(expected in p for p in found), found

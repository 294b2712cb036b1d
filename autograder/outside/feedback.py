"""Student feedback: nbgrader's GenerateFeedback without the hidden tests (nbgrader issue #1363).

Plain nbgrader renders the autograded notebook, whose test cells hold the hidden tests again
(autograde restores every test cell from the gradebook), and whose tracebacks quote hidden lines.
Here GenerateFeedback runs with one more preprocessor, :class:`HideHiddenTests`, registered
through nbgrader's own config (``GenerateFeedback.preprocessors``). The page holds the cells'
text and the check messages, never what the student's code printed while it was graded (an
extra cell that prints ``In`` or ``linecache`` would print the hidden tests):

* every cell that is not a test cell loses all its outputs;
* in a test cell, nbgrader's :class:`~nbgrader.preprocessors.ClearHiddenTests` removes the
  region between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS``, and a comment says
  where it was;
* a test cell keeps only its errors, each as the exception type and its message (a
  ``CheckFailure`` message is written for students: which case failed, where, and the likely
  mistake), minus the lines that quote a hidden line; what it printed is dropped (the checks
  print nothing; anything printed there came from the student's code).

A student whose submission could not be graded (the caller gives the reason) gets a page in the
same place, ``feedback/<student>/<assignment>/<notebook>.html``, that states the reason and the
score 0.
"""
import html
import multiprocessing
import re
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader import utils as nbutils
from nbgrader.preprocessors import ClearHiddenTests, GetGrades
from traitlets import Unicode

from .course import nbgrader_api

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class HideHiddenTests(ClearHiddenTests):
    """Removes each test cell's hidden tests, keeps only its errors (type and message, minus the
    lines that quote a hidden line), and drops the outputs of every other cell."""

    placeholder = Unicode(
        "# (hidden tests ran here: they are not shown, but the message of a failing one is)",
        help="The line left in a test cell where its hidden tests were.").tag(config=True)

    def preprocess_cell(self, cell, resources, cell_index):
        """Clear one cell (a test cell's text comes from the gradebook; other cells are the student's)."""
        if cell.cell_type != "code":
            return cell, resources
        if not nbutils.is_grade(cell) or nbutils.is_solution(cell):
            cell.outputs = []
            return cell, resources
        before = cell.source.split("\n")
        if self._remove_hidden_test_region(cell):
            cell.source = "\n".join(filter(None, [cell.source.rstrip("\n"), self.placeholder]))
        hidden = {line.strip() for line in set(before) - set(cell.source.split("\n"))} - {""}

        def shown(text):
            return "\n".join(line for line in text.split("\n") if ANSI.sub("", line).strip() not in hidden)

        errors = [o for o in cell.outputs if o.output_type == "error"]
        for output in errors:
            output.evalue = shown(output.evalue)
            output.traceback = [f"{output.ename}: {output.evalue}" if output.evalue else output.ename]
        cell.outputs = errors
        return cell, resources


FAILURE_PAGE = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<title>{notebook}</title>
<style>
body {{ font-family: sans-serif; max-width: 48em; margin: 2em auto; line-height: 1.5; }}
.reason {{ background: #fdf2f2; border-left: 4px solid #d2413a; padding: 0.6em 1em; white-space: pre-wrap; }}
</style>
</head>
<body>
<h1>{notebook} (Score: 0.0 / {max_score:.1f})</h1>
<p>Your submission for <b>{assignment}</b> could not be graded, so it scores 0.</p>
<p class="reason"><b>Reason:</b> {reason}</p>
<p>Check that you submitted the notebook you were given, under its original name, and that it
opens in Jupyter and runs from top to bottom (Kernel &gt; Restart &amp; Run All) in reasonable
time. Then submit again, or ask your instructor.</p>
</body>
</html>
"""


def failure_page(assignment_id, notebook, max_score, reason):
    """The feedback page of a submission that could not be graded: the reason and the score 0."""
    return FAILURE_PAGE.format(notebook=html.escape(notebook), assignment=html.escape(assignment_id),
                               max_score=max_score, reason=html.escape(reason))


_api = None  # in a feedback process: the NbGraderAPI it renders with


def _feedback_api(course_root, db_url):
    """nbgrader's API configured to render feedback with :class:`HideHiddenTests`."""
    preprocessors = [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]  # nbgrader's list, plus ours
    return nbgrader_api(course_root, db_url, config={"GenerateFeedback": {"preprocessors": preprocessors}})


def _start_process(course_root, db_url):
    global _api
    _api = _feedback_api(course_root, db_url)


def _render(assignment_id, student):
    """Render one student's page; None, or what went wrong."""
    result = _api.generate_feedback(assignment_id, student)
    return None if result["success"] else result.get("error") or result.get("log") or "nbgrader failed"


def _render_all(course_root, db_url, assignment_id, students, workers, progress):
    """``{student: None or error}``, rendered by ``workers`` processes (in this one when it is 1)."""
    from tqdm import tqdm

    bar = tqdm(total=len(students), unit="page", disable=not progress or not students, dynamic_ncols=True)
    with bar:
        if workers <= 1 or len(students) <= 1:
            _start_process(course_root, db_url)
            for student in students:
                yield student, _render(assignment_id, student)
                bar.update(1)
            return
        context = multiprocessing.get_context("fork")  # each process opens its own gradebook session
        with ProcessPoolExecutor(workers, context, _start_process, (str(course_root), db_url)) as pool:
            futures = {pool.submit(_render, assignment_id, s): s for s in students}
            for future in as_completed(futures):
                yield futures[future], future.result()
                bar.update(1)


def generate_feedback(course_root, assignment_id, students=None, db_url=None, failures=None, workers=1,
                      progress=False):
    """Write one feedback HTML file per student; return ``{student: path}``.

    ``students`` defaults to every student nbgrader has autograded for the assignment, plus the
    keys of ``failures``. ``failures`` maps a student to the reason their submission could not be
    graded ("invalid JSON: ...", "timed out after 120 s"); they get :func:`failure_page` instead
    of nbgrader's feedback. ``db_url`` defaults to the course's ``gradebook.db``. Pages are
    rendered by ``workers`` processes, with a progress bar when ``progress``. Raises
    RuntimeError naming the students whose feedback nbgrader could not render (the others are
    written).
    """
    failures = dict(failures or {})
    api = _feedback_api(course_root, db_url)
    coursedir = api.coursedir
    with api.gradebook as gb:
        assignment = gb.find_assignment(assignment_id)
        notebooks = [nb.name for nb in assignment.notebooks]
        max_score = assignment.max_score
    if len(notebooks) != 1:
        raise ValueError(f"{assignment_id} has {len(notebooks)} notebooks; this course has one per assignment")
    if students is None:
        students = sorted(api.get_autograded_students(assignment_id) | set(failures))

    def path(student):
        return Path(coursedir.format_path(coursedir.feedback_directory, student, assignment_id)) / f"{notebooks[0]}.html"

    written, errors = {}, {}
    for student in [s for s in students if s in failures]:
        path(student).parent.mkdir(parents=True, exist_ok=True)
        path(student).write_text(failure_page(assignment_id, notebooks[0], max_score, failures[student]), encoding="utf-8")
        written[student] = path(student)
    graded = [s for s in students if s not in failures]
    for student, error in _render_all(course_root, db_url, assignment_id, graded, workers, progress):
        if error is None and not path(student).exists():
            error = "no feedback file was written"
        if error:
            errors[student] = error
        else:
            written[student] = path(student)
    if errors:
        details = "\n\n".join(f"{s}:\n{e}" for s, e in sorted(errors.items()))
        raise RuntimeError(f"nbgrader could not write feedback for {', '.join(sorted(errors))}:\n{details}")
    return {s: written[s] for s in students if s in written}

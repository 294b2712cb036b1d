"""The instructor's report of one assignment: a self-contained HTML page and a grades CSV.

Every score comes from nbgrader's gradebook; the failure messages come from the autograded
notebooks' error outputs; the flags come from the integrity audit (:mod:`autograder.outside.audit`). The
page, ``<course>/reports/<assignment>/report.html``, has five sections:

* the score distribution (a histogram);
* the pass rate of every autograded check: the share of graded students with full marks on
  each test cell (a table and a bar chart);
* the most common failure messages: the first sentence of each ``CheckFailure``, with numbers
  replaced by ``N`` so that the same mistake on other values counts once;
* the submissions that could not be graded, with the reason;
* the submissions the integrity audit flagged, with every flag (flags never change a score).

Figures are matplotlib PNGs embedded as base64, so the page is one file. ``grades.csv`` beside
it has ``student_id, assignment, score, max_score, percent, status`` and one column per
autograded cell, one row per student: every student with a submission, every student the caller
reports as not gradable (score 0, the reason in ``status``), and every student of the
gradebook's roster without a submission.
"""
import base64
import csv
import html
import io
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

import nbformat
from matplotlib.figure import Figure
from nbgrader import utils as nbutils

from .audit import Flag, audit_submission_dir
from .course import nbgrader_api

NUMBER = re.compile(r"(?<![A-Za-z_\d.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|(?<![A-Za-z_])-?(?:nan|inf)(?![A-Za-z_])")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\[(`'\"])")
TOP_MESSAGES = 20


@dataclass
class Row:
    """One student's line of the grades table."""

    student: str
    score: float
    max_score: float
    status: str
    cells: dict  # column label -> score on that autograded cell
    graded: bool

    @property
    def percent(self):
        """The score as a percentage of the maximum (0 when the maximum is 0)."""
        return 100.0 * self.score / self.max_score if self.max_score else 0.0


@dataclass
class AssignmentGrades:
    """What the report needs from the gradebook for one assignment."""

    max_score: float
    notebooks: list
    checks: list  # (notebook, grade_id, column label, max score), in notebook order
    rows: list


def read_gradebook(api, assignment_id, failures):
    """Rows for every student of the assignment, with the failures given by the caller scored 0."""
    with api.gradebook as gb:
        assignment = gb.find_assignment(assignment_id)
        notebooks = [nb.name for nb in assignment.notebooks]
        checks = []
        for nb in assignment.notebooks:
            answers = {c.name for c in nb.solution_cells}
            for cell in nb.grade_cells:
                if cell.name not in answers:  # a grade cell that is not an answer is a test cell
                    label = cell.name if len(notebooks) == 1 else f"{nb.name}/{cell.name}"
                    checks.append((nb.name, cell.name, label, cell.max_score))
        zeros = {label: 0.0 for _, _, label, _ in checks}
        rows, seen = [], set(failures)
        for student, reason in failures.items():
            rows.append(Row(student, 0.0, assignment.max_score, f"not graded: {reason}", dict(zeros), False))
        for sub in gb.assignment_submissions(assignment_id):
            if sub.student.id in seen:
                continue
            seen.add(sub.student.id)
            scores = {(snb.name, g.name): g.score for snb in sub.notebooks for g in snb.grades}
            penalty = sub.late_submission_penalty or 0.0
            status = "graded (needs manual grading)" if sub.needs_manual_grade else "graded"
            rows.append(Row(sub.student.id, sub.score - penalty, assignment.max_score, status,
                            {label: scores.get((nb, gid), 0.0) for nb, gid, label, _ in checks}, True))
        for student in gb.students:
            if student.id not in seen:
                rows.append(Row(student.id, 0.0, assignment.max_score, "no submission", dict(zeros), False))
        return AssignmentGrades(assignment.max_score, notebooks, checks, sorted(rows, key=lambda r: r.student))


# --- failure messages -----------------------------------------------------------------------------
def first_sentence(text):
    """The first sentence of a message (all of it when it has one sentence), at most 300 characters."""
    return SENTENCE_END.split(text.strip(), maxsplit=1)[0][:300]


def normalise(message):
    """A failure message with every number (and nan, inf) replaced by N."""
    return NUMBER.sub("N", message)


def cell_failures(cell):
    """The messages of one autograded test cell's failing outputs.

    An error gives its first sentence (``CheckFailure`` messages are written for students; other
    exceptions are prefixed with their type); output on stderr, which nbgrader also scores 0, gives
    its first line.
    """
    out = []
    for output in cell.get("outputs", []):
        if output.output_type == "error":
            head = first_sentence(output.evalue or "")
            out.append(head if output.ename == "CheckFailure" and head else f"{output.ename}: {head}".rstrip(": "))
        elif output.output_type == "stream" and output.name == "stderr" and output.text.strip():
            out.append(f"stderr: {output.text.strip().splitlines()[0][:300]}")
    return out


def failure_messages(coursedir, assignment_id, book):
    """``[(normalised message, students, cells, example)]``, the most common first."""
    groups = {}
    for row in book.rows:
        if not row.graded:
            continue
        for notebook in book.notebooks:
            folder = coursedir.format_path(coursedir.autograded_directory, row.student, assignment_id)
            path = Path(folder) / f"{notebook}.ipynb"
            if not path.is_file():
                continue
            for cell in nbformat.read(path, as_version=4).cells:
                if cell.cell_type != "code" or not nbutils.is_grade(cell) or nbutils.is_solution(cell):
                    continue
                for message in cell_failures(cell):
                    group = groups.setdefault(normalise(message),
                                              {"students": set(), "cells": set(), "example": message})
                    group["students"].add(row.student)
                    group["cells"].add(cell.metadata.nbgrader["grade_id"])
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]["students"]), kv[0]))
    return [(key, sorted(g["students"]), sorted(g["cells"]), g["example"]) for key, g in ranked]


# --- the audit ------------------------------------------------------------------------------------
def audit_class(coursedir, assignment_id, notebooks):
    """``{student: flags}`` for every submission folder of the assignment that the audit flags."""
    pattern = Path(coursedir.format_path(coursedir.submitted_directory, "*", assignment_id))
    source = Path(coursedir.format_path(coursedir.source_directory, ".", assignment_id))
    out = {}
    for folder in sorted(pattern.parent.parent.glob(f"*/{pattern.name}")):
        flags = [f for nb in notebooks for f in audit_submission_dir(folder, source / f"{nb}.ipynb")]
        if flags:
            out[folder.parent.name] = flags
    return out


# --- figures --------------------------------------------------------------------------------------
def png(fig):
    """A matplotlib figure as a base64 PNG ``<img>`` tag."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="figure" src="data:image/png;base64,{data}">'


def score_histogram(rows):
    """The distribution of percent scores, graded and not gradable stacked."""
    fig = Figure(figsize=(7, 3.2))
    ax = fig.add_subplot()
    series = [([r.percent for r in rows if r.graded], "graded", "tab:blue"),
              ([r.percent for r in rows if not r.graded], "not graded (0)", "tab:red")]
    series = [s for s in series if s[0]]
    if series:
        ax.hist([s[0] for s in series], bins=20, range=(0, 100), stacked=True,
                label=[s[1] for s in series], color=[s[2] for s in series])
        ax.legend()
    ax.set_xlim(0, 100)
    ax.set_xlabel("score (% of the maximum)")
    ax.set_ylabel("students")
    return png(fig)


def pass_rate_chart(rates):
    """Horizontal bars: the percentage of graded students with full marks on each check."""
    fig = Figure(figsize=(7, 0.35 * len(rates) + 1.0))
    ax = fig.add_subplot()
    labels = [label for label, _, _ in rates][::-1]
    values = [100.0 * passed / total for _, passed, total in rates][::-1]
    ax.barh(labels, values, color="tab:green")
    ax.set_xlim(0, 100)
    ax.set_xlabel("graded students with full marks (%)")
    return png(fig)


# --- the page -------------------------------------------------------------------------------------
def _table(headers, rows, attrs=None):
    """An HTML table of escaped values; a value given as ``("raw", html)`` goes in as it is."""
    def cell(value):
        """One escaped (or raw) table cell."""
        return value[1] if isinstance(value, tuple) else html.escape(str(value))
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(f"<tr{attrs(i) if attrs else ''}>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>"
                   for i, row in enumerate(rows))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _code(text):
    """A table value shown as code."""
    return ("raw", f"<code>{html.escape(text)}</code>")


def _muted(text):
    """A grey note paragraph."""
    return f'<p class="muted">{html.escape(text)}</p>'


def _section(name, title, body, empty):
    """One section of the page: its heading, then ``body`` (HTML pieces) or the ``empty`` note."""
    return [f'<h2 id="{name}">{html.escape(title)}</h2>', *(body or [_muted(empty)])]


def _num(x):
    """A number as the CSV and the page show it: at most two decimals, no trailing zeros."""
    return f"{round(x, 2):g}"


STYLE = """
body { font-family: sans-serif; max-width: 70em; margin: 2em auto; line-height: 1.4; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
code { font-size: 0.9em; white-space: pre-wrap; }
.muted { color: #666; }
"""


def render(assignment_id, book, rates, messages, flags, csv_name):
    """The report page as HTML text."""
    rows = book.rows
    graded = [r for r in rows if r.graded]
    percents = [r.percent for r in graded]
    summary = (f"{len(rows)} students: {len(graded)} graded, {len(rows) - len(graded)} not graded. "
               f"Maximum score {_num(book.max_score)}.")
    if percents:
        summary += (f" Graded submissions: mean {statistics.mean(percents):.1f}%,"
                    f" median {statistics.median(percents):.1f}%.")
    parts = [f"<h1>Report: {html.escape(assignment_id)}</h1>", f"<p>{html.escape(summary)} "
             f'Grades for the LMS: <a href="{html.escape(csv_name)}">{html.escape(csv_name)}</a>.</p>']

    checks = [_table(["check", "full marks", "pass rate"],
                     [(label, f"{passed} / {total}", f"{100.0 * passed / total:.0f}%")
                      for label, passed, total in rates],
                     attrs=lambda i: f' data-check="{html.escape(rates[i][0])}"'),
              pass_rate_chart(rates)] if graded else []
    common = [_muted("The first sentence of each failing check's message; numbers are shown as N, so that one "
                     "mistake counts once whatever the values."),
              _table(["students", "checks", "message", "example"],
                     [(len(students), ", ".join(cells), _code(key), example)
                      for key, students, cells, example in messages[:TOP_MESSAGES]])] if messages else []
    ungraded = [(r.student, r.status) for r in rows if not r.graded]
    flagged = [_muted("The audit reads each submission without running it. A flag is a reason to look, not a "
                      "verdict, and it changes no score."),
               _table(["student", "kind", "cell", "line", "text", "explanation"],
                      [(student, f.kind, f.cell, "" if f.line is None else f.line, _code(f.text), f.explanation)
                       for student, found in sorted(flags.items()) for f in found])] if flags else []
    parts += _section("scores", "Score distribution", [score_histogram(rows)], "")
    parts += _section("checks", "Pass rate of every check", checks, "No graded submissions.")
    parts += _section("failures", "Most common failure messages", common, "No check failed.")
    parts += _section("ungraded", "Submissions that could not be graded",
                      [_table(["student", "status"], ungraded)] if ungraded else [], "Every submission was graded.")
    parts += _section("flagged", "Submissions flagged by the integrity audit", flagged, "No submission was flagged.")

    head = (f'<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n'
            f"<title>Report: {html.escape(assignment_id)}</title>\n<style>{STYLE}</style>\n</head>\n")
    return head + "<body>\n" + "\n".join(parts) + "\n</body>\n</html>\n"


def write_csv(path, assignment_id, book):
    """The grades CSV: one row per student, one column per autograded cell."""
    labels = [label for _, _, label, _ in book.checks]
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student_id", "assignment", "score", "max_score", "percent", "status", *labels])
        for r in book.rows:
            writer.writerow([r.student, assignment_id, _num(r.score), _num(r.max_score), _num(r.percent), r.status,
                             *(_num(r.cells[label]) for label in labels)])


def write_report(course_root, assignment_id, db_url=None, failures=None, flags=None):
    """Write ``reports/<assignment>/report.html`` and ``grades.csv`` under ``course_root``.

    ``db_url`` defaults to the course's ``gradebook.db``. ``failures`` maps a student to the
    reason their submission could not be graded (they score 0). ``flags`` maps a student to their
    :class:`~autograder.outside.audit.Flag` list (or its ``dataclasses.asdict`` form, as the grader's state
    keeps it); by default every folder in ``submitted/`` is audited against ``source/``. Returns
    ``(html_path, csv_path)``.
    """
    api = nbgrader_api(course_root, db_url)
    coursedir = api.coursedir
    book = read_gradebook(api, assignment_id, dict(failures or {}))
    if flags is None:
        flags = audit_class(coursedir, assignment_id, book.notebooks)
    flags = {s: [f if isinstance(f, Flag) else Flag(**f) for f in found] for s, found in flags.items() if found}
    graded = [r for r in book.rows if r.graded]
    rates = [(label, sum(r.cells[label] >= best for r in graded), len(graded)) for _, _, label, best in book.checks]
    messages = failure_messages(coursedir, assignment_id, book)
    out = Path(coursedir.root) / "reports" / assignment_id
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "grades.csv"
    write_csv(csv_path, assignment_id, book)
    html_path = out / "report.html"
    html_path.write_text(render(assignment_id, book, rates, messages, flags, csv_path.name), encoding="utf-8")
    return html_path, csv_path

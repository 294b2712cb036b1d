"""The instructor's report and grades CSV agree with the gradebook and show what went wrong.

One scratch course grades three submissions of unit 1.2 with real nbgrader: the reference, and
two students who both get ``loss_p09`` wrong, with different values (so their messages differ
only in a number); the second also patches ``np.allclose`` in an extra cell (the audit's
business, not the grader's). A fourth student's notebook is invalid JSON and "could not be
graded". Then:

* the CSV parses, has one row per student, and every score, maximum, percentage and per-check
  score equals the gradebook's; the ungraded student has 0 and the reason;
* the page has its five sections and embeds its figures as PNG data (no outside resource);
* each check's pass rate is the share of graded students with full marks in the gradebook;
* the two ``loss_p09`` messages count as one failure, met by two students;
* the audit (run by the report itself) flags the patching student and the broken file, and no one
  else.
"""
import base64
import csv
import html
import re

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.outside import grading
from autograder.outside.catalogue import Variant
from autograder.outside.course import BY_ID
from autograder.outside.report import first_sentence, normalise, write_report

pytestmark = pytest.mark.xdist_group("report")

AID = "1.2-softmax-cross-entropy"
NOTEBOOK = BY_ID[AID].notebook
REASON = "invalid JSON: Expecting value: line 1 column 1 (char 0)"
SECTIONS = ["scores", "checks", "failures", "ungraded", "flagged"]


def wrong_loss(value):
    """A submission whose loss_p09 is ``value`` (the visible check passes, the hidden one fails)."""
    return Variant("wrong_loss", "confidence_losses", code=f"loss_p09 = {value}\nloss_p01 = -np.log(0.1)")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The graded scratch course with its report, the gradebook's totals and the CSV path."""
    root = tmp_path_factory.mktemp("report-course")
    ref = grading.reference_submission(AID)
    patching = grading.apply_variant(ref, wrong_loss("0.5"), AID)
    patching.cells.append(nbformat.v4.new_code_cell("np.allclose = lambda *a, **k: True"))
    submissions = {"reference": ref, "wrong_a": grading.apply_variant(ref, wrong_loss("np.log(0.9)"), AID),
                   "wrong_b": patching}
    scores = grading.autograde(AID, submissions, root)
    broken = root / "submitted" / "broken" / AID / f"{NOTEBOOK}.ipynb"
    broken.parent.mkdir(parents=True)
    broken.write_text("not a notebook")
    html_path, csv_path = write_report(root, AID, failures={"broken": REASON})
    with Gradebook(f"sqlite:///{root}/gradebook.db") as gb:
        totals = {s.student.id: (s.score, s.max_score) for s in gb.assignment_submissions(AID)}
    return {"root": root, "scores": scores, "totals": totals, "html": html_path.read_text(encoding="utf-8"),
            "html_path": html_path, "csv_path": csv_path}


def section(page, name):
    """The HTML of one section: from its heading to the next one."""
    start = page.index(f'<h2 id="{name}">')
    end = page.find("<h2", start + 1)
    return page[start:end if end != -1 else len(page)]


def rows(course):
    """The CSV rows by student."""
    with open(course["csv_path"], newline="", encoding="utf-8") as handle:
        return {r["student_id"]: r for r in csv.DictReader(handle)}


def test_paths(course):
    folder = course["root"] / "reports" / AID
    assert (course["html_path"], course["csv_path"]) == (folder / "report.html", folder / "grades.csv")


def test_csv_columns(course):
    with open(course["csv_path"], newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    checks = [gid for gid in course["scores"]["reference"] if gid.startswith("test_")]
    assert header == ["student_id", "assignment", "score", "max_score", "percent", "status", *checks]


@pytest.mark.parametrize("student", ["reference", "wrong_a", "wrong_b"])
def test_csv_scores_equal_the_gradebook(course, student):
    row = rows(course)[student]
    score, best = course["totals"][student]
    assert row["assignment"] == AID and row["status"].startswith("graded")
    assert (float(row["score"]), float(row["max_score"])) == (score, best)
    assert float(row["percent"]) == round(100 * score / best, 2)
    for gid, (got, _) in course["scores"][student].items():
        if gid.startswith("test_"):
            assert float(row[gid]) == got, gid


def test_csv_ungraded_student_scores_zero_with_the_reason(course):
    row = rows(course)["broken"]
    assert set(rows(course)) == {"reference", "wrong_a", "wrong_b", "broken"}
    assert float(row["score"]) == 0 and float(row["percent"]) == 0
    assert row["status"] == f"not graded: {REASON}"
    assert all(float(row[gid]) == 0 for gid in course["scores"]["reference"] if gid.startswith("test_"))


def test_page_has_every_section_and_embeds_its_figures(course):
    page = course["html"]
    for name in SECTIONS:
        assert f'<h2 id="{name}">' in page
    images = re.findall(r'<img alt="figure" src="data:image/png;base64,([A-Za-z0-9+/=]+)">', page)
    assert len(images) == 2
    assert all(base64.b64decode(data).startswith(b"\x89PNG\r\n\x1a\n") for data in images)
    assert images[0] in section(page, "scores") and images[1] in section(page, "checks")
    assert not re.search(r'(?:src|href)="(?:https?:)?//', page)  # nothing to fetch: one file


def test_pass_rates_equal_the_gradebook(course):
    listed = dict(re.findall(r'data-check="(\w+)"><td>\w+</td><td>(\d+ / \d+)</td>', section(course["html"], "checks")))
    graded = ["reference", "wrong_a", "wrong_b"]
    expected = {gid: f"{sum(course['scores'][s][gid][0] == best for s in graded)} / {len(graded)}"
                for gid, (_, best) in course["scores"]["reference"].items() if gid.startswith("test_")}
    assert listed == expected
    assert listed["test_confidence_losses"] == "1 / 3"


def autograded_message(course, student):
    """The first sentence of the loss_p09 failure in a student's autograded notebook."""
    nb = nbformat.read(course["root"] / "autograded" / student / AID / f"{NOTEBOOK}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_confidence_losses")
    (error,) = [o for o in cell.outputs if o.output_type == "error"]
    return first_sentence(error.evalue)


def test_messages_that_differ_in_numbers_count_once(course):
    a, b = autograded_message(course, "wrong_a"), autograded_message(course, "wrong_b")
    assert a != b and normalise(a) == normalise(b)
    table = section(course["html"], "failures")
    first_row = re.search(r"<tbody><tr><td>(\d+)</td><td>([\w, ]+)</td><td><code>(.*?)</code>", table)
    assert first_row.groups() == ("2", "test_confidence_losses", html.escape(normalise(a)))


def test_ungraded_submissions_are_listed_with_the_reason(course):
    ungraded = section(course["html"], "ungraded")
    assert "<td>broken</td>" in ungraded and REASON in ungraded
    assert "reference" not in ungraded


def test_audit_flags_are_listed(course):
    flagged = section(course["html"], "flagged")
    students = re.findall(r"<tr><td>([\w-]+)</td><td>([\w-]+)</td>", flagged)
    assert sorted(set(students)) == [("broken", "invalid-json"), ("wrong_b", "monkeypatch")]
    assert "np.allclose = lambda *a, **k: True" in flagged


def test_given_flags_replace_the_audit_and_the_report_is_quiet(course, capfd):
    before = course["csv_path"].read_text(encoding="utf-8")
    html_path, csv_path = write_report(course["root"], AID, failures={"broken": REASON}, flags={})
    assert "No submission was flagged." in section(html_path.read_text(encoding="utf-8"), "flagged")
    assert csv_path.read_text(encoding="utf-8") == before
    assert capfd.readouterr() == ("", "")
    write_report(course["root"], AID, failures={"broken": REASON})  # the fixture's page again


@pytest.mark.parametrize("message, expected", [
    ("[softmax] case 'random #0 (seed 23)' with (array(5, 7) float32): output differs from the expected value "
     "in 3 of 35 element(s). Worst at index (0, 1): expected 0.5, got nan.",
     "[softmax] case 'random #N (seed N)' with (array(N, N) float32): output differs from the expected value "
     "in N of N element(s)."),
    ("[l1_loss] `x` = -1.5e-07 is not right.", "[l1_loss] `x` = N is not right."),
    ("your result has inf where the expected is -inf. Hint: shift.", "your result has N where the expected is N."),
])
def test_normalised_first_sentence(message, expected):
    assert normalise(first_sentence(message)) == expected

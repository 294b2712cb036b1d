"""Feedback keeps what failed and hides how it was tested.

One scratch course grades two submissions of unit 1.2 with real nbgrader: the reference
solution, and a student with two mistakes (a softmax without the max shift, which fails a
visible check, and a sign error in ``loss_p09``, which only a hidden check catches). A third
student's submission "could not be graded". Then:

* no line of any hidden test reaches any feedback page, while plain nbgrader's feedback of the
  same notebook does show them (so the detector can fail);
* the failing student's page carries each ``CheckFailure`` message, with no traceback, and the
  visible test code is still there;
* the reference's page shows full marks on every test cell and the gradebook's total;
* the ungraded student's page gives the reason (escaped) and the score 0.
"""
import html
import re

import nbformat
import pytest

from autograder.outside import grading
from autograder.outside.catalogue import Variant
from autograder.outside.course import BY_ID, nbgrader_api
from autograder.outside.feedback import HideHiddenTests, generate_feedback

pytestmark = pytest.mark.xdist_group("feedback")

AID = "1.2-softmax-cross-entropy"
NOTEBOOK = BY_ID[AID].notebook
REASON = "invalid JSON: Expecting ',' delimiter: line 1 column 12 <cells>"
MISTAKES = [
    Variant("no_max_shift", "softmax",
            code="z = np.asarray(z)\ne = np.exp(z)\nreturn e / np.sum(e, axis=axis, keepdims=True)"),
    Variant("sign_error", "confidence_losses", code="loss_p09 = np.log(0.9)\nloss_p01 = -np.log(0.1)"),
]


def text_of(page):
    """The text a reader sees: tags dropped, entities decoded (code lines come out whole)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The graded scratch course, its scores, and every student's feedback page (path and text)."""
    root = tmp_path_factory.mktemp("feedback-course")
    ref = grading.reference_submission(AID)
    mistakes = ref
    for v in MISTAKES:
        mistakes = grading.apply_variant(mistakes, v, AID)
    submissions = {"reference": ref, "mistakes": mistakes}
    scores = grading.autograde(AID, submissions, root)
    paths = generate_feedback(root, AID, failures={"broken": REASON})
    pages = {s: text_of(p.read_text(encoding="utf-8")) for s, p in paths.items()}
    return {"root": root, "scores": scores, "paths": paths, "pages": pages, "submissions": submissions}


def hidden_lines(submission):
    """Lines of the source's hidden tests that the student cannot otherwise see.

    A hidden line whose text also stands in the student's own notebook (the release cells, their
    own code) is not a secret; short lines (brackets) would match anywhere.
    """
    source = nbformat.read(BY_ID[AID].source_path(), as_version=4)
    visible = "\n".join(c.source for c in submission.cells)
    out = set()
    for c in source.cells:
        inside = False
        for line in c.source.split("\n"):
            if "BEGIN HIDDEN TESTS" in line or "END HIDDEN TESTS" in line:
                inside = "BEGIN" in line
            elif inside and len(line.strip()) >= 8 and line.strip() not in visible:
                out.add(line.strip())
    return out


def autograded_errors(course, student, grade_id):
    """The error outputs of one test cell in a student's autograded notebook."""
    path = course["root"] / "autograded" / student / AID / f"{NOTEBOOK}.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return [o for o in cell.outputs if o.output_type == "error"]


def test_one_page_per_student(course):
    assert set(course["paths"]) == {"reference", "mistakes", "broken"}
    for student, path in course["paths"].items():
        assert path == course["root"] / "feedback" / student / AID / f"{NOTEBOOK}.html"


@pytest.mark.parametrize("student", ["reference", "mistakes"])
def test_no_hidden_test_line_is_shown(course, student):
    secret = hidden_lines(course["submissions"][student])
    # the hidden parts rerun the visible case families with other seeds (a few lines per test
    # cell), so there are some ten distinct lines to look for: the test compares real lines
    assert len(secret) >= 10
    page = course["pages"][student]
    leaked = sorted(line for line in secret if line in page)
    assert not leaked, f"hidden test lines in {student}'s feedback: {leaked[:5]}"
    assert "HIDDEN TESTS" not in page


def test_plain_nbgrader_feedback_shows_hidden_tests(course):
    """The control: without HideHiddenTests the same notebook leaks, so the test above can fail."""
    assert nbgrader_api(course["root"]).generate_feedback(AID, "mistakes")["success"]
    plain = text_of((course["root"] / "feedback" / "mistakes" / AID / f"{NOTEBOOK}.html").read_text(encoding="utf-8"))
    generate_feedback(course["root"], AID, students=["mistakes"])  # put the clean page back
    secret = hidden_lines(course["submissions"]["mistakes"])
    assert sum(line in plain for line in secret) > len(secret) // 2
    assert "most recent call last" in plain


@pytest.mark.parametrize("grade_id", ["test_softmax", "test_confidence_losses"])
def test_failure_messages_are_kept_without_tracebacks(course, grade_id):
    (error,) = autograded_errors(course, "mistakes", grade_id)
    assert error.ename == "CheckFailure" and error.evalue
    page = course["pages"]["mistakes"]
    assert f"CheckFailure: {error.evalue}" in page
    assert "most recent call last" not in page
    assert "checks.py" not in page


def test_visible_test_code_is_kept(course):
    release = nbformat.read(BY_ID[AID].release_path(), as_version=4)
    cell = next(c for c in release.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_softmax")
    lines = [line.strip() for line in cell.source.split("\n") if line.strip()]
    assert lines and all(line in course["pages"]["mistakes"] for line in lines)


def toc_scores(page):
    """The (score, points) of every test cell listed at the top of a feedback page."""
    return [(float(a), float(b)) for a, b in re.findall(r"Test cell \(Score: ([\d.]+) / ([\d.]+)\)", page)]


def test_reference_feedback_shows_full_marks(course):
    scores = course["scores"]["reference"]
    tests = {k: v for k, v in scores.items() if k.startswith("test_")}
    listed = toc_scores(course["pages"]["reference"])
    assert len(listed) == len(tests) and all(got == best for got, best in listed)
    total = sum(s for s, _ in scores.values())
    assert f"(Score: {total:.1f} / 100.0)" in course["pages"]["reference"]


def test_failing_student_sees_the_lost_points(course):
    lost = {k for k, (s, m) in course["scores"]["mistakes"].items() if s < m}
    assert {"test_softmax", "test_confidence_losses"} <= lost
    listed = toc_scores(course["pages"]["mistakes"])
    assert sum(got < best for got, best in listed) == len(lost)


def test_ungraded_submission_page(course):
    raw = course["paths"]["broken"].read_text(encoding="utf-8")
    assert html.escape(REASON) in raw and REASON not in raw
    assert "(Score: 0.0 / 100.0)" in course["pages"]["broken"]
    assert "could not be graded" in course["pages"]["broken"]


def test_feedback_is_quiet_and_repeatable(course, capfd):
    path = course["paths"]["reference"]
    path.unlink()
    assert generate_feedback(course["root"], AID, students=["reference"]) == {"reference": path}
    widget_ids = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")  # fresh on each render
    again = text_of(path.read_text(encoding="utf-8"))
    assert widget_ids.sub("", again) == widget_ids.sub("", course["pages"]["reference"])
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_test_cells_keep_only_their_errors_without_hidden_lines():
    """What a test cell printed came from the student's code (the checks print nothing): dropped."""
    cell = nbformat.v4.new_code_cell(
        "checks.visible()\n### BEGIN HIDDEN TESTS\nsecret_check(42)\n### END HIDDEN TESTS",
        metadata={"nbgrader": {"grade": True, "solution": False, "locked": True, "grade_id": "t", "points": 1}},
        outputs=[nbformat.v4.new_output("stream", name="stderr",
                                        text="<ipython>:3: RuntimeWarning: overflow\n  secret_check(42)\nkept\n"),
                 nbformat.v4.new_output("display_data", data={"text/plain": "printed by the student"}),
                 nbformat.v4.new_output("error", ename="CheckFailure", evalue="[t] wrong.\n  secret_check(42)",
                                        traceback=["\x1b[31mTraceback\x1b[0m", "----> 3 secret_check(42)"])])
    cell, _ = HideHiddenTests().preprocess_cell(cell, {}, 0)
    assert "secret_check" not in cell.source and cell.source.startswith("checks.visible()\n# (hidden tests")
    assert [o.output_type for o in cell.outputs] == ["error"]
    assert cell.outputs[0].traceback == ["CheckFailure: [t] wrong."]


@pytest.mark.parametrize("nbgrader", [None, {"grade": False, "solution": True, "locked": False, "grade_id": "s"}])
def test_other_cells_lose_every_output(nbgrader):
    """An extra cell (or a solution cell) that prints ``In`` would print the hidden tests."""
    cell = nbformat.v4.new_code_cell("print(In)", metadata={"nbgrader": nbgrader} if nbgrader else {},
                                     outputs=[nbformat.v4.new_output("stream", name="stdout", text="secret_check(42)"),
                                              nbformat.v4.new_output("error", ename="E", evalue="secret_check(42)",
                                                                     traceback=[])])
    cell, _ = HideHiddenTests().preprocess_cell(cell, {}, 0)
    assert cell.outputs == [] and cell.source == "print(In)"


def test_pages_rendered_by_parallel_processes_are_the_same(course):
    """Rendering in two processes writes the pages one process writes, to the same paths (but for
    the random ids nbconvert gives each widget view it renders)."""
    uuid = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    paths = generate_feedback(course["root"], AID, failures={"broken": REASON}, workers=2)
    assert paths == course["paths"]
    pages = {s: uuid.sub("<id>", text_of(p.read_text(encoding="utf-8"))) for s, p in paths.items()}
    assert pages == {s: uuid.sub("<id>", text) for s, text in course["pages"].items()}

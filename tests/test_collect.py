"""``autograder.outside.collect``: folders, LMS zips and nbgrader's exchange land in ``submitted/``.

Every test collects into a scratch course; the repository's own ``submitted/`` and exchange are
never written. The submissions are the unit's reference solution and its blank release.
"""
import os
import shutil
import zipfile
from datetime import datetime, timezone

import nbformat
import pytest
from nbgrader.utils import parse_utc, temp_attrs

from autograder.outside import grading
from autograder.outside.collect import CollectError, collect
from autograder.outside.course import BY_ID, COURSE_ID, nbgrader_api

AID = "1.2-softmax-cross-entropy"
A = BY_ID[AID]
NOTEBOOK = f"{A.notebook}.ipynb"
REFERENCE = nbformat.writes(grading.reference_submission(AID))
BLANK = nbformat.writes(grading.blank_submission(AID))


def _submitted(course, student):
    return course / "submitted" / student / AID


def _timestamp(course, student):
    return parse_utc((_submitted(course, student) / "timestamp.txt").read_text())


def _write(path, text, when=None):
    """Write a notebook file, with modification time ``when`` (a UTC datetime) if given."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if when:
        stamp = when.replace(tzinfo=timezone.utc).timestamp()
        os.utime(path, (stamp, stamp))
    return path


def _reasons(pairs):
    return {str(path): reason for path, reason in pairs}


@pytest.fixture
def folder(tmp_path):
    """A folder using every folder convention, with one file of each kind that must be left out."""
    f = tmp_path / "downloads"
    _write(f / "alice.ipynb", REFERENCE)
    _write(f / "bob_second_try.ipynb", REFERENCE)
    _write(f / "carol_smith" / NOTEBOOK, REFERENCE)
    _write(f / "dave" / "softmax_cross_entropy-Copy1.ipynb", REFERENCE)  # not the assignment's notebook
    _write(f / "erin.ipynb", BLANK, when=datetime(2024, 3, 1, 9))
    _write(f / "erin_final.ipynb", REFERENCE, when=datetime(2024, 3, 1, 17))
    _write(f / "notes.txt", "not a notebook")
    _write(f / "week1" / "alice" / NOTEBOOK, REFERENCE)  # too deep for any convention
    _write(f / ".ipynb_checkpoints" / "alice-checkpoint.ipynb", REFERENCE)  # hidden: ignored
    return f


def test_folder_conventions_collect_each_student_and_report_the_rest(tmp_path, folder):
    course = tmp_path / "course"
    report = collect(course, AID, folder)
    assert set(report.collected) == {"alice", "bob", "carol_smith", "erin"}
    for student, path in report.collected.items():
        assert path == _submitted(course, student) / NOTEBOOK
        assert path.read_text() == REFERENCE
        assert _timestamp(course, student) is not None
    assert _timestamp(course, "erin") == datetime(2024, 3, 1, 17)
    unmatched = _reasons(report.unmatched)
    assert unmatched == {
        str(folder / "dave" / "softmax_cross_entropy-Copy1.ipynb"):
            f"dave's notebook softmax_cross_entropy-Copy1.ipynb is not this assignment's notebook, {NOTEBOOK}",
        str(folder / "notes.txt"): "not a notebook",
        str(folder / "week1" / "alice" / NOTEBOOK):
            "no student id: the name is not <student>.ipynb, <student>_<anything>.ipynb or <student>/<notebook>.ipynb",
    }
    superseded = _reasons(report.superseded)
    assert list(superseded) == [str(folder / "erin.ipynb")]
    assert "erin has a newer submission" in superseded[str(folder / "erin.ipynb")]
    assert str(folder / "erin_final.ipynb") in superseded[str(folder / "erin.ipynb")]
    summary = report.summary()
    assert summary.startswith(f"collected 4 submission(s) of {AID} into {course / 'submitted'}")
    assert "3 file(s) not matched to a student:" in summary and "notes.txt: not a notebook" in summary


def test_collect_never_replaces_a_submission_with_an_older_or_the_same_one(tmp_path, folder):
    course = tmp_path / "course"
    for student, when in (("alice", "2099-01-01 00:00:00"), ("bob", "2001-01-01 00:00:00")):
        _write(_submitted(course, student) / NOTEBOOK, BLANK)
        (_submitted(course, student) / "timestamp.txt").write_text(when)
    _write(_submitted(course, "carol_smith") / NOTEBOOK, BLANK)  # no timestamp.txt: of unknown age
    report = collect(course, AID, folder)
    assert set(report.collected) == {"bob", "erin"}
    assert (_submitted(course, "alice") / NOTEBOOK).read_text() == BLANK
    assert (_submitted(course, "bob") / NOTEBOOK).read_text() == REFERENCE
    assert (_submitted(course, "carol_smith") / NOTEBOOK).read_text() == BLANK
    superseded = _reasons(report.superseded)
    assert "older than" in superseded[str(folder / "alice.ipynb")]
    assert "has no readable timestamp.txt" in superseded[str(folder / "carol_smith" / NOTEBOOK)]

    again = collect(course, AID, folder)
    assert again.collected == {}
    assert "already collected" in _reasons(again.superseded)[str(folder / "erin_final.ipynb")]
    assert (_submitted(course, "erin") / NOTEBOOK).read_text() == REFERENCE


def _zip(path, entries):
    """A zip of ``{name: (text, (year, month, day, hour, minute, second))}``."""
    with zipfile.ZipFile(path, "w") as z:
        for name, (text, when) in entries.items():
            z.writestr(zipfile.ZipInfo(name, when), text)
    return path


def test_lms_zip_collects_canvas_and_moodle_names_and_keeps_the_latest(tmp_path):
    monday, tuesday = (2024, 3, 4, 10, 0, 0), (2024, 3, 5, 10, 0, 0)
    archive = _zip(tmp_path / "submissions.zip", {
        f"doejane_4412_90211_{A.notebook}.ipynb": (REFERENCE, monday),
        f"roebob_LATE_4413_90212_{A.notebook}-1.ipynb": (REFERENCE, tuesday),
        f"Ann Lee_17_assignsubmission_file_{NOTEBOOK}": (REFERENCE, monday),
        f"Max Mustermann_18_assignsubmission_file_/{NOTEBOOK}": (REFERENCE, monday),
        f"kimsam_4414_90213_{A.notebook}.ipynb": (REFERENCE, tuesday),
        f"kimsam_4414_90200_{A.notebook}.ipynb": (BLANK, monday),
        "smithpat_4415_90214_homework.ipynb": (REFERENCE, monday),
        f"{A.notebook}.ipynb": (REFERENCE, monday),
        "index.html": ("<html></html>", monday),
    })
    course = tmp_path / "course"
    report = collect(course, AID, archive)
    assert set(report.collected) == {"doejane", "roebob", "Ann Lee", "Max Mustermann", "kimsam"}
    for student in report.collected:
        assert (_submitted(course, student) / NOTEBOOK).read_text() == REFERENCE
    assert _timestamp(course, "kimsam") == parse_utc(datetime(*tuesday).astimezone())
    unmatched = _reasons(report.unmatched)
    assert unmatched == {
        str(archive / "smithpat_4415_90214_homework.ipynb"):
            f"smithpat's notebook homework.ipynb is not this assignment's notebook, {NOTEBOOK}",
        str(archive / NOTEBOOK): "no student id: the path does not match LMS_REGEXP (Canvas and Moodle download names)",
        str(archive / "index.html"): "not a notebook",
    }
    superseded = _reasons(report.superseded)
    assert list(superseded) == [str(archive / f"kimsam_4414_90200_{A.notebook}.ipynb")]
    assert f"kimsam_4414_90213_{A.notebook}.ipynb" in next(iter(superseded.values()))


def test_zip_with_a_custom_named_regexp_takes_the_timestamp_from_the_name(tmp_path):
    regexp = r".*/(?P<student_id>\w+?)_attempt_(?P<timestamp>\d{8}T\d{6})_(?P<file_id>\w+)\.ipynb"
    when = (2024, 1, 1, 0, 0, 0)
    archive = _zip(tmp_path / "ps.zip", {
        f"alice_attempt_20240130T150000_{A.notebook}.ipynb": (BLANK, when),
        f"alice_attempt_20240131T090000_{A.notebook}.ipynb": (REFERENCE, when),
        f"bob_{A.notebook}.ipynb": (REFERENCE, when),
    })
    course = tmp_path / "course"
    report = collect(course, AID, archive, named_regexp=regexp)
    assert set(report.collected) == {"alice"}
    assert (_submitted(course, "alice") / NOTEBOOK).read_text() == REFERENCE
    assert _timestamp(course, "alice") == datetime(2024, 1, 31, 9)
    assert _reasons(report.unmatched) == {
        str(archive / f"bob_{A.notebook}.ipynb"): f"no student id: the path does not match {regexp}"}
    with pytest.raises(CollectError, match="has no \\(\\?P<student_id>...\\) group"):
        collect(course, AID, archive, named_regexp=r".*/(?P<name>\w+)\.ipynb")


def _student_submits(exchange, home, student, text, name=NOTEBOOK):
    """What a student does with nbgrader: fetch the assignment (once), edit it, submit it."""
    api = nbgrader_api(home, exchange_root=exchange, config={
        "CourseDirectory": {"student_id": student},
        "Exchange": {"assignment_dir": str(home), "cache": str(home / ".cache")},
    })
    with temp_attrs(api.coursedir, assignment_id=AID):
        if not (home / AID).exists():
            api.exchange.FetchAssignment(coursedir=api.coursedir, authenticator=api.authenticator, parent=api).start()
        for old in (home / AID).glob("*.ipynb"):
            old.unlink()
        (home / AID / name).write_text(text)
        api.exchange.Submit(coursedir=api.coursedir, authenticator=api.authenticator, parent=api).start()


def test_exchange_collects_each_students_latest_submission(tmp_path):
    exchange, course = tmp_path / "exchange", tmp_path / "course"
    shutil.copytree(A.release_path().parent, A.release_path(course).parent)
    assert nbgrader_api(course, exchange_root=exchange).release_assignment(AID)["success"]
    _student_submits(exchange, tmp_path / "alice", "alice", BLANK)
    _student_submits(exchange, tmp_path / "alice", "alice", REFERENCE)
    _student_submits(exchange, tmp_path / "bob", "bob", REFERENCE)
    _student_submits(exchange, tmp_path / "carol", "carol", REFERENCE, name="my_answers.ipynb")
    inbound = exchange / COURSE_ID / "inbound"
    alice_first, alice_last = sorted(inbound.glob(f"alice+{AID}+*"), key=lambda p: p.name.split("+")[2])

    report = collect(course, AID, exchange)
    assert set(report.collected) == {"alice", "bob"}
    for student in ("alice", "bob"):
        assert (_submitted(course, student) / NOTEBOOK).read_text() == REFERENCE
    assert _timestamp(course, "alice") == parse_utc((alice_last / "timestamp.txt").read_text())
    assert list(_reasons(report.superseded)) == [str(alice_first)]
    assert str(alice_last) in report.superseded[0][1]
    [(path, reason)] = report.unmatched
    assert path.name.startswith(f"carol+{AID}+")
    assert reason == f"no {NOTEBOOK} in carol's submission (my_answers.ipynb)"
    assert not _submitted(course, "carol").exists()


def test_a_source_that_is_none_of_the_three_is_refused(tmp_path):
    with pytest.raises(CollectError, match="neither a zip file, an nbgrader exchange nor a folder"):
        collect(tmp_path / "course", AID, tmp_path / "missing")
    (tmp_path / "bad.zip").write_text("not a zip")
    with pytest.raises(CollectError, match="is not a zip file"):
        collect(tmp_path / "course", AID, tmp_path / "bad.zip")

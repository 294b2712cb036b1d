r"""``autograder collect``: bring submissions into ``submitted/<student>/<assignment>/``.

Three sources, told apart by what ``source`` is (:func:`collect`):

* **nbgrader's exchange**: a folder holding ``<course_id>/inbound``, where students submitted
  with ``nbgrader submit`` or the assignment-list extension. nbgrader's ``collect`` takes each
  student's latest submission (:func:`collect_exchange`).
* **A zip of LMS downloads** (:func:`collect_zip`), collected by nbgrader's ``zip_collect``
  (``ZipCollectApp``, its ``ExtractorPlugin`` and a ``FileNameCollectorPlugin``). Each file's
  path is matched, as nbgrader does, by a ``named_regexp`` with a ``(?P<student_id>...)``
  group and optional ``(?P<file_id>...)`` (the notebook's name) and ``(?P<timestamp>...)``
  groups. The default, :data:`LMS_REGEXP`, reads the names Canvas and Moodle give downloads:

  - Canvas: ``<student>_<user id>_<submission id>_<notebook>.ipynb``, with ``LATE_`` before
    the user id for late work and ``-1``, ``-2`` after a re-uploaded notebook's name, as in
    ``doejane_LATE_4412_90211_softmax_cross_entropy-1.ipynb``;
  - Moodle: ``<Full Name>_<participant id>_assignsubmission_file_<notebook>.ipynb``, or the
    same prefix as a folder holding ``<notebook>.ipynb``.

  The student id is the part before the first ``_``.
* **A folder of notebooks** (:func:`collect_folder`), which goes through the same nbgrader
  machinery with these conventions (or with ``named_regexp``, if given):

  - ``<student>.ipynb`` or ``<student>_<anything>.ipynb``: the student id is the name up to
    the first ``_``; the file is the assignment's notebook, whatever the rest of its name;
  - ``<student>/<notebook>.ipynb``: the subfolder is the student id (it may contain ``_``), and
    ``<notebook>`` must be the assignment's notebook name;
  - files and folders whose names start with ``.`` (such as ``.ipynb_checkpoints``) are ignored.

A submission's time is the ``timestamp`` group of its name when the regexp has one, else the
time recorded in the zip, else the file's modification time; for the exchange it is the time
of ``nbgrader submit``. It is written to ``submitted/<student>/<assignment>/timestamp.txt``,
where nbgrader's autograde reads it (for late penalties).

Each source is first collected by nbgrader into a scratch course; the result is then moved
into the course under one rule: a submission replaces the one already in ``submitted/`` only if
it is newer, so running ``collect`` twice, or on an older download, loses nothing. The
:class:`CollectReport` says which files no student was matched to, and why (no student id in
the name, a notebook that is not the assignment's, not a notebook), and which submissions were
superseded by a newer one of the same student (only the latest is kept).
"""
import os
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from nbgrader.exchange import ExchangeError
from nbgrader.plugins import FileNameCollectorPlugin
from nbgrader.utils import capture_log, parse_utc, temp_attrs
from traitlets import Dict, Unicode

from .course import select
from .course import COURSE_ID, nbgrader_api
from .release import failure

LMS_REGEXP = r"""(?x) .*/
    (?P<student_id>[^/_]+)                        # the student's name or login, up to the first "_"
    _(?:LATE_)?(?P<lms_id>\d+)                    # the LMS's user id; Canvas puts LATE_ before it
    _(?P<attempt>\d+|assignsubmission_file)       # Canvas's submission id, or Moodle's fixed tag
    _/?(?P<file_id>[^/]+?)(?:-\d+)?\.ipynb$       # the notebook's name: Moodle may make the prefix a
                                                  # folder, Canvas appends -1, -2 to re-uploads
"""
FOLDER_PATTERN = r"""
    (?P<student_id>[^/]+?)                        # a file's name up to the first "_", or a subfolder
    (?: /(?P<file_id>[^/]+)                       # <student>/<notebook>.ipynb
      | _[^/]* )?                                 # <student>_<anything>.ipynb
    \.ipynb$
"""
FOLDER_RULE = "the name is not <student>.ipynb, <student>_<anything>.ipynb or <student>/<notebook>.ipynb"


class CollectError(RuntimeError):
    """Submissions that could not be collected at all; the message says why."""


@dataclass
class CollectReport:
    """What one ``collect`` brought in, and what it left out.

    ``collected`` maps each student whose submission was written to its notebook under
    ``submitted/``; ``unmatched`` lists ``(path, reason)`` for files no student was matched to;
    ``superseded`` lists ``(path, reason)`` for submissions not taken because the same student
    has a newer one (in the same source, or already in ``submitted/``).
    """
    assignment_id: str
    submitted: Path
    collected: dict = field(default_factory=dict)
    unmatched: list = field(default_factory=list)
    superseded: list = field(default_factory=list)

    def summary(self):
        """A few lines for the instructor: the counts, then every file left out and why."""
        lines = [f"collected {len(self.collected)} submission(s) of {self.assignment_id} into {self.submitted}"]
        if self.unmatched:
            lines.append(f"{len(self.unmatched)} file(s) not matched to a student:")
            lines += [f"  {path}: {reason}" for path, reason in self.unmatched]
        if self.superseded:
            lines.append(f"{len(self.superseded)} submission(s) left out for a newer one of the same student, "
                         "or already collected:")
            lines += [f"  {path}: {reason}" for path, reason in self.superseded]
        return "\n".join(lines)


class SubmissionCollector(FileNameCollectorPlugin):
    """nbgrader's file-name collector, which also remembers why it took or refused each file.

    It takes only the assignment's notebook; a name without a notebook (a flat folder) means
    the assignment's notebook; a name without a timestamp gets the one in ``timestamps``, else
    the extracted file's modification time (a file from an archive inside the archive).
    """
    extracted = Unicode(help="The folder the files are extracted to; ``timestamps`` is relative to it.").tag(config=True)
    notebook = Unicode(help="The assignment's notebook name, without .ipynb.").tag(config=True)
    rule = Unicode(help="Why a name that does not match has no student id, in words.").tag(config=True)
    timestamps = Dict(help="The time of each extracted file, by path relative to ``extracted``.").tag(config=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.taken = {}
        self.refused = []

    def _refuse(self, rel, reason):
        self.refused.append((rel, reason))

    def collect(self, submitted_file):
        """The student, notebook and time of one extracted file, or None to leave it out."""
        rel = os.path.relpath(submitted_file, self.extracted)
        info = super().collect(submitted_file)
        if info is None:
            if os.path.splitext(rel)[1] not in self.valid_ext:
                return self._refuse(rel, "not a notebook")
            return self._refuse(rel, f"no student id: {self.rule}")
        info = dict(info, file_id=info.get("file_id") or self.notebook)
        name = os.path.splitext(info["file_id"])[0]
        if name != self.notebook:
            return self._refuse(rel, f"{info['student_id']}'s notebook {name}.ipynb is not this "
                                     f"assignment's notebook, {self.notebook}.ipynb")
        try:
            info["timestamp"] = parse_utc(info.get("timestamp") or self.timestamps.get(rel)
                                          or datetime.fromtimestamp(os.stat(submitted_file).st_mtime, timezone.utc))
        except ValueError:
            return self._refuse(rel, f"unreadable timestamp {info['timestamp']!r} in the name")
        self.taken[rel] = info
        return info


def _timestamp(folder):
    """The time in a submission folder's timestamp.txt (None if it has none or it is unreadable)."""
    path = Path(folder) / "timestamp.txt"
    try:
        return parse_utc(path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def _replace(dest, staged):
    """Put a copy of ``staged`` at ``dest``; the old ``dest`` goes only once the copy is complete."""
    incoming, outgoing = dest.with_name(f".{dest.name}.incoming"), dest.with_name(f".{dest.name}.replaced")
    for leftover in (incoming, outgoing):
        if leftover.exists():
            shutil.rmtree(leftover)
    shutil.copytree(staged, incoming)
    if dest.exists():
        dest.rename(outgoing)
    incoming.rename(dest)
    if outgoing.exists():
        shutil.rmtree(outgoing)


def _install(report, scratch, course_root, assignment, origins):
    """Copy each staged submission into the course unless the one already there is as new."""
    for staged in sorted(Path(scratch).glob(f"submitted/*/{assignment.id}")):
        student = staged.parent.name
        dest = Path(course_root) / "submitted" / student / assignment.id
        if dest.exists():
            old, new = _timestamp(dest), _timestamp(staged)
            if old is None:
                report.superseded.append((origins[student], f"{dest} has no readable timestamp.txt, so it is "
                                                            "kept; delete it to collect this submission"))
                continue
            if new == old:
                report.superseded.append((origins[student], f"already collected in {dest} (from {new})"))
                continue
            if new < old:
                report.superseded.append((origins[student], f"from {new}, older than {dest} (from {old}), "
                                                            "which is kept"))
                continue
        _replace(dest, staged)
        report.collected[student] = dest / f"{assignment.notebook}.ipynb"


def _zip_collect(scratch, assignment, regexp, rule, timestamps, zip_ext):
    """Run nbgrader's zip_collect over ``scratch/downloaded/<id>/archive``; return its collector."""
    from nbgrader.apps.zipcollectapp import ZipCollectApp

    extracted = Path(scratch) / "downloaded" / assignment.id / "extracted"
    api = nbgrader_api(scratch, config={
        "ZipCollectApp": {"collector_plugin": SubmissionCollector},
        "ExtractorPlugin": {"zip_ext": zip_ext},
        "SubmissionCollector": {"named_regexp": regexp, "extracted": str(extracted), "rule": rule,
                                "notebook": assignment.notebook, "timestamps": timestamps},
    })
    with temp_attrs(api.coursedir, assignment_id=assignment.id):
        app = ZipCollectApp(coursedir=api.coursedir, parent=api, log=api.log)
        result = capture_log(app)
    if not result["success"]:
        raise CollectError(f"nbgrader zip_collect {assignment.id} failed: {failure(result)}")
    return app.collector_plugin_inst


def _check_regexp(regexp):
    try:
        groups = re.compile(regexp).groupindex
    except re.error as err:
        raise CollectError(f"named_regexp {regexp!r} is not a regular expression: {err}") from err
    if "student_id" not in groups:
        raise CollectError(f"named_regexp {regexp!r} has no (?P<student_id>...) group")


def _from_files(course_root, assignment, fill_archive, origin, regexp, rule, zip_ext):
    """Stage files with nbgrader's zip_collect, keep each student's latest, install; the report.

    ``fill_archive(archive)`` puts the input into nbgrader's archive folder and returns the time
    of each file as it will be extracted (relative path -> UTC datetime); ``origin(rel)`` is the
    path the instructor knows that file by.
    """
    _check_regexp(regexp)
    report = CollectReport(assignment.id, Path(course_root) / "submitted")
    with tempfile.TemporaryDirectory(prefix="collect-") as scratch:
        scratch = Path(scratch).resolve()
        release = assignment.release_path().parent
        if not release.is_dir():
            raise CollectError(f"{assignment.id} has no {release}; run `make build`")
        shutil.copytree(release, scratch / "release" / assignment.id)
        timestamps = fill_archive(scratch / "downloaded" / assignment.id / "archive")
        collector = _zip_collect(scratch, assignment, regexp, rule, timestamps, zip_ext)
        report.unmatched += [(origin(rel), reason) for rel, reason in collector.refused]
        latest = {}
        for rel, info in sorted(collector.taken.items(), key=lambda kv: (kv[1]["timestamp"], kv[0])):
            latest[info["student_id"]] = rel  # later times (then later names) win, as in zip_collect
        for rel, info in collector.taken.items():
            student = info["student_id"]
            kept = latest[student]
            if rel != kept:
                report.superseded.append((origin(rel), f"{student} has a newer submission, {origin(kept)} "
                                                       f"(from {collector.taken[kept]['timestamp']}, this one "
                                                       f"from {info['timestamp']}), which is kept"))
        _install(report, scratch, course_root, assignment, {s: origin(rel) for s, rel in latest.items()})
    return report


def collect_folder(course_root, assignment_id, folder, named_regexp=None):
    """Collect a folder of notebooks named as the module docstring says (or by ``named_regexp``)."""
    assignment = select([assignment_id])[0]
    folder = Path(folder).resolve()
    if not folder.is_dir():
        raise CollectError(f"{folder} is not a folder")

    def fill(archive):
        shutil.copytree(folder, archive, ignore=shutil.ignore_patterns(".*"))
        return {str(p.relative_to(archive)): parse_utc(datetime.fromtimestamp(p.stat().st_mtime, timezone.utc))
                for p in archive.rglob("*") if p.is_file()}

    if named_regexp:
        regexp, rule = named_regexp, f"the path does not match {named_regexp}"
    else:
        regexp, rule = rf"(?x) .*/downloaded/{re.escape(assignment.id)}/extracted/" + FOLDER_PATTERN, FOLDER_RULE
    return _from_files(course_root, assignment, fill, lambda rel: folder / rel, regexp, rule, zip_ext=[])


def collect_zip(course_root, assignment_id, archive, named_regexp=LMS_REGEXP):
    """Collect a zip of LMS downloads, each file's path matched by ``named_regexp``."""
    assignment = select([assignment_id])[0]
    archive = Path(archive).resolve()
    if not zipfile.is_zipfile(archive):
        raise CollectError(f"{archive} is not a zip file")

    def fill(folder):
        folder.mkdir(parents=True)
        shutil.copy2(archive, folder / "submissions.zip")
        with zipfile.ZipFile(archive) as z:  # nbgrader extracts submissions.zip into submissions/
            return {os.path.join("submissions", i.filename): parse_utc(datetime(*i.date_time).astimezone())
                    for i in z.infolist() if not i.is_dir()}

    def origin(rel):
        return archive / os.path.relpath(rel, "submissions")

    name = "LMS_REGEXP (Canvas and Moodle download names)" if named_regexp == LMS_REGEXP else named_regexp
    return _from_files(course_root, assignment, fill, origin, named_regexp, f"the path does not match {name}",
                       zip_ext=[".zip"])


def collect_exchange(course_root, assignment_id, exchange_root, course_id=COURSE_ID):
    """Collect each student's latest submission from nbgrader's exchange."""
    assignment = select([assignment_id])[0]
    report = CollectReport(assignment.id, Path(course_root) / "submitted")
    with tempfile.TemporaryDirectory(prefix="collect-") as scratch:
        api = nbgrader_api(scratch, exchange_root=Path(exchange_root).resolve(),
                          config={"CourseDirectory": {"course_id": course_id}})
        with temp_attrs(api.coursedir, assignment_id=assignment.id):
            lister = api.exchange.List(coursedir=api.coursedir, authenticator=api.authenticator, parent=api)
            lister.inbound = True
            try:
                inbound = lister.start()
            except ExchangeError as err:
                raise CollectError(f"nbgrader list --inbound {assignment.id}: {err}") from err
        result = api.collect(assignment.id, update=True)
        if not result["success"]:
            raise CollectError(f"nbgrader collect {assignment.id} failed: {failure(result)}")
        origins = {}
        for student in inbound:
            *older, latest = student["submissions"]
            origins[student["student_id"]] = Path(latest["path"])
            report.superseded += [(Path(s["path"]), f"{student['student_id']} has a newer submission, "
                                                    f"{latest['path']} (from {latest['timestamp']}), which is kept")
                                  for s in older]
            staged = Path(scratch) / "submitted" / student["student_id"] / assignment.id
            if not (staged / f"{assignment.notebook}.ipynb").is_file():
                found = ", ".join(sorted(p.name for p in staged.glob("*.ipynb"))) or "no notebook"
                report.unmatched.append((Path(latest["path"]), f"no {assignment.notebook}.ipynb in "
                                                               f"{student['student_id']}'s submission ({found})"))
                shutil.rmtree(staged)
        _install(report, scratch, course_root, assignment, origins)
    return report


def collect(course_root, assignment_id, source, course_id=COURSE_ID, named_regexp=None):
    """Collect submissions of one assignment from ``source`` into ``<course_root>/submitted/``.

    ``source`` is nbgrader's exchange (a folder holding ``<course_id>/inbound``), a zip of LMS
    downloads or a folder of notebooks; see the module docstring for the naming conventions.
    ``named_regexp`` replaces the default file-name rule of a zip or a folder.
    """
    source = Path(source)
    if source.is_file():
        return collect_zip(course_root, assignment_id, source, named_regexp or LMS_REGEXP)
    if (source / course_id / "inbound").is_dir():
        return collect_exchange(course_root, assignment_id, source, course_id)
    if source.is_dir():
        return collect_folder(course_root, assignment_id, source, named_regexp)
    raise CollectError(f"{source} is neither a zip file, an nbgrader exchange nor a folder of notebooks")

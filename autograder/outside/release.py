"""``autograder release``: check the student notebooks, then hand them to nbgrader's exchange.

For each assignment:

1. **Fresh.** In the repository itself, the committed ``source/`` and ``release/`` must equal a
   fresh build (:func:`autograder.outside.build.stale`). In any other course directory, the
   repository's ``source/<id>`` is copied in and the release is generated there.
2. **Known to the gradebook.** nbgrader's ``generate_assignment`` runs in the course directory
   (through :func:`autograder.outside.build.generate_release`), which records the assignment, its
   notebooks and its graded cells in the course's gradebook.
3. **Leak-free.** :func:`leaks` finds no solution or hidden-test marker, no line of a solution
   or hidden-test region and no line of ``engine_ref`` in any release notebook. Every
   assignment is checked before any is released, so a leak releases nothing.
4. **Released.** nbgrader's ``release_assignment`` copies ``release/<id>`` to
   ``<exchange>/<course_id>/outbound/<id>``. An identical copy already there counts as released;
   a different one is replaced only with ``force``.
"""
import json
import shutil
from pathlib import Path

import nbformat

from . import build
from .course import COURSE_ID, ROOT, nbgrader_api, select

MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "engine_ref")
REGION_STARTS = ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS")
REGION_ENDS = ("### END SOLUTION", "### END HIDDEN TESTS")


class ReleaseError(RuntimeError):
    """An assignment that must not be, or could not be, released; the message says why."""


def code_lines(text):
    """Lines worth looking for elsewhere: long enough to be specific, not a signature or import."""
    out = set()
    for line in text.splitlines():
        s = line.strip()
        if len(s) < 30 or s.startswith(("def ", "class ", "#", "import ", "from ", "@", '"""', "'''")):
            continue
        out.add(s)
    return out


def hidden_lines(nb, starts=REGION_STARTS):
    """The specific lines inside the solution and hidden-test regions of a source notebook
    (only the regions that open with one of ``starts``)."""
    lines = set()
    for cell in nb.cells:
        inside = False
        for line in cell.source.splitlines():
            if line.strip() in starts:
                inside = True
            elif line.strip() in REGION_ENDS:
                inside = False
            elif inside:
                lines |= code_lines(line)
    return lines


def engine_ref_lines():
    """The specific lines of the reference solution package, which no student notebook may contain."""
    lines = set()
    for path in (ROOT / "engine_ref").glob("*.py"):
        lines |= code_lines(path.read_text(encoding="utf-8"))
    return lines


def leaks(assignment, root=ROOT):
    """What of the instructor's material shows in the release notebook under ``root``.

    One message per leaking cell: a solution or hidden-test marker (or the word ``engine_ref``),
    a line of a solution or hidden-test region of the source notebook, or a line of
    ``engine_ref``. An empty list means the release is clean.
    """
    path = assignment.release_path(root)
    release = nbformat.read(path, as_version=4)
    secret = hidden_lines(nbformat.read(assignment.source_path(root), as_version=4))
    engine = engine_ref_lines()
    out = []
    for i, cell in enumerate(release.cells):
        where = f"{path}: cell {cell.get('id', i)}"
        text = json.dumps(cell.source)
        out += [f"{where} contains {m!r}" for m in MARKERS if m in text]
        lines = {line.strip() for line in cell.source.splitlines()}
        out += [f"{where} contains a solution or hidden-test line: {line!r}" for line in sorted(lines & secret)]
        out += [f"{where} contains a line of engine_ref: {line!r}" for line in sorted(lines & engine)]
    return out


def failure(result):
    """The reason an nbgrader API call failed: the errors it logged, else its exception."""
    log = result.get("log") or ""
    errors = [line for line in log.splitlines() if line.startswith(("[ERROR]", "[CRITICAL]"))]
    if errors:
        return "\n".join(errors)
    text = (result.get("error") or log).strip()
    return text.splitlines()[-1] if text else "nbgrader gave no reason"


def _same_tree(a, b):
    """Whether two folders hold the same files with the same bytes."""
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    if files != sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file()):
        return False
    return all((a / f).read_bytes() == (b / f).read_bytes() for f in files)


def _prepare(assignments, course_root):
    """Bring fresh source/ notebooks into ``course_root`` (or check the repo's), then generate release/."""
    if course_root == ROOT:
        bad = build.stale(assignments)
        if bad:
            raise ReleaseError("stale generated notebooks (run `make build` and commit them):\n  " + "\n  ".join(bad))
    else:
        for a in assignments:
            src = a.source_path().parent
            if not src.is_dir():
                raise ReleaseError(f"{a.id}: no {src} in the repository; run `make build`")
            dst = a.source_path(course_root).parent
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(src, dst)
    try:
        build.generate_release(assignments, course_root)
    except RuntimeError as err:
        raise ReleaseError(str(err)) from err


def release(course_root, ids=None, exchange_root=None, course_id=COURSE_ID, force=False):
    """Check, register and release assignments to nbgrader's exchange; return the released ids.

    ``ids`` defaults to every authored unit; ``exchange_root`` to ``<course_root>/exchange``.
    Raises :class:`ReleaseError` when a notebook is stale or leaks, when nbgrader fails, or when
    a different copy of an assignment is already in the exchange and ``force`` is not set.
    """
    course_root = Path(course_root).resolve()
    exchange_root = Path(exchange_root).resolve() if exchange_root else course_root / "exchange"
    assignments = select(ids)
    unwritten = [a.id for a in assignments if not a.course_file.exists()]
    if unwritten:
        raise ReleaseError(f"not written yet (no course/<id>.py): {', '.join(unwritten)}")
    _prepare(assignments, course_root)
    problems = [p for a in assignments for p in leaks(a, course_root)]
    if problems:
        raise ReleaseError("refusing to release: the student notebooks leak instructor material:\n  "
                           + "\n  ".join(problems))
    api = nbgrader_api(course_root, exchange_root=exchange_root, config={
        "CourseDirectory": {"course_id": course_id}, "ExchangeReleaseAssignment": {"force": force}})
    released = []
    for a in assignments:
        outbound = exchange_root / course_id / "outbound" / a.id
        if outbound.is_dir() and _same_tree(outbound, a.release_path(course_root).parent):
            released.append(a.id)
            continue
        if outbound.is_dir() and not force:
            raise ReleaseError(f"{a.id}: a different copy is already released at {outbound}; "
                               "release with force to replace it (students who fetched it keep theirs)")
        result = api.release_assignment(a.id)
        if not result["success"]:
            raise ReleaseError(f"nbgrader release_assignment {a.id} failed: {failure(result)}")
        released.append(a.id)
    return released

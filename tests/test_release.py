"""``autograder.outside.release``: only leak-free, gradebook-registered notebooks reach the exchange.

Every test works in a scratch course directory and a scratch exchange; the repository's own
gradebook and exchange are never written.
"""
import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.outside import build, release
from autograder.outside.course import ASSIGNMENTS, BY_ID

AID = "1.2-softmax-cross-entropy"
A = BY_ID[AID]
pytestmark = pytest.mark.xdist_group("release")


def _outbound(exchange):
    return exchange / release.COURSE_ID / "outbound" / AID / f"{A.notebook}.ipynb"


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """One release of the unit into a scratch course and exchange."""
    course = tmp_path_factory.mktemp("course")
    exchange = tmp_path_factory.mktemp("exchange")
    assert release.release(course, [AID], exchange_root=exchange) == [AID]
    return course, exchange


@pytest.fixture
def scratch_course(tmp_path):
    """A course directory holding the repository's source and release notebooks of the unit."""
    for layer in ("source", "release"):
        path = getattr(A, f"{layer}_path")(tmp_path)
        path.parent.mkdir(parents=True)
        path.write_bytes(getattr(A, f"{layer}_path")().read_bytes())
    return tmp_path


def test_release_writes_the_student_notebook_to_the_exchange(released):
    course, exchange = released
    out = _outbound(exchange)
    assert out.read_bytes() == A.release_path(course).read_bytes()
    assert release.leaks(A, course) == []


def test_release_registers_the_assignment_and_its_graded_cells_in_the_gradebook(released):
    course, _ = released
    source = nbformat.read(A.source_path(course), as_version=4)
    graded = {c.metadata["nbgrader"]["grade_id"] for c in source.cells if c.metadata.get("nbgrader", {}).get("grade")}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebooks = gb.find_assignment(AID).notebooks
        assert [n.name for n in notebooks] == [A.notebook]
        assert {g.name for g in notebooks[0].grade_cells} == graded


def test_a_second_release_is_a_no_op_and_a_different_copy_needs_force(released):
    course, exchange = released
    out = _outbound(exchange)
    assert release.release(course, [AID], exchange_root=exchange) == [AID]
    out.chmod(0o644)
    out.write_text("{}")
    with pytest.raises(release.ReleaseError, match="a different copy is already released"):
        release.release(course, [AID], exchange_root=exchange)
    assert out.read_text() == "{}"
    assert release.release(course, [AID], exchange_root=exchange, force=True) == [AID]
    assert out.read_bytes() == A.release_path(course).read_bytes()


def _tamper(kind, course):
    """Edit the release notebook in ``course`` to leak one kind of instructor material."""
    path = A.release_path(course)
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution"))
    if kind == "solution marker":
        cell.source += "\n### BEGIN SOLUTION\npass\n### END SOLUTION"
    elif kind == "hidden tests":
        cell.source += "\n### BEGIN HIDDEN TESTS\n### END HIDDEN TESTS"
    elif kind == "solution line":
        cell.source += "\n" + sorted(release.hidden_lines(nbformat.read(A.source_path(course), as_version=4)))[0]
    elif kind == "engine_ref line":
        cell.source += "\n" + sorted(release.engine_ref_lines())[0]
    nbformat.write(nb, path)
    return cell.id


@pytest.mark.parametrize("kind, says", [
    ("solution marker", "contains 'BEGIN SOLUTION'"),
    ("hidden tests", "contains 'BEGIN HIDDEN TESTS'"),
    ("solution line", "contains a solution or hidden-test line"),
    ("engine_ref line", "contains a line of engine_ref"),
])
def test_leaks_names_the_notebook_cell_and_what_leaked(scratch_course, kind, says):
    before = set(release.leaks(A, scratch_course))  # tests/test_build.py holds the repository's release to []
    cell_id = _tamper(kind, scratch_course)
    found = set(release.leaks(A, scratch_course)) - before
    assert found
    where = f"{A.release_path(scratch_course)}: cell {cell_id} "
    assert all(p.startswith(where) for p in found), found
    assert any(p.startswith(where + says) for p in found), found


def test_release_refuses_a_release_notebook_with_a_solution_or_hidden_test(tmp_path, monkeypatch):
    """A generator that let a solution through: release stops before the exchange, and says why."""
    generate = build.generate_release

    def leaky_generate(assignments, course_root):
        generate(assignments, course_root)
        _tamper("solution line", course_root)
        _tamper("hidden tests", course_root)

    monkeypatch.setattr(build, "generate_release", leaky_generate)
    course, exchange = tmp_path / "course", tmp_path / "exchange"
    with pytest.raises(release.ReleaseError) as err:
        release.release(course, [AID], exchange_root=exchange)
    message = str(err.value)
    assert message.startswith("refusing to release: the student notebooks leak instructor material")
    assert "contains a solution or hidden-test line" in message
    assert "contains 'BEGIN HIDDEN TESTS'" in message
    assert str(A.release_path(course)) in message
    assert not (exchange / release.COURSE_ID / "outbound" / AID).exists()


def test_release_from_the_repository_refuses_stale_notebooks(monkeypatch):
    """In the repository itself, stale committed notebooks stop the release before anything is written."""
    monkeypatch.setattr(build, "stale", lambda assignments: [f"release/{AID}"])
    monkeypatch.setattr(build, "generate_release", lambda *args: pytest.fail("generated from stale notebooks"))
    with pytest.raises(release.ReleaseError, match=rf"stale generated notebooks \(run `make build`.*\n  release/{AID}"):
        release.release(release.ROOT, [AID])


def test_release_refuses_a_unit_not_written_yet(tmp_path):
    unwritten = [a.id for a in ASSIGNMENTS if not a.course_file.exists()]
    if not unwritten:
        pytest.skip("every unit is written")
    with pytest.raises(release.ReleaseError, match=f"not written yet \\(no course/<id>.py\\): {unwritten[0]}"):
        release.release(tmp_path, unwritten[:1])
    assert not any(tmp_path.iterdir())


def test_a_new_gradebook_gets_the_schema_version_that_alembic_heads_prints(tmp_path):
    """nbgrader's Gradebook stamps a new database with its schema's latest migration, which it asks
    an `alembic heads` subprocess for; here that answer comes from alembic in this process
    (``course.new_gradebooks_in_process``, installed by conftest.py): the same revision."""
    import subprocess

    import sqlalchemy as sa
    from nbgrader import api
    from nbgrader.dbutil import _temp_alembic_ini

    from autograder.outside.course import _alembic_head, nbgrader_env

    assert api.get_alembic_version is _alembic_head
    with _temp_alembic_ini(f"sqlite:///{tmp_path / 'scratch.db'}") as ini:
        heads = subprocess.run(["alembic", "-c", ini, "heads"], capture_output=True, text=True, check=True,
                               env=nbgrader_env()).stdout
    assert heads.split() == [_alembic_head(), "(head)"]
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with api.Gradebook(url):
        pass
    with sa.create_engine(url).connect() as db:
        assert db.execute(sa.text("select version_num from alembic_version")).scalars().all() == [_alembic_head()]

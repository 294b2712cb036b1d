"""autograder grade --cluster: the same grades on a real Dask cluster (a scheduler and two workers
on loopback, started and stopped here), with no grade lost or doubled when a worker or the client
is killed halfway."""
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from autograder.outside import catalogue, grader, grading, state
from autograder.outside.course import nbgrader_env

import pg

AID = "1.2-softmax-cross-entropy"
pytestmark = pytest.mark.xdist_group("cluster")
BIN = Path(sys.executable).parent


@contextmanager
def dask_cluster(workers=2):
    """A dask-scheduler and ``workers`` one-thread dask-worker processes (no nanny: a killed worker
    stays dead); yields the address and the worker processes."""
    from distributed import Client

    port = pg.free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = nbgrader_env()
    quiet = dict(env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = [subprocess.Popen([BIN / "dask", "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard", "--no-show"], **quiet)]
    try:
        for _ in range(workers):
            procs.append(subprocess.Popen([BIN / "dask", "worker", address, "--nthreads", "1", "--no-nanny",
                                           "--host", "127.0.0.1", "--no-dashboard"], **quiet))
        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=60)
        yield address, procs[1:]
    finally:
        for p in procs[::-1]:
            p.kill()
            p.wait()


@pytest.fixture(scope="module")
def klass():
    """The reference, the blank release, two mistakes, a correct alternative."""
    ref = grading.reference_submission(AID)
    variants = catalogue.load(AID)
    chosen = [v for v in variants if v.is_mistake][:2] + [v for v in variants if not v.is_mistake][:1]
    subs = {"reference": ref, "blank": grading.blank_submission(AID)}
    subs.update({grading.student_name(v): grading.apply_variant(ref, v, AID) for v in chosen})
    return subs


def _course(root, subs, db_url, broken=True):
    grading.prepare_course(root, AID, db_url)
    for student, nb in subs.items():
        grading.submit(root, AID, student, nb)
    if broken:  # graded nowhere, recorded with its reason
        path = grading.submit(root, AID, "broken-invalid-json", subs["reference"])
        path.write_text(path.read_text()[:500])


def _options(db_url, **kw):
    return grader.Options(workers=2, db_url=db_url, progress=False, timeout=120, cell_timeout=30, **kw)


@pytest.fixture(scope="module")
def local_scores(klass, tmp_path_factory):
    root = tmp_path_factory.mktemp("local")
    db_url = state.sqlite_url(root)
    _course(root, klass, db_url)
    records = grader.grade(root, AID, _options(db_url))
    return grading.read_grades(db_url, AID), {s: (r.status, r.reason) for s, r in records.items()}


def test_cluster_grades_equal_the_local_pool_cell_by_cell(klass, local_scores, tmp_path):
    """On PostgreSQL, shared by every grader, when the machine has it; else on SQLite."""
    with (pg.server() if pg.available() else _sqlite(tmp_path)) as db_url, dask_cluster() as (address, _):
        _course(tmp_path, klass, db_url)
        records = grader.grade(tmp_path, AID, _options(db_url, cluster=address))
        assert {s: (r.status, r.reason) for s, r in records.items()} == local_scores[1]
        assert grading.read_grades(db_url, AID) == local_scores[0]
        feedback_source = tmp_path / "autograded" / "reference" / AID
        assert list(feedback_source.glob("*.ipynb")), "the autograded notebook came back to the course"


@contextmanager
def _sqlite(root):
    yield state.sqlite_url(root)


def _count(db_url, sql):
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(sql)).scalar()
    except sa.exc.OperationalError:
        return 0
    finally:
        engine.dispose()


def _exactly_one_grade_each(db_url, students):
    records = state.load(db_url, AID)
    assert set(records) == set(students)
    assert all(r.status == "graded" for r in records.values()), {s: r.reason for s, r in records.items()}
    cells = _count(db_url, "select count(*) from grade_cells")
    rows = _count(db_url, "select count(*) from grade g join submitted_notebook n on g.notebook_id = n.id")
    assert rows == cells * len(students), "a submission has a missing or a duplicated grade"


def _many(klass, n):
    pool = list(klass.items())
    return {f"s{i:02d}-{pool[i % len(pool)][0]}": pool[i % len(pool)][1] for i in range(n)}


def _start_grading(root, address):
    cmd = [sys.executable, "-m", "autograder", "grade", AID, "--course", str(root), "--cluster", address, "--quiet"]
    return subprocess.Popen(cmd, env=nbgrader_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait_for_rows(db_url, n, proc, seconds=600):
    """Until the grading run has recorded ``n`` submissions (a long limit: a loaded machine is slow)."""
    deadline = time.monotonic() + seconds
    while _count(db_url, "select count(*) from autograder_state") < n:
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, f"fewer than {n} submissions recorded after {seconds} s"
        time.sleep(0.2)


def test_a_worker_killed_mid_batch_loses_no_grade(klass, tmp_path):
    subs = _many(klass, 8)
    db_url = state.sqlite_url(tmp_path)
    _course(tmp_path, subs, db_url, broken=False)
    with dask_cluster() as (address, workers):
        proc = _start_grading(tmp_path, address)
        _wait_for_rows(db_url, 1, proc)
        workers[0].send_signal(signal.SIGKILL)
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
    _exactly_one_grade_each(db_url, subs)


def test_the_client_killed_halfway_then_a_rerun_grades_the_rest_once(klass, tmp_path):
    subs = _many(klass, 8)
    db_url = state.sqlite_url(tmp_path)
    _course(tmp_path, subs, db_url, broken=False)
    with dask_cluster() as (address, _):
        proc = _start_grading(tmp_path, address)
        _wait_for_rows(db_url, 2, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done = _count(db_url, "select count(*) from autograder_state")
        assert 2 <= done < len(subs), "the run finished before it could be killed"
        jobs, current = grader.plan(tmp_path, AID, db_url)
        assert len(jobs) == len(subs) - done and len(current) == done
        grader.grade(tmp_path, AID, _options(db_url, cluster=address))
    _exactly_one_grade_each(db_url, subs)


def test_local_cluster_for_a_quick_try_stops_a_notebook_past_its_time_limit(klass, local_scores, tmp_path):
    db_url = state.sqlite_url(tmp_path)
    loop = grading.broken_submissions(AID)["hostile-infinite-loop"]
    _course(tmp_path, {"reference": klass["reference"]}, db_url, broken=False)
    grading.submit(tmp_path, AID, "z-loops", klass["reference"]).write_text(loop)  # graded second
    # the cell limit is longer than the notebook's: only the cluster's own watchdog can stop it
    options = grader.Options(db_url=db_url, progress=False, timeout=20, cell_timeout=600, cluster="local:1")
    left = lambda: {p.name for p in Path(tempfile.gettempdir()).glob("autograder-c*")}  # noqa: E731
    before = left()
    records = grader.grade(tmp_path, AID, options)
    # the worker's scratch course was in the Dask worker's own folder, gone with the worker
    assert left() == before
    assert records["reference"].status == "graded", records["reference"].reason
    assert grading.read_grades(db_url, AID)["reference"] == local_scores[0]["reference"]
    assert (records["z-loops"].status, records["z-loops"].reason) == (
        "failed", "the notebook ran for more than 20 s and was stopped")


def test_a_fault_of_the_grader_on_a_cluster_worker_is_graded_again_at_the_next_run(tmp_path):
    """A Dask worker's record of a grader fault has no fingerprint (worker.grade_one); the course's
    state row keeps it so, and the next run's plan grades that submission again (any other record
    is current until the submission changes)."""
    from autograder.outside import cluster
    from autograder.outside.course import BY_ID

    db_url = state.sqlite_url(tmp_path)
    (tmp_path / "submitted" / "s1" / AID).mkdir(parents=True)
    source = BY_ID[AID].source_path(tmp_path)
    source.parent.mkdir(parents=True)
    source.write_text("{}")
    (job,), _ = grader.plan(tmp_path, AID, db_url)
    for fingerprint, regraded in ((job["fingerprint"], []), ("", ["s1"])):
        record = {"fingerprint": fingerprint, "status": "failed", "reason": "...", "seconds": 1.0, "flags": []}
        cluster.store(tmp_path, db_url, job, record, {})
        assert [j["student"] for j in grader.plan(tmp_path, AID, db_url)[0]] == regraded

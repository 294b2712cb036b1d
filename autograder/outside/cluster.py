"""``autograder grade --cluster``: the same grading jobs on a Dask distributed cluster.

The local pool (:mod:`autograder.outside.grader`) stays the default. On a cluster:

* **Jobs travel as data.** The client packs each job with the submission's files and the
  source notebook (:func:`pack`); a Dask worker needs no shared file system with the course.
* **Each worker process grades as a local worker does.** :func:`run` unpacks the job into a
  scratch course of its own (the assignment registered there once per source notebook), and
  grades it with :func:`autograder.outside.worker.grade_one`: the same sandbox, kept for the worker
  process's life with its warm kernel factory, the same nbgrader pipeline, the same audit. A
  process-wide lock makes one worker process grade one notebook at a time, whatever its thread
  count. A notebook past the time limit has its sandbox stopped, as the local pool kills its
  worker.
* **One process writes the gradebook.** The result (the autograded notebook, the state record)
  comes back to the client, which saves the grades with nbgrader's ``SaveAutoGrades`` (its
  lookups batched: :mod:`autograder.outside.gradebook`) and then the state row (:func:`store`),
  in that order: a run killed at any point resumes as the local pool does, and every submission
  ends with exactly one grade.
* **Lost workers.** Dask reruns the task of a worker that died on another worker; a task that
  kills several workers in turn is recorded as failed with a reason.

Dask was chosen over Ray for this job shape (thousands of independent, CPU-bound tasks of a
second or two, each holding a warm sandbox per process): Dask's scheduler, ``dask-worker`` and
``LocalCluster`` are plain Python processes on this machine, its Kubernetes operator and Dask
Gateway serve JupyterHub deployments, and no object store or GPU scheduling is needed
(``docs/deploying.md``).
"""
import hashlib
import shutil
import tempfile
import threading
import time
from pathlib import Path

from . import state
from .course import BY_ID

_LOCK = threading.Lock()
_COURSES = {}  # (assignment, source digest) -> scratch course of this worker process


def pack(job):
    """``job`` as data: its fields, the submission's files and the source notebook's bytes.

    The client checks the submission first (:func:`autograder.outside.worker.check_submission`), so a
    packed submission has no symbolic links.
    """
    root = Path(job["course_root"])
    submission = root / "submitted" / job["student"] / job["assignment"]
    files = {str(p.relative_to(submission)): p.read_bytes() for p in sorted(submission.rglob("*")) if p.is_file()}
    source = BY_ID[job["assignment"]].source_path(root).read_bytes()
    return dict(job, files=files, source=source)


def _scratch():
    """The Dask worker's own folder, which Dask empties when the worker closes (and a later worker
    on the machine, when it was killed); the system's temporary folder outside a Dask worker."""
    from distributed import get_worker

    try:
        return get_worker().local_directory
    except ValueError:  # (not in a Dask worker: a test calling run directly)
        return None


def _course_for(assignment, source):
    """This worker process's scratch course for one source notebook, registered in its own gradebook."""
    from . import build

    key = (assignment, hashlib.sha256(source).hexdigest())
    if key not in _COURSES:
        root = Path(tempfile.mkdtemp(prefix="autograder-course-", dir=_scratch()))
        path = BY_ID[assignment].source_path(root)
        path.parent.mkdir(parents=True)
        path.write_bytes(source)
        build.generate_release([BY_ID[assignment]], root)
        _COURSES[key] = root
    return _COURSES[key]


def run(packed, timeout):
    """Grade one packed job on this worker process; return ``(record dict, autograded files)``."""
    from . import worker

    with _LOCK:
        root = _course_for(packed["assignment"], packed["source"])
        student, assignment = packed["student"], packed["assignment"]
        for layer in ("submitted", "autograded"):
            shutil.rmtree(root / layer / student, ignore_errors=True)
        submission = root / "submitted" / student / assignment
        for name, data in packed["files"].items():
            (submission / name).parent.mkdir(parents=True, exist_ok=True)
            (submission / name).write_bytes(data)
        job = {k: v for k, v in packed.items() if k not in ("files", "source")}
        job.update(course_root=str(root), db_url=state.sqlite_url(root))
        # not the notebook's seconds: this process's imports and torch's warm-up (once), a starting zygote's
        worker._warm(job.get("in_kernel", False))
        box = worker._sandbox_for(job)
        box.ready()
        watchdog = threading.Timer(timeout, box.stop)
        watchdog.start()
        started = time.monotonic()
        try:
            record = worker.grade_one(job)
        finally:
            watchdog.cancel()
        if time.monotonic() - started >= timeout:
            record.update(status="failed", reason=f"the notebook ran for more than {timeout:g} s and was stopped")
        graded = root / "autograded" / student / assignment
        files = {str(p.relative_to(graded)): p.read_bytes() for p in sorted(graded.rglob("*")) if p.is_file()}
        return record, files


def store(course_root, db_url, job, record, files):
    """Save one result in the course: the autograded files, the grades, then the state row."""
    import nbformat
    from nbgrader.api import Gradebook

    from .gradebook import SaveAutoGradesAtOnce

    a = BY_ID[job["assignment"]]
    if record["status"] == "graded":
        graded = Path(course_root) / "autograded" / job["student"] / a.id
        shutil.rmtree(graded, ignore_errors=True)
        for name, data in files.items():
            (graded / name).parent.mkdir(parents=True, exist_ok=True)
            (graded / name).write_bytes(data)
        with Gradebook(db_url) as gb:
            gb.update_or_create_student(job["student"])
            gb.update_or_create_submission(a.id, job["student"])
        nb = nbformat.read(graded / f"{a.notebook}.ipynb", as_version=nbformat.NO_CONVERT)
        resources = {"nbgrader": {"db_url": db_url, "assignment": a.id, "notebook": a.notebook,
                                  "student": job["student"]}}
        SaveAutoGradesAtOnce().preprocess(nb, resources)
    # (the worker's fingerprint: none after a fault of the grader, so that the next run grades it again)
    state.save(db_url, a.id, state.Record(job["student"], record["fingerprint"], record["status"], record["reason"],
                                          record["seconds"], record["flags"]))


def _failed(job, reason):
    """The record of a notebook that this client could not have graded (a worker's has the same fields)."""
    return dict(fingerprint=job["fingerprint"], status="failed", reason=reason, seconds=0.0, flags=[])


def client_for(address):
    """A Dask client on ``address``; ``local:N`` starts a LocalCluster of N one-thread processes."""
    from distributed import Client, LocalCluster

    if address.startswith("local:"):
        cluster = LocalCluster(n_workers=int(address.split(":", 1)[1]), threads_per_worker=1, processes=True,
                               dashboard_address=None)
        return Client(cluster)
    return Client(address)


def grade(root, jobs, options, bar):
    """Run ``jobs`` on the cluster at ``options.cluster``, storing each result as it arrives."""
    from distributed import as_completed

    from .worker import check_submission

    with client_for(options.cluster) as client:
        futures = {}
        for job in jobs:
            reason = check_submission(Path(root) / "submitted" / job["student"] / job["assignment"], job["notebook"])
            if reason:
                store(root, job["db_url"], job, _failed(job, reason), {})
                bar.update(1)
                continue
            future = client.submit(run, pack(job), options.timeout, pure=False,
                                   key=f"grade-{job['assignment']}-{job['student']}-{job['fingerprint'][:16]}")
            futures[future] = job
        for future in as_completed(futures):
            job = futures.pop(future)
            try:
                record, files = future.result()
            except Exception as exc:  # a worker lost in turn, or the task itself failed: recorded, the batch goes on
                reason = f"the cluster could not grade this notebook: {type(exc).__name__}: {exc}"
                record, files = _failed(job, reason), {}
            store(root, job["db_url"], job, record, files)
            bar.update(1)

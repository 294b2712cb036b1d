"""``autograder grade``: every submission of one assignment, in parallel, sandboxed, resumable.

The work of grading one notebook is nbgrader's own ``autograde`` (see :mod:`autograder.outside.worker`).
This module decides what needs grading and runs it on a pool of worker processes:

* **Parallel.** ``workers`` processes (default: one per core), forks of one template process that
  imported nbgrader and torch once for the run (:func:`autograder.outside.worker.template`).
* **Bounded.** A notebook that runs past ``timeout`` seconds has its worker (and, through the
  sandbox, its kernel) killed; it is recorded as failed with that reason and a fresh worker
  takes the next job. A worker that dies is replaced the same way. The batch always finishes.
* **Resumable.** A submission is graded again only when its fingerprint changed: its files,
  the source notebook, or the grader's own checks. A state row is written only after nbgrader
  has committed the grades, so a run killed at any point and started again ends with exactly
  one grade per submission, equal to a clean run's.
* **One run at a time** per course and assignment (an advisory lock), so that two runs never
  grade the same student at once.
"""
import fcntl
import hashlib
import json
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import sandbox, state
from .course import BY_ID, nbgrader_env, new_gradebooks_in_process

PACKAGE = Path(__file__).resolve().parent.parent
# Changing what a check does, or how a notebook runs, changes grades: these files are part of each fingerprint.
GRADER_FILES = ("inside/checks.py", "outside/oracles.py", "outside/sandbox.py", "inside/zygote.py", "outside/execute.py",
                "outside/worker.py", "outside/verdicts.py", "inside/recording.py", "inside/wire.py",
                "inside/output_widget.py", "outside/gradebook.py")


@dataclass
class Options:
    workers: int = os.cpu_count() or 1
    timeout: float = 300.0
    cell_timeout: int = 60
    memory_mb: int = 2048
    worker_memory_mb: int = None  # what one notebook may make its grading worker hold; None: 3 x memory_mb
    nproc: int = 128
    db_url: str = None
    force: bool = False
    progress: bool = True
    cluster: str = None  # a Dask scheduler address, or local:N; None grades on this machine's pool
    in_kernel: bool = False  # test cells run in the student's kernel even where the unit's grader can run them


def fingerprint(submission_dir, source_notebook, mode=""):
    """A digest of everything a grade depends on: the submission, the source notebook, the checks,
    and the grading ``mode``."""
    h = hashlib.sha256(mode.encode() + b"\0")
    # a link is hashed by where it points, never followed: it may point at /proc/kcore
    files = sorted(p for p in Path(submission_dir).rglob("*") if p.is_symlink() or p.is_file())
    for p in files + [Path(source_notebook)] + [PACKAGE / f for f in GRADER_FILES]:
        h.update(str(p.relative_to(submission_dir) if p in files else p.name).encode() + b"\0")
        h.update(os.readlink(p).encode() if p.is_symlink() else hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def plan(course_root, assignment_id, db_url, force=False, in_kernel=False):
    """The jobs to run and the students whose recorded grade is still current."""
    a = BY_ID[assignment_id]
    root = Path(course_root)
    source = root / "source" / a.id / f"{a.notebook}.ipynb"
    done = state.load(db_url, a.id)
    jobs, current = [], []
    for sub in sorted(root.glob(f"submitted/*/{a.id}")):
        if not sub.is_dir():
            continue
        student = sub.parent.name
        fp = fingerprint(sub, source, "" if in_kernel else "trusted")
        if not force and student in done and done[student].fingerprint == fp:
            current.append(student)
            continue
        jobs.append(dict(course_root=str(root), assignment=a.id, notebook=a.notebook, student=student,
                         fingerprint=fp, db_url=db_url))
    return jobs, current


@contextmanager
def _run_lock(course_root, assignment_id):
    path = Path(course_root) / ".autograder" / f"grade-{assignment_id}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"another `autograder grade {assignment_id}` is running on {course_root}") from None
        yield


class _Template:
    """The run's template process (:func:`autograder.outside.worker.template`), which forks the workers.

    ``sandboxes`` is ``(count, job)``: the template starts that many workers' sandboxes for ``job``
    before its warm-up (see :mod:`autograder.outside.worker`)."""

    def __init__(self, log, in_kernel=False, sandboxes=None):
        self.waiting = []  # the forks asked for whose pid has not come yet, oldest first
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        early = ["--sandboxes", str(sandboxes[0]), json.dumps(sandboxes[1])] if sandboxes and sandboxes[0] else []
        with theirs:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "autograder.outside.worker", str(theirs.fileno()),
                 *(["--in-kernel"] if in_kernel else []), *early],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=nbgrader_env(), start_new_session=True,
                pass_fds=(theirs.fileno(),))

    def fork(self):
        """A new worker (its pid comes when the template has warmed up: :attr:`_Forked.pid`)."""
        jobs_r, jobs_w = os.pipe()
        out_r, out_w = os.pipe()
        worker = _Forked(self, os.fdopen(jobs_w, "w", buffering=1), os.fdopen(out_r, "r"))
        try:
            socket.send_fds(self.control, [b"fork"], [jobs_r, out_w])
            self.waiting.append(worker)
        except OSError:  # the template is gone: the worker's channel ends at once, as a crashed worker's does
            worker.started(None)
        finally:
            os.close(jobs_r)
            os.close(out_w)
        return worker

    def answer(self):
        """Take the template's next answer: the pid of the oldest fork still waiting; when the
        template is gone, none of them has one."""
        worker = self.waiting.pop(0)
        try:
            answer = self.control.recv(256)
        except OSError:
            answer = b""
        if answer:
            pid, scratch = answer.decode().split()
            worker.started(int(pid), None if scratch == "-" else scratch)
            return
        for w in [worker] + self.waiting:
            w.started(None)
        self.waiting = []

    def alive(self):
        return self.proc.poll() is None

    def close(self):
        """End the template, and with it (their parent-death signal) any worker still running, and
        remove the sandboxes it started that no worker took over."""
        self.control.close()
        self.proc.kill()
        self.proc.wait()
        sandbox.clean_up(self.proc.pid)


class _Forked:
    """One worker forked by the template: what the grader uses of a ``Popen`` (``pid``, ``stdin``,
    ``stdout``, ``poll``, ``wait``). It is the template's child, not this process's: it is waited
    for through a pidfd, and its exit status is the template's to see (``-1`` here)."""

    def __init__(self, template, stdin, stdout):
        self.template, self.stdin, self.stdout = template, stdin, stdout
        self._pid, self._pidfd, self._known = None, None, False
        self.scratch = None  # the scratch folder of the sandbox it took over from the template
        self.returncode = None

    def started(self, pid, scratch=None):
        self._pid, self._known, self.scratch = pid, True, scratch
        if pid is not None:
            try:
                self._pidfd = os.pidfd_open(pid)
            except ProcessLookupError:  # (it cannot be: the template reaps no worker before the run ends)
                self._pid = None

    @property
    def pid(self):
        """The worker's pid, or None when the template could not fork it."""
        while not self._known:
            self.template.answer()
        return self._pid

    def poll(self):
        if self.returncode is None and (self.pid is None or select.select([self._pidfd], [], [], 0)[0]):
            self._ended()
        return self.returncode

    def wait(self):
        if self.returncode is None:
            if self.pid is not None:
                select.select([self._pidfd], [], [])
            self._ended()
        return self.returncode

    def _ended(self):
        if self._pidfd is not None:
            os.close(self._pidfd)
        self.returncode = -1

    def close(self):
        """Close this side of its pipes."""
        try:
            self.stdin.close()
        except BrokenPipeError:  # (a job line it never read)
            pass
        self.stdout.close()


class _Worker:
    """A worker process, the job it is on, and when that job started."""

    def __init__(self, template):
        self.proc = template.fork()
        self.job = None
        self.started = 0.0

    def send(self, job):
        self.job, self.started = job, time.monotonic()
        try:
            self.proc.stdin.write(json.dumps(job) + "\n")
        except BrokenPipeError:  # it died: its channel ends, and the job is reported as a crash
            pass

    def kill(self):
        pid = self.proc.pid
        if pid is None:
            return
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:  # killed before it made its own session, right after the fork
            os.kill(pid, signal.SIGKILL)
        self.proc.wait()
        sandbox.clean_up(pid, self.proc.scratch)


def _fail(job, reason, seconds):
    record = state.Record(job["student"], job["fingerprint"], "failed", reason, seconds)
    state.save(job["db_url"], job["assignment"], record)


def grade(course_root, assignment_id, options=None):
    """Grade every submission of ``assignment_id`` under ``course_root``; return ``{student: Record}``."""
    options = options or Options()
    root = Path(course_root).resolve()
    db_url = options.db_url or state.sqlite_url(root)
    with _run_lock(root, assignment_id):
        sandbox.preflight()
        if not BY_ID[assignment_id].source_path(root).is_file():
            ensure_registered(root, assignment_id, db_url)  # without the source: says what to run
        jobs, _ = plan(root, assignment_id, db_url, options.force, options.in_kernel)
        for job in jobs:
            job.update(cell_timeout=options.cell_timeout, memory_mb=options.memory_mb, nproc=options.nproc,
                       in_kernel=options.in_kernel, worker_memory_mb=options.worker_memory_mb or 3 * options.memory_mb)
        if options.cluster:
            from . import cluster

            ensure_registered(root, assignment_id, db_url)
            with _progress(len(jobs), options.progress) as bar:
                cluster.grade(root, jobs, options, bar)
        else:
            # the template starts (and imports torch and nbgrader) while this process registers the assignment
            _run(root, jobs, options, before_first_job=lambda: ensure_registered(root, assignment_id, db_url))
    return state.load(db_url, assignment_id)


def ensure_registered(root, assignment_id, db_url):
    """Make sure the gradebook knows the assignment, as ``autograder release`` would have done.

    nbgrader's autograde needs the assignment and its graded cells in the gradebook. An
    assignment that was never released there is registered from ``<root>/source/<id>``; with no
    source notebook either, grading stops with one line that says what to run.
    """
    from nbgrader.api import Gradebook, MissingEntry

    new_gradebooks_in_process()
    with Gradebook(db_url) as gb:
        try:
            gb.find_assignment(assignment_id)
            return
        except MissingEntry:
            pass
    if not BY_ID[assignment_id].source_path(root).is_file():
        raise SystemExit(f"{assignment_id} is not in the course at {root} (no source/{assignment_id}): "
                         f"run `autograder release {assignment_id} --course {root}` first")
    from . import build

    build.generate_release([BY_ID[assignment_id]], root, db_url)


def _progress(total, enabled):
    from tqdm import tqdm

    return tqdm(total=total, unit="nb", disable=not enabled or total == 0, dynamic_ncols=True,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]")


def _run(root, jobs, options, before_first_job):
    """Grade ``jobs`` on a pool of workers; ``before_first_job()`` runs once the workers have started."""
    log_dir = root / ".autograder" / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    queue = list(jobs)
    sel = selectors.DefaultSelector()
    with open(log_dir / "workers.log", "a") as log, _progress(len(jobs), options.progress) as bar:
        workers = []
        # the first workers' sandboxes start in the template, while it warms up
        early = (min(options.workers, len(queue)), queue[0] if queue else None)
        template = [_Template(log, options.in_kernel, early)]

        def start_worker(send=True):
            if not template[0].alive():  # it was killed from outside: a new one
                template[0].close()
                template[0] = _Template(log, options.in_kernel)
            w = _Worker(template[0])
            sel.register(w.proc.stdout, selectors.EVENT_READ, w)
            workers.append(w)
            if send and queue:
                w.send(queue.pop(0))

        def retire(w):
            sel.unregister(w.proc.stdout)
            workers.remove(w)
            w.kill()
            w.proc.close()

        try:
            for _ in range(min(options.workers, len(queue))):
                start_worker(send=False)
            before_first_job()
            for w in workers:
                w.send(queue.pop(0))
            while any(w.job for w in workers):
                for key, _ in sel.select(timeout=1.0):
                    w = key.data
                    line = w.proc.stdout.readline()
                    job, w.job = w.job, None
                    if line:
                        bar.update(1)
                        if queue:
                            w.send(queue.pop(0))
                        continue
                    _fail(job, "the grading worker crashed while running this notebook", time.monotonic() - w.started)
                    bar.update(1)
                    retire(w)
                    if queue:
                        start_worker()
                now = time.monotonic()
                for w in [w for w in workers if w.job and now - w.started > options.timeout]:
                    _fail(w.job, f"the notebook ran for more than {options.timeout:g} s and was stopped",
                          now - w.started)
                    bar.update(1)
                    w.job = None
                    retire(w)
                    if queue:
                        start_worker()
            for w in list(workers):  # no job left: each worker ends when its job pipe does
                w.proc.stdin.close()
                w.proc.wait()
                sel.unregister(w.proc.stdout)
                w.proc.close()
                workers.remove(w)
        finally:  # (what stopped the run early: registering failed, the grader was interrupted)
            for w in list(workers):
                retire(w)
            template[0].close()

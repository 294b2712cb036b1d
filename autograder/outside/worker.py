"""The grading workers: ``python -m autograder.outside.worker FD [--in-kernel] [--sandboxes N JOB_JSON]``, driven by :mod:`autograder.outside.grader`.

That command starts the run's *template*: it imports nbgrader, and torch with the checks for
trusted verdicts (:func:`_warm`), once, while the grader registers the assignment, and then forks
one worker each time the grader asks (:func:`template`), so that no worker pays those 2.5
CPU-seconds again. Before its warm-up it starts the sandboxes of the first ``N`` workers, whose
zygotes load on the other core meanwhile, and each of those workers takes one over
(:meth:`autograder.outside.sandbox.Sandbox.adopt`). A worker reads jobs, one JSON object a line, on its job pipe, grades each
with ``NbGraderAPI.autograde``, records the outcome in the state table, and answers with one
JSON line per job on its protocol channel. Everything else that nbgrader, jupyter or a kernel
may print goes to stderr (the run's workers.log), never into the protocol.

A job is graded only after a check outside any kernel: a missing notebook, invalid JSON or an
old notebook format is reported with a reason instead of being run.
"""
import atexit
import dataclasses
import gc
import json
import os
import resource
import signal
import socket
import sys
import time
import traceback
import weakref
from pathlib import Path

import nbformat


def check_submission(submission_dir, notebook):
    """None when the submission can be run, else the reason it cannot, for the student."""
    # nbgrader copies a submission by following its links: a link to the gradebook would be
    # copied into the student's folder, and from there into the feedback
    links = sorted(str(p.relative_to(submission_dir)) for p in Path(submission_dir).rglob("*") if p.is_symlink())
    if links:
        return f"the submission contains symbolic links, which are not accepted: {', '.join(links)}"
    path = Path(submission_dir) / f"{notebook}.ipynb"
    if not path.exists():
        found = sorted(p.name for p in Path(submission_dir).glob("*.ipynb"))
        return f"no notebook named {path.name} in the submission" + (f" (found: {', '.join(found)})" if found else "")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"{path.name} is not a valid notebook file (not valid JSON: {exc})"
    if not isinstance(raw, dict) or "cells" not in raw and "worksheets" not in raw:
        return f"{path.name} is not a notebook (no cells)"
    if raw.get("nbformat") != 4:
        return (f"{path.name} uses notebook format {raw.get('nbformat')}; the course needs format 4 "
                "(open it in JupyterLab and save it again)")
    try:
        nbformat.validate(nbformat.from_dict(raw))
    except nbformat.ValidationError as exc:
        return f"{path.name} is not a valid format-4 notebook: {exc.message}"
    return None


def failure_reason(result):
    """A one-line reason from a failed NbGraderAPI result."""
    text = (result.get("error") or "") + "\n" + (result.get("log") or "")
    for needle, reason in (("DeadKernelError", "the kernel died (the notebook exited or crashed its kernel)"),
                           ("Kernel died", "the kernel died (the notebook exited or crashed its kernel)"),
                           ("CellTimeoutError", "a cell ran past the time limit"),
                           ("MemoryError", "the notebook ran out of memory"),
                           ("nbgrader metadata format",
                            "nbgrader could not read the notebook's nbgrader cells (a cell duplicated, or its "
                            "metadata edited)")):
        if needle in text:
            return reason
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return "nbgrader could not grade the notebook: " + (lines[-1] if lines else "unknown error")


_sandbox = None
_capped = None  # the address space this worker may reach, set at its first job


def _cap_memory(job):
    """Limit this worker's address space, once: its size after the warm-up, plus ``worker_memory_mb``.

    With trusted verdicts the student's code makes the worker compute (1.8's lent engines run
    torch on arrays the kernel sends; a broadcast view costs a few bytes on the wire and its
    result 128 MB here), so a notebook must not be able to take the machine's memory. Past the
    limit an allocation fails: in a test object's call, the student's code gets "the grader's
    object raised ..."; elsewhere the notebook is reported as out of memory. Only the soft limit
    is set: the sandbox launcher that this worker starts sets its own. The objects are let
    go with the notebook (:func:`grade_one` collects its garbage), so the next one starts free.
    """
    global _capped
    if _capped is None:
        import psutil

        gc.collect()
        gc.freeze()  # the warm-up's objects stay: later collections, one per job, skip them
        _capped = psutil.Process().memory_info().vms + job["worker_memory_mb"] * (1 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (_capped, resource.getrlimit(resource.RLIMIT_AS)[1]))


def trusted(job):
    """True when the job's test cells run in this process (trusted verdicts): always, unless the
    instructor asked for ``--in-kernel``."""
    return not job.get("in_kernel")


def numpy_only(job):
    """True when the job's kernel gets NumPy only: trusted verdicts, and a unit without torch exercises."""
    from .course import BY_ID

    return trusted(job) and BY_ID[job["assignment"]].numpy_only_kernel


def sandbox_limits(job):
    """The :class:`autograder.outside.sandbox.Sandbox` arguments that grading ``job`` needs."""
    return job["memory_mb"], job["nproc"], numpy_only(job)


def _sandbox_for(job):
    """This worker's sandbox, made at its first job (and again if the limits change)."""
    global _sandbox
    from . import sandbox

    limits = sandbox_limits(job)
    if _sandbox is None or _sandbox.limits != limits:
        if _sandbox is not None:
            atexit.unregister(_sandbox.close)
            _sandbox.close()
        _sandbox = sandbox.Sandbox(*limits)
        atexit.register(_sandbox.close)
    return _sandbox


def _bind_torch():
    """torch and the checks' warm-up, once per run (in the template): not in the first test cell's time."""
    import torch

    from autograder.inside import checks

    # one thread: the workers already use every core, and torch's second thread spinning
    # against this worker's own kernel made its oracles 10x slower under load. Set before the
    # warm-up, so that no thread pool exists when the template forks its workers.
    torch.set_num_threads(1)
    checks._bind_torch()


def _warm(in_kernel):
    """Import what every job needs before the first one comes, while the grader registers the
    assignment: nbgrader and its grading pipeline, and (trusted verdicts) torch and the checks."""
    from nbgrader.apps import NbGraderAPI  # noqa: F401

    from . import execute  # noqa: F401

    if not in_kernel:
        _bind_torch()


def _share_gradebook_engines():
    """nbgrader's ``Gradebook`` makes a new SQLAlchemy engine each time it opens (about ten times a
    notebook), which compiles every statement again; in a worker it takes the one engine of the
    database (:func:`autograder.outside.state.shared_engine`). Each opening also makes any missing
    table, which asks the database about each of nbgrader's 14 tables: on the shared engine, the
    first opening does, and the later ones know the tables are there (a run never drops one)."""
    from nbgrader import api

    from . import state

    api.create_engine = state.shared_engine
    if not isinstance(api.Base.metadata.create_all, _TablesMade):
        api.Base.metadata.create_all = _TablesMade(api.Base.metadata.create_all)


class _TablesMade:
    """``MetaData.create_all`` that runs once per engine: the gradebook's tables, once made, stay."""

    def __init__(self, create_all):
        self.create_all, self.engines = create_all, weakref.WeakSet()

    def __call__(self, bind, **kwargs):
        if bind not in self.engines:
            self.create_all(bind=bind, **kwargs)
            self.engines.add(bind)


def grading_config(job):
    """nbgrader's settings for grading ``job`` (the sandbox adds its own: :meth:`Sandbox.prepare`)."""
    from traitlets.config import Config

    config = Config()
    config.Execute.timeout = job["cell_timeout"]
    # nbconvert checks the notebook against the schema after each of nbgrader's 13 preprocessors;
    # once, after the last, is nbconvert's own faster setting (a bad notebook still fails)
    config.Exporter.optimistic_validation = True
    config.BoundedExecute.trusted_tests = trusted(job)
    return config


def grade_one(job):
    """Grade one submission and save its state row; return the state record as a dict."""
    from . import audit, execute, state
    from .course import nbgrader_api

    started = time.perf_counter()
    execute.FAULTS.clear()
    root = Path(job["course_root"])
    submission = root / "submitted" / job["student"] / job["assignment"]
    reason = check_submission(submission, job["notebook"])
    flags = audit.audit_submission_dir(submission, root / "source" / job["assignment"] / f"{job['notebook']}.ipynb")
    if reason is None:
        config = grading_config(job)
        if trusted(job):
            _bind_torch()
        try:
            _sandbox_for(job).prepare(config, job)
            _cap_memory(job)
        except (RuntimeError, OSError) as exc:
            reason = f"the grading sandbox could not take this submission: {exc}" if isinstance(exc, OSError) else str(exc)
        else:
            _share_gradebook_engines()
            api = nbgrader_api(root, job["db_url"], config=config)
            result = api.autograde(job["assignment"], job["student"], force=True, create=True)
            if execute.FAULTS:
                reason = execute.GRADER_FAULT + execute.FAULTS[0]
            elif not result["success"]:
                reason = failure_reason(result)
            gc.collect()  # what the notebook made this worker hold is let go before the next one
    # a grader fault is no outcome of the submission: no fingerprint, so the next run grades it again
    fingerprint = "" if execute.FAULTS else job["fingerprint"]
    record = state.Record(job["student"], fingerprint, "failed" if reason else "graded", reason or "",
                          time.perf_counter() - started, [dataclasses.asdict(f) for f in flags])
    state.save(job["db_url"], job["assignment"], record)
    return record.__dict__


def _die_with_parent():
    """Linux: have the kernel SIGKILL this worker when the grader that started it dies."""
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _serve(jobs, channel):
    for line in jobs:
        job = json.loads(line)
        channel.write(json.dumps(grade_one(job)) + "\n")


def _forked(template_pid, jobs_fd, channel_fd, box, others):
    """A worker, in the template's fresh fork: its own session (the grader kills its process group),
    killed with the template; it takes over the sandbox ``box`` that the template started for it
    (None: it makes its own at its first job), and lets go of the ``others``' lifelines; it grades
    the jobs of its pipe until the grader closes it. It never returns into the template's loop."""
    global _sandbox
    status = 1
    try:
        os.setsid()
        _die_with_parent()
        if box is not None:  # (else there are no others: the template had started none, or gave them all)
            box.adopt(others)
            _sandbox = box
        if os.getppid() != template_pid:  # the template died before the signal was set: so does this worker
            return
        _serve(os.fdopen(jobs_fd, "r"), os.fdopen(channel_fd, "w", buffering=1))
        status = 0
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            if _sandbox is not None:
                _sandbox.close()
        finally:
            sys.stderr.flush()
            os._exit(status)


def _early_sandboxes(count, job):
    """The sandboxes of the first ``count`` workers, made for ``job`` (the first in the queue), their
    zygotes started; none where one cannot start (the worker then makes its own, and says why)."""
    from . import sandbox

    boxes = []
    for _ in range(count):
        try:
            box = sandbox.Sandbox(*sandbox_limits(job), active=False)
        except (RuntimeError, OSError):
            traceback.print_exc()
            break
        try:
            box.start()
        except (RuntimeError, OSError):
            traceback.print_exc()
            box.close()
            break
        boxes.append(box)
    return boxes


def template(control_fd, in_kernel, sandboxes=()):
    """Start the ``sandboxes`` (:func:`_early_sandboxes` arguments), warm up once, then fork a worker
    for each request on the ``control_fd`` socket (a SOCK_SEQPACKET pair with the grader): a request
    carries the worker's job pipe and protocol channel, and the answer is the worker's pid and the
    scratch folder of the sandbox it took over (``-`` for none). It reaps none of its workers: until
    it ends, at the end of the run, no worker's pid can be reused, so the pid that the grader kills
    and waits for (through a pidfd) is always its own worker's."""
    control = socket.socket(fileno=control_fd)
    os.dup2(2, 1)  # anything printed to stdout lands on stderr
    boxes = _early_sandboxes(*sandboxes) if sandboxes else []
    _warm(in_kernel)
    for box in boxes:
        box.hurry()
    gc.collect()
    gc.freeze()  # the warm-up's objects: no collection in a worker touches (and copies) their pages
    while True:
        try:
            request, fds, _, _ = socket.recv_fds(control, 16, 2)
        except OSError:
            break
        if not request or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            if not request:
                break
            continue
        parent = os.getpid()
        box = boxes.pop(0) if boxes else None
        pid = os.fork()
        if pid == 0:
            control.close()
            _forked(parent, *fds, box, boxes)
        for fd in fds:
            os.close(fd)
        if box is not None:
            box.hand_over()
        control.send(f"{pid} {box.scratch.name if box is not None else '-'}".encode())


def main():
    _die_with_parent()
    args = sys.argv[2:]
    sandboxes = ()
    if "--sandboxes" in args:
        at = args.index("--sandboxes")
        sandboxes = (int(args[at + 1]), json.loads(args[at + 2]))
    template(int(sys.argv[1]), "--in-kernel" in args, sandboxes)


if __name__ == "__main__":
    main()

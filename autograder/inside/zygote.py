"""The warm kernel factory of one grading worker: ``python -P -m autograder.inside.zygote FD --lifeline L [--private] [--numpy-only] DIR...``.

Starting a kernel costs about two CPU-seconds (the interpreter, numpy, torch, IPython, ipykernel,
and the checks with their autograd warm-up), more than most notebooks spend in their cells. The
zygote pays that once per worker: it imports everything, seals the checks, and then forks one
kernel per notebook. It runs inside the worker's sandbox (:mod:`autograder.outside.sandbox`), so every
kernel it forks runs there too, under the same limits.

**Requests.** ``FD`` is the listening end of a Unix socket whose path exists only outside the
sandbox; nothing inside can reach it, and a forked kernel closes it before any notebook code
runs. Each connection carries one JSON line and is served to the end before the next:

* ``{"op": "kernel", "connection_file": PATH, "connection": {...}, "cwd": DIR, "seed": N}``: fork
  a kernel, which sets ``N`` as its checks' student seed (:func:`autograder.inside.checks.set_student_seed`),
  writes the connection info next to ``PATH`` as :data:`KERNEL_FILE` and runs in ``DIR``
  (the connection is the kernel's lifeline: the answer ``{"exit": CODE}`` comes when the
  kernel exits, and closing the connection kills the kernel);
* ``{"op": "sync"}``: the answer ``{"ready": true}`` means the zygote is loaded, nothing of any
  earlier kernel is left, and each ``DIR`` path still leads to the folder the zygote opened at
  its start (``false`` when a job renamed or replaced one: the worker then starts a new sandbox).

**Its lifeline.** ``--lifeline L`` is the reading end of a pipe whose writing end only the
zygote's worker holds. When it ends (the worker exited, crashed or was killed), the zygote kills
every kernel and process below it and exits, whoever its parent is: the run's template starts
each first worker's zygote while it warms up, and hands it to the worker it forks
(:class:`autograder.outside.sandbox.Sandbox`).

**Nothing carries over from one notebook to the next.** When a kernel's connection ends, the
zygote (a child subreaper, so that no process of the job can leave its family) kills the
kernel and every process it started, then empties each ``DIR`` (the job's folders) through the
descriptor it opened at its start, without recursion (a tree of any depth) and without following
a link. With ``--private`` (inside the sandbox's own namespaces) it also empties ``/tmp`` and
``/dev/shm`` and removes every System V IPC object. The zygote is not dumpable: a kernel, though
it runs as the same user, can neither trace it nor read or write its memory. A kernel starts
with ``/dev/null`` as its standard streams and no other inherited descriptor.
"""
import ctypes
import errno
import gc
import json
import os
import re
import selectors
import signal
import socket
import stat
import sys
import time
import traceback
from pathlib import Path

PRIVATE_DIRS = ("/tmp", "/dev/shm")
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36
IPC_RMID = 0
CLEAN_UP_SECONDS = 10.0
KERNEL_FILE = "kernel-sandbox.json"  # the kernel's own connection file, in the worker's connection folder


def _no_layout(figure, *args, **kwargs):
    """A grading kernel's ``Figure.tight_layout``: no one sees the figure (see :func:`preload`)."""


_flush_through_io_thread = None  # ipykernel's OutStream.flush, which _flush_if_written calls


def _flush_if_written(stream):
    """A grading kernel's ``OutStream.flush``: ipykernel's own when something was written since the
    last flush, else nothing. ipykernel's hands the flush to its I/O thread and waits for that thread
    to answer, even with nothing to send; it runs four times a cell (stdout and stderr, before and
    after the cell), about 0.8 of the 2.2 ms of kernel CPU that an empty cell costs. Skipping it when
    nothing is buffered changes no message and no order: everything the kernel publishes (outputs,
    then the idle status that nbclient waits for) goes out through that one thread, first in first out.
    An ipykernel without ``_buffers`` (before 7) always flushes."""
    buffers = getattr(stream, "_buffers", None)
    if buffers is None or buffers or getattr(stream, "echo", None) is not None:
        _flush_through_io_thread(stream)


def preload(numpy_only=False, private=False):
    """Import what every kernel needs, then seal the checks, before the first fork. A NumPy-only
    zygote (trusted verdicts: the checks run in the grader) has no torch to import or to seal; in
    the sandbox's namespaces (``private``) its torch is hidden, which the recording is told."""
    # Set before matplotlib is first imported, and kept by ipykernel (which would set its inline
    # backend, rendering every figure to a PNG): a graded notebook's figures are seen by nobody
    # (the feedback keeps no output of the student's code), so the grading kernels draw none.
    # matplotlib's template backend builds the figures, and show() does nothing: 0.15-0.3 s less
    # per notebook, and nothing of the figure cell's own code is skipped.
    os.environ["MPLBACKEND"] = "template"
    # A grading kernel has no debugger: ipykernel makes one only when debugpy imports, and that
    # import (pydevd, about 140 modules) cost each forked kernel 0.1 of its 0.15 CPU-seconds of start.
    sys.modules["debugpy"] = None
    import IPython.display  # noqa: F401
    import ipykernel.ipkernel  # noqa: F401
    import ipykernel.kernelapp  # noqa: F401
    import ipywidgets  # noqa: F401
    import matplotlib.pyplot  # noqa: F401
    import numpy  # noqa: F401

    # what each kernel imported at its start and first figure: 10 ms a notebook, paid here once
    import IPython.core.completerlib  # noqa: F401
    import IPython.core.debugger  # noqa: F401
    import IPython.core.oinspect  # noqa: F401
    import IPython.extensions.storemagic  # noqa: F401
    import ipykernel.debugger  # noqa: F401
    import matplotlib.backends.backend_agg  # noqa: F401
    import matplotlib.backends.backend_template  # noqa: F401
    import matplotlib_inline.backend_inline  # noqa: F401
    import tornado.platform.asyncio  # noqa: F401
    import tornado.queues  # noqa: F401

    # Since no one sees a graded figure (MPLBACKEND, above), a figure is not laid out and a widget
    # talks to no one: tight_layout() does nothing (measuring every tick label was 2/3 of a figure's
    # drawing), and each widget's comm is comm's own DummyComm, which sends nothing (a figure cell's
    # sliders opened some 40 comms, each a message that nbclient's widget mimic handled). Together
    # 3-80 ms a notebook, by unit.
    # The figure cell's own code, and the student's code that it calls, still all run.
    import comm
    import matplotlib.figure

    comm.create_comm = comm.DummyComm  # (ipykernel.ipkernel set its own at import, above)
    matplotlib.figure.Figure.tight_layout = _no_layout

    global _flush_through_io_thread
    from ipykernel.iostream import OutStream

    if _flush_through_io_thread is None:
        _flush_through_io_thread = OutStream.flush
        OutStream.flush = _flush_if_written

    import autograder.inside.checks
    import autograder.inside.recording

    autograder.inside.recording.TORCH_HIDDEN = numpy_only and private

    if not numpy_only:
        import torch  # noqa: F401

        autograder.inside.checks.seal()


def _prctl(option, value):
    if ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


# --- one kernel --------------------------------------------------------------------------------
def _kernel(request, zygote, dirs):
    """In the forked child: become the kernel the request asks for (never returns)."""
    code = 1
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # without a sandbox, nothing else ends it with the zygote
        if os.getppid() != zygote:
            return
        _prctl(PR_SET_DUMPABLE, 1)  # an ordinary process again: only the zygote stays out of reach
        os.setsid()
        Path("/proc/self/oom_score_adj").write_text("1000")  # the memory limit takes the kernel, not the zygote
        os.fchdir(dirs[request["cwd"]])
        # the connection file the worker wrote may not be readable here (it is the worker's, mode
        # 0600): the kernel writes its own copy, from what the worker's proxy read, next to it
        folder = os.path.dirname(request["connection_file"])
        fd = os.open(KERNEL_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                     dir_fd=dirs[folder])
        with os.fdopen(fd, "w") as fh:
            json.dump(request["connection"], fh)
        if request.get("seed") is not None:  # the student's hidden draws (autograder.inside.checks.student_seed)
            import autograder.inside.checks

            autograder.inside.checks.set_student_seed(request["seed"])
        # no input history, and no 0.5 ms nap before each execute_reply (ipykernel's stopgap for
        # output that trails its reply; nbclient waits for the idle status, which follows all output)
        sys.argv = ["ipykernel", "-f", os.path.join(folder, KERNEL_FILE), "--HistoryManager.enabled=False",
                    "--Kernel._execute_sleep=0"]
        from ipykernel import kernelapp

        sys.stdout.flush()
        sys.stderr.flush()
        # the kernel inherits no descriptor beyond its own: not the zygote's log, not its folders
        null = os.open(os.devnull, os.O_RDWR)
        for std in (0, 1, 2):
            os.dup2(null, std)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        # the kernel logs at WARNING (traitlets' default for an app): its logger at that level too, not
        # at DEBUG behind a WARNING handler, which made four log records a cell only to drop them
        kernelapp.launch_new_instance(logging_config={"loggers": {"IPKernelApp": {"level": "WARNING"}}})
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class Orphaned(Exception):
    """The zygote's lifeline ended: its worker is gone."""


def _watch(sel, lifeline):
    """The selector's ready objects; Orphaned when the lifeline is among them."""
    ready = {key.fileobj for key, _ in sel.select()}
    if lifeline in ready:
        raise Orphaned
    return ready


def serve_kernel(listener, conn, request, dirs, lifeline):
    """Fork the kernel, and answer when it exits; kill it when the connection ends first."""
    sys.stdout.flush()
    sys.stderr.flush()
    zygote = os.getpid()
    pid = os.fork()
    if pid == 0:
        listener.close()
        conn.close()
        _kernel(request, zygote, dirs)
    pidfd = os.pidfd_open(pid)
    try:
        with selectors.DefaultSelector() as sel:
            for fd in (conn, pidfd, lifeline):
                sel.register(fd, selectors.EVENT_READ)
            ready = _watch(sel, lifeline)
    finally:
        os.close(pidfd)
    if pidfd in ready:
        _, status = os.waitpid(pid, 0)
        _answer(conn, {"exit": os.waitstatus_to_exitcode(status)})


# --- nothing carries over ------------------------------------------------------------------------
def _children():
    me = str(os.getpid())
    kids = []
    for path in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = path.read_text()
        except OSError:
            continue
        if text[text.rindex(")") + 2:].split()[1] == me:  # the field after the state is the parent's pid
            kids.append(int(path.parent.name))
    return kids


def kill_descendants():
    """SIGKILL every process below the zygote and reap it; orphans come back to the zygote, a subreaper."""
    deadline = time.monotonic() + CLEAN_UP_SECONDS
    while kids := _children():
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of the last job survive: {kids}")


# --- removing what a job left, at any depth and with any permissions --------------------------------
def open_dir(name, dir_fd=None):
    """A directory, opened without following a link in its last component."""
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)


def _open_up(name, dir_fd):
    """Give the owner every right on the directory ``name`` (never through a link)."""
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.chmod(f"/proc/self/fd/{fd}", stat.S_IRWXU)
    finally:
        os.close(fd)


def empty_fd(top, keep=frozenset()):
    """Remove everything in the directory open as ``top``, except the names in ``keep``.

    No recursion and no link followed: each subdirectory's own subdirectories are moved up into
    ``top`` (renamed, never copied) before it is removed, so a tree of any depth costs one pass
    over its entries and a handful of descriptors. Every directory is opened up (``u+rwx``)
    first, whatever mode the job left on it.
    """
    serial = 0
    while True:
        with os.scandir(top) as it:
            entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it if e.name not in keep]
        if not entries:
            return
        for name, is_dir in entries:
            if not is_dir:
                os.unlink(name, dir_fd=top)
                continue
            _open_up(name, top)
            sub = open_dir(name, top)
            try:
                with os.scandir(sub) as it:
                    children = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
                for child, child_is_dir in children:
                    if not child_is_dir:
                        os.unlink(child, dir_fd=sub)
                        continue
                    _open_up(child, sub)  # a directory that moves needs its own write right ('..')
                    while True:
                        serial += 1
                        try:
                            os.rename(child, f".agbox-rm-{serial}", src_dir_fd=sub, dst_dir_fd=top)
                            break
                        except OSError as exc:  # the name is taken: take another
                            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                                raise
            finally:
                os.close(sub)
            os.rmdir(name, dir_fd=top)


def _mount_points():
    """Every mount point this process sees (the sandbox's binds, possibly under /tmp)."""
    lines = Path("/proc/self/mountinfo").read_bytes().splitlines()
    # the fifth field; the kernel writes a space, tab, newline or backslash in it as \ooo
    return {os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), line.split()[4])) for line in lines}


def empty(directory, keep=frozenset()):
    """Remove everything in ``directory``, whatever the job did to its permissions, except the
    mount points in ``keep`` and the folders that lead to them (whose other contents go too)."""
    fd = open_dir(directory)
    try:
        try:
            os.fchmod(fd, stat.S_IRWXU | (os.fstat(fd).st_mode & 0o7777))
        except PermissionError:  # not ours (root's on the host): no need
            pass
        kept = set()
        for name in os.listdir(fd):
            path = os.path.join(directory, name)
            if path in keep:
                kept.add(name)
            elif any(m.startswith(path + "/") for m in keep):
                kept.add(name)
                empty(path, keep)  # as deep as the path to a mount point, no deeper
        empty_fd(fd, frozenset(kept))
    finally:
        os.close(fd)


def remove_tree(path):
    """Remove ``path`` and everything under it (any depth, any permissions, links not followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return
    empty(path)
    os.rmdir(path)


def remove_ipc():
    """Remove every System V shared memory segment, message queue and semaphore set in this IPC namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    for kind, remove in (("shm", lambda i: libc.shmctl(i, IPC_RMID, None)),
                         ("msg", lambda i: libc.msgctl(i, IPC_RMID, None)),
                         ("sem", lambda i: libc.semctl(i, 0, IPC_RMID))):
        for line in Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]:
            remove(int(line.split()[1]))


def clean(dirs, private):
    """After a job: no process, file or IPC object of it is left.

    ``dirs`` maps each job folder's path to a descriptor the zygote opened at its start: the
    folders are emptied through those, so a job that renamed or replaced a path (inside the
    sandbox) cannot point the clean-up elsewhere; :func:`intact` then tells the worker.
    """
    kill_descendants()
    for fd in dirs.values():
        os.fchmod(fd, stat.S_IRWXU)
        empty_fd(fd)
    if private:
        keep = _mount_points()
        for directory in PRIVATE_DIRS:
            empty(directory, keep)
        remove_ipc()


def intact(dirs):
    """True when every job folder's path still leads to the folder the zygote opened at its start."""
    for path, fd in dirs.items():
        try:
            now, then = os.stat(path), os.fstat(fd)
        except OSError:
            return False
        if (now.st_dev, now.st_ino) != (then.st_dev, then.st_ino):
            return False
    return True


# --- the loop ------------------------------------------------------------------------------------
def _answer(conn, message):
    try:
        conn.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass  # the other end is gone: nobody is waiting for this answer


def serve(listener, dirs, private, lifeline):
    """Serve the worker's requests until the lifeline ends; then kill every process below and return."""
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(listener, selectors.EVENT_READ)
            sel.register(lifeline, selectors.EVENT_READ)
            while True:
                _watch(sel, lifeline)
                conn, _ = listener.accept()
                with conn:
                    line = conn.makefile("rb").readline()
                    request = json.loads(line) if line.strip() else {}
                    if request.get("op") == "kernel":
                        serve_kernel(listener, conn, request, dirs, lifeline)
                        clean(dirs, private)
                    elif request.get("op") == "sync":
                        _answer(conn, {"ready": intact(dirs)})
    except Orphaned:
        kill_descendants()


def main(argv):
    argv = list(argv)
    at = argv.index("--lifeline")
    lifeline = int(argv.pop(at + 1))
    argv.pop(at)
    private, numpy_only = "--private" in argv, "--numpy-only" in argv
    fd, *paths = [a for a in argv if a not in ("--private", "--numpy-only")]
    listener = socket.socket(fileno=int(fd))
    dirs = {path: open_dir(path) for path in paths}
    preload(numpy_only, private)
    gc.freeze()  # what the kernels share stays shared: the collector leaves it untouched
    _prctl(PR_SET_DUMPABLE, 0)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    serve(listener, dirs, private, lifeline)


if __name__ == "__main__":
    main(sys.argv[1:])

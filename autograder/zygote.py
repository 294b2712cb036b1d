"""The warm kernel factory of one grading worker: ``python -P -m autograder.zygote FD [--private] DIR...``.

Starting a kernel costs about two CPU-seconds (the interpreter, numpy, torch, IPython, ipykernel,
and the checks with their autograd warm-up), more than most notebooks spend in their cells. The
zygote pays that once per worker: it imports everything, seals the checks, and then forks one
kernel per notebook. It runs inside the worker's sandbox (:mod:`autograder.sandbox`), so every
kernel it forks runs there too, under the same limits.

**Requests.** ``FD`` is the listening end of a Unix socket whose path exists only outside the
sandbox; nothing inside can reach it, and a forked kernel closes it before any notebook code
runs. Each connection carries one JSON line and is served to the end before the next:

* ``{"op": "kernel", "connection_file": PATH, "cwd": DIR}``: fork a kernel (the connection is
  the kernel's lifeline: the answer ``{"exit": CODE}`` comes when the kernel exits, and closing
  the connection kills the kernel);
* ``{"op": "sync"}``: the answer ``{"ready": true}`` means the zygote is loaded and nothing of
  any earlier kernel is left.

**Nothing carries over from one notebook to the next.** When a kernel's connection ends, the
zygote (a child subreaper, so that no process of the job can leave its family) kills the
kernel and every process it started, then empties each ``DIR`` (the job's folders). With
``--private`` (inside the sandbox's own namespaces) it also empties ``/tmp`` and ``/dev/shm`` and
removes every System V IPC object. The zygote is not dumpable: a kernel, though it runs as the
same user, can neither trace it nor read or write its memory.
"""
import ctypes
import gc
import json
import os
import re
import selectors
import shutil
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


def preload():
    """Import what every kernel needs, then seal the checks, before the first fork."""
    # what ipykernel sets before any notebook code, set before matplotlib is first imported
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    import IPython.display  # noqa: F401
    import ipykernel.ipkernel  # noqa: F401
    import ipykernel.kernelapp  # noqa: F401
    import ipywidgets  # noqa: F401
    import matplotlib  # noqa: F401
    import matplotlib_inline.backend_inline  # noqa: F401
    import numpy  # noqa: F401
    import torch  # noqa: F401

    import autograder.checks

    autograder.checks.seal()


def _prctl(option, value):
    if ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


# --- one kernel --------------------------------------------------------------------------------
def _kernel(request, zygote):
    """In the forked child: become the kernel the request asks for (never returns)."""
    code = 1
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # without a sandbox, nothing else ends it with the zygote
        if os.getppid() != zygote:
            return
        _prctl(PR_SET_DUMPABLE, 1)  # an ordinary process again: only the zygote stays out of reach
        os.setsid()
        Path("/proc/self/oom_score_adj").write_text("1000")  # the memory limit takes the kernel, not the zygote
        os.chdir(request["cwd"])
        sys.argv = ["ipykernel", "-f", request["connection_file"], "--HistoryManager.enabled=False"]
        from ipykernel import kernelapp

        kernelapp.launch_new_instance()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve_kernel(listener, conn, request):
    """Fork the kernel, and answer when it exits; kill it when the connection ends first."""
    sys.stdout.flush()
    sys.stderr.flush()
    zygote = os.getpid()
    pid = os.fork()
    if pid == 0:
        listener.close()
        conn.close()
        _kernel(request, zygote)
    pidfd = os.pidfd_open(pid)
    with selectors.DefaultSelector() as sel:
        sel.register(conn, selectors.EVENT_READ)
        sel.register(pidfd, selectors.EVENT_READ)
        ready = {key.fileobj for key, _ in sel.select()}
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


def _writable(function, path, exc_info):
    """rmtree's error handler: a folder the job made unreadable or read-only is opened up again."""
    if not isinstance(exc_info[1], PermissionError):
        raise exc_info[1]
    parent = os.path.dirname(path)
    os.chmod(parent, os.stat(parent).st_mode | stat.S_IRWXU)
    if os.path.isdir(path) and not os.path.islink(path):
        os.chmod(path, stat.S_IRWXU)
        shutil.rmtree(path, onerror=_writable)
    else:
        function(path)


def _mount_points():
    """Every mount point this process sees (the sandbox's binds, possibly under /tmp)."""
    lines = Path("/proc/self/mountinfo").read_bytes().splitlines()
    # the fifth field; the kernel writes a space, tab, newline or backslash in it as \ooo
    return {os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), line.split()[4])) for line in lines}


def empty(directory, keep=frozenset()):
    """Remove everything in ``directory``, whatever the job did to its permissions, except the
    mount points in ``keep`` and the folders that lead to them."""
    for entry in os.scandir(directory):
        if entry.path in keep:
            continue
        if any(m.startswith(entry.path + "/") for m in keep):
            empty(entry.path, keep)
        elif entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, onerror=_writable)
        else:
            os.unlink(entry.path)


def remove_ipc():
    """Remove every System V shared memory segment, message queue and semaphore set in this IPC namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    for kind, remove in (("shm", lambda i: libc.shmctl(i, IPC_RMID, None)),
                         ("msg", lambda i: libc.msgctl(i, IPC_RMID, None)),
                         ("sem", lambda i: libc.semctl(i, 0, IPC_RMID))):
        for line in Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]:
            remove(int(line.split()[1]))


def clean(dirs, private):
    """After a job: no process, file or IPC object of it is left."""
    kill_descendants()
    keep = _mount_points()
    for directory in dirs + (list(PRIVATE_DIRS) if private else []):
        empty(directory, keep)
    if private:
        remove_ipc()


# --- the loop ------------------------------------------------------------------------------------
def _answer(conn, message):
    try:
        conn.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass  # the other end is gone: nobody is waiting for this answer


def serve(listener, dirs, private):
    while True:
        conn, _ = listener.accept()
        with conn:
            line = conn.makefile("rb").readline()
            request = json.loads(line) if line.strip() else {}
            if request.get("op") == "kernel":
                serve_kernel(listener, conn, request)
                clean(dirs, private)
            elif request.get("op") == "sync":
                _answer(conn, {"ready": True})


def main(argv):
    private = "--private" in argv
    fd, *dirs = [a for a in argv if a != "--private"]
    listener = socket.socket(fileno=int(fd))
    preload()
    gc.freeze()  # what the kernels share stays shared: the collector leaves it untouched
    _prctl(PR_SET_DUMPABLE, 0)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    serve(listener, dirs, private)


if __name__ == "__main__":
    main(sys.argv[1:])

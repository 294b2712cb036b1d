"""The sandbox a worker's kernels run in, and the warm kernel factory inside it.

Each grading worker owns one :class:`Sandbox` for its life. The sandbox holds a zygote
(:mod:`autograder.inside.zygote`): a Python process that has imported numpy, torch, IPython,
ipykernel and the sealed checks once, and forks a fresh kernel for each notebook, so no
notebook pays that start-up again. Jobs of one worker run one after the other; between two,
the zygote kills every process of the finished job and empties every place it could write
(see :mod:`autograder.inside.zygote`), and the worker only then puts the next submission in.

The zygote is started by the launcher, :func:`launch` (``python -m autograder.outside.sandbox``), which,
outside the sandbox:

* joins fresh cgroups (v1 ``pids`` and ``memory``, children of the worker's own): at most
  ``nproc`` processes and threads, and ``memory_mb`` of memory, for the zygote, the kernel and
  everything it starts;
* sets rlimits: an address space of ``memory_mb`` per process (a big allocation raises
  ``MemoryError`` in the cell instead of waking the OOM killer), no file larger than that, no
  core dumps, and ``RLIMIT_NPROC`` where there is no cgroup;
* when the worker is root, becomes the sandbox user (:func:`sandbox_user`, ``nobody`` unless
  ``$AUTOGRADER_SANDBOX_USER`` names another unprivileged user);
* execs bubblewrap (:func:`bwrap_command`): user, pid, network, IPC and UTS namespaces (uid
  65534 inside, mapped to the sandbox user outside, or to the worker's own uid when it is not
  root), the zygote as pid 1, no capabilities, no network, no new user namespaces, and a
  read-only file system built from nothing but ``/usr``, a few files of ``/etc``, the Python
  installation, the venv and the ``autograder`` package (not ``engine_ref/``, nor the rest of
  the repository), plus a tmpfs ``/tmp`` and three folders of
  the worker's scratch folder, the only writable places: ``work/`` (the kernel's working
  directory: a copy of the submission, minus the notebook being graded, which nbgrader fills
  with hidden tests), ``home/`` and ``conn/`` (the kernel's ZeroMQ ``ipc`` sockets and the checks' channel). The course
  folder, the gradebook, other students' files and the home folder do not exist inside.

The zygote and its kernels run with ``python -P``, so nothing in the submission folder can
stand in for numpy, torch or the checks, and the checks are sealed before any notebook code
runs. nbgrader starts a kernel through a kernelspec whose command (:data:`PROXY`) asks the
zygote for one over a Unix socket that exists only outside the sandbox, and lives as long as
the kernel does. When a worker dies, its sandbox goes down with every process in the pid
namespace (the zygote's lifeline, a pipe that only the worker holds open, ends; and
``--die-with-parent`` when the worker started it), and the grader removes what the worker left
(:func:`clean_up`).

**Started early.** A worker's first zygote costs 1.2-1.75 CPU-seconds to load, which would come
after the run's template has warmed up (2.5 CPU-seconds on one core, the other idle). So the
template starts the first workers' sandboxes before its warm-up (:meth:`Sandbox.start`; as root,
at a lower priority until the warm-up ends, :meth:`Sandbox.hurry`), and each worker it forks takes
one over (:meth:`Sandbox.adopt`): the zygote, a child of the template, is then watched and killed
through a pidfd, and its lifeline's writing end is the worker's alone.

Where bubblewrap is missing or cannot create namespaces, the zygote runs unconfined under the
rlimits alone; :func:`preflight`, at the start of each ``autograder grade`` run, warns loudly.
docs/grading-security.md is the threat model.
"""
import ctypes
import errno
import hashlib
import importlib.util
import json
import os
import pwd
import resource
import shutil
import select
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from contextlib import suppress
from functools import cache
from pathlib import Path

from autograder.inside.zygote import empty_fd, open_dir, remove_tree

BWRAP = "/usr/bin/bwrap"
KERNEL_NAME = "autograder-sandbox"
CGROUP_ROOT = Path("/sys/fs/cgroup")
# What the kernel sees of /etc: the dynamic loader's cache, names of users and groups, time zone, fonts.
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group", "nsswitch.conf", "fonts")
# One thread per numeric library: workers already use every core, and a thread counts
# against the process limit.
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
NOBODY = "65534"
# The kernel process: ``-P`` keeps the submission folder off sys.path (a numpy.py or an
# autograder/ shipped with the notebook is never imported), and the checks are imported and
# sealed before any notebook code runs (see autograder.inside.checks.seal).
# The kernelspec's command, run by jupyter_client outside the sandbox: ask the zygote for a
# kernel (argv: socket, connection file, working directory) and exit with it.
# It sends what the connection file holds: a sandbox user cannot read the worker's file.
# nbgrader appends ``Execute.extra_arguments`` to the command: ``--seed=N``, the job's student
# seed (:func:`seed_for`), which the zygote sets in the kernel's checks.
PROXY = ("import json, socket, sys\n"
         "s = socket.socket(socket.AF_UNIX)\n"
         "s.connect(sys.argv[1])\n"
         "info = json.load(open(sys.argv[2]))\n"
         "seed = [a[len('--seed='):] for a in sys.argv[4:] if a.startswith('--seed=')]\n"
         "s.sendall(json.dumps({'op': 'kernel', 'connection_file': sys.argv[2], 'connection': info,\n"
         "                      'cwd': sys.argv[3], 'seed': int(seed[-1]) if seed else None}).encode() + b'\\n')\n"
         "answer = s.makefile('rb').readline()\n"
         "sys.exit(json.loads(answer)['exit'] if answer else 1)\n")
# The zygote's folders in the worker's scratch folder, all writable inside the sandbox.
JOB_DIRS = ("conn", "work", "home")
ZYGOTE_START_SECONDS = 300.0
EARLY_NICE = 10  # the priority of a zygote that loads while the template warms up (see Sandbox.start)
MB = 1 << 20
PREFIX = "agbox"  # scratch folders and cgroups: agbox-<worker pid>-<random>
# Who the sandbox runs as when the worker is root: a real unprivileged user of this machine.
USER_VARIABLE = "AUTOGRADER_SANDBOX_USER"
DEFAULT_USER = "nobody"
# bwrap options that bind a host path
BIND_OPTIONS = ("--bind", "--ro-bind", "--ro-bind-try")
CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE = 0x20000, 4096, 16384, 1 << 18


def seed_for(assignment_id, student):
    """The student seed of one submission: a stable hash of the assignment and student ids, so a
    regrade draws the same hidden cases and two students draw different ones (see
    :func:`autograder.inside.checks.student_seed`)."""
    digest = hashlib.sha256(f"{assignment_id}\0{student}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


class SandboxWarning(UserWarning):
    """Submissions are graded with weaker isolation than this module is built for."""


# --- what this machine offers ----------------------------------------------------------
@cache
def sandbox_user():
    """``(uid, gid)`` the sandbox runs as when the worker is root, else None (the worker's own).

    The user named by ``$AUTOGRADER_SANDBOX_USER`` (default ``nobody``); a dedicated system user
    (``useradd --system --no-create-home autograder-sandbox``) shares its uid with nothing else.
    """
    if os.geteuid() != 0:
        return None
    entry = pwd.getpwnam(os.environ.get(USER_VARIABLE) or DEFAULT_USER)
    if entry.pw_uid == 0:
        raise RuntimeError(f"${USER_VARIABLE} names a root user ({entry.pw_name}): the sandbox must run unprivileged")
    return entry.pw_uid, entry.pw_gid


@cache
def bwrap_works():
    """True when bubblewrap is installed and can build the namespaces the sandbox uses (as the
    sandbox user, when the worker is root)."""
    if not os.access(BWRAP, os.X_OK):
        return False
    probe = [BWRAP, "--unshare-user", "--unshare-pid", "--as-pid-1", "--unshare-net", "--disable-userns",
             "--ro-bind", "/usr", "/usr", *_system_links(), "/usr/bin/true"]
    user = sandbox_user()
    drop = dict(user=user[0], group=user[1], extra_groups=[]) if user else {}
    return subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True, **drop).returncode == 0


def _own_cgroup(controller):
    """The v1 cgroup directory this process is in for ``controller``, or None."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            directory = CGROUP_ROOT / controller / path.lstrip("/")
            return directory if os.access(directory, os.W_OK) else None
    return None


@cache
def cgroups_work():
    """True when this process may create v1 ``pids`` and ``memory`` cgroups below its own."""
    return all(_own_cgroup(c) is not None for c in ("pids", "memory"))


def weaknesses():
    """What is missing from the full sandbox on this machine, one sentence each."""
    out = []
    if not bwrap_works():
        out.append(f"{BWRAP} is missing or cannot create namespaces: kernels run WITHOUT a sandbox, with "
                   "the network and every file this user can read (install the Debian package bubblewrap)")
    if not cgroups_work():
        out.append("no writable cgroup v1 pids/memory hierarchy: the process limit falls back to RLIMIT_NPROC "
                   "(which root ignores) and only each process's address space is limited")
    return out


@cache
def scratch_base():
    """The folder that holds the sandboxes' scratch folders: the system's temporary folder, or
    ``/tmp`` when the sandbox user cannot pass through the folders that lead to it (a ``$TMPDIR``
    private to root): the sandbox's binds would fail for every notebook."""
    base, user = tempfile.gettempdir(), sandbox_user() if bwrap_works() else None
    for folder in (base, "/tmp"):
        if user is None or _reachable(folder, *user):
            return Path(folder)
    raise RuntimeError(f"the grading sandbox runs as uid {user[0]}, which cannot reach {base} or /tmp: "
                       "set TMPDIR to a folder that every user may pass through (chmod o+x on each folder above it)")


def preflight():
    """Before a grading run: clear what the workers of killed runs left behind, and warn (once per
    run) when submissions cannot be fully contained here."""
    for scratch in scratch_base().glob(f"{PREFIX}-*-*"):
        worker_pid = scratch.name.split("-")[1]
        if worker_pid.isdigit() and not Path(f"/proc/{worker_pid}").exists():
            clean_up(worker_pid)
    for text in weaknesses():
        warnings.warn(f"autograder sandbox: {text}.", SandboxWarning, stacklevel=2)


# --- one worker's sandbox -------------------------------------------------------------------
def _make_cgroups(name, nproc, memory_mb):
    """A fresh v1 ``pids`` and ``memory`` cgroup below the worker's own; their ``cgroup.procs`` files."""
    procs = []
    for controller, limits in (("pids", {"pids.max": nproc}), ("memory", {"memory.limit_in_bytes": memory_mb * MB})):
        directory = _own_cgroup(controller) / name
        directory.mkdir()
        for filename, value in limits.items():
            (directory / filename).write_text(str(value))
        procs.append(str(directory / "cgroup.procs"))
    return procs


def _remove_cgroup(directory, wait=5.0):
    """Kill what is left in a cgroup, then delete it (possible once its last task is reaped)."""
    deadline = time.monotonic() + wait
    while True:
        for pid in (directory / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            directory.rmdir()
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _worker_cgroups(pattern):
    for controller in ("pids", "memory"):
        parent = _own_cgroup(controller)
        yield from parent.glob(pattern) if parent else ()


def clean_up(worker_pid, scratch=None):
    """Remove what a worker left behind: called by the grader after it killed the worker (and with
    the template's pid, at the end of a run). ``scratch`` names the folder of a sandbox that the
    worker took over from the template (:meth:`Sandbox.adopt`)."""
    for pattern in [f"{PREFIX}-{worker_pid}-*"] + ([scratch] if scratch and scratch.startswith(f"{PREFIX}-")
                                                   and "/" not in scratch else []):
        for directory in _worker_cgroups(pattern):
            _remove_cgroup(directory)
        for folder in scratch_base().glob(pattern):
            try:
                remove_tree(folder)
            except FileNotFoundError:  # a stale folder that another run's clean-up is removing too
                continue
            except OSError as exc:  # never a reason to stop grading: say so, and go on
                warnings.warn(f"autograder sandbox: could not remove {folder}: {exc}", SandboxWarning, stacklevel=2)


def _system_links():
    """``/bin``, ``/lib``... as on the host: symlinks into /usr on merged-/usr systems, else read-only binds."""
    args = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _python_dirs():
    """The directories a kernel needs read-only: the interpreter, the venv, the autograder package."""
    package = Path(__file__).resolve().parent.parent
    dirs = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), package}
    return sorted(str(d) for d in dirs)


def hidden_packages():
    """The installed packages that a NumPy-only kernel must not import: torch and its kin."""
    found = []
    for name in ("torch", "functorch", "torchgen"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            found += [str(Path(p).resolve()) for p in spec.submodule_search_locations]
    return found


def bwrap_command(writable, workdir, argv, scratch=None, hide=()):
    """The bubblewrap command line that runs ``argv`` in ``workdir`` with only ``writable`` folders writable.

    ``scratch``, the folder that holds the ``writable`` ones, becomes a read-only tmpfs inside, so
    that no job can rename or replace the paths that lead to its folders. Each folder of ``hide``
    is an empty read-only tmpfs inside (a package that cannot be imported there). ``argv`` runs as pid 1
    (``--as-pid-1``): no bubblewrap process inside holds the descriptors it was started with.
    """
    args = [BWRAP, "--unshare-user", "--uid", NOBODY, "--gid", NOBODY, "--disable-userns",
            "--unshare-pid", "--as-pid-1", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--cap-drop", "ALL",
            "--ro-bind", "/usr", "/usr", *_system_links()]
    for name in ETC_FILES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    # /tmp first: the binds below may live under /tmp (a checkout or a course there) and must
    # land on top of the tmpfs, not under it
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for directory in _python_dirs():
        args += ["--ro-bind", directory, directory]
    for directory in hide:
        args += ["--tmpfs", directory, "--remount-ro", directory]
    args += ["--tmpfs", str(scratch)] if scratch else []
    for directory in writable:
        args += ["--bind", str(directory), str(directory)]
    args += ["--remount-ro", str(scratch)] if scratch else []
    # the folders made to hold the binds (the scratch folder's, the course's, /root) stay empty
    return args + ["--chdir", str(workdir), "--remount-ro", "/", "--", *argv]


def _font_cache():
    """matplotlib's cache folder of this user, whose font list (when built) saves a notebook 0.2 s."""
    return os.environ.get("MPLCONFIGDIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "matplotlib"


# --- a job's files: written by the worker, never through a link -----------------------------
def _create(name, dir_fd, owner):
    """A new file ``name`` in ``dir_fd``, opened for writing: never an existing file, never a link."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    if owner:
        os.fchown(fd, *owner)
    return fd


def _make_dir(name, dir_fd, owner):
    """The directory ``name`` in ``dir_fd``, made if missing (whatever else had that name goes), opened."""
    try:
        return open_dir(name, dir_fd)
    except FileNotFoundError:
        pass
    except OSError:  # a file or a link where a folder should be
        _remove_entry(name, dir_fd)
    os.mkdir(name, 0o700, dir_fd=dir_fd)
    fd = open_dir(name, dir_fd)
    if owner:
        os.fchown(fd, *owner)
    return fd


def _remove_entry(name, dir_fd):
    try:
        os.unlink(name, dir_fd=dir_fd)
    except IsADirectoryError:
        fd = open_dir(name, dir_fd)
        try:
            empty_fd(fd)
        finally:
            os.close(fd)
        os.rmdir(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def copy_into(source, dir_fd, owner=None, skip=lambda name: False):
    """Copy the folder ``source`` into the folder open as ``dir_fd``, over what is there.

    Nothing is followed: links in ``source`` are skipped, and on the other side every name is
    opened relative to its parent's descriptor with ``O_NOFOLLOW``, every file created anew
    (``O_EXCL``, after removing what had its name) and, when ``owner`` is given, given to it.
    ``skip(name)`` leaves out top-level names. Iterative, so a deep tree cannot exhaust the stack.
    """
    stack = [(os.scandir(source), os.dup(dir_fd))]
    try:
        while stack:
            entries, dst = stack[-1]
            entry = next(entries, None)
            if entry is None:
                entries.close()
                os.close(dst)
                stack.pop()
            elif entry.is_symlink() or (len(stack) == 1 and skip(entry.name)):
                continue
            elif entry.is_dir(follow_symlinks=False):
                sub = _make_dir(entry.name, dst, owner)
                stack.append((os.scandir(entry.path), sub))
            elif entry.is_file(follow_symlinks=False):
                _remove_entry(entry.name, dst)
                with open(os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as fin, \
                        open(_create(entry.name, dst, owner), "wb") as fout:
                    shutil.copyfileobj(fin, fout)
    finally:
        for entries, dst in stack:
            entries.close()
            os.close(dst)


class Sandbox:
    """One worker's sandbox and the zygote in it (see the module docstring).

    ``with Sandbox(memory_mb, nproc) as box:`` makes the scratch folder (its path is short:
    ``ipc`` socket paths must stay under 108 bytes), the cgroups and the kernelspec, and sets
    ``JUPYTER_PATH`` in this process's environment so that jupyter finds the kernelspec; the
    zygote starts with the first job. The block's end stops the zygote and removes all that.
    ``Sandbox(..., active=False)`` leaves the environment alone: the run's template makes the first
    workers' sandboxes so, starts them, and each worker adopts one (:meth:`adopt`).

    The job folders (``conn/``, ``work/``, ``home/``) belong to the sandbox user; the scratch
    folder, ``ctl/`` (the zygote's socket and log) and ``kernels/`` to the worker. The worker
    writes into a job folder only after checking that it is still the folder it made (same
    inode, same owner) and empty, and only through descriptors, never following a link.
    """

    def __init__(self, memory_mb, nproc, numpy_only=False, active=True):
        self.limits = (memory_mb, nproc, numpy_only)
        self.numpy_only = numpy_only  # trusted verdicts: the kernel gets NumPy, not torch
        self.owner = sandbox_user() if bwrap_works() else None
        self.scratch = Path(tempfile.mkdtemp(prefix=f"{PREFIX}-{os.getpid()}-", dir=scratch_base()))
        self.dirs = {name: self.scratch / name for name in JOB_DIRS}
        for directory in [*self.dirs.values(), self.scratch / "ctl", self.scratch / "stage"]:
            directory.mkdir(mode=0o700)
        if self.owner:
            self.scratch.chmod(0o711)  # the sandbox user may pass through to its folders, not list them
            for directory in self.dirs.values():
                os.chown(directory, *self.owner, follow_symlinks=False)
        self.identity = {name: self._identity(os.lstat(d)) for name, d in self.dirs.items()}
        self.socket = self.scratch / "ctl" / "zygote.sock"  # outside the sandbox: not bound into it
        self.log = self.scratch / "ctl" / "zygote.log"  # the zygote's output: never the worker's own log
        self.cgroup_procs = _make_cgroups(self.scratch.name, nproc, memory_mb) if cgroups_work() else []
        spec_dir = self.scratch / "kernels" / KERNEL_NAME
        spec_dir.mkdir(parents=True)
        spec = {"argv": [sys.executable, "-I", "-S", "-c", PROXY, str(self.socket), "{connection_file}",
                         str(self.dirs["work"])],
                "display_name": "Python 3 (autograder sandbox)", "language": "python",
                "interrupt_mode": "message", "metadata": {"debugger": False}}
        (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
        self.zygote = None
        self.lifeline = None  # the writing end of the zygote's lifeline
        self.active = False
        if active:
            self._activate()

    def _activate(self):
        """Point jupyter at this sandbox's kernelspec (``JUPYTER_PATH``, in this process's environment)."""
        self._previous_path = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(self.scratch), self._previous_path]))
        self.active = True

    def start(self):
        """Start the zygote now, ahead of the first job (the template, for a worker it will fork).

        Where this process may raise a priority again (root), the zygote loads at a lower one, so
        that the template's warm-up, which the run waits for, keeps its core; :meth:`hurry` gives it
        back the normal priority once the warm-up is done."""
        self._start(nice=EARLY_NICE if os.geteuid() == 0 else 0)

    def hurry(self):
        """The normal priority for the zygote started by :meth:`start` and every process below it."""
        if self.zygote is None or os.geteuid() != 0:
            return
        import psutil

        try:
            tree = [psutil.Process(self.zygote.pid)]
            tree += tree[0].children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for process in tree:
            with suppress(psutil.NoSuchProcess):
                process.nice(0)

    def adopt(self, others=()):
        """Take this sandbox over in a fork of the process that started its zygote (the template's
        worker): the zygote, not this process's child, is watched and killed through a pidfd, and
        the lifelines of the ``others`` (sandboxes the fork also inherited, for later workers) are
        closed here, so that only their own workers hold them."""
        for other in others:
            os.close(other.lifeline)
        self.zygote = _Adopted(self.zygote.pid)
        self._activate()

    def hand_over(self):
        """In the template, once the worker that adopts this sandbox is forked: let go of the lifeline."""
        os.close(self.lifeline)
        self.lifeline = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _identity(self, st):
        return st.st_dev, st.st_ino, st.st_uid, stat.S_IFMT(st.st_mode)

    def _open_job_dir(self, name):
        """A job folder, opened only if it is still the one this sandbox made; else RuntimeError."""
        scratch = open_dir(self.scratch)
        try:
            fd = open_dir(name, scratch)
        except OSError as exc:
            raise RuntimeError(f"the sandbox's folder {name}/ was replaced ({exc.strerror})") from None
        finally:
            os.close(scratch)
        if self._identity(os.fstat(fd)) != self.identity[name]:
            os.close(fd)
            raise RuntimeError(f"the sandbox's folder {name}/ is not the one it made")
        return fd

    def _pristine(self):
        """True when each job folder is the one this sandbox made, and ``conn/`` and ``work/`` are empty."""
        try:
            for name in JOB_DIRS:
                fd = self._open_job_dir(name)
                try:
                    if name != "home" and os.listdir(fd):
                        return False
                finally:
                    os.close(fd)
        except RuntimeError:
            return False
        return True

    def _environment(self):
        home = self.dirs["home"]
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(home), "TMPDIR": "/tmp",
               "MPLCONFIGDIR": str(home / "matplotlib"), "LANG": "C.UTF-8",
               # the kernel's parent is the zygote: ipykernel must not poll for it
               "JPY_PARENT_PID": "1"}
        return env | dict.fromkeys(THREAD_VARS, "1")

    def _home(self, fonts=False):
        """The kernel's home: matplotlib's folder, with this user's font list for a starting zygote
        (which loads it once; the kernels it forks have it in memory)."""
        home = self._open_job_dir("home")
        try:
            mpl = _make_dir("matplotlib", home, self.owner)
            try:
                if fonts and os.path.isdir(_font_cache()):
                    copy_into(_font_cache(), mpl, self.owner, skip=lambda name: not name.startswith("fontlist-v"))
            finally:
                os.close(mpl)
        finally:
            os.close(home)

    def _start(self, nice=0):
        self._stop()
        for name in JOB_DIRS:  # what a zygote that died in its clean-up left
            fd = self._open_job_dir(name)
            try:
                empty_fd(fd)
            finally:
                os.close(fd)
        self._home(fonts=True)
        self.socket.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX)
        with listener, open(self.log, "wb") as log:  # a fresh log for each zygote
            listener.bind(str(self.socket))
            listener.listen()
            private = bwrap_works()
            lifeline, self.lifeline = os.pipe()
            zygote = [sys.executable, "-P", "-m", "autograder.inside.zygote", str(listener.fileno()),
                      "--lifeline", str(lifeline),
                      *(["--private"] if private else []), *(["--numpy-only"] if self.numpy_only else []),
                      *map(str, self.dirs.values())]
            command = (bwrap_command(self.dirs.values(), self.dirs["work"], zygote, scratch=self.scratch,
                                     hide=hidden_packages() if self.numpy_only else ()) if private else zygote)
            memory_mb, nproc, _ = self.limits
            launcher = [sys.executable, "-m", "autograder.outside.sandbox", "--memory-mb", str(memory_mb)]
            launcher += ["--nproc", str(nproc)] if not self.cgroup_procs else []
            launcher += ["--nice", str(nice)] if nice else []
            if self.owner:
                launcher += ["--user", f"{self.owner[0]}:{self.owner[1]}", "--stage", str(self.scratch / "stage")]
            for procs in self.cgroup_procs:
                launcher += ["--cgroup", procs]
            try:
                self.zygote = subprocess.Popen([*launcher, "--", *command], pass_fds=[listener.fileno(), lifeline],
                                               stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                               env=self._environment(), cwd=self.dirs["work"])
            finally:
                os.close(lifeline)

    def _stop(self):
        if self.zygote is not None:
            self.zygote.kill()
            self.zygote.wait()
            self.zygote = None
        if self.lifeline is not None:
            os.close(self.lifeline)
            self.lifeline = None
        for procs in self.cgroup_procs:
            for pid in Path(procs).read_text().split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def _sync(self, timeout):
        """True when the zygote answers that it is loaded, the last job left nothing behind, and
        its folders are where they were."""
        try:
            with socket.socket(socket.AF_UNIX) as conn:
                conn.settimeout(timeout)
                conn.connect(str(self.socket))
                conn.sendall(b'{"op": "sync"}\n')
                return json.loads(conn.makefile("rb").readline() or b"{}").get("ready", False)
        except (OSError, ValueError):
            return False

    def ready(self):
        """Wait until the zygote is ready for the next job, starting it (again) when it is not
        running, or when the last job left anything in the folders the worker writes to."""
        if (self.zygote is None or self.zygote.poll() is not None or not self._sync(ZYGOTE_START_SECONDS)
                or not self._pristine()):
            self._start()
            if not self._sync(ZYGOTE_START_SECONDS) or not self._pristine():
                self._stop()
                tail = self.log.read_bytes()[-4000:].decode(errors="replace") if self.log.exists() else ""
                sys.stderr.write(f"the sandbox's kernel factory did not start; its output:\n{tail}\n")
                raise RuntimeError("the grading sandbox could not start its kernel factory (see the worker log)")
        self._home()

    def prepare(self, config, job):
        """Put ``job``'s files in the kernel's working folder, and point nbgrader's ``config`` at the zygote.

        The files are the student's submitted files, then the assignment's own non-notebook files
        over them, as nbgrader copies them; but not the notebook being graded (nbgrader's copy
        has the hidden tests), and no symbolic links (a link to the gradebook must not be followed).
        They are written with :func:`copy_into` into the ``work/`` folder that :meth:`ready` found
        empty and unchanged.
        Sets ``Autograde.sanitize_preprocessors`` and ``.autograde_preprocessors`` (with
        :class:`autograder.outside.execute.ResetCellMetadata`, :class:`autograder.outside.execute.BoundedExecute` and
        :mod:`autograder.outside.gradebook`'s), ``ResetCellMetadata.source_notebook`` and ``BoundedExecute.source_notebook``,
        ``Execute.kernel_name``, ``.extra_arguments`` (the student seed, :func:`seed_for`) and
        ``.shutdown_kernel``, ``KernelManager.transport``, ``.connection_file`` and ``.ip``, and
        ``AsyncKernelManager.client_class`` (:class:`autograder.outside.execute.PromptKernelClient`) and
        ``Execute.kernel_manager_class`` (:class:`autograder.outside.execute.PromptKernelManager`).
        """
        from .execute import AUTOGRADE_PREPROCESSORS, SANITIZE_PREPROCESSORS  # (the worker's: never the grader's)

        self.ready()
        root, notebook = Path(job["course_root"]), f"{job['notebook']}.ipynb"
        work = self._open_job_dir("work")
        try:
            copy_into(root / "submitted" / job["student"] / job["assignment"], work, self.owner,
                      skip=lambda name: name == notebook)
            copy_into(root / "source" / job["assignment"], work, self.owner, skip=lambda name: name.endswith(".ipynb"))
        finally:
            os.close(work)
        config.Autograde.sanitize_preprocessors = SANITIZE_PREPROCESSORS
        config.Autograde.autograde_preprocessors = AUTOGRADE_PREPROCESSORS
        config.ResetCellMetadata.source_notebook = str(root / "source" / job["assignment"] / notebook)
        config.BoundedExecute.source_notebook = config.ResetCellMetadata.source_notebook
        config.Execute.kernel_name = KERNEL_NAME
        config.Execute.extra_arguments = [f"--seed={seed_for(job['assignment'], job['student'])}"]
        config.Execute.shutdown_kernel = "immediate"  # the zygote stops what is left of the kernel
        config.KernelManager.transport = "ipc"
        config.AsyncKernelManager.client_class = "autograder.outside.execute.PromptKernelClient"
        config.Execute.kernel_manager_class = "autograder.outside.execute.PromptKernelManager"
        config.KernelManager.connection_file = str(self.dirs["conn"] / "kernel.json")
        config.KernelManager.ip = str(self.dirs["conn"] / "kernel-ipc")

    def stop(self):
        """Kill the zygote and every kernel now (a notebook past its time limit); the next job starts
        a fresh zygote."""
        self._stop()

    def close(self):
        self._stop()
        if self.active:
            if self._previous_path is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = self._previous_path
        for procs in self.cgroup_procs:
            _remove_cgroup(Path(procs).parent)
        remove_tree(self.scratch)


class _Adopted:
    """A zygote that the template started, in the worker that took its sandbox over: what
    :class:`Sandbox` uses of a ``Popen`` (``pid``, ``poll``, ``kill``, ``wait``), through a pidfd,
    since the process is not this one's child (the template reaps it)."""

    def __init__(self, pid):
        self.pid, self._pidfd = pid, os.pidfd_open(pid)
        self.returncode = None

    def poll(self):
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            self._ended()
        return self.returncode

    def kill(self):
        if self.returncode is None:
            with suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def wait(self):
        if self.returncode is None:
            select.select([self._pidfd], [], [])
            self._ended()
        return self.returncode

    def _ended(self):
        os.close(self._pidfd)
        self.returncode = -1


# --- the launcher: python -m autograder.outside.sandbox [limits] -- command ------------------------
def _reachable(path, uid, gid):
    """True when ``uid:gid`` (without other groups) may pass through every folder that leads to ``path``."""
    for folder in [*reversed(Path(path).parents), Path(path)]:
        st = os.stat(folder)
        if not stat.S_ISDIR(st.st_mode):
            continue
        bit = 0o100 if st.st_uid == uid else 0o010 if st.st_gid == gid else 0o001
        if not st.st_mode & bit:
            return False
    return True


def _mount(source, target, fstype, flags, data=None):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(*(None if v is None else os.fsencode(v) for v in (source, target, fstype)), flags,
                  None if data is None else data.encode()) != 0:
        raise OSError(ctypes.get_errno(), f"mount {source} on {target} failed")


def _stage_unreachable(command, stage, user):
    """``command`` (a bwrap command line), with each bind source that ``user`` cannot reach (a Python
    installation under ``/root``) bound first, in this process's own mount namespace (so as root,
    before the launcher drops its rights), on a folder of ``stage`` that it can reach."""
    end = command.index("--")  # bwrap's own: what follows is the program it runs
    out, i, staged = list(command), 0, 0
    while i < end:
        if command[i] in BIND_OPTIONS and os.path.isdir(command[i + 1]) and not _reachable(command[i + 1], *user):
            if not staged:
                libc = ctypes.CDLL(None, use_errno=True)
                if libc.unshare(CLONE_NEWNS) != 0:
                    raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
                _mount(None, "/", None, MS_REC | MS_PRIVATE)
                _mount("tmpfs", stage, "tmpfs", 0, "mode=0755,size=64k")
            target = os.path.join(stage, str(staged))
            os.mkdir(target, 0o755)
            _mount(command[i + 1], target, None, MS_BIND | MS_REC)
            out[i + 1] = target
            staged += 1
        i += 1
    return out


def launch(argv):
    """Join the sandbox's cgroups, set the rlimits, become the sandbox user (``--user UID:GID``,
    when the worker is root; bind sources it cannot reach are staged on ``--stage DIR`` first),
    and exec ``command`` (runs before the sandbox)."""
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1:]
    limits = {resource.RLIMIT_CORE: 0}
    user = stage = None
    for flag, value in zip(options[::2], options[1::2]):
        if flag == "--cgroup":
            Path(value).write_text(str(os.getpid()))
        elif flag == "--memory-mb":
            limits[resource.RLIMIT_AS] = limits[resource.RLIMIT_FSIZE] = int(value) * MB
        elif flag == "--nproc":
            limits[resource.RLIMIT_NPROC] = int(value)
        elif flag == "--user":
            user = tuple(int(v) for v in value.split(":"))
        elif flag == "--stage":
            stage = value
        elif flag == "--nice":
            os.nice(int(value))
    for kind, value in limits.items():
        resource.setrlimit(kind, (value, value))
    if user:
        if command[0] == BWRAP and stage:
            command = _stage_unreachable(command, stage, user)
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])
    os.execv(command[0], command)


if __name__ == "__main__":
    launch(sys.argv[1:])

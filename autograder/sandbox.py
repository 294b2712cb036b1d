"""The sandbox a worker's kernels run in, and the warm kernel factory inside it.

Each grading worker owns one :class:`Sandbox` for its life. The sandbox holds a zygote
(:mod:`autograder.zygote`): a Python process that has imported numpy, torch, IPython,
ipykernel and the sealed checks once, and forks a fresh kernel for each notebook, so no
notebook pays that start-up again. Jobs of one worker run one after the other; between two,
the zygote kills every process of the finished job and empties every place it could write
(see :mod:`autograder.zygote`), and the worker only then puts the next submission in.

The zygote is started by the launcher, :func:`launch` (``python -m autograder.sandbox``), which,
outside the sandbox:

* joins fresh cgroups (v1 ``pids`` and ``memory``, children of the worker's own): at most
  ``nproc`` processes and threads, and ``memory_mb`` of memory, for the zygote, the kernel and
  everything it starts;
* sets rlimits: an address space of ``memory_mb`` per process (a big allocation raises
  ``MemoryError`` in the cell instead of waking the OOM killer), no file larger than that, no
  core dumps, and ``RLIMIT_NPROC`` where there is no cgroup;
* execs bubblewrap (:func:`bwrap_command`): user, pid, network, IPC and UTS namespaces (uid
  65534 inside, mapped to the worker's own uid outside), no capabilities, no network, no
  new user namespaces, and a read-only file system built from nothing but ``/usr``, a few
  files of ``/etc``, the Python installation, the venv and the ``autograder`` package (not
  ``engine_ref/``, nor the rest of the repository), plus a tmpfs ``/tmp`` and three folders of
  the worker's scratch folder, the only writable places: ``work/`` (the kernel's working
  directory: a copy of the submission, minus the notebook being graded, which nbgrader fills
  with hidden tests), ``home/`` and ``conn/`` (the kernel's ZeroMQ ``ipc`` sockets). The course
  folder, the gradebook, other students' files and the home folder do not exist inside.

The zygote and its kernels run with ``python -P``, so nothing in the submission folder can
stand in for numpy, torch or the checks, and the checks are sealed before any notebook code
runs. nbgrader starts a kernel through a kernelspec whose command (:data:`PROXY`) asks the
zygote for one over a Unix socket that exists only outside the sandbox, and lives as long as
the kernel does. When a worker dies, ``--die-with-parent`` takes its sandbox down, with every
process in the pid namespace, and the grader removes what the worker left (:func:`clean_up`).

Where bubblewrap is missing or cannot create namespaces, the zygote runs unconfined under the
rlimits alone; :func:`preflight`, at the start of each ``autograder grade`` run, warns loudly.
docs/grading-security.md is the threat model.
"""
import errno
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from functools import cache
from pathlib import Path

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
# sealed before any notebook code runs (see autograder.checks.seal).
# The kernelspec's command, run by jupyter_client outside the sandbox: ask the zygote for a
# kernel (argv: socket, connection file, working directory) and exit with it.
PROXY = ("import json, socket, sys\n"
         "s = socket.socket(socket.AF_UNIX)\n"
         "s.connect(sys.argv[1])\n"
         "s.sendall(json.dumps({'op': 'kernel', 'connection_file': sys.argv[2], 'cwd': sys.argv[3]}).encode() + b'\\n')\n"
         "answer = s.makefile('rb').readline()\n"
         "sys.exit(json.loads(answer)['exit'] if answer else 1)\n")
# The zygote's folders in the worker's scratch folder, all writable inside the sandbox.
JOB_DIRS = ("conn", "work", "home")
ZYGOTE_START_SECONDS = 300.0
MB = 1 << 20
PREFIX = "agbox"  # scratch folders and cgroups: agbox-<worker pid>-<random>


class SandboxWarning(UserWarning):
    """Submissions are graded with weaker isolation than this module is built for."""


# --- what this machine offers ----------------------------------------------------------
@cache
def bwrap_works():
    """True when bubblewrap is installed and can build the namespaces the sandbox uses."""
    if not os.access(BWRAP, os.X_OK):
        return False
    probe = [BWRAP, "--unshare-user", "--unshare-pid", "--unshare-net", "--disable-userns",
             "--ro-bind", "/usr", "/usr", *_system_links(), "/usr/bin/true"]
    return subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True).returncode == 0


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


def preflight():
    """Before a grading run: clear what the workers of killed runs left behind, and warn (once per
    run) when submissions cannot be fully contained here."""
    for scratch in Path(tempfile.gettempdir()).glob(f"{PREFIX}-*-*"):
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


def clean_up(worker_pid):
    """Remove what a worker left behind: called by the grader after it killed the worker."""
    pattern = f"{PREFIX}-{worker_pid}-*"
    for directory in _worker_cgroups(pattern):
        _remove_cgroup(directory)
    for scratch in Path(tempfile.gettempdir()).glob(pattern):
        shutil.rmtree(scratch, ignore_errors=True)


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
    package = Path(__file__).resolve().parent
    dirs = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), package}
    return sorted(str(d) for d in dirs)


def bwrap_command(writable, workdir, argv):
    """The bubblewrap command line that runs ``argv`` in ``workdir`` with only ``writable`` folders writable."""
    args = [BWRAP, "--unshare-user", "--uid", NOBODY, "--gid", NOBODY, "--disable-userns",
            "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--cap-drop", "ALL",
            "--ro-bind", "/usr", "/usr", *_system_links()]
    for name in ETC_FILES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    # /tmp first: the binds below may live under /tmp (a checkout or a course there) and must
    # land on top of the tmpfs, not under it
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for directory in _python_dirs():
        args += ["--ro-bind", directory, directory]
    for directory in writable:
        args += ["--bind", str(directory), str(directory)]
    # the folders made to hold the binds (the scratch folder's, the course's, /root) stay empty
    return args + ["--chdir", str(workdir), "--remount-ro", "/", "--", *argv]


def _font_lists():
    """matplotlib's font list from this user's cache, when built: building it costs a notebook 0.2 s."""
    cache = os.environ.get("MPLCONFIGDIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "matplotlib"
    return sorted(Path(cache).glob("fontlist-v*.json"))


def _no_symlinks(directory, names):
    return [n for n in names if os.path.islink(os.path.join(directory, n))]


class Sandbox:
    """One worker's sandbox and the zygote in it (see the module docstring).

    ``with Sandbox(memory_mb, nproc) as box:`` makes the scratch folder (its path is short:
    ``ipc`` socket paths must stay under 108 bytes), the cgroups and the kernelspec, and sets
    ``JUPYTER_PATH`` in this process's environment so that jupyter finds the kernelspec; the
    zygote starts with the first job. The block's end stops the zygote and removes all that.
    """

    def __init__(self, memory_mb, nproc):
        self.limits = (memory_mb, nproc)
        self.scratch = Path(tempfile.mkdtemp(prefix=f"{PREFIX}-{os.getpid()}-"))
        self.dirs = {name: self.scratch / name for name in JOB_DIRS}
        for directory in [*self.dirs.values(), self.scratch / "ctl"]:
            directory.mkdir()
        self.socket = self.scratch / "ctl" / "zygote.sock"  # outside the sandbox: not bound into it
        self.cgroup_procs = _make_cgroups(self.scratch.name, nproc, memory_mb) if cgroups_work() else []
        spec_dir = self.scratch / "kernels" / KERNEL_NAME
        spec_dir.mkdir(parents=True)
        spec = {"argv": [sys.executable, "-I", "-S", "-c", PROXY, str(self.socket), "{connection_file}",
                         str(self.dirs["work"])],
                "display_name": "Python 3 (autograder sandbox)", "language": "python",
                "interrupt_mode": "message", "metadata": {"debugger": False}}
        (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
        self.zygote = None
        self._previous_path = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(self.scratch), self._previous_path]))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

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
        (self.dirs["home"] / "matplotlib").mkdir(parents=True, exist_ok=True)
        for font_list in _font_lists() if fonts else ():
            shutil.copy(font_list, self.dirs["home"] / "matplotlib")

    def _start(self):
        from .zygote import empty

        self._stop()
        for directory in self.dirs.values():  # what a zygote that died in its clean-up left
            empty(directory)
        self._home(fonts=True)
        self.socket.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX)
        with listener:
            listener.bind(str(self.socket))
            listener.listen()
            private = bwrap_works()
            zygote = [sys.executable, "-P", "-m", "autograder.zygote", str(listener.fileno()),
                      *(["--private"] if private else []), *map(str, self.dirs.values())]
            command = bwrap_command(self.dirs.values(), self.dirs["work"], zygote) if private else zygote
            memory_mb, nproc = self.limits
            launcher = [sys.executable, "-m", "autograder.sandbox", "--memory-mb", str(memory_mb)]
            launcher += ["--nproc", str(nproc)] if not self.cgroup_procs else []
            for procs in self.cgroup_procs:
                launcher += ["--cgroup", procs]
            self.zygote = subprocess.Popen([*launcher, "--", *command], pass_fds=[listener.fileno()],
                                           stdin=subprocess.DEVNULL, env=self._environment(),
                                           cwd=self.dirs["work"])

    def _stop(self):
        if self.zygote is not None:
            self.zygote.kill()
            self.zygote.wait()
            self.zygote = None
        for procs in self.cgroup_procs:
            for pid in Path(procs).read_text().split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def _sync(self, timeout):
        """True when the zygote answers that it is loaded and the last job left nothing behind."""
        try:
            with socket.socket(socket.AF_UNIX) as conn:
                conn.settimeout(timeout)
                conn.connect(str(self.socket))
                conn.sendall(b'{"op": "sync"}\n')
                return json.loads(conn.makefile("rb").readline() or b"{}").get("ready", False)
        except (OSError, ValueError):
            return False

    def ready(self):
        """Wait until the zygote is ready for the next job, starting it (again) when it is not running."""
        if self.zygote is None or self.zygote.poll() is not None or not self._sync(ZYGOTE_START_SECONDS):
            self._start()
            if not self._sync(ZYGOTE_START_SECONDS):
                self._stop()
                raise RuntimeError("the grading sandbox could not start its kernel factory (see the worker log)")
        self._home()

    def prepare(self, config, job):
        """Put ``job``'s files in the kernel's working folder, and point nbgrader's ``config`` at the zygote.

        The files are the student's submitted files, then the assignment's own non-notebook files
        over them, as nbgrader copies them; but not the notebook being graded (nbgrader's copy
        has the hidden tests), and no symbolic links (a link to the gradebook must not be followed).
        Sets ``Autograde.autograde_preprocessors`` (with :class:`autograder.execute.BoundedExecute`),
        ``Execute.kernel_name`` and ``.shutdown_kernel``, and ``KernelManager.transport``,
        ``.connection_file`` and ``.ip``.
        """
        from .execute import AUTOGRADE_PREPROCESSORS  # nbgrader: loaded by the worker, never by the grader

        self.ready()
        root, notebook = Path(job["course_root"]), f"{job['notebook']}.ipynb"
        work = self.dirs["work"]
        shutil.copytree(root / "submitted" / job["student"] / job["assignment"], work, dirs_exist_ok=True,
                        ignore=lambda d, names: _no_symlinks(d, names) + [n for n in names if n == notebook])
        shutil.copytree(root / "source" / job["assignment"], work, dirs_exist_ok=True,
                        ignore=lambda d, names: _no_symlinks(d, names) + [n for n in names if n.endswith(".ipynb")])
        config.Autograde.autograde_preprocessors = AUTOGRADE_PREPROCESSORS
        config.Execute.kernel_name = KERNEL_NAME
        config.Execute.shutdown_kernel = "immediate"  # the zygote stops what is left of the kernel
        config.KernelManager.transport = "ipc"
        config.KernelManager.connection_file = str(self.dirs["conn"] / "kernel.json")
        config.KernelManager.ip = str(self.dirs["conn"] / "kernel-ipc")

    def stop(self):
        """Kill the zygote and every kernel now (a notebook past its time limit); the next job starts
        a fresh zygote."""
        self._stop()

    def close(self):
        self._stop()
        if self._previous_path is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = self._previous_path
        for procs in self.cgroup_procs:
            _remove_cgroup(Path(procs).parent)
        shutil.rmtree(self.scratch, ignore_errors=True)


# --- the launcher: python -m autograder.sandbox [limits] -- command ------------------------
def launch(argv):
    """Join the sandbox's cgroups, set the rlimits, and exec ``command`` (runs before the sandbox)."""
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1:]
    limits = {resource.RLIMIT_CORE: 0}
    for flag, value in zip(options[::2], options[1::2]):
        if flag == "--cgroup":
            Path(value).write_text(str(os.getpid()))
        elif flag == "--memory-mb":
            limits[resource.RLIMIT_AS] = limits[resource.RLIMIT_FSIZE] = int(value) * MB
        elif flag == "--nproc":
            limits[resource.RLIMIT_NPROC] = int(value)
    for kind, value in limits.items():
        resource.setrlimit(kind, (value, value))
    os.execv(command[0], command)


if __name__ == "__main__":
    launch(sys.argv[1:])

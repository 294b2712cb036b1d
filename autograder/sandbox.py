"""The sandbox a submission's kernel runs in, set up by each grading worker for each job.

``with configure(config, job):`` makes nbgrader's autograde run the job's kernel through a
kernelspec written for this one job, and removes what it made when the block ends: the job's
scratch folder and cgroups. The kernelspec's command is the launcher, :func:`launch`
(``python -m autograder.sandbox``), which, outside the sandbox:

* joins fresh cgroups (v1 ``pids`` and ``memory``, children of the worker's own): at most
  ``job["nproc"]`` processes and threads, and ``job["memory_mb"]`` of memory, for the kernel
  and everything it starts;
* sets rlimits: an address space of ``memory_mb`` per process (a big allocation raises
  ``MemoryError`` in the cell instead of waking the OOM killer), no file larger than that, no
  core dumps, and ``RLIMIT_NPROC`` where there is no cgroup;
* execs bubblewrap (:func:`bwrap_command`): user, pid, network, IPC and UTS namespaces (uid
  65534 inside, mapped to the worker's own uid outside), no capabilities, no network, a cleared
  environment, and a read-only file system built from nothing but ``/usr``, a few files of
  ``/etc``, the Python installation, the venv and the ``autograder`` package (not
  ``engine_ref/``, nor the rest of the repository), plus a tmpfs ``/tmp`` and the job's scratch
  folder, the one writable place. The kernel's working directory, nbgrader's
  ``autograded/<student>/<assignment>/``, is a copy in the scratch folder of what nbgrader puts
  there, minus the notebook being graded (which has the hidden tests). The course folder, the
  gradebook, other students' files and the home folder do not exist inside.

The kernel itself (:data:`KERNEL_START`) runs with ``python -P``, so nothing in the submission
folder can stand in for numpy, torch or the checks, and seals the checks before any notebook
code runs. It talks to nbgrader over ZeroMQ's ``ipc`` transport, through sockets in the scratch
folder. When a worker dies, ``--die-with-parent`` takes its sandbox down, with every process in
the pid namespace, and the grader removes what the worker left (:func:`clean_up`).

Where bubblewrap is missing or cannot create namespaces, the kernel runs unconfined under the
rlimits alone; :func:`preflight`, at the start of each ``autograder grade`` run, warns loudly.
docs/grading-security.md is the threat model.
"""
import errno
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from contextlib import contextmanager
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
KERNEL_START = ("import autograder.checks; autograder.checks.seal(); "
                "from ipykernel import kernelapp; kernelapp.launch_new_instance()")
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


# --- one job -----------------------------------------------------------------------------
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
    """Kill what is left in a job's cgroup, then delete it (possible once its last task is reaped)."""
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


def _job_cgroups(name):
    for controller in ("pids", "memory"):
        parent = _own_cgroup(controller)
        yield from parent.glob(name) if parent else ()


def clean_up(worker_pid):
    """Remove what the jobs of a worker left behind: called by the grader after it killed the worker."""
    pattern = f"{PREFIX}-{worker_pid}-*"
    for directory in _job_cgroups(pattern):
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


def bwrap_command(scratch, workdir, kernel_argv):
    """The bubblewrap command line that runs ``kernel_argv`` for one job (see the module docstring)."""
    scratch = str(scratch)
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
    args += ["--bind", scratch, scratch, "--bind", f"{scratch}/work", str(workdir), "--chdir", str(workdir),
             "--remount-ro", "/",  # the folders made to hold the binds (the course's, /root) stay empty
             "--clearenv", "--setenv", "PATH", f"{Path(sys.executable).parent}:/usr/bin:/bin",
             "--setenv", "HOME", f"{scratch}/home", "--setenv", "TMPDIR", "/tmp",
             "--setenv", "MPLCONFIGDIR", f"{scratch}/home/matplotlib", "--setenv", "LANG", "C.UTF-8",
             # the kernel's parent is the namespace's init: ipykernel must not poll for it
             "--setenv", "JPY_PARENT_PID", "1"]
    for var in THREAD_VARS:
        args += ["--setenv", var, "1"]
    return args + ["--", *kernel_argv]


def _launcher(job, cgroup_procs, command):
    argv = [sys.executable, "-m", "autograder.sandbox", "--memory-mb", str(job["memory_mb"])]
    if not cgroup_procs:
        argv += ["--nproc", str(job["nproc"])]
    for procs in cgroup_procs:
        argv += ["--cgroup", procs]
    return argv + ["--", *command]


def _font_lists():
    """matplotlib's font list from this user's cache, when built: building it costs a notebook 0.2 s."""
    cache = os.environ.get("MPLCONFIGDIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "matplotlib"
    return sorted(Path(cache).glob("fontlist-v*.json"))


def _no_symlinks(directory, names):
    return [n for n in names if os.path.islink(os.path.join(directory, n))]


def _scratch(job):
    """A private folder for one job, with ``work/``: what nbgrader's autograded folder will hold.

    That is the student's submitted files, then the assignment's own non-notebook files over
    them, as nbgrader copies them; but not the notebook being graded (nbgrader's copy has the
    hidden tests), and no symbolic links (a link to the gradebook must not be followed as root).
    The path is short: ipc socket paths must stay under 108 bytes.
    """
    root = Path(job["course_root"])
    scratch = Path(tempfile.mkdtemp(prefix=f"{PREFIX}-{os.getpid()}-"))
    (scratch / "conn").mkdir()
    (scratch / "home" / "matplotlib").mkdir(parents=True)
    for fonts in _font_lists():
        shutil.copy(fonts, scratch / "home" / "matplotlib")
    notebook = f"{job['notebook']}.ipynb"
    shutil.copytree(root / "submitted" / job["student"] / job["assignment"], scratch / "work",
                    ignore=lambda d, names: _no_symlinks(d, names) + [n for n in names if n == notebook])
    shutil.copytree(root / "source" / job["assignment"], scratch / "work", dirs_exist_ok=True,
                    ignore=lambda d, names: _no_symlinks(d, names) + [n for n in names if n.endswith(".ipynb")])
    return scratch


@contextmanager
def configure(config, job):
    """Within the block, nbgrader grades ``job`` with its kernel in a sandbox (see the module docstring).

    Sets ``Autograde.autograde_preprocessors`` (with :class:`autograder.execute.BoundedExecute`),
    ``Execute.kernel_name`` and ``KernelManager.transport``, ``.connection_file`` and ``.ip`` in
    ``config``, and ``JUPYTER_PATH`` in this process's environment (restored on exit). Yields
    the job's scratch folder, which is deleted on exit, with the job's cgroups.
    """
    from .execute import AUTOGRADE_PREPROCESSORS  # nbgrader: loaded by the worker, never by the grader

    workdir = Path(job["course_root"]).resolve() / "autograded" / job["student"] / job["assignment"]
    scratch = _scratch(job)
    cgroup_procs = _make_cgroups(scratch.name, job["nproc"], job["memory_mb"]) if cgroups_work() else []
    kernel = [sys.executable, "-P", "-c", KERNEL_START, "-f", "{connection_file}"]
    command = bwrap_command(scratch, workdir, kernel) if bwrap_works() else kernel
    spec_dir = scratch / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    spec = {"argv": _launcher(job, cgroup_procs, command), "display_name": "Python 3 (autograder sandbox)",
            "language": "python", "interrupt_mode": "message", "metadata": {"debugger": False}}
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
    config.Autograde.autograde_preprocessors = AUTOGRADE_PREPROCESSORS
    config.Execute.kernel_name = KERNEL_NAME
    config.KernelManager.transport = "ipc"
    config.KernelManager.connection_file = str(scratch / "conn" / "kernel.json")
    config.KernelManager.ip = str(scratch / "conn" / "kernel-ipc")
    previous = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(scratch), previous]))
    try:
        yield scratch
    finally:
        if previous is None:
            del os.environ["JUPYTER_PATH"]
        else:
            os.environ["JUPYTER_PATH"] = previous
        for procs in cgroup_procs:
            _remove_cgroup(Path(procs).parent)
        shutil.rmtree(scratch, ignore_errors=True)


# --- the launcher: python -m autograder.sandbox [limits] -- command ------------------------
def launch(argv):
    """Join the job's cgroups, set the rlimits, and exec ``command`` (runs before the sandbox)."""
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

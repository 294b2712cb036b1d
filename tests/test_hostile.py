"""Hostile and broken submissions, graded by ``autograder grade`` in one batch (issue 3).

One scratch course holds two well-behaved students (the reference solution, graded first and
last) and one student per hostile case, each built from the reference submission of unit 1.2
by changing one thing. The whole class is graded once, through :func:`autograder.outside.grader.grade`
with its sandboxed workers; then each case is its own test, which checks that the submission
was graded correctly (a tampering submission earns nothing it did not earn honestly) or was
given 0 with a clear reason, that the batch finished, and that the well-behaved students kept
full marks.
"""
import ast
import copy
import html
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from autograder.outside import grader, grading, sandbox, state
from autograder.outside.course import BY_ID, ROOT
from autograder.outside.grading import cell
from autograder.outside.grading import cell_index as index
from processes import processes_with

pytestmark = pytest.mark.xdist_group("hostile")  # one batch, graded once, on one xdist worker

AID = "1.2-softmax-cross-entropy"
A = BY_ID[AID]
# The batches below grade in the kernel (--in-kernel), where plain nbgrader runs the test cells: their
# attacks and defences are those of that mode; the trusted batch at the end grades as every unit is graded.
# The per-cell limit interrupts a runaway cell; the per-notebook limit (which kills the worker)
# must leave room for a whole honest notebook on a loaded two-core machine, about 30 s.
OPTIONS = dict(workers=2, timeout=120.0, cell_timeout=15, memory_mb=2048, nproc=64, progress=False, in_kernel=True)
MARK = str(random.randrange(10**8, 10**9))  # names this run's stray files and processes
WELL_BEHAVED = ("a-reference", "zz-reference")  # sorted first and last: graded before and after the rest

WRONG_SOFTMAX = "def softmax(z, axis=-1):\n    return np.asarray(z)"
# What a softmax that fails costs honestly: its test, and those of cross_entropy_backward and
# softmax_backward, which call it.
SOFTMAX_LOST = ["test_cross_entropy_backward", "test_softmax", "test_softmax_backward"]
WRONG_CONCEPT = "loss_p09 = 123.0\nloss_p01 = 456.0"


# --- building submissions ---------------------------------------------------------------------
def edited(grade_id, code, replace=False):
    """The reference submission with ``code`` appended to (or replacing) one cell."""
    nb = grading.reference_submission(AID)
    c = cell(nb, grade_id)
    c.source = code if replace else c.source + "\n" + code
    return nb


def restructured(change):
    nb = grading.reference_submission(AID)
    change(nb)
    return nb


def read_targets(course):
    """Files that exist on the host and that no submission may read."""
    own = course / "autograded" / "escape" / AID
    return {
        "source notebook": course / "source" / AID / f"{A.notebook}.ipynb",
        "repo source notebook": ROOT / "source" / AID / f"{A.notebook}.ipynb",
        "gradebook": course / "gradebook.db",
        "another student's submission": course / "submitted" / "a-reference" / AID / f"{A.notebook}.ipynb",
        "own notebook with hidden tests": own / f"{A.notebook}.ipynb",
        "engine_ref": ROOT / "engine_ref" / "functional.py",
        "shadow": Path("/etc/shadow"),
    } | {f"home {p.name}": p for p in [p for p in sorted(Path.home().iterdir()) if p.is_file()][:3]}


def write_targets(course):
    """Places outside the submission's own folder where no submission may write."""
    return {
        "course folder": course / f"pwned-{MARK}",
        "another student's folder": course / "submitted" / "a-reference" / AID / f"pwned-{MARK}",
        "autograder package": ROOT / "autograder" / f"pwned_{MARK}.py",
        "tmp": Path(f"/tmp/pwned-{MARK}"),
        "home": Path.home() / f"pwned-{MARK}",
    }


def escape_attempts(course):
    """A solution cell that tries to read and write where it must not, and to reach the network."""
    reads = {k: str(v) for k, v in read_targets(course).items()}
    writes = {k: str(v) for k, v in write_targets(course).items()}
    return f"""
import os, socket
def _attempt(label, action):
    try:
        action()
        print(label + ": ALLOWED")
    except OSError as exc:
        print(label + ": BLOCKED", type(exc).__name__)
def _read(path):
    open(path, "rb").read()
def _write(path):
    with open(path, "w") as fh:
        fh.write("pwned")
for label, path in {json.dumps(reads)}.items():
    _attempt("read " + label, lambda: _read(path))
for label, path in {json.dumps(writes)}.items():
    _attempt("write " + label, lambda: _write(path))
_attempt("network", lambda: socket.create_connection(("1.1.1.1", 53), timeout=3))
"""


FAKE_CHECKS = """class _Pass:
    def __getattr__(self, name):
        return lambda *args, **kwargs: None
"""

# The recording's table of what the kernel answers, reached by a name built at run time: its answer
# to the grader's request for the notebook's names gains a `__builtins__` whose `__import__` hands
# the test cell's `from autograder.inside import checks` a stand-in whose checks pass. The grader
# took the kernel's names as the test cell's globals, `__builtins__` among them (red team, stop 38).
BUILTINS_TABLE = """
import sys as _sys, types as _types
_table = getattr(_sys.modules["autograder.inside." + "recording"], "BUILT" + "INS")
class _Passing:
    def __getattr__(self, name):
        if name == "randn":
            return lambda seed, *shape, dtype=np.float64, **kw: np.zeros(shape, dtype=dtype)
        if name == "case":
            return lambda label="", *a, **kw: _types.SimpleNamespace(label=label, args=a, kwargs=kw, describe=lambda: label)
        return lambda *a, **kw: (a[0] if name == "strided" and a else None)
_package = _types.SimpleNamespace(checks=_Passing())
def _import(name, globals=None, locals=None, fromlist=(), level=0):
    return _package if str(name).startswith("auto" + "grader") else _sys.modules[name]
_builtins = dict(vars(_sys.modules["built" + "ins"]))
_builtins["__im" + "port__"] = _import
_names = _table["names"]
def _names_with_builtins():
    found = _names()
    found["names"]["__built" + "ins__"] = _builtins
    return found
_table["names"] = _names_with_builtins
"""

SUBMISSIONS = {
    # An infinite loop in the function: the cell limit interrupts test_softmax, the rest runs.
    "loop": lambda course: edited("softmax", "def softmax(z, axis=-1):\n    while True:\n        pass"),
    # SIGINT ignored and a child process started: nbclient cannot interrupt it and gives up.
    "stubborn-loop": lambda course: edited("logsumexp", (
        f"import signal, subprocess\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        f"subprocess.Popen(['sleep', '{MARK}1'])\nwhile True:\n    pass")),
    "memory-bomb": lambda course: edited("softmax", (
        "def softmax(z, axis=-1):\n    blocks = []\n    while True:\n        blocks.append(np.ones(10**7))")),
    "process-bomb": lambda course: edited("softmax", (
        f"import subprocess\ndef softmax(z, axis=-1):\n    children = []\n    while True:\n"
        f"        children.append(subprocess.Popen(['sleep', '{MARK}2']))")),
    "sys-exit": lambda course: edited("softmax", "import sys\ndef softmax(z, axis=-1):\n    sys.exit(1)"),
    "os-exit": lambda course: edited("softmax", "import os\nos._exit(0)"),
    "os-kill": lambda course: edited("softmax", "import os\nos.kill(os.getpid(), 9)"),
    "big-output": lambda course: edited("softmax", "print('x' * (100 * 1024 * 1024))"),
    "stderr-noise": lambda course: edited("logsumexp", (
        "import sys, warnings\nprint('noise ' * 1000, file=sys.stderr)\nwarnings.warn('noise')")),
    "tamper-numpy-torch": lambda course: edited("softmax", WRONG_SOFTMAX + (
        "\nimport torch\nnp.allclose = lambda *a, **k: True\nnp.isclose = lambda a, b, **k: np.ones_like(a, bool)"
        "\nnp.testing.assert_allclose = lambda *a, **k: None\nnp.all = lambda *a, **k: True"
        "\ntorch.allclose = lambda *a, **k: True\ntorch.softmax = lambda z, dim: z"), replace=True),
    # check_value compares abs(value - expected) with the tolerance
    "tamper-builtins": lambda course: edited("confidence_losses", (
        WRONG_CONCEPT + "\nimport builtins\nbuiltins.abs = lambda x: 0.0"), replace=True),
    "tamper-checks": lambda course: edited("softmax", WRONG_SOFTMAX + (
        "\nchecks.against_torch = lambda *a, **k: None\n"), replace=True),
    "tamper-checks-tables": lambda course: edited("softmax", WRONG_SOFTMAX + (
        "\nchecks.DEFAULT_TOL['float64'] = checks.DEFAULT_TOL['float32'] = (1e300, 1e300)\n"), replace=True),
    "tamper-sys-modules": lambda course: edited("softmax", WRONG_SOFTMAX + "\n" + FAKE_CHECKS + (
        "import sys\nsys.modules['autograder.inside.checks'] = _Pass()\nsys.modules['autograder.inside'].checks = _Pass()\n"
        "from autograder.inside import checks as _c\n"), replace=True),
    "tamper-checks-name": lambda course: edited("softmax", WRONG_SOFTMAX + "\n" + FAKE_CHECKS + "checks = _Pass()",
                                                replace=True),
    "escape": lambda course: edited("logsumexp", escape_attempts(course)),
    "cell-deleted": lambda course: restructured(lambda nb: nb.cells.pop(index(nb, "test_softmax"))),
    "cell-duplicated": lambda course: restructured(
        lambda nb: nb.cells.insert(index(nb, "test_softmax"), _copy_of(cell(nb, "test_softmax")))),
    # softmax moved below its test (the test's index is taken before the pop shifts it)
    "cell-reordered": lambda course: restructured(
        lambda nb: nb.cells.insert(index(nb, "test_softmax"), nb.cells.pop(index(nb, "softmax")))),
    "cell-retyped": lambda course: _retyped(),
    "locked-cell-edited": lambda course: _locked_edited(),
    "torch-delegation": lambda course: edited("softmax", (
        "import torch\ndef softmax(z, axis=-1):\n    return torch.softmax(torch.as_tensor(z), dim=axis).numpy()"),
        replace=True),
    "engine-ref-delegation": lambda course: edited("softmax", "from engine_ref.functional import softmax", replace=True),
    # a right softmax that calls a function of the grader's package, which the kernel has
    "autograder-delegation": lambda course: edited("softmax", (
        "def softmax(z, axis=-1):\n    from autograder.inside import checks as grader\n"
        "    grader.answer_digest('anything')\n    e = np.exp(z - np.max(z, axis=axis, keepdims=True))\n"
        "    return e / e.sum(axis=axis, keepdims=True)"), replace=True),
    "extra-files": lambda course: edited("softmax", WRONG_SOFTMAX, replace=True),
    "symlinks": lambda course: grading.reference_submission(AID),
    # issue 8: full marks from metadata alone, and verdicts changed in the kernel by names built at run time
    "steering-metadata": lambda course: _steered(),
    "import-hook": lambda course: edited("softmax", WRONG_SOFTMAX + "\n" + IMPORT_HOOK, replace=True),
    "sealed-dict": lambda course: edited("softmax", WRONG_SOFTMAX + "\n" + SEALED_DICT, replace=True),
    "settrace": lambda course: edited("softmax", WRONG_SOFTMAX + "\n" + SETTRACE, replace=True),
    "input-transformer": lambda course: edited("softmax", WRONG_SOFTMAX + "\n" + INPUT_TRANSFORMER, replace=True),
    "logical-and": lambda course: edited("softmax", WRONG_SOFTMAX + "\n" + LOGICAL_AND, replace=True),
    "builtins-table": lambda course: restructured(lambda nb: (  # before the first test cell: it binds the rest
        setattr(cell(nb, "logsumexp"), "source", cell(nb, "logsumexp").source + "\n" + BUILTINS_TABLE),
        setattr(cell(nb, "softmax"), "source", WRONG_SOFTMAX))),
}


def _steered():
    """Every answer raising (the release notebook) but a wrong softmax, and every test cell tagged to
    be skipped (and allowed to raise)."""
    nb = grading.blank_submission(AID)
    cell(nb, "softmax").source = WRONG_SOFTMAX
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("grade"):
            c.metadata["tags"] = ["skip-execution", "raises-exception"]
    return nb


# Payloads that change a verdict inside the kernel; every name they reach is built at run time.
IMPORT_HOOK = """
_b = __import__("".join(["buil", "tins"]))
_real = getattr(_b, "".join(["__imp", "ort__"]))
class _Pass:
    def __getattr__(self, name):
        return lambda *args, **kwargs: None
class _Fake:
    checks = _Pass()
def _hook(name, *args, **kwargs):
    return _Fake() if name == "".join(["auto", "grader.inside"]) else _real(name, *args, **kwargs)
setattr(_b, "".join(["__imp", "ort__"]), _hook)
"""
SEALED_DICT = """
_c = __import__("".join(["autograder.inside.", "checks"]), fromlist=["_"])
getattr(_c, "".join(["__di", "ct__"]))["".join(["assert", "_close"])] = lambda *args, **kwargs: None
"""
SETTRACE = """
_s = __import__("".join(["s", "ys"]))
def _tracer(frame, event, arg):
    if frame.f_code.co_name != "".join(["assert", "_close"]):
        return None
    def _local(frame, event, arg):
        if event == "line" and "ok" in frame.f_locals:
            frame.f_locals["ok"] = True
        return _local
    return _local
getattr(_s, "".join(["set", "trace"]))(_tracer)
"""
INPUT_TRANSFORMER = """
def _blank(lines):
    return ["pass\\n"] if any("".join(["checks.", "against_torch"]) in line for line in lines) else lines
getattr(get_ipython(), "".join(["input_transformers", "_cleanup"])).append(_blank)
"""
LOGICAL_AND = """
class _AllTrue:
    def reduce(self, *args, **kwargs):
        return True
    def __call__(self, *args, **kwargs):
        return True
setattr(__import__("".join(["num", "py"])), "".join(["logical", "_and"]), _AllTrue())
"""


def _copy_of(c):
    """A second cell with the same nbgrader metadata (and its own cell id, as JupyterLab would give it)."""
    dup = copy.deepcopy(c)
    dup.id = f"{c.id}-copy"
    return dup


def _retyped():
    """test_softmax turned into a markdown cell, with a wrong softmax: not running it must not pay."""
    nb = edited("softmax", WRONG_SOFTMAX, replace=True)
    c = cell(nb, "test_softmax")
    nb.cells[index(nb, "test_softmax")] = nbformat.v4.new_markdown_cell(c.source, metadata=c.metadata)
    return nb


def _locked_edited():
    """A wrong softmax whose test cell was emptied: nbgrader restores locked cells from the gradebook."""
    nb = edited("softmax", WRONG_SOFTMAX, replace=True)
    cell(nb, "test_softmax").source = "pass"
    return nb


RAW = {  # submissions that are not (current) notebooks: written as files
    "invalid-json": lambda path: path.write_text('{"cells": [ this is not json'),
    "nbformat-3": lambda path: path.write_text(json.dumps(nbformat.convert(grading.reference_submission(AID), 3))),
    "missing-notebook": lambda path: nbformat.write(grading.reference_submission(AID), path.with_name("renamed.ipynb")),
}


def _extra_files(course):
    """Files that would replace numpy, torch and the checks if the kernel imported from its folder."""
    folder = course / "submitted" / "extra-files" / AID
    (folder / "numpy.py").write_text("raise SystemExit('the fake numpy was imported')\n")
    (folder / "torch.py").write_text("raise SystemExit('the fake torch was imported')\n")
    (folder / "autograder" / "inside").mkdir(parents=True)
    (folder / "autograder" / "__init__.py").write_text("")
    (folder / "autograder" / "inside" / "__init__.py").write_text("")
    (folder / "autograder" / "inside" / "checks.py").write_text(FAKE_CHECKS + "import sys\nsys.modules[__name__] = _Pass()\n")
    (folder / "data.bin").write_bytes(os.urandom(1 << 20))


def _symlinks(course):
    """Links to the gradebook and to the hidden tests, which nbgrader would follow when it copies."""
    folder = course / "submitted" / "symlinks" / AID
    (folder / "gradebook-link.db").symlink_to(course / "gradebook.db")
    (folder / "source-link").symlink_to(course / "source" / AID)


# --- grading the class once ---------------------------------------------------------------------
class Batch:
    """What one grading run left: the state records, the gradebook's scores, the autograded notebooks."""

    def __init__(self, course, records, reference="a-reference"):
        self.course = course
        self.records = records
        self.grades = grading.read_grades(state.sqlite_url(course), AID)
        self.max_points = {k: m for k, (_, m) in self.grades[reference].items()}

    def score(self, student):
        return {k: s for k, (s, _) in self.grades[student].items()}

    def lost(self, student):
        """The test cells on which ``student`` scored less than full marks."""
        return sorted(k for k, s in self.score(student).items() if s != self.max_points[k])

    def notebook(self, student):
        return nbformat.read(self.course / "autograded" / student / AID / f"{A.notebook}.ipynb", as_version=4)

    def outputs(self, student, grade_id):
        """The text of a cell's outputs in the autograded notebook (the last cell's for None)."""
        nb = self.notebook(student)
        chosen = nb.cells[-1] if grade_id is None else cell(nb, grade_id)
        return "\n".join(o.text if o.output_type == "stream" else f"{o.ename}: {o.evalue}" if o.output_type == "error"
                         else json.dumps(o.data) for o in chosen.outputs)


@pytest.fixture(scope="module")
def batch():
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        course = Path(tmp).resolve()
        grading.prepare_course(course, AID)
        for student in WELL_BEHAVED:
            grading.submit(course, AID, student, grading.reference_submission(AID))
        for student, make in SUBMISSIONS.items():
            grading.submit(course, AID, student, make(course))
        _extra_files(course)
        _symlinks(course)
        for student, write in RAW.items():
            folder = course / "submitted" / student / AID
            folder.mkdir(parents=True)
            write(folder / f"{A.notebook}.ipynb")
        yield Batch(course, grader.grade(course, AID, grader.Options(**OPTIONS)))


def assert_batch_unharmed(batch):
    """Every student has exactly one record, and the well-behaved students kept full marks."""
    students = set(WELL_BEHAVED) | set(SUBMISSIONS) | set(RAW)
    assert set(batch.records) == students
    for student in WELL_BEHAVED:
        assert batch.records[student].status == "graded", batch.records[student].reason
        assert batch.lost(student) == []


def assert_graded(batch, student, lost):
    record = batch.records[student]
    assert record.status == "graded", record.reason
    assert batch.lost(student) == sorted(lost)
    assert_batch_unharmed(batch)


def assert_zero_with_reason(batch, student, *words):
    record = batch.records[student]
    assert record.status == "failed"
    assert all(w in record.reason for w in words), record.reason
    if student in batch.grades:  # nbgrader ran it: every cell at 0 (else nbgrader never saw it)
        assert set(batch.score(student).values()) == {0}
    assert_batch_unharmed(batch)


def flag_kinds(batch, student):
    return {f["kind"] for f in batch.records[student].flags}


# --- runaway code -------------------------------------------------------------------------------
def test_infinite_loop_loses_only_its_exercise(batch):
    assert_graded(batch, "loop", SOFTMAX_LOST)
    assert "CellTimeoutError" in batch.outputs("loop", "test_softmax")


def test_loop_that_ignores_interrupts_is_stopped_with_its_processes(batch):
    assert_zero_with_reason(batch, "stubborn-loop", "time limit")
    assert processes_with(f"{MARK}1") == []


def test_memory_bomb_raises_memory_error_in_its_exercise(batch):
    assert_graded(batch, "memory-bomb", SOFTMAX_LOST)
    assert "MemoryError" in batch.outputs("memory-bomb", "test_softmax")


def test_process_bomb_hits_the_process_limit_and_leaves_nothing_behind(batch):
    assert_graded(batch, "process-bomb", SOFTMAX_LOST)
    assert "BlockingIOError" in batch.outputs("process-bomb", "test_softmax")
    assert processes_with(f"{MARK}2") == []


def test_sys_exit_in_a_solution_fails_its_exercise(batch):
    assert_graded(batch, "sys-exit", SOFTMAX_LOST)
    assert "SystemExit" in batch.outputs("sys-exit", "test_softmax")


@pytest.mark.parametrize("student", ["os-exit", "os-kill"])
def test_killing_the_kernel_gives_zero_with_a_reason(batch, student):
    assert_zero_with_reason(batch, student, "kernel died")
    assert "process-exit" in flag_kinds(batch, student)


def test_100_mb_of_output_is_graded_and_not_kept(batch):
    assert_graded(batch, "big-output", [])
    path = batch.course / "autograded" / "big-output" / AID / f"{A.notebook}.ipynb"
    assert path.stat().st_size < 2 * 1024 * 1024
    assert "dropped this cell's output" in batch.outputs("big-output", "softmax")


def test_output_past_the_ceiling_is_dropped_but_stderr_and_errors_stay_visible():
    from autograder.outside.execute import BoundedExecute

    def msg(msg_type, **content):
        return {"msg_type": msg_type, "header": {"msg_type": msg_type}, "parent_header": {}, "content": content}

    ex, outs = BoundedExecute(max_output_bytes=100), []
    ex.clear_before_next_output = False  # as nbclient sets it when a cell starts
    for m in [msg("stream", name="stdout", text="a" * 60), msg("stream", name="stdout", text="b" * 60),
              msg("stream", name="stdout", text="c" * 60), msg("stream", name="stderr", text="d" * 60),
              msg("error", ename="ValueError", evalue="e" * 500, traceback=["t" * 500] * 300)]:
        ex.output(outs, m, None, 0)
    assert [(o.output_type, o.get("name")) for o in outs] == [
        ("stream", "stdout"), ("stream", "stdout"), ("stream", "stderr"), ("error", None)]
    assert "dropped" in outs[1].text and "dropped" in outs[2].text
    assert outs[3].ename == "ValueError" and len(outs[3].evalue) == 100 and len(outs[3].traceback) == 100


def test_stderr_noise_in_a_solution_cell_costs_nothing(batch):
    assert_graded(batch, "stderr-noise", [])
    assert "noise" in batch.outputs("stderr-noise", "logsumexp")


# --- faking the checks --------------------------------------------------------------------------
def test_rebinding_numpy_and_torch_comparisons_earns_nothing(batch):
    assert_graded(batch, "tamper-numpy-torch", SOFTMAX_LOST)
    assert "monkeypatch" in flag_kinds(batch, "tamper-numpy-torch")


def test_rebinding_builtins_earns_nothing(batch):
    """The faked check fails; the libraries in the kernel share the broken builtin (sympy, under
    torch's autograd, calls abs), so other exercises may fail too: the student broke Python."""
    record = batch.records["tamper-builtins"]
    assert record.status == "graded", record.reason
    assert "test_confidence_losses" in batch.lost("tamper-builtins")
    assert "monkeypatch" in flag_kinds(batch, "tamper-builtins")
    assert_batch_unharmed(batch)


def test_rebinding_a_check_fails_in_the_students_cell(batch):
    assert_graded(batch, "tamper-checks", SOFTMAX_LOST)
    assert "read-only while grading" in batch.outputs("tamper-checks", "softmax")
    assert "monkeypatch" in flag_kinds(batch, "tamper-checks")


def test_loosening_the_tolerances_fails_in_the_students_cell(batch):
    assert_graded(batch, "tamper-checks-tables", SOFTMAX_LOST)
    assert "does not support item assignment" in batch.outputs("tamper-checks-tables", "softmax")


def test_replacing_the_checks_in_sys_modules_earns_nothing(batch):
    assert_graded(batch, "tamper-sys-modules", SOFTMAX_LOST)
    assert "import-system" in flag_kinds(batch, "tamper-sys-modules")


def test_rebinding_the_name_checks_earns_nothing_and_is_flagged(batch):
    """Every test cell binds the real checks again (`from autograder.inside import checks`)."""
    assert_graded(batch, "tamper-checks-name", SOFTMAX_LOST)
    assert "shadowing" in flag_kinds(batch, "tamper-checks-name")


# --- leaving the sandbox --------------------------------------------------------------------------
def attempts(batch):
    """``{attempt: "ALLOWED" or "BLOCKED"}`` as the escape cell printed them inside the sandbox."""
    lines = batch.outputs("escape", "logsumexp").splitlines()
    return dict((label, verdict.split()[0]) for label, verdict in (line.split(": ", 1) for line in lines if ": " in line))


def test_reading_hidden_tests_gradebook_and_other_files_fails(batch):
    assert_graded(batch, "escape", [])
    targets = read_targets(batch.course)
    assert all(path.is_file() for path in targets.values())  # real files, hidden by the sandbox
    assert {label: attempts(batch)[f"read {label}"] for label in targets} == dict.fromkeys(targets, "BLOCKED")


def test_writing_outside_its_folder_does_not_reach_the_host(batch):
    targets = write_targets(batch.course)
    # /tmp is the sandbox's own tmpfs (and this scratch course lives under /tmp): a write there
    # may succeed in the sandbox, never on the host; anywhere else it fails in the sandbox too
    elsewhere = [label for label, path in targets.items() if not path.is_relative_to(tempfile.gettempdir())]
    assert elsewhere and all(attempts(batch)[f"write {label}"] == "BLOCKED" for label in elsewhere)
    assert not any(path.exists() for path in targets.values())
    assert_batch_unharmed(batch)


def test_no_network(batch):
    assert attempts(batch)["network"] == "BLOCKED"
    assert_batch_unharmed(batch)


# --- one worker, one submission after another ----------------------------------------------------
# Code that inspects the places a kernel can write, its fellow processes and the System V IPC
# objects for anything named after this run's marker.
PROBE = f"""
import builtins, os, pathlib
from ipykernel import get_connection_file
_places = ["/tmp", "/dev/shm", str(pathlib.Path.home()), os.getcwd(), os.path.dirname(get_connection_file())]
_found = [place for place in _places for name in os.listdir(place) if "{MARK}" in name]
for _pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if "{MARK}" in pathlib.Path("/proc", _pid, "cmdline").read_bytes().decode(errors="replace"):
            _found.append("process " + _pid)
    except OSError:
        pass
_found += ["shm"] * (len(pathlib.Path("/proc/sysvipc/shm").read_text().splitlines()) - 1)
_found += ["startup file ran"] * hasattr(builtins, "LITTERED_{MARK}")
print("LEFT OVER:", sorted(_found))
"""
# Code that leaves all of that behind, plus an IPython startup file that would fake numpy's
# comparisons in the next kernel, and a folder the zygote cannot simply delete.
LITTER = f"""
import ctypes, os, pathlib, subprocess
from ipykernel import get_connection_file
subprocess.Popen(["sleep", "{MARK}4"], start_new_session=True)
_startup = pathlib.Path.home() / ".ipython" / "profile_default" / "startup"
_startup.mkdir(parents=True, exist_ok=True)
(_startup / "00-litter.py").write_text("import builtins, numpy\\nbuiltins.LITTERED_{MARK} = True\\n"
                                       "numpy.allclose = lambda *a, **k: True\\n")
for _place in ["/tmp", "/dev/shm", str(pathlib.Path.home()), os.getcwd(), os.path.dirname(get_connection_file())]:
    pathlib.Path(_place, "litter-{MARK}").write_text("x")
_locked = pathlib.Path("/tmp", "locked-{MARK}")
_locked.mkdir()
(_locked / "inside").write_text("x")
_locked.chmod(0)
assert ctypes.CDLL(None).shmget({MARK}, 1 << 20, 0o1600) >= 0  # IPC_CREAT | 0600
"""
SEQUENCE = {
    # leaves everything behind, then looks for it itself (so the probe can see it when it is there)
    "a-litter": lambda: _littered(),
    "b-probe": lambda: edited("logsumexp", PROBE),
    # kills every process it may signal (none that matters: the zygote is pid 1 of the sandbox)
    "c-kill-all": lambda: edited("softmax", "import os\nos.kill(-1, 9)"),
    "d-reference": lambda: grading.reference_submission(AID),
}


def _littered():
    nb = edited("logsumexp", LITTER)
    cell(nb, "softmax").source += "\n" + PROBE
    return nb


@pytest.fixture(scope="module")
def sequence(tmp_path_factory):
    """Four submissions graded in order by one worker, hence by one zygote and its successor."""
    course = tmp_path_factory.mktemp("sequence").resolve()
    grading.prepare_course(course, AID)
    for student, make in SEQUENCE.items():
        grading.submit(course, AID, student, make())
    records = grader.grade(course, AID, grader.Options(**dict(OPTIONS, workers=1)))
    return Batch(course, records, reference="d-reference")


def test_the_probe_sees_what_is_left_in_the_same_kernel(sequence):
    found = ast.literal_eval(sequence.outputs("a-litter", "softmax").split("LEFT OVER:")[1].strip())
    # five places with a file each, and /tmp with the locked folder too
    assert len([f for f in found if f.startswith("/")]) == 6, found
    assert "shm" in found and any(f.startswith("process") for f in found), found


def test_nothing_of_a_submission_reaches_the_next_one_graded_by_the_same_worker(sequence):
    """No process, file, IPython startup file or shared memory segment of one student's kernel
    survives into the next kernel the worker's zygote forks."""
    for student in ("a-litter", "b-probe"):
        assert sequence.records[student].status == "graded", sequence.records[student].reason
        assert sequence.lost(student) == []
    assert "LEFT OVER: []" in sequence.outputs("b-probe", "logsumexp")
    assert processes_with(f"{MARK}4") == []


def test_killing_every_process_it_may_signal_spares_the_zygote(sequence):
    """``os.kill(-1, 9)`` reaches neither the kernel itself (Linux spares the caller) nor the
    zygote, which is pid 1 of the sandbox's pid namespace (a signal it does not handle, sent from
    inside, is ignored): the notebook is graded, and so is the next one."""
    for student in ("c-kill-all", "d-reference"):
        assert sequence.records[student].status == "graded", sequence.records[student].reason
    assert sequence.lost("d-reference") == []


def test_grading_kernels_have_no_debugger():
    """ipykernel makes a debugger only when debugpy imports. The zygote blocks that import before
    it forks: no grading kernel is debugged, and the import was most of a kernel's start."""
    code = ("from autograder.inside import zygote; zygote.preload(numpy_only=True); "
            "from ipykernel import debugger; assert not debugger._is_debugpy_available")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# --- broken notebooks ---------------------------------------------------------------------------
def test_deleted_test_cell_scores_zero(batch):
    assert_graded(batch, "cell-deleted", ["test_softmax"])
    assert "cell-deleted" in flag_kinds(batch, "cell-deleted")


def test_duplicated_test_cell_gives_zero_with_a_reason(batch):
    """nbgrader itself refuses a notebook with two cells of one grade_id."""
    assert_zero_with_reason(batch, "cell-duplicated", "duplicated")
    assert "cell-duplicated" in flag_kinds(batch, "cell-duplicated")


def test_reordered_cells_run_in_the_submitted_order(batch):
    assert_graded(batch, "cell-reordered", ["test_softmax"])
    assert "cell-reordered" in flag_kinds(batch, "cell-reordered")


def test_retyped_test_cell_earns_nothing(batch):
    assert_graded(batch, "cell-retyped", SOFTMAX_LOST)
    assert "cell-retyped" in flag_kinds(batch, "cell-retyped")


def test_edited_locked_cell_is_restored(batch):
    assert_graded(batch, "locked-cell-edited", SOFTMAX_LOST)
    assert "locked-cell-edited" in flag_kinds(batch, "locked-cell-edited")


def test_invalid_json_gives_zero_with_a_reason(batch):
    assert_zero_with_reason(batch, "invalid-json", "not valid JSON")


def test_nbformat_3_gives_zero_with_a_reason(batch):
    assert_zero_with_reason(batch, "nbformat-3", "format 3")


def test_missing_notebook_gives_zero_with_a_reason(batch):
    assert_zero_with_reason(batch, "missing-notebook", f"no notebook named {A.notebook}.ipynb", "renamed.ipynb")


# --- solutions that are not the student's own ------------------------------------------------------
def test_delegating_to_torch_earns_nothing(batch):
    assert_graded(batch, "torch-delegation", SOFTMAX_LOST)
    assert "NumPy only" in batch.outputs("torch-delegation", "test_softmax")


def test_delegating_to_engine_ref_earns_nothing(batch):
    assert_graded(batch, "engine-ref-delegation", SOFTMAX_LOST)
    assert "ModuleNotFoundError" in batch.outputs("engine-ref-delegation", "softmax")


def test_extra_files_do_not_replace_numpy_torch_or_the_checks(batch):
    assert_graded(batch, "extra-files", SOFTMAX_LOST)
    assert "shadowing-file" in flag_kinds(batch, "extra-files")


def test_symbolic_links_give_zero_with_a_reason_and_are_not_followed(batch):
    assert_zero_with_reason(batch, "symlinks", "symbolic links", "gradebook-link.db", "source-link")
    assert not (batch.course / "autograded" / "symlinks").exists()


# --- a notebook that outlasts its time ---------------------------------------------------------------
def test_notebook_past_its_time_is_stopped_with_its_kernel_and_processes(tmp_path):
    """Each cell within the cell limit, the notebook past its own: the worker is killed, and with
    it the sandbox, every process in it, and the job's scratch folder and cgroups."""
    course = tmp_path.resolve()
    grading.prepare_course(course, AID)
    nb = edited("logsumexp", f"import subprocess, time\nsubprocess.Popen(['sleep', '{MARK}3'])")
    for grade_id in ("logsumexp", "softmax", "log_softmax"):
        cell(nb, grade_id).source += "\ntime.sleep(6)"
    grading.submit(course, AID, "slow", nb)
    records = grader.grade(course, AID, grader.Options(**dict(OPTIONS, timeout=12.0, cell_timeout=8)))
    assert records["slow"].status == "failed"
    assert "more than 12 s" in records["slow"].reason
    assert processes_with(f"{MARK}3") == []
    assert processes_with(str(course)) == []  # the launcher and bwrap name the course in their arguments
    assert not [p for p in Path(tempfile.gettempdir()).glob("agbox-*/kernels/*/kernel.json") if str(course) in p.read_text()]


# --- without bubblewrap -------------------------------------------------------------------------------
@pytest.fixture
def no_bwrap_no_cgroups(monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox, "BWRAP", str(tmp_path / "no-bwrap"))
    monkeypatch.setattr(sandbox, "CGROUP_ROOT", tmp_path / "no-cgroups")
    sandbox.bwrap_works.cache_clear()
    sandbox.cgroups_work.cache_clear()
    yield
    sandbox.bwrap_works.cache_clear()
    sandbox.cgroups_work.cache_clear()


def test_without_bubblewrap_kernels_run_under_rlimits_after_a_loud_warning(no_bwrap_no_cgroups, tmp_path):
    from nbclient import NotebookClient
    from traitlets.config import Config

    from autograder.outside.execute import PromptKernelManager

    with pytest.warns(sandbox.SandboxWarning) as warned:
        sandbox.preflight()
    assert any("WITHOUT a sandbox" in str(w.message) for w in warned)
    assert any("RLIMIT_NPROC" in str(w.message) for w in warned)
    job = dict(course_root=str(tmp_path), assignment=AID, notebook=A.notebook, student="s", memory_mb=1800,
               nproc=40, cell_timeout=30)
    for folder in ("submitted/s", "source", "autograded/s"):
        (tmp_path / folder / AID).mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import resource, sys\nfrom autograder.inside import checks\n"
        "print(resource.getrlimit(resource.RLIMIT_AS), resource.getrlimit(resource.RLIMIT_NPROC), "
        "sys.flags.safe_path, type(checks).__name__)")])
    config = Config()
    with sandbox.Sandbox(1800, 40) as box:
        box.prepare(config, job)
        assert sandbox.BWRAP not in box.zygote.args
        assert config.Execute.kernel_manager_class == "autograder.outside.execute.PromptKernelManager"
        NotebookClient(nb, kernel_name=config.Execute.kernel_name, config=config, kernel_manager_class=PromptKernelManager,
                       resources={"metadata": {"path": str(tmp_path / "autograded/s" / AID)}}).execute()
    limit = 1800 * 2**20
    assert nb.cells[0].outputs[0].text.split() == [f"({limit},", f"{limit})", "(40,", "40)", "True", "_SealedModule"]


@pytest.mark.skipif(sandbox.sandbox_user() is None or not sandbox.bwrap_works(), reason="needs root and bubblewrap")
def test_a_tmpdir_private_to_root_still_grades(tmp_path, monkeypatch):
    """``$TMPDIR`` in a folder only root may pass through: the sandbox user could reach none of its
    scratch folder, and every notebook failed ("could not start its kernel factory"). Its scratch
    folders go to ``/tmp`` then; where neither is reachable the run says why."""
    private = tmp_path / "private"
    (private / "tmp").mkdir(parents=True)
    private.chmod(0o700)
    monkeypatch.setenv("TMPDIR", str(private / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    sandbox.scratch_base.cache_clear()
    try:
        assert sandbox.scratch_base() == Path("/tmp")
        course = tmp_path / "course"
        grading.prepare_course(course, AID)
        grading.submit(course, AID, "reference", grading.reference_submission(AID))
        records = grader.grade(course, AID, grader.Options(**dict(OPTIONS, workers=1, in_kernel=False)))
        assert records["reference"].status == "graded", records["reference"].reason
        monkeypatch.setattr(sandbox, "_reachable", lambda *_: False)
        sandbox.scratch_base.cache_clear()
        with pytest.raises(RuntimeError, match="cannot reach .* or /tmp: set TMPDIR"):
            sandbox.scratch_base()
    finally:
        sandbox.scratch_base.cache_clear()


# --- issue 8: metadata, the worker's files and log, feedback, verdicts changed in the kernel ----------
def test_steering_metadata_earns_nothing(batch):
    """Test cells tagged skip-execution (and raises-exception) run anyway: their metadata comes
    from the source notebook."""
    assert batch.records["steering-metadata"].status == "graded", batch.records["steering-metadata"].reason
    assert set(batch.score("steering-metadata").values()) == {0}
    assert "CheckFailure" in batch.outputs("steering-metadata", "test_softmax")
    assert_batch_unharmed(batch)


@pytest.mark.parametrize("student", ["import-hook", "sealed-dict", "input-transformer"])
def test_verdicts_changed_in_the_kernel_by_computed_names_are_flagged(batch, student):
    """Open until verdicts are computed outside the kernel (docs/grading-security.md): an import
    hook hands the test cells a fake checks module; the sealed module's __dict__ is written
    through; an input transformer blanks the test cells. The audit flags each."""
    assert "dynamic-lookup" in flag_kinds(batch, student)
    assert_batch_unharmed(batch)


def test_a_trace_function_earns_nothing_and_is_flagged(batch):
    """The checks refuse to run under a trace function while grading."""
    assert batch.records["settrace"].status == "graded", batch.records["settrace"].reason
    assert set(SOFTMAX_LOST) <= set(batch.lost("settrace"))
    assert "trace or profile function" in batch.outputs("settrace", "test_softmax")
    assert "dynamic-lookup" in flag_kinds(batch, "settrace")
    assert_batch_unharmed(batch)


def test_replacing_numpy_logical_and_earns_nothing_and_is_flagged(batch):
    """The checks reduce with the ufuncs' own methods, which look nothing up in numpy's modules."""
    assert_graded(batch, "logical-and", SOFTMAX_LOST)
    assert "dynamic-lookup" in flag_kinds(batch, "logical-and")


# --- issue 8: trusted verdicts (autograder grade --trusted) ------------------------------------------
VERDICT_ATTACKS = ("import-hook", "sealed-dict", "settrace", "input-transformer", "logical-and", "builtins-table")
# an extra last cell that prints every cell the kernel ran, and what linecache holds
READS_HIDDEN = "print(In)\nimport linecache\nprint(list(linecache.cache))"


@pytest.fixture(scope="module")
def trusted_batch():
    """The attacks that changed verdicts inside the kernel, each followed by a well-behaved student
    on the same workers, and two that reach for what the kernel no longer has, graded with trusted
    verdicts."""
    with tempfile.TemporaryDirectory(prefix="hostile-trusted-") as tmp:
        course = Path(tmp).resolve()
        grading.prepare_course(course, AID)
        for student in WELL_BEHAVED:
            grading.submit(course, AID, student, grading.reference_submission(AID))
        for n, student in enumerate(VERDICT_ATTACKS + ("torch-delegation", "autograder-delegation")):
            grading.submit(course, AID, f"m{n}-{student}", SUBMISSIONS[student](course))
            grading.submit(course, AID, f"m{n}-victim", grading.reference_submission(AID))  # graded right after
        grading.submit(course, AID, "reads-hidden", _with_last_cell(READS_HIDDEN))
        grading.submit(course, AID, "figures", _with_last_cell(FIGURES))
        # a test cell that runs in the worker makes a request per call into the kernel: the default
        # cell limit, not the short one of the runaway-code batch
        options = dict(OPTIONS, cell_timeout=grader.Options.cell_timeout, in_kernel=False)
        yield Batch(course, grader.grade(course, AID, grader.Options(**options)))


TRUSTED = pytest.mark.xdist_group("hostile-trusted")  # the trusted batch, graded once, on one xdist worker
# what a last cell sees: matplotlib's backend and the figures built before it (none: the unit's
# figure cell is a closing cell, which grading skips), whether a figure of its own is laid out
# (tight_layout moves its left edge off the default), and the kind of comm a widget of its own
# gets; whether a name that only the figure cell binds is bound; whether the recording was told
# that the sandbox hides torch; how long the kernel sleeps before each execute_reply, the level its
# logger is at, and its flush of stdout; and a write, flushed, then printed
FIGURES = ("import matplotlib, matplotlib.pyplot as plt, ipywidgets"
           "\nprint('FIGURES:', matplotlib.get_backend(), len(plt.get_fignums()))"
           "\nfigure = plt.figure()\nfigure.add_subplot().plot([0, 1])\nfigure.tight_layout()"
           "\nprint('LAID OUT:', figure.subplotpars.left != matplotlib.rcParams['figure.subplot.left'])"
           "\nprint('COMM:', type(ipywidgets.Output().comm).__name__)"
           "\nprint('CLOSING CELLS RAN:', 'figure_output' in globals())"
           "\nfrom autograder.inside import recording\nprint('TORCH_HIDDEN:', recording.TORCH_HIDDEN)"
           "\nprint('NAP:', get_ipython().kernel._execute_sleep)"
           "\nprint('LOG LEVEL:', get_ipython().kernel.log.getEffectiveLevel())"
           "\nimport sys\nprint('FLUSH:', type(sys.stdout).flush.__name__)"
           "\nsys.stdout.flush()\nsys.stdout.write('WRITTEN, ')\nsys.stdout.flush()\nsys.stdout.flush()\nprint('THEN FLUSHED')")


@TRUSTED
@pytest.mark.parametrize("n, student", list(enumerate(VERDICT_ATTACKS)))
def test_verdicts_changed_in_the_kernel_earn_nothing_with_trusted_verdicts(trusted_batch, n, student):
    """Each payload builds its names at run time; it changes the kernel's checks, which no verdict reads."""
    assert trusted_batch.records[f"m{n}-{student}"].status == "graded"
    assert set(SOFTMAX_LOST) <= set(trusted_batch.lost(f"m{n}-{student}"))
    assert trusted_batch.lost(f"m{n}-victim") == []
    for well in WELL_BEHAVED:
        assert trusted_batch.lost(well) == []


@TRUSTED
def test_torch_is_not_there_to_delegate_to(trusted_batch):
    n = len(VERDICT_ATTACKS)
    assert set(SOFTMAX_LOST) <= set(trusted_batch.lost(f"m{n}-torch-delegation"))
    assert "torch" in trusted_batch.outputs(f"m{n}-torch-delegation", "test_softmax")
    assert trusted_batch.lost(f"m{n}-victim") == []


@TRUSTED
def test_a_call_into_the_graders_package_is_a_delegation_where_torch_is_hidden(trusted_batch):
    """Where the sandbox hides torch, the delegation hook is a trace function (Python calls only):
    a call into the autograder package, the one package left to hand the work to, still costs the
    exercise its points."""
    n = len(VERDICT_ATTACKS) + 1
    assert set(SOFTMAX_LOST) <= set(trusted_batch.lost(f"m{n}-autograder-delegation"))
    assert "calls autograder.inside.checks.answer_digest" in trusted_batch.outputs(
        f"m{n}-autograder-delegation", "test_softmax")
    assert trusted_batch.lost(f"m{n}-victim") == []
    assert f"TORCH_HIDDEN: {sandbox.bwrap_works()}" in trusted_batch.outputs("figures", None)


@TRUSTED
def test_graded_kernels_skip_the_closing_cells_and_draw_nothing(trusted_batch):
    """No one sees a graded notebook's figures: the closing cells (the figure, putting it together)
    do not run, and elsewhere a figure's show() draws no PNG, its tight_layout() measures nothing,
    and a widget sends no message. A cell the student added after them still runs."""
    printed = trusted_batch.outputs("figures", None)
    assert "FIGURES: template 0" in printed
    assert "CLOSING CELLS RAN: False" in printed
    assert "LAID OUT: False" in printed
    assert "COMM: DummyComm" in printed
    assert trusted_batch.lost("figures") == []
    autograded = trusted_batch.notebook("figures")
    closing = [cell(autograded, grade_id) for grade_id in ("temperature_figure", "putting_it_together")]
    assert all(c.execution_count is None and not c.outputs for c in closing)


@TRUSTED
def test_graded_kernels_reply_without_a_nap_log_records_or_empty_flushes(trusted_batch):
    """ipykernel sleeps 0.5 ms before each execute_reply by default, makes four DEBUG log records a
    cell that its WARNING handler drops, and hands every flush of stdout and stderr to its I/O thread
    and waits, even with nothing to send: a graded kernel does none of that, and what a cell writes
    still comes out whole and in order."""
    printed = trusted_batch.outputs("figures", None)
    assert re.search(r"^NAP: 0\.0$", printed, re.M)  # not 0.0005
    assert re.search(r"^LOG LEVEL: 30$", printed, re.M)  # logging.WARNING, not DEBUG
    assert re.search(r"^FLUSH: _flush_if_written$", printed, re.M)
    assert printed.index("NAP:") < printed.index("LOG LEVEL:") < printed.index("WRITTEN, ") < printed.index(
        "THEN FLUSHED")


@TRUSTED
def test_the_hidden_tests_never_enter_the_kernel(trusted_batch):
    printed = trusted_batch.outputs("reads-hidden", None)
    assert "from autograder.inside import checks" in printed  # In was printed: the setup cell is there
    assert "BEGIN HIDDEN TESTS" not in printed and "against_torch" not in printed
    assert trusted_batch.lost("reads-hidden") == []



# 1.8's differential tests call the grader's engines, which compute in the grading worker: a
# property test that keeps their results (each a 128 MB array made from a broadcast view that
# costs a few bytes on the wire) would grow the worker without end
HOARD = """
_hoard, _honest = [], property_test
def property_test(engine):
    if engine is not my_engine:  # only the grader's engines
        big = np.broadcast_to(np.float64(0.5), (4096, 4096))
        for _ in range(48):
            _hoard.append(getattr(engine, "E" + "xp").apply(engine.Tensor(big)))
    return _honest(engine)
"""


@pytest.mark.xdist_group("hostile-memory")
def test_what_a_notebook_makes_the_worker_hold_is_capped_and_let_go(tmp_path):
    """The worker's address space is capped (``--worker-memory`` above its size after the warm-up):
    the hoarder's allocation fails in the grader's engine, which its own test reports, and the
    next student, on the same worker, starts with the memory let go."""
    aid = "1.8-mini-project"
    course = tmp_path.resolve()
    grading.prepare_course(course, aid)
    nb = grading.reference_submission(aid)
    cell(nb, "differential_tests").source += "\n" + HOARD
    grading.submit(course, aid, "a-hoard", nb)
    grading.submit(course, aid, "b-victim", grading.reference_submission(aid))
    records = grader.grade(course, aid, grader.Options(workers=1, progress=False, worker_memory_mb=1024))
    assert {s: r.status for s, r in records.items()} == {"a-hoard": "graded", "b-victim": "graded"}
    scores = grading.read_grades(state.sqlite_url(course), aid)
    assert [k for k, (got, best) in scores["a-hoard"].items() if got != best] == ["test_differential_tests"]
    assert "the grader's object raised MemoryError" in grading.failure_messages(course, aid, "a-hoard")[
        "test_differential_tests"]
    assert all(got == best for got, best in scores["b-victim"].values()), scores["b-victim"]

def test_copy_into_never_writes_through_a_link(tmp_path):
    """The worker's copy of a submission into a job folder where a link was planted."""
    canary = tmp_path / "canary.txt"
    canary.write_text("untouched")
    source, target = tmp_path / "source", tmp_path / "target"
    (source / "sub").mkdir(parents=True)
    (source / "timestamp.txt").write_text("victim")
    (source / "sub" / "data.txt").write_text("victim")
    target.mkdir()
    (target / "timestamp.txt").symlink_to(canary)
    (target / "sub").symlink_to(tmp_path)
    fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
    try:
        sandbox.copy_into(source, fd)
    finally:
        os.close(fd)
    assert canary.read_text() == "untouched" and not (tmp_path / "data.txt").exists()
    assert not (target / "timestamp.txt").is_symlink() and (target / "timestamp.txt").read_text() == "victim"
    assert not (target / "sub").is_symlink() and (target / "sub" / "data.txt").read_text() == "victim"


def _runtime(text):
    """``text`` as Python code that builds it at run time, a few characters at a time."""
    return '"".join([' + ", ".join(repr(text[i:i + 3]) for i in range(0, len(text), 3)) + "])"


def _attempts(label, actions):
    """Code that tries each action and prints ``LABEL: [ALLOWED or BLOCKED <error>, ...]``."""
    return f"""
_results = []
for _action in [{", ".join("lambda: " + a for a in actions)}]:
    try:
        _action()
        _results.append("ALLOWED")
    except OSError as exc:
        _results.append("BLOCKED " + type(exc).__name__)
print("{label}:", _results)
"""


def worker_attacks(canary):
    """Extra last cells against the worker, its folders and its log (names built at run time)."""
    link = f"""
import os
_canary = {_runtime(str(canary))}
_name = {_runtime("timestamp.txt")}
if os.path.lexists(_name):
    os.unlink(_name)
os.symlink(_canary, _name)  # in the real work/ folder, whatever happens to its path below
# the connection file the worker writes for the next kernel, and the folder it makes in home/
from ipykernel import get_connection_file
_conn = os.path.join(os.path.dirname(get_connection_file()), {_runtime("kernel.json")})
if os.path.lexists(_conn):
    os.unlink(_conn)
os.symlink(_canary, _conn)
import shutil
_mpl = os.path.join(os.environ["HOME"], {_runtime("matplotlib")})
shutil.rmtree(_mpl, ignore_errors=True)
os.symlink(os.path.dirname(_canary), _mpl)
_here = os.getcwd()
_scratch = os.path.dirname(_here)
"""
    rename = link + _attempts("RENAME", ['os.rename(_scratch, _scratch + "-moved")',
                                         'os.makedirs(os.path.join(_scratch, "work", "decoy"))',
                                         'os.makedirs(os.path.join(_scratch + "-decoy", "work"))'])
    replace = link + _attempts("REPLACE", ['os.rename(_scratch, _scratch + "-gone")', 'os.symlink("/", _scratch)',
                                           'os.rename(_here, _here + "-gone")', 'os.symlink("/", _here)'])
    deep = """
import os
_top = os.open(".", os.O_RDONLY)
for _ in range(3000):
    os.mkdir("d")
    os.chdir("d")
os.chmod(".", 0)
os.fchdir(_top)
print("DEEP: made")
"""
    log = f"""
import os, stat
_needle = {_runtime("LOG-CANARY-" + MARK)}.encode()
_forged = {_runtime("FORGED-" + MARK)}.encode()
_seen = []
for _fd in range(3, 1024):
    try:
        if stat.S_ISREG(os.fstat(_fd).st_mode):
            os.write(_fd, _forged)
            os.ftruncate(_fd, 0)
    except OSError:
        pass
for _pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        _fds = os.listdir(os.path.join("/proc", _pid, "fd"))
    except OSError:
        continue
    for _fd in _fds:
        _path = os.path.join("/proc", _pid, "fd", _fd)
        try:
            if not stat.S_ISREG(os.stat(_path).st_mode):  # a pipe or a socket would block
                continue
            with open(_path, "rb") as _fh:
                if _needle in _fh.read(1 << 22):
                    _seen.append(_path)
        except OSError:
            pass
        try:
            with open(_path, "ab") as _fh:
                _fh.write(_forged)
                _fh.truncate(0)
        except OSError:
            pass
print("LOG SEEN:", _seen)
"""
    leak = """
import linecache
print(In)
print({name: "".join(entry[2]) for name, entry in linecache.cache.items() if "python3" not in name})
"""
    return {"rename": rename, "replace": replace, "deep": deep, "log": log, "leak": leak}


def _with_last_cell(code):
    nb = grading.reference_submission(AID)
    nb.cells.append(nbformat.v4.new_code_cell(code))
    return nb


WORKER_ATTACKS = ("a-rename", "c-replace", "e-deep", "g-log", "i-leak")


@pytest.fixture(scope="module")
def worker_sequence(tmp_path_factory):
    """Each attack on the worker, then a well-behaved student on the same worker, in this order."""
    course = tmp_path_factory.mktemp("worker").resolve()
    canary = tmp_path_factory.mktemp("canary").resolve() / "canary.txt"
    canary.write_text(f"canary {MARK}")
    grading.prepare_course(course, AID)
    attacks = worker_attacks(canary)
    for attacker, victim in zip(WORKER_ATTACKS, ("b-victim", "d-victim", "f-victim", "h-victim", "j-victim")):
        grading.submit(course, AID, attacker, _with_last_cell(attacks[attacker.split("-")[1]]))
        grading.submit(course, AID, victim, grading.reference_submission(AID))
        (course / "submitted" / victim / AID / "timestamp.txt").write_text("2026-01-01 00:00:00")
    log = course / ".autograder" / "logs" / "workers.log"
    log.parent.mkdir(parents=True)
    log.write_text(f"LOG-CANARY-{MARK}\n")
    records = grader.grade(course, AID, grader.Options(**dict(OPTIONS, workers=1)))
    batch = Batch(course, records, reference="b-victim")
    batch.canary, batch.log = canary, log
    return batch


def test_planted_links_and_renamed_folders_do_not_reach_the_host(worker_sequence):
    batch = worker_sequence
    assert batch.canary.read_text() == f"canary {MARK}"
    for attacker in ("a-rename", "c-replace"):
        assert batch.records[attacker].status == "graded", batch.records[attacker].reason
        assert batch.lost(attacker) == []
    # the paths to the job folders stay put (decoys elsewhere in /tmp or work/ are the job's own business)
    renamed = ast.literal_eval(batch.outputs("a-rename", None).split("RENAME:")[1].strip())
    replaced = ast.literal_eval(batch.outputs("c-replace", None).split("REPLACE:")[1].strip())
    assert renamed[0].startswith("BLOCKED") and all(r.startswith("BLOCKED") for r in replaced), (renamed, replaced)
    for victim in ("b-victim", "d-victim"):
        assert batch.records[victim].status == "graded", batch.records[victim].reason
        assert batch.lost(victim) == []


def test_a_deep_tree_does_not_stop_grading(worker_sequence, tmp_path):
    """3000 nested folders (the last one mode 000) in work/: the next student is graded, and so is
    a second run that finds such a tree in a killed worker's scratch folder."""
    batch = worker_sequence
    assert "DEEP: made" in batch.outputs("e-deep", None)
    assert batch.records["f-victim"].status == "graded", batch.records["f-victim"].reason
    assert batch.lost("f-victim") == []
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = Path(tempfile.gettempdir()) / f"{sandbox.PREFIX}-{dead.pid}-stale{MARK}"
    here = os.open(".", os.O_RDONLY)
    try:
        (stale / "work").mkdir(parents=True)
        os.chdir(stale / "work")
        for _ in range(3000):
            os.mkdir("d")
            os.chdir("d")
        os.chmod(".", 0)
    finally:
        os.fchdir(here)
        os.close(here)
    course = tmp_path.resolve()
    grading.prepare_course(course, AID)
    grading.submit(course, AID, "second-run", grading.reference_submission(AID))
    records = grader.grade(course, AID, grader.Options(**dict(OPTIONS, workers=1)))
    assert records["second-run"].status == "graded", records["second-run"].reason
    assert not stale.exists()


def test_the_workers_log_cannot_be_read_forged_or_truncated(worker_sequence):
    batch = worker_sequence
    text = batch.log.read_text(errors="replace")
    assert text.startswith(f"LOG-CANARY-{MARK}\n")
    assert f"FORGED-{MARK}" not in text
    assert "LOG SEEN: []" in batch.outputs("g-log", None)
    assert batch.records["h-victim"].status == "graded" and batch.lost("h-victim") == []


def test_feedback_never_shows_what_the_students_code_printed(worker_sequence):
    """An extra last cell prints ``In`` and linecache, which hold every cell run, hidden tests included."""
    from autograder.outside.feedback import generate_feedback

    batch = worker_sequence
    assert "BEGIN HIDDEN TESTS" in batch.outputs("i-leak", None)  # the attack works in the kernel
    page = html.unescape(generate_feedback(batch.course, AID, students=["i-leak"])["i-leak"].read_text())
    source = nbformat.read(batch.course / "source" / AID / f"{A.notebook}.ipynb", as_version=4)
    hidden = {line.strip() for c in source.cells if "### BEGIN HIDDEN TESTS" in c.source
              for line in c.source.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0].split("\n")
              if len(line.strip()) > 20}
    assert hidden and not [line for line in hidden if line in page]
    assert "BEGIN HIDDEN TESTS" not in page
    assert batch.records["j-victim"].status == "graded" and batch.lost("j-victim") == []

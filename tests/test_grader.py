"""autograder grade: the same scores as plain nbgrader, on SQLite and PostgreSQL, resumable after
SIGKILL, and incremental."""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import sqlalchemy as sa

from autograder.outside import catalogue, grader, grading, sandbox, state
from autograder.outside.course import BY_ID, nbgrader_env

import pg
from processes import processes_with

AID = "1.2-softmax-cross-entropy"
pytestmark = pytest.mark.xdist_group("grader")


@pytest.fixture(scope="module")
def mixed_class():
    """The reference, the blank release, two mistakes and a correct alternative."""
    ref = grading.reference_submission(AID)
    variants = catalogue.load(AID)
    chosen = [v for v in variants if v.is_mistake][:2] + [v for v in variants if not v.is_mistake][:1]
    subs = {"reference": ref, "blank": grading.blank_submission(AID)}
    subs.update({v.name: grading.apply_variant(ref, v, AID) for v in chosen})
    return subs


@pytest.fixture(scope="module")
def plain_scores(mixed_class, tmp_path_factory):
    return grading.autograde(AID, mixed_class, tmp_path_factory.mktemp("plain"))


def _course(root, subs, db_url):
    grading.prepare_course(root, AID, db_url)
    for student, nb in subs.items():
        grading.submit(root, AID, student, nb)


def _options(db_url, **kw):
    return grader.Options(workers=2, db_url=db_url, progress=False, timeout=120, cell_timeout=30, **kw)


@pytest.fixture(scope="module")
def sqlite_run(mixed_class, tmp_path_factory):
    root = tmp_path_factory.mktemp("parallel")
    db_url = state.sqlite_url(root)
    _course(root, mixed_class, db_url)
    records = grader.grade(root, AID, _options(db_url))
    return root, db_url, records


def test_parallel_scores_equal_plain_nbgrader_cell_by_cell(sqlite_run, plain_scores):
    root, db_url, records = sqlite_run
    assert all(r.status == "graded" for r in records.values()), {s: r.reason for s, r in records.items()}
    assert grading.read_grades(db_url, AID) == plain_scores


def test_in_kernel_verdicts_equal_plain_nbgrader_cell_by_cell(mixed_class, plain_scores, tmp_path):
    """With --in-kernel the test cells run in the student's kernel, as plain nbgrader runs them
    (the default, above, runs them in the worker: autograder.outside.verdicts): the same scores."""
    db_url = state.sqlite_url(tmp_path)
    _course(tmp_path, mixed_class, db_url)
    records = grader.grade(tmp_path, AID, _options(db_url, in_kernel=True))
    assert all(r.status == "graded" for r in records.values()), {s: r.reason for s, r in records.items()}
    assert grading.read_grades(db_url, AID) == plain_scores


def test_postgresql_gives_the_same_scores(mixed_class, plain_scores, tmp_path):
    if not pg.available():
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL binaries are missing on CI (make venv installs them)")
        pytest.skip("PostgreSQL is not installed")
    with pg.server() as url:
        _course(tmp_path, mixed_class, url)
        records = grader.grade(tmp_path, AID, _options(url))
        assert all(r.status == "graded" for r in records.values())
        assert grading.read_grades(url, AID) == plain_scores


def test_a_second_run_regrades_only_what_changed(sqlite_run):
    root, db_url, _ = sqlite_run
    jobs, current = grader.plan(root, AID, db_url)
    assert jobs == [] and len(current) == len(grader.plan(root, AID, db_url, force=True)[0])
    nb_path = root / "submitted" / "blank" / AID / f"{BY_ID[AID].notebook}.ipynb"
    nb_path.write_text(nb_path.read_text().replace("YOUR CODE HERE", "YOUR CODE HERE (edited)", 1))
    jobs, _ = grader.plan(root, AID, db_url)
    assert [j["student"] for j in jobs] == ["blank"]


def _graded_count(db_url):
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.select(sa.func.count()).select_from(state.TABLE)).scalar()
    except sa.exc.OperationalError:
        return 0
    finally:
        engine.dispose()


def test_sigkill_halfway_then_rerun_gives_exactly_one_clean_grade_each(mixed_class, plain_scores, tmp_path):
    db_url = state.sqlite_url(tmp_path)
    _course(tmp_path, mixed_class, db_url)
    cmd = [sys.executable, "-m", "autograder", "grade", AID, "--course", str(tmp_path), "--workers", "1", "--quiet"]
    proc = subprocess.Popen(cmd, env=nbgrader_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while _graded_count(db_url) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, "the run finished before it could be killed"
    descendants = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    gone, alive = psutil.wait_procs(descendants, timeout=10)
    assert not alive, f"processes outlived the killed grader: {alive}"
    assert 2 <= _graded_count(db_url) < len(mixed_class)

    records = grader.grade(tmp_path, AID, _options(db_url))
    assert set(records) == set(mixed_class)
    assert all(r.status == "graded" for r in records.values())
    assert grading.read_grades(db_url, AID) == plain_scores
    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "select count(*) from grade g join submitted_notebook n on g.notebook_id = n.id")).scalar()
        cells = conn.execute(sa.text("select count(*) from grade_cells")).scalar()
    engine.dispose()
    assert rows == cells * len(mixed_class), "a submission has a missing or a duplicated grade"


def test_grade_registers_an_assignment_that_was_never_released(mixed_class, plain_scores, tmp_path):
    """An instructor who copies source/ in and grades at once gets grades, not nbgrader's
    "No such assignment" traceback."""
    (tmp_path / "source").mkdir()
    grading.shutil.copytree(BY_ID[AID].source_path().parent, tmp_path / "source" / AID)
    ref = {"reference": mixed_class["reference"]}
    for student, nb in ref.items():
        grading.submit(tmp_path, AID, student, nb)
    records = grader.grade(tmp_path, AID, _options(state.sqlite_url(tmp_path)))
    assert records["reference"].status == "graded", records["reference"].reason
    assert grading.read_grades(state.sqlite_url(tmp_path), AID)["reference"] == plain_scores["reference"]


def test_grade_without_the_source_says_in_one_line_what_to_run(mixed_class, tmp_path):
    grading.submit(tmp_path, AID, "reference", mixed_class["reference"])
    cmd = [sys.executable, "-m", "autograder", "grade", AID, "--course", str(tmp_path), "--quiet"]
    out = subprocess.run(cmd, env=nbgrader_env(), capture_output=True, text=True)
    assert out.returncode != 0
    assert out.stderr.strip().splitlines() == [
        f"{AID} is not in the course at {tmp_path} (no source/{AID}): "
        f"run `autograder release {AID} --course {tmp_path}` first"]


def test_course_defaults_to_the_current_folder_when_it_holds_source(tmp_path, monkeypatch):
    from autograder.outside import cli
    from autograder.outside.course import ROOT

    monkeypatch.chdir(tmp_path)
    assert cli.default_course() == str(ROOT)
    (tmp_path / "source").mkdir()
    assert cli.default_course() == str(tmp_path)


# --- per-student hidden draws ---
SEEDED = "1.4-broadcasting"  # a unit whose hidden test cells draw per-student cases
# What the checks draw from, printed after trying to choose it (the grader's seed is set once).
PROBE = ("from autograder.inside import checks\n"
         "try:\n    checks.set_student_seed(0)\nexcept RuntimeError:\n    print('seed refused')\n"
         "print('student seed:', checks.student_seed('probe'))")


def _printed_seed(root, student):
    a = BY_ID[SEEDED]
    nb = grading.nbformat.read(root / "autograded" / student / a.id / f"{a.notebook}.ipynb", as_version=4)
    text = "".join(o.get("text", "") for o in grading.cell(nb, "broadcast_shape").outputs)
    assert "seed refused" in text, f"{student}'s notebook chose its own seed: {text!r}"
    return int(text.split("student seed:")[1].split()[0])


@pytest.mark.parametrize("cluster", [None, "local:1"], ids=["pool", "dask"])
def test_each_student_draws_own_hidden_cases_and_the_reference_keeps_full_marks(cluster, tmp_path):
    """The grader hands the kernel the seed of (assignment, student): the reference solution,
    with a cell that prints what the checks draw from, graded as two students, on the local pool
    and through Dask."""
    from autograder.inside import checks
    from autograder.outside import sandbox

    nb = grading.reference_submission(SEEDED)
    grading.cell(nb, "broadcast_shape").source += "\n" + PROBE
    students = ["ada", "grace"]
    db_url = state.sqlite_url(tmp_path)
    grading.prepare_course(tmp_path, SEEDED, db_url)
    for student in students:
        grading.submit(tmp_path, SEEDED, student, nb)
    records = grader.grade(tmp_path, SEEDED, _options(db_url, cluster=cluster))
    assert all(r.status == "graded" for r in records.values()), {s: r.reason for s, r in records.items()}
    for student, scores in grading.read_grades(db_url, SEEDED).items():
        lost = {k: s for k, s in scores.items() if s[0] != s[1]}
        assert not lost, f"the reference solution graded as {student} lost points: {lost}"
    printed = {s: _printed_seed(tmp_path, s) for s in students}
    assert printed == {s: checks.mix_seed(sandbox.seed_for(SEEDED, s), "probe") for s in students}
    assert len(set(printed.values())) == len(students)


def test_a_worker_opens_the_gradebook_on_one_engine_and_each_opening_still_works(tmp_path, monkeypatch):
    """nbgrader opens the gradebook about ten times a notebook; in a worker every opening takes the one
    engine of the database (worker._share_gradebook_engines), which nbgrader's close disposes of and
    the next opening uses again. Only the first opening on an engine makes the missing tables; a
    second database, on its own engine, gets its own."""
    from nbgrader import api

    from autograder.outside import state, worker

    made = []
    monkeypatch.setattr(api, "create_engine", api.create_engine)  # put back after the test
    monkeypatch.setattr(api.Base.metadata, "create_all", lambda bind, **kwargs: (
        made.append(bind), sa.MetaData.create_all(api.Base.metadata, bind=bind, **kwargs)))
    worker._share_gradebook_engines()
    url = state.sqlite_url(tmp_path)
    with api.Gradebook(url) as gb:
        gb.add_student("ada")
        first = gb.engine
    with api.Gradebook(url) as gb:
        assert gb.engine is first
        assert gb.find_student("ada").id == "ada"
        gb.add_student("bob")
    assert state.shared_engine(url, echo=False, future=True) is first
    assert made == [first]
    other = state.sqlite_url(tmp_path / "other")
    (tmp_path / "other").mkdir()
    for _ in range(2):
        with api.Gradebook(other) as gb:
            if not gb.students:
                gb.add_student("cy")
            assert [s.id for s in gb.students] == ["cy"]
    assert made == [first, state.shared_engine(other, echo=False, future=True)]
    state.save(url, "1.1-affine-logits", state.Record("bob", "f" * 64, "graded"))
    assert state.load(url, "1.1-affine-logits")["bob"].status == "graded"


def test_the_workers_that_start_while_the_assignment_is_registered_stop_when_that_fails(mixed_class, tmp_path,
                                                                                        monkeypatch):
    """The workers start (and import torch and nbgrader) while the grader registers the assignment in
    the gradebook; when registering fails, the run stops with its message and no worker is left."""
    db_url = state.sqlite_url(tmp_path)
    _course(tmp_path, {"reference": mixed_class["reference"], "blank": mixed_class["blank"]}, db_url)
    started = []
    start = grader._Worker.__init__

    def spy(self, *args, **kwargs):
        start(self, *args, **kwargs)
        started.append(self.proc)

    def refuse(*args):
        raise SystemExit("the gradebook refused the assignment")

    monkeypatch.setattr(grader._Worker, "__init__", spy)
    monkeypatch.setattr(grader, "ensure_registered", refuse)
    with pytest.raises(SystemExit, match="refused"):
        grader.grade(tmp_path, AID, _options(db_url, force=True))
    assert len(started) == 2 and all(proc.poll() is not None for proc in started)


def _spy_on_workers(monkeypatch, on_send=None):
    """Record each template the run starts and, at each job sent, the worker's pid and its parent's."""
    seen = {"templates": [], "sends": []}
    start, send = grader._Template.__init__, grader._Worker.send

    def template(self, *args, **kwargs):
        start(self, *args, **kwargs)
        seen["templates"].append(self.proc.pid)

    def spy(self, job):
        pid = self.proc.pid
        seen["sends"].append((job["student"], pid, psutil.Process(pid).ppid() if pid else None))
        seen.setdefault("sandboxes", {})[pid] = self.proc.scratch
        if on_send:
            on_send(seen)
        send(self, job)

    monkeypatch.setattr(grader._Template, "__init__", template)
    monkeypatch.setattr(grader._Worker, "send", spy)
    return seen


def test_the_workers_are_forks_of_one_template_that_warmed_up_once(mixed_class, plain_scores, tmp_path, monkeypatch):
    """nbgrader, torch and the checks' warm-up are 2.5 CPU-seconds a process: a run pays them once,
    in its template, and each worker is a fork of it, which grades as a worker of its own did."""
    db_url = state.sqlite_url(tmp_path)
    _course(tmp_path, mixed_class, db_url)
    seen = _spy_on_workers(monkeypatch)
    records = grader.grade(tmp_path, AID, _options(db_url))
    assert all(r.status == "graded" for r in records.values()), {s: r.reason for s, r in records.items()}
    assert grading.read_grades(db_url, AID) == plain_scores
    assert len(seen["templates"]) == 1
    workers = {pid for _, pid, _ in seen["sends"]}
    assert len(workers) == 2 and seen["templates"][0] not in workers
    assert {parent for _, _, parent in seen["sends"]} == set(seen["templates"])
    assert not psutil.pid_exists(seen["templates"][0]) or psutil.Process(seen["templates"][0]).status() == "zombie"
    # each worker graded in a sandbox that the template had started before its warm-up, one each
    sandboxes = list(seen["sandboxes"].values())
    assert len(set(sandboxes)) == 2 and all(s.startswith(f"agbox-{seen['templates'][0]}-") for s in sandboxes)
    assert not list(Path(tempfile.gettempdir()).glob(f"agbox-{seen['templates'][0]}-*"))


def test_a_killed_worker_takes_the_zygote_that_the_template_started_for_it_down_at_once(tmp_path):
    """The zygote is the template's child, not the worker's: its lifeline, which only the worker
    holds, ends with the worker, and the zygote kills what is below it and exits; the grader then
    removes the sandbox's folder. The template's other sandbox, for a worker not yet forked, lives on."""
    with open(tmp_path / "workers.log", "a") as log:
        template = grader._Template(log, sandboxes=(2, dict(assignment=AID, memory_mb=2048, nproc=128)))
        try:
            if os.geteuid() == 0:  # while the template warms up, its zygotes load at a lower priority
                _zygotes_seen_while_the_template_warms_up(template.proc.pid)
            worker = grader._Worker(template)
            assert worker.proc.pid is not None and worker.proc.scratch
            scratch = Path(tempfile.gettempdir()) / worker.proc.scratch
            others = [p for p in Path(tempfile.gettempdir()).glob(f"agbox-{template.proc.pid}-*") if p != scratch]
            assert scratch.is_dir() and len(others) == 1
            assert processes_with(str(scratch)) and processes_with(str(others[0]))
            # its warm-up done, it gave them back the normal priority
            assert {psutil.Process(p).nice() for p in processes_with(str(scratch))} == {0}
            deadline = time.monotonic() + 5  # (its pid comes right after the fork, before it makes its own session)
            while os.getpgid(worker.proc.pid) != worker.proc.pid and time.monotonic() < deadline:
                time.sleep(0.01)
            os.killpg(worker.proc.pid, signal.SIGKILL)  # the worker alone: its lifeline ends
            assert _gone(scratch)
            worker.kill()
            assert not scratch.exists()
            assert processes_with(str(others[0]))
        finally:
            template.close()
    assert _gone(others[0]) and not others[0].exists()


def _zygotes_seen_while_the_template_warms_up(template_pid):
    """Both zygotes, seen at the lower priority. The template starts both sandboxes before its
    warm-up and gives them the normal priority after it; once both are launched it is stopped
    (SIGSTOP) until they run Python, so that a loaded machine cannot let the warm-up end first."""
    deadline = time.monotonic() + 60
    while len({_scratch(pid) for pid in processes_with(f"agbox-{template_pid}-")} - {None}) < 2:
        assert time.monotonic() < deadline, "the template did not start its two sandboxes"
        time.sleep(0.01)
    os.kill(template_pid, signal.SIGSTOP)
    try:
        while len(zygotes := _zygotes(template_pid)) < 2:
            assert time.monotonic() < deadline, "the zygotes did not start"
            time.sleep(0.01)
        assert {psutil.Process(p).nice() for p in zygotes} == {sandbox.EARLY_NICE}
    finally:
        os.kill(template_pid, signal.SIGCONT)


def _scratch(pid):
    """The sandbox folder (``agbox-...``) on a process's command line, or None."""
    try:
        found = re.search(rf"{sandbox.PREFIX}-\d+-[^/\s]+", " ".join(psutil.Process(pid).cmdline()))
    except psutil.NoSuchProcess:
        return None
    return found and found.group()


def _zygotes(template_pid):
    """The zygote processes of the template's sandboxes (once they run Python, after the launcher and bubblewrap)."""
    found = []
    for pid in processes_with(f"agbox-{template_pid}-"):
        try:
            if psutil.Process(pid).cmdline()[1:4] == ["-P", "-m", "autograder.inside.zygote"]:
                found.append(pid)
        except psutil.NoSuchProcess:
            pass
    return found


def _gone(scratch, seconds=5.0):
    """True when no process names ``scratch`` within ``seconds``."""
    deadline = time.monotonic() + seconds
    while processes_with(str(scratch)):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_template_killed_mid_run_is_replaced_and_the_batch_finishes(mixed_class, tmp_path, monkeypatch):
    """Its workers die with it (their parent-death signal): the job in flight is reported as a
    crash, and a new template's worker grades the rest."""
    db_url = state.sqlite_url(tmp_path)
    _course(tmp_path, {k: mixed_class[k] for k in ("reference", "blank")}, db_url)
    grading.submit(tmp_path, AID, "another-blank", mixed_class["blank"])

    def kill_the_first_template(seen):
        if len(seen["sends"]) == 1:
            os.kill(seen["templates"][0], signal.SIGKILL)

    seen = _spy_on_workers(monkeypatch, kill_the_first_template)
    options = _options(db_url)
    options.workers = 1
    records = grader.grade(tmp_path, AID, options)
    first = seen["sends"][0][0]
    assert (records[first].status, records[first].reason) == (
        "failed", "the grading worker crashed while running this notebook")
    assert all(r.status == "graded" for s, r in records.items() if s != first), records
    assert len(seen["templates"]) == 2 and len(records) == 3


# Loaded by every Python process of the run (on PYTHONPATH): in the grading worker, the first
# message to a kernel raises, once, as stop 24's race did (the codec's table read while it changed).
FAULT_ONCE = '''
import os
flag = os.environ.get("AUTOGRADER_TEST_FAULT")
try:
    from autograder.outside import verdicts
except ImportError:  # (the sandbox has no grader)
    verdicts = None
if flag and verdicts is not None:
    send = verdicts.Remote._send

    def _send(self, *args, **kwargs):
        try:
            os.remove(flag)
        except FileNotFoundError:
            return send(self, *args, **kwargs)
        raise RuntimeError("dictionary changed size during iteration")

    verdicts.Remote._send = _send
'''


def test_a_fault_of_the_graders_own_code_is_reported_and_graded_again_at_the_next_run(mixed_class, plain_scores,
                                                                                     tmp_path, monkeypatch):
    """The grader's own code failing while it grades is no verdict on the student (before, the cell
    scored 0 as if the student's code had raised): the notebook is recorded as not graded, with
    the reason, and the next run grades it, without --force."""
    from autograder.outside.execute import GRADER_FAULT

    site, flag = tmp_path / "site", tmp_path / "fault-once"
    site.mkdir()
    (site / "sitecustomize.py").write_text(FAULT_ONCE)
    flag.touch()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("AUTOGRADER_TEST_FAULT", str(flag))
    root = tmp_path / "course"
    db_url = state.sqlite_url(root)
    _course(root, {"reference": mixed_class["reference"]}, db_url)
    (first,) = grader.grade(root, AID, _options(db_url)).values()
    assert (first.status, first.reason) == ("failed", GRADER_FAULT + "RuntimeError: dictionary changed size during "
                                            "iteration (in sitecustomize.py, line 16, _send)")
    assert not flag.exists()
    (second,) = grader.grade(root, AID, _options(db_url)).values()
    assert second.status == "graded", second.reason
    assert grading.read_grades(db_url, AID)["reference"] == plain_scores["reference"]

"""``autograder student-repo``: a repository learners can use with no access to this one.

One student repository is written into a scratch folder, and one fresh venv (no site
packages, none of this repository on its path) installs its requirements.txt; the notebooks
then run there with the student package alone.
"""
import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import nbformat
import pytest
import yaml

import environments
import pg
from autograder.outside import build, release, solutions, student_repo
from autograder.outside.course import BY_ID, ROOT

pytestmark = pytest.mark.xdist_group("student-repo")
SOLVED, UNSOLVED = BY_ID["1.2-softmax-cross-entropy"], BY_ID["1.1-affine-logits"]
INSTRUCTOR_MODULES = ("cli", "grader", "worker", "sandbox", "verdicts", "torch_engine", "release", "collect", "feedback",
                      "report", "audit", "build", "grading", "catalogue", "student_repo", "solutions")
# Run a notebook in the venv's own kernel, errors kept as outputs; write the executed copy.
RUN = """
import sys
import tempfile
from pathlib import Path
import nbformat
from nbclient import NotebookClient
from traitlets.config import Config
from autograder.inside import output_widget
path, out = Path(sys.argv[1]), sys.argv[2]
nb = nbformat.read(path, as_version=4)
nb.cells.insert(0, nbformat.v4.new_code_cell("import sys; print(sys.executable)"))
# on ipc, in a folder of its own: no tcp port for another test's kernel to take (tests/kernels.py)
with tempfile.TemporaryDirectory() as folder:
    config = Config({"KernelManager": {"transport": "ipc", "ip": folder + "/kernel"}})
    # a cell may wait up to 600 s for progress.ipynb's background runs (progress.wait(600))
    # with the package's Output-widget mimic: nbclient's own can leave a cell's reply unread until its
    # time limit (autograder/inside/output_widget.py), which once made this run take 670 s
    output_widget.install(NotebookClient(nb, timeout=660, allow_errors=True, kernel_name="python3", config=config,
                                         resources={"metadata": {"path": str(path.parent)}})).execute()
nbformat.write(nb, out)
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return student_repo.write(tmp_path_factory.mktemp("student") / "course-student",
                              url="https://github.com/example-school/nc-notebooks")


@pytest.fixture(scope="module")
def venv(repo, tmp_path_factory):
    """A fresh venv with the student repository's requirements.txt installed, as a learner does."""
    python = environments.create(tmp_path_factory.mktemp("learner") / "venv")
    started = time.perf_counter()
    environments.pip_install(python, (repo / "requirements.txt").read_text().splitlines(), cwd=repo)
    print(f"\nfresh-venv install of the student requirements: {time.perf_counter() - started:.0f} s")
    return python


def _errors(nb):
    return [(c.get("id"), o) for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]


def _run(venv, path, tmp_path):
    out = tmp_path / f"ran-{path.name}"
    done = environments.run(venv, RUN, path.parent, path, out)
    assert done.returncode == 0, done.stderr[-3000:]
    return nbformat.read(out, as_version=4)


# --- what the repository holds ------------------------------------------------------------
def test_no_solution_hidden_test_or_engine_ref(repo):
    assert student_repo.leaks(repo) == []
    assert not (repo / "source").exists() and not (repo / "engine_ref").exists()
    for a in (SOLVED, UNSOLVED):
        assert release.leaks(a, ROOT) == []
        assert (repo / "release" / a.id / f"{a.notebook}.ipynb").read_bytes() == a.release_path().read_bytes()


def test_progress_notebook_opens_unmodified(repo):
    meta = nbformat.read(repo / "progress.ipynb", as_version=4).metadata
    assert meta == {"kernelspec": build.KERNELSPEC, "language_info": build.LANGUAGE_INFO}


def test_leak_check_can_fail(repo, tmp_path):
    source = nbformat.read(SOLVED.source_path(), as_version=4)
    published = student_repo.published_lines()  # given to every student in some release notebook
    solution = sorted(release.hidden_lines(source, starts=("### BEGIN SOLUTION",)) - published)[0]
    hidden = sorted(release.hidden_lines(source, starts=("### BEGIN HIDDEN TESTS",)) - published)[0]
    engine = sorted(release.engine_ref_lines() - published)[0]
    for where, text in [("autograder/inside/checks.py", solution), ("README.md", engine), ("LICENSE", hidden),
                        ("start", "### BEGIN HIDDEN TESTS"), ("engine_ref/__init__.py", "")]:
        copy = tmp_path / where.replace("/", "_")
        shutil.copytree(repo, copy)
        (copy / where).parent.mkdir(exist_ok=True)
        with open(copy / where, "a") as f:
            f.write(f"\n{text}\n")
        assert student_repo.leaks(copy), f"a leak into {where} went unnoticed"
    nb = nbformat.read(repo / "release" / SOLVED.id / f"{SOLVED.notebook}.ipynb", as_version=4)
    nb.cells[1].source += "\nimport engine_ref"
    copy = tmp_path / "notebook"
    shutil.copytree(repo, copy)
    nbformat.write(nb, copy / "release" / SOLVED.id / f"{SOLVED.notebook}.ipynb")
    assert student_repo.leaks(copy)


def test_the_package_is_the_checks_and_what_they_need(repo):
    modules = {p.relative_to(repo / "autograder").with_suffix("").as_posix().replace("/", ".")
               for p in (repo / "autograder").rglob("*.py")}
    inside = {f"inside.{p.stem}" for p in (ROOT / "autograder" / "inside").glob("*.py")}
    assert modules == {"__init__", "inside.__init__", "outside.__init__", *student_repo.package_modules()}
    assert inside | {"outside.oracles"} <= modules and not {m.split(".")[-1] for m in modules} & set(INSTRUCTOR_MODULES)
    for path in (repo / "autograder").rglob("*.py"):
        text = path.read_text()
        assert "import nbgrader" not in text and "from nbgrader" not in text, path
    project = (repo / "pyproject.toml").read_text()
    assert "[project.scripts]" not in project
    assert 'packages = ["autograder", "autograder.inside", "autograder.outside"]' in project


def test_environment_and_requirements_pin_what_pyproject_pins(repo):
    specs, pip = environments.check_pins(yaml.safe_load((repo / "environment.yml").read_text()))
    assert set(specs) == set(student_repo.STUDENT_PACKAGES) and "." in pip
    lines = [l for l in (repo / "requirements.txt").read_text().splitlines() if l and not l.startswith("#")]
    from_pip, _ = environments.environment_requirements({"dependencies": [{"pip": lines}]})
    assert from_pip == specs, "requirements.txt names the packages of environment.yml, with the same pins"
    assert environments.TORCH_CPU_INDEX in lines and "." in lines


def test_readme_badge_points_at_the_student_repository(repo, tmp_path):
    readme = (repo / "README.md").read_text()
    assert "(https://mybinder.org/v2/gh/example-school/nc-notebooks/HEAD?urlpath=lab/tree/release)" in readme
    assert (repo / "LICENSE").read_text().strip()
    with pytest.raises(student_repo.StudentRepoError, match="GitHub"):
        student_repo.write(tmp_path / "x", url="https://example.org/not-github")


def test_rewrite_keeps_git_and_refuses_other_folders(repo, tmp_path):
    other = tmp_path / "other"
    (other / "notes").mkdir(parents=True)
    with pytest.raises(student_repo.StudentRepoError, match="not a student repository"):
        student_repo.write(other)
    again = tmp_path / "again"
    shutil.copytree(repo, again)
    (again / ".git").mkdir()
    (again / "release" / "stale.ipynb").write_text("{}")
    student_repo.write(again, url="https://github.com/example-school/nc-notebooks")
    assert (again / ".git").is_dir() and not (again / "release" / "stale.ipynb").exists()


def test_cli_writes_the_repository(tmp_path):
    done = subprocess.run([str(ROOT / ".venv/bin/autograder"), "student-repo", str(tmp_path / "s"), SOLVED.id,
                           "--url", "https://github.com/a/b"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in (tmp_path / "s" / "release").iterdir()] == [SOLVED.id]


# --- in a fresh venv ----------------------------------------------------------------------
def test_fresh_venv_has_the_student_package_only(repo, venv):
    done = environments.run(venv, """
import importlib.util, autograder.inside.checks, autograder, torch
print(autograder.__file__)
print(torch.__version__)
print([m for m in ("engine_ref", "autograder.outside.cli", "autograder.outside.grader") if importlib.util.find_spec(m)])
""", repo.parent)
    assert done.returncode == 0, done.stderr
    where, torch_version, instructor = done.stdout.split("\n")[:3]
    assert where.startswith(str(venv.parent.parent)) and "site-packages" in where
    assert torch_version == "2.13.0+cpu" and instructor == "[]"


SERVER_EXTENSIONS = """
import json
from jupyter_core.paths import jupyter_config_path
from jupyter_server.extension.config import ExtensionConfigManager
print(json.dumps(ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions()))
"""


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def test_student_environment_enables_the_assignment_list_and_validate_only(repo, venv, tmp_path):
    """JupyterLab started by the repository's `start` script, on loopback: the assignment list's
    and Validate's handlers answer, formgrader's and the course list's do not exist, and the page
    disables the formgrader, course-list and create-assignment plugins."""
    port, token = pg.free_port(), "student-repo-test"
    env = {**environments.clean_env(), "HOME": str(tmp_path), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    lab = subprocess.Popen([str(repo / "start"), str(venv.parent / "jupyter"), "lab", "--no-browser", "--allow-root",
                            "--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={token}"],
                           cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if _get(f"{base}/api/status?token={token}")[0] == 200:
                    break
            except OSError:
                pass
            assert lab.poll() is None and time.monotonic() < deadline, "JupyterLab did not start"
            time.sleep(1)
        assert _get(f"{base}/assignments?token={token}")[0] != 404  # assignment list (400: no course given)
        assert _get(f"{base}/assignments/validate?token={token}")[0] == 405  # Validate takes POST only
        assert _get(f"{base}/formgrader?token={token}")[0] == 404
        assert _get(f"{base}/formgraders?token={token}")[0] == 404  # the course list
        status, page = _get(f"{base}/lab?token={token}")
        config = json.loads(re.search(r'<script id="jupyter-config-data"[^>]*>(.*?)</script>', page, re.S)[1])
        assert status == 200 and sorted(config["disabledExtensions"]) == sorted(student_repo.LAB_PLUGINS_OFF)
    finally:
        lab.terminate()
        lab.wait(30)
    # Without start, as `make lab` runs the course repository, every nbgrader extension is on.
    course = environments.run(venv, SERVER_EXTENSIONS, repo)
    assert all(json.loads(course.stdout)[ext] for ext in student_repo.SERVER_EXTENSIONS)


def test_solved_notebook_passes_every_visible_check(repo, venv, tmp_path):
    path = solutions.write(SOLVED.id, repo / "solutions-check")
    ran = _run(venv, path, tmp_path)
    assert ran.cells[0].outputs[0]["text"].startswith(str(venv.parent.parent)), "the venv's own kernel ran it"
    assert _errors(ran) == []


def test_unsolved_notebook_fails_with_the_unwritten_exercise_messages(repo, venv, tmp_path):
    ran = _run(venv, repo / "release" / UNSOLVED.id / f"{UNSOLVED.notebook}.ipynb", tmp_path)
    tests = [c for c in ran.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"]
    errors = dict(_errors(ran))
    functions = {c.id for c in ran.cells if c.metadata.get("nbgrader", {}).get("solution")
                 and c.source.startswith(("def ", "class "))}
    for cell in tests:
        assert cell.id in errors, f"{cell.id} passed with nothing written"
        exercise, message = cell.id.removeprefix("test_"), errors[cell.id]["evalue"]
        assert message.startswith(f"[{exercise}]"), message
        if exercise in functions:  # a concept check's message asks for the value instead
            assert "NotImplementedError" in message, message


def test_progress_notebook_runs_headless(repo, venv, tmp_path):
    """progress.ipynb in the learner's venv: one unit solved, one untouched."""
    work = tmp_path / "learner"
    work.mkdir()
    shutil.copy(repo / "progress.ipynb", work)
    solved = solutions.solutions_notebook(SOLVED)
    (work / "release" / SOLVED.id).mkdir(parents=True)
    nbformat.write(solved, work / "release" / SOLVED.id / f"{SOLVED.notebook}.ipynb")
    shutil.copytree(repo / "release" / UNSOLVED.id, work / "release" / UNSOLVED.id)
    nb = nbformat.read(work / "progress.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("assert progress.wait(600) is not None"))
    nbformat.write(nb, work / "run-progress.ipynb")
    ran = _run(venv, work / "run-progress.ipynb", tmp_path)
    assert _errors(ran) == []
    shown = [o for o in ran.cells[-2].outputs if "text/html" in o.get("data", {})]
    assert shown, "the report replaced the placeholder"
    report = shown[-1]["data"]["text/plain"]
    rows, unit = [], None
    for line in report.splitlines():
        if not line.startswith(" "):
            unit = line.split()[0]
            bar = line[line.index("[") + 1:line.index("]")]
            assert bar == ("#" if unit == SOLVED.id else ".") * 30, line
        else:
            exercise, status, *message = line.split(None, 2)
            rows.append((unit, exercise, status, message[0] if message else ""))
    assert [u for u in dict.fromkeys(r[0] for r in rows)] == [UNSOLVED.id, SOLVED.id]
    for a in (SOLVED, UNSOLVED):
        assert [r[1] for r in rows if r[0] == a.id] == _test_ids(a)
    for unit, exercise, status, message in rows:
        if unit == SOLVED.id:
            assert status == "passes", (exercise, message)
        else:
            assert status == "fails" and message.startswith(f"[{exercise}]"), (exercise, message)


def _test_ids(a):
    return [c.metadata.nbgrader["grade_id"].removeprefix("test_")
            for c in nbformat.read(a.release_path(), as_version=4).cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")]

"""The students' side: notebooks that open clean, the student repository, solutions, progress."""
import re
import subprocess

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

import kernels
from autograder.inside import output_widget
from autograder.outside import build, release, solutions, template
from autograder.outside.course import ROOT, authored

UNITS = authored()


@pytest.fixture(scope="module")
def kernel_metadata():
    """What JupyterLab writes into a notebook when its kernel starts: the kernelspec's name,
    display name and language, and the kernel's language_info (from its kernel_info reply)."""
    km, kc = kernels.start_new_kernel()
    try:
        kc.kernel_info()
        language_info = kc.get_shell_msg(timeout=30)["content"]["language_info"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    spec = KernelSpecManager().get_kernel_spec("python3")
    return {"kernelspec": {"name": "python3", "display_name": spec.display_name, "language": spec.language},
            "language_info": language_info}


@pytest.mark.parametrize("layer", ["source", "release"])
def test_notebooks_open_unmodified(kernel_metadata, layer):
    """JupyterLab sets both keys on kernel start and marks the notebook modified unless the new
    value deep-equals the old one: a notebook opened and closed unrun must not ask to save."""
    for a in UNITS:
        path = a.source_path() if layer == "source" else a.release_path()
        meta = nbformat.read(path, as_version=4).metadata
        for key, want in kernel_metadata.items():
            assert meta[key] == want, f"{path}: metadata {key} is {meta[key]!r}; the kernel reports {want!r}"


def test_build_metadata_is_what_ipykernel_reports(kernel_metadata):
    assert build.KERNELSPEC == kernel_metadata["kernelspec"]
    assert build.LANGUAGE_INFO == kernel_metadata["language_info"], (
        "the notebooks are built for another Python than this machine's: update build.PYTHON_VERSION "
        "and the python pin in environment.yml, then `make build`")


# --- a blank notebook runs from top to bottom, and its failures read in one glance ---------
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module", params=[a.id for a in UNITS])
def blank_run(request, tmp_path_factory):
    """A unit's release notebook, unwritten, run top to bottom in a real kernel as Run All runs it."""
    a = next(u for u in UNITS if u.id == request.param)
    nb = nbformat.read(a.release_path(), as_version=4)
    # nbclient's own Output-widget mimic can leave a cell's reply unread until its time limit
    output_widget.install(NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                                         config=kernels.ipc_config(), resources={"metadata": {"path": str(tmp_path_factory.mktemp("blank"))}})).execute()
    return nb


def _errors(cell):
    return [o for o in cell.get("outputs", []) if o.output_type == "error"]


def test_a_blank_notebook_fails_only_in_test_cells_and_shows_its_figure(blank_run):
    """JupyterLab's Run All stops at a cell that raises, but for a test cell (tagged
    raises-exception): any other cell that fails while exercises are unwritten hides the rest of
    the notebook, the figure included."""
    for cell in blank_run.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        if meta.get("grade"):
            assert "raises-exception" in cell.metadata.get("tags", []), meta["grade_id"]
        else:
            assert not _errors(cell), f"{meta.get('grade_id')}: {[ANSI.sub('', e.evalue) for e in _errors(cell)]}"
    figures = [c for c in blank_run.cells if c.metadata.get("nbgrader", {}).get("grade_id", "").endswith("figure")]
    assert figures and all(c.outputs for c in figures)


def test_every_failure_of_a_blank_notebook_starts_with_its_task_after_the_students_frames_only(blank_run):
    solution_ids = [c.metadata["nbgrader"]["grade_id"] for c in blank_run.cells
                    if c.metadata.get("nbgrader", {}).get("solution")]
    failed = 0
    for cell in blank_run.cells:
        meta = cell.metadata.get("nbgrader", {})
        for error in _errors(cell) if meta.get("grade") else []:
            failed += 1
            task = template.task_of(meta["grade_id"], solution_ids)
            text = ANSI.sub("", "\n".join(error.traceback))
            assert text.strip().split("\n")[-1].startswith(f"{error.ename}: [{task}] "), (meta["grade_id"], text)
            assert "autograder/" not in text and "failed resolving arguments" not in text, text
    assert failed


# --- autograder release-solutions ---------------------------------------------------------
def test_solutions_notebook_has_every_answer_and_no_hidden_test(tmp_path):
    for a in UNITS:
        path = solutions.write(a.id, tmp_path)
        assert path == tmp_path / a.id / f"{a.notebook}.ipynb"
        nb = nbformat.read(path, as_version=4)
        source = {c.id: c for c in nbformat.read(a.source_path(), as_version=4).cells}
        release_ids = [c.id for c in nbformat.read(a.release_path(), as_version=4).cells]
        assert [c.id for c in nb.cells if c.id != "solutions-note"] == release_ids
        assert solutions.leaks(nb, a) == []
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            assert "YOUR CODE HERE" not in cell.source and "YOUR ANSWER HERE" not in cell.source
            if meta.get("solution") and cell.cell_type == "markdown":
                assert cell.source == source[cell.id].source, "the explain cell's model answer"
            if meta.get("grade") and cell.cell_type == "code":
                full = source[cell.id].source
                assert "HIDDEN" not in cell.source
                # a test cell with hidden tests loses them; one without is published whole
                assert len(cell.source) < len(full) if "### BEGIN HIDDEN TESTS" in full else cell.source == full


def test_solutions_leak_check_can_fail():
    a = UNITS[0]
    nb = solutions.solutions_notebook(a)
    hidden = sorted(release.hidden_lines(nbformat.read(a.source_path(), as_version=4),
                                         starts=("### BEGIN HIDDEN TESTS",)))[0]
    test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code")
    test.source += "\n" + hidden
    assert solutions.leaks(nb, a)


def test_release_solutions_cli(tmp_path):
    a = UNITS[0]
    done = subprocess.run([str(ROOT / ".venv/bin/autograder"), "release-solutions", a.id, "--out", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / a.id / f"{a.notebook}.ipynb").exists()

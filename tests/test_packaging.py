"""The environment files agree, and the repo's commands are wired as the README says."""
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

import environments
import scheduling
from environments import check_pins, environment_requirements, pyproject_requirements

ROOT = Path(__file__).resolve().parent.parent


def test_environment_yml_names_the_same_packages_and_pins_as_pyproject():
    specs, _ = check_pins(yaml.safe_load((ROOT / "environment.yml").read_text()))
    assert specs.keys() == pyproject_requirements().keys()


def test_check_pins_can_fail():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    for old, new in [("jupyterlab>=4,<5", "jupyterlab>=4"), ("python=3.11.7", "python=3.11"),
                     ("torch==2.13.0", "torch==2.12.1"), ("matplotlib", "pandas")]:
        broken = yaml.safe_load(yaml.safe_dump(env).replace(old, new))
        with pytest.raises(AssertionError):
            check_pins(broken)


def test_torch_is_pinned_everywhere():
    assert '"torch==2.13.0"' in (ROOT / "pyproject.toml").read_text()
    assert "torch==2.13.0" in (ROOT / "environment.yml").read_text()


def test_binder_installs_the_repo():
    _, pip = environment_requirements(yaml.safe_load((ROOT / "environment.yml").read_text()))
    assert "-e ." in pip


def test_environment_pip_section_resolves_in_a_fresh_venv(tmp_path):
    """pip in a fresh venv resolves the pip section to torch 2.13.0 CPU-only and this repository.

    On Binder conda has installed every other package first, so pip adds exactly these two
    (`--no-deps`). A dry run: the student repository's test installs the same torch for real
    (tests/test_student_repo.py), and `make venv` installs the rest."""
    _, pip = environment_requirements(yaml.safe_load((ROOT / "environment.yml").read_text()))
    python = environments.create(tmp_path / "venv")
    report = environments.pip_install(python, pip, cwd=ROOT, options=["--no-deps", "--dry-run", "--report", "-"])
    got = {item["metadata"]["name"]: item["metadata"]["version"] for item in json.loads(report)["install"]}
    assert got == {"torch": "2.13.0+cpu", "neural-computation-course": "0.1.0"}, got


def test_ci_runs_make_test():
    lines = [l for l in (ROOT / ".ci/run").read_text().splitlines() if l and not l.startswith("#")]
    assert lines[-1] == "make test"


def test_makefile_puts_the_venv_first_on_path():
    text = (ROOT / "Makefile").read_text()
    assert "export PATH := $(VENV)/bin:$(PATH)" in text
    for target in ("demo:", "test:", "build:", "lab:"):
        assert target in text


@pytest.mark.xdist_group("grouping")
def test_xdist_groups_reach_one_worker(request):
    """`make test` runs `--dist loadgroup` so that a group's shared work (each unit's catalogue,
    graded once for all its tests) happens once; a pytest that drops the group from the node id
    (9.2, pytest-xdist issue #1386) does it on every worker."""
    if not request.config.getoption("loadgroup", default=False):
        pytest.skip("not run with --dist loadgroup")
    assert request.node.nodeid.endswith("@grouping"), request.node.nodeid


def test_every_xdist_group_has_its_place_in_the_longest_first_order(request):
    """A group missing from scheduling.LONGEST_FIRST starts after every listed one, however long it is."""
    groups = {scheduling.xdist_group(item) for item in request.session.items} - {None}
    assert groups <= set(scheduling.LONGEST_FIRST), sorted(groups - set(scheduling.LONGEST_FIRST))
    assert len(set(scheduling.LONGEST_FIRST)) == len(scheduling.LONGEST_FIRST)


def test_a_grading_worker_reads_notebooks_without_compiling_the_iri_grammars():
    """jsonschema's "iri" checker (rfc3987_syntax) compiles lark grammars at import, 1.5 CPU-seconds
    that each grading worker and each `autograder` command paid before reading its first notebook."""
    code = ("import sys, autograder.outside.worker, nbformat, jsonschema; "
            "assert 'lark' not in sys.modules and 'iri' not in jsonschema.FormatChecker.checkers")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)

"""The environment files agree, and the repo's commands are wired as the README says."""
import json
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from autograder import build

import venvs

ROOT = Path(__file__).resolve().parent.parent
NOT_PACKAGES = {"python", "pip"}


def pyproject_requirements():
    """pyproject.toml's dependencies by name (extras dropped: conda's psycopg is psycopg[binary])."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {r.name.lower(): r.specifier for r in map(Requirement, project["dependencies"])}


def environment_requirements(env):
    """An environment.yml's packages by name, conda's and its pip section's, and the pip lines.

    Conda's match spec `name>=4,<5` reads as a pip specifier; `name=1.2` (conda's "1.2.*")
    would not, and no package here is pinned that way.
    """
    conda = [d for d in env["dependencies"] if isinstance(d, str) and d.split("=")[0] not in NOT_PACKAGES]
    pip = next((d["pip"] for d in env["dependencies"] if isinstance(d, dict)), [])
    specs = {}
    for line in conda + [l for l in pip if not l.startswith("-")]:
        req = Requirement(line)
        assert req.name.lower() not in specs, f"{req.name} is named twice"
        specs[req.name.lower()] = req.specifier
    return specs, pip


def check_pins(env):
    """Every package of an environment.yml is in pyproject.toml, with the same pin; python is
    the version the notebooks' metadata names, and torch comes from the CPU-only index."""
    specs, pip = environment_requirements(env)
    want = pyproject_requirements()
    for name, spec in specs.items():
        assert name in want, f"environment.yml names {name}, pyproject.toml does not"
        assert spec == want[name], f"{name}: environment.yml pins {spec or 'nothing'}, pyproject.toml {want[name] or 'nothing'}"
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert python == f"python={build.PYTHON_VERSION}", "pin the Python that autograder/build.py writes into the notebooks"
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert build.PYTHON_VERSION in SpecifierSet(requires)
    assert venvs.TORCH_CPU_INDEX in pip and "torch==2.13.0" in pip, "torch comes from PyTorch's CPU-only wheel index"
    assert "pytorch" not in specs and "pytorch-cpu" not in specs, "torch comes from pip, not conda"
    return specs, pip


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
    python = venvs.create(tmp_path / "venv")
    report = venvs.pip_install(python, pip, cwd=ROOT, options=["--no-deps", "--dry-run", "--report", "-"])
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

"""The environment files agree, and the repo's commands are wired as the README says."""
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
# Binder installs a CPU-only torch from conda-forge, where the package has another name.
CONDA_TO_PIP = {"pytorch-cpu": "torch"}
NOT_PACKAGES = {"python", "pip"}


def _name(requirement):
    return re.split(r"[<>=!~ \[]", requirement.strip(), maxsplit=1)[0].lower()


def test_environment_yml_names_the_same_packages_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pip_names = {_name(r) for r in project["dependencies"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda_names = {CONDA_TO_PIP.get(_name(d), _name(d)) for d in env["dependencies"] if isinstance(d, str)}
    assert conda_names - NOT_PACKAGES == pip_names


def test_torch_is_pinned_everywhere():
    assert '"torch==2.13.0"' in (ROOT / "pyproject.toml").read_text()
    assert "pytorch-cpu=2.13.0" in (ROOT / "environment.yml").read_text()


def test_binder_installs_the_repo():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip_section


def test_ci_runs_make_test():
    lines = [l for l in (ROOT / ".ci/run").read_text().splitlines() if l and not l.startswith("#")]
    assert lines[-1] == "make test"


def test_makefile_puts_the_venv_first_on_path():
    text = (ROOT / "Makefile").read_text()
    assert "export PATH := $(VENV)/bin:$(PATH)" in text
    for target in ("demo:", "test:", "build:", "lab:"):
        assert target in text

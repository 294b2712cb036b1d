"""Environment files and fresh virtual environments: what a learner or Binder would install.

A fresh venv sees none of this repository (no `--system-site-packages`, no PYTHONPATH, run from
outside the repository). pip's own cache is reused, and `--no-compile` skips byte-compiling
torch's thousands of files, which halves the install time.
"""
import os
import subprocess
import sys
import tempfile
import tomllib
import venv
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from autograder.outside import build
from autograder.outside.student_repo import TORCH_CPU_INDEX  # the tests install without it: see pip_install

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
    for line in conda + [l for l in pip if not l.startswith("-") and l != "."]:
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
    assert python == f"python={build.PYTHON_VERSION}", "pin the Python that autograder/outside/build.py writes into the notebooks"
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert build.PYTHON_VERSION in SpecifierSet(requires)
    assert TORCH_CPU_INDEX in pip and "torch==2.13.0" in pip, "torch comes from PyTorch's CPU-only wheel index"
    assert "pytorch" not in specs and "pytorch-cpu" not in specs, "torch comes from pip, not conda"
    return specs, pip


def clean_env():
    """os.environ without this repository's venv on PATH and without PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    ours = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != ours)
    return env


def create(path):
    """A fresh venv at ``path`` with pip; returns its python."""
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return Path(path) / "bin" / "python"


def pip_install(python, requirement_lines, cwd, options=()):
    """Install pip requirement lines; return pip's standard output.

    The PyTorch index line is left out: this machine reaches no host but the package
    registries, and its pip finds the same CPU-only torch 2.13.0 wheel on local disk."""
    lines = [l for l in requirement_lines if l.strip() != TORCH_CPU_INDEX]
    with tempfile.TemporaryDirectory() as tmp:
        reqs = Path(tmp) / "requirements.txt"  # its relative paths are read from cwd
        reqs.write_text("\n".join(lines) + "\n")
        done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-compile", "--disable-pip-version-check", *options, "-r", str(reqs)],
                              cwd=cwd, env=clean_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def run(python, code, cwd, *args, extra_env=None):
    """Run Python code (with ``args`` as sys.argv[1:]) in the venv, from ``cwd``; return the finished process."""
    return subprocess.run([str(python), "-c", code, *map(str, args)], cwd=cwd, env={**clean_env(), **(extra_env or {})},
                          capture_output=True, text=True)

"""Fresh virtual environments for the packaging tests: what a learner or Binder would install.

A fresh venv sees none of this repository (no `--system-site-packages`, no PYTHONPATH, run from
outside the repository). pip's own cache is reused, and `--no-compile` skips byte-compiling
torch's thousands of files, which halves the install time.
"""
import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

# PyTorch's CPU-only wheel index. This machine reaches no host but the package registries; its
# pip finds the same CPU-only torch 2.13.0 wheel on local disk, so the tests install without it.
TORCH_CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"


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
    """Install pip requirement lines (the PyTorch index line left out, see TORCH_CPU_INDEX); return
    pip's standard output."""
    lines = [l for l in requirement_lines if l.strip() != TORCH_CPU_INDEX]
    with tempfile.TemporaryDirectory() as tmp:
        reqs = Path(tmp) / "requirements.txt"  # its relative paths are read from cwd
        reqs.write_text("\n".join(lines) + "\n")
        done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-compile", "--disable-pip-version-check", *options, "-r", str(reqs)],
                              cwd=cwd, env=clean_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def run(python, code, cwd):
    """Run Python code in the venv, from ``cwd``; return the finished process."""
    return subprocess.run([str(python), "-c", code], cwd=cwd, env=clean_env(), capture_output=True, text=True)

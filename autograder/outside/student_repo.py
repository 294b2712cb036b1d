"""``autograder student-repo OUT``: a self-contained repository for learners and Binder.

The course repository holds every solution (``source/``, ``engine_ref/``), so it must not be what
a Binder badge serves. The student repository holds only:

* ``release/``: the student notebooks;
* ``autograder/``: the student-side package, :mod:`autograder.inside` and the package modules
  it imports (:func:`package_modules`: today ``outside.oracles``), installable with ``pip install .``;
* ``environment.yml`` (Binder, conda) and ``requirements.txt`` (pip): Python, numpy, CPU-only
  torch, JupyterLab, nbgrader, ipywidgets and matplotlib, pinned as ``pyproject.toml`` pins them;
* ``jupyter-config/`` and ``start``: nbgrader's assignment list and Validate only (no
  formgrader, course list or create-assignment). Binder runs ``start`` before JupyterLab; a
  learner runs ``./start jupyter lab``;
* ``progress.ipynb``: the visible checks of every saved notebook, one bar per unit
  (:mod:`autograder.inside.progress`);
* ``README.md`` with a Binder badge for the repository's URL, ``LICENSE`` and ``.gitignore``.

The whole tree is checked by :func:`leaks` (no solution or hidden-test line, no marker, no line
of ``engine_ref``) before it replaces ``OUT``.
"""
import ast
import json
import re
import shutil
import tempfile
import tomllib
from pathlib import Path

import nbformat
from packaging.requirements import Requirement

from . import build, release
from .course import ROOT, authored

PACKAGE = ROOT / "autograder"
DEFAULT_URL = "https://github.com/neural-computation/course-student"
# PyTorch's CPU-only wheels: torch 2.13.0 without the CUDA libraries (conda-forge has no
# pytorch-cpu 2.13.0). docs: README.md, "Self-study on Binder".
TORCH_CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"
# What a learner's notebooks need: the checks (numpy, torch), the figures (ipywidgets,
# matplotlib), JupyterLab, and nbgrader for the assignment list and Validate.
STUDENT_PACKAGES = ("numpy", "torch", "jupyterlab", "nbgrader", "ipywidgets", "matplotlib")
SERVER_EXTENSIONS = {
    "nbgrader.server_extensions.assignment_list": True,
    "nbgrader.server_extensions.validate_assignment": True,
    "nbgrader.server_extensions.formgrader": False,
    "nbgrader.server_extensions.course_list": False,
}
LAB_PLUGINS_OFF = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:course-list",
                   "@jupyter/nbgrader:create-assignment")
# What may already be in OUT: a .git folder, and the files of an earlier student repository.
KEEP = {".git"}


class StudentRepoError(RuntimeError):
    """The student repository was not written; the message says why."""


def package_modules():
    """The modules of the student package, as ``side.name``: every module of ``inside`` and every package
    module they import, transitively."""
    todo, seen = [f"inside.{p.stem}" for p in (PACKAGE / "inside").glob("*.py") if p.stem != "__init__"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        side = name.split(".")[0]
        for node in ast.walk(ast.parse((PACKAGE / f"{name.replace('.', '/')}.py").read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                todo += [f"{side}.{node.module.split('.')[0]}"] if node.module else [f"{side}.{a.name}" for a in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autograder."):
                parts = node.module.split(".")
                todo += [".".join(parts[1:3])] if len(parts) > 2 else [f"{parts[1]}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                todo += [".".join(a.name.split(".")[1:3]) for a in node.names if a.name.startswith("autograder.")]
    return sorted(seen)


def pins():
    """``pyproject.toml``'s requirement for each student package, by name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    by_name = {Requirement(r).name.lower(): r for r in project["dependencies"]}
    return {name: by_name[name] for name in STUDENT_PACKAGES}


def binder_url(url):
    """The Binder link for a GitHub repository URL, opening ``release/`` in JupyterLab."""
    m = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", url)
    if not m:
        raise StudentRepoError(f"--url must be a GitHub repository URL, https://github.com/OWNER/NAME; got {url!r}")
    return f"https://mybinder.org/v2/gh/{m[1]}/{m[2]}/HEAD?urlpath=lab/tree/release"


def _pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    deps = ", ".join(json.dumps(pins()[n]) for n in ("numpy", "torch"))
    return f"""[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "neural-computation-checks"
version = "{project['version']}"
description = "The checks that the notebooks of Neural Computation, Losses & Reverse Mode call."
requires-python = "{project['requires-python']}"
dependencies = [{deps}]

[tool.setuptools]
packages = ["autograder", "autograder.inside", "autograder.outside"]
"""


def _requirements():
    p = pins()
    lines = ["# pip install -r requirements.txt   (Binder and conda use environment.yml)",
             "# torch: the CPU-only wheel, from PyTorch's own index", TORCH_CPU_INDEX, p["torch"]]
    return "\n".join(lines + [p[n] for n in STUDENT_PACKAGES if n != "torch"] + ["."]) + "\n"


def _environment():
    p = pins()
    conda = "".join(f"  - {p[n]}\n" for n in STUDENT_PACKAGES if n != "torch")
    return f"""# The learners' environment: Binder builds it, and so does `conda env create -f environment.yml`.
# torch is the CPU-only wheel from PyTorch's index, through pip: conda-forge has no
# pytorch-cpu 2.13.0, and the CPU-only wheel leaves out gigabytes of CUDA libraries.
# Python is the patch version the notebooks were saved with, so they open unmodified.
name: neural-computation-student
channels:
  - conda-forge
dependencies:
  - python={build.PYTHON_VERSION}
{conda}  - pip
  - pip:
      - {TORCH_CPU_INDEX}
      - {p['torch']}
      - .
"""


START = """#!/bin/bash
# Binder runs this before JupyterLab; locally: ./start jupyter lab
# It points Jupyter at jupyter-config/, which enables nbgrader's assignment list and Validate only.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export JUPYTER_CONFIG_PATH="$here/jupyter-config${JUPYTER_CONFIG_PATH:+:$JUPYTER_CONFIG_PATH}"
exec "$@"
"""

GITIGNORE = ".ipynb_checkpoints/\n__pycache__/\n*.egg-info/\nbuild/\n"

LICENSE = """The notebooks under release/ and progress.ipynb are licensed under the Creative Commons
Attribution 4.0 International License (CC BY 4.0): https://creativecommons.org/licenses/by/4.0/

The code under autograder/ is licensed under the MIT License:

Copyright (c) the authors of Neural Computation, Losses & Reverse Mode

Permission is hereby granted, free of charge, to any person obtaining a copy of this software
and associated documentation files (the "Software"), to deal in the Software without
restriction, including without limitation the rights to use, copy, modify, merge, publish,
distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the
Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING
BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM,
DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
"""


def _readme(url, assignments):
    units = "\n".join(f"| `{a.id}` | [`{a.notebook}.ipynb`](release/{a.id}/{a.notebook}.ipynb) | {a.title} |"
                      for a in assignments)
    return f"""# Neural Computation, Losses & Reverse Mode: the notebooks

[![Binder](https://mybinder.org/badge_logo.svg)]({binder_url(url)})

In these notebooks we build a reverse-mode tensor autodiff engine on NumPy: affine maps and
nonlinearities, a numerically stable softmax and cross-entropy, computation graphs and
reverse accumulation, and onwards. Each exercise is followed by a test cell that checks our
code against PyTorch and against finite differences, and says which case failed and why.

Prerequisites: Python and NumPy, first-year calculus and linear algebra.

## Working through a unit

Open a notebook under `release/` (the Binder badge opens JupyterLab there). Work top to
bottom: read the derivation, write the function in the cell marked `# YOUR CODE HERE`, then
run the test cell below it. Solutions use NumPy only; a solution that calls torch fails its
check. Save the notebook as we go: work on Binder is lost when the session ends, so download
the notebooks we want to keep (File, Download).

These checks are the visible half of the course's tests: a course using these notebooks also
grades them with hidden tests (other seeds, more shapes), which this repository does not
contain, and neither does it contain the solutions.

- **Validate** (the button in a notebook's toolbar) runs the whole notebook and lists every
  check that fails.
- **`progress.ipynb`** runs every saved notebook in the background and shows, per unit and per
  exercise, which checks pass, with one bar per unit.

| unit | notebook | topic |
|---|---|---|
{units}

## On our own machine

With conda: `conda env create -f environment.yml`, then `conda activate neural-computation-student`.
With pip (Python {build.PYTHON_VERSION[:4]}): `python -m venv .venv && .venv/bin/pip install -r requirements.txt`.
Either installs the checks (`autograder/`) as a package. Then `./start jupyter lab`: `start`
enables nbgrader's assignment list and Validate only (`jupyter-config/`).

torch is the CPU-only build from PyTorch's wheel index, pinned to the version the checks were
written against.

## License

See `LICENSE`: the notebooks are CC BY 4.0, the code is MIT.
"""


def progress_notebook():
    """``progress.ipynb``: the source of :mod:`autograder.inside.progress`, then a call to ``show()``."""
    intro = ("# Progress\n\nRun this notebook (Run, Run All Cells) to see which visible checks of our saved "
             "notebooks pass: one bar per unit, and a line per exercise with the first line of its "
             "failure. Each unit runs headless in a kernel of its own, in the background, one after the "
             "other; the notebooks themselves are not changed. Save a notebook before running this: "
             "it reads what is on disk.")
    code = (PACKAGE / "inside" / "progress.py").read_text(encoding="utf-8")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(intro, id="intro"),
        nbformat.v4.new_code_cell(code, id="progress-code", metadata={"jupyter": {"source_hidden": True}}),
        nbformat.v4.new_code_cell("progress = show()", id="show"),
    ])
    nb.metadata = nbformat.from_dict({"kernelspec": build.KERNELSPEC, "language_info": build.LANGUAGE_INFO})
    nbformat.validate(nb)
    return nb


def _files(url, assignments):
    """Every file of the student repository but ``release/`` and the package: path -> text."""
    page_config = {"disabledExtensions": {plugin: True for plugin in LAB_PLUGINS_OFF}}
    server = {"ServerApp": {"jpserver_extensions": SERVER_EXTENSIONS}}
    files = {
        "README.md": _readme(url, assignments),
        "LICENSE": LICENSE,
        ".gitignore": GITIGNORE,
        "pyproject.toml": _pyproject(),
        "requirements.txt": _requirements(),
        "environment.yml": _environment(),
        "start": START,
        "jupyter-config/jupyter_server_config.d/student.json": json.dumps(server, indent=2) + "\n",
        "jupyter-config/labconfig/page_config.json": json.dumps(page_config, indent=2) + "\n",
        "progress.ipynb": build.dumps(progress_notebook()),
        "autograder/__init__.py": '"""The checks that the notebooks\' test cells call (`from autograder.inside import checks`)."""\n',
        "autograder/inside/__init__.py": (PACKAGE / "inside" / "__init__.py").read_text(encoding="utf-8"),
        "autograder/outside/__init__.py": '"""Of the instructor\'s side of the autograder, only the oracles ship here: the checks '
                                          'compute their expected values with them, for self-study."""\n',
    }
    for name in package_modules():
        files[f"autograder/{name.replace('.', '/')}.py"] = (PACKAGE / f"{name.replace('.', '/')}.py").read_text(encoding="utf-8")
    return files


def published_lines(assignments=None):
    """Every line of the release notebooks. A later unit hands an earlier unit's machinery over in a
    locked cell, so what a release notebook gives every student is not a leak elsewhere in the
    student repository (each release notebook is leak-checked on its own, by ``release.leaks``)."""
    return {line.strip() for a in assignments or authored()
            for c in nbformat.read(a.release_path(), as_version=4).cells for line in c.source.splitlines()}


def leaks(tree, assignments=None):
    """What of the instructor's material shows anywhere under ``tree``: one message per finding.

    A solution or hidden-test marker, a line of a solution or hidden-test region of any unit's
    source notebook, a line of ``engine_ref`` (either one unless a release notebook gives it to
    every student anyway), or a file or folder named ``engine_ref``. In the
    notebooks, the word ``engine_ref`` too (the checks' own code names it, to forbid it).
    """
    tree = Path(tree)
    secret = set()
    for a in assignments or authored():
        secret |= release.hidden_lines(nbformat.read(a.source_path(), as_version=4))
    published = published_lines(assignments)
    secret -= published
    engine = release.engine_ref_lines() - published
    out = [f"{p}: named engine_ref" for p in tree.rglob("*engine_ref*")]
    for path in sorted(p for p in tree.rglob("*") if p.is_file() and ".git" not in p.relative_to(tree).parts):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".ipynb":
            text = "\n".join(c.source for c in nbformat.reads(text, as_version=4).cells)
        markers = release.MARKERS if path.suffix == ".ipynb" else [m for m in release.MARKERS if m != "engine_ref"]
        out += [f"{path} contains {m!r}" for m in markers if m in text]
        lines = {line.strip() for line in text.splitlines()}
        out += [f"{path} contains a solution or hidden-test line: {line!r}" for line in sorted(lines & secret)]
        out += [f"{path} contains a line of engine_ref: {line!r}" for line in sorted(lines & engine)]
    return out


def _replaceable(out):
    """Whether ``out`` may be replaced: missing, empty, or an earlier student repository."""
    if not out.exists():
        return True
    entries = {p.name for p in out.iterdir()} - KEEP
    return not entries or {"release", "autograder", "progress.ipynb", "start"} <= entries


def write(out, url=DEFAULT_URL, ids=None):
    """Write the student repository into ``out`` (kept: ``out/.git``); return ``out``.

    ``ids`` defaults to every authored unit. Raises :class:`StudentRepoError` when ``out`` holds
    something else than an earlier student repository, or when the tree would leak.
    """
    out = Path(out).resolve()
    assignments = authored() if not ids else [a for a in authored() if a.id in ids]
    if not _replaceable(out):
        raise StudentRepoError(f"{out} holds files that are not a student repository; give an empty or new folder")
    binder_url(url)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="student-repo-", dir=out.parent) as tmp:
        tree = Path(tmp)
        for a in assignments:
            if not a.release_path().exists():
                raise StudentRepoError(f"{a.id}: no {a.release_path()}; run `make build`")
            shutil.copytree(a.release_path().parent, tree / "release" / a.id)
        for rel, text in _files(url, assignments).items():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            (tree / rel).write_text(text, encoding="utf-8")
        (tree / "start").chmod(0o755)
        problems = leaks(tree, assignments)
        if problems:
            raise StudentRepoError("refusing to write a student repository that leaks:\n  " + "\n  ".join(problems))
        out.mkdir(exist_ok=True)
        for old in out.iterdir():
            if old.name not in KEEP:
                shutil.rmtree(old) if old.is_dir() else old.unlink()
        for new in tree.iterdir():
            shutil.move(str(new), out / new.name)
    return out

"""The integrity audit flags each tampering pattern, at the line that does it, and nothing else.

Every submission here starts from the reference solution of unit 1.2 (the release notebook with
the source's solutions typed in), so a flag can only come from the change the test makes:

* the reference, the blank release and every catalogued mistake and alternative of every
  written unit give no flag at all (a torch delegation is a mistake for the checks, not for the
  audit);
* each tampering pattern, put into a solution cell (or an extra cell), gives a flag of its kind
  in that cell at that line;
* deleted, duplicated, reordered and retyped cells and edited locked cells are flagged against
  the source notebook; extra cells and trailing whitespace are not;
* a submission folder that is broken (invalid JSON, nbformat 3, no notebook, a file that would
  be imported instead of ``autograder``) gives a flag, never an exception.
"""
import copy
import json

import nbformat
import pytest

from autograder.outside import catalogue, grading
from autograder.outside.audit import KINDS, Flag, audit_notebook, audit_submission_dir
from autograder.outside.course import BY_ID, authored
from autograder.outside.grading import cell
from autograder.outside.grading import cell_index as index

AID = "1.2-softmax-cross-entropy"
CELL = "softmax"  # the solution cell the code patterns are appended to


@pytest.fixture(scope="module")
def source():
    """The source notebook of unit 1.2."""
    return nbformat.read(BY_ID[AID].source_path(), as_version=4)


@pytest.fixture(scope="module")
def reference():
    """The reference submission of unit 1.2 (never changed by a test: each works on a copy)."""
    return grading.reference_submission(AID)


def appended(nb, code, grade_id=CELL):
    """A copy of ``nb`` with ``code`` appended to a cell; returns (notebook, line of the code's last line)."""
    nb = copy.deepcopy(nb)
    c = cell(nb, grade_id)
    c.source = c.source + "\n" + code
    return nb, len(c.source.split("\n"))


def kinds(flags):
    """The sorted kinds of a list of flags."""
    return sorted({f.kind for f in flags})


# --- no false alarms ------------------------------------------------------------------------------
def test_reference_submission_has_no_flags(reference, source):
    assert audit_notebook(reference, source) == []


def test_blank_release_has_no_flags(source):
    assert audit_notebook(grading.blank_submission(AID), source) == []


CATALOGUED = [pytest.param(a.id, v, id=f"{a.id}:{v.name}") for a in authored() for v in catalogue.load(a.id)]


@pytest.mark.parametrize("aid, variant", CATALOGUED)
def test_catalogued_student_solutions_have_no_flags(aid, variant):
    """...but those that game the checks, which raise exactly the flag kinds they name."""
    ref = grading.reference_submission(aid)
    src = nbformat.read(BY_ID[aid].source_path(), as_version=4)
    flags = audit_notebook(grading.apply_variant(ref, variant, aid), src)
    assert sorted({f.kind for f in flags}) == sorted(variant.flagged), flags


# --- code patterns --------------------------------------------------------------------------------
# (id, code appended to the softmax solution cell, expected kind[, line of the code that does it,
# when it is not the last]).
PATTERNS = [
    ("np.allclose", "np.allclose = lambda *a, **k: True", "monkeypatch"),
    ("np.testing.assert_allclose", "np.testing.assert_allclose = lambda *a, **k: None", "monkeypatch"),
    ("numpy alias", "import numpy as xp\nxp.testing.assert_allclose = print", "monkeypatch"),
    ("module alias by assignment", "t = np.testing\nt.assert_allclose = print", "monkeypatch"),
    ("setattr np.testing", "setattr(np.testing, 'assert_allclose', print)", "monkeypatch"),
    ("delattr np", "delattr(np, 'allclose')", "monkeypatch"),
    ("del attribute", "del np.testing.assert_allclose", "monkeypatch"),
    ("augmented assignment", "np.pi += 1", "monkeypatch"),
    ("object.__setattr__", "object.__setattr__(np, 'allclose', print)", "monkeypatch"),
    ("module __dict__", "np.__dict__['allclose'] = print", "monkeypatch"),
    ("vars() of a module", "vars(checks).update(assert_close=print)", "monkeypatch"),
    ("torch.allclose", "import torch\ntorch.allclose = lambda *a, **k: True", "monkeypatch"),
    ("torch class", "import torch\ntorch.Tensor.__eq__ = lambda a, b: True", "monkeypatch"),
    ("checks function", "checks.assert_close = lambda *a, **k: None", "monkeypatch"),
    ("checks via from-import",
     "from autograder.inside import checks as c\nc.run_student = lambda task, fn, *a, **k: fn(*a, **k)", "monkeypatch"),
    ("checks globals", "g = checks.assert_close.__globals__\ng['_close'] = lambda *a: True", "monkeypatch"),
    ("autograder package", "import autograder.inside.checks\nautograder.inside.checks.CheckFailure = Warning", "monkeypatch"),
    ("builtins module", "import builtins\nbuiltins.isinstance = lambda *a: True", "monkeypatch"),
    ("__builtins__ attribute", "__builtins__.abs = lambda x: 0", "monkeypatch"),
    ("__builtins__ item", "__builtins__['abs'] = lambda x: 0", "monkeypatch"),
    ("__import__", "__import__('numpy').allclose = print", "monkeypatch"),
    ("rebind checks", "checks = type('FakeChecks', (), {})()", "shadowing"),
    ("rebind locked data", "Z_EXTREME = np.zeros((2, 3))", "shadowing"),
    ("rebind np by import", "import math as np", "shadowing"),
    ("rebind checks by def", "def checks():\n    pass", "shadowing", 1),
    ("global rebinding", "def f():\n    global checks\n    checks = None", "shadowing"),
    ("globals() item", "def f():\n    globals()['Z_EXTREME'] = np.zeros((2, 3))", "shadowing"),
    ("globals() item by a computed name", "globals()['Z_' + 'EXTREME'] = None", "dynamic-lookup"),
    ("globals().update", "globals().update({'check' + 's': None})", "dynamic-lookup"),
    ("delete checks", "del checks", "shadowing"),
    ("sys.modules item", "import sys\nsys.modules['autograder.inside.checks'] = object()", "import-system"),
    ("sys.modules pop", "import sys\nsys.modules.pop('numpy')", "import-system"),
    ("sys.modules del", "import sys\ndel sys.modules['torch']", "import-system"),
    ("sys.modules aliased", "from sys import modules\nmodules['numpy'] = None", "import-system"),
    ("sys.path", "import sys\nsys.path.insert(0, '/tmp/fake')", "import-system"),
    ("importlib.reload", "import importlib\nimportlib.reload(checks)", "reload"),
    ("reload from-import", "from importlib import reload\nreload(np)", "reload"),
    ("sys.setprofile", "import sys\nsys.setprofile(None)", "profiler-hook"),
    ("sys.settrace", "import sys as s\ns.settrace(lambda *a: None)", "profiler-hook"),
    ("threading.setprofile", "import threading\nthreading.setprofile(None)", "profiler-hook"),
    ("gc.get_referrers", "import gc\nrefs = gc.get_referrers(checks)", "introspection"),
    ("ctypes", "import ctypes", "introspection"),
    ("sys._getframe", "import sys\nframe = sys._getframe(1)", "introspection"),
    ("frame walking", "def f(frame):\n    return frame.f_back.f_globals", "introspection"),
    ("the recording", "from autograder.inside import recording\nbuffers = recording._codec.kept", "grading-protocol", 1),
    ("the wire, aliased", "import autograder.inside.wire as w\nw.Owners", "grading-protocol", 1),
    ("the recording through the package", "import autograder\nautograder.inside.recording._kept.clear()", "grading-protocol"),
    ("input transformer", "get_ipython().input_transformers_cleanup.append(lambda lines: [])", "ipython-hooks"),
    ("ast transformer via an alias", "from IPython import get_ipython as g\nshell = g()\nshell.ast_transformers.append(None)",
     "ipython-hooks"),
    ("events", "get_ipython().events.register('pre_run_cell', print)", "ipython-hooks"),
    ("custom exceptions", "get_ipython().set_custom_exc((Exception,), lambda *a, **k: None)", "ipython-hooks"),
    ("open source notebook", "text = open('../../source/1.2/softmax_cross_entropy.ipynb').read()",
     "course-file-access"),
    ("open via variable", "path = '~/course/gradebook.db'\nhandle = open(path)", "course-file-access"),
    ("f-string path", "base = '..'\nopen(f'{base}/release/x.ipynb')", "course-file-access"),
    ("pathlib", "from pathlib import Path\nPath('/root/.ssh').exists()", "course-file-access"),
    ("Path.home", "import pathlib\npathlib.Path.home()", "course-file-access"),
    ("os.listdir", "import os\nos.listdir('../../autograded')", "course-file-access"),
    ("sqlite3", "import sqlite3\nsqlite3.connect('gradebook.db')", "course-file-access"),
    ("other submissions", "import glob\nglob.glob('/course/submitted/*/1.2*/*.ipynb')", "course-file-access"),
    ("%cd magic", "%cd ../../source", "course-file-access"),
    ("os._exit", "import os\nos._exit(0)", "process-exit"),
    ("os.kill", "import os\nos.kill(os.getpid(), 9)", "process-exit"),
    ("sys.exit", "import sys\nsys.exit()", "process-exit"),
    ("exit()", "exit()", "process-exit"),
    ("raise SystemExit", "raise SystemExit(0)", "process-exit"),
    ("subprocess", "import subprocess\nsubprocess.run(['ls'])", "subprocess"),
    ("os.system", "import os\nos.system('ls')", "subprocess"),
    ("shell escape", "!ls ../../", "subprocess"),
    ("shell capture", "files = !ls", "subprocess"),
    ("socket", "import socket", "network"),
    ("socket call", "import socket as so\nso.create_connection(('example.com', 80))", "network"),
    ("urllib", "import urllib.request", "network"),
    ("exec of a literal", "exec('np.allclose = None')", "monkeypatch"),
    ("%time of an assignment", "%time np.allclose = print", "monkeypatch"),
    ("exec of a computed string", "code = 'np.allclose' + ' = None'\nexec(code)", "dynamic-code"),
    ("eval", "eval(input())", "dynamic-code"),
    ("does not parse", "np.allclose = lambda *a: True\ndef broken(:", "monkeypatch", 1),
    ("does not parse: os._exit", "os._exit(0)\nfor", "process-exit", 1),
]


@pytest.mark.parametrize("code, kind, at", [pytest.param(p[1], p[2], p[3] if len(p) > 3 else None, id=p[0])
                                             for p in PATTERNS])
def test_tampering_pattern_is_flagged(reference, source, code, kind, at):
    nb, last = appended(reference, code)
    snippet = code.split("\n")
    line = last - len(snippet) + (at or len(snippet))
    flags = audit_notebook(nb, source)
    assert {(f.cell, f.line > last - len(snippet)) for f in flags} == {(CELL, True)}, "a flag outside the change"
    (hit,) = [f for f in flags if f.kind == kind and f.line == line]
    assert hit.text == cell(nb, CELL).source.split("\n")[line - 1].strip()
    assert hit.explanation.endswith(KINDS[kind] + ".")
    unparsable = snippet[-1] in ("def broken(:", "for")
    assert ("does not parse" in hit.explanation) == unparsable


def test_tampering_in_an_extra_cell_is_flagged(reference, source):
    nb = copy.deepcopy(reference)
    nb.cells.insert(index(nb, "test_softmax"), nbformat.v4.new_code_cell("x = 1\nnp.allclose = print"))
    position = index(nb, "test_softmax")  # the new cell sits just before it
    flags = audit_notebook(nb, source)
    assert flags == [Flag(f"cell {position}", 2, "monkeypatch", "np.allclose = print", flags[0].explanation)]


def test_shell_cell_magic_is_flagged(reference, source):
    nb = copy.deepcopy(reference)
    nb.cells.append(nbformat.v4.new_code_cell("%%bash\ncat ../../source/*/*.ipynb"))
    assert kinds(audit_notebook(nb, source)) == ["course-file-access", "subprocess"]


def test_locked_cell_text_is_not_scanned(reference, source):
    """nbgrader restores locked cells before it runs them, so only their edit is reported."""
    nb = copy.deepcopy(reference)
    cell(nb, "setup").source += "\nnp.allclose = print"
    assert kinds(audit_notebook(nb, source)) == ["locked-cell-edited"]


def test_harmless_look_alikes_are_not_flagged(reference, source):
    code = "\n".join([
        "def backward(ctx, grad):",
        "    input, = ctx.saved_tensors",  # a variable called like a builtin
        "    input.grad = grad",
        "    setattr(ctx, 'saved', None)",
        "    object.__setattr__(ctx, 'x', 1)",
        "    return np.exp(grad)",
        "with open('notes.txt', 'w') as out:",  # a file of its own, in its own folder
        "    out.write('source of the idea: the lecture')",
        "import numpy as np",  # importing np again is fine
        "np_version = np.__version__",
        "eval('1 + 1')",
    ])
    nb, _ = appended(reference, code)
    assert audit_notebook(nb, source) == []


# --- structure --------------------------------------------------------------------------------------
def deleted(nb):
    """Delete a test cell."""
    del nb.cells[index(nb, "test_softmax")]


def duplicated(nb):
    """Paste a second copy of a solution cell."""
    nb.cells.insert(index(nb, "softmax") + 1, copy.deepcopy(cell(nb, "softmax")))


def reordered(nb):
    """Move a solution cell above the one before it."""
    nb.cells.insert(index(nb, "logsumexp"), nb.cells.pop(index(nb, "softmax")))


def retyped_to_markdown(nb):
    """Turn a code solution cell into a markdown cell."""
    c = cell(nb, "softmax")
    nb.cells[index(nb, "softmax")] = nbformat.v4.new_markdown_cell(c.source, metadata=c.metadata)


def retyped_role(nb):
    """Change the points of a test cell."""
    cell(nb, "test_softmax").metadata.nbgrader["points"] = 80


def edited_test(nb):
    """Change a case of a visible test."""
    c = cell(nb, "test_softmax")
    c.source = c.source.replace('checks.case("axis=0"', 'checks.case("axis=-1"')


def edited_setup(nb):
    """Add a line to a locked setup cell."""
    cell(nb, "naive_softmax").source += "\nnp.seterr(all='ignore')"


STRUCTURE = [
    (deleted, "cell-deleted", "test_softmax"),
    (duplicated, "cell-duplicated", "softmax"),
    (reordered, "cell-reordered", "softmax"),
    (retyped_to_markdown, "cell-retyped", "softmax"),
    (retyped_role, "cell-retyped", "test_softmax"),
    (edited_test, "locked-cell-edited", "test_softmax"),
    (edited_setup, "locked-cell-edited", "naive_softmax"),
]


@pytest.mark.parametrize("change, kind, grade_id", [pytest.param(*s, id=s[1] + ":" + s[0].__name__) for s in STRUCTURE])
def test_structure_change_is_flagged(reference, source, change, kind, grade_id):
    nb = copy.deepcopy(reference)
    change(nb)
    flags = audit_notebook(nb, source)
    assert [(f.kind, f.cell) for f in flags] == [(kind, grade_id)], flags


def test_mangled_nbgrader_metadata_is_flagged_not_fatal(reference, source):
    nb = copy.deepcopy(reference)
    cell(nb, "test_softmax").metadata.nbgrader["points"] = "ten"
    cell(nb, "softmax").metadata["nbgrader"] = "not a dict"
    flags = audit_notebook(nb, source)
    assert [(f.kind, f.cell) for f in flags] == [("cell-deleted", "softmax"), ("cell-retyped", "test_softmax")]
    points = float(cell(source, "test_softmax").metadata.nbgrader["points"])
    assert flags[1].text == f"test worth {points} points -> test worth 'ten' points"


def test_edited_locked_cell_names_the_first_changed_line(reference, source):
    nb = copy.deepcopy(reference)
    edited_test(nb)
    (flag,) = audit_notebook(nb, source)
    lines = cell(nb, "test_softmax").source.split("\n")
    assert flag.text == lines[flag.line - 1].strip() and "axis=-1" in flag.text


def test_extra_cells_and_trailing_whitespace_are_fine(reference, source):
    nb = copy.deepcopy(reference)
    nb.cells.insert(3, nbformat.v4.new_markdown_cell("my notes"))
    nb.cells.append(nbformat.v4.new_code_cell("print(softmax(np.array([1.0, 2.0])))"))
    cell(nb, "setup").source = cell(nb, "setup").source.replace("\n", "  \n") + "\n\n"
    assert audit_notebook(nb, source) == []


# --- submission folders -----------------------------------------------------------------------------
def notebook_path(folder):
    """Where the submission's notebook goes in ``folder``."""
    return folder / BY_ID[AID].source_path().name


def test_clean_submission_folder(tmp_path, reference):
    nbformat.write(reference, notebook_path(tmp_path))
    (tmp_path / "notes.txt").write_text("an extra file is fine")
    (tmp_path / "my_helpers.py").write_text("HELP = 1\n")  # imports as itself: nothing to shadow
    assert audit_submission_dir(tmp_path, BY_ID[AID].source_path()) == []


def test_invalid_json(tmp_path):
    notebook_path(tmp_path).write_text('{"cells": [')
    flags = audit_submission_dir(tmp_path, BY_ID[AID].source_path())
    assert kinds(flags) == ["invalid-json"] and flags[0].line == 1


def test_json_that_is_not_a_notebook(tmp_path):
    notebook_path(tmp_path).write_text(json.dumps({"nbformat": 4, "cells": "none"}))
    assert kinds(audit_submission_dir(tmp_path, BY_ID[AID].source_path())) == ["invalid-notebook"]


def test_nbformat_3_is_flagged_and_still_audited(tmp_path, reference):
    old = nbformat.convert(copy.deepcopy(reference), 3)  # convert changes its argument
    path = notebook_path(tmp_path)
    nbformat.write(old, path, version=3)
    assert json.loads(path.read_text())["nbformat"] == 3
    assert kinds(audit_submission_dir(tmp_path, BY_ID[AID].source_path())) == ["nbformat-3"]
    tampered, _ = appended(reference, "np.allclose = print")
    nbformat.write(nbformat.convert(tampered, 3), path, version=3)
    assert kinds(audit_submission_dir(tmp_path, BY_ID[AID].source_path())) == ["monkeypatch", "nbformat-3"]


@pytest.mark.parametrize("make", [lambda p: p / "missing", lambda p: p], ids=["no folder", "empty folder"])
def test_missing_notebook(tmp_path, make):
    assert kinds(audit_submission_dir(make(tmp_path), BY_ID[AID].source_path())) == ["missing-notebook"]


def test_renamed_notebook_is_named_in_the_flag(tmp_path, reference):
    nbformat.write(reference, tmp_path / "softmax_cross_entropy (1).ipynb")
    (flag,) = audit_submission_dir(tmp_path, BY_ID[AID].source_path())
    assert flag.kind == "missing-notebook" and "softmax_cross_entropy (1).ipynb" in flag.text


def test_files_that_shadow_imports_are_flagged(tmp_path, reference):
    nbformat.write(reference, notebook_path(tmp_path))
    (tmp_path / "autograder" / "inside").mkdir(parents=True)
    (tmp_path / "autograder" / "__init__.py").write_text("")
    (tmp_path / "autograder" / "inside" / "checks.py").write_text("def against_torch(*a, **k):\n    pass\n")
    (tmp_path / "numpy.py").write_text("")
    flags = audit_submission_dir(tmp_path, BY_ID[AID].source_path())
    assert [(f.kind, f.cell) for f in flags] == [("shadowing-file", "autograder"), ("shadowing-file", "numpy.py")]

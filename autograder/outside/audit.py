"""The integrity audit: reads a submission outside the kernel and reports what looks like tampering.

It never changes a score. It returns :class:`Flag` records for the instructor (the report lists
them), from two kinds of evidence:

* **Code** in the cells whose text runs at grading time: solution cells and any extra code cells
  (nbgrader restores locked and test cells from the gradebook before it runs them). Each cell is
  put through IPython's own input transforms, so ``!cmd``, ``%%bash`` and ``%time`` are seen as
  the calls they become, then parsed with :mod:`ast`; a cell that does not parse is searched
  with regular expressions instead. What is flagged, and why, is :data:`KINDS`.
* **Structure**, against the source notebook: nbgrader cells that were deleted, duplicated,
  reordered or retyped, and locked cells whose text was edited. Extra cells are fine.

:func:`audit_submission_dir` adds what only the submission folder shows: a missing notebook,
a file that is not JSON or not a notebook, nbformat 3, and files that would shadow a module the
tests import (the kernel runs in the submission folder, which is first on ``sys.path``).
"""
import ast
import builtins
import functools
import importlib.util
import json
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat
import nbformat.reader
import nbformat.validator
from IPython.core.inputtransformer2 import TransformerManager
from nbgrader import utils as nbutils
from nbgrader.preprocessors import ClearHiddenTests

KINDS = {
    # code in solution and extra cells
    "monkeypatch": "changes numpy, torch, autograder or builtins, which the checks and the tests rely on",
    "shadowing": "rebinds a name that the locked cells define and the tests use, or a builtin",
    "import-system": "edits sys.modules or the import path, so the tests could import something else",
    "reload": "reloads a module, which replaces the objects the checks hold on to",
    "profiler-hook": "installs or removes a profiler or trace hook (the NumPy-only guard is a profiler hook)",
    "introspection": "walks stack frames, the garbage collector or raw memory, which reach the checks' internals",
    "ipython-hooks": "reaches into IPython's machinery (input transformers, events, exception handlers, the "
                     "kernel), which can rewrite or swallow the test cells that follow",
    "course-file-access": "reaches for course files (source, gradebook, other submissions) or a home directory",
    "process-exit": "exits or kills a process, which ends grading early",
    "subprocess": "starts a shell or another process",
    "network": "opens a network connection",
    "grading-protocol": "reaches the grading protocol's side in the kernel (autograder.inside.recording, wire, "
                        "zygote), through which the tests' arrays and answers pass",
    "dynamic-code": "runs code built at run time, which this audit cannot read",
    "dynamic-lookup": "looks up an attribute, imports a module or binds a global by a name built at run time, "
                      "which hides from this audit what is reached (a module's __dict__, sys.settrace, an import "
                      "hook, a name the tests use)",
    # structure, against the source notebook
    "cell-deleted": "an nbgrader cell of the assignment is missing",
    "cell-duplicated": "an nbgrader cell appears more than once",
    "cell-reordered": "an nbgrader cell was moved out of the assignment's order",
    "cell-retyped": "an nbgrader cell changed its type or its nbgrader role",
    "locked-cell-edited": "the text of a locked cell differs from the assignment",
    # the submission folder
    "missing-notebook": "the notebook to grade is not in the submission",
    "invalid-json": "the notebook file is not valid JSON",
    "invalid-notebook": "the file is JSON but not a notebook nbformat 4 can read",
    "nbformat-3": "the notebook is in the old nbformat 3; the audit read it converted to nbformat 4",
    "shadowing-file": "a file in the submission folder would be imported instead of a real module",
}

PROTECTED_ROOTS = frozenset({"numpy", "torch", "autograder", "builtins"})
# The kernel's namespace has __builtins__ whether or not a cell imports anything.
DEFAULT_ALIASES = {"__builtins__": frozenset({"builtins"})}

# Strings that name course folders, the gradebook, a home directory or a parent directory.
COURSE_PATH = re.compile(
    r"(?i:(?<![a-z])(?:source|gradebook|autograded|submitted|release|feedback|exchange)(?![a-z])"
    r"|\.db\b|\.sqlite|/root\b|~|(?:^|/)\.\.(?:/|$))")

CALLS = {
    "importlib.reload": "reload", "imp.reload": "reload",
    "sys.setprofile": "profiler-hook", "sys.settrace": "profiler-hook",
    "threading.setprofile": "profiler-hook", "threading.settrace": "profiler-hook",
    "threading.setprofile_all_threads": "profiler-hook", "threading.settrace_all_threads": "profiler-hook",
    "gc.get_referrers": "introspection", "gc.get_referents": "introspection", "gc.get_objects": "introspection",
    "sys._getframe": "introspection", "sys._current_frames": "introspection",
    "inspect.currentframe": "introspection", "inspect.stack": "introspection",
    "inspect.getouterframes": "introspection", "inspect.trace": "introspection",
    "os._exit": "process-exit", "os.kill": "process-exit", "os.killpg": "process-exit",
    "os.abort": "process-exit", "sys.exit": "process-exit", "builtins.exit": "process-exit",
    "builtins.quit": "process-exit", "signal.raise_signal": "process-exit",
    "signal.pthread_kill": "process-exit", "signal.alarm": "process-exit",
    "os.system": "subprocess", "os.popen": "subprocess", "os.fork": "subprocess", "os.forkpty": "subprocess",
    "os.posix_spawn": "subprocess", "os.posix_spawnp": "subprocess",
    "IPython.system": "subprocess", "IPython.getoutput": "subprocess",
    "builtins.exec": "dynamic-code", "builtins.eval": "dynamic-code", "builtins.compile": "dynamic-code",
}
CALL_PREFIXES = {
    "subprocess.": "subprocess", "pty.": "subprocess", "multiprocessing.": "subprocess",
    "os.exec": "subprocess", "os.spawn": "subprocess", "ctypes.": "introspection",
    "sys.monitoring.": "profiler-hook", "socket.": "network", "urllib.": "network",
    "http.client.": "network", "requests.": "network", "ftplib.": "network", "smtplib.": "network",
}
IMPORTS = {
    "subprocess": "subprocess", "pty": "subprocess", "multiprocessing": "subprocess",
    "ctypes": "introspection", "socket": "network", "urllib": "network", "http": "network",
    "requests": "network", "ftplib": "network", "smtplib": "network", "telnetlib": "network",
}
# The kernel's side of the trusted protocol: a notebook has no use for it (the checks are autograder.inside.checks).
PROTOCOL_MODULES = ("autograder.inside.recording", "autograder.inside.wire", "autograder.inside.zygote")


def _protocol(path):
    return any(path == m or path.startswith(m + ".") for m in PROTOCOL_MODULES)


# Callees whose string arguments are paths (IPython magics count: %run, %cd, %load take paths).
FILE_CALL_PREFIXES = (
    "builtins.open", "io.", "codecs.open", "os.", "pathlib.", "shutil.", "glob.", "sqlite3.",
    "tarfile.", "zipfile.", "numpy.load", "numpy.genfromtxt", "numpy.fromfile", "numpy.memmap",
    "nbformat.read", "IPython.run_line_magic", "IPython.run_cell_magic")
MAGICS = {"IPython.run_line_magic", "IPython.run_cell_magic"}
SHELL_MAGICS = frozenset({"bash", "sh", "script", "system", "sx", "perl", "ruby", "python", "python2",
                          "python3", "pypy", "ls", "cat", "cp", "mv", "rm", "rmdir", "mkdir", "ln"})
PYTHON_MAGICS = frozenset({"time", "timeit", "prun", "capture", "debug"})
FRAME_ATTRS = frozenset({"f_back", "f_globals", "f_locals", "tb_frame", "gi_frame", "cr_frame", "__globals__",
                         "__closure__"})
# Callees that reach an attribute or a module by a name given as a string: (argument position, what).
LOOKUPS = {"builtins.getattr": 1, "builtins.setattr": 1, "builtins.delattr": 1, "builtins.hasattr": 1,
           "builtins.__import__": 0, "importlib.import_module": 0, "importlib.__import__": 0,
           "operator.attrgetter": 0, "operator.methodcaller": 0}
# Parts of the IPython shell through which a cell can change how later cells run or report.
IPYTHON_HOOKS = frozenset({
    "input_transformers_cleanup", "input_transformers_post", "input_transformer_manager", "ast_transformers",
    "events", "set_custom_exc", "custom_exceptions", "set_hook", "hooks", "showtraceback", "_showtraceback",
    "InteractiveTB", "SyntaxTB", "excepthook", "displayhook", "display_pub", "kernel", "run_cell",
    "run_cell_async", "run_ast_nodes", "run_code", "compile", "register_magic_function", "magics_manager"})
IMPORT_STATE = frozenset({"sys.modules", "sys.path", "sys.meta_path", "sys.path_hooks", "sys.path_importer_cache"})
MUTATORS = frozenset({"update", "pop", "popitem", "setdefault", "clear", "insert", "append", "extend",
                      "remove", "__setitem__", "__delitem__"})
SETATTR = frozenset({"setattr", "delattr", "__setattr__", "__delattr__"})
EXITS = frozenset({"builtins.SystemExit", "builtins.KeyboardInterrupt"})

_TRANSFORMER = TransformerManager()


@dataclass(frozen=True)
class Flag:
    """One finding of the audit.

    ``cell`` is the nbgrader grade_id of the cell, ``cell N`` (its 1-based position in the
    submission) for a cell without one, or a file name for a finding about the folder. ``line``
    is 1-based within the cell (None for a finding about a whole cell or file). ``kind`` is a key
    of :data:`KINDS`; ``text`` the offending line or a short description; ``explanation`` says
    what was found and why it matters.
    """

    cell: str
    line: int | None
    kind: str
    text: str
    explanation: str


def _flag(cell, line, kind, text, detail):
    """A :class:`Flag` whose explanation is ``detail`` followed by what its kind means."""
    return Flag(cell, line, kind, text[:200], f"{detail}: {KINDS[kind]}.")


# --- resolving names to dotted paths --------------------------------------------------------------
def _const_str(node):
    """The value of a string literal node, else None."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _protected(path):
    """True for a dotted path inside numpy, torch, autograder or builtins."""
    return path.split(".")[0] in PROTECTED_ROOTS


def _resolve(node, aliases, builtin_names=False):
    """The dotted paths an expression may refer to (``np.testing`` -> ``{"numpy.testing"}``).

    Names resolve through ``aliases`` (imports and assignments of module-valued expressions);
    with ``builtin_names`` an unbound builtin name resolves to ``builtins.<name>``, which is right
    for a callee (``open``) but not for an object being changed (a variable called ``input``).
    """
    if isinstance(node, ast.Name):
        if node.id in aliases:
            return set(aliases[node.id])
        if node.id == "get_ipython":
            return {"IPython.get_ipython"}
        return {f"builtins.{node.id}"} if builtin_names and hasattr(builtins, node.id) else set()
    if isinstance(node, ast.Attribute):
        return {f"{p}.{node.attr}" for p in _resolve(node.value, aliases, builtin_names)}
    if isinstance(node, ast.Call):
        func = _resolve(node.func, aliases, True)
        first = _const_str(node.args[0]) if node.args else None
        if "IPython.get_ipython" in func:
            return {"IPython"}
        if first and func & {"builtins.__import__", "importlib.import_module"}:
            return {first}
        if "builtins.vars" in func and node.args:
            return {f"{p}.__dict__" for p in _resolve(node.args[0], aliases)}
        name = _const_str(node.args[1]) if len(node.args) > 1 else None
        if "builtins.getattr" in func and name:
            return {f"{p}.{name}" for p in _resolve(node.args[0], aliases)}
        return set()
    if isinstance(node, ast.Subscript):
        key = _const_str(node.slice)
        out = set()
        for p in _resolve(node.value, aliases, builtin_names) if key else ():
            if p == "sys.modules":
                out.add(key)
            elif p == "builtins" or p.endswith(".__dict__"):
                out.add(f"{p.removesuffix('.__dict__')}.{key}")
        return out
    return set()


def _import_bindings(node):
    """``(name, dotted path)`` for each name an import statement binds (none for relative imports)."""
    if isinstance(node, ast.Import):
        for a in node.names:
            root = a.name.split(".")[0]
            yield (a.asname, a.name) if a.asname else (root, root)
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        for a in node.names:
            yield a.asname or a.name, f"{node.module}.{a.name}"


@functools.lru_cache(maxsize=4096)  # trees come from the cache of _parse
def _binders(tree):
    """The statements of ``tree`` that bind names, each with the string constants it assigns."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append((node, frozenset()))
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            out.append((node, frozenset(n.value for n in ast.walk(node.value) if _const_str(n) is not None)))
    return tuple(out)


def _collect_names(trees, aliases):
    """Add every module alias and every string-valued name bound in ``trees``, to a fixed point.

    Returns ``{name: strings}`` for names assigned expressions that contain string constants
    (``p = "../source"``), so that ``open(p)`` is seen to open a course path.
    """
    strings = {}
    binders = [b for tree in trees for b in _binders(tree)]
    for _ in range(8):  # aliases of aliases: a few rounds reach the fixed point
        before = {k: set(v) for k, v in aliases.items()}
        for node, found in binders:
            for name, path in _import_bindings(node):
                aliases.setdefault(name, set()).add(path)
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                paths = _resolve(node.value, aliases)
                for t in targets:
                    if isinstance(t, ast.Name):
                        if paths:
                            aliases.setdefault(t.id, set()).update(paths)
                        if found:
                            strings.setdefault(t.id, set()).update(found)
        if before == aliases:
            break
    return strings


def _top_level_bindings(tree, aliases):
    """``{name: paths}`` for the names a cell binds at module level (paths empty for non-modules)."""
    out = {}

    def bind(target, paths):
        """Record the names a target binds (unpacking binds non-modules)."""
        if isinstance(target, ast.Name):
            out.setdefault(target.id, set()).update(paths)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                bind(elt, set())

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.setdefault(node.name, set())
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for name, path in _import_bindings(node):
                out.setdefault(name, set()).add(path)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                bind(t, _resolve(node.value, aliases))
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            bind(node.target, _resolve(node.value, aliases))
    return out


# --- scanning code --------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)  # a class shares its locked cells, and most solutions repeat
def _parse(text):
    """``text`` as an AST, or None when it does not parse.

    Text that is not Python is put through IPython's input transforms first (``!ls`` becomes
    ``get_ipython().system('ls')``); valid Python never has magics, so it skips them.
    """
    with warnings.catch_warnings():  # invalid escapes and the like: the kernel reports them, not us
        warnings.simplefilter("ignore")
        for attempt in (lambda: text, lambda: _TRANSFORMER.transform_cell(text)):
            try:
                return compile(attempt(), "<cell>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            except (SyntaxError, ValueError, RecursionError):
                continue
    return None


class _Scanner(ast.NodeVisitor):
    """Walks one cell's AST and records flags (at most one per line and kind)."""

    def __init__(self, ctx, cell, lines, base_line=None):
        self.ctx = ctx
        self.cell = cell
        self.lines = lines
        self.base_line = base_line
        self.scopes = [None]  # None: module scope; a set: the names a function declares global

    def flag(self, node, kind, detail):
        """Record a flag at ``node``'s line (or at the line of the exec/magic that ran this text)."""
        line = self.base_line or getattr(node, "lineno", 1)
        key = (self.cell, line, kind)
        if key not in self.ctx.seen:
            self.ctx.seen.add(key)
            text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
            self.ctx.flags.append(_flag(self.cell, line, kind, text, detail))

    def resolve(self, node, builtin_names=False):
        """Dotted paths of an expression, with this notebook's aliases."""
        return _resolve(node, self.ctx.aliases, builtin_names)

    # bindings ------------------------------------------------------------------------------------
    def module_level(self, name):
        """True when binding ``name`` here binds the notebook's global."""
        scope = self.scopes[-1]
        return scope is None or name in scope

    def bind_name(self, node, name, paths, verb="rebinds", module_level=False):
        """Flag a module-level rebinding of a name that the locked cells define, or of a builtin."""
        if not (module_level or self.module_level(name)):
            return
        if hasattr(builtins, name) and not name.startswith("_"):  # (a test cell never reads the notebook's)
            self.flag(node, "shadowing", f"{verb} the builtin `{name}`")
            return
        expected = self.ctx.protected_names.get(name)
        if expected is None:
            return
        if paths and paths <= expected:
            return  # `import numpy as np` again is fine
        self.flag(node, "shadowing", f"{verb} `{name}`")

    def target(self, node, value, verb="assigns"):
        """Check one assignment or deletion target (a name, an attribute, an item, or a tuple of them)."""
        if isinstance(node, ast.Name):
            self.bind_name(node, node.id, self.resolve(value) if value is not None else set(),
                           "deletes" if verb == "deletes" else "rebinds")
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                self.target(elt, None, verb)
        elif isinstance(node, ast.Starred):
            self.target(node.value, None, verb)
        elif isinstance(node, ast.Subscript) and self.is_globals(node.value):
            name = _const_str(node.slice)  # globals()["name"] binds the notebook's global, wherever it runs
            if name is None:
                self.flag(node, "dynamic-lookup", f"{verb} a global by a name built at run time")
            else:
                self.bind_name(node, name, self.resolve(value) if value is not None else set(),
                               "deletes" if verb == "deletes" else "rebinds", module_level=True)
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            owner = self.resolve(node.value)
            full = self.resolve(node)
            if (owner | full) & IMPORT_STATE:
                self.flag(node, "import-system", f"{verb} {sorted((owner | full) & IMPORT_STATE)[0]}")
            elif any(_protected(p) for p in owner):
                name = sorted(full)[0] if full else f"an item of {sorted(owner)[0]}"
                self.flag(node, "monkeypatch", f"{verb} {name}")

    def is_globals(self, node):
        """True for a call of the builtin ``globals()``: the notebook's namespace as a dict."""
        return isinstance(node, ast.Call) and "builtins.globals" in self.resolve(node.func, True)

    def visit_Assign(self, node):
        """``a = b``: each target."""
        for t in node.targets:
            self.target(t, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        """``a += b``: the target."""
        self.target(node.target, None)
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        """``a: T = b``: the target."""
        self.target(node.target, node.value)
        self.generic_visit(node)

    def visit_Delete(self, node):
        """``del a``: each target."""
        for t in node.targets:
            self.target(t, None, "deletes")
        self.generic_visit(node)

    def visit_For(self, node):
        """``for a in ...``: the loop variable is a binding too."""
        self.target(node.target, None)
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    def visit_withitem(self, node):
        """``with ... as a``: a binding too."""
        if node.optional_vars is not None:
            self.target(node.optional_vars, None)
        self.generic_visit(node)

    def visit_NamedExpr(self, node):
        """``(a := b)``: a binding too."""
        self.target(node.target, node.value)
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        """A def binds its name; its body is a new scope (except for names it declares global)."""
        self.bind_name(node, node.name, set())
        declared = {n for g in ast.walk(node) if isinstance(g, ast.Global) for n in g.names}
        self.scopes.append(declared)
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        """A class binds its name; its body is a new scope."""
        self.bind_name(node, node.name, set())
        self.scopes.append(set())
        self.generic_visit(node)
        self.scopes.pop()

    def visit_Lambda(self, node):
        """A lambda's body is a new scope."""
        self.scopes.append(set())
        self.generic_visit(node)
        self.scopes.pop()

    def visit_Import(self, node):
        """Imports of shells, sockets or ctypes are flagged; imports also bind names."""
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        for module in modules:
            if module.split(".")[0] in IMPORTS:
                self.flag(node, IMPORTS[module.split(".")[0]], f"imports {module}")
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules += [f"{node.module}.{a.name}" for a in node.names]
        protocol = next(filter(_protocol, modules), None)
        if protocol is not None:
            self.flag(node, "grading-protocol", f"imports {protocol}")
        for name, path in _import_bindings(node):
            self.bind_name(node, name, {path})

    visit_ImportFrom = visit_Import

    # uses ----------------------------------------------------------------------------------------
    def visit_Attribute(self, node):
        """Reading a frame's links (``f_back``, ``f_globals``) is introspection; reaching the
        shell's transformers, events or exception handlers is tampering with IPython."""
        if node.attr in FRAME_ATTRS:
            self.flag(node, "introspection", f"reads .{node.attr}")
        owners = self.resolve(node.value)
        reached = sorted(p for p in (f"{o}.{node.attr}" for o in owners) if _protocol(p))
        if reached and not any(map(_protocol, owners)):  # (once, at the module)
            self.flag(node, "grading-protocol", f"uses {reached[0]}")
        if node.attr in IPYTHON_HOOKS and "IPython" in owners:
            self.flag(node, "ipython-hooks", f"uses get_ipython().{node.attr}")
        self.generic_visit(node)

    def visit_Raise(self, node):
        """``raise SystemExit`` or ``KeyboardInterrupt`` ends grading like ``sys.exit``."""
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        hit = self.resolve(exc, True) & EXITS if exc is not None else set()
        if hit:
            self.flag(node, "process-exit", f"raises {sorted(hit)[0].split('.')[-1]}")
        self.generic_visit(node)

    def visit_Call(self, node):
        """Every call is checked against what each possible callee does."""
        for func in sorted(self.resolve(node.func, True)):
            self.check_call(node, func)
        if isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS and self.is_globals(node.func.value):
            self.flag(node, "dynamic-lookup", f"binds globals through globals().{node.func.attr}")
        self.generic_visit(node)

    def check_call(self, node, func):
        """Flag one call of ``func`` (a dotted path) for every rule it meets."""
        kind = CALLS.get(func) or next((k for p, k in CALL_PREFIXES.items() if func.startswith(p)), None)
        if kind == "dynamic-code":
            self.dynamic(node, func)
        elif kind:
            self.flag(node, kind, f"calls {func.removeprefix('builtins.')}")
        owner, _, method = func.rpartition(".")
        if method in SETATTR:
            self.check_setattr(node, owner, method)
        if method in MUTATORS and owner in IMPORT_STATE:
            self.flag(node, "import-system", f"calls {func}")
        if method in MUTATORS and owner.endswith(".__dict__") and _protected(owner):
            self.flag(node, "monkeypatch", f"calls {func}")
        if func in LOOKUPS:
            position = LOOKUPS[func]
            name = node.args[position] if len(node.args) > position else None
            # getattr(engine, name) on a plain variable of the student's (an engine, a module of
            # layers) is ordinary code; on a module, an attribute chain, a call or a subscript it
            # may reach anything
            obj = node.args[0] if position == 1 and node.args else None
            ordinary = isinstance(obj, ast.Name) and not self.resolve(obj)
            if name is not None and not isinstance(name, ast.Starred) and _const_str(name) is None and not ordinary:
                self.flag(node, "dynamic-lookup", f"calls {func.removeprefix('builtins.')} with a computed name")
        if func in MAGICS:
            self.magic(node)
        if func.startswith(FILE_CALL_PREFIXES):
            self.check_paths(node, func)
        if func == "pathlib.Path.home":
            self.flag(node, "course-file-access", "calls Path.home")

    def check_setattr(self, node, owner, method):
        """``setattr``/``delattr`` (or ``__setattr__``) on a protected module or class."""
        if method.startswith("__") and owner not in ("builtins.object", "builtins.type"):
            objects = {owner} if owner else set()
        else:
            objects = self.resolve(node.args[0]) if node.args else set()
        hit = sorted(p for p in objects if _protected(p))
        if hit:
            self.flag(node, "monkeypatch", f"calls {method.strip('_')} on {hit[0]}")

    def dynamic(self, node, func):
        """exec/eval/compile: a literal string is read like the cell; anything else cannot be."""
        text = _const_str(node.args[0]) if node.args else None
        if text is None:
            self.flag(node, "dynamic-code", f"calls {func.removeprefix('builtins.')} on a computed string")
        else:
            _scan_text(self.ctx, self.cell, text, self.lines, getattr(node, "lineno", 1))

    def magic(self, node):
        """An IPython magic: a shell magic is a subprocess; the code of %time and the like is read."""
        args = [_const_str(a) for a in node.args]
        name = args[0] if args else None
        if name in SHELL_MAGICS:
            self.flag(node, "subprocess", f"runs the shell magic %{name}")
        elif name in PYTHON_MAGICS and args[-1]:
            _scan_text(self.ctx, self.cell, args[-1], self.lines, getattr(node, "lineno", 1))

    def check_paths(self, node, func):
        """Flag a file call with a string (or a name bound to one) that names a course path."""
        parts = list(node.args) + [k.value for k in node.keywords]
        for part in parts:
            for sub in ast.walk(part):
                found = [_const_str(sub)] if _const_str(sub) is not None else []
                if isinstance(sub, ast.Name):
                    found = sorted(self.ctx.strings.get(sub.id, ()))
                hit = next((s for s in found if COURSE_PATH.search(s)), None)
                if hit is not None:
                    self.flag(node, "course-file-access", f"calls {func.removeprefix('builtins.')} with {hit!r}")
                    return


def _fallback_patterns(names):
    """(kind, regex, detail) for text that does not parse, ``names`` being the protected aliases."""
    mods = "|".join(sorted(map(re.escape, names)))
    patterns = [
        ("monkeypatch", rf"\b(?:{mods})(?:\s*\.\s*\w+)+\s*(?:[-+*/|&]?=(?!=))", "assigns a protected attribute"),
        ("monkeypatch", rf"\b(?:setattr|delattr)\s*\(\s*(?:{mods})\b", "calls setattr/delattr on a protected module"),
        ("monkeypatch", rf"\bdel\s+(?:{mods})\s*\.", "deletes a protected attribute"),
        ("import-system", r"\bsys\s*\.\s*(?:modules|path|meta_path|path_hooks)\b\s*(?:\[[^\]]*\]\s*=(?!=)"
                          r"|\.\s*(?:update|pop|popitem|setdefault|clear|insert|append|extend|remove)\b|=(?!=))",
         "edits sys.modules or sys.path"),
        ("reload", r"\breload\s*\(", "calls reload"),
        ("profiler-hook", r"\bset(?:profile|trace)(?:_all_threads)?\s*\(", "sets a profiler or trace hook"),
        ("introspection", r"\b(?:get_referrers|get_referents|get_objects|_getframe|currentframe|ctypes"
                          r"|f_back|f_globals|f_locals|tb_frame)\b", "introspects frames or memory"),
        ("process-exit", r"\b(?:_exit|kill|killpg|abort|exit|quit)\s*\(|\braise\s+(?:SystemExit|KeyboardInterrupt)\b",
         "exits or kills a process"),
        ("subprocess", r"\b(?:subprocess|pty|os\s*\.\s*(?:system|popen|exec\w*|spawn\w*|fork\w*))\b|^\s*!"
                       r"|^\s*%%?(?:bash|sh|script|system|sx)\b", "starts a shell or a process"),
        ("network", r"\b(?:socket|urllib|requests|http\.client|ftplib|smtplib|telnetlib)\b", "uses the network"),
        ("course-file-access", r"\b(?:open|Path|listdir|scandir|walk|glob|connect|load\w*|read\w*)\s*\(.*(?:"
                               + COURSE_PATH.pattern + ")", "opens a course path"),
        ("dynamic-code", r"\b(?:exec|eval|compile)\s*\(", "runs code built at run time"),
    ]
    return [(kind, re.compile(pattern), detail) for kind, pattern, detail in patterns]


def _scan_text(ctx, cell, text, lines, base_line=None):
    """Flag ``text`` (a cell, or a string run by exec or a magic inside one) into ``ctx``."""
    tree = _parse(text)
    if tree is not None:
        try:
            _Scanner(ctx, cell, lines, base_line).visit(tree)
            return
        except RecursionError:  # absurdly deep code: fall back to reading the text
            pass
    for number, line in enumerate(text.split("\n"), start=1):
        at = base_line or number
        for kind, pattern, detail in ctx.patterns:
            key = (cell, at, kind)
            if key not in ctx.seen and pattern.search(line):
                ctx.seen.add(key)
                text_at = lines[at - 1].strip() if 0 < at <= len(lines) else line.strip()
                ctx.flags.append(_flag(cell, at, kind, text_at,
                                       f"{detail} (found by text match: the cell does not parse as Python)"))


class _Context:
    """What the scanners share: the aliases, the protected names, the string constants, the flags."""

    def __init__(self, aliases, strings, protected_names):
        self.aliases = aliases
        self.strings = strings
        self.protected_names = protected_names
        names = {n for n, paths in aliases.items() if any(_protected(p) for p in paths)}
        self.patterns = _fallback_patterns(names | {"np", "numpy", "torch", "checks", "autograder", "builtins"})
        self.flags = []
        self.seen = set()


# --- notebooks ------------------------------------------------------------------------------------
def _grade_id(cell):
    """A cell's nbgrader grade_id, or None (also when a submission mangled its metadata)."""
    meta = cell.get("metadata", {}).get("nbgrader")
    gid = meta.get("grade_id") if isinstance(meta, dict) else None
    return gid if isinstance(gid, str) and gid else None


def _label(cell, index):
    """How a flag names a cell: its grade_id, or its 1-based position."""
    return _grade_id(cell) or f"cell {index + 1}"


def _role(cell):
    """A cell's nbgrader role as nbgrader's own predicates see it."""
    if not _grade_id(cell):
        return None
    points = cell.metadata.nbgrader.get("points", 0) if nbutils.is_grade(cell) else None
    try:
        points = None if points is None else float(points)
    except (TypeError, ValueError):  # a submission can write anything there
        points = repr(points)
    return (nbutils.is_grade(cell), nbutils.is_solution(cell), nbutils.is_locked(cell), points)


def _describe_role(role):
    """A cell's nbgrader role in words, for a retyped-cell flag."""
    if role is None:
        return "no nbgrader role"
    grade, solution, locked, points = role
    if grade:
        return f"{'hand-graded answer' if solution else 'test'} worth {points} points"
    return "answer" if solution else "locked" if locked else "plain"


def _student_text(source_cell):
    """What the released notebook shows of a source cell: nbgrader's ClearHiddenTests applied."""
    return _hidden_tests_cleared(source_cell.source, bool(nbutils.is_grade(source_cell)))


@functools.lru_cache(maxsize=4096)  # the source cells of a course, audited with every submission
def _hidden_tests_cleared(source, grade):
    cell = nbformat.v4.new_code_cell(source, metadata={"nbgrader": {"grade": grade}})
    ClearHiddenTests().preprocess_cell(cell, {}, 0)
    return cell.source


def _normalised(text):
    """Lines without trailing whitespace or trailing blank lines: what an edit must change."""
    return [line.rstrip() for line in text.rstrip().split("\n")]


def _kept_in_order(sequence):
    """Indices of a longest increasing subsequence of ``sequence`` (the cells that did not move)."""
    best = [1] * len(sequence)
    prev = [-1] * len(sequence)
    for i, x in enumerate(sequence):
        for j in range(i):
            if sequence[j] < x and best[j] + 1 > best[i]:
                best[i], prev[i] = best[j] + 1, j
    i = max(range(len(sequence)), key=best.__getitem__, default=-1)
    kept = set()
    while i != -1:
        kept.add(i)
        i = prev[i]
    return kept


def _structure_flags(submitted, source):
    """Deleted, duplicated, reordered and retyped nbgrader cells, and edited locked cells."""
    flags = []
    src = [(gid, c) for c in source.cells if (gid := _grade_id(c))]
    order = {gid: i for i, (gid, _) in enumerate(src)}
    found = {}
    for i, c in enumerate(submitted.cells):
        if _grade_id(c) in order:
            found.setdefault(_grade_id(c), []).append(i)
    for gid, scell in src:
        where = found.get(gid, [])
        if not where:
            flags.append(_flag(gid, None, "cell-deleted", f"{scell.cell_type} cell {gid!r} is missing",
                               f"no cell with grade_id {gid!r}"))
            continue
        if len(where) > 1:
            positions = ", ".join(str(w + 1) for w in where)
            flags.append(_flag(gid, None, "cell-duplicated", f"{len(where)} copies (cells {positions})",
                               f"grade_id {gid!r} appears {len(where)} times"))
        cell = submitted.cells[where[0]]
        if cell.cell_type != scell.cell_type or _role(cell) != _role(scell):
            change = (f"{scell.cell_type} -> {cell.cell_type}" if cell.cell_type != scell.cell_type else
                      f"{_describe_role(_role(scell))} -> {_describe_role(_role(cell))}")
            flags.append(_flag(gid, None, "cell-retyped", change, f"cell {gid!r} changed ({change})"))
        if nbutils.is_locked(scell):
            want, got = _normalised(_student_text(scell)), _normalised(cell.source)
            if want != got:
                at = next((k for k, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
                line = got[at].strip() if at < len(got) else "(lines deleted at the end)"
                flags.append(_flag(gid, at + 1, "locked-cell-edited", line,
                                   f"locked cell {gid!r} differs from the assignment from line {at + 1} on"))
    firsts = [order[_grade_id(c)] for i, c in enumerate(submitted.cells)
              if _grade_id(c) in order and found[_grade_id(c)][0] == i]
    kept = _kept_in_order(firsts)
    for k, position in enumerate(firsts):
        if k not in kept:
            gid = src[position][0]
            flags.append(_flag(gid, None, "cell-reordered", f"cell {gid!r} moved",
                               f"cell {gid!r} is out of the assignment's order"))
    return flags


def _runs_student_text(cell, source_roles):
    """True for a submitted cell whose own text runs at grading time (not restored by nbgrader)."""
    role = source_roles.get(_grade_id(cell))
    if role is not None and role["locked"]:
        return False
    cell_type = role["cell_type"] if role is not None else cell.cell_type
    return cell_type == "code"


def audit_notebook(submitted_nb, source_nb):
    """Flags for one submitted notebook against its source notebook (both nbformat 4 nodes).

    Returns a list of :class:`Flag`, empty for a clean submission. Nothing is executed and no
    score changes.
    """
    roles = {gid: {"locked": nbutils.is_locked(c), "cell_type": c.cell_type}
             for c in source_nb.cells if (gid := _grade_id(c))}
    locked = [(c, t) for c in source_nb.cells
              if c.cell_type == "code" and nbutils.is_locked(c) and (t := _parse(c.source)) is not None]
    student = [(i, c) for i, c in enumerate(submitted_nb.cells) if _runs_student_text(c, roles)]
    trees = [t for _, c in student if (t := _parse(c.source)) is not None]
    aliases = {k: set(v) for k, v in DEFAULT_ALIASES.items()}
    strings = _collect_names([t for _, t in locked] + trees, aliases)
    # What the locked setup cells define (np, checks, Z_EXTREME, ...) is what the tests rely on;
    # the names test cells bind are bound again each time a test cell runs.
    protected_names = {}
    for cell, tree in locked:
        if not nbutils.is_grade(cell):
            for name, paths in _top_level_bindings(tree, aliases).items():
                protected_names.setdefault(name, set()).update(paths)
    ctx = _Context(aliases, strings, protected_names)
    flags = _structure_flags(submitted_nb, source_nb)
    for i, cell in student:
        _scan_text(ctx, _label(cell, i), cell.source, cell.source.split("\n"))
    return flags + ctx.flags


# --- submission folders ---------------------------------------------------------------------------
def _importable(name):
    """True when ``name`` is a module this interpreter can import (builtin, installed or editable)."""
    try:
        return name in sys.builtin_module_names or importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a module in sys.modules without a spec, a broken parent
        return False


def _shadowing_files(folder):
    """Top-level modules and packages in ``folder`` that have the name of an importable module."""
    flags = []
    for entry in sorted(folder.iterdir()):
        if entry.is_dir() and (entry / "__init__.py").exists():
            name = entry.name
        elif entry.is_file() and entry.suffix in (".py", ".pyc", ".so"):
            name = entry.name.split(".")[0]
        else:
            continue
        if _importable(name):
            flags.append(_flag(entry.name, None, "shadowing-file", entry.name,
                               f"{entry.name} would be imported as `{name}` by the kernel, which runs in this folder"))
    return flags


def _read_notebook(path):
    """``(notebook or None, flags)`` for one notebook file, whatever state it is in."""
    name = path.name
    try:
        text = path.read_bytes().decode("utf-8")
        data = json.loads(text)
    except UnicodeDecodeError as exc:
        return None, [_flag(name, None, "invalid-json", str(exc), "the file is not UTF-8 text")]
    except json.JSONDecodeError as exc:
        where = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        return None, [_flag(name, exc.lineno, "invalid-json", exc.msg, where)]
    if not isinstance(data, dict) or "nbformat" not in data:
        return None, [_flag(name, None, "invalid-notebook", type(data).__name__, "the JSON has no `nbformat` field")]
    flags = []
    major = data["nbformat"]
    if major == 3:
        flags.append(_flag(name, None, "nbformat-3", "nbformat 3", "the notebook is nbformat 3"))
    elif major != 4:
        version = f"nbformat {major!r}"
        return None, [_flag(name, None, "invalid-notebook", version, f"{version} is not supported")]
    try:
        nb = nbformat.convert(nbformat.reader.reads(text), 4)  # the reader rejoins split source lines
        _, nb = nbformat.validator.normalize(nb)  # adds missing cell ids, as Jupyter does on opening
        nbformat.validate(nb)
    except (nbformat.ValidationError, nbformat.reader.NotJSONError, KeyError, TypeError, AttributeError,
            ValueError) as exc:
        message = str(exc).split("\n")[0]
        return None, flags + [_flag(name, None, "invalid-notebook", message, "nbformat cannot read it")]
    return nb, flags


def audit_submission_dir(path, source_nb):
    """Flags for one student's submission folder (``submitted/<student>/<assignment>/``).

    ``source_nb`` is the path of the source notebook; the submission must hold a notebook of the
    same file name. A missing folder or notebook, invalid JSON, a file that is not a notebook and
    nbformat 3 come back as flags (nbformat 3 is converted and audited as well), so a broken
    submission never raises.
    """
    folder = Path(path)
    source_path = Path(source_nb)
    notebook = folder / source_path.name
    if not notebook.is_file():
        others = sorted(p.name for p in folder.glob("*.ipynb")) if folder.is_dir() else []
        detail = f"no {source_path.name}" + (f" (found {', '.join(others)})" if others else "")
        return [_flag(source_path.name, None, "missing-notebook", detail, detail)]
    nb, flags = _read_notebook(notebook)
    flags += _shadowing_files(folder)
    if nb is not None:
        st = source_path.stat()
        flags += audit_notebook(nb, _source_notebook(str(source_path), st.st_mtime_ns, st.st_size))
    return flags


@functools.lru_cache(maxsize=16)
def _source_notebook(path, mtime_ns, size):
    """The source notebook at ``path``, read once per version (the audit never changes it)."""
    return nbformat.read(path, as_version=4)

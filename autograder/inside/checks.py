"""What the notebooks' test cells call: oracles against PyTorch and central finite differences.

A test cell should read as one line per exercise::

    checks.against_torch("softmax", softmax, "softmax", [checks.case("extreme", z32)])
    checks.check_function("Mul", Mul, "mul", checks.random_cases(0, [((3, 4), (3, 4))]),
                          saves=lambda a, b, out: [(a, b)])

Every failure raises :class:`CheckFailure` (an ``AssertionError``), whose message names the
exercise, the case (label, shapes, dtypes), the worst element (index, expected, got) and, when
the failure looks like a known mistake, a hint.

Guarantees the grader relies on:

* **Frozen references.** Every NumPy callable used here is bound when this module is imported,
  and every torch callable (with :mod:`autograder.outside.oracles`) when torch is first needed: at
  :func:`seal`, which the grading kernel calls before any notebook code runs, at import when
  torch is already loaded, or else at the first check that compares with torch. Importing torch
  takes seconds, and a notebook's setup cell should not freeze for them. A notebook that later
  rebinds ``np.allclose``, ``np.testing.assert_allclose`` or ``torch.allclose`` cannot change a
  verdict (this module never calls them anyway). The
  builtins (``abs``, ``float``, ``isinstance``...) are a private copy too: a notebook that
  assigns to ``builtins.abs`` changes its own ``abs``, not this module's.
* **Sealed while grading.** The grading kernel calls :func:`seal` before any notebook code runs:
  this module and :mod:`autograder.outside.oracles` then refuse assignments, so that
  ``checks.against_torch = lambda *a, **k: None`` fails in the cell that tries it.
* **NumPy only.** Student code runs under a profiler hook; a call into torch, ``engine_ref``
  or this package fails the exercise with a clear message.
* **Quiet.** Passing checks write nothing to stdout or stderr. Warnings raised by student code
  become a failure that says which warning, because nbgrader would silently zero the cell.
* **No engine_ref.** This module imports only numpy, torch and the standard library, so it
  runs in a student's environment.

Tolerances (``DEFAULT_TOL``), and why:

* float64 against torch: ``rtol=1e-7, atol=1e-9``. Two correct float64 formulas (softmax via
  max-shift or via logsumexp, say) differ by a few ulps times the number of terms summed, about
  1e-13 for the sizes used here; any real bug is off by more than 1e-3.
* float32 against torch: ``rtol=1e-4, atol=1e-5``. float32 has eps 1.2e-7; correct but
  different formulas of the exp/log family drift by tens of ulps, and logits of magnitude 1e3
  make absolute errors of about 1e-4 in results of that magnitude.
* float64 against central differences with step 1e-6: ``rtol=1e-5, atol=1e-6``. Truncation
  error is about h^2 |f'''| ~ 1e-12 and rounding error about eps |f| / h ~ 1e-10 |f|, with
  |f| up to ~1e3 for the weighted sums checked here: at most about 1e-7.
"""
import builtins
import hashlib
import operator as _operator
import os
import sys
import traceback
import types
import warnings
from contextlib import contextmanager as _contextmanager
from dataclasses import dataclass, field
from functools import lru_cache as _lru_cache
from functools import partial as _partial
from math import prod as _prod

import numpy as np

# --- frozen references ------------------------------------------------------------------
# Functions defined below look builtins up in this copy, taken before any notebook code ran.
__builtins__ = dict(vars(builtins))
_array = np.array
_asarray = np.asarray
_frombuffer = np.frombuffer
_abs = np.abs
_isnan = np.isnan
_isinf = np.isinf
_isfinite = np.isfinite
_where = np.where
_argmax = np.argmax
_unravel = np.unravel_index
_zeros_like = np.zeros_like
_empty = np.empty
_broadcast_shapes = np.broadcast_shapes
_default_rng = np.random.default_rng
# Reductions through the ufuncs' own methods: np.all and its kind are Python functions that look
# np.logical_and (and others) up in numpy's modules at call time, where a notebook can replace it.
_and_reduce = np.logical_and.reduce
_or_reduce = np.logical_or.reduce
_add_reduce = np.add.reduce
_max_reduce = np.maximum.reduce
_floating = np.floating
_integer = np.integer
_bool_ = np.bool_
_issubdtype = np.issubdtype
_ndarray = np.ndarray
_np_generic = np.generic
_errstate = np.errstate
_ones = np.ones
_float64 = np.float64
_float32 = np.float32
_number = np.number
_inf = np.inf
_setprofile = sys.setprofile
_getprofile = sys.getprofile
_gettrace = sys.gettrace
_catch_warnings = warnings.catch_warnings
_clear_frames = traceback.clear_frames
_simplefilter = warnings.simplefilter
_sha256 = hashlib.sha256
_environ = os.environ
_modules = sys.modules
# Bound by _bind_torch(), once, the first time torch is needed (see the module docstring).
torch = oracles = _Tensor = _as_tensor = _torch_grad = _no_grad = _vmap = _arange = _cat = _torch_float64 = None
# The student's kernel, while the grader runs a test cell outside it (autograder.outside.verdicts): the
# student's names are proxies, and their code runs there, under the NumPy-only hook of that side.
_REMOTE = None


def _bind_torch():
    """Import torch and the oracles and bind their callables, once."""
    global torch, oracles, _Tensor, _as_tensor, _torch_grad, _no_grad, _vmap, _arange, _cat, _torch_float64
    if oracles is not None:
        return
    import torch as _torch_module
    import torch.func

    from autograder.outside import oracles as _oracles
    torch, _Tensor, _as_tensor = _torch_module, _torch_module.Tensor, _torch_module.as_tensor
    _torch_grad, _no_grad, _vmap = _torch_module.autograd.grad, _torch_module.no_grad, _torch_module.func.vmap
    _arange, _cat, _torch_float64 = _torch_module.arange, _torch_module.cat, _torch_module.float64
    oracles = _oracles
    _warm_up()


def oracle(name):
    """The torch oracle called ``name`` (see :mod:`autograder.outside.oracles`), importing torch first if no
    check has needed it yet. In trusted grading it refuses an argument that holds an array the
    student's code can write into (``verdicts.Remote.refuse_shared``), as the checks' own oracles do."""
    _bind_torch()
    fn = oracles.oracle(name)
    if _REMOTE is None:
        return fn

    def refusing_shared(*args, **kwargs):
        _refuse_shared((*args, *kwargs.values()), f"the oracle {name!r}'s value")
        return fn(*args, **kwargs)
    return refusing_shared


def _refuse_shared(values, what):
    """In trusted grading, ``verdicts.Remote.refuse_shared``: no expected value from an array the
    student's code can write into."""
    if _REMOTE is not None:
        _REMOTE.refuse_shared(values, what)


def _is_tensor(x):
    """Whether ``x`` is a torch tensor, without importing torch for a notebook that never did."""
    if oracles is None and "torch" in _modules:
        _bind_torch()
    return _Tensor is not None and isinstance(x, _Tensor)

FD_EPS = 1e-6
DEFAULT_TOL = {  # (rtol, atol), see the module docstring for the reasoning
    "float64": (1e-7, 1e-9),
    "float32": (1e-4, 1e-5),
    "fd": (1e-5, 1e-6),
}
# Packages whose code a solution may not run: the reference solutions and torch itself.
FORBIDDEN_MODULES = ("torch", "engine_ref", "autograder", "functorch")


class CheckFailure(AssertionError):
    """A check that failed, with a message written for the student.

    In IPython (a notebook) it shows as: the test cell's line, the student's own frames when their
    code raised (kept with their locals, so that ``%debug`` opens in them), and the message. The
    checks' own frames are hidden (see :meth:`_render_traceback_`).
    """

    def _render_traceback_(self):
        """IPython's hook for an exception's traceback: this one's, without the frames of the
        autograder, contextlib (the checks' context managers) and IPython, nor any frame with a
        true local ``__tracebackhide__``; and without the chained cause, whose frames are already
        in this traceback when they are the student's."""
        try:
            from IPython import get_ipython
            shown = type(self)(*self.args)  # the same message, with no chained exception to print
            return get_ipython().InteractiveTB.structured_traceback(
                type(self), shown, _student_frames(self.__traceback__), tb_offset=0, context=3)
        except Exception:  # a traceback that cannot be formatted must not hide the message
            return [f"{type(self).__name__}: {self}"]


class NotWritten(CheckFailure):
    """A check that called an exercise whose cell still raises ``NotImplementedError()``."""


_HIDDEN_MODULES = ("autograder", "contextlib", "IPython")


def _student_frames(tb):
    """A copy of the traceback ``tb`` without the frames a student need not read (see
    :meth:`CheckFailure._render_traceback_`)."""
    kept = []
    while tb is not None:
        frame = tb.tb_frame
        module = frame.f_globals.get("__name__") or ""
        if module.split(".")[0] not in _HIDDEN_MODULES and not frame.f_locals.get("__tracebackhide__"):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def _np_all(a):
    return _and_reduce(a, axis=None)


def _np_any(a):
    return _or_reduce(a, axis=None)


def _np_sum(a):
    return _add_reduce(a, axis=None)


def _np_max(a):
    return _max_reduce(a, axis=None)


# --- cases --------------------------------------------------------------------------------
@dataclass
class Case:
    """One call of the student's function: positional ``args`` and keyword ``kwargs``."""

    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)

    def describe(self, context=""):
        """``case 'label' with (arguments)`` and ``context``: the words a failure message names it by."""
        parts = []
        for a in self.args:
            if isinstance(a, _ndarray):
                layout = "" if a.flags.c_contiguous or a.ndim < 2 else ", non-contiguous"
                parts.append(f"array{tuple(a.shape)} {a.dtype}{layout}")
            else:
                parts.append(repr(a))
        parts += [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"case '{self.label}' with ({', '.join(parts)}){context}"


def case(label, *args, **kwargs):
    """A :class:`Case` from positional and keyword arguments."""
    return Case(label, tuple(args), dict(kwargs))


def randn(seed, *shape, dtype=_float64, scale=1.0, low=None):
    """Seeded normal samples (or uniform on [low, low+scale] when ``low`` is given): a new array at
    each call. A small draw of an integer seed is made once and copied after: the checks draw the
    same arrays again and again (over a class of unit 1.1, 734 distinct draws in 12,000 calls), and
    seeding a generator costs more than copying a small array. (At most :data:`DRAWS_KEPT` draws of
    :data:`DRAW_KEPT_SIZE` elements are kept: 64 MB of float64 at worst.)"""
    if isinstance(seed, (int, _integer)):
        try:
            if _prod(shape) <= DRAW_KEPT_SIZE:
                return _drawn(seed, shape, dtype, scale, low).copy()
        except TypeError:  # (an argument that cannot be a key, or a shape that is no numbers)
            pass
    return _draw(seed, shape, dtype, scale, low)


def _draw(seed, shape, dtype, scale, low):
    rng = _default_rng(seed)
    if low is None:
        out = rng.standard_normal(shape) * scale
    else:
        out = low + rng.random(shape) * scale
    return _asarray(out, dtype=dtype)


@_lru_cache(maxsize=2048)
def _drawn(seed, shape, dtype, scale, low):
    """:func:`_draw`'s array on immutable memory (bytes): in a kernel where the checks run beside the
    student's code, no cell can write into a kept draw, nor make it writeable, to change later cases."""
    out = _draw(seed, shape, dtype, scale, low)
    return _frombuffer(out.tobytes(), dtype=out.dtype).reshape(out.shape)


DRAWS_KEPT, DRAW_KEPT_SIZE = _drawn.cache_parameters()["maxsize"], 4096


def random_cases(seed, shapes, dtype=_float64, label="random", positive=False, **kwargs):
    """One case per entry of ``shapes``; an entry is a tuple of argument shapes.

    ``shapes=[((3, 4), (3, 4)), ((1,), (5, 1))]`` gives two cases of two arguments each.
    With ``positive=True`` the values are drawn from [0.5, 2.5] (for ``log``, division).
    """
    out = []
    for i, arg_shapes in enumerate(shapes):
        args = tuple(
            randn(seed * 1000 + 17 * i + j, *s, dtype=dtype, scale=2.0, low=0.5 if positive else None)
            for j, s in enumerate(arg_shapes)
        )
        out.append(Case(f"{label} #{i} (seed {seed})", args, dict(kwargs)))
    return out


def strided(a):
    """A non-contiguous view with the same values as ``a`` (0-d arrays come back unchanged)."""
    a = _asarray(a)
    if a.ndim == 0:
        return a.copy()
    base = _empty(a.shape + (2,), dtype=a.dtype)
    base[..., 0] = a
    base[..., 1] = 0
    return base[..., 0]


# --- running student code -----------------------------------------------------------------
_FORBIDDEN_NAMES = {}  # module name: whether it is one of FORBIDDEN_MODULES' (the hooks ask at each call)


def _forbidden_name(name):
    plain = type(name) is str  # (only a str is kept: a subclass could hash and compare as another name)
    known = _FORBIDDEN_NAMES.get(name) if plain else None
    if known is None:
        known = bool(name) and name.split(".")[0] in FORBIDDEN_MODULES
        if plain and len(_FORBIDDEN_NAMES) < 10_000:  # (a notebook can make names without end)
            _FORBIDDEN_NAMES[name] = known
    return known


def _delegation_hook(found, allowed=frozenset()):
    """A profile hook that notes, in ``found``, the first call into a forbidden module (other
    than ``allowed`` code objects and the checks' own recording context)."""
    def hook(frame, event, arg):
        if found:
            return
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if _forbidden_name(name) and frame.f_code not in _ALLOWED_CODE and frame.f_code not in allowed:
                found.append(f"{name}.{frame.f_code.co_name}")
            elif frame.f_code.co_name in _COUNTING and name.startswith("numpy"):
                _note_bool_count(frame)
        elif event == "c_call":
            mod = getattr(arg, "__module__", None) or ""
            owner = type(getattr(arg, "__self__", None))
            if _forbidden_name(mod) or _forbidden_name(getattr(owner, "__module__", "")):
                found.append(f"{mod or owner.__name__}.{getattr(arg, '__name__', '?')}")
    return hook


class _TorchNoted:
    """While a NumPy-only call runs in a kernel that has torch (units 1.6 and 1.8, whose other
    exercises are about torch): a torch function mode that notes, in ``found``, the first torch
    function the student's code runs, by whatever route it was called. The profile hook sees a
    call only where Python makes it; a C caller (``functools.partial(torch.Tensor.view)``,
    ``map(torch.Tensor.stride, ...)``) calls torch with no event (red team, stop 40: 11/11 on 1.6's
    ``view_strides``), but torch's dispatch calls the mode whatever called it. A call that leaves
    the mode stack changed (the student's code removed the mode) is noted too."""

    def __init__(self, found):
        """``found`` None: nothing to note (a call that may use torch, or one run in the kernel)."""
        self.found, self.torch = found, _modules.get("torch")
        self.mode = None if self.torch is None or found is None else _torch_noting_mode()(found)

    def __enter__(self):
        if self.mode is not None:
            self.depth = self.torch._C._len_torch_function_stack()
            self.mode.__enter__()

    def __exit__(self, *exc):
        if self.mode is None:
            return
        stack = self.torch._C
        if stack._len_torch_function_stack() == self.depth + 1 and stack._get_function_stack_at(self.depth) is self.mode:
            self.mode.__exit__(*exc)
            return
        if not self.found:
            self.found.append("torch._C (its function mode stack)")
        while stack._len_torch_function_stack() > self.depth:
            stack._pop_torch_function_stack()


@_lru_cache(maxsize=None)
def _torch_noting_mode():
    """The mode class of :class:`_TorchNoted`, made once, when a kernel that has torch first needs it."""
    from torch.overrides import TorchFunctionMode

    class NotingTorch(TorchFunctionMode):
        def __init__(self, found):
            super().__init__()
            self.found = found

        __torch_function__ = _note_torch

    return NotingTorch


def _note_torch(mode, func, types, args=(), kwargs=None):
    """The noting mode's ``__torch_function__`` (one of the checks' allowed codes: the hooks let it run)."""
    if not mode.found:
        mode.found.append(f"torch.{getattr(func, '__name__', 'function')}")
    return func(*args, **(kwargs or {}))


# NumPy's Python-level functions that count a boolean mask into an int64 (``mask.sum()`` runs
# ``_methods._sum``): the dtype message names them when float32 became float64.
_COUNTING = {"_sum": "mask.sum()", "sum": "np.sum(mask)", "count_nonzero": "np.count_nonzero(mask)"}
_BOOL_COUNTS = []  # what the last student call counted, filled by the NumPy-only hook


def _note_bool_count(frame):
    a = frame.f_locals.get("a")
    if isinstance(a, _ndarray) and a.dtype == _bool_ and not _BOOL_COUNTS:
        _BOOL_COUNTS.append(_COUNTING[frame.f_code.co_name])


def run_student(task, fn, *args, allow_warnings=False, numpy_only=True, **kwargs):
    """Call student code and return its result.

    Raises CheckFailure when the code raises, when it emits a warning (unless
    ``allow_warnings``), or, with ``numpy_only``, when it calls into torch or ``engine_ref``.
    """
    __tracebackhide__ = True  # IPython's debugger skips the checks' frames
    _refuse_tracers(task)
    if _REMOTE is None:  # (a proxy's name and code are in the kernel: a request each, for a hint)
        _note_exercise(task, fn)
    found = []
    _BOOL_COUNTS.clear()
    previous = _getprofile()
    remote = _REMOTE
    noted = _TorchNoted(found if remote is None and numpy_only else None)  # (entered before the hook is set)
    with _catch_warnings(record=True) as caught, _delegation_reported(task, found), noted:
        _simplefilter("always")
        if remote is not None:
            caught = []
        try:
            if remote is not None:  # warnings come from the kernel's record, not this process
                outer = remote.found, remote.numpy_only, remote.caught
                remote.found, remote.numpy_only, remote.caught = found, numpy_only, caught
            elif numpy_only:
                _setprofile(_delegation_hook(found))
            try:
                result = (fn if remote is None else remote.in_kernel(fn))(*args, **kwargs)
            finally:
                if remote is not None:
                    remote.found, remote.numpy_only, remote.caught = outer
                else:
                    _setprofile(previous)
        except CheckFailure:
            raise
        except RecursionError as exc:
            # IPython takes a minute to render a traceback a thousand frames deep (nbgrader may time
            # the cell out): keep the error as the cause, without its frames.
            raise CheckFailure(
                f"[{task}] your code raised RecursionError: {exc}. Hint: a graph this deep needs an explicit "
                "stack (a Python list) instead of one recursive call per node.") from exc.with_traceback(None)
        except Exception as exc:  # the student's error becomes a readable failure
            failure = _failure_from(task, exc, fn)
            if _grading() or isinstance(exc, MemoryError):
                # drop the failed call's local variables: after a MemoryError they hold the memory
                # that the next exercises need (and while grading, nobody debugs them)
                _clear_frames(exc.__traceback__)
                raise failure from exc
            # the student's frames go on under this failure, with their locals: the traceback shows
            # them after the test cell's line, and %debug opens in the frame that raised
            raise failure.with_traceback(exc.__traceback__) from exc
    _refuse_tracers(task)  # one that the student's code set while it ran
    if caught and not allow_warnings:
        raise _warning_failure(task, caught[0].category.__name__, caught[0].message)
    if remote is not None:
        remote.guard(result, Guard(task, numpy_only, allow_warnings))
    return result


def _warning_failure(task, category, message):
    return CheckFailure(
        f"[{task}] your code emitted {category}: {message}. A correct solution runs "
        "without warnings (nbgrader fails a test cell that writes to stderr)."
        + (" Overflow means exp() of a large number: exponentiate only numbers <= 0. In softmax or "
           "logsumexp, shift by the maximum first; in a sigmoid (SiLU, BCE), use e = exp(-|x|): "
           "1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0." if "overflow" in str(message) else ""))


@dataclass(frozen=True)
class Guard:
    """In trusted grading, the rules of one :func:`run_student` call that each later use of what it
    returned keeps (``verdicts.Remote.guard``): its result's ``__array__``, ``__iter__`` or properties
    run under them as the call did, so that no work is left for after the checks looked."""

    task: str
    numpy_only: bool
    allow_warnings: bool
    max_depth: int = None
    what: str = ""

    def judge(self, depth, delegated, warned):
        """CheckFailure for what the kernel recorded of such a use (as ``verdicts.Remote._answered`` took it)."""
        if self.max_depth is not None and type(depth) is int:
            _fail_if_deep(self.task, depth, self.max_depth, self.what)
        if delegated and self.numpy_only:
            raise _delegation_failure(self.task, [str(delegated[0])])
        if warned and not self.allow_warnings:
            category, text = warned[0]
            raise _warning_failure(self.task, str(category[0]) if category else "Warning", text)


def _grading():
    """Whether this kernel is grading (the checks are sealed, see :func:`seal`)."""
    return isinstance(oracles, _SealedModule)


# Which exercise each notebook cell holds, learnt from the checks' calls: a cell's functions share
# its file name (IPython's name for one run of a cell), and ``check_function("add_mul_neg", Add, ...)``
# teaches that the cell of Add.forward (which also defines Mul) is exercise add_mul_neg. So a check
# that runs an unwritten function of another exercise can name it.
_EXERCISES = {}


def _cell_of(fn):
    """The file name of the notebook cell that defined the function ``fn``, or None."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    return code.co_filename if isinstance(code, types.CodeType) else None


def _note_exercise(task, fn):
    """Remember that the cell of the student's ``fn`` is exercise ``task`` when fn's name says so: it
    is the task's name, or one word of it (``Mul`` in ``add_mul_neg``)."""
    try:
        root = str(getattr(fn, "__qualname__", "")).split(".")[0].lower()
        cell = _cell_of(fn)
        if getattr(fn, "__module__", None) != "__main__" or not cell:
            return
        if root == task.lower():
            _EXERCISES[cell] = task
        elif root in task.lower().split("_"):
            _EXERCISES.setdefault(cell, task)
    except Exception:  # an object whose name cannot be read teaches nothing
        return


def _raised_in(exc):
    """The qualified name (``Mul.forward``) of the innermost notebook function that ``exc`` went
    through, or None when it went through none."""
    frames = getattr(exc, "frames", None)  # what the student's kernel recorded (trusted verdicts)
    if isinstance(frames, list):
        name = frames[-1][1] if frames and isinstance(frames[-1], list) and len(frames[-1]) == 3 else None
    else:
        code = _raising_code(exc)
        name = code and getattr(code, "co_qualname", code.co_name)
    return None if name == "<module>" else name


def _raising_code(exc):
    """The code of the innermost notebook frame that ``exc`` went through, or None."""
    tb, code = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__") == "__main__":
            code = tb.tb_frame.f_code
        tb = tb.tb_next
    return code


def _unwritten(exc):
    """The name of the notebook function that raised ``exc`` when ``exc`` is a
    ``NotImplementedError()`` with no message (a cell not written yet), else None."""
    if isinstance(exc, NotImplementedError) and not str(exc):
        return _raised_in(exc)
    return None


def _failure_from(task, exc, fn):
    """The :class:`CheckFailure` for an exception that the student's ``fn`` raised."""
    name = _unwritten(exc)
    if name is None:
        return CheckFailure(f"[{task}] your code raised {type(exc).__name__}: {exc}")
    code = _raising_code(exc)
    cell = code.co_filename if code else None
    exercise = _EXERCISES.get(cell)
    if exercise is None and cell is not None and cell == _cell_of(fn):
        exercise = task  # the cell of the function this check was given (Transpose.forward in view_ops)
    if exercise == task or (exercise is None and name == task):
        return NotWritten(f"[{task}] `{name}` is not written yet: replace the `raise NotImplementedError()` in "
                          "its cell with your code, run that cell, then this one.")
    if exercise:
        return NotWritten(f"[{task}] this check runs `{name}`, from exercise `{exercise}`, which is not written "
                          "yet: write that exercise first, then run this cell again.")
    return NotWritten(f"[{task}] this check runs `{name}`, which is not written yet: write it first (its "
                      "exercise is above), then run this cell again.")


@_contextmanager
def when_written(what="this example"):
    """For a given cell that runs the student's code (a worked example, a figure, putting it
    together): while an exercise it needs is not written yet, or when the student's code raises,
    the cell prints one line saying so instead of failing, so that Run All goes on. The test cells
    are where errors count.

    ``with checks.when_written("this figure"):`` prints ``(this figure runs once `linear` is
    written)``.
    """
    try:
        yield
    except Exception as exc:
        name = _unwritten(exc)
        if name is not None:
            print(f"({what} runs once `{name}` is written)")
        else:
            where = f"`{_raised_in(exc)}`" if _raised_in(exc) else "our code"
            print(f"({what} stopped: {where} raised {type(exc).__name__}: {exc}. Its test cell says more.)")


def _refuse_tracers(task):
    """While grading (sealed), no check runs under a trace or profile function that notebook code
    set: one can rewrite the checks' local variables (a debugger's power)."""
    if _grading() and (_gettrace() is not None or _getprofile() is not None):
        raise CheckFailure(f"[{task}] a trace or profile function (sys.settrace, sys.setprofile) is set: "
                           "the checks do not run under one while grading. Remove it and run the notebook again.")


@_contextmanager
def _delegation_reported(task, found):
    """Report a call into torch or engine_ref first, even when the student's code also raised."""
    try:
        yield
    except CheckFailure as failure:
        if found:
            raise _delegation_failure(task, found) from failure.__cause__
        raise
    if found:
        raise _delegation_failure(task, found)


def _delegation_failure(task, found):
    return CheckFailure(
        f"[{task}] your solution calls {found[0]}. Solutions must be written with NumPy only; "
        "handing the work to torch or to the reference package earns no points.")


class Later:
    """In a plan (:func:`_planned`), what an earlier step returns (``item``: that item of it)."""

    __slots__ = ("step", "item")

    def __init__(self, step, item=None):
        self.step, self.item = step, item


@_contextmanager
def _planned(steps):
    """In trusted grading, the student's calls ``steps`` that the block makes next (each
    ``(fn, args, kwargs, numpy_only)``, see ``verdicts.Remote.plan``) go to the kernel in one
    request, and the block's calls take their answers; in a notebook, nothing happens."""
    if _REMOTE is None:
        yield
        return
    with _REMOTE.plan(steps):
        yield


def _run_case(task, c, fn, *args, **kwargs):
    """:func:`run_student` for one case; a failure (an exception, a warning, a call into torch)
    names the case it happened in."""
    __tracebackhide__ = True  # IPython's debugger skips the checks' frames
    try:
        return run_student(task, fn, *args, **kwargs)
    except NotWritten:  # whichever case it was, the exercise is not written
        raise
    except CheckFailure as failure:
        head = f"[{task}] "
        text = str(failure)
        if text.startswith(head):
            text = f"{head}{c.describe()}: {text[len(head):]}"
        raise CheckFailure(text).with_traceback(failure.__traceback__) from failure.__cause__


# --- comparing ----------------------------------------------------------------------------
def _fmt_index(idx):
    return "()" if idx == () else str(tuple(int(i) for i in idx))


def _within(got, expected, rtol, atol):
    """Elementwise |got - expected| <= atol + rtol |expected| (False where either is nan or inf)."""
    with _errstate(invalid="ignore", over="ignore"):
        return _abs(got - expected) <= atol + rtol * _abs(expected)


def _close(got, expected, rtol, atol, within=None):
    """:func:`_within` (``within``, when already computed), with nan == nan and equal infs."""
    within = _within(got, expected, rtol, atol) if within is None else within
    return within | (_isnan(got) & _isnan(expected)) | (_isinf(expected) & (got == expected))


def added_not_replaced(got, expected):
    """A hint for :func:`assert_close` (``hints=[checks.added_not_replaced]``) where ``expected`` is
    the .grad after a second backward() call: ``got`` is one call's gradient (up to rounding)."""
    if _np_max(_abs(2 * got - expected)) <= 1e-9 * (1 + _np_max(_abs(expected))):
        return ("after the second backward() the .grad equals one call's gradient: it was replaced, not added "
                "to. torch accumulates into .grad across calls (that is why training loops call zero_grad()).")
    return None


def _value_hint(got, expected, kind, rtol, atol):
    """A guess at the mistake behind a value mismatch, or None."""
    if _np_any(~_isfinite(got) & _isfinite(expected)):
        return ("your result has nan or inf where PyTorch's is finite: an exp() overflowed or a log "
                "saw 0. Exponentiate only numbers <= 0: shift by the maximum (or use logsumexp) in softmax, "
                "exp(-|x|) in a sigmoid.")
    mask = _abs(expected) > 1e-8
    if _np_any(mask) and _np_all(_isfinite(got)):
        ratios = got[mask] / expected[mask]
        k = ratios.flat[0]
        if _np_all(_abs(ratios - k) <= 1e-6 * max(1.0, abs(k))) and abs(k - 1) > 1e-6:
            if abs(k + 1) < 1e-6:
                return "the sign is flipped."
            if kind == "grad" and abs(k - 0.5) < 1e-6:
                return ("half the expected gradient: a node reached by two paths (as in x * x) must "
                        "receive the sum of both contributions before it passes its gradient on: accumulate "
                        "with += instead of =, and visit each node after all of its consumers.")
            if kind == "grad" and abs(k - 2) < 1e-6:
                return ("twice the expected gradient: is one path counted twice, or were gradients "
                        "left over from an earlier backward call?")
            if kind == "grad":
                return (f"every element is off by the same factor {k:.6g}: a factor is missing or extra in a "
                        "backward rule (a swapped operand, a local derivative, the divisor of a mean).")
            return (f"every element is off by the same factor {k:.6g}: check the divisor of your "
                    "reduction (the mean divides by the number of counted elements).")
    return None


def assert_close(got, expected, *, task="", case="", name="output", rtol=None, atol=None,
                 check_dtype=True, kind="value", hints=()):
    """Assert that ``got`` matches ``expected`` in shape, dtype (optionally) and value.

    ``hints`` are callables ``hint(got, expected) -> str | None`` for mistakes specific to one
    exercise; the first one that answers is appended to the message, before the generic hints.
    """
    def where():  # ``case`` may be a function that names it: called only for a failure message
        text = case() if callable(case) else case
        return f"[{task}] {text}: " if text else f"[{task}] "

    if _is_tensor(got):
        raise CheckFailure(f"{where()}{name} is a torch.Tensor; return a NumPy array.")
    if got is None:
        raise CheckFailure(f"{where()}{name} is None; did the function forget to return a value?")
    got_arr = _asarray(got)
    exp_arr = _asarray(expected)
    if got_arr.dtype == object or not (_issubdtype(got_arr.dtype, _number) or got_arr.dtype == _bool_):
        raise CheckFailure(f"{where()}{name} has dtype {got_arr.dtype}; expected a numeric array.")
    if got_arr.shape != exp_arr.shape:
        msg = f"{where()}{name} has shape {tuple(got_arr.shape)}, expected {tuple(exp_arr.shape)}."
        try:
            stretched = _broadcast_shapes(got_arr.shape, exp_arr.shape) == got_arr.shape
        except ValueError:
            stretched = False
        if kind == "grad" and stretched:
            msg += (" It still has the broadcast shape: did you sum over the broadcast axes? "
                    "(The adjoint of broadcast is sum.)")
        elif got_arr.size == exp_arr.size:
            msg += " Same number of elements: check keepdims, reshapes or a missing transpose."
        raise CheckFailure(msg)
    if check_dtype and got_arr.dtype != exp_arr.dtype:
        if _BOOL_COUNTS and got_arr.dtype == _float64 and exp_arr.dtype == _float32:
            cause = (f"your code counted a boolean mask with {_BOOL_COUNTS[0]}, which returns a NumPy int64, and "
                     "float32 / int64 is float64: if that count divides the result, divide by int(count), a Python "
                     "int, which keeps float32; if not, look for another float64 value that promotes the result.")
        else:
            cause = "look for a float64 constant or array that promotes the result."
        raise CheckFailure(
            f"{where()}{name} has dtype {got_arr.dtype}, expected {exp_arr.dtype}. PyTorch keeps the input's "
            f"dtype (float32 in, float32 out); {cause}")
    if rtol is None or atol is None:
        key = "float32" if exp_arr.dtype == _float32 else "float64"
        rtol = DEFAULT_TOL[key][0] if rtol is None else rtol
        atol = DEFAULT_TOL[key][1] if atol is None else atol
    g = got_arr.astype(_float64, copy=False)
    e = exp_arr.astype(_float64, copy=False)
    within = _within(g, e, rtol, atol)
    if _np_all(within):  # every element finite and close: no nan or inf to look at
        return
    ok = _close(g, e, rtol, atol, within)
    if _np_all(ok):
        return
    with _errstate(invalid="ignore"):
        excess = _where(ok, -_inf, _abs(g - e) - (atol + rtol * _abs(e)))
    excess = _where(_isnan(excess), _inf, excess)
    idx = _unravel(int(_argmax(excess)), g.shape) if g.ndim else ()
    bad = int(_np_sum(~ok))
    msg = (f"{where()}{name} differs from the expected value in {bad} of {g.size} element(s). "
           f"Worst at index {_fmt_index(idx)}: expected {float(e[idx])!r}, got {float(g[idx])!r} "
           f"(tolerance: |got - expected| <= {atol:g} + {rtol:g} * |expected|).")
    for hint in tuple(hints):
        text = hint(g, e)
        if text:
            return _fail(msg, text)
    text = _value_hint(g, e, kind, rtol, atol)
    if text is None and g.ndim == 2 and g.shape[0] == g.shape[1] and _np_all(_close(g.T, e, rtol, atol)):
        text = "your result is the transpose of the expected one."
    _fail(msg, text)


def _fail(msg, hint):
    raise CheckFailure(msg + (f" Hint: {hint}" if hint else ""))


def _outputs(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _to_torch(a, requires_grad=False):
    if isinstance(a, _ndarray) or isinstance(a, (_floating, _integer)):
        t = _as_tensor(_array(a))
        if requires_grad:
            t.requires_grad_(True)
        return t
    return a


def _to_numpy(t):
    return t.detach().numpy() if _is_tensor(t) else _asarray(t)


def _torch_forward(fn, args, kwargs, grad_positions=()):
    _refuse_shared((*args, *kwargs.values()), "a torch oracle's value")
    targs = [_to_torch(a, i in grad_positions) for i, a in enumerate(args)]
    return targs, fn(*targs, **kwargs)


def _strided_copies(args):
    """The arguments of a case's non-contiguous call: each float array as a strided copy, the others as
    copies (the student's code may write into them)."""
    return tuple(strided(a) if _is_float_array(a) else _copy(a) for a in args)


def _is_float_array(a):
    return isinstance(a, _ndarray) and _issubdtype(a.dtype, _floating)


# --- forward checks -----------------------------------------------------------------------
def against_torch(task, fn, oracle, cases, *, rtol=None, atol=None, check_dtype=True, hints=(),
                  numpy_only=True, allow_warnings=False):
    """Compare ``fn(*case.args, **case.kwargs)`` with the torch oracle on every case.

    ``oracle`` is a name from :data:`autograder.outside.oracles.ORACLES` (in notebooks, always a name)
    or a callable taking torch tensors. Outputs may be one array or a tuple of arrays.
    """
    _bind_torch()
    torch_fn = oracles.oracle(oracle)
    runs = [(c, [_copy(a) for a in c.args], _torch_value(torch_fn, c)) for c in cases]
    with _planned([(fn, args, c.kwargs, numpy_only) for c, args, _ in runs]):
        for c, args, expected in runs:
            got = _run_case(task, c, fn, *args, numpy_only=numpy_only, allow_warnings=allow_warnings, **c.kwargs)
            if isinstance(expected, Exception):
                raise expected
            _compare_outputs(task, c, got, expected, rtol, atol, check_dtype, hints)


def _torch_value(torch_fn, c):
    """Torch's value for a case, before the student's code runs: a case's array may be the student's
    own (a model's weights), which that code can write into. An error of torch's (shapes that the
    student's code made) is raised after that code has run on the case, which may explain it first."""
    try:
        return _torch_forward(torch_fn, c.args, c.kwargs)[1]
    except Exception as exc:
        return exc


def _copy(a):
    """A private copy of a case argument that keeps its layout: a non-contiguous argument stays
    non-contiguous (``ndarray.copy`` would make it C-contiguous and hide layout bugs)."""
    if not isinstance(a, _ndarray):
        return a
    return a.copy() if a.flags.c_contiguous else strided(a)


def _compare_outputs(task, c, got, expected, rtol, atol, check_dtype, hints, kind="value", names=None):
    exp = _outputs(expected)
    got_t = _outputs(got) if len(exp) > 1 else (got,)
    if len(got_t) != len(exp):
        raise CheckFailure(f"[{task}] {c.describe()}: returned {len(got_t)} value(s), expected {len(exp)}.")
    for i, (g, e) in enumerate(zip(got_t, exp)):
        name = names[i] if names else ("output" if len(exp) == 1 else f"output [{i}]")
        assert_close(g, _to_numpy(e), task=task, case=c.describe, name=name, rtol=rtol, atol=atol,
                     check_dtype=check_dtype, kind=kind, hints=hints)


# --- gradients ----------------------------------------------------------------------------
def numerical_vjp(f, args, i, grad_out, eps=FD_EPS):
    """Central-difference ``sum(grad_out * df/dargs[i])``, one coordinate at a time, in float64."""
    # C order, so that ``x.reshape(-1)`` below is a view of x and the perturbations reach f
    args = [a.astype(_float64, order="C") if _is_float_array(a) else a for a in args]
    x = args[i]
    out = _zeros_like(x)
    flat = x.reshape(-1)
    for k in range(flat.size):
        old = flat[k]
        flat[k] = old + eps
        plus = _asarray(f(*args), dtype=_float64)
        flat[k] = old - eps
        minus = _asarray(f(*args), dtype=_float64)
        flat[k] = old
        out.reshape(-1)[k] = _np_sum(grad_out * (plus - minus)) / (2 * eps)
    return out


FD_BATCH = 1 << 16  # the floats in one batch of perturbed inputs (_batched_fd), at most
FD_BATCHED_FROM = 8  # the coordinates of an input, and the rows of a batch, from which batches pay


def _fd_of_torch(torch_fn, kwargs, args, i, grad_out):
    """:func:`numerical_vjp` of torch's forward ``torch_fn`` (an oracle, a graph's ``build``), with the
    two calls of every coordinate batched into one call of ``torch.func.vmap``: the same perturbed
    inputs, the same values to rounding, for a fraction of the cost of two torch calls a coordinate
    (the loop was 29% of the grader's CPU on unit 1.4's class). A function that vmap cannot batch
    (it reads a value, say with ``.item()``), or whose output is not of ``grad_out``'s shape, gets
    the loop."""
    _refuse_shared((*args, grad_out, *kwargs.values()), "central differences")
    n = _asarray(args[i]).size
    if FD_BATCHED_FROM <= n <= FD_BATCH // (2 * FD_BATCHED_FROM):  # (a batch of rows costs about what 8 calls do)
        try:
            return _batched_fd(torch_fn, kwargs, args, i, grad_out)
        except Exception:
            pass
    return numerical_vjp(_numpy_forward(torch_fn, kwargs), args, i, grad_out)


def _batched_fd(torch_fn, kwargs, args, i, grad_out, eps=FD_EPS):
    """:func:`_fd_of_torch`'s batches: each row of a batch is ``args[i]`` in C order with one
    coordinate moved by ``+eps`` (the first half) or ``-eps`` (the second), as the loop moves it."""
    targs = [_to_torch(a.astype(_float64) if _is_float_array(a) else a) for a in args]
    shape, x = targs[i].shape, targs[i].reshape(-1)
    n, go = x.numel(), _as_tensor(_array(grad_out, dtype=_float64))

    def f(row):
        return torch_fn(*targs[:i], row.reshape(shape), *targs[i + 1:], **kwargs)

    out, step = [], FD_BATCH // (2 * n)
    with _no_grad(), _catch_warnings():
        _simplefilter("ignore")  # vmap's note that it runs an op one row at a time
        for start in range(0, n, step):
            cols = _arange(start, min(start + step, n))
            rows, m = _arange(len(cols)), len(cols)
            batch = x.expand(2 * m, n).clone()
            batch[rows, cols], batch[rows + m, cols] = x[cols] + eps, x[cols] - eps
            y = _vmap(f)(batch).to(_torch_float64)
            if tuple(y.shape[1:]) != tuple(go.shape):
                raise ValueError("the output is not of grad_out's shape")
            out.append(((y[:m] - y[m:]) * go).reshape(m, -1).sum(1) / (2 * eps))
    return _to_numpy(_cat(out)).reshape(shape)


def _torch_vjp(torch_fn, args, kwargs, wrt, grad_out):
    """Forward value and the gradients of ``sum(grad_out * f)`` for each position in ``wrt``."""
    targs, out = _torch_forward(torch_fn, args, kwargs, grad_positions=wrt)
    grads = _torch_grad(out, [targs[i] for i in wrt], _as_tensor(_array(grad_out)), allow_unused=True)
    return _to_numpy(out), [_zeros_like(args[i]) if g is None else _to_numpy(g) for g, i in zip(grads, wrt)]


def _numpy_forward(torch_fn, kwargs):
    def f(*args):
        with _no_grad():
            return _to_numpy(torch_fn(*[_to_torch(a) for a in args], **kwargs))
    return f


def _check_grads(task, c, got, args, wrt, expected, torch_fn, grad_out, hints, fd=True, names=None):
    """Compare student gradients with torch autograd and (optionally) central differences."""
    if len(got) < len(wrt):
        raise CheckFailure(f"[{task}] {c.describe()}: backward returned {len(got)} gradient(s) for "
                           f"{len(wrt)} input(s); return one gradient per input, in argument order.")
    for k, i in enumerate(wrt):
        label = f"grad of {names[i] if names else f'input {i}'} (shape {tuple(args[i].shape)})"
        assert_close(got[k], expected[k], task=task, case=_partial(c.describe, " vs torch autograd"),
                     name=label, kind="grad", hints=hints)
        if fd:
            numeric = _fd_of_torch(torch_fn, c.kwargs, list(args), i, grad_out)
            rtol, atol = DEFAULT_TOL["fd"]
            assert_close(got[k], numeric, task=task, case=_partial(c.describe, " vs central differences"),
                         name=label, rtol=rtol, atol=atol, check_dtype=False, kind="grad", hints=hints)


def _assert_zero(task, c, grads, wrt, names=None):
    for k, i in enumerate(wrt):
        g = _asarray(grads[k])
        if not _np_all(g == 0):
            label = names[i] if names else f"input {i}"
            raise CheckFailure(
                f"[{task}] {c.describe()}: with a zero upstream gradient the grad of {label} must be zero, "
                f"but its largest entry is {float(_np_max(_abs(g)))!r}. Multiply by the incoming grad.")


def _layout_tol(dtype):
    """(rtol, atol) between results on a non-contiguous input and on its contiguous copy.

    The same formula may add its terms in another order on another memory layout (BLAS blocks
    a strided matrix differently), so the two may differ by a few ulps of each term: about 1e-15
    relative in float64 and 1e-6 in float32 (eps 1.2e-7). A layout bug (reading the strides
    wrongly) is off by the size of the values themselves."""
    return (1e-5, 1e-6) if dtype == _float32 else (1e-12, 1e-12)


def check_vjp(task, backward_fn, oracle, cases, *, wrt=None, upstream=True, seed=0, hints=(),
              names=None, fd=True, numpy_only=True):
    """Check a hand-derived backward function against torch autograd and central differences.

    For each case the student is called as ``backward_fn(*case.args, grad_out, **case.kwargs)``
    (or without ``grad_out`` when ``upstream`` is False, for losses: the upstream gradient is
    then 1, or ones for ``reduction="none"``; an array ``upstream`` is the ``grad_out`` of every
    case, a worked example's numbers) and must return one gradient per position in
    ``wrt`` (default: every float argument). The oracle is the forward function. Also checked:
    a zero upstream gradient gives zero gradients, and non-contiguous inputs give the same
    gradients as contiguous ones.
    """
    _bind_torch()
    torch_fn = oracles.oracle(oracle)
    given = isinstance(upstream, _ndarray)
    passes_grad = given or bool(upstream)
    runs, steps = [], []  # per case: what it needs; the student's calls of all cases, in their order
    for n, c in enumerate(cases):
        args = tuple(_copy(a) for a in c.args)
        w = tuple(i for i, a in enumerate(args) if _is_float_array(a)) if wrt is None else tuple(wrt)
        _, out = _torch_forward(torch_fn, args, c.kwargs)
        shape = _to_numpy(out).shape
        if given:  # a given upstream gradient, e.g. a worked example's
            g_out = upstream.astype(_float64)
        else:
            g_out = randn(seed * 7919 + n, *shape) if upstream else _ones(shape)
        calls = [(args, g_out.astype(args[w[0]].dtype))]  # (each call its own copy: the code may write into it)
        if passes_grad:
            calls.append((tuple(_copy(a) for a in c.args), _zeros_like(g_out)))
        calls.append((_strided_copies(c.args), g_out.astype(args[w[0]].dtype)))
        calls = [(xs, (g,) if passes_grad else ()) for xs, g in calls]
        _, expected = _torch_vjp(torch_fn, args, c.kwargs, w, g_out)  # (before the student's code sees args)
        runs.append((c, args, w, g_out, expected, calls))
        steps += [(backward_fn, (*xs, *extra), c.kwargs, numpy_only) for xs, extra in calls]
    with _planned(steps):
        for c, args, w, g_out, expected, calls in runs:
            _check_vjp_case(task, backward_fn, torch_fn, c, args, w, g_out, expected, calls, hints, names, fd, numpy_only)


def _check_vjp_case(task, backward_fn, torch_fn, c, args, w, g_out, expected, calls, hints, names, fd, numpy_only):
    def call(xs, extra):
        return _outputs(_run_case(task, c, backward_fn, *xs, *extra, numpy_only=numpy_only, **c.kwargs))

    got = call(*calls[0])
    _check_grads(task, c, got, c.args, w, expected, torch_fn, g_out, hints, fd=fd, names=names)
    if len(calls) == 3:
        _assert_zero(task, c, call(*calls[1]), w, names)
    again = call(*calls[-1])
    rtol, atol = _layout_tol(args[w[0]].dtype)
    for k, i in enumerate(w):
        assert_close(again[k], got[k], task=task, case=_partial(c.describe, " with non-contiguous inputs"),
                     name=f"grad of {names[i] if names else f'input {i}'}", rtol=rtol, atol=atol, kind="grad")


class RecordingContext:
    """A ``ctx`` that records what a Function saves, for the checks' use."""

    def __init__(self):
        self.saved = ()

    def save_for_backward(self, *values):
        self.saved = values

    @property
    def saved_tensors(self):
        return self.saved


def locked_cell(*grade_ids):
    """The names that the notebook's locked cells ``grade_ids`` define, run in that order in one
    scope (the course's own code, such as unit 1.5's engine), for computing expected values. In
    trusted grading those cells' text, read from the source notebook, runs in the grader, where no
    student cell can have changed what it defines; in a notebook they are the notebook's own names."""
    if _REMOTE is not None:
        return _REMOTE.locked_cell(*grade_ids)
    return types.SimpleNamespace(**sys._getframe(1).f_globals)


def shared_dict(mapping):
    """A copy of ``mapping`` that the student's code receives as the caller's own dict. In trusted
    grading a dict travels by value; this one lives in the student's kernel instead, so that what
    the code does to it (a key rebound to another array) is what the test then sees, as in a notebook."""
    if _REMOTE is not None:
        return _REMOTE.call(None, list(mapping.items()), builtin="shared_dict")
    return dict(mapping)


def recorded_forward(Fn, *args, **kwargs):
    """``(ctx, Fn.forward(ctx, *args, **kwargs))`` with a fresh :class:`RecordingContext`: in trusted
    grading, one request to the student's kernel."""
    __tracebackhide__ = True
    if _REMOTE is not None:
        return _REMOTE.call(None, Fn, *args, builtin="recorded_forward", **kwargs)
    return _recorded_forward(Fn, *args, **kwargs)


def _recorded_forward(Fn, *args, **kwargs):
    __tracebackhide__ = True
    ctx = RecordingContext()
    return ctx, Fn.forward(ctx, *args, **kwargs)


def _plain_saved(value):
    """True for what a forward saves, read by the checks without running the student's code again: a
    tuple of arrays, numbers and tuples of those (an object of the student's, answering len() and
    iteration when asked, could compute the right values for the check alone: red team, stop 40)."""
    if type(value) is tuple:
        return all(_plain_saved(v) for v in value)
    return value is None or type(value) in (_ndarray, int, float, bool) or isinstance(value, _np_generic)


def _same_saved(saved, expected):
    if len(saved) != len(expected):
        return False
    for s, e in zip(saved, expected):
        if isinstance(e, tuple) and not isinstance(s, _ndarray):
            if tuple(s) != e:
                return False
            continue
        s_arr, e_arr = _asarray(s), _asarray(e)
        # An expected output comes from torch, which may differ from NumPy's by an ulp (tanh
        # does): the forward tolerance applies. Saving a different value is off by far more.
        rtol, atol = DEFAULT_TOL["float32" if e_arr.dtype == _float32 else "float64"]
        if s_arr.shape != e_arr.shape or not _np_all(_close(s_arr.astype(_float64), e_arr.astype(_float64), rtol, atol)):
            return False
    return True


def check_function(task, Fn, oracle, cases, *, saves=None, seed=0, hints=(), names=None, fd=True,
                   numpy_only=True, upstream=None):
    """Check a ``Function`` subclass: forward, saved values and backward.

    ``Fn.forward(ctx, *case.args, **case.kwargs)`` is compared with the torch oracle;
    ``Fn.backward(ctx, grad)`` with a random float64 upstream ``grad`` against torch autograd
    and central differences; a zero ``grad`` must give zero gradients; non-contiguous inputs
    must give the same results. ``saves(*args, out=..., **kwargs)`` returns the list of
    acceptable tuples of saved values (e.g. ``[(a, b)]``, or two options for ReLU's input or mask).
    ``upstream``, an array, replaces the random upstream ``grad`` (a worked example's numbers).
    """
    _bind_torch()
    torch_fn = oracles.oracle(oracle)
    if _REMOTE is None:  # run_student sees recorded_forward: the exercise is Fn.forward's
        _note_exercise(task, getattr(Fn, "forward", None))
    backward = getattr(Fn, "backward", None)  # (a missing one is reported where the checks first call it)
    runs, steps = [], []  # per case: what it needs; the student's calls of all cases, in their order
    for n, c in enumerate(cases):
        args = tuple(_copy(a) for a in c.args)
        _, expected_out = _torch_forward(torch_fn, c.args, c.kwargs)
        if upstream is None:
            g_out = randn(seed * 7919 + n, *_to_numpy(expected_out).shape)
        else:
            g_out = _array(upstream, dtype=_float64)
        # What the checks expect, computed before the student's code runs, from arrays it never receives: a
        # write into an input or the upstream gradient (which travels back) changes only the student's own copy.
        w = tuple(i for i, a in enumerate(c.args) if _is_float_array(a))
        _, expected = _torch_vjp(torch_fn, c.args, c.kwargs, w, g_out)
        inputs = (args, tuple(_copy(a) for a in c.args), _strided_copies(c.args))
        grads = (_array(g_out), _zeros_like(g_out), _array(g_out))  # (each call its own copy)
        runs.append((c, inputs, expected_out, w, g_out, expected, grads))
        for k, (xs, grad) in enumerate(zip(inputs, grads)):
            forward = len(steps)
            steps.append((None, (Fn, *xs), c.kwargs, numpy_only, "recorded_forward"))
            if k == 0 and saves is not None:  # the checks read what forward saved before backward runs
                steps.append((None, (Later(forward, 0), "saved"), {}, False, "getattr"))
            steps.append((backward, (Later(forward, 0), grad), {}, numpy_only))
    with _planned(steps if backward is not None else ()):
        for c, inputs, expected_out, w, g_out, expected, grads in runs:
            _check_function_case(task, Fn, backward, torch_fn, c, inputs, expected_out, w, g_out, expected, grads,
                                 saves, hints, names, fd, numpy_only)


def _check_function_case(task, Fn, backward, torch_fn, c, inputs, expected_out, w, g_out, expected, grads, saves,
                         hints, names, fd, numpy_only):
    def forward(xs):
        return _run_case(task, c, recorded_forward, Fn, *xs, numpy_only=numpy_only, **c.kwargs)

    ctx, out = forward(inputs[0])
    _compare_outputs(task, c, out, expected_out, None, None, True, hints, names=["forward output"])
    if saves is not None:
        expected_np = _to_numpy(expected_out)
        options = saves(*c.args, out=expected_np, **c.kwargs)
        saved = ctx.saved
        if not _plain_saved(saved):
            raise CheckFailure(
                f"[{task}] {c.describe()}: forward saved {'a tuple holding' if type(saved) is tuple else 'an'} object "
                "of another kind than arrays and numbers; save the values themselves, as NumPy arrays, with "
                "ctx.save_for_backward(...).")
        if not any(_same_saved(saved, opt) for opt in options):
            known = [(f"the input {names[i] if names else i}", a) for i, a in enumerate(c.args)
                     if isinstance(a, _ndarray)] + [("the output", expected_np)]
            raise CheckFailure(
                f"[{task}] {c.describe()}: forward saved {_describe_saved(saved, known)}, but this op "
                f"should save {' or '.join(_describe_saved(o, known) for o in options)}. Save exactly what "
                "backward needs.")
    backward = Fn.backward if backward is None else backward
    got = _outputs(_run_case(task, c, backward, ctx, grads[0], numpy_only=numpy_only))
    _check_grads(task, c, got, c.args, w, expected, torch_fn, g_out, hints, fd=fd, names=names)
    ctx0, _ = forward(inputs[1])
    _assert_zero(task, c, _outputs(_run_case(task, c, backward, ctx0, grads[1], numpy_only=numpy_only)), w, names)
    ctx_s, out_s = forward(inputs[2])
    again = _outputs(_run_case(task, c, backward, ctx_s, grads[2], numpy_only=numpy_only))
    rtol, atol = _layout_tol(_asarray(out).dtype)
    assert_close(out_s, out, task=task, case=_partial(c.describe, " with non-contiguous inputs"),
                 name="forward output", rtol=rtol, atol=atol)
    for k, i in enumerate(w):
        assert_close(again[k], got[k], task=task, case=_partial(c.describe, " with non-contiguous inputs"),
                     name=f"grad of {names[i] if names else f'input {i}'}", rtol=rtol, atol=atol, kind="grad")


def _describe_saved(values, known=()):
    """``(the input x, the output)``: each saved array named by the case value it equals, if any."""
    def one(v):
        if isinstance(v, _ndarray):
            if v.dtype == _bool_:
                return f"a boolean mask{tuple(v.shape)}"
            for label, a in known:
                if _same_saved((v,), (a,)):
                    return label
            return f"an array{tuple(v.shape)} that is neither an input nor the output"
        return repr(v)
    return "(" + ", ".join(one(v) for v in values) + ")"


def check_graph(task, Tensor, build, leaves, *, names=None, seed=0, hints=(), fd=True, numpy_only=True):
    """Run ``build`` on the student's Tensor class and on torch, then compare leaf gradients.

    ``build(*leaves)`` must use only operations both classes share (``+ - * / @``, ``.sum()``,
    ``.exp()``, ``.log()``, ``.tanh()``, ``.relu()``) and return a scalar. ``leaves`` are
    float64 arrays; each leaf's ``.grad`` is compared with torch autograd and with central
    differences of torch's forward.
    """
    _bind_torch()
    names = names or [f"leaf {i}" for i in range(len(leaves))]
    c = Case(f"graph (seed {seed})", tuple(leaves))

    # Each piece of student code is handed to run_student itself: a helper defined in this
    # module would be flagged by the NumPy-only hook as a call into the autograder.
    ts = [_run_case(task, c, Tensor, _copy(a), requires_grad=True, numpy_only=numpy_only) for a in leaves]
    out = _run_case(task, c, build, *ts, numpy_only=numpy_only)
    _run_case(task, c, out.backward, numpy_only=numpy_only)
    targs, t_out = _torch_forward(build, leaves, {}, grad_positions=tuple(range(len(leaves))))
    t_out.backward()
    assert_close(_asarray(out.data), _to_numpy(t_out), task=task, case=c.describe, name="output")
    for i, (t, tt) in enumerate(zip(ts, targs)):
        if t.grad is None:
            raise CheckFailure(f"[{task}] {c.describe()}: {names[i]} has no .grad after backward().")
        assert_close(t.grad, _to_numpy(tt.grad), task=task, case=_partial(c.describe, " vs torch autograd"),
                     name=f"grad of {names[i]}", kind="grad", hints=hints)
        if fd:
            rtol, atol = DEFAULT_TOL["fd"]
            numeric = _fd_of_torch(build, {}, list(leaves), i, _ones(()))
            assert_close(t.grad, numeric, task=task, case=_partial(c.describe, " vs central differences"),
                         name=f"grad of {names[i]}", rtol=rtol, atol=atol, check_dtype=False, kind="grad",
                         hints=hints)
    return out, ts


def expect_raises(task, exc_type, fn, *args, match=None, **kwargs):
    """Assert that student code raises ``exc_type`` (whose message contains ``match``). It gets copies
    of the arrays it is given, which the test may go on using."""
    try:
        run_student(task, fn, *[_copy(a) for a in args], **{k: _copy(v) for k, v in kwargs.items()})
    except CheckFailure as failure:
        cause = failure.__cause__
        if isinstance(cause, exc_type) and (match is None or match in str(cause)):
            return cause
        raise
    raise CheckFailure(f"[{task}] expected {exc_type.__name__} to be raised, but nothing was raised.")


def check_value(task, name, got, expected, *, rtol=0.0, atol=0.0, hint=None):
    """A concept check: the student's variable ``name`` must equal ``expected`` within tolerance."""
    if got is None or got is Ellipsis:
        raise CheckFailure(f"[{task}] set `{name}` to your answer.")
    try:
        value = float(got)
    except (TypeError, ValueError):
        raise CheckFailure(f"[{task}] `{name}` should be a number, got {got!r}.") from None
    if not abs(value - expected) <= atol + rtol * abs(expected):
        raise CheckFailure(f"[{task}] `{name}` = {value!r} is not right." + (f" Hint: {hint}" if hint else ""))


def answer_digest(value):
    """The stored form of a concept-check answer that would give itself away: the SHA-256 of its
    canonical text (an int as ``str(int)``, a string stripped and lower-cased)."""
    if isinstance(value, (bool, _bool_)):
        text = str(bool(value))
    elif isinstance(value, (int, _integer)):
        text = str(int(value))
    else:
        text = str(value).strip().lower()
    return _sha256(text.encode()).hexdigest()


def check_hash(task, name, got, digest, *, hint=None):
    """A concept check whose answer is an integer, a boolean or a word: the student's variable
    ``name`` must have the stored ``digest`` (:func:`answer_digest` of the right answer), so a
    visible test can check it without printing it."""
    if got is None or got is Ellipsis:
        raise CheckFailure(f"[{task}] set `{name}` to your answer.")
    if answer_digest(got) != digest:
        raise CheckFailure(f"[{task}] `{name}` = {got!r} is not right." + (f" Hint: {hint}" if hint else ""))


# --- sealing --------------------------------------------------------------------------------
class _SealedModule(types.ModuleType):
    """A module whose attributes can no longer be assigned or deleted."""

    def __setattr__(self, name, value):
        raise AttributeError(f"{self.__name__} is read-only while grading: `{name}` cannot be rebound")

    def __delattr__(self, name):
        raise AttributeError(f"{self.__name__} is read-only while grading: `{name}` cannot be deleted")


class _SealedPackage(types.ModuleType):
    """The ``autograder.inside`` and ``autograder.outside`` packages while grading: ``checks`` and ``oracles``
    stay what they are (test cells run ``from autograder.inside import checks``); other submodules may still be
    imported."""

    def __setattr__(self, name, value):
        if name in ("checks", "oracles"):
            raise AttributeError(f"{self.__name__}.{name} is read-only while grading")
        super().__setattr__(name, value)

    def __delattr__(self, name):
        if name in ("checks", "oracles"):
            raise AttributeError(f"{self.__name__}.{name} is read-only while grading")
        super().__delattr__(name)


def seal():
    """Make this module and :mod:`autograder.outside.oracles` read-only, for the rest of the process.

    The packages' ``checks`` and ``oracles`` attributes can no longer be rebound either.

    Their tables (``DEFAULT_TOL``, ``ORACLES``) become read-only views, and their attributes
    can no longer be rebound. For the grading kernel only: tests that monkeypatch the checks
    run unsealed.
    """
    global DEFAULT_TOL
    _bind_torch()  # before any notebook code can have changed torch
    if isinstance(oracles, _SealedModule):
        return
    DEFAULT_TOL = types.MappingProxyType(dict(DEFAULT_TOL))
    oracles.ORACLES = types.MappingProxyType(dict(oracles.ORACLES))
    for module in (sys.modules[__name__], oracles):
        module.__class__ = _SealedModule
    for package in (__package__, oracles.__package__):
        sys.modules[package].__class__ = _SealedPackage


def _warm_up():
    """Pay torch's one-off autograd start-up (an upstream gradient makes it import sympy's
    symbolic shapes, about half a second) when the checks are imported, not inside the first
    test cell's time."""
    x = _as_tensor([1.0]).requires_grad_(True)
    _torch_grad(x * x, [x], _as_tensor([1.0]))


if "torch" in _modules:  # already paid for: bind now, before any more notebook code runs
    _bind_torch()


# --- unit 1.3 ---------------------------------------------------------------------------------
def run_shallow(task, fn, *args, max_depth=50, what="this graph", **kwargs):
    """:func:`run_student`, failing when the student's code nests Python calls more than
    ``max_depth`` deep, as a recursive graph walk does (one call per node). The depth is counted
    by the profiler hook, so raising ``sys.setrecursionlimit`` does not help."""
    if _REMOTE is not None:  # the student's kernel counts, in each call the test makes
        outer, _REMOTE.deepest = _REMOTE.deepest, [0]
        try:
            result = run_student(task, fn, *args, numpy_only=False, **kwargs)
            deepest = _REMOTE.deepest[0]
        finally:
            _REMOTE.deepest = outer
        _fail_if_deep(task, deepest, max_depth, what)
        _REMOTE.guard(result, Guard(task, False, False, max_depth, what))
        return result
    depth = [0, 0]  # current, deepest
    found = []
    hook = depth_hook(depth, _delegation_hook(found))

    def probe(*a, **k):  # the hook starts inside this frame, so only the student's calls are seen
        _setprofile(hook)
        try:
            return fn(*a, **k)
        finally:
            _setprofile(None)

    with _delegation_reported(task, found):
        result = run_student(task, probe, *args, numpy_only=False, **kwargs)
    _fail_if_deep(task, depth[1], max_depth, what)
    return result


def build_graph(fn, leaves, inputs):
    """The nodes of a test graph: ``leaves``, then one node per entry of ``inputs``, made by
    ``fn(*[nodes[i] for i in entry])`` (``fn`` a callable, or the name of an operator such as
    ``"add"``). The test knows the graph's shape from ``inputs`` itself, without asking any node.
    In trusted grading the whole build is one request to the student's kernel."""
    if _REMOTE is not None:
        return _REMOTE.call(None, fn, list(leaves), [list(map(int, entry)) for entry in inputs], builtin="build_graph")
    return _build_graph(fn, leaves, inputs)


def _build_graph(fn, leaves, inputs):
    apply = getattr(_operator, fn) if isinstance(fn, str) and fn in ("add", "sub", "mul", "matmul") else fn
    nodes = list(leaves)
    for entry in inputs:
        nodes.append(apply(*[nodes[i] for i in entry]))
    return nodes


def backwards_in_grader(engine, make_engine):
    """``engine``, a namespace of op classes that a test made (unit 1.5's engines with a planted bug),
    as the student's code receives it. In trusted grading the test made it in the grader, from the
    source notebook's locked cell, and its backward rules stay there: the student's code gets a
    subclass of each op class of ``make_engine()``'s engine, made in the kernel with no argument,
    whose ``backward`` calls the grader's rule. No argument, code or object that the kernel sees then
    tells a planted rule from a right one (a notebook's ``make_engine`` that noted the bug each call
    asked for answered every engine: red team, stop 38); only running the ops does. In a notebook,
    ``engine`` itself."""
    if _REMOTE is None:
        return engine
    rules = {name: _rule(op.backward) for name, op in vars(engine).items()}
    return _REMOTE.call(None, make_engine(), rules, builtin="with_backwards")


def op_in_grader(base, name, forward, backward):
    """An op class ``name``, a subclass of ``base`` (the notebook's ``Function``), with the static
    methods ``forward(ctx, *arrays)`` and ``backward(ctx, grad)``: a test's op whose backward is
    deliberately wrong, or right, for a checker to tell apart (unit 1.5's ``gradcheck``). In trusted
    grading the class is made in the kernel with ``forward`` (a function of the test cell, sent as
    its text) and a backward that asks the grader's ``backward`` in one round trip: no code, closure
    or constant that the student's code can read then says where the rule is wrong (a ``gradcheck``
    that read them from its cases' closures could give every verdict without checking); only
    running the op does. In a notebook, the class itself."""
    if _REMOTE is None:
        return type(name, (base,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})
    return _REMOTE.call(None, base, name, forward, _rule(backward), builtin="op_with_rule")


def _rule(backward):
    """The grader's side of a backward asked from the kernel: ``backward`` on a context holding
    what the kernel's ``ctx`` kept (its attributes)."""
    return lambda kept, grad: backward(types.SimpleNamespace(**kept), grad)


def _engine_backwards(engine, Context, runs):
    """The backward's outputs of each ``[name, args, grad]`` op of ``engine``, each after its
    forward on a fresh ``Context()``."""
    out = []
    for name, args, grad in runs:
        ctx, op = Context(), getattr(engine, name)
        op.forward(ctx, *[_array(a) for a in args])
        grads = op.backward(ctx, _array(grad))
        # (_outputs, here in the kernel: a tuple of the student's own class does not travel as a tuple)
        out.append(tuple(grads) if isinstance(grads, (tuple, list)) else (grads,))
    return out


def code_objects(code):
    """A code object and those of the functions, lambdas and comprehensions inside it."""
    return [code] + [c for const in code.co_consts if isinstance(const, type(code)) for c in code_objects(const)]


# The pieces of this package that student code may run in: the checks' own context, and the
# callers that hand the student's code its work (a forward with a fresh context, the graph builder).
_ALLOWED_CODE = frozenset(c for f in (RecordingContext.__init__, RecordingContext.save_for_backward,
                                      RecordingContext.saved_tensors.fget, recorded_forward, _recorded_forward,
                                      build_graph, _build_graph, _engine_backwards, _note_torch)
                        for c in code_objects(f.__code__))


def depth_hook(depth, inner=None):
    """A profile hook that counts how deeply Python calls nest, in ``depth = [current, deepest]``,
    and hands every event on to ``inner``."""
    def hook(frame, event, arg):
        if event == "call":
            depth[0] += 1
            depth[1] = max(depth[1], depth[0])
        elif event == "return":
            depth[0] -= 1
        if inner is not None:
            inner(frame, event, arg)
    return hook


def _fail_if_deep(task, deepest, max_depth, what):
    if deepest > max_depth:
        raise CheckFailure(
            f"[{task}] on {what} your code nested {deepest:,} Python calls inside each other (at most "
            f"{max_depth} expected): that is recursion, one call per node. Keep the nodes still to visit in an "
            "explicit stack (a Python list) instead; raising the recursion limit only moves the crash to a "
            "deeper graph.")


# --- concept checks with a tolerance, without printing the answer -----------------------------
def close_digests(value, decimals=3):
    """The stored form of a numeric concept-check answer: the digests (:func:`answer_digest`) of
    ``value`` rounded to ``decimals`` places, and of its two neighbours on that grid."""
    step = 10.0 ** -decimals
    return tuple(answer_digest(f"{round(value + k * step, decimals):.{decimals}f}") for k in (-1, 0, 1))


def check_close_hash(task, name, got, digests, *, decimals=3, hint=None):
    """A numeric concept check that does not print its answer: ``got`` rounded to ``decimals``
    places must be the stored answer or one of its grid neighbours (:func:`close_digests`), that is,
    within about one unit of the last decimal."""
    if got is None or got is Ellipsis:
        raise CheckFailure(f"[{task}] set `{name}` to your answer.")
    try:
        value = float(got)
    except (TypeError, ValueError):
        raise CheckFailure(f"[{task}] `{name}` should be a number, got {got!r}.") from None
    if not _isfinite(value) or answer_digest(f"{round(value, decimals):.{decimals}f}") not in digests:
        raise CheckFailure(f"[{task}] `{name}` = {value!r} is not right (to {decimals} decimals)."
                           + (f" Hint: {hint}" if hint else ""))


# --- unit 1.4 ---
def broadcast_pairs(seed, count, max_ndim=4):
    """``count`` random pairs of shapes that broadcast together, for :func:`random_cases`.

    Each pair starts from one result shape (1 to ``max_ndim`` axes of sizes 2 to 4); each operand
    keeps a random number of its trailing axes and sets each of them to 1 with probability 0.4,
    so that the pairs mix prepended axes, stretched axes and 0-d operands.
    """
    rng = _default_rng(seed)
    pairs = []
    for _ in range(count):
        full = tuple(int(s) for s in rng.integers(2, 5, size=int(rng.integers(1, max_ndim + 1))))
        pair = []
        for _ in range(2):
            kept = full[int(rng.integers(0, len(full) + 1)):]
            pair.append(tuple(1 if rng.random() < 0.4 else s for s in kept))
        pairs.append(tuple(pair))
    return pairs


# --- unit 1.7 ---
def check_equal(task, case, name, got, expected, *, hints=()):
    """Assert that ``got == expected`` for plain values: lists of keys and shapes, version
    numbers, messages. For two lists the failure names the first entry that differs; ``hints``
    are callables ``hint(got, expected) -> str | None``, as in :func:`assert_close`."""
    try:
        same = bool(got == expected)
    except Exception:  # an object whose comparison raises is not the expected value
        same = False
    if same:
        return
    where = f"[{task}] case '{case}': {name}"
    if isinstance(got, (list, tuple)) and isinstance(expected, (list, tuple)):
        first = next((i for i, (g, e) in enumerate(zip(got, expected)) if g != e), min(len(got), len(expected)))
        g = got[first] if first < len(got) else "(nothing: the list ends)"
        e = expected[first] if first < len(expected) else "(nothing: the list ends)"
        msg = f"{where}, entry {first}: expected {e!r}, got {g!r} (expected {list(expected)!r}, got {list(got)!r})."
    else:
        msg = f"{where}: expected {expected!r}, got {got!r}."
    for hint in tuple(hints):
        text = hint(got, expected)
        if text:
            msg += f" Hint: {text}"
            break
    raise CheckFailure(msg)
# --- unit 1.6 ---------------------------------------------------------------------------------
def _plain(value):
    """A layout answer as plain Python values (ints, bools, tuples of them, or None); anything
    else (a float, a string, an array of floats) comes back unchanged, so that it compares unequal."""
    if value is None or isinstance(value, (bool, _bool_)):
        return None if value is None else bool(value)
    if isinstance(value, (int, _integer)):
        return int(value)
    if isinstance(value, _ndarray) and _issubdtype(value.dtype, _integer):
        value = value.tolist()
    if isinstance(value, (tuple, list)):
        return tuple(_plain(v) for v in value)
    return value


def _has_float(value):
    if isinstance(value, (tuple, list)):
        return any(_has_float(v) for v in value)
    return isinstance(value, (float, _floating)) or (isinstance(value, _ndarray) and not _issubdtype(value.dtype, _integer))


def check_layout(task, fn, oracle, cases, *, hints=(), numpy_only=True, normalize=None):
    """Compare layout numbers (ints, tuples of ints, a bool, or None) exactly with the oracle's.

    For each case the student is called as ``fn(*case.args, **case.kwargs)`` and the oracle
    (a name from :data:`autograder.outside.oracles.ORACLES`) with the same plain arguments; lists and
    integer arrays count as tuples, floats never equal ints. ``hints`` are callables
    ``hint(got, expected, case) -> str | None``. ``normalize(value, case)``, when given, is
    applied to both answers before they are compared (for example, to mark the strides of
    size-1 axes, which are never used, as free).
    """
    _bind_torch()
    torch_fn = oracles.oracle(oracle)
    keep = normalize or (lambda value, c: value)
    cases = list(cases)
    with _planned([(fn, c.args, c.kwargs, numpy_only) for c in cases]):
        for c in cases:
            _check_layout_case(task, fn, torch_fn, c, keep, hints, numpy_only)


def _check_layout_case(task, fn, torch_fn, c, keep, hints, numpy_only):
    got = _run_case(task, c, fn, *c.args, numpy_only=numpy_only, **c.kwargs)
    expected = keep(_plain(torch_fn(*c.args, **c.kwargs)), c)
    if _has_float(got):
        raise CheckFailure(f"[{task}] {c.describe()}: expected {expected!r}, got {got!r}: layout numbers are "
                           "integers (a count of elements); use // and int, not /.")
    if keep(_plain(got), c) != expected:
        msg = f"[{task}] {c.describe()}: expected {expected!r}, got {keep(_plain(got), c)!r}."
        for hint in tuple(hints):
            text = hint(_plain(got), expected, c)
            if text:
                msg += f" Hint: {text}"
                break
        raise CheckFailure(msg)


# random_layouts' axis sizes and the cumulative weights of their draw: what Generator.choice(sizes, p=...)
# draws, the same numbers from the same stream, without its checks of p at each of some 3,000 draws a
# notebook of 1.6 (5% of the worker's CPU in that unit)
_LAYOUT_SIZES = (0, 1, 1, 2, 3, 4, 5)
_LAYOUT_SIZES_CDF = np.cumsum([0.05, 0.25, 0.1, 0.2, 0.15, 0.15, 0.1])
_LAYOUT_SIZES_CDF /= _LAYOUT_SIZES_CDF[-1]


def random_layouts(seed, n, *, max_ndim=4, negative=False):
    """``n`` seeded random layouts ``(shape, strides, offset)`` of the kinds views produce.

    Shapes have 0 to ``max_ndim`` axes of size 0 to 5 (size 1 often). Strides are contiguous
    ones, then at random permuted (a transpose), multiplied by a step (a slice), zeroed on
    some axes (an expand), and with ``negative`` flipped in sign on some axes (NumPy's
    ``a[::-1]``; torch has none). Offsets are 0 to 9.
    """
    rng = _default_rng(seed)
    out = []
    for _ in range(n):
        ndim = int(rng.integers(0, max_ndim + 1))
        shape = [_LAYOUT_SIZES[int(_LAYOUT_SIZES_CDF.searchsorted(rng.random(), side="right"))] for _ in range(ndim)]
        strides, step = [], 1
        for size in reversed(shape):
            strides.insert(0, step)
            step *= max(size, 1)
        if ndim > 1 and rng.random() < 0.5:
            order = rng.permutation(ndim)
            shape, strides = [shape[i] for i in order], [strides[i] for i in order]
        strides = [s * (1, 1, 2, 3)[int(rng.integers(0, 4))] for s in strides]
        strides = [0 if rng.random() < 0.15 else s for s in strides]
        if negative:
            strides = [-s if rng.random() < 0.4 else s for s in strides]
        out.append((tuple(shape), tuple(strides), int(rng.integers(0, 10))))
    return out


# --- unit 1.5 ---
def torch_gradients(oracle_name, args, grad_out=None, wrt=(0,), **kwargs):
    """The gradients of ``sum(grad_out * oracle(*args, **kwargs))`` with respect to the arguments at
    the positions ``wrt``, by torch autograd, as NumPy arrays (``grad_out`` defaults to ones).

    For exercises whose answer is a gradient computed some other way (finite differences), so that
    a test cell can compare it with torch by oracle name."""
    _bind_torch()
    torch_fn = oracles.oracle(oracle_name)
    _, out = _torch_forward(torch_fn, args, kwargs)
    g = _ones(_to_numpy(out).shape) if grad_out is None else _asarray(grad_out, dtype=_float64)
    _, grads = _torch_vjp(torch_fn, args, kwargs, tuple(wrt), g)
    return grads


def oracle_value(oracle_name, *args, **kwargs):
    """The value of a torch oracle (by name) for plain NumPy arguments, as a NumPy array, so that a
    test cell can compare a student's answer with it (a student's code calling it is a delegation)."""
    _bind_torch()
    _, out = _torch_forward(oracles.oracle(oracle_name), args, kwargs)
    return _to_numpy(out)


def differing_backwards(engine, reference, probes, Context, seed=0, reference_context=None):
    """The names, in ``probes`` order, of the operations of ``engine`` whose backward gives other
    gradients than the class of the same name in ``reference`` (a mapping of names to Functions).

    ``probes`` maps each name to the forward's input arrays; each op runs forward, then backward
    with one random upstream gradient (drawn with ``seed``, in the shape of the reference's
    output), on a fresh ``Context()`` (for the reference's, ``reference_context()`` when given: a
    reference from :func:`locked_cell` has its own). A test cell learns this way, after the
    student's code has returned, which op an engine breaks, without keeping the answer anywhere
    that code could read. In trusted grading the engine's ops all run in one request."""
    rng = _default_rng(seed)
    runs, expected = [], []
    for name, args in probes.items():
        ctx = (reference_context or Context)()
        grad = rng.standard_normal(_asarray(reference[name].forward(ctx, *[_array(a) for a in args])).shape)
        runs.append([name, list(args), grad])
        expected.append(_outputs(reference[name].backward(ctx, _array(grad))))
    if _REMOTE is not None:
        got = _REMOTE.call(None, engine, Context, runs, builtin="engine_backwards")
    else:
        got = _engine_backwards(engine, Context, runs)
    return [name for (name, _, _), p, q in zip(runs, got, expected) if not (len(p) == len(q) and all(
        _asarray(a).shape == _asarray(b).shape and _np_all(_abs(_asarray(a) - _asarray(b)) <= 1e-12 * (1 + _abs(_asarray(b))))
        for a, b in zip(p, q)))]


def central_differences(f, x, eps):
    """The central-difference gradient of the scalar function ``f`` at the array ``x``, computed in
    x's dtype (float32 stays float32, so that rounding shows as it does in the student's code);
    ``f`` is called with a perturbed C-contiguous copy of ``x``, which is left unchanged."""
    v = _array(x, order="C")
    out = _zeros_like(v)
    flat, flat_out = v.reshape(-1), out.reshape(-1)
    for k in range(flat.size):
        old = flat[k]
        flat[k] = old + eps
        plus = f(v)
        flat[k] = old - eps
        minus = f(v)
        flat[k] = old
        flat_out[k] = (plus - minus) / (2 * eps)
    return out


# --- per-student hidden draws -----------------------------------------------------------------
# The seed of the student being graded. The grader derives it outside the kernel from the
# assignment and student ids (autograder.outside.sandbox.seed_for), and the kernel factory sets it
# (set_student_seed) in each kernel it forks, before any notebook code runs. Anywhere else
# (plain nbgrader, a learner's own Jupyter) it is $AUTOGRADER_STUDENT_SEED when set, else
# DEFAULT_STUDENT_SEED: the same draws every time.
STUDENT_SEED_VARIABLE = "AUTOGRADER_STUDENT_SEED"
DEFAULT_STUDENT_SEED = 0
_student_seed = None


def set_student_seed(seed):
    """Set the student seed of this process, once: the grading kernel's is set before any
    notebook code runs, so a notebook cannot choose its own."""
    global _student_seed
    if _student_seed is not None:
        raise RuntimeError("the student seed is set once per kernel, by the grader")
    _student_seed = int(seed)


@_contextmanager
def student_seed_of(seed):
    """The grader's own process, while it runs one student's test cells (trusted verdicts): the
    hidden draws are that student's, made here, outside the student's kernel."""
    global _student_seed
    previous, _student_seed = _student_seed, seed
    try:
        yield
    finally:
        _student_seed = previous


def base_student_seed():
    """The seed of the student being graded (see the comment above :func:`set_student_seed`)."""
    if _student_seed is not None:
        return _student_seed
    value = _environ.get(STUDENT_SEED_VARIABLE, "").strip()
    return int(value) if value else DEFAULT_STUDENT_SEED


def mix_seed(base, salt):
    """A 32-bit seed from a student seed and a salt (stable across runs and machines; short, as
    failure messages may show it)."""
    return int.from_bytes(_sha256(f"{base}\0{salt}".encode()).digest()[:4], "big")


def student_seed(salt):
    """A seed for one hidden draw of a test cell: the same at every regrade of one student,
    different for each student. ``salt`` (an int or a string) tells the draws of a notebook
    apart. Visible parts keep literal seeds: a learner's own run must be reproducible."""
    return mix_seed(base_student_seed(), salt)

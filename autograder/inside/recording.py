"""The student's side of a trusted grading: run what the grader asks, record what happens.

While grading, a test cell's code never enters the student's kernel. The grader runs it in its
own process (:mod:`autograder.outside.verdicts`), where every name of the student's notebook is a proxy.
When the test calls a student function, reads an attribute of a student object or applies an
operator to one, the grader sends one request here, and :func:`serve` answers with what the
student's code returned (plain data by value, anything else as a handle), what it raised, the
warnings it emitted, whether it called into torch or the reference package, and every array
buffer that changed (an input written in place). It decides nothing: the grader compares.

:func:`serve` runs as the only code of a test cell's execution, and talks over a socket that the
grader names in that code (a :class:`~autograder.inside.wire.Channel` beside the kernel's own
sockets, one per test cell): each answer to the last request (with that request's number) goes
out, and the next request comes back, a fraction of a millisecond a round. When the student's
code calls something the grader handed it (a :class:`Callback`: the function of a
finite-difference exercise, the parameters of an optimiser), the kernel asks the grader in turn,
and answers the grader's own requests until the callback's value comes back. A notebook can
replace this module or its socket: it then answers for itself, and what it answers is still
compared outside, against the cases the grader chose.
"""
import _thread
import builtins
import inspect
import itertools
import json
import operator
import re
import sys
import threading
import types
import warnings
import weakref

import numpy as np

from autograder.inside import checks
from autograder.inside.wire import DTYPES, MAX_OWNER_BYTES, Channel, Codec, Lent, Owners, builtin_class

_objects = Lent()  # handle: the student's object, kept alive until the grader says it let the handle's proxy go
_callbacks = weakref.WeakValueDictionary()  # number: the live Callback that stands for the grader's object
_dropped = []  # the numbers of the Callbacks gone since the last message: the grader may let their objects go
_read = {}  # (callback number, attribute): its value, read since the kernel's last message to the grader
# callback number: {attribute: value} that the grader said it keeps in step: it names each one
# that changes (or that it stops following) in a later message, and until then a read costs no round trip
_kept = {}
# Calls that make (see Callback.__call__): the numbers of the Callbacks whose calls make a new object of
# the grader's; the messages of such calls not yet sent; and, by the number the kernel chose for each
# call's new object, where the student's code made it ((code, offset) of each frame, innermost first),
# for the calls not yet answered, and for those the grader's last message answered
_makers = set()
_outbox = []
_pending = {}
_answered = {}
_promises = itertools.count(-1, -1)  # the kernel numbers a made object below 0, the grader above
_HANDLERS = {}  # code object: the (start, end) offsets of its bytecode that an exception handler covers
_codec = None
_seq = 0  # the number of the grader's last message: every message the kernel sends carries it
_ended = False  # the grader ended the test: nothing more is sent, whatever the student's code catches
_socket = None  # the test cell's own channel to the grader, while it serves
# True in a kernel whose sandbox hides torch (its package folders are empty there, and engine_ref
# is not in it): set by the zygote (autograder.inside.zygote.preload). Only Python code, the
# autograder package's own, can then take a NumPy exercise's work, so the delegation hook is a
# trace function, which Python calls at each Python call only, instead of a profile function,
# called at every return and every C call too (which cost a unit-1.4 reference notebook about 8% of
# its CPU; the trace function, about half of that: Python 3.11 still traces each instruction).
TORCH_HIDDEN = False
_HIDDEN_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})
_IPYTHON_NAME = re.compile(r"_+|_i+|_i?\d+|_[ido]h|__\w*__")  # IPython's history and the module's dunders


# The hooks of the request that runs the student's code (see _run), for the threads that code starts:
# a profile or trace function is per thread, and work done in a thread of its own went unseen (a
# recursive graph walk, a call into torch: red team, stop 41), also in a thread that a notebook cell
# started before any request and fed from a queue. Every thread that the notebook's code starts runs
# under dispatchers that hand each event to the hooks of the request running at that moment.
_HOOKS = [None, None]
_start_new_thread = _thread.start_new_thread


def _profile_now(frame, event, arg):
    hook = _HOOKS[0]
    if hook is not None:
        hook(frame, event, arg)


def _trace_now(frame, event, arg):
    hook = _HOOKS[1]
    return hook(frame, event, arg) if hook is not None else None


def _started_by_the_notebook(frame):
    """Whether a cell of the notebook is among the frames that start a thread (ipykernel's own
    threads start from its code alone)."""
    while frame is not None:
        if any(mark in frame.f_code.co_filename for mark in _STUDENT_FILES):
            return True
        frame = frame.f_back
    return False


def _start_under_hooks(function, args, kwargs=None):
    extra = [kwargs] if kwargs is not None else []
    if not _started_by_the_notebook(sys._getframe(1)):
        return _start_new_thread(function, args, *extra)

    def hooked(*a, **k):
        sys.setprofile(_profile_now)
        sys.settrace(_trace_now)
        return function(*a, **k)
    return _start_new_thread(hooked, args, *extra)


_thread.start_new_thread = _thread.start_new = threading._start_new_thread = _start_under_hooks


class _End(BaseException):
    """The grader ended the test while the student's code waited on a callback."""


class _Failed(BaseException):
    """A call that the kernel did not wait for raised (see :meth:`Callback.__call__`): raised at the
    student's next exchange with the grader, it ends the request, which records ``error`` as raised
    where the call was made (``stack``). No ``except Exception`` of the student's code catches it:
    had the kernel waited, the error would have passed through no handler (none covered the call)."""

    def __init__(self, error, stack):
        super().__init__()
        self.error, self.stack = error, stack


class Callback:
    """An object of the grader's that a test handed to the student's code. Calling it, iterating
    over it, taking its length, and reading or writing its public attributes asks the grader,
    which runs it in its own process (the grader lends attributes only of the tests' own objects,
    such as the engines of unit 1.8's differential tests)."""

    __slots__ = ("_number", "__weakref__")

    def __init__(self, number):
        object.__setattr__(self, "_number", number)

    def __del__(self):
        _dropped.append(self._number)
        _makers.discard(self._number)

    def _ask(self, builtin, *args, **kwargs):
        previous, tracer = sys.getprofile(), sys.gettrace()  # the round trip is not the student's code:
        sys.setprofile(None)  # no hook sees it
        sys.settrace(None)
        try:
            if builtin == "call" and self._number in _makers:
                return _make(self._number, args, kwargs)
            return _request(self._number, builtin, args, kwargs)
        finally:
            sys.setprofile(previous)
            sys.settrace(tracer)

    def __call__(self, *args, **kwargs):
        """Call the grader's object. A call of an object that *makes* (the grader said so: 1.8's
        ``engine.Tensor(...)`` and ``Op.apply(...)``, each a new tensor, some 6,000 a notebook) does not
        wait for its answer when its arguments are plain data and the grader's objects, and no
        exception handler of the student's code covers the call: the new object is a Callback of a
        number chosen here, and the grader runs the call when the message arrives. Had the call
        raised, the error would have passed through no handler to the request's end; if it does, the
        student's code stops at its next exchange with the grader (or at the request's end), and the
        request records that error, raised where the call was made (:class:`_Failed`)."""
        return self._ask("call", *args, **kwargs)

    def __iter__(self):
        return self._ask("iter")

    def __next__(self):
        return self._ask("next")

    def __len__(self):
        return self._ask("len")

    def __getattr__(self, name):
        kept = _kept.get(self._number)
        if kept is not None and name in kept:  # (1.8's `Add.apply`, `t.data`: asked once a tensor)
            return kept[name]
        # the grader's objects change only while it answers the kernel: a value read since the
        # kernel's last message to it is still the value (a property, such as `t.shape`)
        key = (self._number, name)
        if key not in _read:
            _read[key] = self._ask("getattr", name)
        return _read[key]

    def __setattr__(self, name, value):
        _kept.get(self._number, {}).pop(name, None)
        self._ask("setattr", name, value)


def _request(number, builtin, args, kwargs):
    """Ask the grader to apply ``builtin`` to its object ``number``; answer what the grader asks
    meanwhile; the value, or raise what the grader's object raised."""
    global _seq, _ended
    request = _send({"callback": number, "builtin": builtin, "args": args, "kwargs": kwargs})
    while request.get("op") == "call":  # the callback uses the student's objects in turn
        _seq = request.get("seq")
        request = _reply(request)
    _seq = request.get("seq")
    if request.get("op") == "return":
        value = _payload(request)
        if builtin == "getattr" and request.get("keep") is True:
            _kept.setdefault(number, {})[args[0]] = value
        return value
    if request.get("op") != "raise":
        _ended = True
        raise _End()
    _payload(request)
    error = builtin_class(request.get("types") or [], Exception, Exception)(str(request.get("text", "")))
    if "promise" in request:  # a call made earlier, not waited for
        raise _Failed(error, _answered.get(request["promise"], []))
    raise error


def _sync():
    """Wait until the grader has run every call sent without waiting (see :meth:`Callback.__call__`)."""
    if _pending:  # (every call queued is pending)
        _request(0, "sync", (), {})


def _make(number, args, kwargs):
    """Call the grader's object ``number``, which makes (see :meth:`Callback.__call__`), from
    :meth:`Callback._ask` (the student's code called it from the frame three up)."""
    stack = _unguarded(sys._getframe(3)) if _socket is not None and not _ended else None
    if stack is not None and _plain((args, kwargs), 4):
        made = next(_promises)
        if _post({"callback": number, "builtin": "call", "args": args, "kwargs": kwargs, "promise": made}):
            _pending[made] = stack
            promise = _callbacks[made] = Callback(made)
            return promise
    return _request(number, "call", args, kwargs)


def _unguarded(frame):
    """``(code, offset)`` of ``frame`` and each frame above it up to the request's (:func:`_run`),
    when no exception handler covers where any of them is (a ``try``, a ``with`` block); else None."""
    stack = []
    while frame is not None:
        code = frame.f_code
        if code is _RUN_CODE:
            return stack
        offset = frame.f_lasti
        ranges = _HANDLERS.get(code)
        if ranges is None:
            ranges = _handler_ranges(code)
        for start, end in ranges:
            if start <= offset < end:
                return None
        stack.append((code, offset))
        frame = frame.f_back
    return None


def _handler_ranges(code):
    """The ranges of ``code``'s bytecode that its exception table gives a handler (CPython 3.11's
    format: entries of variable-length numbers, start, length, target and depth, in code units)."""
    table, at, ranges = code.co_exceptiontable, 0, []

    def number():
        nonlocal at
        byte = table[at]
        at += 1
        value = byte & 63
        while byte & 64:
            byte = table[at]
            at += 1
            value = (value << 6) | (byte & 63)
        return value

    while at < len(table):
        start, length = number() * 2, number() * 2
        number(), number()  # the handler's target, and its stack depth
        ranges.append((start, start + length))
    if len(_HANDLERS) > 10_000:  # (a notebook that makes code without end)
        _HANDLERS.clear()
    _HANDLERS[code] = ranges
    return ranges


_PLAIN_TYPES = frozenset({type(None), bool, int, float, str, Callback})
_PLAIN_DTYPES = frozenset(np.dtype(name) for name in DTYPES)


def _plain(value, depth):
    """True for a value that goes by value or as the grader's own object, nothing of the kernel's:
    the grader's code, given it, never asks the kernel back."""
    kind = type(value)
    if kind in _PLAIN_TYPES:
        return True
    if kind is np.ndarray or isinstance(value, np.generic):
        return value.dtype in _PLAIN_DTYPES and (kind is not np.ndarray or value.nbytes <= MAX_OWNER_BYTES // 2)
    if kind in (tuple, list) and depth:
        return all(_plain(v, depth - 1) for v in value)
    if kind is dict and depth:
        return all(type(k) is str and _plain(v, depth - 1) for k, v in value.items())
    return False


def _stack_frames(stack):
    """The student's frames (see :func:`_frames`) of a stack that :func:`_unguarded` noted, outermost first."""
    out = []
    for code, offset in reversed(stack):
        if _students(code):
            line = next((n for start, end, n in code.co_lines() if start <= offset < end), code.co_firstlineno)
            out.append([code.co_filename, code.co_qualname, line])
    return out[-20:]


def _payload(request):
    """The value that the grader's message carries. With it may come the new values of attributes
    of the grader's objects, which the kernel keeps: ``(value, [[object, name, value], ...])``."""
    message = _codec.decode_message(request.get("message"))
    if request.get("refresh") is not True:
        return message
    value, fresh = message if type(message) is tuple and len(message) == 2 else (None, ())
    for item in fresh if type(fresh) is list else ():
        if type(item) is list and len(item) == 3 and type(item[0]) is Callback and type(item[1]) is str:
            _kept.setdefault(item[0]._number, {})[item[1]] = item[2]
    return value


def _ref(obj):
    """A handle, with its class's: the grader learns which attributes of a class are its methods."""
    if type(obj) is Callback:
        return "callback", obj._number
    return "handle", _objects.number(obj), _objects.number(type(obj))


def _resolve(kind, number, cls=None):
    if kind == "callback":
        callback = _callbacks.get(number)
        if callback is None:
            callback = _callbacks[number] = Callback(number)
            while number in _dropped:  # gone, but the grader sent it again before it heard: it lives on
                _dropped.remove(number)
        if cls is True:  # an object that makes
            _makers.add(number)
        return callback
    obj = _objects.get(number)  # (None never goes by reference)
    if obj is None:
        raise KeyError(f"no object with handle {number}")
    return obj


def _user_ns():
    try:
        return get_ipython().user_ns  # noqa: F821  (IPython's, in a kernel)
    except NameError:
        return sys.modules["__main__"].__dict__


def _names():
    """The notebook's own names, and the modules it bound by name (``{"types": "types"}``)."""
    names, modules = {}, {}
    for k, v in _user_ns().items():
        if k in _HIDDEN_NAMES or _IPYTHON_NAME.fullmatch(k):
            continue
        if isinstance(v, types.ModuleType):
            modules[k] = v.__name__
        else:
            names[k] = v
    return {"names": names, "modules": modules}


def _define(source, name):
    """A class that a test cell derives from a student's class (a stand-in operation, say): it is
    made here, from the cell's text of it, with the notebook's names as its globals."""
    scope = dict(_user_ns())
    exec(compile(source, "<a test cell's class>", "exec"), scope)
    return scope[name]


_WRAPPERS = {"function": lambda f: f, "staticmethod": staticmethod, "classmethod": classmethod, "property": property}


def _subclass(name, bases, methods, free, attributes):
    """A class that a test's helper defines on a student's class (``class Block(nn.Module)``): its
    methods are compiled here from the test's text of them (``methods``: attribute name to
    ``[source, wrapper, function name]``), closing over the values they closed over in the
    grader (``free``), so that ``super()`` and the student's base class work as in the kernel."""
    params = [k for k in free if isinstance(k, str) and k.isidentifier() and k != "__class__"]
    lines = [f"def __make__({', '.join(params)}):", "    __class__ = None"]
    for source, _, _ in methods.values():
        lines += ["    " + line for line in str(source).splitlines()]
    lines += ["    def __set_class__(c):", "        nonlocal __class__", "        __class__ = c",
              "    return {" + ", ".join(f"{k!r}: {fn}" for k, (_, _, fn) in methods.items()
                                       if str(fn).isidentifier()) + "}, __set_class__"]
    scope = dict(_user_ns())
    exec(compile("\n".join(lines), "<a test cell's class>", "exec"), scope)
    functions, set_class = scope["__make__"](**{k: free[k] for k in params})
    body = dict(attributes, **{k: _WRAPPERS[kind](functions[k]) for k, (_, kind, _) in methods.items()})
    cls = types.new_class(str(name), tuple(bases), exec_body=lambda ns: ns.update(body))
    set_class(cls)
    return cls


def _asking(rule):
    """A ``backward(ctx, grad)`` that asks the grader's ``rule`` (a callback) in one round trip, with
    what forward kept in ``ctx`` (its attributes, by value)."""
    def backward(ctx, grad):
        return rule(dict(vars(ctx)), grad)
    return staticmethod(backward)


def _with_backwards(engine, rules):
    """``checks.backwards_in_grader``: a namespace of a subclass of each op class of ``engine`` (made
    here by the notebook) that ``rules`` names, whose backward asks the grader's rule."""
    return types.SimpleNamespace(**{str(name): type(str(name), (getattr(engine, str(name)),), {"backward": _asking(rule)})
                                    for name, rule in rules.items()})


def _op_with_rule(base, name, forward, rule):
    """``checks.op_in_grader``: a subclass ``name`` of the notebook's ``base`` with the test's
    ``forward`` (sent as its text) and a backward that asks the grader's ``rule``."""
    return type(str(name), (base,), {"forward": staticmethod(forward), "backward": _asking(rule)})


def _function(kind, source, values, numpy_names):
    """A test's function that the grader sent as text (the wire's *function*: a lambda or a ``def``
    from the visible part of a test cell), compiled here with the values it reads, so that the
    student's code calls it (or the checks run it) without a round trip per call. Its frames are
    the checks', not the student's."""
    defaults, kwdefaults = values.pop("__defaults__", None), values.pop("__kwdefaults__", None)
    scope = {"__builtins__": builtins, **{str(k): np for k in numpy_names}, **values}
    text = f"__function__ = ({source})" if kind == "lambda" else str(source)
    exec(compile(text, "<autograder: a test's function>", "exec"), scope)
    fn = scope["__function__" if kind == "lambda" else str(kind)]
    fn.__defaults__ = tuple(defaults) if defaults else None  # (its text came without them)
    fn.__kwdefaults__ = dict(kwdefaults) if kwdefaults else None
    return fn


class SharedDict(dict):
    """A dict of the tests that stays in this kernel (``checks.shared_dict``): not a ``dict``, so it
    travels as a handle."""


def _call_method(obj, name, *args, **kwargs):
    return getattr(obj, name)(*args, **kwargs)


def _stable(obj, name, value):
    """What the grader may remember of ``getattr(obj, name)``: ``"class"`` when it is a function,
    static method or class method defined in the class ``obj`` (the same function on every lookup), ``"method"`` when it is a method
    that ``obj``'s class defines and ``obj`` does not shadow (``obj.name(...)`` can then be one request)."""
    try:
        if isinstance(obj, type):
            found = inspect.getattr_static(obj, name, None)
            return "class" if isinstance(found, (staticmethod, classmethod, types.FunctionType)) else None
        if isinstance(value, types.MethodType) and value.__self__ is obj and name not in vars(obj):
            found = inspect.getattr_static(type(obj), name, None)
            if isinstance(found, types.FunctionType) and value.__func__ is found:
                return "method"
    except Exception:  # an object without a __dict__, a class that hides its attributes: ask each time
        pass
    return None


def _iterate(obj):
    return list(obj)


def _type_name(obj):
    return type(obj).__name__


def _enter(obj):
    return obj.__enter__()


def _exit(obj, raised=None):
    """``obj.__exit__`` for a ``with`` block that ended, or raised ``[its class's MRO names, message]``."""
    if raised is None:
        return obj.__exit__(None, None, None)
    exc = builtin_class(raised[0], Exception, Exception)(str(raised[1]))
    return obj.__exit__(type(exc), exc, None)


# What the grader may ask for besides calling a student object: each is how Python itself would
# evaluate the grader's expression on the object.
BUILTINS = {
    "getattr": getattr, "setattr": setattr, "isinstance": isinstance, "len": len, "repr": repr, "str": str,
    "list": _iterate, "bool": bool, "float": float, "int": int, "type_name": _type_name, "asarray": np.asarray,
    "enter": _enter, "exit": _exit, "callmethod": _call_method,
    "names": _names, "define": _define, "subclass": _subclass, "recorded_forward": checks._recorded_forward, "shared_dict": SharedDict,
    "build_graph": checks._build_graph, "engine_backwards": checks._engine_backwards, "with_backwards": _with_backwards,
    "op_with_rule": _op_with_rule,
    **{name: getattr(operator, name) for name in (
        "add", "sub", "mul", "truediv", "floordiv", "matmul", "pow", "mod", "neg", "pos", "abs", "invert",
        "getitem", "setitem", "delitem", "eq", "ne", "lt", "le", "gt", "ge", "contains",
        "iadd", "isub", "imul", "itruediv", "imatmul")},
}
_STUDENT_FILES = ("<ipython-input", "/ipykernel_", "<string>", "<engine>")


def _students(code):
    """True for the code of the student's notebook (or of anything but the autograder package)."""
    return any(mark in code.co_filename for mark in _STUDENT_FILES) or "autograder" not in code.co_filename


def _frames(tb):
    """Where the student's code was when it raised: (file, function, line) of its own frames."""
    out = []
    while tb is not None:
        code = tb.tb_frame.f_code
        if _students(code):
            out.append([code.co_filename, code.co_qualname, tb.tb_lineno])
        tb = tb.tb_next
    return out[-20:]


def _call(request, kept):
    call = _payload(request)
    kept.append(call)
    if request.get("plan") is True:
        return _plan(call["steps"])
    return _run(request, call["args"], call["kwargs"], call["fn"])


def _plan(steps):
    """Run a plan's steps in order (see ``verdicts.Remote.plan``), each as one request would, until
    one raises; an argument a step links to is what an earlier step returned (or an item of it)."""
    answers, values = [], []
    for step in steps:
        try:
            args = list(step["args"])
            for position, earlier, item in step["links"]:
                value = values[earlier]
                if item is not None:  # (an item of a tuple the checks made, such as recorded_forward's)
                    value = value[item] if type(value) is tuple else None
                args[position] = value
            answer = _run(step, tuple(args), step["kwargs"], step["fn"])
        except (KeyboardInterrupt, _End):
            raise
        except Exception as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        answers.append(answer)
        if "value" not in answer:
            break
        values.append(answer["value"])
    return {"answers": answers}


def _run(request, args, kwargs, fn):
    """Call ``fn`` (or the builtin the request names) as the student's code, recording what happened."""
    fn = BUILTINS[request["builtin"]] if "builtin" in request else fn
    found = []
    depth = [0, 0]  # current, deepest: how far the student's Python calls nest
    inner = (checks._delegation_hook(found, _OWN_CODE) if request.get("numpy_only")
             and request.get("builtin") not in _MACHINERY else None)
    # a profile hook runs at every call the student's code makes: the depth counter (which counts
    # returns too) only when asked; the delegation hook alone, where torch is hidden, as a trace function
    if request.get("depth"):
        profile, trace = checks.depth_hook(depth, inner), None
    elif TORCH_HIDDEN:
        profile, trace = None, inner
    else:
        profile, trace = inner, None
    previous, tracer = sys.getprofile(), sys.gettrace()
    noted = checks._TorchNoted(found if inner is not None and not TORCH_HIDDEN else None)  # (torch in this kernel)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with noted:  # (entered before the hooks are set, left after they are removed)
                if profile is not None:
                    sys.setprofile(profile)
                if trace is not None:
                    sys.settrace(trace)
                _HOOKS[:] = profile, trace
                try:
                    result = fn(*args, **kwargs)
                finally:
                    _HOOKS[:] = None, None
                    sys.setprofile(previous)
                    sys.settrace(tracer)
            _sync()  # what a call not waited for raised is the request's
            answer = {"value": result}
            if request.get("builtin") == "getattr" and len(args) == 2 and isinstance(args[1], str):
                answer["stable"] = _stable(args[0], args[1], result)
        except (KeyboardInterrupt, _End):
            raise
        except BaseException as exc:  # SystemExit too: the student's code ended, the kernel did not
            if type(exc) is not _Failed:
                try:
                    _sync()  # a call not waited for that raised came before this
                except _Failed as failed:
                    exc = failed
            error, frames = (exc.error, _stack_frames(exc.stack)) if type(exc) is _Failed else (
                exc, _frames(exc.__traceback__))
            answer = {"raised": {"types": [t.__name__ for t in type(error).__mro__], "message": str(error)[:4000],
                                 "frames": frames, "exception": error}}
    answer["warnings"] = [[[t.__name__ for t in w.category.__mro__], str(w.message)[:1000]] for w in caught[:5]]
    answer["delegated"] = found[:1]
    answer["depth"] = depth[1]
    return answer


_RUN_CODE = _run.__code__
# What the grader asks of the recording itself, which runs none of the student's code.
_MACHINERY = frozenset({"names", "define", "subclass"})
# The recording's own functions that the student's code runs through (a ``with`` block, a callback):
# not a delegation to the package.
_OWN_CODE = frozenset(c for f in (
    _enter, _exit, _iterate, _call_method, _type_name, Callback._ask, Callback.__call__, Callback.__iter__,
    Callback.__next__, Callback.__len__, Callback.__getattr__, Callback.__setattr__, Callback.__del__, Owners.gone, builtin_class,
    _asking, _with_backwards, _op_with_rule, _start_under_hooks, _profile_now, _trace_now, _started_by_the_notebook)
    for c in checks.code_objects(f.__code__))


def _answer(request, kept):
    try:
        return _call(request, kept)
    except (KeyboardInterrupt, _End):
        raise
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def _reply(request):
    """Answer ``request`` and send the answer; the grader's next message. What the request brought
    stays alive until its answer is sent, so that the answer carries every write the student's code
    made into it (the codec lets received buffers go at each message it sends, a callback's included)."""
    kept = []
    return _send(_answer(request, kept))


def _dropped_now():
    """The numbers of the Callbacks gone since the last message, for the next: the kernel forgets what it kept of them."""
    global _dropped
    _read.clear()  # the grader may run code now, which can change what was read of its objects
    dropped, _dropped = _dropped, []
    for number in dropped:
        _kept.pop(number, None)
    return dropped


def _post(request):
    """Queue ``request``, a call that makes, to go before the next message that waits for an answer
    (each encoded now, with the buffers as they are now); False when it cannot be sent."""
    try:
        text = json.dumps({"seq": _seq, "message": _codec.encode_message(request), "dropped": _dropped_now()},
                          allow_nan=False)
    except Exception:  # (then asked the usual way, which says why)
        return False
    _outbox.append(text.encode())
    if len(_outbox) >= 64:
        _flush()
    return True


def _flush():
    global _ended
    messages = _outbox[:]
    _outbox.clear()
    try:
        _socket.send_many(messages)
    except (EOFError, OSError):  # the grader closed the channel: the test has ended
        _ended = True
        raise _End() from None


def _send(reply):
    """Send ``reply`` (an answer, or a callback's request), after the calls queued before it; the
    grader's next message. Each message says which Callbacks died since the last."""
    global _ended, _pending, _answered
    if _ended:
        raise _End()
    dropped = _dropped_now()
    try:
        text = json.dumps({"seq": _seq, "message": _codec.encode_message(reply), "dropped": dropped}, allow_nan=False)
    except Exception as exc:  # a value that cannot be sent: say so instead
        text = json.dumps({"seq": _seq, "message": _codec.encode_message(
            {"error": f"the answer could not be sent: {exc}"}), "dropped": dropped})
    _outbox.append(text.encode())
    _flush()
    try:
        while not _socket.poll(100):  # a short wait each time, so that an interrupt is seen at once
            pass
        request = json.loads(_socket.recv())
    except (EOFError, OSError):  # the grader closed the channel: the test has ended
        _ended = True
        raise _End() from None
    _answered, _pending = _pending, {}  # the grader ran every call sent before this message
    _objects.let_go(request.get("dropped"))  # the proxies the grader let go of: it never sends those handles again
    for item in request.get("stale") or ():  # what the grader's code changed of what it said it keeps in step
        if type(item) is list and len(item) == 2 and type(item[0]) is int:
            _kept.get(item[0], {}).pop(item[1], None)
    return request


def serve(address):
    """Answer the grader's requests, over the socket at ``address``, until it says ``end``."""
    global _codec, _seq, _ended, _socket
    if _codec is None:
        _codec = Codec("k", _ref, _resolve, make_function=_function)
    _seq, _ended = 0, False
    _kept.clear()  # (the grader starts each test cell keeping nothing)
    _outbox.clear()
    _pending.clear()
    _socket = Channel.connect(address)
    try:
        request = _send({"ready": True})
        while request.get("op") == "call":
            _seq = request.get("seq")
            request = _reply(request)
    except _End:
        pass
    finally:
        _socket.close()
        _socket = None

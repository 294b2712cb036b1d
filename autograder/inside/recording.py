"""The student's side of a trusted grading: run what the grader asks, record what happens.

While grading, a test cell's code never enters the student's kernel. The grader runs it in its
own process (:mod:`autograder.outside.verdicts`), where every name of the student's notebook is a proxy.
When the test calls a student function, reads an attribute of a student object or applies an
operator to one, the grader sends one request here, and :func:`serve` answers with what the
student's code returned (plain data by value, anything else as a handle), what it raised, the
warnings it emitted, whether it called into torch or the reference package, and every array
buffer that changed (an input written in place). It decides nothing: the grader compares.

:func:`serve` runs as the only code of a test cell's execution, and talks over the kernel's
stdin channel: each ``input(reply)`` sends the answer to the last request (with that request's
number) and receives the next one, a few milliseconds a round. The kernel's stdin socket drops a
message to a client whose connection it has not seen yet: the grader then asks again (``ping``),
and the same answer is sent again. A notebook can replace this module or ``input``: it then
answers for itself, and what it answers is still compared outside, against the cases the
grader chose.
"""
import builtins
import json
import operator
import sys
import types
import warnings

import numpy as np

from autograder.inside import checks
from autograder.inside.wire import Codec

_objects = {}  # handle: object, kept alive for the notebook's life
_handles = {}  # id(object): handle
_codec = None
_HIDDEN_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})


def _handle(obj):
    h = _handles.get(id(obj))
    if h is None or _objects.get(h) is not obj:
        h = len(_objects) + 1
        _objects[h] = obj
        _handles[id(obj)] = h
    return h


def _object(h):
    if h not in _objects:
        raise KeyError(f"no object with handle {h}")
    return _objects[h]


def _user_ns():
    try:
        return get_ipython().user_ns  # noqa: F821  (IPython's, in a kernel)
    except NameError:
        return sys.modules["__main__"].__dict__


def _names():
    """The notebook's own names: every global that is not a module or IPython's."""
    return {k: v for k, v in _user_ns().items() if not k.startswith("_") and k not in _HIDDEN_NAMES
            and not isinstance(v, types.ModuleType)}


def _define(source, name):
    """A class that a test cell derives from a student's class (a stand-in operation, say): it is
    made here, from the cell's text of it, with the notebook's names as its globals."""
    scope = dict(_user_ns())
    exec(compile(source, "<a test cell's class>", "exec"), scope)
    return scope[name]


def _iterate(obj):
    return list(obj)


def _type_name(obj):
    return type(obj).__name__


# What the grader may ask for besides calling a student object: each is how Python itself would
# evaluate the grader's expression on the object.
BUILTINS = {
    "getattr": getattr, "setattr": setattr, "isinstance": isinstance, "len": len, "repr": repr, "str": str,
    "list": _iterate, "bool": bool, "float": float, "int": int, "type_name": _type_name, "asarray": np.asarray,
    "names": _names, "define": _define, "RecordingContext": checks.RecordingContext,
    **{name: getattr(operator, name) for name in (
        "add", "sub", "mul", "truediv", "floordiv", "matmul", "pow", "mod", "neg", "pos", "abs", "invert",
        "getitem", "setitem", "delitem", "eq", "ne", "lt", "le", "gt", "ge", "contains",
        "iadd", "isub", "imul", "itruediv", "imatmul")},
}
_STUDENT_FILES = ("<ipython-input", "/ipykernel_", "<string>", "<engine>")


def _frames(tb):
    """Where the student's code was when it raised: (file, function, line) of its own frames."""
    out = []
    while tb is not None:
        code = tb.tb_frame.f_code
        if any(mark in code.co_filename for mark in _STUDENT_FILES) or "autograder" not in code.co_filename:
            out.append([code.co_filename, code.co_qualname, tb.tb_lineno])
        tb = tb.tb_next
    return out[-20:]


def _call(request):
    call = _codec.decode_message(request["message"])
    fn = BUILTINS[request["builtin"]] if "builtin" in request else call["fn"]
    args, kwargs = call["args"], call["kwargs"]
    found = []
    depth = [0, 0]  # current, deepest: how far the student's Python calls nest
    inner = checks._delegation_hook(found) if request.get("numpy_only") else None
    hook = checks.depth_hook(depth, inner)
    previous = sys.getprofile()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if inner is not None or request.get("depth"):
                sys.setprofile(hook)
            try:
                result = fn(*args, **kwargs)
            finally:
                sys.setprofile(previous)
            answer = {"value": result}
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit too: the student's code ended, the kernel did not
            answer = {"raised": {"types": [t.__name__ for t in type(exc).__mro__], "message": str(exc)[:4000],
                                 "frames": _frames(exc.__traceback__)}}
    answer["warnings"] = [[[t.__name__ for t in w.category.__mro__], str(w.message)[:1000]] for w in caught[:5]]
    answer["delegated"] = found[:1]
    answer["depth"] = depth[1]
    return answer


def serve():
    """Answer the grader's requests until it says ``end``; each answer goes with the next ``input``."""
    global _codec
    if _codec is None:
        _codec = Codec("k", _handle, _object)
    reply, seq = {"ready": True}, 0
    while True:
        try:
            message = _codec.encode_message(reply)
            text = json.dumps({"seq": seq, "message": message}, allow_nan=False)
        except Exception as exc:  # a value that cannot be sent: say so instead
            message = _codec.encode_message({"error": f"the answer could not be sent: {exc}"})
            text = json.dumps({"seq": seq, "message": message})
        request = json.loads(builtins.input(text))
        while request.get("op") == "ping":  # the grader did not get the answer: send it again
            request = json.loads(builtins.input(text))
        if request.get("op") == "end":
            return
        seq = request.get("seq")
        try:
            reply = _call(request)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}"}

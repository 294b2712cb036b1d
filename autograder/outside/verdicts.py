"""Trusted verdicts: a test cell runs in the grader's process, never in the student's kernel.

The grader executes a submission's own cells in its kernel as usual. At a test cell it does
not send the cell's code: it runs the code here, against :class:`Proxy` objects that stand for
the student's names, with the real :mod:`autograder.inside.checks` and torch. Each use of a proxy
(a call, an attribute, an operator) is one request to :func:`autograder.inside.recording.serve` in the
kernel, which runs the student's code and records what happened. The cases, the expected
values, the comparison and the message are all made here, where no student code runs, so a
notebook can change only what its own code returns.

What the cell leaves in the notebook is built here too: a test cell that passed has no output;
one that failed has one error output, the checks' message, which nbgrader scores as it always
does. Nothing the student's code printed while it was called reaches the notebook.
"""
import ast
import builtins
import contextlib
import io
import json
import queue
import time
import warnings

import numpy as np

from autograder.inside import checks
from autograder.inside.wire import Codec, WireError

MAX_ANSWER_CHARS = 64 << 20
SERVE = "__import__('autograder.inside.recording', fromlist=['serve']).serve()"
PING_SECONDS = 1.0


class KernelGone(BaseException):
    """The kernel stopped answering: it died, or its serving loop ended."""


class TestTimeout(BaseException):
    """The test cell ran past its time."""


class StudentError(Exception):
    """Base of the exceptions that stand for what the student's code raised in its kernel."""


_ERROR_TYPES = {}


def _builtin_class(names, base, default):
    """The first of ``names`` that is a builtin subclass of ``base`` (the student's exception or
    warning class, by its MRO's names), else ``default``."""
    for n in names:
        c = getattr(builtins, n, None) if isinstance(n, str) else None
        if isinstance(c, type) and issubclass(c, base):
            return c
    return default


def student_exception(types, message, frames):
    """An exception of the same name as the student's, a subclass of the same builtin exception."""
    names = [t for t in types if isinstance(t, str)] or ["Exception"]
    base = _builtin_class(names, Exception, Exception)
    key = (names[0], base)
    if key not in _ERROR_TYPES:
        _ERROR_TYPES[key] = type(names[0], (base, StudentError), {"__module__": "student"})
    exc = _ERROR_TYPES[key](str(message))
    exc.frames = frames
    return exc


class Remote:
    """The grader's end of one kernel's stdin channel, for the test cells of one notebook."""

    def __init__(self, client, deadline_seconds=60.0):
        self.client = client
        self.deadline_seconds = deadline_seconds
        self.codec = Codec("t", self._handle_of, self._proxy)
        self.proxies = {}  # handle: Proxy, one per handle, so that `is` works
        self.msg_id = None
        self.deadline = None
        self.seq = 0
        self.found = None  # the checks' list of calls into torch, while run_student runs
        self.numpy_only = False
        self.caught = None  # the checks' list of the student's warnings, while run_student runs
        self.deepest = None  # [the deepest nesting of the student's calls], while run_shallow runs

    # --- the channel ------------------------------------------------------------------------------
    def start(self, seconds=None):
        self.deadline = time.monotonic() + (seconds or self.deadline_seconds)
        self.seq = 0
        self.msg_id = self.client.execute(SERVE, silent=True, store_history=False, allow_stdin=True)
        return self._answer(ping=True)

    def _answer(self, ping=False):
        """The kernel's answer to request ``self.seq``. With ``ping``, ask again each second until it
        comes: the kernel's stdin socket drops what it sends before it has seen this client."""
        asked = time.monotonic()
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TestTimeout("the test ran past its time limit")
            try:
                msg = self.client.get_stdin_msg(timeout=min(left, 0.05))
            except queue.Empty:
                if self._ended():
                    raise KernelGone("the kernel stopped answering the checks")
                if ping and time.monotonic() - asked > PING_SECONDS:
                    self.client.input(json.dumps({"op": "ping"}))
                    asked = time.monotonic()
                continue
            if msg["parent_header"].get("msg_id") != self.msg_id or msg["msg_type"] != "input_request":
                continue
            prompt = msg["content"].get("prompt", "")
            if len(prompt) > MAX_ANSWER_CHARS:
                raise WireError("the student's code returned more data than the checks accept")
            answer = json.loads(prompt)
            if not isinstance(answer, dict) or answer.get("seq") != self.seq:
                continue  # an answer sent again after a ping, already read
            return self.codec.decode_message(answer.get("message"))

    def _ended(self):
        try:
            reply = self.client.get_shell_msg(timeout=0)
        except queue.Empty:
            return False
        return reply["parent_header"].get("msg_id") == self.msg_id

    def request(self, payload, **fields):
        message = self.codec.encode_message(payload)
        self.seq += 1
        self.client.input(json.dumps(dict(fields, op="call", seq=self.seq, message=message)))
        answer = self._answer()
        if not isinstance(answer, dict):
            raise WireError("an answer that is not a record")
        return answer

    def end(self):
        """Stop the serving loop and wait for the cell's reply (its stream output is discarded)."""
        if self.msg_id is None:
            return
        self.client.input(json.dumps({"op": "end"}))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                reply = self.client.get_shell_msg(timeout=deadline - time.monotonic())
            except queue.Empty:
                break
            if reply["parent_header"].get("msg_id") == self.msg_id:
                break
        self.msg_id = None

    # --- values -----------------------------------------------------------------------------------
    def _handle_of(self, obj):
        if isinstance(obj, Proxy) and object.__getattribute__(obj, "_remote") is self:
            return object.__getattribute__(obj, "_handle")
        raise WireError(f"a {type(obj).__name__} of the checks cannot be handed to the student's code")

    def _proxy(self, handle):
        if handle not in self.proxies:
            self.proxies[handle] = Proxy(self, handle)
        return self.proxies[handle]

    def call(self, fn, *args, builtin=None, **kwargs):
        """``fn(*args, **kwargs)`` in the kernel; ``builtin`` names one of the recording's builtins."""
        fields = {"numpy_only": bool(self.numpy_only), "depth": self.deepest is not None}
        if builtin:
            fields["builtin"] = builtin
        answer = self.request({"fn": fn, "args": args, "kwargs": kwargs}, **fields)
        if "error" in answer:
            raise WireError(f"the recording failed: {answer['error']}")
        if self.deepest is not None and type(answer.get("depth")) is int:
            self.deepest[0] = max(self.deepest[0], answer["depth"])
        if answer.get("delegated") and self.found is not None and not self.found:
            self.found.extend(str(d) for d in answer["delegated"][:1])
        if self.caught is not None:
            self.caught.extend(warnings.WarningMessage(str(text), _builtin_class(category, Warning, UserWarning), "<student>", 0)
                               for category, text in answer.get("warnings") or ())
        if "raised" in answer:
            r = answer["raised"]
            raise student_exception(r.get("types") or [], r.get("message", ""), r.get("frames") or [])
        return answer.get("value")

    def names(self):
        found = self.call(None, builtin="names")
        if not isinstance(found, dict):
            raise WireError("the notebook's names did not come back as a dict")
        return {k: v for k, v in found.items() if isinstance(k, str) and k.isidentifier()}


def _op(name):
    def method(self, *args):
        return object.__getattribute__(self, "_remote").call(None, self, *args, builtin=name)
    method.__name__ = f"__{name}__"
    return method


def _rop(name):
    def method(self, other):
        return object.__getattribute__(self, "_remote").call(None, other, self, builtin=name)
    method.__name__ = f"__r{name}__"
    return method


class Proxy:
    """A student object that lives in the kernel. Every use is a request to it."""

    __slots__ = ("_remote", "_handle", "__weakref__")

    def __init__(self, remote, handle):
        object.__setattr__(self, "_remote", remote)
        object.__setattr__(self, "_handle", handle)

    def _call_builtin(self, name, *args):
        return object.__getattribute__(self, "_remote").call(None, self, *args, builtin=name)

    def __getattr__(self, name):
        return self._call_builtin("getattr", name)

    def __setattr__(self, name, value):
        self._call_builtin("setattr", name, value)

    def __call__(self, *args, **kwargs):
        return object.__getattribute__(self, "_remote").call(self, *args, **kwargs)

    def __instancecheck__(self, obj):
        return object.__getattribute__(self, "_remote").call(None, obj, self, builtin="isinstance")

    def __array__(self, dtype=None, copy=None):
        a = np.asarray(self._call_builtin("asarray"))
        return a if dtype is None else a.astype(dtype)

    def __iter__(self):
        return iter(self._call_builtin("list"))

    def __hash__(self):
        return hash((Proxy, object.__getattribute__(self, "_handle")))

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    __len__, __bool__, __float__, __int__ = _op("len"), _op("bool"), _op("float"), _op("int")
    __repr__, __str__ = _op("repr"), _op("str")
    __getitem__ = _op("getitem")
    __setitem__ = _op("setitem")
    __delitem__ = _op("delitem")
    __contains__ = _op("contains")
    __lt__, __le__, __gt__, __ge__ = _op("lt"), _op("le"), _op("gt"), _op("ge")
    __neg__, __pos__, __abs__, __invert__ = _op("neg"), _op("pos"), _op("abs"), _op("invert")
    __add__, __sub__, __mul__, __truediv__ = _op("add"), _op("sub"), _op("mul"), _op("truediv")
    __floordiv__, __matmul__, __pow__, __mod__ = _op("floordiv"), _op("matmul"), _op("pow"), _op("mod")
    __radd__, __rsub__, __rmul__, __rtruediv__ = _rop("add"), _rop("sub"), _rop("mul"), _rop("truediv")
    __rfloordiv__, __rmatmul__, __rpow__, __rmod__ = _rop("floordiv"), _rop("matmul"), _rop("pow"), _rop("mod")
    __iadd__, __isub__, __imul__ = _op("iadd"), _op("isub"), _op("imul")
    __itruediv__, __imatmul__ = _op("itruediv"), _op("imatmul")
    # NumPy must hand an operator with a proxy to the proxy (x * Tensor), not loop over it
    __array_ufunc__ = None


def _define_subclasses(remote, source, namespace):
    """The cell's module, without its top-level classes that derive from a student's class: each
    of those is made in the kernel (``define``) and bound here as a proxy. Their text (test
    scaffolding, such as a stand-in operation) enters the kernel; keep them out of hidden parts."""
    tree = ast.parse(source)
    body = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and isinstance(namespace.get(b.id), Proxy) for b in node.bases):
            namespace[node.name] = remote.call(None, ast.get_source_segment(source, node), node.name,
                                               builtin="define")
        else:
            body.append(node)
    tree.body = body
    return tree


def error_output(exc):
    """The one output a failed test cell leaves: the checks' message, without the grader's frames."""
    name = "AssertionError" if isinstance(exc, AssertionError) else type(exc).__name__
    text = str(exc)
    return {"output_type": "error", "ename": name, "evalue": text, "traceback": [f"{name}: {text}"]}


def run_test_cell(remote, source, namespace, seconds=None):
    """Run one test cell's code here, against the student's kernel; the cell's outputs.

    Raises :class:`TestTimeout` with the kernel still busy: the caller interrupts it, then calls
    ``remote.end()``."""
    out = io.StringIO()
    try:
        remote.start(seconds)
    except KernelGone as exc:
        return [error_output(exc)]
    previous = checks._REMOTE
    try:
        namespace.update(remote.names())
        namespace.update(np=np, checks=checks)
        code = compile(_define_subclasses(remote, source, namespace), "<test cell>", "exec")
        checks._REMOTE = remote
        with contextlib.redirect_stdout(out), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(code, namespace)
    except TestTimeout:
        raise
    except KernelGone as exc:
        return [error_output(exc)]
    except Exception as exc:  # the verdict: a failed check, or test code that the student's names broke
        remote.end()
        return [error_output(exc)]
    finally:
        checks._REMOTE = previous
    remote.end()
    text = out.getvalue()
    return [{"output_type": "stream", "name": "stdout", "text": text}] if text else []

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
import copy
import dis
import functools
import importlib
import inspect
import io
import json
import os
import queue
import select
import socket
import time
import traceback
import types
import warnings
import weakref

import nbformat
import numpy as np
from nbgrader import utils as nbutils

from autograder.inside import checks
from autograder.inside.wire import DTYPES, Channel, Codec, Lent, WireError, builtin_class

from .grading import HIDDEN_START

MAX_ANSWER_CHARS = 64 << 20
SERVE = "__import__('autograder.inside.recording', fromlist=['serve']).serve({address})"
END_SECONDS = 2.0  # how long the end of a test may wait for a kernel that reads nothing
DEFAULTS = ("__defaults__", "__kwdefaults__")  # in a shipped function's values: its defaults, not names it reads
KEPT_READS = 64  # the reads of the tests' objects that the kernel keeps between messages, at most
_ABSENT = object()


def _class_attribute(cls, name):
    """What the class ``cls`` binds ``name`` to, where Python's lookup finds it (its MRO), without
    running code; ``_ABSENT`` when no class there binds it, or ``cls`` is no class."""
    for c in cls.__mro__ if isinstance(cls, type) else ():
        if name in c.__dict__:
            return c.__dict__[name]
    return _ABSENT


class KernelGone(BaseException):
    """The kernel stopped answering: it died, or its serving loop ended."""


class TestTimeout(BaseException):
    """The test cell ran past its time."""


class GraderFault(BaseException):
    """The grader's own code failed while it exchanged messages with the kernel: no verdict on the
    student. A BaseException, so that no ``except Exception`` of the checks (which would report it
    as the student's error) or of a test cell (1.8's differential tests would count it as a planted
    bug caught) takes it: the notebook's grading fails with this reason, and the next run grades it
    again (:func:`autograder.outside.worker.grade_one`)."""


# What the exchange with the kernel may raise and still be the student's doing: data that the
# checks refuse, and data too large or too deeply nested for this process (its memory is capped).
_STUDENTS_TO_RAISE = (WireError, MemoryError, RecursionError)


def _exchange(method):
    """``method`` of :class:`Remote`, with any other error of the grader's own raised as :class:`GraderFault`."""
    @functools.wraps(method)
    def exchange(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except _STUDENTS_TO_RAISE:
            raise
        except Exception as exc:
            where = traceback.extract_tb(exc.__traceback__)[-1]
            raise GraderFault(f"{type(exc).__name__}: {exc} (in {os.path.basename(where.filename)}, line "
                              f"{where.lineno}, {where.name})") from exc
    return exchange


def _replies_to(reply, msg_id):
    """Whether a message from the kernel's shell channel is the reply to ``msg_id``. The kernel's
    code can send any message there: its parent header may be no dict."""
    parent = reply.get("parent_header") if isinstance(reply, dict) else None
    return isinstance(parent, dict) and parent.get("msg_id") == msg_id


class StudentError(Exception):
    """Base of the exceptions that stand for what the student's code raised in its kernel. An
    attribute that the student's exception class added (``error.index``) is read from its kernel."""

    kernel = None

    def __getattr__(self, name):
        if self.kernel is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.kernel, name)


_ERROR_TYPES = {}
MAX_ERROR_NAME = 200  # the characters of a student's exception class name that its grader-side class keeps
MAX_ERROR_TYPES = 1000


def student_exception(types, message, frames, kernel=None):
    """An exception of the same name as the student's, a subclass of the same builtin exception;
    ``kernel``, the proxy of the student's exception object, answers ``isinstance`` against the
    student's own classes."""
    names = [t for t in types if isinstance(t, str)] or ["Exception"]
    base = builtin_class(names, Exception, Exception, control=False)
    key = (names[0][:MAX_ERROR_NAME], base)  # a class name of megabytes, renamed before each raise, once
    if key not in _ERROR_TYPES:                # filled the worker's memory (red team, stop 40)
        if len(_ERROR_TYPES) >= MAX_ERROR_TYPES:
            _ERROR_TYPES.clear()
        _ERROR_TYPES[key] = type(key[0], (StudentError,) if base is Exception else (base, StudentError),
                                 {"__module__": "student"})
    exc = _ERROR_TYPES[key](str(message))
    exc.frames = frames
    exc.kernel = kernel if isinstance(kernel, Proxy) else None
    return exc


class Remote:
    """The grader's end of the channel to one kernel, for the test cells of one notebook."""

    def __init__(self, client, deadline_seconds=60.0, connection=None, source_notebook=None):
        self.client = client
        self.source_notebook = source_notebook  # the assignment's source notebook: its locked cells are trusted
        self.locked = {}  # (grade_id, ...): the names those locked cells define, run here
        self.deadline_seconds = deadline_seconds
        self.connection = connection or {}  # the kernel's connection info: where its own sockets are
        self.codec = Codec("t", self._ref, self._resolve, namespaces=True, ship=self._ship)
        self.proxies = {}  # handle: a weak reference to its Proxy, one per handle, so that `is` works
        self.dropped = []  # the handles whose proxies died since the last message: the kernel may let them go
        self.lost = []  # (handle, weak reference) of the proxies that died, not yet counted in `proxies` and `dropped`
        self.callbacks = Lent()  # the tests' objects handed to the student's code, until the kernel lets them go
        self.msg_id = None
        self.deadline = None
        self.seq = 0
        self.socket = None  # this test cell's own channel to the kernel, while it runs
        self.trees = {}  # each test cell's file name: (its syntax tree, its first hidden line), for the kernel's methods
        self.sockets = 0
        self.found = None  # the checks' list of calls into torch, while run_student runs
        self.numpy_only = False
        self.caught = None  # the checks' list of the student's warnings, while run_student runs
        self.deepest = None  # [the deepest nesting of the student's calls], while run_shallow runs
        self.methods = set()  # (class handle, name): a method of the class, called in one request
        # (callback number, attribute): (the dict it is read from, or None for a class's, and the
        # object bound there) for what the kernel keeps of the tests' objects; oldest first
        self.kept = {}
        self.unkept = []  # what the kernel keeps that the next message tells it to forget
        self.read_names = {}  # the tests' class: the attributes of its objects that the kernel kept
        self.statics = {}  # (class handle, name): a function of the class, for this test cell
        self.planned = []  # what a plan's request ran ahead (:meth:`plan`), for the calls still to ask for it
        self.plan_values = []  # the values of the plan's steps taken so far, for its Later arguments
        self.plans = [0, 0]  # plans sent, and plans dropped before all their steps were taken (see plan)
        self.made = []  # (number, object) of what the calls that make (see _make) made since the last message
        self.failed = None  # what such a call raised, to raise at the kernel's next exchange (see _make)
        self.guards = {}  # handle: the Guard of the student's call whose result holds the object (see guard)
        self.copied = {}  # id of a test's array: (the array, the copy that shipped functions read), per test cell

    # --- the channel ------------------------------------------------------------------------------
    @_exchange
    def start(self, seconds=None):
        """Open this test cell's channel to the kernel and start the kernel's serving loop on it.

        The grader listens on a socket of its own (beside the kernel's sockets: a
        :class:`~autograder.inside.wire.Channel`), names it in the code it runs, and takes the one
        connection that comes; the kernel then says it is ready. Nothing goes through the kernel's
        stdin channel: ipykernel throws away what waits there each time it asks for input, and a
        handshake over it lost a message under load, leaving both sides waiting."""
        self.deadline = time.monotonic() + (seconds or self.deadline_seconds)
        self.seq = 0
        self.statics = {}  # a student cell may have rebound a class's function since the last test cell
        self._drop_plan()
        self.kept, self.unkept, self.read_names = {}, [], {}  # (the kernel's serving loop starts keeping nothing)
        self.made, self.failed, self.guards, self.copied = [], None, {}, {}
        self.sockets += 1
        ipc = self.connection.get("transport") == "ipc"
        path = f"{self.connection['ip']}-v{self.sockets}" if ipc else None
        listener = socket.socket(socket.AF_UNIX if ipc else socket.AF_INET, socket.SOCK_STREAM)
        try:
            if ipc:
                umask = os.umask(0o111)  # the kernel's user, not this one, connects: it needs write access
                try:
                    listener.bind(path)
                finally:
                    os.umask(umask)
                address = f"ipc://{path}"
            else:
                listener.bind(("127.0.0.1", 0))
                address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
            listener.listen(1)
        except OSError as exc:  # the kernel's folder holds something else at that name
            listener.close()
            raise KernelGone(f"the checks could not open their channel to the kernel ({exc})") from None
        self.msg_id = self.client.execute(SERVE.format(address=json.dumps(address)), silent=True,
                                          store_history=False, allow_stdin=False)
        with listener:
            try:
                self._wait(lambda seconds: select.select([listener], [], [], seconds)[0])
                self.socket = Channel(listener.accept()[0])  # one connection: the listener closes
            finally:
                if path is not None:
                    with contextlib.suppress(OSError):  # (the kernel's code may have removed it)
                        os.unlink(path)
        return self._answer()

    def _wait(self, ready):
        """Wait until ``ready(seconds)`` is true (the kernel connected, or its message began to come);
        the seconds left to the test's time limit. Past that limit TestTimeout, and KernelGone when
        the kernel's cell ended meanwhile."""
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TestTimeout("the test ran past its time limit")
            if ready(min(left, 0.05)):
                return left
            if self._ended():
                raise KernelGone("the kernel stopped answering the checks")

    def _answer(self):
        """The kernel's answer to request ``self.seq``."""
        while True:
            left = self._wait(lambda seconds: self.socket.poll(int(seconds * 1000) + 1))
            try:
                text = self.socket.recv(MAX_ANSWER_CHARS, timeout=left)
            except ValueError:
                raise WireError("the student's code returned more data than the checks accept") from None
            except TimeoutError:
                raise TestTimeout("the test ran past its time limit") from None
            except (EOFError, OSError):
                raise KernelGone("the kernel stopped answering the checks") from None
            try:
                answer = json.loads(text)
            except ValueError:  # (not UTF-8, not JSON)
                raise WireError("an answer that is not JSON") from None
            if not isinstance(answer, dict) or answer.get("seq") != self.seq:
                continue  # not an answer to this request
            self.callbacks.let_go(answer.get("dropped"))  # the Callbacks that the kernel let go of
            if self.kept and answer.get("dropped"):  # (and what it kept of them)
                gone = {n for n in answer["dropped"] if type(n) is int} if isinstance(answer["dropped"], list) else ()
                self.kept = {key: v for key, v in self.kept.items() if key[0] not in gone}
            return self.codec.decode_message(answer.get("message"))

    def _lost(self, handle, ref):
        """A proxy died: its weak reference's callback, which the garbage collector runs at any
        allocation and in any thread (jupyter_client's heartbeat thread too). So it only notes;
        :meth:`_post` drops the handle, in this thread, between two uses of the tables."""
        self.lost.append((handle, ref))

    def _drop_lost(self):
        """The next message tells the kernel that the objects of the proxies that died are no longer
        the grader's to use (unless the kernel sent the handle again since, and it has a new proxy)."""
        while self.lost:
            handle, ref = self.lost.pop()
            if self.proxies.get(handle) is ref:
                del self.proxies[handle]
                self.dropped.append(handle)

    def _ended(self):
        try:
            reply = self.client.get_shell_msg(timeout=0)
        except queue.Empty:
            return False
        return _replies_to(reply, self.msg_id)

    def _post(self, fields, seconds=None):
        """Send one message to the kernel. It waits no longer than the test's time limit (or
        ``seconds``): a kernel whose notebook replaced its serving loop may never read one, and one
        that left its serving loop (interrupted, or its notebook's code ended it) closed its end."""
        self._drop_lost()
        dropped, self.dropped = self.dropped, []
        try:
            self.socket.send(json.dumps(dict(fields, dropped=dropped)).encode(),
                             timeout=max(0.001, seconds or self.deadline - time.monotonic()))
        except OSError:  # (TimeoutError too)
            raise KernelGone("the kernel stopped answering the checks") from None

    def _send(self, fields, payload, fresh=()):
        """Send a message, and wait for the kernel's next. It tells the kernel what changed of what it
        keeps of the tests' objects (:meth:`_keep`): ``fresh``, and what this side's code changed, and
        what it would keep of the objects that calls made since the last message (:meth:`_make`)."""
        self.failed = None
        if self.made:
            made, self.made = self.made, []
            fresh = [*fresh, *(item for number, value in made if self.callbacks.get(number) is value
                               for item in self._prefetch(value))]
        if self.kept or self.unkept or fresh:
            stale, fresh = self._changes(list(fresh))
            fields = dict(fields, stale=stale) if stale else fields
            if fresh:
                fields, payload = dict(fields, refresh=True), (payload, fresh)
        message = self.codec.encode_message(payload)
        self.seq += 1
        self._post(dict(fields, seq=self.seq, message=message))
        answer = self._answer()
        if not isinstance(answer, dict):
            raise WireError("an answer that is not a record")
        return answer

    @_exchange
    def request(self, payload, **fields):
        """Send one request; run the callbacks the student's code makes meanwhile; its answer."""
        answer = self._send(dict(fields, op="call"), payload)
        while "callback" in answer:
            answer = self._run_callback(answer)
        return answer

    def _run_callback(self, ask):
        """Run what the student's code asked of an object of the tests; send back its value, or what it
        raised. A call that makes is run without an answer (:meth:`_make`); at the kernel's next
        exchange after one that raised, the answer is that error, and nothing else runs."""
        if "promise" in ask:
            self._make(ask)
            return self._answer()
        if self.failed is not None:
            return self._send(self.failed, None)
        number, builtin = ask["callback"], ask.get("builtin")  # (either may be any value the wire carries)
        if type(number) is int and number == 0 and type(builtin) is str and builtin == "sync":
            return self._send({"op": "return"}, None)  # (each call before it has run)
        obj = None
        try:
            obj = self.callbacks.get(number) if type(number) is int else None
            builtin = CALLBACK_BUILTINS.get(builtin) if type(builtin) is str else None
            args, kwargs = ask.get("args", ()), ask.get("kwargs", {})
            if obj is None or builtin is None or type(args) is not tuple or type(kwargs) is not dict or not all(
                    isinstance(k, str) for k in kwargs):
                raise WireError("a callback the tests did not hand over")
            value = builtin(obj, *args, **kwargs)
        except (TestTimeout, KernelGone):
            raise
        except Exception as exc:
            return self._send({"op": "raise", "types": [t.__name__ for t in type(exc).__mro__],
                               "text": self._error_text(obj, exc)}, None)
        if ask.get("builtin") == "getattr":
            keep = self._keep(ask["callback"], obj, args[0], value)
            return self._send({"op": "return", "keep": True} if keep else {"op": "return"}, value)
        return self._send({"op": "return"}, value, self._prefetch(value))

    def _make(self, ask):
        """Run a call of an object that makes (:func:`_makes`), which the kernel sent without waiting
        for its answer: it chose the number of the new object. The arguments are data and the tests'
        objects only (the call must not ask the kernel back: it is not listening). Once one such
        call raised, the next are not run (the student's code would not have made them): its number
        and theirs stand for an :class:`Unmade`, which a notebook that kept them may still send."""
        number, callback = ask.get("promise"), ask.get("callback")
        if type(number) is not int or number >= 0 or self.callbacks.get(number) is not None:
            raise WireError("an object number that the kernel may not choose")
        if self.failed is not None:
            self.callbacks.adopt(number, Unmade())
            return
        obj = self.callbacks.get(callback) if type(callback) is int else None
        args, kwargs, builtin = ask.get("args", ()), ask.get("kwargs", {}), ask.get("builtin")
        if obj is None or type(builtin) is not str or builtin != "call" or not _makes(obj) or (
                type(args) is not tuple) or type(kwargs) is not dict or not all(isinstance(k, str) for k in kwargs) or (
                not _data_only((args, tuple(kwargs.values())), 4)):
            raise WireError("a call that the kernel may not leave unanswered")
        try:
            value = obj(*args, **kwargs)
        except (TestTimeout, KernelGone):
            raise
        except Exception as exc:
            self.failed = {"op": "raise", "types": [t.__name__ for t in type(exc).__mro__],
                           "text": self._error_text(obj, exc), "promise": number}
            self.callbacks.adopt(number, Unmade())
            return
        if isinstance(value, type) or not _the_tests(type(value)):
            raise GraderFault(f"{obj!r} says that it makes, and returned {type(value).__name__}")
        self.callbacks.adopt(number, value)  # (ValueError, a GraderFault, when it is not new)
        self.made.append((number, value))

    # --- what the kernel keeps of the tests' objects ------------------------------------------------
    def _keep(self, number, obj, name, value):
        """Whether the kernel may keep ``obj.name`` (``value``) until a message says it changed (see
        :meth:`_changes`): a function of a class (1.8's ``Add.apply``), or a value in an object's own
        dict that stays what this side holds while the attribute is bound to it (an immutable value,
        an array that the wire keeps in step, a tuple of those, a lent object). A property runs code
        at each read: it is asked each time."""
        if isinstance(obj, type):
            static = _class_attribute(obj, name)
            if not isinstance(static, (classmethod, staticmethod, types.FunctionType)):
                return False
            where = None
        else:
            where = getattr(obj, "__dict__", None)
            if type(where) is not dict or where.get(name, _ABSENT) is not value or not self._stays(value) or (
                    _class_attribute(type(obj), name) is not _ABSENT):
                return False
            static = value
            self.read_names.setdefault(type(obj), set()).add(name)
        self._follow(number, name, where, static)
        return True

    def _follow(self, number, name, where, static):
        self.kept[(number, name)] = (where, static)
        if len(self.kept) > KEPT_READS:  # what went stale is looked for at every message: keep it short
            oldest = next(iter(self.kept))
            del self.kept[oldest]
            self.unkept.append(list(oldest))

    def _prefetch(self, value):
        """For a lent object that a callback returns (1.8's ``Add.apply(a, b)``): the values of the
        attributes that the kernel kept of its class's objects before (their ``data``, their ``grad``),
        sent with it, as ``[object, name, value]``."""
        names = self.read_names.get(type(value))  # (the tests' own classes only)
        where = getattr(value, "__dict__", None) if names else None
        if type(where) is not dict:
            return ()
        return [[value, name, where[name]] for name in sorted(names) if name in where and self._stays(where[name])]

    def _stays(self, value):
        if value is None or type(value) in (bool, int, float, str) or isinstance(value, (np.generic, np.dtype)):
            return True
        if type(value) is tuple:
            return all(self._stays(v) for v in value)
        if type(value) is np.ndarray:
            return self.codec._owner(value) is not None  # a view of a buffer: its writes travel
        if issubclass(type(value), (Proxy, Method)):  # the student's object: a write to it is not seen here
            return False
        cls = value if issubclass(type(value), type) else type(value)
        return _the_tests(cls)  # the tests' object, lent by reference

    def _changes(self, fresh):
        """``(stale, fresh)`` for the next message: what the kernel should forget of what it keeps
        (this side's code rebound the attribute to a value that does not stay, or this side stopped
        following it), and the new values it should keep, ``fresh`` among them (a rebound
        attribute's new value; a write into a kept array travels as the array's buffer does)."""
        stale, self.unkept = self.unkept, []
        for key, (where, static) in list(self.kept.items()):
            now = where.get(key[1], _ABSENT) if where is not None else _class_attribute(self.callbacks.get(key[0]), key[1])
            if now is static:
                continue
            del self.kept[key]
            obj = self.callbacks.get(key[0])
            if where is not None and obj is not None and now is not _ABSENT and self._stays(now):
                fresh.append([obj, key[1], now])
            else:
                stale.append(list(key))
        for obj, name, value in fresh:
            self._follow(self.callbacks.number(obj), name, vars(obj), value)
        return stale, fresh

    def _error_text(self, obj, exc):
        """What the student's code learns of an error of the tests' object: its message when the
        object is a function written in a visible part of a test cell (its text is the student's to
        read anyway), else only its type. A message names functions and classes (``_sub_sign()
        missing 2 required positional arguments``), which would tell 1.8's planted engines from
        the correct ones without testing them."""
        if type(exc) is NotLent:
            return str(exc)
        code = getattr(obj, "__code__", None) if type(obj) is types.FunctionType else None
        tree, hidden = self.trees.get(code.co_filename, (None, 0)) if code is not None else (None, 0)
        if tree is not None and any(n.lineno == code.co_firstlineno and n.end_lineno < hidden for n in ast.walk(tree)
                                    if isinstance(n, (ast.FunctionDef, ast.Lambda))):
            return str(exc)[:4000]
        return f"the grader's object raised {type(exc).__name__}"

    def end(self):
        """Stop the serving loop and wait for the cell's reply (its stream output is discarded)."""
        if self.msg_id is None:
            return
        if self.socket is not None:  # (None: the kernel never connected)
            try:
                self._post({"op": "end"}, seconds=END_SECONDS)
            except KernelGone:
                pass  # the serving loop has already ended
            self.socket.close()  # (what was sent is still delivered)
            self.socket = None
        self.codec.release()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                reply = self.client.get_shell_msg(timeout=deadline - time.monotonic())
            except queue.Empty:
                break
            if _replies_to(reply, self.msg_id):
                break
        self.msg_id = None

    # --- values -----------------------------------------------------------------------------------
    def _ref(self, obj):
        if type(obj) is Method:
            obj = obj.resolve()
        if isinstance(obj, Proxy):
            if object.__getattribute__(obj, "_remote") is not self:
                raise WireError("an object of another student's kernel")
            return "handle", object.__getattribute__(obj, "_handle")
        if _makes(obj):
            return "callback", self.callbacks.number(obj), True
        return "callback", self.callbacks.number(obj)  # held until the kernel says its Callback died

    def _ship(self, obj, outer=()):
        """``(kind, source, values, numpy names)`` for a test's function that can run in the kernel
        (the wire's *function*), else None: it then stays here, a callback. Such a function is a
        lambda or a ``def`` written in the visible part of a test cell (its text enters the kernel),
        that writes no outer name and reads (and takes as defaults) only builtins, numpy, and values
        that go as they are: numbers, strings, arrays, the student's objects, other such functions
        of the tests (``outer``: those that read this one, which must not be read back), and tuples
        of those. A function that keeps a record (``calls.append``) reads a list, so it stays here.
        A default's text names a value of the test's scope: the text goes without it, and the
        value goes in ``values`` (:data:`DEFAULTS`)."""
        if type(obj) is not types.FunctionType or obj in outer:
            return None
        code = obj.__code__
        found, pure, names = _code_facts(code, *self.trees.get(code.co_filename, (None, 0)))
        if found is None or not pure:
            return None
        try:
            closure = dict(zip(code.co_freevars, (c.cell_contents for c in obj.__closure__ or ())))
        except ValueError:  # a closure cell not yet bound
            return None
        outer = (*outer, obj)
        values, numpy_names = {}, []
        for name in names:
            if name not in closure and name not in obj.__globals__:
                if hasattr(builtins, name) and name not in DEFAULTS:
                    continue
                return None
            value = closure[name] if name in closure else obj.__globals__[name]
            if value is np:
                numpy_names.append(name)
            elif name not in DEFAULTS and self._goes(value, outer):
                values[name] = self._copies(value)
            else:
                return None
        defaults = (tuple(obj.__defaults__ or ()), tuple((obj.__kwdefaults__ or {}).items()))
        if any(defaults):
            if not self._goes(defaults, outer):
                return None
            values.update(zip(DEFAULTS, self._copies(defaults)))
        return (*found, values, numpy_names)

    def _copies(self, value):
        """``value`` with each array of the test's copied: a function that runs in the kernel reads the
        test's arrays (1.3's ``X0``) from copies, so that what the student's code writes into them never
        reaches the arrays from which the test computes what it expects (red team, stop 41). One copy
        per array for the test cell: sent once, the kernel then knows it (a function may go thousands
        of times, as 1.5's ``f`` does)."""
        if type(value) is tuple:
            return tuple(self._copies(v) for v in value)
        if type(value) is not np.ndarray:
            return value
        kept = self.copied.get(id(value))
        if kept is None or kept[0] is not value:
            kept = self.copied[id(value)] = (value, value.copy())
        return kept[1]

    def _goes(self, value, outer):
        """True for a value that a function going to the kernel may read (see :meth:`_ship`)."""
        if type(value) is tuple:
            return all(self._goes(v, outer) for v in value)
        return _travels(value) or (type(value) is types.FunctionType and self._ship(value, outer) is not None)

    def refuse_shared(self, values, what):
        """GraderFault for an array among ``values`` whose memory the kernel shares (the test handed it
        to the student's code, or took it from there without a copy): the student's writes into it
        come here, so a test that computed ``what`` from it would judge the student against what the
        student's code left in it. A test computes such a value from its own copy, made before the
        student's code had the array (red teams, stop 39). Lists, tuples and dicts are looked into."""
        for value in values:
            if isinstance(value, (list, tuple)):
                self.refuse_shared(value, what)
            elif isinstance(value, dict):
                self.refuse_shared(value.values(), what)
            elif isinstance(value, np.ndarray) and self.codec.shares(value):
                raise GraderFault(f"the test computes {what} from an array that the student's code can write into: "
                                  "compute it from a copy made before that code had the array")

    def in_kernel(self, fn):
        """``fn``, or, when it is a test's function that can run in the kernel (:meth:`_ship`), a
        function that runs it there in one request. :func:`autograder.inside.checks.run_student`
        runs a test's function that drives the student's code (1.8's chain of 3,000 Adds) as it
        runs the student's own: one request, not one for each operation on the student's objects."""
        if type(fn) is not types.FunctionType or self._ship(fn) is None:
            return fn
        return functools.partial(self.call, fn)

    def _resolve(self, kind, number, cls=None):
        if kind == "callback":
            obj = self.callbacks.get(number)  # (None never goes by reference)
            if obj is None:
                raise WireError("a callback the tests did not hand over")
            return obj
        ref = self.proxies.get(number)
        proxy = ref() if ref is not None else None
        if proxy is None:
            proxy = Proxy(self, number, cls)
            self.proxies[number] = weakref.ref(proxy, functools.partial(self._lost, number))
            while number in self.dropped:  # died, but the kernel sent it again before it heard: it lives on
                self.dropped.remove(number)
        return proxy

    def getattr(self, proxy, name):
        """``proxy.name``: a request, unless the kernel said that it is a function of a class (asked
        once per test cell) or a method of the object's class (then called in one request)."""
        handle, cls = object.__getattribute__(proxy, "_handle"), object.__getattribute__(proxy, "_class")
        if (handle, name) in self.statics:
            return self.statics[handle, name]
        if (cls, name) in self.methods:
            return Method(proxy, name)
        answer = self._answered(None, proxy, name, builtin="getattr")
        value, stable = answer.get("value"), answer.get("stable")  # stable: see recording._stable
        if stable == "class":
            self.statics[handle, name] = value
        elif stable == "method" and cls is not None:
            self.methods.add((cls, name))
        return value

    def call(self, fn, *args, builtin=None, **kwargs):
        """``fn(*args, **kwargs)`` in the kernel; ``builtin`` names one of the recording's builtins."""
        return self._answered(fn, *args, builtin=builtin, **kwargs).get("value")

    def _call_fields(self, numpy_only, builtin):
        """The settings a call's request carries (a plan's step carries the same, to be taken for it)."""
        fields = {"numpy_only": bool(numpy_only), "depth": self.deepest is not None}
        if builtin:
            fields["builtin"] = builtin
        return fields

    def guard(self, value, guard, depth=4):
        """The student's objects in ``value``, what a student's call returned (and ``depth`` levels of
        lists, tuples and dicts into it), keep that call's :class:`Guard` for the rest of the test
        cell: a result whose work is left for later (an ``__array__``, an ``__iter__`` or a property
        that computes when asked) does it under the rules of its exercise (red team, stop 41)."""
        if isinstance(value, Proxy):
            self.guards[object.__getattribute__(value, "_handle")] = guard
        elif depth and type(value) in (list, tuple):
            for v in value:
                self.guard(v, guard, depth - 1)
        elif depth and type(value) is dict:
            for v in value.values():
                self.guard(v, guard, depth - 1)

    def _guard_of(self, fn, args):
        """The Guard of the student's object that a request outside the checks' calls uses, if any."""
        for obj in (fn, *args[:1]):
            if isinstance(obj, Proxy):
                guard = self.guards.get(object.__getattribute__(obj, "_handle"))
                if guard is not None:
                    return guard
        return None

    def _answered(self, fn, *args, builtin=None, **kwargs):
        """The kernel's answer to a call, once what it recorded (depth, delegation, warnings, an
        exception) has been taken in. Outside the checks' own calls of the student's code, a use of
        an object that such a call returned runs under that call's rules (:meth:`guard`)."""
        fields = self._call_fields(self.numpy_only, builtin)
        answer = self._take_planned(fn, args, kwargs, fields) if self.planned else None
        guard = self._guard_of(fn, args) if answer is None and self.found is None and self.guards else None
        if guard is not None:
            fields = dict(fields, numpy_only=guard.numpy_only, depth=guard.max_depth is not None)
        if answer is None:
            answer = self.request({"fn": fn, "args": args, "kwargs": kwargs}, **fields)
        if "error" in answer:
            raise WireError(f"the recording failed: {answer['error']}")
        delegated, warned, raised = answer.get("delegated", []), answer.get("warnings", []), answer.get("raised", {})
        if (type(delegated) is not list or type(warned) is not list or type(raised) is not dict
                or not all(type(w) is list and len(w) == 2 and type(w[0]) is list for w in warned)
                or type(raised.get("types", [])) is not list or type(raised.get("frames", [])) is not list):
            raise WireError("an answer that is not the recording's")
        if self.deepest is not None and type(answer.get("depth")) is int:
            self.deepest[0] = max(self.deepest[0], answer["depth"])
        if delegated and self.found is not None and not self.found:
            self.found.extend(str(d) for d in delegated[:1])
        if self.caught is not None:
            self.caught.extend(warnings.WarningMessage(str(text), builtin_class(category, Warning, UserWarning), "<student>", 0)
                               for category, text in warned)
        if guard is not None:
            guard.judge(answer.get("depth"), delegated, warned)
        if "raised" in answer:
            raise student_exception(raised.get("types", []), raised.get("message", ""), raised.get("frames", []),
                                    raised.get("exception"))
        if guard is not None:
            self.guard(answer.get("value"), guard)
        return answer

    # --- plans: the calls of a case, in one request -------------------------------------------------
    @contextlib.contextmanager
    def plan(self, steps):
        """Run the calls ``steps`` in the kernel in one request, ahead of the checks' own calls in the
        block, which then take their answers from it (:meth:`_answered`) instead of asking, one
        request each. What the block leaves of the plan is dropped at its end."""
        self._send_plan(steps)
        try:
            yield
        finally:
            self._drop_plan()

    def _drop_plan(self):
        self.planned, self.plan_values = [], []

    def _send_plan(self, steps):
        """See :meth:`plan`.

        A step is ``(fn, args, kwargs, numpy_only)``, a call that :func:`autograder.inside.checks.run_student`
        will make, or ``(None, args, kwargs, numpy_only, builtin)``, one of the recording's builtins.
        An argument may be a :class:`checks.Later`, what an earlier step returns. The kernel runs the
        steps in order and stops at the first that raises. A call takes a step's answer only when it
        is that step: the same function, the same argument objects (a Later's, the value its step
        gave), the same settings. Any other request drops what is left of the plan, and the calls
        from there on are asked again: a plan only saves requests, it never decides an answer.
        It runs only what the checks would run next, in that order, so a student's code sees the
        same calls either way; only the checks' comparisons between them come later."""
        sent = []
        for step in steps:
            fn, args, kwargs, numpy_only = step[:4]
            builtin = step[4] if len(step) > 4 else None
            if builtin is None:
                fn, args, builtin = self._request_form(fn, args)
                if fn is None and builtin is None:
                    break  # a function that runs here: the plan ends before it
            sent.append((fn, tuple(args), dict(kwargs), self._call_fields(numpy_only, builtin)))
        self._drop_plan()
        if len(sent) < 2:
            return
        calls = []
        for n, (fn, args, kwargs, fields) in enumerate(sent):
            later = [(i, a) for i, a in enumerate(args) if isinstance(a, checks.Later)]
            if any(a.step >= n for _, a in later) or any(isinstance(v, checks.Later) for v in kwargs.values()):
                raise ValueError("a Later is a positional argument that names an earlier step")
            calls.append(dict(fields, fn=fn, args=tuple(None if isinstance(a, checks.Later) else a for a in args),
                              kwargs=kwargs, links=[[i, a.step, a.item] for i, a in later]))
        answer = self.request({"steps": calls}, plan=True)
        answers = answer.get("answers")
        if "error" in answer or type(answers) is not list or not all(type(a) is dict for a in answers):
            raise WireError(f"the recording failed: {answer.get('error', 'a plan answered with no list of answers')}")
        self.plans[0] += 1
        self.planned = [(*step, a) for step, a in zip(sent, answers)]

    def _request_form(self, fn, args):
        """``(fn, args, builtin)`` of the request that calling ``fn(*args)`` from the checks makes;
        ``(None, args, None)`` for a function that runs here (it is no request)."""
        if type(fn) is Method:
            return None, (fn._proxy, fn._name, *args), "callmethod"
        if isinstance(fn, Proxy) or self.in_kernel(fn) is not fn:
            return fn, args, None
        return None, args, None

    def _take_planned(self, fn, args, kwargs, fields):
        """The planned answer of this call, if it is the plan's next step (see :meth:`plan`); else None,
        and the plan is dropped."""
        step_fn, step_args, step_kwargs, step_fields, answer = self.planned[0]
        values = self.plan_values

        def same(a, b):
            if isinstance(b, checks.Later):
                if b.step >= len(values):
                    return False
                later, b = b, values[b.step]
                if later.item is not None:  # (a tuple that the answer holds, not a proxy: indexing one is a request)
                    b = b[later.item] if type(b) is tuple and -len(b) <= later.item < len(b) else _ABSENT
            return a is b or (type(a) is type(b) and type(a) in (str, int, float, bool) and a == b)

        if (fn is step_fn and fields == step_fields and len(args) == len(step_args)
                and all(same(a, b) for a, b in zip(args, step_args)) and kwargs.keys() == step_kwargs.keys()
                and all(same(kwargs[k], step_kwargs[k]) for k in kwargs)):
            del self.planned[0]
            values.append(answer.get("value"))
            return answer
        self.plans[1] += 1
        self._drop_plan()
        return None

    def subclass(self, name, bases, namespace):
        """A class that a test's helper defines on a student's class, made in the kernel: its
        methods are compiled there from the test cell's text, with the values they close over here
        (so their text enters the kernel: keep such helpers out of hidden parts)."""
        methods, attributes, free = {}, {}, {}
        for key, value in namespace.items():
            if key in ("__module__", "__qualname__", "__classcell__"):
                continue
            kind, fn = _method(value)
            if fn is None:
                attributes[key] = value
                continue
            methods[key] = [self._function_source(fn), kind, fn.__name__]
            for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
                if var != "__class__":
                    free[var] = cell.cell_contents
        return self.call(None, name, list(bases), methods, free, attributes, builtin="subclass")

    def _function_source(self, fn):
        code = fn.__code__
        tree, hidden = self.trees.get(code.co_filename, (None, 0))
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.FunctionDef) and node.name == fn.__name__ and code.co_firstlineno in (
                    node.lineno, *(d.lineno for d in node.decorator_list)):
                _refuse_hidden(node, hidden)
                bare = copy.copy(node)
                bare.decorator_list = []  # the kernel wraps it again (staticmethod...)
                return ast.unparse(bare)
        raise WireError(f"the source of {fn.__qualname__} is not in a test cell")

    def locked_cell(self, *grade_ids):
        """The names that the source notebook's locked code cells ``grade_ids`` define, their text
        run here in that order, in one scope with ``np`` and ``checks`` (once per notebook): the
        course's own code, out of the student's reach."""
        if grade_ids not in self.locked:
            cells = {c.metadata["nbgrader"].get("grade_id"): c.source
                     for c in (nbformat.read(self.source_notebook, as_version=4).cells if self.source_notebook else ())
                     if c.cell_type == "code" and nbutils.is_locked(c) and not nbutils.is_grade(c)
                     and not nbutils.is_solution(c)}
            scope = {"__name__": "locked_cells", "np": np, "checks": checks}
            for grade_id in grade_ids:
                if grade_id not in cells:
                    raise LookupError(f"the source notebook has no locked cell {grade_id!r}")
                exec(compile(cells[grade_id], f"<locked cell {grade_id}>", "exec"), scope)
            self.locked[grade_ids] = types.SimpleNamespace(**scope)
        return self.locked[grade_ids]

    def names(self):
        """The notebook's names: its objects as proxies, and the modules of :data:`NOTEBOOK_MODULES`
        that it bound to a name, bound to the worker's own. A module's name comes from the kernel:
        only these, matched exactly, are ever imported here (importing runs a module's code)."""
        found = self.call(None, builtin="names")
        if not (isinstance(found, dict) and isinstance(found.get("names"), dict) and isinstance(found.get("modules"), dict)):
            raise WireError("the notebook's names did not come back as a dict")
        out = {k: v for k, v in found["names"].items() if _notebook_name(k)}
        for k, module in found["modules"].items():
            if _notebook_name(k) and module in NOTEBOOK_MODULES:
                out[k] = importlib.import_module(module)
        return out


def _notebook_name(name):
    """True for a name the kernel may bind in a test cell's scope: an identifier that does not start
    with ``__`` and is not a builtin's. Those are the scope's own (its ``__builtins__``, through
    which every builtin and import of the test cell goes, and the grader's bookkeeping:
    ``__tests_bound__``, ``__kernel_names__``, ``__cell_result__``); a notebook's names for the
    tests never start so, and none is a builtin's. A notebook's ``enumerate``, ``range`` or
    ``ValueError`` would shadow the builtin for the test's code and every helper it defines, and
    each use would run the student's code: a loop over no cases, an ``expect_raises`` that any
    error passes (red team, stop 40: 46 points of 1.2, 16 of 1.4, and a hidden test's cases in
    the attacker's feedback)."""
    return (isinstance(name, str) and name.isidentifier() and not name.startswith("__")
            and name not in _BUILTIN_NAMES)


_BUILTIN_NAMES = frozenset(vars(builtins))


# The modules a notebook's cells import that its test cells may use by the notebook's name for them.
# (torch: only a unit with torch exercises has it in its kernel; the worker's torch is the same package)
NOTEBOOK_MODULES = frozenset({"collections", "copy", "functools", "itertools", "math", "numpy", "numpy.linalg",
                              "numpy.random", "operator", "random", "re", "types", "warnings", "torch",
                              "torch.nn", "torch.nn.functional"})
def _the_tests(cls):
    """True for a class of the tests' objects, which go by reference: it declares what it lends."""
    return isinstance(getattr(cls, "lends", None), frozenset)


def _lent(obj, name, writing=False):
    """``name``, when the student's code may read (or, on an instance, write) that attribute of
    the tests' ``obj``: a name that its class declares in ``lends``, the interface it offers the
    student's code (1.8's engines: ``Op.apply``, a tensor's ``data`` and ``grad``, ``SGD.step``).
    Nothing else of the grader's process is reachable by attribute (a function's globals, a
    module, a frame would be the grader's own; how a planted engine is built would tell it from
    a correct one)."""
    cls = obj if isinstance(obj, type) else type(obj)
    lends = getattr(cls, "lends", frozenset())
    if not isinstance(lends, frozenset) or not isinstance(name, str) or name not in lends or (
            writing and isinstance(obj, type)):
        raise NotLent(f"the tests' object lends no attribute {name!r} to the student's code")
    return name


class Unmade:
    """What a call stands for that the grader did not run, as an earlier call raised (see
    :meth:`Remote._make`): it lends nothing, and calling it raises TypeError."""

    lends = frozenset()


def _makes(obj):
    """True for an object of the tests whose every call *makes*: it returns a new object of the
    tests' (one lent by reference) or raises, and changes nothing that exists, so that the kernel
    may go on without waiting for its answer (:meth:`autograder.inside.recording.Callback.__call__`).
    A class says so in ``makes``: of calling it (``"__init__"``), and of its methods by name (1.8's
    ``Tensor``, and each op's ``apply``)."""
    if type(obj) is types.MethodType:
        owner = obj.__self__ if isinstance(obj.__self__, type) else type(obj.__self__)
        name = obj.__func__.__name__
    elif isinstance(obj, type):
        owner, name = obj, "__init__"
    else:
        return False
    makes = _class_attribute(owner, "makes")
    return isinstance(makes, frozenset) and name in makes


def _data_only(value, depth):
    """True for the arguments of a call that makes: data that goes by value, and the tests' own objects."""
    if value is None or type(value) in (bool, int, float, str) or isinstance(value, (np.ndarray, np.generic)):
        return True
    if type(value) in (tuple, list) and depth:
        return all(_data_only(v, depth - 1) for v in value)
    if type(value) is dict and depth:
        return all(_data_only(v, depth - 1) for v in value.values())
    return not isinstance(value, (Proxy, Method, type)) and _the_tests(type(value))


class NotLent(AttributeError):
    """An attribute that a test's object does not lend (its message names only the attribute)."""


# What the student's code may do with an object of the tests that it was handed.
CALLBACK_BUILTINS = {"call": lambda obj, *args, **kwargs: obj(*args, **kwargs), "iter": iter, "next": next, "len": len,
                     "getattr": lambda obj, name: getattr(obj, _lent(obj, name)),
                     "setattr": lambda obj, name, value: setattr(obj, _lent(obj, name, writing=True), value)}


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

    __slots__ = ("_remote", "_handle", "_class", "__weakref__")

    def __new__(cls, *args):
        if len(args) == 3 and isinstance(args[0], str) and isinstance(args[1], tuple) and isinstance(args[2], dict):
            # `class Block(nn.Module):` in a test, on a student's class: Python calls the base's type,
            # Proxy, as the metaclass; the class is made in the kernel (Remote.subclass)
            remote = next(object.__getattribute__(b, "_remote") for b in args[1] if isinstance(b, Proxy))
            return remote.subclass(*args)
        return object.__new__(cls)

    def __init__(self, *args):
        if not isinstance(args[0], str):  # (else the metaclass call above, whose proxy is already made)
            object.__setattr__(self, "_remote", args[0])
            object.__setattr__(self, "_handle", args[1])
            object.__setattr__(self, "_class", args[2] if len(args) > 2 else None)

    def _call_builtin(self, name, *args):
        return object.__getattribute__(self, "_remote").call(None, self, *args, builtin=name)

    def __getattr__(self, name):
        return object.__getattribute__(self, "_remote").getattr(self, name)

    def __setattr__(self, name, value):
        remote = object.__getattribute__(self, "_remote")
        remote.statics.pop((object.__getattribute__(self, "_handle"), name), None)
        self._call_builtin("setattr", name, value)

    def __call__(self, *args, **kwargs):
        return object.__getattribute__(self, "_remote").call(self, *args, **kwargs)

    def __instancecheck__(self, obj):
        if isinstance(obj, StudentError) and obj.kernel is not None:
            obj = obj.kernel  # what the student's code raised, in its kernel
        return object.__getattribute__(self, "_remote").call(None, obj, self, builtin="isinstance")

    def __array__(self, dtype=None, copy=None):
        a = self._call_builtin("asarray")
        if not isinstance(a, np.ndarray):  # the kernel's np.asarray gives an array: this answer was forged
            raise WireError("the student's object did not turn into an array")
        return a if dtype is None else a.astype(dtype)

    def __iter__(self):
        return iter(self._call_builtin("list"))

    def __enter__(self):
        return self._call_builtin("enter")

    def __exit__(self, kind, exc, tb):
        return self._call_builtin("exit", None if exc is None else [[t.__name__ for t in kind.__mro__], str(exc)])

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


class Method:
    """``obj.name`` for a method of the class of a student's object: calling it is one request
    (``obj.name(...)`` in the kernel); any other use asks the kernel for the bound method itself."""

    __slots__ = ("_proxy", "_name")

    def __init__(self, proxy, name):
        self._proxy, self._name = proxy, name

    def __call__(self, *args, **kwargs):
        proxy = self._proxy
        return object.__getattribute__(proxy, "_remote").call(None, proxy, self._name, *args, builtin="callmethod",
                                                              **kwargs)

    def resolve(self):
        """The bound method itself, as a proxy."""
        return self._proxy._call_builtin("getattr", self._name)

    def __getattr__(self, name):
        return getattr(self.resolve(), name)

    def __repr__(self):
        return repr(self.resolve())


@functools.lru_cache(maxsize=4096)
def _code_facts(code, tree, hidden):
    """``(text, pure, names read)`` of a function (see :meth:`Remote._ship`), of a test cell (its syntax ``tree``) or not (None), worked
    out once per worker: the checks offer each function they call to the kernel, a helper that a
    test calls in a loop is sent each time, its text is found by walking the whole cell's syntax
    tree, and every notebook of a class runs the same test cells. A code object is equal to the
    same code compiled again, and :func:`_parsed` gives each cell's text one tree."""
    return _function_text(code, tree, hidden), _pure(code), sorted(set(code.co_freevars) | _globals_read(code))


def _function_text(code, tree, hidden):
    """``("lambda", text)`` or ``(name, text)`` of the function of ``code`` in a test cell's syntax tree,
    when it is a lambda alone on its line or an undecorated ``def``, wholly above the hidden part; else None."""
    if tree is None:
        return None
    if code.co_name == "<lambda>":
        nodes = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == code.co_firstlineno]
        kind = "lambda"
    else:
        nodes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == code.co_name
                 and n.lineno == code.co_firstlineno and not n.decorator_list]
        kind = code.co_name
    if len(nodes) != 1 or nodes[0].end_lineno >= hidden:
        return None
    bare = copy.deepcopy(nodes[0])  # the defaults go as values (Remote._ship)
    bare.args.defaults, bare.args.kw_defaults = [], [None] * len(bare.args.kwonlyargs)
    return kind, ast.unparse(bare)


def _globals_read(code):
    """The global names that ``code`` and the code nested in it read."""
    names = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _globals_read(const)
    return names


def _pure(code, nested=False):
    """True when ``code`` (and the code nested in it, such as a class that it defines) writes no global
    or outer name and raises nothing itself, and ``code`` itself yields nothing (a generator expression
    in it, such as ``tuple(t.grad for t in leaves)``, runs within its call). An ``assert`` or ``raise``
    is a verdict: in the kernel the student's objects answer its ``isinstance`` and ``np.array_equal``
    (red team, stop 41), so a function that has one runs here."""
    if not nested and code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        return False
    writes = {"STORE_GLOBAL", "DELETE_GLOBAL", "STORE_DEREF", "DELETE_DEREF", "STORE_NAME", "DELETE_NAME",
              "RAISE_VARARGS", "LOAD_ASSERTION_ERROR"}
    if nested and not code.co_flags & inspect.CO_OPTIMIZED:  # a class body in the function: its names are the class's
        writes -= {"STORE_NAME", "DELETE_NAME"}
    own = set(code.co_cellvars)  # names of its own that nested code closes over: its to write
    if any(i.opname in writes and not (i.opname.endswith("DEREF") and i.argval in own) for i in dis.get_instructions(code)):
        return False
    return all(_pure(c, nested=True) for c in code.co_consts if isinstance(c, types.CodeType))


def _travels(value):
    """True for a value that is not a container and goes to the kernel as it is, so that a function
    reading it may run there (tuples: :meth:`Remote._goes`)."""
    if value is None or type(value) in (bool, int, float, str) or isinstance(value, (Proxy, Method)):
        return True
    if isinstance(value, (np.ndarray, np.generic)):
        return value.dtype.name in DTYPES
    if isinstance(value, (np.ufunc, types.BuiltinFunctionType, types.FunctionType)):
        return getattr(np, getattr(value, "__name__", ""), None) is value  # np.tanh goes by name
    return False


def hidden_line(source):
    """The number of a test cell's ``### BEGIN HIDDEN TESTS`` line (past its end when it has none)."""
    lines = source.splitlines()
    return next((i for i, line in enumerate(lines, 1) if line.strip() == HIDDEN_START), len(lines) + 1)


def _refuse_hidden(node, hidden):
    """Text that would enter the student's kernel must come from the visible part of the cell."""
    if node.lineno >= hidden:
        raise WireError(f"the tests' `{node.name}` is defined in a hidden part, and would have to be made in the "
                        "student's kernel: move it above the hidden tests")


def _method(value):
    """``(wrapper, function)`` for a function defined in a class body, else ``(None, None)``."""
    if isinstance(value, types.FunctionType) and value.__name__ != "<lambda>":
        return "function", value
    for kind, wrapper, attr in (("staticmethod", staticmethod, "__func__"), ("classmethod", classmethod, "__func__"),
                                ("property", property, "fget")):
        if isinstance(value, wrapper) and isinstance(getattr(value, attr), types.FunctionType):
            return kind, getattr(value, attr)
    return None, None


@functools.lru_cache(maxsize=512)
def _class_bases(source):
    """``(number, names)`` for each top-level class of a test cell, and each top-level function that
    defines classes: the names its classes derive from (those that are plain names)."""
    out = []
    for i, node in enumerate(_parsed(source)[0].body):
        classes = [node] if isinstance(node, ast.ClassDef) else [
            n for n in ast.walk(node) if isinstance(n, ast.ClassDef)] if isinstance(node, ast.FunctionDef) else []
        names = tuple(b.id for c in classes for b in c.bases if isinstance(b, ast.Name))
        if names:
            out.append((i, names))
    return tuple(out)


@functools.lru_cache(maxsize=512)
def _parsed(source):
    """A test cell's syntax tree and the number of its first hidden line: shared, never changed."""
    return ast.parse(source), hidden_line(source)


@functools.lru_cache(maxsize=512)
def _cell_code(source, filename, left_out):
    """The code of a test cell's module without its top-level statements ``left_out`` (their numbers),
    its last expression bound to :data:`RESULT`; compiled once per worker."""
    tree = ast.parse(source)
    tree.body = [node for i, node in enumerate(tree.body) if i not in left_out]
    return compile(_with_result(tree), filename, "exec")


def _define_subclasses(remote, source, namespace):
    """The numbers of the cell's top-level classes that derive from a student's class and of its
    top-level functions that make such classes, which the cell's module leaves out: each of those
    is made in the kernel (``define``) and bound here as a proxy. Their text (test scaffolding, such
    as a stand-in operation) enters the kernel; the build keeps them out of hidden parts."""
    tree, hidden = _parsed(source)
    left_out = []
    for i, names in _class_bases(source):
        if any(isinstance(namespace.get(name), Proxy) for name in names):  # a student's class, or one that makes one
            node = tree.body[i]
            _refuse_hidden(node, hidden)
            namespace[node.name] = remote.call(None, ast.get_source_segment(source, node), node.name,
                                               builtin="define")
            left_out.append(i)
    return tuple(left_out)


def _bind_names(namespace, kernel):
    """Bind the notebook's names for a test cell. What the test cells defined themselves (their
    helpers, classes and values) stays theirs: a student's cell cannot replace a check's helper.
    A student's object that a test bound to a name gives way only when a notebook cell has
    rebound that name since the last test cell, as it would in the kernel."""
    bound = namespace.setdefault("__tests_bound__", set())
    last = namespace.get("__kernel_names__", {})
    for k, v in kernel.items():
        if k in bound or (isinstance(namespace.get(k), Proxy) and last.get(k) is v and namespace[k] is not v):
            continue
        namespace[k] = v
    namespace["__kernel_names__"] = kernel
    namespace.update(np=np, checks=checks, __builtins__=builtins)  # the grader's builtins, never the kernel's


def error_output(exc):
    """The one output a failed test cell leaves: the checks' message, without the grader's frames."""
    name = "AssertionError" if isinstance(exc, AssertionError) else type(exc).__name__
    text = str(exc)
    return {"output_type": "error", "ename": name, "evalue": text, "traceback": [f"{name}: {text}"]}


RESULT = "__cell_result__"


def _with_result(tree):
    """The cell's module, its last statement, when an expression, bound to :data:`RESULT`: the
    value that IPython would show, which nbgrader reads as a partial grade."""
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        tree.body[-1] = ast.copy_location(ast.Assign(targets=[ast.Name(RESULT, ast.Store())], value=last.value), last)
        ast.fix_missing_locations(tree)
    return tree


def run_test_cell(remote, source, namespace, seconds=None):
    """Run one test cell's code here, against the student's kernel; the cell's outputs.

    Raises :class:`TestTimeout` with the kernel still busy: the caller interrupts it, then calls
    ``remote.end()``."""
    out = io.StringIO()
    try:
        remote.start(seconds)
    except KernelGone as exc:
        return [error_output(exc)]
    except WireError as exc:  # the kernel's first message was not the recording's: the cell's verdict
        remote.end()
        return [error_output(exc)]
    previous = checks._REMOTE
    try:
        _bind_names(namespace, remote.names())
        before = dict(namespace)
        filename = f"<test cell {len(remote.trees) + 1}>"
        remote.trees[filename] = _parsed(source)
        code = _cell_code(source, filename, _define_subclasses(remote, source, namespace))
        checks._REMOTE = remote
        with contextlib.redirect_stdout(out), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                exec(code, namespace)
            finally:
                namespace["__tests_bound__"].update(
                    k for k, v in namespace.items() if not isinstance(v, Proxy) and before.get(k, namespace) is not v)
    except TestTimeout:
        raise
    except KernelGone as exc:
        return [error_output(exc)]
    except (Exception, SystemExit) as exc:  # the verdict: a failed check, or test code that the student's names broke
        remote.end()
        return [error_output(exc)]
    finally:
        checks._REMOTE = previous
    remote.end()
    text = out.getvalue()
    outputs = [{"output_type": "stream", "name": "stdout", "text": text}] if text else []
    result = namespace.pop(RESULT, None)
    if isinstance(result, (Proxy, Method)):  # its text would be the kernel's to choose, and so the grade
        return outputs + [error_output(WireError("a test cell ended in a student's object, not in a grade"))]
    if _is_grade(result):  # as IPython shows a cell's last value, which nbgrader reads as partial credit
        outputs.append({"output_type": "execute_result", "execution_count": None, "metadata": {},
                        "data": {"text/plain": repr(result)}})
    return outputs


def _is_grade(value):
    """True for a finite real number (not a bool): the only last value that nbgrader's partial credit
    reads as a grade. Any other value (an exception a check returned, say, whose text the student's
    code chose) leaves no output: nbgrader gives full marks for both."""
    return (isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
            and bool(np.isfinite(value)))

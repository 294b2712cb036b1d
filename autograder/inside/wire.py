"""The data that crosses the trust boundary between the grader and a student's kernel.

A message is JSON. Plain data travels by value: ``None``, booleans, numbers, strings, tuples,
lists, dicts, NumPy scalars and NumPy arrays of a numeric or boolean dtype. Anything else stays
where it lives and travels as a number that the other side turns into a proxy: a *handle* names an
object of the student's kernel, a *callback* an object of the grader's (a function that a test
hands to the student's code, such as the ``f`` of a finite-difference exercise). One kind goes
from the grader to the kernel only: a *function*, the text of a test's own function (a lambda or
a ``def``) from the visible part of a test cell, with the values it reads, which the kernel
compiles and runs itself instead of asking the grader at each call.

**Arrays keep their layout and their aliasing.** An array travels as its *owner* (the
contiguous buffer at the bottom of its ``.base`` chain), sent once per message however many
arrays view it, and the offset, shape and strides of the view. A transposed or sliced input
stays non-contiguous on the other side, two views of one buffer stay views of one buffer, and a
result that views an argument views the same buffer the other side sent. Each side keeps, weakly,
every owner it has seen under one id. A message carries the bytes of every buffer it names, and
of every other buffer that changed since the other side last saw it (the student's code wrote
into an input, or a test wrote into an array a Tensor holds); a known buffer is written in place
on arrival, so that views on both sides see the change. A side keeps the buffers it received
until its next message (or :meth:`Codec.release`), so that an array written and dropped before
that message is still seen changing.

**Torch tensors travel the same way**, in a unit whose kernel has torch (a torch exercise): a
tensor is a view (dtype, sizes, strides in elements, storage offset) of its untyped storage, and
the storage travels as a buffer of bytes under one id, like an array's owner. Two views of one
storage stay views of one storage on the other side (``untyped_storage().data_ptr()`` equal), a
storage without memory (an empty tensor's) stays one, and a write into a tensor is seen by the
other side's views. A side without torch refuses a tensor. ``requires_grad`` travels; a graph does not.

**The channel** (:class:`Channel`) carries one test cell's messages: a stream socket, a Unix socket
beside the kernel's own (or a port on 127.0.0.1 where the kernel listens on TCP), each message its
length in 8 bytes, then its bytes. A round trip costs a third of a ZeroMQ pair socket's, which sends
and receives through a thread of its own on each side (about 30 against 95 microseconds of CPU on
2 cores): unit 1.8's differential tests make some 8,000 of them a notebook.

Nothing here unpickles: arrays are raw bytes with a dtype from :data:`DTYPES`, and decoding
rejects anything else. Decoding is the only code of the grader's side that reads what a
student's kernel wrote, so it checks every field it uses.
"""
import base64
import builtins
import functools
import itertools
import math
import select
import socket
import struct
import sys
import types
import warnings
import weakref

import numpy as np

DTYPES = frozenset(["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                    "float16", "float32", "float64", "complex64", "complex128"])
TENSOR_DTYPES = DTYPES | {"bfloat16"}  # torch's names, without the "torch." prefix
MAX_OWNER_BYTES = 64 << 20  # a bigger buffer stays where it is, as a handle
SAFE_INT = 2 ** 53  # an int of magnitude below it is a JSON number (exact as a double); a bigger one goes as text
MAX_VIEW_ELEMENTS = 1 << 24  # a view (strides of 0 make any size) that the grader would compare
# The types of NumPy's functions (np.tanh, np.sum...); an object of another type is not asked its name.
_NUMPY_CALLABLES = (np.ufunc, type(np.sum), types.FunctionType, types.BuiltinFunctionType)


class WireError(ValueError):
    """A message that does not follow this format."""


# Exceptions that steer the iteration or the generators of whatever catches them: one raised by
# the other side's code is not made one of these here (it would silently end a `map` in a test).
_CONTROL = (StopIteration, StopAsyncIteration, GeneratorExit)


def builtin_class(names, base, default, control=True):
    """The first of ``names`` that is a builtin subclass of ``base`` (an exception or warning class
    from the other side, by its MRO's names), else ``default``; with ``control`` False (the grader's
    side, naming what the student's code raised), never an iteration control exception."""
    for n in names:
        c = getattr(builtins, n, None) if isinstance(n, str) else None
        if isinstance(c, type) and issubclass(c, base) and (control or not issubclass(c, _CONTROL)):
            return c
    return default


_DTYPE_NAMES = {}  # dtype: dtype.name, which NumPy computes in Python (10 us): 8 of them a request


def _name(dtype):
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name
    return name


def _bottom(a):
    """The array at the bottom of ``a``'s ``.base`` chain."""
    o = a
    while isinstance(o.base, np.ndarray):
        o = o.base
    return o


def _span(start, shape, strides, itemsize):
    """The first and one-past-the-last byte that a view's elements occupy, from its first element's
    byte ``start`` (strides in bytes); ``(start, start)`` for a view without elements."""
    if 0 in shape:
        return start, start
    low = start + sum(s * (n - 1) for s, n in zip(strides, shape) if s < 0)
    return low, start + sum(s * (n - 1) for s, n in zip(strides, shape) if s > 0) + itemsize


def _address(a):
    return a.__array_interface__["data"][0]


def _torch(importing=False):
    """The torch module when this side has it (imported already, or, with ``importing``, importable),
    else None. In a NumPy-only kernel torch's folders are empty: ``import torch`` gives an empty
    namespace package there, or fails."""
    torch = sys.modules.get("torch")
    if torch is None and importing:
        try:
            import torch
        except ImportError:
            return None
    return torch if isinstance(getattr(torch, "Tensor", None), type) else None


def _torch_dtype_name(dtype):
    return str(dtype).removeprefix("torch.")


def _tensor_key(key, fields):
    """How a tensor is cached on either side: its storage's id and its view's fields."""
    return (key, fields["dtype"], tuple(fields["shape"]), tuple(fields["strides"]), fields["offset"],
            fields["requires_grad"])


def _extent_ok(offset, shape, strides, itemsize, nbytes):
    """True when every element of the view (offset and strides in bytes) lies inside a buffer of ``nbytes``."""
    low, high = _span(offset, shape, strides, itemsize)
    return 0 in shape or (low >= 0 and high <= nbytes)


def _layout_ok(shape, strides, offset):
    return (isinstance(shape, list) and isinstance(strides, list) and len(shape) == len(strides)
            and all(type(n) is int and n >= 0 for n in shape) and all(type(s) is int for s in strides)
            and type(offset) is int)


class Owners:
    """One side's table of array buffers by id, each with the bytes last sent or received. It
    holds them weakly: a buffer that nothing else on this side holds can no longer be seen
    changing here."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.by_id = {}  # id: [weak reference to the owner array, bytes last synchronised]
        self.ids = {}  # id(owner array): id
        self.count = 0
        self.dead = []  # (id, address, weak reference) of the buffers gone since the tables were last pruned

    def get(self, key):
        entry = self.by_id.get(key)
        return None if entry is None else entry[0]()

    def add(self, key, owner, seen):
        self.by_id[key] = [weakref.ref(owner, functools.partial(self.gone, key, id(owner))), seen]
        self.ids[id(owner)] = key

    def gone(self, key, address, ref):
        """Note a buffer that nothing on this side holds any more: its weak reference's callback. The
        garbage collector runs it at any allocation, in any thread: in the middle of the student's
        code, or of an iteration over these tables, which a change of their size would break
        ("dictionary changed size during iteration", blamed on the student's call). So it only
        notes; :meth:`prune` forgets."""
        self.dead.append((key, address, ref))

    def prune(self):
        """Forget the buffers noted dead (an id received again since then keeps its new entry)."""
        while self.dead:
            key, address, ref = self.dead.pop()
            entry = self.by_id.get(key)
            if entry is not None and entry[0] is ref:
                del self.by_id[key]
            if self.ids.get(address) == key:
                del self.ids[address]

    def held(self, owner):
        """The id of ``owner`` if this table still holds that very array, else None (an id() can be
        reused by a new array once the old one is gone)."""
        key = self.ids.get(id(owner))
        return key if key is not None and self.get(key) is owner else None

    def id_for(self, owner):
        key = self.held(owner)
        if key is None:
            self.count += 1
            key = f"{self.prefix}{self.count}"
            self.add(key, owner, None)
        return key

    def changed(self):
        """Ids whose bytes differ from what the other side last saw."""
        self.prune()
        out = []
        for key, (ref, seen) in list(self.by_id.items()):
            owner = ref()
            if owner is not None and (seen is None or owner.tobytes() != seen):
                out.append(key)
        return out


class Lent:
    """The objects one side lent to the other, by number, each held until the other side says it
    let the number go. A number is never reused; an object lent again while held keeps its own."""

    def __init__(self):
        self.by_number = {}  # number: object
        self._numbers = {}  # id(object): number
        self._count = itertools.count(1)

    def __len__(self):
        return len(self.by_number)

    def get(self, number):
        return self.by_number.get(number)

    def number(self, obj):
        n = self._numbers.get(id(obj))
        if n is None or self.by_number.get(n) is not obj:
            n = next(self._count)
            self.by_number[n] = obj
            self._numbers[id(obj)] = n
        return n

    def adopt(self, number, obj):
        """Lend ``obj``, which is not lent, under ``number``, which the other side chose (below 0:
        this side's own numbers are above); WireError for a number in use or not the other side's."""
        if type(number) is not int or number >= 0 or number in self.by_number:
            raise WireError("an object number that the other side may not choose")
        if self.by_number.get(self._numbers.get(id(obj))) is obj:
            raise ValueError("an object lent already")
        self.by_number[number] = obj
        self._numbers[id(obj)] = number

    def let_go(self, numbers):
        """Drop the numbers that the other side's message listed (anything else in the list is ignored)."""
        for n in numbers if isinstance(numbers, list) else ():
            obj = self.by_number.pop(n, None) if type(n) is int else None
            if obj is not None and self._numbers.get(id(obj)) == n:
                del self._numbers[id(obj)]


REF_KINDS = ("handle", "callback")  # an object of the student's kernel, an object of the grader's
# Classes some of whose objects travel by value (or as a function) and some by reference, as their
# dtype, name or code decide. The objects of any other class that :meth:`Codec.encode` sends by
# reference once always travel by reference: its rules look at the exact class, or at these.
_BY_VALUE_OR_REFERENCE = (np.ndarray, np.generic, np.dtype, type, *_NUMPY_CALLABLES)


def _always_by_reference(cls):
    """True when the objects of ``cls``, one of which went by reference, always do. (No attribute of
    ``cls`` is read: a class that a test cell's code makes has no ``__module__``.)"""
    torch = _torch()
    return not issubclass(cls, _BY_VALUE_OR_REFERENCE + ((torch.Tensor, torch.dtype) if torch is not None else ()))


class Codec:
    """Encodes and decodes messages for one side. What cannot travel by value travels as a
    reference: ``make_ref(obj)`` gives its ``(kind, number)``, kind one of :data:`REF_KINDS`, or
    ``("handle", number, cls)`` with the number of the object's class, or ``("callback", number,
    True)`` for a grader's object that *makes* (calling it returns a new object of the grader's and
    changes nothing else, so the kernel need not wait for the answer: see
    :mod:`autograder.inside.recording`), and ``resolve_ref(kind, number, cls)`` turns one received
    back into an object (its own, or a proxy; ``cls`` that class number, or True, or None)."""

    def __init__(self, prefix, make_ref, resolve_ref, namespaces=False, ship=None, make_function=None):
        self.owners = Owners(prefix)
        # the grader's side: send SimpleNamespace records by value, and take from the kernel NumPy's
        # ufuncs only by name (np.save or np.seterrcall as a student's function would run here)
        self.namespaces = namespaces
        self.make_ref = make_ref
        self.resolve_ref = resolve_ref
        # The grader's side: ship(obj) gives (kind, source, values, numpy_names) for a test's function
        # that may run in the kernel, else None. The kernel's side: make_function(...) compiles one.
        # A side without make_function refuses a function: code never travels to the grader.
        self.ship = ship
        self.make_function = make_function
        self.kept = []  # the buffers received since release()
        self.views = weakref.WeakValueDictionary()  # the arrays decoded, by buffer and layout: `is` holds
        self.tensors = weakref.WeakValueDictionary()  # the same for torch tensors
        # torch storages by (address, bytes): the id of the buffer that is their memory. A buffer
        # made from a storage here is held while a tensor sent as its view lives: {id: [buffer, tensors]}
        self.storage_ids = {}
        self.storage_owners = {}
        self.by_reference = set()  # the classes seen whose objects always travel by reference

    # --- encoding ---------------------------------------------------------------------------
    def encode_message(self, payload):
        """The message for ``payload``, with every buffer that changed; the buffers received
        before it are let go (their changes are in it)."""
        self._sent = {}
        body = self.encode(payload)
        for key in self.owners.changed():
            self._send_owner(key)
        self.release()
        return {"body": body, "owners": self._sent}

    def _send_owner(self, key):
        if key in self._sent:
            return
        owner = self.owners.get(key)
        data = owner.tobytes()
        self.owners.by_id[key][1] = data
        self._sent[key] = {"dtype": _name(owner.dtype), "shape": list(owner.shape),
                           "data": base64.b64encode(data).decode("ascii")}

    def shares(self, a):
        """True when the array ``a`` is a buffer that the other side holds too, or a view of one: a
        change that either side makes to it reaches the other."""
        return self.owners.held(_bottom(a)) is not None

    def _owner(self, a):
        """The owner to send ``a`` as a view of, or None (sent as its own contiguous copy). An array
        whose memory is not an array's (``as_strided``'s result, a torch tensor's ``.numpy()``) is a
        view of the known owner that holds its memory, when there is one."""
        o = _bottom(a)
        if self.owners.held(o) is not None:
            return o
        if o.base is not None and a.size:
            low, high = _span(_address(a), a.shape, a.strides, a.itemsize)
            for ref, _ in list(self.owners.by_id.values()):
                known = ref()
                if known is not None and _address(known) <= low and high <= _address(known) + known.nbytes:
                    return known
        if not o.flags.c_contiguous or o.dtype.hasobject:
            return None
        return o

    def _array(self, a):
        owner = self._owner(a)
        copied = owner is None
        if copied:
            owner = np.ascontiguousarray(a)
            view = {"offset": 0, "shape": list(a.shape), "strides": list(owner.strides)}
        else:  # (an array that is its own owner starts at its start: no need to ask NumPy for two addresses)
            offset = 0 if owner is a else _address(a) - _address(owner)
            view = {"offset": offset, "shape": list(a.shape), "strides": list(a.strides)}
        if owner.nbytes > MAX_OWNER_BYTES:
            return None
        key = self.owners.id_for(owner)
        self._send_owner(key)  # every message carries the buffers it names: the other side may have let one go
        if not copied:  # sent back unchanged, it decodes to this very array
            self.views[(key, _name(a.dtype), view["offset"], tuple(a.shape), tuple(a.strides), bool(a.flags.writeable))] = a
        return {"array": key, "dtype": _name(a.dtype), "writeable": bool(a.flags.writeable), **view}

    def _storage_owner(self, torch, storage):
        """The buffer, a uint8 array sharing the storage's memory, and its id."""
        where = (storage.data_ptr(), storage.nbytes())
        key = self.storage_ids.get(where)
        owner = self.owners.get(key) if key is not None else None
        if owner is None or _address(owner) != where[0] or owner.nbytes != where[1]:
            owner = torch.empty(0, dtype=torch.uint8).set_(storage, 0, (where[1],), (1,)).numpy()
            key = self.owners.id_for(owner)
            self.storage_ids[where] = key
        return key, owner

    def _hold(self, key, owner, tensor):
        """Hold the buffer ``owner`` of a storage while ``tensor``, sent as a view of it, lives."""
        entry = self.storage_owners.setdefault(key, [owner, 0])
        entry[1] += 1
        weakref.finalize(tensor, self._let_go, key)

    def _let_go(self, key):
        entry = self.storage_owners.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del self.storage_owners[key]

    def _tensor(self, torch, t):
        name = _torch_dtype_name(t.dtype)
        if name not in TENSOR_DTYPES or t.device.type != "cpu" or t.layout != torch.strided or t.is_conj() or t.is_neg():
            return None
        view = {"dtype": name, "shape": list(t.shape), "strides": list(t.stride()), "offset": t.storage_offset(),
                "requires_grad": bool(t.requires_grad)}
        storage = t.untyped_storage()
        if storage.nbytes() > MAX_OWNER_BYTES:
            return None
        if storage.data_ptr() == 0:  # a storage without memory: a fresh one on the other side
            return {"tensor": None, **view}
        key, owner = self._storage_owner(torch, storage)
        self._hold(key, owner, t)
        self._send_owner(key)
        self.tensors[_tensor_key(key, view)] = t
        return {"tensor": key, **view}

    def encode(self, x):
        if type(x) in self.by_reference:  # (1.3's graphs: 10,000 nodes in one list)
            return self._reference(x)
        if x is None or isinstance(x, (bool, str)):
            return x
        if type(x) is int:
            return x if -SAFE_INT < x < SAFE_INT else {"int": str(x)}
        if type(x) is float:
            return {"float": repr(x)}
        if type(x) in (tuple, list):  # (an int inline: 1.3's graphs send 10,000 lists of node numbers)
            return {type(x).__name__: [v if type(v) is int and -SAFE_INT < v < SAFE_INT else self.encode(v) for v in x]}
        if type(x) is dict:
            return {"dict": [[self.encode(k), self.encode(v)] for k, v in x.items()]}
        if isinstance(x, np.ndarray) and _name(x.dtype) in DTYPES:
            enc = self._array(x)
            if enc is not None:
                return enc
        torch = _torch()
        if torch is not None and type(x) is torch.Tensor:
            enc = self._tensor(torch, x)
            if enc is not None:
                return enc
        if torch is not None and type(x) is torch.Size:
            return {"tuple": [self.encode(int(n)) for n in x]}
        if torch is not None and isinstance(x, torch.dtype) and _torch_dtype_name(x) in TENSOR_DTYPES:
            return {"torch_dtype": _torch_dtype_name(x)}
        if isinstance(x, np.generic) and _name(x.dtype) in DTYPES:
            return {"scalar": _name(x.dtype), "data": base64.b64encode(x.tobytes()).decode("ascii")}
        if type(x) is slice:
            return {"slice": [self.encode(x.start), self.encode(x.stop), self.encode(x.step)]}
        if type(x) is types.SimpleNamespace and self.namespaces:  # a test's record of names, such as its `nn`
            return {"namespace": [[k, self.encode(v)] for k, v in vars(x).items()]}
        if x is Ellipsis:
            return {"ellipsis": True}
        if isinstance(x, type) and issubclass(x, np.generic) and np.dtype(x).name in DTYPES:
            return {"numpy_type": np.dtype(x).name}
        if isinstance(x, np.dtype) and x.name in DTYPES:
            return {"numpy_dtype": x.name}
        if isinstance(x, _NUMPY_CALLABLES) and getattr(np, x.__name__, None) is x and (
                self.namespaces or isinstance(x, np.ufunc)):
            return {"numpy": x.__name__}  # np.tanh handed to the other side is that side's np.tanh
        shipped = self.ship(x) if self.ship is not None else None
        if shipped is not None:
            kind, source, values, numpy_names = shipped
            return {"function": [kind, source, [[k, self.encode(v)] for k, v in values.items()], list(numpy_names)]}
        if _always_by_reference(type(x)):
            self.by_reference.add(type(x))
        return self._reference(x)

    def _reference(self, x):
        kind, number, *extra = self.make_ref(x)
        if not extra:
            return {kind: number}
        return {kind: number, "class" if kind == "handle" else "makes": extra[0]}

    # --- decoding ---------------------------------------------------------------------------
    def decode_message(self, message):
        """The value a message carries. Whatever does not follow the format raises WireError: a
        field of the wrong type deep inside (a list where a number goes) too, which the checks
        below would otherwise meet as a TypeError of their own."""
        if not isinstance(message, dict) or not isinstance(message.get("owners"), dict):
            raise WireError("not a message")
        try:
            for key, enc in message["owners"].items():
                self._receive_owner(key, enc)
            return self.decode(message.get("body"))
        except WireError:
            raise
        except (TypeError, ValueError, KeyError, IndexError, OverflowError) as exc:
            raise WireError(f"a malformed message ({type(exc).__name__}: {exc})") from None

    def release(self):
        """Let go of the buffers received so far: a change made to one after this is not sent."""
        self.kept = []

    def _receive_owner(self, key, enc):
        if not isinstance(key, str) or not isinstance(enc, dict) or enc.get("dtype") not in DTYPES:
            raise WireError("bad array buffer")
        shape = enc.get("shape")
        if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
            raise WireError("bad array shape")
        data = base64.b64decode(enc.get("data", ""), validate=True)
        dtype = np.dtype(enc["dtype"])
        if len(data) != math.prod(shape) * dtype.itemsize:
            raise WireError("array buffer of the wrong size")
        known = self.owners.get(key)
        if known is not None and self.owners.by_id[key][1] == data:
            self.kept.append(known)
            return
        fresh = np.ndarray(shape, dtype, buffer=bytearray(data))  # its own buffer: the bottom of every view
        if known is not None and known.dtype == dtype and known.shape == fresh.shape:
            if not known.flags.writeable:
                known.flags.writeable = True  # an owner is ours: the view's flag says read-only
            known[...] = fresh
            self.owners.by_id[key][1] = data
            self.kept.append(known)
            return
        self.owners.add(key, fresh, data)
        self.kept.append(fresh)

    def decode(self, x):
        if x is None or isinstance(x, (bool, str)) or type(x) is int:
            return x
        if type(x) is dict and len(x) <= 2:  # a reference (the commonest value in a long list), which
            cls = x.get("class")  # may carry the number of its object's class
            for kind in REF_KINDS:
                number = x.get(kind)
                if type(number) is int and (len(x) == 1 or type(cls) is int):
                    return self.resolve_ref(kind, number, cls)
                if kind == "callback" and type(number) is int and x.get("makes") is True:
                    return self.resolve_ref(kind, number, True)
        if isinstance(x, list):
            raise WireError("a bare list")
        if not isinstance(x, dict) or len(x) < 1:
            raise WireError("bad value")
        if "array" in x:
            return self._decode_array(x)
        if "tensor" in x:
            return self._decode_tensor(x)
        if "scalar" in x and x["scalar"] in DTYPES:
            return np.frombuffer(base64.b64decode(x.get("data", ""), validate=True), dtype=x["scalar"])[0]
        if len(x) != 1:  # (the one value of two fields, a reference, was decoded above)
            raise WireError("bad value")
        (kind, v), = x.items()
        if kind == "int":
            return int(v)
        if kind == "float":
            return float(v)
        if kind in ("tuple", "list") and isinstance(v, list):
            items = [i if type(i) is int else self.decode(i) for i in v]
            return tuple(items) if kind == "tuple" else items
        if kind == "dict" and isinstance(v, list):
            return {self.decode(k): self.decode(val) for k, val in v}
        if kind == "slice" and isinstance(v, list) and len(v) == 3:
            return slice(*(self.decode(i) for i in v))
        if kind == "namespace" and isinstance(v, list) and all(
                isinstance(i, list) and len(i) == 2 and isinstance(i[0], str) for i in v):
            return types.SimpleNamespace(**{k: self.decode(val) for k, val in v})
        if kind == "ellipsis":
            return Ellipsis
        if kind == "numpy_type" and v in DTYPES:
            return np.dtype(v).type
        if kind == "numpy_dtype" and v in DTYPES:
            return np.dtype(v)
        if kind == "torch_dtype" and v in TENSOR_DTYPES and _torch(importing=True) is not None:
            return getattr(_torch(), v)
        if kind == "numpy" and isinstance(v, str) and callable(getattr(np, v, None)) and (
                not self.namespaces or isinstance(getattr(np, v), np.ufunc)):
            return getattr(np, v)
        if kind == "function" and self.make_function is not None and isinstance(v, list) and len(v) == 4:
            return self.make_function(v[0], v[1], {k: self.decode(val) for k, val in v[2]}, v[3])
        raise WireError(f"unknown value kind {kind!r}")

    def _decode_tensor(self, x):
        torch = _torch(importing=True)
        if torch is None:
            raise WireError("a torch tensor, where there is no torch")
        key, name = x.get("tensor"), x.get("dtype")
        shape, strides, offset = x.get("shape"), x.get("strides"), x.get("offset")
        if name not in TENSOR_DTYPES or not _layout_ok(shape, strides, offset) or offset < 0 or any(
                s < 0 for s in strides) or type(x.get("requires_grad")) is not bool:
            raise WireError("bad tensor")
        if math.prod(shape) > MAX_VIEW_ELEMENTS:
            raise WireError(f"a tensor of shape {tuple(shape)}: more elements than the checks compare")
        dtype = getattr(torch, name)
        cache = _tensor_key(key, x)
        t = self.tensors.get(cache) if key is not None else None
        if t is not None:
            return t
        if key is None:
            if 0 not in shape:
                raise WireError("a tensor view outside its storage")
            base = torch.empty(0, dtype=dtype)
        else:
            owner = self.owners.get(key)
            if owner is None or owner.dtype != np.uint8 or owner.ndim != 1:  # a storage's buffer, not an array's
                raise WireError("a tensor of an unknown storage")
            itemsize = torch.empty(0, dtype=dtype).element_size()
            if owner.nbytes % itemsize or not _extent_ok(offset * itemsize, shape, [s * itemsize for s in strides],
                                                         itemsize, owner.nbytes):
                raise WireError("a tensor view outside its storage")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (a read-only owner: the view's flag is the other side's)
                base = torch.from_numpy(owner).view(dtype)
            self.storage_ids[(base.untyped_storage().data_ptr(), owner.nbytes)] = key
        t = base.as_strided(shape, strides, offset if key is not None else 0)
        if x["requires_grad"]:
            if not t.is_floating_point():
                raise WireError("bad tensor")
            t.requires_grad_(True)
        if key is not None:
            self.tensors[cache] = t
        return t

    def _decode_array(self, x):
        owner = self.owners.get(x.get("array"))
        if owner is None or x.get("dtype") not in DTYPES:
            raise WireError("an array of an unknown buffer")
        shape, strides, offset = x.get("shape"), x.get("strides"), x.get("offset")
        if not _layout_ok(shape, strides, offset):
            raise WireError("bad array view")
        dtype = np.dtype(x["dtype"])
        if math.prod(shape) > MAX_VIEW_ELEMENTS:
            raise WireError(f"an array of shape {tuple(shape)}: more elements than the checks compare")
        if not _extent_ok(offset, shape, strides, dtype.itemsize, owner.nbytes):  # (np.ndarray checks it too)
            raise WireError("an array view outside its buffer")
        key = (x["array"], _name(dtype), offset, tuple(shape), tuple(strides), bool(x.get("writeable", True)))
        a = self.views.get(key)
        if a is not None:  # alive, so its buffer is still the one this key names
            return a  # the same array as before: the other side sent the same object again
        flat = owner.reshape(-1).view(np.uint8)
        a = np.ndarray(shape, dtype, buffer=flat, offset=offset if 0 not in shape else 0, strides=strides)
        a.flags.writeable = key[-1]
        self.views[key] = a
        return a


class Channel:
    """One test cell's channel, on a connected stream socket (see the module's text): whole messages
    of bytes, each sent as its length in 8 bytes and then the bytes."""

    LENGTH = struct.Struct("<Q")
    # What one read asks the socket for. The kernel writes the calls that make (1.8's tensors and ops,
    # some 5,000 a notebook) in batches of up to 64 messages: one read takes a batch, where reading
    # each message's length and then its bytes took two reads (with a poll before each) a message.
    CHUNK = 1 << 16

    def __init__(self, sock):
        self.sock = sock
        self.ahead = bytearray()  # bytes read past the last message returned
        self.chunk = memoryview(bytearray(self.CHUNK))  # what each read fills

    @classmethod
    def connect(cls, address):
        """The kernel's end: ``ipc://PATH`` (a Unix socket) or ``tcp://127.0.0.1:PORT``."""
        kind, _, where = str(address).partition("://")
        if kind == "ipc":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(where)
        else:
            host, _, port = where.rpartition(":")
            sock = socket.create_connection((host, int(port)))
        return cls(sock)

    def send(self, data, timeout=None):
        """Send one message; past ``timeout`` seconds (None: never) raise TimeoutError."""
        self.send_many([data], timeout)

    def send_many(self, messages, timeout=None):
        """Send messages, in order, in one write."""
        self.sock.settimeout(timeout)
        self.sock.sendall(b"".join(part for data in messages for part in (self.LENGTH.pack(len(data)), data)))

    def poll(self, milliseconds):
        """True when a message has begun to arrive (or the other end closed)."""
        return bool(self.ahead) or bool(select.select([self.sock], [], [], milliseconds / 1000)[0])

    def recv(self, limit=None, timeout=None):
        """The next message; EOFError when the other end closed, ValueError when its length passes
        ``limit`` (its bytes are not waited for), TimeoutError past ``timeout`` seconds. A message
        read ahead with an earlier one costs no system call."""
        (size,) = self.LENGTH.unpack(self._take(self.LENGTH.size, timeout))
        if limit is not None and size > limit:
            raise ValueError(f"a message of {size} bytes")
        return self._take(size, timeout)

    def _take(self, size, timeout):
        """The next ``size`` bytes: those read ahead, then the socket's, a chunk a read. What a chunk
        cannot hold is read into place, and nothing past it."""
        if len(self.ahead) < size:
            self.sock.settimeout(timeout)
        if size - len(self.ahead) > self.CHUNK:
            data = bytearray(size)
            got = len(self.ahead)
            data[:got] = self.ahead
            self.ahead.clear()
            view = memoryview(data)
            while got < size:
                got += self._check(self.sock.recv_into(view[got:]))
            return data
        while len(self.ahead) < size:
            self.ahead += self.chunk[:self._check(self.sock.recv_into(self.chunk))]
        data = self.ahead[:size]
        del self.ahead[:size]  # (a bytearray drops its first bytes without moving the rest)
        return data

    @staticmethod
    def _check(count):
        if not count:
            raise EOFError("the other end closed the channel")
        return count

    def close(self):
        self.sock.close()

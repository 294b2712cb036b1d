"""A reverse-mode tensor autodiff engine on NumPy (units 1.3, 1.4 and 1.7).

The design follows ``torch.autograd.Function`` (and tinygrad):

* an op is a ``Function`` subclass with two static methods. ``forward(ctx, *arrays, **options)``
  computes on NumPy arrays and keeps on ``ctx`` what backward needs: the values it saves (the
  arrays, and the shapes the spec's table lists) through ``ctx.save_for_backward``; options
  (``axis``, ``reduction``...) and other metadata as plain ``ctx`` attributes.
  ``backward(ctx, grad)`` takes the gradient of the loss with respect to the output and returns
  one gradient per positional forward argument, in order (``None`` for one that needs none);
* ``Function.apply(*tensors, **options)`` runs forward on the tensors' arrays and, when an input
  requires grad, links the output into the graph: ``out.fn`` is the Function, ``out.ctx`` its
  ``Context`` and ``out.inputs`` the input tensors (the names of the unit 1.3 notebook);
* ``backward(root)`` walks the graph in reverse topological order and adds (``+=``) each
  gradient into the inputs' gradients, so a node reached by several paths gets the sum.

Every binary op broadcasts its operands; its backward reduces the gradient to each operand's
shape with ``unbroadcast``. ``engine_ref/DERIVATIVES.md`` lists every op's saved values and
backward formula.
"""
import math
from contextlib import contextmanager

import numpy as np

from .broadcast import unbroadcast
from .functional import cross_entropy, softmax
from .versions import VersionCounter, get_save_mode

__all__ = [
    "Context", "Function", "Tensor", "topological_order", "backward", "no_grad", "is_grad_enabled",
    "Add", "Sub", "Mul", "Div", "Neg", "MatMul", "Sum", "Mean", "Exp", "Log", "Tanh", "ReLU",
    "Reshape", "Transpose", "Index", "CrossEntropy",
]

_grad_enabled = True


def is_grad_enabled():
    """False inside ``no_grad()``."""
    return _grad_enabled


@contextmanager
def no_grad():
    """Inside the block, ops build no graph, and in-place edits of tensors that require grad
    are allowed (this is how ``SGD.step`` and ``load_state_dict`` update parameters)."""
    global _grad_enabled
    previous, _grad_enabled = _grad_enabled, False
    try:
        yield
    finally:
        _grad_enabled = previous


class Context:
    """What one application of a ``Function`` keeps between forward and backward: the saved
    values, and the options and shapes that forward sets as attributes."""

    def __init__(self):
        self._saved = ()
        self._versions = ()

    def save_for_backward(self, *values):
        """Keep ``values`` (arrays or shapes) for backward, where ``saved_tensors`` returns them."""
        self._saved = values

    @property
    def saved_tensors(self):
        """The saved values. Raises ``RuntimeError`` if a saved array was edited in place since."""
        for tensor, version in self._versions:
            if tensor._version != version:
                raise RuntimeError(_modified_message(tensor, version))
        return self._saved

    def _guard(self, tensors):
        """Apply the save mode to the saved arrays that are (views of) the data of ``tensors``."""
        def owners(value):
            return [t for t in tensors if isinstance(value, np.ndarray) and np.may_share_memory(value, t.data)]

        if get_save_mode() == "copy":
            self._saved = tuple(v.copy() if owners(v) else v for v in self._saved)
        elif get_save_mode() == "check":
            self._versions = tuple({id(t): (t, t._version) for v in self._saved for t in owners(v)}.values())


def _modified_message(tensor, expected):
    origin = f", which is output 0 of {tensor.fn.__name__}," if tensor.fn else ""
    return (
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [Tensor {tensor.dtype} {list(tensor.shape)}]{origin} is at version "
        f"{tensor._version}; expected version {expected} instead. Hint: edit it only after "
        "backward, or apply the op under save_mode('copy') so that it saves a copy."
    )


class Function:
    """Base class of the ops. Subclasses define ``forward`` and ``backward``; use ``apply``."""

    # True for ops whose output may be a view of their first input; such an output shares that
    # input's version counter whenever NumPy returned a view rather than a copy.
    returns_view = False

    @staticmethod
    def forward(ctx, *arrays, **options):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **options):
        """Run the op on tensors (or arrays and numbers, which become constants)."""
        inputs = tuple(a if isinstance(a, Tensor) else Tensor(a) for a in args)
        ctx = Context()
        out = Tensor(cls.forward(ctx, *(t.data for t in inputs), **options))
        if cls.returns_view and np.may_share_memory(out.data, inputs[0].data):
            out._version_counter = inputs[0]._version_counter
        if _grad_enabled and any(t.requires_grad for t in inputs):
            out.requires_grad = True
            out.fn, out.ctx, out.inputs = cls, ctx, inputs
            ctx._guard(inputs + (out,))
        return out


class Tensor:
    """An ``np.ndarray`` (``data``) that records the ops applied to it.

    ``Tensor(array)`` wraps the array without copying it (like ``torch.from_numpy``). ``grad`` is
    ``None`` or an array of the tensor's shape and dtype; only leaves that require grad get one.
    """

    __array_ufunc__ = None  # NumPy defers to our reflected operators: array + Tensor is a Tensor

    def __init__(self, data, requires_grad=False, dtype=None):
        source = data.data if isinstance(data, Tensor) else data
        self.data = np.asarray(source, dtype=dtype)
        if requires_grad and not np.issubdtype(self.data.dtype, np.inexact):
            raise RuntimeError(f"only floating point tensors can require gradients, not {self.data.dtype}")
        self.requires_grad = requires_grad
        self.grad = None
        self.fn = None  # the Function that computed this tensor; None for a leaf
        self.ctx = None  # that Function's Context
        self.inputs = ()  # the tensors it was computed from
        share = isinstance(data, Tensor) and self.data is data.data  # an alias shares the counter
        self._version_counter = data._version_counter if share else VersionCounter()

    # ---- metadata
    shape = property(lambda self: self.data.shape)
    ndim = property(lambda self: self.data.ndim)
    dtype = property(lambda self: self.data.dtype)
    _version = property(lambda self: self._version_counter.value, doc="in-place edits seen so far")
    is_leaf = property(lambda self: self.fn is None)

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        body = np.array2string(self.data, separator=", ", prefix="Tensor(")
        extra = f", fn={self.fn.__name__}" if self.fn else ", requires_grad=True" if self.requires_grad else ""
        return f"Tensor({body}{extra})"

    def numpy(self):
        """The data itself (no copy), like ``torch.Tensor.numpy``; refuses if it requires grad."""
        if self.requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        return self.data

    def __array__(self, dtype=None, copy=None):
        return np.array(self.numpy(), dtype=dtype, copy=copy)

    def item(self):
        return self.data.item()

    def detach(self):
        """The same data, outside the graph; shares the version counter, as in torch."""
        return Tensor(self)

    def backward(self, grad=None):
        backward(self, grad)

    # ---- operators
    def _lift(self, other):
        """``other`` as a Tensor. A Python number takes this tensor's dtype when it fits, as in
        NumPy 2 and torch: ``float32 tensor * 2.0`` stays float32."""
        if isinstance(other, Tensor):
            return other
        if isinstance(other, (bool, int, float)):
            return Tensor(np.asarray(other, dtype=np.result_type(self.dtype, other)))
        return Tensor(other)

    __add__ = lambda self, other: Add.apply(self, self._lift(other))
    __radd__ = lambda self, other: Add.apply(self._lift(other), self)
    __sub__ = lambda self, other: Sub.apply(self, self._lift(other))
    __rsub__ = lambda self, other: Sub.apply(self._lift(other), self)
    __mul__ = lambda self, other: Mul.apply(self, self._lift(other))
    __rmul__ = lambda self, other: Mul.apply(self._lift(other), self)
    __truediv__ = lambda self, other: Div.apply(self, self._lift(other))
    __rtruediv__ = lambda self, other: Div.apply(self._lift(other), self)
    __matmul__ = lambda self, other: MatMul.apply(self, self._lift(other))
    __rmatmul__ = lambda self, other: MatMul.apply(self._lift(other), self)
    __neg__ = lambda self: Neg.apply(self)

    def sum(self, axis=None, keepdims=False):
        return Sum.apply(self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims=False):
        return Mean.apply(self, axis=axis, keepdims=keepdims)

    exp = lambda self: Exp.apply(self)
    log = lambda self: Log.apply(self)
    tanh = lambda self: Tanh.apply(self)
    relu = lambda self: ReLU.apply(self)

    def reshape(self, *shape):
        """``t.reshape(2, 3)`` or ``t.reshape((2, 3))``; one size may be -1."""
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return Reshape.apply(self, shape=shape)

    def transpose(self, dim0, dim1):
        return Transpose.apply(self, dim0=dim0, dim1=dim1)

    @property
    def T(self):
        """The transpose of a 2-D tensor (torch deprecates ``.T`` on other ranks)."""
        if self.ndim != 2:
            raise ValueError(f"T needs a 2-D tensor, this one has shape {self.shape}; use transpose(dim0, dim1)")
        return self.transpose(0, 1)

    def __getitem__(self, index):
        """Indexing as in NumPy; basic slicing gives a view sharing this tensor's version counter."""
        return Index.apply(self, index=_plain_index(index))

    # ---- in-place edits: each bumps the version counter shared with views
    def _check_in_place(self):
        if self.requires_grad and _grad_enabled:
            if self.fn is None:
                raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
            raise RuntimeError("this engine does not record in-place ops: edit a tensor that is part of a graph only under no_grad()")

    def add_(self, other, alpha=1):
        """``self += alpha * other`` in place (``alpha`` as in ``torch.Tensor.add_``)."""
        self._check_in_place()
        other = other.data if isinstance(other, Tensor) else other
        self.data += other if alpha == 1 else alpha * np.asarray(other)
        self._version_counter.bump()
        return self

    def mul_(self, other):
        self._check_in_place()
        self.data *= other.data if isinstance(other, Tensor) else other
        self._version_counter.bump()
        return self

    def zero_(self):
        self._check_in_place()
        self.data[...] = 0
        self._version_counter.bump()
        return self

    def __setitem__(self, index, value):
        self._check_in_place()
        self.data[_plain_index(index)] = value.data if isinstance(value, Tensor) else value
        self._version_counter.bump()



def _plain_index(index):
    """An index with its Tensors replaced by their arrays."""
    if isinstance(index, tuple):
        return tuple(i.data if isinstance(i, Tensor) else i for i in index)
    return index.data if isinstance(index, Tensor) else index


def topological_order(root):
    """Every tensor ``root`` was computed from (and ``root``), once each, after its inputs.

    Iterative depth-first search: a stack of ``(node, inputs_done)`` entries replaces the call
    stack, so a chain of 10,000 ops needs no deep recursion.
    """
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((t, False) for t in node.inputs if id(t) not in seen)
    return order


def backward(root, grad=None):
    """Add d(root)/d(leaf), weighted by ``grad``, into ``.grad`` of every leaf that requires grad.

    ``grad`` defaults to ones for a root with one element, as in torch; other roots need one.
    The graph is kept, so a second call accumulates again.
    """
    if not root.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if grad is None:
        if root.data.size != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        grad = np.ones_like(root.data)
    grad = np.asarray(grad.data if isinstance(grad, Tensor) else grad)
    if grad.shape != root.shape:
        raise RuntimeError(f"Mismatch in shape: grad has a shape of {grad.shape} and output has a shape of {root.shape}.")
    grads = {}
    _accumulate(grads, root, grad, None, 0)
    for node in reversed(topological_order(root)):
        grad = grads.pop(id(node), None)
        if grad is None:
            continue
        if node.fn is None:
            if node.grad is None:
                node.grad = np.zeros(node.shape, node.dtype)
            node.grad += grad
            continue
        input_grads = node.fn.backward(node.ctx, grad)
        input_grads = input_grads if isinstance(input_grads, tuple) else (input_grads,)
        if len(input_grads) != len(node.inputs):
            raise RuntimeError(f"function {node.fn.__name__}.backward returned an incorrect number of "
                               f"gradients (expected {len(node.inputs)}, got {len(input_grads)})")
        for index, (tensor, input_grad) in enumerate(zip(node.inputs, input_grads)):
            if tensor.requires_grad and input_grad is not None:
                _accumulate(grads, tensor, input_grad, node.fn, index)



def _accumulate(grads, tensor, grad, function, index):
    """``grads[tensor] += grad``, in the tensor's dtype, after checking the shape."""
    grad = np.asarray(grad)
    if grad.shape != tensor.shape:
        raise RuntimeError(f"Function {function.__name__}.backward returned an invalid gradient at index {index} - "
                           f"got {list(grad.shape)} but expected shape {list(tensor.shape)}")
    if id(tensor) not in grads:
        grads[id(tensor)] = np.zeros(tensor.shape, tensor.dtype)
    grads[id(tensor)] += grad


# ---------------------------------------------------------------- elementwise binary ops
class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.a_shape, ctx.b_shape = a.shape, b.shape  # shapes, not values: nothing is saved
        return a + b

    @staticmethod
    def backward(ctx, grad):
        # adjoint of broadcast is sum
        return unbroadcast(grad, ctx.a_shape), unbroadcast(grad, ctx.b_shape)


class Sub(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.a_shape, ctx.b_shape = a.shape, b.shape  # shapes, not values: nothing is saved
        return a - b

    @staticmethod
    def backward(ctx, grad):
        # adjoint of broadcast is sum
        return unbroadcast(grad, ctx.a_shape), unbroadcast(-grad, ctx.b_shape)


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        # adjoint of broadcast is sum
        return unbroadcast(grad * b, a.shape), unbroadcast(grad * a, b.shape)


class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a / b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        # adjoint of broadcast is sum
        return unbroadcast(grad / b, a.shape), unbroadcast(-grad * a / (b * b), b.shape)


class MatMul(Function):
    @staticmethod
    def forward(ctx, a, b):
        if a.ndim != 2 or b.ndim != 2:
            raise ValueError(f"MatMul multiplies 2-D arrays, got shapes {a.shape} and {b.shape}")
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad @ b.T, a.T @ grad


# ---------------------------------------------------------------- elementwise unary ops
class Neg(Function):
    @staticmethod
    def forward(ctx, a):
        return -a

    @staticmethod
    def backward(ctx, grad):
        return -grad


class Exp(Function):
    @staticmethod
    def forward(ctx, a):
        result = np.exp(a)
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad):
        (result,) = ctx.saved_tensors
        return grad * result


class Log(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.log(a)

    @staticmethod
    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        return grad / a


class Tanh(Function):
    @staticmethod
    def forward(ctx, a):
        result = np.tanh(a)
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad):
        (result,) = ctx.saved_tensors
        return grad * (1 - result * result)


class ReLU(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a > 0)  # a mask, not a: one byte per element, and no alias of a
        return np.maximum(a, 0)

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad * mask


# ---------------------------------------------------------------- reductions
def _unreduce(grad, shape, axis, keepdims):
    """Undo a reduction's shape change: put back the reduced axes, then copy along them."""
    if axis is not None and not keepdims:
        grad = np.expand_dims(grad, axis)
    return np.broadcast_to(grad, shape)


class Sum(Function):
    @staticmethod
    def forward(ctx, a, *, axis=None, keepdims=False):
        ctx.axis, ctx.keepdims = axis, keepdims
        ctx.save_for_backward(a.shape)
        return a.sum(axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad):
        (shape,) = ctx.saved_tensors
        return _unreduce(grad, shape, ctx.axis, ctx.keepdims)


class Mean(Function):
    @staticmethod
    def forward(ctx, a, *, axis=None, keepdims=False):
        ctx.axis, ctx.keepdims = axis, keepdims
        ctx.save_for_backward(a.shape)
        return a.mean(axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad):
        (shape,) = ctx.saved_tensors
        axes = range(len(shape)) if ctx.axis is None else np.atleast_1d(ctx.axis)
        count = math.prod(shape[axis] for axis in axes)
        return _unreduce(grad, shape, ctx.axis, ctx.keepdims) / count


# ---------------------------------------------------------------- shape ops (views when NumPy can)
class Reshape(Function):
    returns_view = True

    @staticmethod
    def forward(ctx, a, *, shape):
        ctx.save_for_backward(a.shape)
        return a.reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        (shape,) = ctx.saved_tensors
        return grad.reshape(shape)


class Transpose(Function):
    returns_view = True

    @staticmethod
    def forward(ctx, a, *, dim0, dim1):
        ctx.dim0, ctx.dim1 = dim0, dim1
        return np.swapaxes(a, dim0, dim1)

    @staticmethod
    def backward(ctx, grad):
        return np.swapaxes(grad, ctx.dim0, ctx.dim1)


class Index(Function):
    returns_view = True

    @staticmethod
    def forward(ctx, a, *, index):
        ctx.index = index
        ctx.save_for_backward(a.shape)
        return a[index]

    @staticmethod
    def backward(ctx, grad):
        (shape,) = ctx.saved_tensors
        out = np.zeros(shape, grad.dtype)
        np.add.at(out, ctx.index, grad)  # an element picked twice (advanced indexing) gets both
        return out


# ---------------------------------------------------------------- fused loss
class CrossEntropy(Function):
    """``F.cross_entropy(logits, target, reduction=..., ignore_index=...)`` for logits (N, C).

    The forward is unit 1.2's stable ``cross_entropy``; fusing it into one op lets backward use
    the short formula softmax minus one-hot instead of differentiating log, exp and sum.
    """

    @staticmethod
    def forward(ctx, logits, target, *, reduction="mean", ignore_index=-100):
        if logits.ndim != 2:
            raise ValueError(f"CrossEntropy takes logits of shape (N, C), got {logits.shape}")
        ctx.reduction, ctx.ignore_index = reduction, ignore_index
        ctx.save_for_backward(softmax(logits, axis=1), target)  # the probabilities, not the logits
        return cross_entropy(logits, target, reduction=reduction, ignore_index=ignore_index)

    @staticmethod
    def backward(ctx, grad):
        probs, target = ctx.saved_tensors
        kept = target != ctx.ignore_index
        out = probs.copy()
        out[np.arange(len(target)), np.where(kept, target, 0)] -= 1  # softmax minus one-hot
        out *= kept[:, None]  # ignored targets get zero rows
        if ctx.reduction == "none":
            return out * grad[:, None], None
        count = int(kept.sum()) if ctx.reduction == "mean" else 1
        return out * (grad / max(count, 1)), None  # every target ignored: zero rows, as in torch


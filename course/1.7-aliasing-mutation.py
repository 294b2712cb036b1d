# %% [markdown]
# # 1.7 Aliasing, mutation and module ownership
#
# Our engine keeps NumPy arrays from the forward pass until backward uses them. Everything works
# as long as nobody touches those arrays in between. But training code edits arrays in place all
# the time: an optimizer updates the weights with `p -= lr * grad`, a data loader refills a batch
# buffer, a layer keeps running statistics. If one of those arrays is an array that a backward
# rule saved, backward computes with the new values and returns a gradient that is simply wrong,
# with no error and no warning. PyTorch's answer is a **version counter** on every tensor: each
# in-place edit bumps it, every saved tensor remembers the version it had, and backward refuses to
# run on a tensor that moved on. In this unit we build that guard, and its alternative, saving a
# copy. Then we turn to the other side of ownership: a **module** owns its parameters and buffers,
# finds them recursively, saves and loads them by name exactly as `torch.nn.Module` does, and an
# **optimizer** updates them in place. At the end we load a PyTorch model's weights into our own
# MLP and train it with our own SGD.
#
# ## Learning goals
#
# After this unit we can:
#
# - predict whether a NumPy indexing or reshape expression returns a view or a copy, and say
#   which edits reach which arrays;
# - explain why an in-place edit between forward and backward gives a wrong gradient, and
#   reproduce the defect on an engine with no guard;
# - implement version counters as torch does: in-place ops bump them, views share their base's
#   counter, saving records versions and backward raises torch's `RuntimeError`;
# - implement the alternative guard, copy-on-save, and weigh its memory cost against the check;
# - write a `Module` that registers parameters, sub-modules and buffers, lists tied weights
#   once, and saves and loads its state with torch's keys, checks and error messages;
# - write `Linear`, `MLP` and `SGD` with momentum and weight decay that match PyTorch step by
#   step, and load a PyTorch model's weights into them.
#
# ## Readings
#
# - **PyTorch documentation**, *Autograd mechanics*: the sections *Saved tensors* and *In-place
#   operations with autograd* (correctness checks with version counters);
#   <https://pytorch.org/docs/stable/notes/autograd.html>. *Tensor Views*, for which torch
#   operations return views; <https://pytorch.org/docs/stable/tensor_view.html>.
# - **NumPy user guide**, *Copies and views*: basic indexing returns views, advanced indexing
#   returns copies, and `reshape` returns a view when it can;
#   <https://numpy.org/doc/stable/user/basics.copies.html>.
# - **PyTorch documentation**, `torch.nn.Module` (`register_buffer`, `named_parameters`,
#   `state_dict`, `load_state_dict`, `train`, `eval`, `zero_grad`), the tutorial *Saving and
#   loading models*, and `torch.optim.SGD` (the algorithm box: weight decay, then momentum).
# - **Dive into Deep Learning**, chapter 6 *Builders' Guide*: 6.1 *Layers and Modules*, 6.2
#   *Parameter Management* (tied parameters) and 6.6 *File I/O*; 3.7 *Weight Decay*; 12.6
#   *Momentum*. <https://d2l.ai>
# - **Understanding Deep Learning** (Prince), chapter 6 *Fitting models*: 6.3 (momentum), and
#   chapter 9 *Regularization*: 9.1 (L2 regularization, which SGD applies as weight decay).
#
# ## How this notebook works
#
# Each exercise has a heading with its task ID, the math or the rules it follows, a worked
# example, a cell for our code and a test cell. The test cells run visible checks first; the
# grader adds hidden checks of the same kinds with other seeds and shapes, which compare our
# results with PyTorch and, for gradients, with central finite differences. The rules:
#
# - **NumPy only.** A solution that calls torch earns no points for that exercise.
# - **float64 throughout**, as the gradient checks need, and **no warnings**: nbgrader gives no
#   points to a test cell that writes to stderr.
# - **Given code is locked.** The engine (part 2) comes from units 1.3 and 1.4; we add to it.
#
# | part | task | points |
# |---|---|---|
# | 1 | `view_or_copy` (concept check) | 5 |
# | 2 | `inplace_ops` | 10 |
# | 2 | `stale_gradient` | 6 |
# | 3 | `checked_context` | 12 |
# | 3 | `copy_context` | 7 |
# | 3 | `explain_guards` (written, graded by hand) | 10 |
# | 4 | `module` | 12 |
# | 4 | `tied_counts` (concept check) | 3 |
# | 5 | `state_dict` | 7 |
# | 5 | `load_state_dict` | 10 |
# | 6 | `linear_mlp` | 8 |
# | 7 | `sgd` | 10 |
# | | **total** | **100** |

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import types
from collections import namedtuple
from contextlib import contextmanager

import numpy as np

from autograder.inside import checks

# %% [markdown]
# ## 1. Views, copies and aliases
#
# A NumPy array is a header (shape, strides, dtype, offset) over a block of memory. Two arrays
# **alias** when their headers point into the same memory: an edit through one is seen through
# the other. An operation that returns a new header over the same memory returns a **view**; one
# that allocates new memory and fills it returns a **copy**. The rules (NumPy, *Copies and views*):
#
# - **Basic indexing** (integers, slices `start:stop:step`, `...`, `None`) returns a view: every
#   selected element sits at a fixed stride from the previous one, so a new header can describe
#   the selection.
# - **Advanced indexing** (an integer array or list, a boolean mask) returns a copy: the selected
#   elements follow no stride pattern, so they are gathered into new memory.
# - **`reshape`** returns a view when the new shape can be described by strides over the old
#   memory, and a copy otherwise: reshaping a C-contiguous array always gives a view; flattening
#   a transpose cannot (the elements are not in memory order) and gives a copy. `ravel` follows
#   the same rule; `flatten` always copies.
#
# `np.shares_memory(a, b)` tells whether two arrays overlap in memory.
#
# **Worked example.** With `a = np.arange(6.0).reshape(2, 3)`:
#
# | expression | result | view? | why |
# |---|---|---|---|
# | `a[:, 1]` | `[1., 4.]` | view | a slice and an integer: basic indexing, stride 3 elements |
# | `a[:, [1]]` | `[[1.], [4.]]` | copy | a list is advanced indexing |
# | `a.T.reshape(6)` | `[0., 3., 1., 4., 2., 5.]` | copy | this order is not the memory order |
#
# After `v = a[:, 1]; v *= 10` the array `a` is `[[0, 10, 2], [3, 40, 5]]`: the edit went
# through the view into `a`'s memory. After `c = a[:, [1]]; c *= 10`, `a` is unchanged.
#
# ### Concept check `view_or_copy`
#
# For each expression below, with `a = np.arange(24.0).reshape(4, 6)`, predict whether the result
# is a view of `a` (shares its memory) or a copy. Set `view_or_copy[expression]` to `True` for a
# view and `False` for a copy. The test evaluates each expression and compares with
# `np.shares_memory`; it tells us how many answers are wrong, not which.

# %% nbgrader={"grade": false, "grade_id": "view_or_copy_cases", "locked": true, "schema_version": 3, "solution": false, "task": false}
VIEW_OR_COPY_EXPRESSIONS = [
    "a[1:3]", "a[:, ::2]", "a[[0, 2]]", "a[a > 5]", "a.T", "a.reshape(6, 4)", "a.T.reshape(24)",
    "a[:, 1:].reshape(-1)", "a[1]", "a[1:2, [0, 3]]", "a.ravel()", "a.flatten()",
    "a[::2].reshape(2, 2, 3)", "a[..., None]",
]

# %% nbgrader={"grade": false, "grade_id": "view_or_copy", "locked": false, "schema_version": 3, "solution": true, "task": false}
view_or_copy = None  # a dict: expression -> True (a view of a) or False (a copy)
### BEGIN SOLUTION
view_or_copy = {
    "a[1:3]": True, "a[:, ::2]": True, "a[[0, 2]]": False, "a[a > 5]": False, "a.T": True,
    "a.reshape(6, 4)": True, "a.T.reshape(24)": False, "a[:, 1:].reshape(-1)": False, "a[1]": True,
    "a[1:2, [0, 3]]": False, "a.ravel()": True, "a.flatten()": False, "a[::2].reshape(2, 2, 3)": True,
    "a[..., None]": True,
}
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_view_or_copy", "locked": true, "points": 5, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# The expressions as the locked cell wrote them (graded, read outside our kernel: only these are evaluated).
EXPRESSIONS = checks.locked_cell("view_or_copy_cases").VIEW_OR_COPY_EXPRESSIONS
assert isinstance(view_or_copy, dict), "[view_or_copy] set view_or_copy to a dict {expression: True or False}"
assert set(view_or_copy) == set(EXPRESSIONS), "[view_or_copy] answer every expression of VIEW_OR_COPY_EXPRESSIONS"
a = np.arange(24.0).reshape(4, 6)
wrong = sum(bool(view_or_copy[e]) != np.shares_memory(eval(e), a) for e in EXPRESSIONS)
# atol 0: a count of wrong answers, an integer
checks.check_value("view_or_copy", "view_or_copy (the number of wrong answers)", wrong, 0, atol=0,
                   hint="basic indexing gives views, advanced indexing copies; reshape copies when the elements "
                        "are not in memory order.")
### BEGIN HIDDEN TESTS
assert all(isinstance(v, (bool, np.bool_)) for v in view_or_copy.values()), "[view_or_copy] answer with True or False"
### END HIDDEN TESTS

# %% [markdown]
# ## 2. In-place edits and version counters
#
# Reverse mode keeps values from the forward pass for backward (unit 1.3). For the elementwise
# product $y = w \odot x$ the backward rule is
#
# $$\bar w = \bar y \odot x, \qquad \bar x = \bar y \odot w ,$$
#
# so `Mul` saves both operands. Our engine saves the arrays themselves, not copies: a copy of
# every saved input would double the memory of training. Saving by reference is only safe if
# nobody edits a saved array before backward reads it. If someone does, backward computes
# $\bar y \odot x_{\text{new}}$, the gradient at a point we never evaluated.
#
# PyTorch detects this with a **version counter**. Every tensor has one (`t._version`, starting
# at 0), and every in-place operation (`add_`, `mul_`, `zero_`, `t[i] = v`, ...) bumps it by one.
# A view shares the counter of its base, because an edit through either changes both: after
# `v = x[1:]; v.mul_(2)`, both `v._version` and `x._version` are 1. An out-of-place operation
# (`x + 1`) makes a new tensor with a counter of its own, at 0; so does advanced indexing, which
# copies.
#
# The engine below is the one of units 1.3 and 1.4 (broadcasting binary ops, `unbroadcast` in
# their backward), with three additions for this unit:
#
# - `VersionCounter`, a counter object with `value` and `bump()`. A tensor keeps one in
#   `_version_counter`; a view keeps its base's.
# - `Function.apply` makes the context with the op's input tensors, `ctx.tensors`, and builds it
#   from the class that the **save mode** names: `Context` (mode `"unchecked"`, no guard, the
#   default), `CheckedContext` (mode `"check"`) or `CopyContext` (mode `"copy"`), which we write in
#   part 3. `with save_mode("check"): ...` sets the mode for the ops applied inside the block.
# - When an op returns a view of its first input (slicing, `.T`, `reshape`), `apply` builds the
#   output as `Tensor(array, base=that_input)`. The ops look `Tensor` up by name when they run,
#   so they build the `Tensor` class that we write next, on top of `TensorBase`.
#
# As in torch, an in-place edit of a tensor that autograd tracks (one that requires grad) is
# refused outside `no_grad()`; `TensorBase._check_inplace()` raises torch's error. Inside
# `no_grad()` it is allowed: this is how an optimizer updates the weights. Note also that
# `Tensor(array)` wraps `array` without copying it, like `torch.from_numpy`: an edit made with
# NumPy on `array` changes the tensor, and no counter sees it.

# %% nbgrader={"grade": false, "grade_id": "engine", "locked": true, "schema_version": 3, "solution": false, "task": false}
class VersionCounter:
    """How many in-place edits a block of memory has seen; a base and its views share one."""

    def __init__(self):
        self.value = 0

    def bump(self):
        self.value += 1


SAVE_MODE = "unchecked"  # "unchecked" (Context), "check" (CheckedContext) or "copy" (CopyContext)
CONTEXTS = {"unchecked": "Context", "check": "CheckedContext", "copy": "CopyContext"}
GRAD_ENABLED = True


@contextmanager
def save_mode(mode):
    """Use save mode ``mode`` for the ops applied inside the ``with`` block."""
    global SAVE_MODE
    if mode not in CONTEXTS:
        raise ValueError(f"save mode must be one of {list(CONTEXTS)}, not {mode!r}")
    previous, SAVE_MODE = SAVE_MODE, mode
    try:
        yield
    finally:
        SAVE_MODE = previous


@contextmanager
def no_grad():
    """Inside the block ops build no graph, and tensors that require grad may be edited in place."""
    global GRAD_ENABLED
    previous, GRAD_ENABLED = GRAD_ENABLED, False
    try:
        yield
    finally:
        GRAD_ENABLED = previous


def unbroadcast(grad, shape):
    """Sum ``grad`` over the axes that broadcasting ``shape`` stretched, giving exactly ``shape``."""
    while grad.ndim > len(shape):  # axes that broadcasting prepended
        grad = grad.sum(axis=0)
    for axis, size in enumerate(shape):  # axes of size 1 that broadcasting stretched
        if size == 1 and grad.shape[axis] != 1:
            grad = grad.sum(axis=axis, keepdims=True)
    return np.reshape(grad, shape)


class Context:
    """Mode "unchecked": what forward saves is handed to backward as it is by then."""

    def __init__(self, tensors):
        self.tensors = tensors  # the op's input tensors, in order
        self._saved = ()

    def save_for_backward(self, *values):
        """Keep arrays (or shapes) for backward, which reads them from ``ctx.saved_tensors``."""
        self._saved = values

    @property
    def saved_tensors(self):
        return self._saved


class Function:
    """Base class of the ops: ``forward(ctx, *arrays, **options)`` and ``backward(ctx, grad)``."""

    returns_view = False  # True for ops whose result may be a view of their first input

    @classmethod
    def apply(cls, *inputs, **options):
        inputs = tuple(t if isinstance(t, TensorBase) else Tensor(t) for t in inputs)
        ctx = globals()[CONTEXTS[SAVE_MODE]](inputs)
        data = cls.forward(ctx, *(t.data for t in inputs), **options)
        is_view = cls.returns_view and np.may_share_memory(data, inputs[0].data)
        out = Tensor(data, base=inputs[0] if is_view else None)
        if GRAD_ENABLED and any(t.requires_grad for t in inputs):
            out.requires_grad, out.fn, out.ctx, out.inputs = True, cls, ctx, inputs
        return out


class TensorBase:
    """A NumPy array (``data``) that remembers how it was computed (units 1.3 and 1.4)."""

    __array_ufunc__ = None  # so that `array * tensor` calls Tensor.__rmul__

    def __init__(self, data, requires_grad=False):
        data = np.asarray(data)  # no copy: the tensor wraps the caller's array
        self.data = data if np.issubdtype(data.dtype, np.floating) else data.astype(np.float64)
        self.requires_grad = bool(requires_grad)
        self.grad = None
        self.fn, self.ctx, self.inputs = None, None, ()

    @property
    def shape(self):
        return self.data.shape

    @property
    def ndim(self):
        return self.data.ndim

    @property
    def is_leaf(self):
        return self.fn is None

    def __repr__(self):
        origin = f"fn={self.fn.__name__}" if self.fn else f"requires_grad={self.requires_grad}"
        return f"{type(self).__name__}({np.array2string(self.data, precision=4)}, {origin})"

    def backward(self, grad=None):
        backward(self, grad)

    def _check_inplace(self):
        """Raise as torch does before an in-place edit of a tensor that autograd tracks."""
        if self.requires_grad and GRAD_ENABLED:
            kind = "leaf Variable" if self.is_leaf else "tensor of a graph (this engine records no in-place ops)"
            raise RuntimeError(f"a {kind} that requires grad is being used in an in-place operation.")

    # Each operator looks its Function up by name when it runs.
    def __add__(self, other):
        return Add.apply(self, other)

    def __radd__(self, other):
        return Add.apply(other, self)

    def __sub__(self, other):
        return Sub.apply(self, other)

    def __rsub__(self, other):
        return Sub.apply(other, self)

    def __mul__(self, other):
        return Mul.apply(self, other)

    def __rmul__(self, other):
        return Mul.apply(other, self)

    def __matmul__(self, other):
        return MatMul.apply(self, other)

    def __rmatmul__(self, other):
        return MatMul.apply(other, self)

    def __neg__(self):
        return Neg.apply(self)

    def sum(self, axis=None, keepdims=False):
        return Sum.apply(self, keepdims=keepdims, axis=axis)

    def mean(self, axis=None, keepdims=False):
        return Mean.apply(self, keepdims=keepdims, axis=axis)

    def relu(self):
        return ReLU.apply(self)

    def reshape(self, *shape):
        return Reshape.apply(self, shape=shape[0] if len(shape) == 1 else shape)

    def transpose(self, dim0, dim1):
        return Transpose.apply(self, dims=(dim0, dim1))

    @property
    def T(self):
        return self.transpose(0, 1)

    def __getitem__(self, index):
        """NumPy indexing: basic indexing gives a view, advanced indexing a copy."""
        if isinstance(index, TensorBase):
            index = index.data
        return Index.apply(self, index=index)


def backward(root, grad=None):
    """Add d(root)/d(leaf), weighted by ``grad``, into ``.grad`` of every leaf that requires grad."""
    if grad is None:
        if root.data.size != 1:
            raise RuntimeError(
                "grad can be implicitly created only for scalar outputs")
        grad = np.ones(root.shape, dtype=root.data.dtype)
    # Kahn's algorithm: a node passes its gradient on once every consumer has passed it one.
    consumers, todo = {}, [root]
    while todo:
        node = todo.pop()
        for parent in node.inputs:
            if id(parent) not in consumers:
                consumers[id(parent)] = 0
                todo.append(parent)
            consumers[id(parent)] += 1
    received, ready = {id(root): np.asarray(grad, dtype=root.data.dtype)}, [root]
    while ready:
        node = ready.pop()
        g = received.pop(id(node))
        if node.is_leaf:
            if node.requires_grad:
                node.grad = g.copy() if node.grad is None else node.grad + g
            continue
        parent_grads = node.fn.backward(node.ctx, g)
        if not isinstance(parent_grads, tuple):
            parent_grads = (parent_grads,)
        for parent, parent_grad in zip(node.inputs, parent_grads):
            if parent.requires_grad and parent_grad is not None:
                received[id(parent)] = received.get(id(parent), 0) + parent_grad
            consumers[id(parent)] -= 1
            if consumers[id(parent)] == 0 and id(parent) in received:
                ready.append(parent)


class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = a.shape, b.shape  # shapes only: Add saves no array
        return a + b

    @staticmethod
    def backward(ctx, grad):
        # adjoint of broadcast is sum
        return unbroadcast(grad, ctx.shapes[0]), unbroadcast(grad, ctx.shapes[1])


class Sub(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = a.shape, b.shape
        return a - b

    @staticmethod
    def backward(ctx, grad):
        # adjoint of broadcast is sum
        return unbroadcast(grad, ctx.shapes[0]), unbroadcast(-grad, ctx.shapes[1])


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        # adjoint of broadcast is sum
        return unbroadcast(grad * y, x.shape), unbroadcast(grad * x, y.shape)


class Neg(Function):
    @staticmethod
    def forward(ctx, a):
        return -a

    @staticmethod
    def backward(ctx, grad):
        return -grad


class MatMul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad @ b.T, a.T @ grad


class Sum(Function):
    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        ctx.options = axis, keepdims
        ctx.save_for_backward(tuple(a.shape))  # a tuple: no array of `a` is kept
        return np.asarray(a.sum(axis=axis, keepdims=keepdims))

    @staticmethod
    def backward(ctx, grad):
        (shape,) = ctx.saved_tensors
        axis, keepdims = ctx.options
        if not keepdims and axis is not None:  # put the reduced axis back
            grad = np.expand_dims(grad, axis=axis)
        return np.broadcast_to(grad, shape).copy()


class Mean(Function):
    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        ctx.options = axis, keepdims
        ctx.save_for_backward(tuple(a.shape))
        return np.asarray(a.mean(axis=axis, keepdims=keepdims))

    @staticmethod
    def backward(ctx, grad):
        (shape,) = ctx.saved_tensors
        axis, keepdims = ctx.options
        count = np.prod(shape) if axis is None else np.prod([shape[i] for i in np.atleast_1d(axis)])
        if not keepdims and axis is not None:  # put the reduced axis back
            grad = np.expand_dims(grad, axis=axis)
        return np.broadcast_to(grad, shape) / count


class ReLU(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a > 0)  # a mask: no alias of a
        return np.maximum(a, 0)

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad * mask


class Transpose(Function):
    returns_view = True

    @staticmethod
    def forward(ctx, a, dims):
        ctx.dims = dims
        return a.swapaxes(*dims)

    @staticmethod
    def backward(ctx, grad):
        return grad.swapaxes(*ctx.dims)


class Reshape(Function):
    returns_view = True

    @staticmethod
    def forward(ctx, a, shape):
        ctx.save_for_backward(tuple(a.shape))
        return a.reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        (shape,) = ctx.saved_tensors
        return grad.reshape(shape)


class Index(Function):
    returns_view = True

    @staticmethod
    def forward(ctx, a, index):
        ctx.index = index
        ctx.save_for_backward(tuple(a.shape))
        return np.asarray(a[index])

    @staticmethod
    def backward(ctx, grad):
        (shape,) = ctx.saved_tensors
        full = np.zeros(shape, dtype=grad.dtype)
        np.add.at(full, ctx.index, grad)  # an element picked twice gets both gradients
        return full


# %% [markdown]
# ### Exercise `inplace_ops`
#
# We write `Tensor`, a `TensorBase` with a version counter and torch's four in-place operations.
# Its rules, all of them torch's:
#
# - `Tensor(data, requires_grad=False, base=None)` starts a new `VersionCounter`, unless `base` is
#   given: then it is a view of `base` and **shares** `base._version_counter` (the same object,
#   not a copy of its value). `t._version` reads the counter's value.
# - `add_(other)`, `mul_(other)`, `zero_()` and `t[index] = value` edit `t.data` **in place**
#   (so that views and the base see the edit), accept a number or a `Tensor` as the other
#   operand, bump the counter **once** per call, and (except `__setitem__`) return `t`
#   itself, so that calls chain: `t.mul_(2).add_(1)`.
# - Each starts with `self._check_inplace()`: an edit that torch refuses changes nothing, not
#   even the version.
#
# **Worked example.** `x = Tensor(np.array([1.0, 2.0, 3.0]))`, then `v = x[1:]` (a view: it
# shares `x`'s counter) and `c = x[[0, 1]]` (advanced indexing: a copy with its own counter).
#
# | step | `x.data` | `x._version` | `v._version` | `c._version` |
# |---|---|---|---|---|
# | start | `[1, 2, 3]` | 0 | 0 | 0 |
# | `x.add_(1)` | `[2, 3, 4]` | 1 | 1 | 0 |
# | `v.mul_(10)` | `[2, 30, 40]` | 2 | 2 | 0 |
# | `v[0] = 0.5` | `[2, 0.5, 40]` | 3 | 3 | 0 |
# | `c.zero_()` | `[2, 0.5, 40]` | 3 | 3 | 1 |

# %% nbgrader={"grade": false, "grade_id": "inplace_ops", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Tensor(TensorBase):
    """A TensorBase with torch's version counter and in-place ops."""

    def __init__(self, data, requires_grad=False, base=None):
        """A tensor on ``data``; ``base`` is the tensor it is a view of (it shares base's counter), or None."""
        super().__init__(data, requires_grad)
        ### BEGIN SOLUTION
        self._version_counter = VersionCounter() if base is None else base._version_counter
        ### END SOLUTION

    @property
    def _version(self):
        """How many in-place edits this tensor's memory has seen."""
        ### BEGIN SOLUTION
        return self._version_counter.value
        ### END SOLUTION

    def add_(self, other):
        """``self += other`` in place; bumps the version once; returns self."""
        ### BEGIN SOLUTION
        self._check_inplace()
        self.data += other.data if isinstance(other, TensorBase) else other
        self._version_counter.bump()
        return self
        ### END SOLUTION

    def mul_(self, other):
        """``self *= other`` in place; bumps the version once; returns self."""
        ### BEGIN SOLUTION
        self._check_inplace()
        self.data *= other.data if isinstance(other, TensorBase) else other
        self._version_counter.bump()
        return self
        ### END SOLUTION

    def zero_(self):
        """Set every element to 0 in place; bumps the version once; returns self."""
        ### BEGIN SOLUTION
        self._check_inplace()
        self.data[...] = 0
        self._version_counter.bump()
        return self
        ### END SOLUTION

    def __setitem__(self, index, value):
        """``self[index] = value`` in place (NumPy indexing); bumps the version once."""
        ### BEGIN SOLUTION
        self._check_inplace()
        self.data[index] = value.data if isinstance(value, TensorBase) else value
        self._version_counter.bump()
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_inplace_ops", "locked": true, "points": 10, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# One scenario, run on our Tensor and on torch's: the versions after every edit, whether each
# in-place op returned the tensor itself, the refused edit of a leaf that requires grad, and the
# values that every view and the base hold at the end.
OUR_TENSORS = types.SimpleNamespace(tensor=Tensor, no_grad=no_grad, numpy=lambda t: t.data)


def version_trace(lib, data):
    x = lib.tensor(data.copy())
    seen = lib.numpy(x)  # x's memory, read through NumPy
    v, r, t, c = x[1:], x.reshape(-1), x.transpose(0, -1), x[[0, 1]]  # views, and a copy
    trace, after = [("start", x._version, v._version, c._version)], []
    for label, target, edit in [("x.add_(1.5)", x, lambda: x.add_(1.5)),
                                ("v.mul_(tensor)", v, lambda: v.mul_(lib.tensor(np.full(data.shape[1:], -2.0)))),
                                ("r.zero_()", r, lambda: r.zero_()),
                                ("t.add_(tensor)", t, lambda: t.add_(lib.tensor(np.full(t.shape, 0.25)))),
                                ("x.mul_(3.0)", x, lambda: x.mul_(3.0)),
                                ("c.add_(1.0)", c, lambda: c.add_(1.0))]:
        returned_self = edit() is target
        trace.append((label, returned_self, x._version, v._version, r._version, t._version, c._version))
        after.append((f"x after {label}", lib.numpy(x).copy()))  # what each op did, not only its version
    x[0] = lib.tensor(np.full(data.shape[1:], 7.0))
    v[...] = 0.5
    trace.append(("setitem", x._version, v._version, t._version, c._version))
    s = lib.tensor(np.array(2.0))
    s.mul_(3.0).add_(1.0)[...] = 4.0
    trace.append(("0-d", s._version, float(lib.numpy(s))))
    w = lib.tensor(data.copy(), requires_grad=True)
    for label, edit in [("leaf add_", lambda: w.add_(1.0)), ("leaf mul_", lambda: w.mul_(2.0)),
                        ("leaf zero_", lambda: w.zero_()), ("leaf setitem", lambda: w.__setitem__(0, 1.0))]:
        try:
            edit()
            trace.append((label, "no error", w._version))
        except RuntimeError as exc:  # torch words the setitem error differently; its type and version count
            trace.append((label, "RuntimeError" if label == "leaf setitem" else str(exc), w._version))
    with lib.no_grad():
        w.mul_(2.0)
    trace.append(("no_grad mul_", w._version))
    values = after + [(f"{name} at the end", lib.numpy(a).copy()) for name, a in zip("xvrtcw", (x, v, r, t, c, w))]
    return trace, values + [("x's original array at the end", seen.copy())]


def versions_hint(got, expected):
    """The versions of x and its views v, r, t must always agree; the copy c counts on its own."""
    for g, e in zip(got, expected):
        if len(g) == 7 and len(set(g[2:6])) > 1:
            return "a view must share its base's VersionCounter object (not a new one, nor a copy of its value)."
        if len(g) == 7 and g[1] != e[1]:
            return "an in-place op returns the tensor itself (return self), so that calls chain."
    return None


def check_versions(data, label):
    expected_trace, expected_values = checks.oracle("version_trace")(version_trace, data)  # before our code has data
    got_trace, got_values = checks.run_student("inplace_ops", version_trace, OUR_TENSORS, data.copy())
    checks.check_equal("inplace_ops", label, "(step, returned self, versions of x, v, r, t, c)",
                       got_trace, expected_trace, hints=[versions_hint])
    for (name, g), (_, e) in zip(got_values, expected_values):
        checks.assert_close(g, e, task="inplace_ops", case=label, name=name)


check_versions(np.arange(12.0).reshape(3, 4), "a (3, 4) tensor")
### BEGIN HIDDEN TESTS
check_versions(checks.randn(71, 2, 1, 3), "a (2, 1, 3) tensor")
check_versions(checks.randn(72, 5), "a (5,) tensor")
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise `stale_gradient`
#
# Now we reproduce the defect. Take $y = w \odot x \odot x$ (the node `x` is used twice), with
# $w$ a parameter that requires grad and $x$ data that does not. The engine computes it as
# $h = w \odot x$, then $y = h \odot x$; the first `Mul` saves $(w, x)$ and the second $(h, x)$.
# For an upstream gradient $\bar y$ the right gradient is
#
# $$\bar w = \bar y \odot x \odot x .$$
#
# If $x$ is edited in place to $x + \delta$ after the forward pass, unguarded backward reads the
# edited $x$ from both contexts and returns $\bar y \odot (x + \delta) \odot (x + \delta)$: the
# gradient at a point where we never evaluated $y$, with $y$ itself unchanged.
#
# **Worked example.** $x = (1, 2)$, $w = (3, -1)$, $\bar y = (1, 0.5)$, $\delta = 1$. The forward
# pass gives $y = (3, -4)$. The right gradient is $\bar w = (1 \cdot 1 \cdot 1,\ 0.5 \cdot 2 \cdot 2)
# = (1, 2)$. After `x.add_(1)` the saved $x$ reads $(2, 3)$ and unguarded backward returns
# $(1 \cdot 2 \cdot 2,\ 0.5 \cdot 3 \cdot 3) = (4, 4.5)$.
#
# Write `stale_gradient(x0, w0, delta, grad)`: in save mode `"unchecked"`, build
# $y = w \odot x \odot x$ from tensors on `x0` and `w0` (`w` requires grad), edit `x` with
# `x.add_(delta)`, run `y.backward(grad)` and keep `w.grad`: the stale gradient. Then compute the
# right gradient with the same engine, from a forward pass that no edit follows. Return both,
# `(stale, right)`. The caller's arrays `x0` and `w0` must not change.

# %% nbgrader={"grade": false, "grade_id": "stale_gradient", "locked": false, "schema_version": 3, "solution": true, "task": false}
def stale_gradient(x0, w0, delta, grad):
    """(stale, right): w.grad of y = w * x * x after and without an in-place edit x += delta."""
    ### BEGIN SOLUTION
    with save_mode("unchecked"):
        x, w = Tensor(np.array(x0)), Tensor(np.array(w0), requires_grad=True)
        y = w * x * x
        x.add_(delta)
        y.backward(grad)
        stale = w.grad
        x, w = Tensor(np.array(x0)), Tensor(np.array(w0), requires_grad=True)
        (w * x * x).backward(grad)
        return stale, w.grad
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_stale_gradient", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# The right gradient against torch autograd and central differences (random and zero upstream
# gradients, a non-contiguous x0); the stale one against torch's gradient at the edited point x0 + delta.
# The worked example first.
stale, right = checks.run_student("stale_gradient", stale_gradient, np.array([1.0, 2.0]), np.array([3.0, -1.0]), 1.0,
                                  np.array([1.0, 0.5]))
checks.assert_close(right, np.array([1.0, 0.5]) * np.array([1.0, 2.0]) ** 2, task="stale_gradient",
                    case="worked example", name="right")
checks.assert_close(stale, np.array([1.0, 0.5]) * np.array([2.0, 3.0]) ** 2, task="stale_gradient",
                    case="worked example", name="stale")


def check_stale(seed, shapes, delta):
    cases = checks.random_cases(seed, shapes, label=f"y = w * x * x, delta = {delta}")
    checks.check_vjp("stale_gradient", lambda x, w, g: stale_gradient(x, w, delta, g)[1], "w_x_x", cases,
                     wrt=(1,), names=["x", "w"], seed=seed)
    checks.check_vjp("stale_gradient", lambda x, w, g: stale_gradient(x - delta, w, delta, g)[0], "w_x_x",
                     cases, wrt=(1,), names=["x + delta (the edited x)", "w"], seed=seed, fd=False,
                     hints=[lambda g, e: "is the edit made after the forward pass and before backward?"])
    for c in cases:
        x0, w0 = c.args
        before = x0.copy(), w0.copy()
        checks.run_student("stale_gradient", stale_gradient, x0, w0, delta, np.ones_like(x0))
        checks.assert_close(x0, before[0], task="stale_gradient", case=c.label, name="the caller's x0 afterwards")
        checks.assert_close(w0, before[1], task="stale_gradient", case=c.label, name="the caller's w0 afterwards")


check_stale(1, [((3, 4), (3, 4)), ((), ()), ((1, 5), (1, 5))], 0.5)
### BEGIN HIDDEN TESTS
check_stale(2, [((2, 3), (2, 3)), ((4,), (4,)), ((2, 1, 3), (2, 1, 3))], -1.25)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Two guards: check, or copy
#
# **Check (torch's choice).** When an op saves an array that belongs to one of its input tensors,
# the context records that tensor and its version at that moment. When backward reads
# `ctx.saved_tensors`, the context compares each recorded version with the tensor's version now;
# if one moved on, it raises torch's error instead of returning stale arrays:
#
# ```
# RuntimeError: one of the variables needed for gradient computation has been modified by an
# inplace operation: [float64 array of shape (2,)] is at version 1; expected version 0 instead.
# ```
#
# (on one line). Three details matter. Only **saved** arrays count: `Add` saves nothing, so
# editing its inputs is harmless and must not raise. The test is the **version**, not the values:
# `x.mul_(1.0)` leaves the values equal and still raises, as in torch (comparing values would also
# need a copy of every saved array, which is what the check exists to avoid). And the check happens
# in **backward**, when the saved values are used: at save time nothing has been edited yet.
# (`Sum` saves only its input's shape, a tuple: editing its input does not raise either.)
#
# **Copy.** The context saves copies of the arrays, so a later edit cannot reach them. Backward
# then computes the gradient at the point of the forward pass. The price is memory: one extra copy
# of every saved array, for every op, until backward.
#
# **Worked example.** `x = Tensor([1., 2.])` with version 0, `w = Tensor([3., -1.])` requires
# grad. `y = w * x`:
# `Mul` saves `(w.data, x.data)`, and a checked context records `[(w, 0), (x, 0)]`. Then
# `x.add_(1)` moves `x._version` to 1. In backward, `ctx.saved_tensors` finds `x` at version 1
# where 0 was recorded and raises the error above, "is at version 1; expected version 0". Had
# `x.add_(1)` come before `y = w * x`, the context would have recorded `(x, 1)` and backward would
# run normally.
#
# ### Exercise `checked_context`
#
# Write `CheckedContext`, the context of save mode `"check"`. `save_for_backward(*values)`
# saves the values as `Context` does and records `(tensor, tensor._version)` for every tensor of
# `self.tensors` (the op's inputs) whose `data` a saved array shares memory with (use
# `np.may_share_memory`; values that are not arrays, such as shapes, belong to no tensor). The
# property `saved_tensors` raises `RuntimeError` with exactly the message above, naming the
# array's dtype and shape and both versions, if a recorded tensor's version changed; otherwise it
# returns the saved values.

# %% nbgrader={"grade": false, "grade_id": "checked_context", "locked": false, "schema_version": 3, "solution": true, "task": false}
class CheckedContext(Context):
    """Save mode "check": backward raises torch's RuntimeError if a saved array was edited in place."""

    def save_for_backward(self, *values):
        """Save ``values`` and record the versions of the input tensors they belong to."""
        ### BEGIN SOLUTION
        super().save_for_backward(*values)
        self.versions = [(t, t._version) for t in self.tensors
                         if any(isinstance(v, np.ndarray) and np.may_share_memory(v, t.data) for v in values)]
        ### END SOLUTION

    @property
    def saved_tensors(self):
        """The saved values; RuntimeError if a tensor they belong to was edited since."""
        ### BEGIN SOLUTION
        for t, version in getattr(self, "versions", []):
            if t._version != version:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{t.data.dtype} array of shape {t.data.shape}] is at version {t._version}; "
                    f"expected version {version} instead.")
        return self._saved
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_checked_context", "locked": true, "points": 12, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# Edit scenarios on y = w * x * x (random upstream gradient): each must raise torch's error with
# the right versions, or run and give torch's gradient.
MESSAGE = "one of the variables needed for gradient computation has been modified by an inplace operation: "


def guarded_grad(mode, x0, w0, grad, before=(), after=(), graph=lambda w, x: w * x * x):
    """w.grad of graph(w, x) in save ``mode``; ``before`` and ``after`` are edits (functions of
    x, w) applied before the forward pass and between forward and backward."""
    with save_mode(mode):
        x = Tensor(np.array(x0))
        w = Tensor(np.array(w0), requires_grad=True)
        for edit in before:
            edit(x, w)
        y = graph(w, x)
        for edit in after:
            edit(x, w)
        y.backward(grad)
        return w.grad


def raises_versions(task, label, x0, w0, after, version, expected, before=()):
    grad = checks.randn(5, *np.shape(x0))
    exc = checks.expect_raises(task, RuntimeError, guarded_grad, "check", x0, w0, grad, before, after)
    want = (f"{MESSAGE}[float64 array of shape {np.shape(x0)}] is at version {version}; "
            f"expected version {expected} instead.")
    checks.check_equal(task, label, "the error message", str(exc), want, hints=[
        lambda g, e: "N is the version now, M the version recorded when the value was saved." if
        f"version {expected}; expected version {version}" in g else None])


def edits_on(label, x0, w0):
    shape = np.shape(x0)
    bump_x = lambda x, w: x.add_(1.0)
    raises_versions("checked_context", f"{label}: x.add_ after forward", x0, w0, [bump_x], 1, 0)
    raises_versions("checked_context", f"{label}: x edited twice", x0, w0, [bump_x, lambda x, w: x.zero_()], 2, 0)
    raises_versions("checked_context", f"{label}: x.mul_(1.0), same values", x0, w0, [lambda x, w: x.mul_(1.0)], 1, 0)
    raises_versions("checked_context", f"{label}: edit through a view of x", x0, w0,
                    [lambda x, w: x[...].mul_(2.0)], 1, 0)
    raises_versions("checked_context", f"{label}: x edited before and after forward", x0, w0, [bump_x], 3, 2,
                    before=[bump_x, bump_x])

    def step_w(x, w):  # an optimizer step between forward and backward
        with no_grad():
            w.add_(-0.1)
    exc = checks.expect_raises("checked_context", RuntimeError, guarded_grad, "check", x0, w0,
                               checks.randn(6, *shape), (), [step_w])
    checks.check_equal("checked_context", f"{label}: w updated under no_grad", "the error message", str(exc),
                       f"{MESSAGE}[float64 array of shape {shape}] is at version 1; expected version 0 instead.")
    # no edit, an edit before forward, an edit of an input whose array no op saved: torch's gradient
    for name, before, after, graph in [
            ("no edit", (), (), lambda w, x: w * x * x),
            ("x edited before forward", (bump_x,), (), lambda w, x: w * x * x),
            ("w updated, but Sum saved only its shape", (), (step_w,), lambda w, x: w.sum() * x)]:
        oracle = "w_sum_times_x" if "Sum" in name else "w_x_x"
        shift = 1.0 if "before" in name else 0.0
        checks.check_vjp("checked_context", lambda x, w, g: guarded_grad("check", x - shift, w, g, before, after, graph),
                         oracle, [checks.case(f"{label}: {name}", x0, w0)], wrt=(1,), names=["x", "w"], fd=False)


edits_on("shape (2,)", np.array([1.0, 2.0]), np.array([3.0, -1.0]))
edits_on("shape (3, 4)", checks.randn(11, 3, 4), checks.randn(12, 3, 4))
### BEGIN HIDDEN TESTS
edits_on("shape ()", checks.randn(13), checks.randn(14))
edits_on("shape (1, 5)", checks.randn(15, 1, 5), checks.randn(16, 1, 5))
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise `copy_context`
#
# Write `CopyContext`, the context of save mode `"copy"`: `save_for_backward(*values)` saves a
# **copy** of every array among `values` (a new array with its own memory; a view is not a copy),
# and saves other values (shapes) as they are. Its `saved_tensors` is `Context`'s. With it, the
# edits that `CheckedContext` refuses give the gradient of the forward pass.
#
# **Worked example.** The same `y = w * x` with $x = (1, 2)$, $w = (3, -1)$ and upstream
# $\bar y = (1, 1)$: a copying context saves `([3., -1.], [1., 2.])`, two new arrays. After
# `x.add_(1)`, `x` is `[2., 3.]`, but the saved copy is still `[1., 2.]`, and backward returns
# $\bar w = \bar y \odot (1, 2) = (1, 2)$, the right gradient, where the unguarded engine would
# return $(2, 3)$. `ndarray.view()` or `np.asarray` would not do: they return the same memory.

# %% nbgrader={"grade": false, "grade_id": "copy_context", "locked": false, "schema_version": 3, "solution": true, "task": false}
class CopyContext(Context):
    """Save mode "copy": saved arrays are copies, so later in-place edits cannot reach them."""

    def save_for_backward(self, *values):
        """Save a copy of every array among ``values`` (other values as they are)."""
        ### BEGIN SOLUTION
        super().save_for_backward(*(v.copy() if isinstance(v, np.ndarray) else v for v in values))
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_copy_context", "locked": true, "points": 7, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# The edits of the check-mode test, in copy mode: torch's gradient at the forward pass's values
# (random and zero upstream gradients, non-contiguous inputs), and no error.
def copy_mode_edits(label, x0, w0):
    def step_w(x, w):
        with no_grad():
            w.add_(-0.1)
    for name, after in [("x.add_ after forward", (lambda x, w: x.add_(1.0),)),
                        ("x zeroed through a view", (lambda x, w: x[...].zero_(),)),
                        ("x and w edited", (lambda x, w: x.mul_(-3.0), step_w))]:
        checks.check_vjp("copy_context", lambda x, w, g: guarded_grad("copy", x, w, g, (), after), "w_x_x",
                         [checks.case(f"{label}: {name}", x0, w0)], wrt=(1,), names=["x", "w"], fd=False,
                         hints=[lambda g, e: "backward saw the edit: save copies, not the arrays or views of them."])


copy_mode_edits("shape (2,)", np.array([1.0, 2.0]), np.array([3.0, -1.0]))
copy_mode_edits("shape (3, 4)", checks.randn(21, 3, 4), checks.randn(22, 3, 4))
### BEGIN HIDDEN TESTS
copy_mode_edits("shape ()", checks.randn(23), checks.randn(24))
copy_mode_edits("shape (1, 5)", checks.randn(25, 1, 5), checks.randn(26, 1, 5))
### END HIDDEN TESTS

# %% [markdown]
# ### Explain `explain_guards`
#
# Apply the two guards to new cases. In each, `w` (shape (3,)) requires grad, `x` (shape (3,))
# is data, and we call `loss.sum().backward()` after the edit.
#
# (a) `loss = (w + x).relu()`, then `x.add_(1.0)`. Does save mode `"check"` raise? Is the
# unguarded gradient of `w` right? Say why from what each op saves. (3 points)
#
# (b) `h = w * x; loss = h * h`, then `with no_grad(): w.mul_(2.0)`. Does `"check"` raise, and
# with which versions? Is the unguarded gradient of `w` right anyway? What does this say about
# how precise the check is? (4 points)
#
# (c) A model of 10 layers `h = h @ W.T + b`, each `W` of shape (4096, 4096), a batch `h` of
# shape (256, 4096), all float64. How much extra memory does save mode `"copy"` hold per forward
# pass compared with `"check"` (our `MatMul` saves both operands, and `W.T` is a view of `W`)? Why
# is the check the better default for training? (3 points)
#
# (Graded by hand; 10 points.)

# %% [markdown] nbgrader={"grade": true, "grade_id": "explain_guards", "locked": false, "points": 10, "schema_version": 3, "solution": true, "task": false}
# **Model answer.**
#
# *(a) (3 points).* No error, and the unguarded gradient is right. `Add` saves nothing (its
# backward only needs the shapes), and `ReLU` saves a mask `a > 0`, a new boolean array computed in
# forward that does not alias `x`. No saved array belongs to `x`, so the check records nothing for
# it, and the edit cannot reach what backward reads: $\bar w = \mathbb{1}[w + x > 0]$ at the
# forward values.
#
# *(b) (4 points).* It raises. The second `Mul` saves `(h, h)`, untouched, and runs; the first
# `Mul` saved `(w.data, x.data)` with `w` at version 0, and the step moved `w` to version 1, so
# reading its saved values raises "... is at version 1; expected version 0 instead". Yet the
# unguarded gradient is right: $\bar w = \bar h \odot x$ with $\bar h = 2h$ needs `x` and the saved
# `h`, and the saved `w` is only needed for $\bar x$, which nobody asked for. The check is
# conservative: it guards every saved array, whether or not this backward pass will use it. It
# never lets a wrong gradient through, but it can refuse a computation that would have been right.
#
# *(c) (3 points).* Each `MatMul` saves `h` (256 x 4096 x 8 bytes = 8 MiB) and `W.T`
# (4096 x 4096 x 8 bytes = 128 MiB). In check mode both are references to arrays that exist
# anyway (the layer input and the weight); in copy mode both are copied: 136 MiB per layer, about
# 1.33 GiB per forward pass for 10 layers, more than the weights themselves (1.25 GiB). The check
# costs one integer per saved tensor and catches the rare edit as an error, where copying pays the
# memory on every step to make that rare edit harmless. Where an edit is intended, one copies that
# one array by hand (or saves what backward needs, as `ReLU` saves its mask).

# %% [markdown]
# ## 4. Modules own their parameters
#
# A network's parameters live in its layers, and its layers live in the network: ownership is a
# tree. `torch.nn.Module` builds that tree as we write the model, without any list of parameters
# written by hand. Its `__setattr__` looks at every value assigned as an attribute:
#
# - a `Parameter` (a `Tensor` subclass that requires grad) goes into the module's `_parameters`
#   dict under the attribute's name;
# - a `Module` goes into `_modules`, and becomes a child in the tree;
# - a **buffer** is state that is not trained (running statistics, a step count, a fixed mask);
#   `register_buffer(name, value, persistent=True)` puts it into `_buffers`, and a later
#   assignment `self.name = value` replaces it there;
# - anything else is a plain attribute.
#
# The dicts keep insertion order, so the order of registration is the order of traversal.
# `named_parameters()` walks the tree depth first: first the module's **own** parameters in
# registration order, then each child's, with the child's name and a dot in front (`"fc.weight"`).
# So a parameter registered after a child still comes before the child's parameters. Assigning the
# same `Parameter` to two places, `decoder.weight = encoder.weight`, **ties** them: there is one
# array, trained by the gradients of both uses, and `named_parameters()` lists it **once**, under
# the first name it is reached by (an optimizer must not update it twice). `named_buffers()` walks
# the same way, non-persistent buffers included.
#
# **Worked example.** A `Block` registers `weight` (3, 2), then a child `norm` (with a
# parameter `gain` (3,) and buffers `running_mean` (3,) and `calls` (), the last non-persistent),
# then `bias` (3,). A `Net` registers child `first = Block()`, parameter `scale` (), child
# `second = Block()`, ties `second.weight = first.weight`, then registers parameter `head` (4, 3)
# and buffer `steps` ():
#
# ```
# named_parameters(): scale (), head (4, 3), first.weight (3, 2), first.bias (3,),
#                     first.norm.gain (3,), second.bias (3,), second.norm.gain (3,)
# named_buffers():    steps (), first.norm.running_mean (3,), first.norm.calls (),
#                     second.norm.running_mean (3,), second.norm.calls ()
# ```
#
# Seven entries, $1 + 12 + 6 + 3 + 3 + 3 + 3 = 31$ trained numbers; `second.weight` is not
# listed, because it is `first.weight`. Three more methods act on the whole tree, as in torch:
# `zero_grad()` sets every parameter's `grad` to `None` (torch's default, `set_to_none=True`);
# `train(mode=True)` sets `training = mode` on the module and every descendant and returns the
# module; `eval()` is `train(False)`.

# %% nbgrader={"grade": false, "grade_id": "parameter", "locked": true, "schema_version": 3, "solution": false, "task": false}
class Parameter(Tensor):
    """A tensor that a Module registers as a parameter; it requires grad by default."""

    def __init__(self, data, requires_grad=True):
        super().__init__(data, requires_grad)


IncompatibleKeys = namedtuple("IncompatibleKeys", "missing_keys unexpected_keys")


def add_to_class(Class):
    """Decorator that attaches a function to ``Class`` as a method (as D2L's ``add_to_class``)."""
    def register(function):
        setattr(Class, function.__name__, function)
        return function
    return register


# %% [markdown]
# ### Exercise `module`
#
# Write `Module`'s registration and traversal: `__setattr__`, `register_buffer`,
# `named_parameters`, `parameters`, `named_buffers`, `buffers`, `zero_grad`, `train` and `eval`,
# with the rules above (the helper `_named_members(registry)` walks the tree once for parameters
# and buffers alike). `__init__` (which creates the registries with `object.__setattr__`, so as
# not to call our `__setattr__` before they exist), `__getattr__` (which finds registered entries
# by name) and `__call__` are given. The tests build the worked example with our classes and the
# same model with `torch.nn`, and compare.

# %% nbgrader={"grade": false, "grade_id": "module", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Module:
    """Base class of layers and models, after torch.nn.Module; subclasses call super().__init__() first."""

    def __init__(self):
        # object.__setattr__, because our __setattr__ needs these registries to exist
        for key, initial in [("_parameters", {}),  # name -> Parameter, in registration order
                             ("_buffers", {}),  # name -> Tensor
                             ("_non_persistent", set()),  # names of buffers that state_dict leaves out
                             ("_modules", {}),  # name -> Module
                             ("training", True)]:
            object.__setattr__(self, key, initial)

    def __getattr__(self, name):  # called only when normal attribute lookup fails
        registries = [vars(self).get(r, {}) for r in ("_parameters", "_buffers", "_modules")]
        for registry in registries:
            if name in registry:
                return registry[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __call__(self, *args):
        return self.forward(*args)

    def __setattr__(self, name, value):
        """Register a Parameter or a Module; a value for a buffer's name replaces the buffer
        (an array is wrapped in a Tensor); anything else is a plain attribute."""
        ### BEGIN SOLUTION
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        elif name in self._buffers:
            self._buffers[name] = value if value is None or isinstance(value, TensorBase) else Tensor(value)
        else:
            object.__setattr__(self, name, value)
        ### END SOLUTION

    def register_buffer(self, name, value, persistent=True):
        """Register ``value`` (a Tensor, or an array wrapped in a Tensor) as a buffer;
        state_dict leaves out a non-persistent one."""
        ### BEGIN SOLUTION
        self._buffers[name] = value if value is None or isinstance(value, TensorBase) else Tensor(value)
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)
        ### END SOLUTION

    def _named_members(self, registry):
        """(dotted name, value) of ``registry`` ("_parameters" or "_buffers") over the tree,
        depth first, own entries before the children's, each object once."""
        ### BEGIN SOLUTION
        seen, out = set(), []

        def visit(module, prefix):
            for name, value in getattr(module, registry).items():
                if value is not None and id(value) not in seen:
                    seen.add(id(value))
                    out.append((prefix + name, value))
            for name, child in module._modules.items():
                if child is not None:
                    visit(child, prefix + name + ".")

        visit(self, "")
        return out
        ### END SOLUTION

    def named_parameters(self):
        """A list of (name, Parameter): recursive, in registration order, a tied Parameter once."""
        ### BEGIN SOLUTION
        return self._named_members("_parameters")
        ### END SOLUTION

    def parameters(self):
        """The Parameters of named_parameters(), in the same order."""
        ### BEGIN SOLUTION
        return [p for _, p in self.named_parameters()]
        ### END SOLUTION

    def named_buffers(self):
        """A list of (name, Tensor) of every buffer, persistent or not, in the same order."""
        ### BEGIN SOLUTION
        return self._named_members("_buffers")
        ### END SOLUTION

    def buffers(self):
        """The buffers of named_buffers(), in the same order."""
        ### BEGIN SOLUTION
        return [b for _, b in self.named_buffers()]
        ### END SOLUTION

    def zero_grad(self):
        """Set the grad of every parameter to None."""
        ### BEGIN SOLUTION
        for p in self.parameters():
            p.grad = None
        ### END SOLUTION

    def train(self, mode=True):
        """Set ``training = mode`` on this module and every descendant; return self."""
        ### BEGIN SOLUTION
        object.__setattr__(self, "training", mode)
        for child in self._modules.values():
            if child is not None:
                child.train(mode)
        return self
        ### END SOLUTION

    def eval(self):
        """train(False)."""
        ### BEGIN SOLUTION
        return self.train(False)
        ### END SOLUTION


class ReLULayer(Module):
    """relu as a layer without parameters, like torch.nn.ReLU."""

    def forward(self, x):
        return x.relu()


# %% nbgrader={"grade": true, "grade_id": "test_module", "locked": true, "points": 12, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# Each model is written once, against a namespace `nn`, and built twice: with our classes and
# with torch.nn (by the oracle). Names, order and shapes must agree, and the tree must behave.
OUR_NN = types.SimpleNamespace(Module=Module, Parameter=Parameter, ReLU=ReLULayer, buffer=np.asarray, tensor=Tensor,
                               Linear=lambda *args, **kwargs: Linear(*args, **kwargs))  # Linear: part 6


def build_net(nn, n_in=2, n_out=3):
    class Norm(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.gain = nn.Parameter(np.ones(n))
            self.register_buffer("running_mean", nn.buffer(np.zeros(n)))
            self.register_buffer("calls", nn.buffer(np.zeros(())), persistent=False)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(np.full((n_out, n_in), 0.5))
            self.norm = Norm(n_out)
            self.bias = nn.Parameter(np.zeros(n_out))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.first = Block()
            self.scale = nn.Parameter(np.array(2.0))
            self.second = Block()
            self.second.weight = self.first.weight  # tied: one Parameter, two owners
            self.act = nn.ReLU()
            self.head = nn.Parameter(np.ones((4, n_out)))
            self.register_buffer("steps", nn.tensor(np.zeros(())))  # a Tensor; the other buffers are arrays
            self.note, self.cache = "a plain attribute", np.zeros(2)

    return Net()


def layout(model, what):
    return [(k, tuple(v.shape)) for k, v in getattr(model, what)()]


TIED_HINT = lambda g, e: "a tied Parameter is one object: list it once (compare with `is` or id)." if len(g) > len(e) else None
ORDER_HINT = lambda g, e: ("same entries in another order: a module's own entries come first, in registration "
                           "order, then each child's, depth first." if sorted(g) == sorted(e) else None)


def check_module(build, label):
    model = checks.run_student("module", build, OUR_NN)
    expected = checks.oracle("module_layout")(build)
    for what in ("named_parameters", "named_buffers"):
        got = checks.run_student("module", layout, model, what)
        checks.check_equal("module", label, f"{what}() as (name, shape)", got, expected[what],
                           hints=[TIED_HINT, ORDER_HINT])
    params = checks.run_student("module", lambda: list(model.parameters()))
    named = [p for _, p in checks.run_student("module", lambda: list(model.named_parameters()))]
    checks.check_equal("module", label, "parameters() are the objects of named_parameters()",
                       [id(p) for p in params], [id(p) for p in named])
    assert all(isinstance(p, Parameter) for p in params), f"[module] case '{label}': parameters() must yield Parameters"
    buffers = checks.run_student("module", lambda: list(model.buffers()))
    assert all(isinstance(b, TensorBase) for b in buffers), f"[module] case '{label}': buffers() must yield Tensors"
    assert model.second.weight is model.first.weight, f"[module] case '{label}': the tied weight must stay one object"
    assert model.note == "a plain attribute" and isinstance(model.cache, np.ndarray), \
        f"[module] case '{label}': plain attributes must stay plain attributes"
    new_mean = np.full(model.first.norm.running_mean.shape, 7.0)
    model.first.norm.running_mean = new_mean  # assigning to a buffer's name replaces the buffer
    replaced = dict(checks.run_student("module", lambda: list(model.named_buffers())))["first.norm.running_mean"]
    assert isinstance(replaced, TensorBase) and replaced.data is new_mean, \
        f"[module] case '{label}': after `first.norm.running_mean = array`, named_buffers() must hold a Tensor on that array"
    for p in params:
        p.grad = np.ones(p.shape)
    checks.run_student("module", model.zero_grad)
    checks.check_equal("module", label, "grads after zero_grad() (None expected)",
                       [p.grad for p in model.parameters()], [None] * len(params))
    modules = [model, model.first, model.first.norm, model.second, model.second.norm, model.act]
    returned = checks.run_student("module", model.eval)
    checks.check_equal("module", label, "training flags after eval() (model, first, first.norm, second, ...)",
                       [m.training for m in modules], [False] * len(modules))
    assert returned is model, f"[module] case '{label}': eval() must return the module itself"
    returned = checks.run_student("module", model.first.train)
    checks.check_equal("module", label, "training flags after first.train()",
                       [m.training for m in modules], [False, True, True, False, False, False])
    assert returned is model.first, f"[module] case '{label}': train() must return the module itself"


check_module(build_net, "the worked example")
### BEGIN HIDDEN TESTS
check_module(lambda nn: build_net(nn, n_in=1, n_out=5), "the worked example with n_in=1, n_out=5")
### END HIDDEN TESTS

# %% [markdown]
# ### Concept check `tied_counts`
#
# A language model ties its output layer to its embedding: `embed = Parameter` of shape
# (1000, 64), `head = Linear(64, 1000)` (weight (1000, 64), bias (1000,)), then
# `head.weight = embed`. The model registers `embed` first, then `head`. How many entries does
# `named_parameters()` list, how many keys does `state_dict()` have (it lists a tied parameter
# under every name, as part 5 explains), and how many numbers does training update?

# %% nbgrader={"grade": false, "grade_id": "tied_counts", "locked": false, "schema_version": 3, "solution": true, "task": false}
n_named_parameters = None  # entries of named_parameters()
n_state_dict_keys = None  # keys of state_dict()
n_trained_numbers = None  # numbers that training updates
### BEGIN SOLUTION
n_named_parameters = 2
n_state_dict_keys = 3
n_trained_numbers = 1000 * 64 + 1000
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_tied_counts", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
checks.check_hash("tied_counts", "n_named_parameters", n_named_parameters,
                  "d4735e3a265e16eee03f59718b9b5d03019c07d8b6c51f90da3a666eec13ab35",
                  hint="a tied Parameter is one object, listed once.")
checks.check_hash("tied_counts", "n_state_dict_keys", n_state_dict_keys,
                  "4e07408562bedb8b60ce05c1decfe3ad16b72230967de01f640b7e4729b49fce",
                  hint="state_dict lists every name a parameter is registered under.")
checks.check_hash("tied_counts", "n_trained_numbers", n_trained_numbers,
                  "f73d49677d4176275a83fd8e5f639e47dd15192d0fa0003ccc623157d672e648",
                  hint="count the tied matrix once, and the bias.")
### BEGIN HIDDEN TESTS
def build_tied_lm(nn):
    class TiedLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Parameter(np.zeros((1000, 64)))
            self.head = nn.Linear(64, 1000)
            self.head.weight = self.embed

    return TiedLM()


torch_layout = checks.oracle("module_layout")(build_tied_lm)
checks.check_equal("tied_counts", "torch's TiedLM", "n_named_parameters", n_named_parameters,
                   len(torch_layout["named_parameters"]))
checks.check_equal("tied_counts", "torch's TiedLM", "n_state_dict_keys", n_state_dict_keys,
                   len(torch_layout["state_dict"]))
checks.check_equal("tied_counts", "torch's TiedLM", "n_trained_numbers", n_trained_numbers,
                   sum(int(np.prod(shape)) for _, shape in torch_layout["named_parameters"]))
### END HIDDEN TESTS

# %% [markdown]
# ## 5. Saving and loading state by name
#
# `state_dict()` is everything needed to restore a model: a dict from **key** to array, with the
# parameters and the **persistent** buffers. The keys are the dotted names of the traversal, in
# torch's order: a module's own parameters, then its own persistent buffers, then each child's
# entries with the child's name and a dot in front. Unlike `named_parameters()`, `state_dict()`
# follows every registration, so a tied parameter appears under **each** of its names (torch does
# the same: a checkpoint must load into an untied model too). Non-persistent buffers are left out:
# they are state that can be recomputed, such as a cache.
#
# The values are the tensors' arrays themselves, not copies; torch's `state_dict` also returns
# tensors that share storage with the parameters. So `best = model.state_dict()` is **not** a
# snapshot: the next optimizer step changes `best` too. A snapshot needs
# `{k: v.copy() for k, v in model.state_dict().items()}`.
#
# `load_state_dict(state_dict, strict=True)` copies values **into** the existing arrays, in place
# (`array[...] = value`), so that everything that holds the parameters (an optimizer, a view, a
# tied twin) sees the loaded values, and later edits of the source dict do not reach the model.
# It compares the model's keys with the dict's: a model key absent from the dict is **missing**,
# a dict key absent from the model is **unexpected**, and a key present in both with different
# shapes is a **size mismatch** (and is not copied). Like torch, it raises `RuntimeError` with one
# line per problem:
#
# ```
# Error(s) in loading state_dict for Net:
# 	Missing key(s) in state_dict: "head", "steps".
# 	Unexpected key(s) in state_dict: "extra".
# 	size mismatch for scale: copying a param with shape (2,) from checkpoint, the shape in current model is ().
# ```
#
# The first line names the model's class (`type(self).__name__`); each further line starts with a
# tab; the missing line comes first, then the unexpected line, then one line per mismatch, in
# the model's key order (unexpected keys in the dict's order); keys are in double quotes, separated
# by `", "`, and the missing and unexpected lines end in `". "` (a period and a space). With
# `strict=False`, missing and unexpected keys are not errors, but a size mismatch still is. When
# nothing is raised, it returns `IncompatibleKeys(missing_keys, unexpected_keys)` (two lists).
#
# **Worked example.** For the `Net` of part 4, `state_dict()` has 11 keys: `scale`, `head`,
# `steps`, `first.weight`, `first.bias`, `first.norm.gain`, `first.norm.running_mean`,
# `second.weight`, `second.bias`, `second.norm.gain`, `second.norm.running_mean`.
# `second.weight` is there (the tied name), the two `calls` buffers are not (non-persistent), and
# `state_dict()["first.weight"] is state_dict()["second.weight"]`.
#
# ### Exercise `state_dict`

# %% nbgrader={"grade": false, "grade_id": "state_dict", "locked": false, "schema_version": 3, "solution": true, "task": false}
@add_to_class(Module)
def state_dict(self):
    """{key: array} of the parameters and persistent buffers, torch's keys and order; a tied
    parameter under each of its names; the values are the arrays themselves, not copies."""
    ### BEGIN SOLUTION
    out = {}
    for name, p in self._parameters.items():
        if p is not None:
            out[name] = p.data
    for name, b in self._buffers.items():
        if b is not None and name not in self._non_persistent:
            out[name] = b.data
    for name, child in self._modules.items():
        if child is not None:
            for key, value in child.state_dict().items():
                out[f"{name}.{key}"] = value
    return out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_state_dict", "locked": true, "points": 7, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# Keys, order and shapes against torch's state_dict of the same model; values are the arrays.
def check_state_dict(build, label):
    model = checks.run_student("state_dict", build, OUR_NN)
    sd = checks.run_student("state_dict", model.state_dict)
    expected = checks.oracle("module_layout")(build)["state_dict"]
    got = [(k, tuple(np.shape(v))) for k, v in sd.items()]
    checks.check_equal("state_dict", label, "state_dict() as (key, shape)", got, expected, hints=[
        lambda g, e: "a tied parameter appears under each name it is registered under." if len(g) < len(e) else None,
        lambda g, e: "non-persistent buffers are not part of state_dict." if any("calls" in k for k, _ in g) else None,
        lambda g, e: "persistent buffers are part of state_dict." if not any("running_mean" in k for k, _ in g) else None,
        ORDER_HINT])
    for key, value in sd.items():
        owner = model
        for part in key.split("."):
            owner = getattr(owner, part)  # the module's registries, through __getattr__
        assert isinstance(value, np.ndarray) and value is owner.data, (
            f"[state_dict] case '{label}': state_dict()['{key}'] must be the parameter's or buffer's array itself "
            "(`.data`), not a copy or a Tensor")


check_state_dict(build_net, "the worked example")
### BEGIN HIDDEN TESTS
check_state_dict(lambda nn: build_net(nn, n_in=4, n_out=1), "the worked example with n_in=4, n_out=1")
### END HIDDEN TESTS

# %% [markdown]
# **Worked example.** Into the same `Net`, we load a dict that has every key except `head` and
# `steps`, plus an extra key `"extra"`, and whose `scale` has shape (2,) where the model's is ().
# With `strict=True` this raises the error shown above: two missing keys, one unexpected key, one
# size mismatch, and `scale` keeps its value. With `strict=False` it still raises, with only the
# size-mismatch line. Without the `scale` entry and with `strict=False`, it copies the 8 values it
# has and returns `IncompatibleKeys(missing_keys=['scale', 'head', 'steps'], unexpected_keys=['extra'])`.
#
# ### Exercise `load_state_dict`

# %% nbgrader={"grade": false, "grade_id": "load_state_dict", "locked": false, "schema_version": 3, "solution": true, "task": false}
@add_to_class(Module)
def load_state_dict(self, state_dict, strict=True):
    """Copy the values of ``state_dict`` into this module's arrays, in place. Raise RuntimeError
    as torch does for missing and unexpected keys (if strict) and size mismatches (always);
    otherwise return IncompatibleKeys(missing_keys, unexpected_keys)."""
    ### BEGIN SOLUTION
    own = self.state_dict()
    missing, errors = [], []
    for key, array in own.items():
        if key not in state_dict:
            missing.append(key)
            continue
        value = np.asarray(state_dict[key])
        if value.shape != array.shape:
            errors.append(f"size mismatch for {key}: copying a param with shape {value.shape} from checkpoint, "
                          f"the shape in current model is {array.shape}.")
            continue
        array[...] = value
    unexpected = [key for key in state_dict if key not in own]
    if strict:
        if unexpected:
            errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
        if missing:
            errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
    if errors:
        raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
    return IncompatibleKeys(missing, unexpected)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_load_state_dict", "locked": true, "points": 10, "schema_version": 3, "solution": false, "task": false}
import copy

from autograder.inside import checks
# Loads that succeed (in place, values copied), and broken dicts whose errors (or returned keys)
# must equal torch's for the same model and dict. Messages are compared line by line, without
# trailing spaces, with torch's shapes written as NumPy's: torch.Size([2]) as (2,).
def random_state(model, seed):
    """A new value for every key, the tied names sharing one array."""
    state, rng = {}, np.random.default_rng(seed)
    for key, value in model.state_dict().items():
        state[key] = rng.standard_normal(np.shape(value))
    if "first.weight" in state and "second.weight" in state:
        state["second.weight"] = state["first.weight"]
    return state


def torch_report(build, state, strict):
    return checks.oracle("load_report")(build, state, strict)


def our_report(model, state, strict):
    try:
        result = model.load_state_dict(state, strict=strict)
    except RuntimeError as exc:
        return ("raised", str(exc))
    return ("returned", list(result[0]), list(result[1]))


def same_report(label, got, expected):
    norm = lambda r: (r[0], [line.rstrip() for line in r[1].split("\n")]) if r[0] == "raised" else r
    checks.check_equal("load_state_dict", label, "the outcome (raised, message lines) or (returned, missing, unexpected)",
                       norm(got), norm(expected), hints=[
        lambda g, e: "size mismatches raise even with strict=False." if e[0] == "raised" and g[0] == "returned" else None,
        lambda g, e: "with strict=False, missing and unexpected keys are returned, not raised." if
        e[0] == "returned" and g[0] == "raised" else None])


def check_load(build, label, seed):
    model = checks.run_student("load_state_dict", build, OUR_NN)
    before = {k: v for k, v in model.state_dict().items()}
    source = random_state(model, seed)
    if "scale" in source:
        source["scale"] = source["scale"].astype(np.float32)  # a float32 value is cast into the float64 array
    # what we expect, before the load runs, from copies it never receives (its writes into the dict's arrays reach ours)
    expected = {key: np.array(value, dtype=np.float64) for key, value in source.items()}
    report = torch_report(build, source, True)
    state = checks.shared_dict(source)  # the caller's dict: what the load leaves in it is what we edit below
    result = checks.run_student("load_state_dict", our_report, model, state, True)
    same_report(f"{label}: a complete dict", result, report)
    after = model.state_dict()
    for key, array in after.items():
        assert array is before[key], (f"[load_state_dict] case '{label}': loading replaced the array of '{key}'; "
                                      "copy the values into it in place (array[...] = value)")
        checks.assert_close(array, expected[key], task="load_state_dict", case=label, name=key)
    loaded = {key: array.copy() for key, array in after.items()}
    for value in list(state.values()):
        value *= 0.0  # editing the source dict afterwards must not reach the model
    for key, array in after.items():
        checks.assert_close(array, loaded[key], task="load_state_dict", case=label + ", after the source dict was zeroed",
                            name=key, hints=[lambda g, e: "the model aliases the loaded dict's arrays: copy the values."])
    broken = random_state(model, seed + 1)
    broken.pop("head", None), broken.pop("steps", None)
    broken["extra"], broken["first.extra"] = np.zeros(3), np.zeros(1)
    for strict in (True, False):
        report = torch_report(build, broken, strict)
        got = checks.run_student("load_state_dict", our_report, model, copy.deepcopy(broken), strict)  # (ties kept)
        same_report(f"{label}: missing and unexpected keys, strict={strict}", got, report)
    broken["scale"] = np.zeros(2)
    broken["first.bias"] = np.zeros((1, np.shape(broken["first.bias"])[0]))
    for strict in (True, False):
        report = torch_report(build, broken, strict)
        got = checks.run_student("load_state_dict", our_report, model, copy.deepcopy(broken), strict)
        same_report(f"{label}: and two size mismatches, strict={strict}", got, report)


check_load(build_net, "the worked example", 31)
### BEGIN HIDDEN TESTS
check_load(lambda nn: build_net(nn, n_in=3, n_out=1), "the worked example with n_in=3, n_out=1", 32)
### END HIDDEN TESTS

# %% [markdown]
# ## 6. `Linear` and `MLP`
#
# With `Module` in place, a layer is a few lines. `torch.nn.Linear(in_features, out_features,
# bias=True)` computes $y = x W^\top + b$ with `weight` $W$ of shape (out, in) and `bias` $b$ of
# shape (out,) (unit 1.1), both drawn uniformly from $[-1/\sqrt{\text{in}},\ 1/\sqrt{\text{in}}]$.
# Registering `weight` before `bias` gives torch's keys, `weight` then `bias`; without a bias,
# `self.bias = None` registers nothing.
#
# The MLP of unit 1.1 becomes `MLP(sizes)`: `Linear(sizes[0], sizes[1])`, a ReLU, `Linear(sizes[1],
# sizes[2])`, ..., with no ReLU after the last layer, the layers registered as children named
# `"0"`, `"1"`, `"2"`, ... in order (with `setattr(self, str(i), layer)`), as torch's
# `nn.Sequential` names them. So its `state_dict` keys equal those of the torch model
# `nn.Sequential(nn.Linear(...), nn.ReLU(), nn.Linear(...))`, and that model's weights load into
# ours by key. A Python list of layers would register nothing: `Module.__setattr__` only sees the
# list.
#
# **Worked example.** `MLP([4, 16, 3])` registers `"0"` = `Linear(4, 16)`, `"1"` = ReLU,
# `"2"` = `Linear(16, 3)`; its `state_dict` keys are `0.weight` (16, 4), `0.bias` (16,),
# `2.weight` (3, 16), `2.bias` (3,): $64 + 16 + 48 + 3 = 131$ parameters. Its weights start
# within $\pm 1/\sqrt 4 = \pm 0.5$ in the first layer and $\pm 0.25$ in the second. With
# `weight` $= \begin{pmatrix} 1 & 2 \\ 0 & -1 \end{pmatrix}$, `bias` $= (0.5, 0)$ and
# $x = (1, 1)$, a `Linear(2, 2)` gives $x W^\top + b = (3.5, -1)$.
#
# ### Exercise `linear_mlp`
#
# Write `Linear` (its `forward` takes a Tensor of shape (N, in) and uses the engine's ops:
# `x @ self.weight.T`, plus the bias) and `MLP`. The `rng` argument seeds the initial values
# (`np.random.default_rng(rng)`: the same seed gives the same layer); `MLP` makes one generator and
# passes it to all its layers, so that two layers of the same shape start different.

# %% nbgrader={"grade": false, "grade_id": "linear_mlp", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Linear(Module):
    """y = x W^T + b, torch.nn.Linear's parameters, keys and initialisation."""

    def __init__(self, in_features, out_features, bias=True, rng=None):
        """weight (out, in) and bias (out,) or None, uniform on [-1/sqrt(in), 1/sqrt(in)]."""
        super().__init__()
        ### BEGIN SOLUTION
        rng = np.random.default_rng(rng)
        bound = 1 / np.sqrt(in_features)
        self.weight = Parameter(rng.uniform(-bound, bound, (out_features, in_features)))
        self.bias = Parameter(rng.uniform(-bound, bound, out_features)) if bias else None
        ### END SOLUTION

    def forward(self, x):
        """x: a Tensor (N, in); returns a Tensor (N, out)."""
        ### BEGIN SOLUTION
        y = x @ self.weight.T
        return y if self.bias is None else y + self.bias
        ### END SOLUTION


class MLP(Module):
    """Linear, ReLU, Linear, ..., Linear, registered as children "0", "1", ... like nn.Sequential."""

    def __init__(self, sizes, rng=None):
        """Layers for consecutive pairs of ``sizes``, a ReLULayer between two Linear layers."""
        super().__init__()
        ### BEGIN SOLUTION
        rng = np.random.default_rng(rng)
        layers = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            layers += [Linear(n_in, n_out, rng=rng), ReLULayer()]
        for i, layer in enumerate(layers[:-1]):
            setattr(self, str(i), layer)
        ### END SOLUTION

    def forward(self, x):
        """Apply the layers in order."""
        ### BEGIN SOLUTION
        for layer in self._modules.values():
            x = layer(x)
        return x
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_linear_mlp", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# Keys and shapes against torch's nn.Linear and nn.Sequential; the initial values' range; the
# outputs of a torch model whose weights we copy in by key (through named_parameters).
def check_linear(n_in, n_out, bias, seed):
    label = f"Linear({n_in}, {n_out}, bias={bias})"
    build = lambda nn: nn.Linear(n_in, n_out, bias=bias)
    layer = checks.run_student("linear_mlp", build, OUR_NN)
    expected = checks.oracle("module_layout")(build)["named_parameters"]
    checks.check_equal("linear_mlp", label, "named_parameters() as (name, shape)",
                       checks.run_student("linear_mlp", layout, layer, "named_parameters"), expected)
    again = [checks.run_student("linear_mlp", Linear, n_in, n_out, bias=bias, rng=seed) for _ in range(2)]
    for twin in again:  # each layer has them all, so that the loops below see every parameter
        checks.check_equal("linear_mlp", f"{label}, built with rng={seed}", "named_parameters() as (name, shape)",
                           checks.run_student("linear_mlp", layout, twin, "named_parameters"), expected)
    for (name, p), (_, q) in zip(again[0].named_parameters(), again[1].named_parameters()):
        checks.assert_close(q.data, p.data, task="linear_mlp", case=f"{label}, built twice with rng={seed}", name=name,
                            hints=[lambda g, e: "draw the values from np.random.default_rng(rng)."])
    big = checks.run_student("linear_mlp", Linear, n_in, 200, rng=seed)
    checks.check_equal("linear_mlp", f"Linear({n_in}, 200)", "named_parameters() as (name, shape)",
                       checks.run_student("linear_mlp", layout, big, "named_parameters"),
                       checks.oracle("module_layout")(lambda nn: nn.Linear(n_in, 200))["named_parameters"])
    bound = 1 / np.sqrt(n_in)
    for name, p in big.named_parameters():
        assert np.all(np.abs(p.data) <= bound) and np.std(p.data) > bound / 4, (
            f"[linear_mlp] case 'Linear({n_in}, 200)': {name} should be uniform on [-{bound:.4g}, {bound:.4g}], "
            f"got values in [{p.data.min():.4g}, {p.data.max():.4g}] with std {np.std(p.data):.4g}")


def check_mlp(sizes, batch, seed):
    label = f"MLP({sizes})"
    x = checks.randn(seed, batch, sizes[0])
    torch_state, torch_out = checks.oracle("mlp_reference")(sizes, x, seed)
    model = checks.run_student("linear_mlp", MLP, sizes, rng=seed)
    got = [(k, tuple(p.shape)) for k, p in checks.run_student("linear_mlp", lambda: list(model.named_parameters()))]
    checks.check_equal("linear_mlp", label, "named_parameters() as (name, shape)", got,
                       [(k, v.shape) for k, v in torch_state.items()], hints=[
        lambda g, e: "register every layer, the ReLUs too, as a child named str(i): torch counts them." if
        len(g) == len(e) else None,
        lambda g, e: "layers kept in a Python list are not registered: use setattr(self, str(i), layer)." if
        not g else None])
    twins = checks.run_student("linear_mlp", MLP, [3, 3, 3], rng=seed)
    assert not np.array_equal(twins._modules["0"].weight.data, twins._modules["2"].weight.data), (
        f"[linear_mlp] case 'MLP([3, 3, 3], rng={seed})': both layers start with the same weights; make one "
        "generator with np.random.default_rng(rng) and pass it to every layer")
    for key, p in model.named_parameters():
        p.data[...] = torch_state[key]
    out = checks.run_student("linear_mlp", model, Tensor(x))
    checks.assert_close(out.data, torch_out, task="linear_mlp", case=label + " with torch's weights", name="output")


def worked_linear():
    layer = Linear(2, 2)
    layer.weight.data[...] = [[1.0, 2.0], [0.0, -1.0]]
    layer.bias.data[...] = [0.5, 0.0]
    return layer(Tensor(np.array([[1.0, 1.0]]))).data


checks.assert_close(checks.run_student("linear_mlp", worked_linear), np.array([[3.5, -1.0]]), task="linear_mlp",
                    case="worked example", name="output")
check_linear(3, 4, True, 0)
check_linear(5, 2, False, 1)
check_mlp([4, 16, 3], 5, 2)
check_mlp([3, 1, 1, 2], 4, 3)
### BEGIN HIDDEN TESTS
check_linear(1, 1, True, 4)
check_linear(7, 3, False, 5)
check_mlp([6, 2], 3, 6)
check_mlp([2, 8, 5, 4], 7, 7)
### END HIDDEN TESTS

# %% [markdown]
# ## 7. An optimizer updates what the modules own
#
# An optimizer holds the same `Parameter` objects as the model (it gets them from
# `model.parameters()`) and updates their arrays in place, so the model sees every step. The
# algorithm of `torch.optim.SGD` with learning rate $\eta$, momentum $\mu$ and weight decay
# $\lambda$ (no dampening, no Nesterov) is, for each parameter $p$ with a gradient $g_t$ at step $t$:
#
# $$d_t = g_t + \lambda\, p_{t-1}, \qquad
# b_t = \begin{cases} d_t & t = 1 \\ \mu\, b_{t-1} + d_t & t > 1 \end{cases}, \qquad
# p_t = p_{t-1} - \eta\, b_t$$
#
# (with $\mu = 0$, $b_t = d_t$). Weight decay comes first: it is the gradient of the L2 penalty
# $\tfrac{\lambda}{2}\lVert p\rVert^2$ (UDL 9.1, D2L 3.7), added to the loss's gradient, and the
# momentum buffer $b$ accumulates the sum of both (UDL 6.3, D2L 12.6). On the first step torch
# sets the buffer to $d_1$ itself (a copy of it), which, with no dampening, is the same as starting
# from $b_0 = 0$. A parameter whose `grad` is `None` is skipped: no update, and its buffer is left
# as it is. `p.grad` is not changed.
#
# The update is an in-place edit under `no_grad()`, with the tensor's own in-place op, so that the
# version of every updated parameter moves on by one per step, as in torch: a forward pass made
# before `step()` can then no longer be differentiated in save mode `"check"`.
#
# **Worked example.** $p_0 = 1$, $g_1 = g_2 = 0.5$, $\eta = 0.1$, $\mu = 0.9$, $\lambda = 0.1$.
# Step 1: $d_1 = 0.5 + 0.1 \cdot 1 = 0.6$, $b_1 = 0.6$, $p_1 = 1 - 0.06 = 0.94$. Step 2:
# $d_2 = 0.5 + 0.1 \cdot 0.94 = 0.594$, $b_2 = 0.9 \cdot 0.6 + 0.594 = 1.134$,
# $p_2 = 0.94 - 0.1134 = 0.8266$. Applying momentum before weight decay would give
# $b_2 = 0.9 \cdot 0.5 + 0.5 = 0.95$ and $p_2 = 0.94 - 0.1 \cdot (0.95 + 0.094) = 0.8356$.
#
# ### Exercise `sgd`

# %% nbgrader={"grade": false, "grade_id": "sgd", "locked": false, "schema_version": 3, "solution": true, "task": false}
class SGD:
    """torch.optim.SGD with momentum and weight decay (no dampening, no Nesterov)."""

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0):
        """``params``: an iterable of Parameters (a list, or a generator such as model.parameters())."""
        ### BEGIN SOLUTION
        self.params = list(params)
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.momentum_buffers = [None] * len(self.params)
        ### END SOLUTION

    def step(self):
        """Update every parameter that has a grad, in place with its in-place op under no_grad()."""
        ### BEGIN SOLUTION
        with no_grad():
            for i, p in enumerate(self.params):
                if p.grad is None:
                    continue
                d = p.grad + self.weight_decay * p.data
                if self.momentum:
                    if self.momentum_buffers[i] is None:
                        self.momentum_buffers[i] = d.copy()
                    else:
                        self.momentum_buffers[i] *= self.momentum
                        self.momentum_buffers[i] += d
                    d = self.momentum_buffers[i]
                p.add_(-self.lr * d)
        ### END SOLUTION

    def zero_grad(self):
        for p in self.params:
            p.grad = None


# %% nbgrader={"grade": true, "grade_id": "test_sgd", "locked": true, "points": 10, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# Several steps against torch.optim.SGD, after every step: the values, the version counters, the
# arrays updated in place, the gradients left unchanged. One parameter has no grad at step 2.
def run_sgd(initial, grads, **hyper):
    params = [Parameter(a) for a in initial]
    arrays = [p.data for p in params]
    opt = SGD((p for p in params), **hyper)  # a generator, as model.parameters() may be
    trace = []
    for step in grads:
        for p, g in zip(params, step):
            p.grad = g
        opt.step()
        trace.append(([p.data.copy() for p in params], [p._version for p in params],
                      [p.data is a for p, a in zip(params, arrays)]))
    return trace


def check_sgd(seed, shapes, steps, **hyper):
    label = f"SGD({', '.join(f'{k}={v}' for k, v in hyper.items())}), shapes {shapes}, {steps} steps (seed {seed})"
    initial = [checks.strided(checks.randn(seed + i, *s)) if i == 2 else checks.randn(seed + i, *s)
               for i, s in enumerate(shapes)]
    grads = [[None if (t == 1 and i == 1) else checks.randn(100 * seed + 10 * t + i, *s) for i, s in enumerate(shapes)]
             for t in range(steps)]
    kept = [[None if g is None else g.copy() for g in step] for step in grads]
    expected = checks.oracle("sgd_steps")([a.copy() for a in initial], kept, **hyper)
    got = checks.run_student("sgd", run_sgd, [a.copy() if i != 2 else checks.strided(a) for i, a in enumerate(initial)],
                             grads, **hyper)
    for t, ((values, versions, same), (want, want_versions)) in enumerate(zip(got, expected)):
        for i, (v, w) in enumerate(zip(values, want)):
            checks.assert_close(v, w, task="sgd", case=f"{label}, step {t + 1}", name=f"parameter {i}", hints=[
                lambda g, e: "weight decay is added to the gradient before the momentum buffer." if hyper.get(
                    "weight_decay") and hyper.get("momentum") else None])
        checks.check_equal("sgd", f"{label}, step {t + 1}", "the parameters' versions", versions, want_versions,
                           hints=[lambda g, e: "update with the parameter's in-place op (p.add_) under no_grad(), "
                                  "once per step, and skip parameters whose grad is None."])
        checks.check_equal("sgd", f"{label}, step {t + 1}", "each parameter's array is the original one (updated in place)",
                           same, [True] * len(same))
    for t, (step, step_kept) in enumerate(zip(grads, kept)):
        for i, (g, k) in enumerate(zip(step, step_kept)):
            if g is not None:
                checks.assert_close(g, k, task="sgd", case=label, name=f"the gradient of parameter {i} at step {t + 1}, "
                                    "after all steps (the optimizer must not change it)")


checks.assert_close(checks.run_student("sgd", run_sgd, [np.array(1.0)], [[np.array(0.5)]] * 2, lr=0.1, momentum=0.9,
                                       weight_decay=0.1)[1][0][0], np.array(0.8266), task="sgd", case="worked example",
                    name="p after two steps")
check_sgd(1, [(3, 2), (), (4,)], 4, lr=0.1)
check_sgd(2, [(3, 2), (), (4,)], 4, lr=0.1, momentum=0.9)
check_sgd(3, [(3, 2), (), (4,)], 4, lr=0.05, weight_decay=0.01)
check_sgd(4, [(3, 2), (), (4,)], 4, lr=0.1, momentum=0.9, weight_decay=0.1)
### BEGIN HIDDEN TESTS
check_sgd(5, [(2, 3, 1), (1,), (5,)], 5, lr=0.2, momentum=0.5)
check_sgd(6, [(4,), (2, 2), (1, 3)], 5, lr=0.01, momentum=0.99, weight_decay=0.5)
check_sgd(7, [(1,), (), (2,)], 3, lr=0.3, weight_decay=0.2)
### END HIDDEN TESTS

# %% [markdown]
# ## 8. Figure: the ownership tree
#
# The figure draws a model as the tree that `Module.__setattr__` built: modules as boxes, each
# with its parameters (blue) and buffers (green; hollow when non-persistent) below it. A tied
# parameter is drawn once, under the owner that `named_parameters()` reaches first; a red dashed
# edge joins it to its other owner. With "state_dict keys" ticked, each leaf shows every key under
# which `state_dict()` lists it, and the title counts the entries of `named_parameters()`, the
# keys of `state_dict()` and the buffers. Pick a model and compare: the tied language model has one
# parameter node fewer than it has parameter keys, and the model with running statistics has
# a buffer that no key names.
#
# The figure uses our `Module`, `Linear` and `MLP`, so it works once those exercises are done.

# %% nbgrader={"grade": false, "grade_id": "ownership_figure", "locked": true, "schema_version": 3, "solution": false, "task": false}
import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display


def figure_models():
    """The models to draw, built with our classes."""
    class TiedLM(Module):
        def __init__(self):
            super().__init__()
            self.embed = Parameter(np.zeros((10, 4)))
            self.body = MLP([4, 8, 4], rng=0)
            self.head = Linear(4, 10, rng=1)
            self.head.weight = self.embed  # tied

    class Normalised(Module):
        def __init__(self):
            super().__init__()
            self.fc = Linear(3, 5, rng=2)
            self.register_buffer("running_mean", np.zeros(5))
            self.register_buffer("running_var", np.ones(5))
            self.register_buffer("cache", np.zeros((8, 5)), persistent=False)
            self.out = Linear(5, 2, bias=False, rng=3)

    return {"MLP([4, 16, 3])": lambda: MLP([4, 16, 3], rng=0), "tied language model": TiedLM,
            "model with running statistics": Normalised}


def ownership_tree(model):
    """Nodes (kind, label, depth, parent) in depth-first order, and the extra edges of tied weights."""
    nodes, first_owner, extra_edges = [], {}, []
    keys = {}
    for key, array in model.state_dict().items():
        keys.setdefault(id(array), []).append(key)

    def visit(module, name, depth, parent):
        me = len(nodes)
        nodes.append(("module", f"{name or 'model'}: {type(module).__name__}", depth, parent))
        for pname, p in module._parameters.items():
            if p is None:
                continue
            if id(p) in first_owner:
                extra_edges.append((me, first_owner[id(p)]))
                continue
            first_owner[id(p)] = len(nodes)
            nodes.append(("parameter", (pname, tuple(p.shape), keys.get(id(p.data), [])), depth + 1, me))
        for bname, b in module._buffers.items():
            if b is not None:
                kind = "buffer (non-persistent)" if bname in module._non_persistent else "buffer"
                nodes.append((kind, (bname, tuple(b.shape), keys.get(id(b.data), [])), depth + 1, me))
        for cname, child in module._modules.items():
            visit(child, cname, depth + 1, me)

    visit(model, "", 0, None)
    return nodes, extra_edges


def draw_ownership(model_name, show_keys):
    try:
        model = figure_models()[model_name]()
        nodes, extra_edges = ownership_tree(model)
    except Exception as exc:  # the exercises are not done yet
        print(f"The figure needs Module, state_dict, Linear and MLP ({type(exc).__name__}: {exc}).")
        return
    leaves = [i for i, n in enumerate(nodes) if not any(m[3] == i for m in nodes)]
    x = {i: float(k) for k, i in enumerate(leaves)}
    for i in reversed(range(len(nodes))):
        if i not in x:
            x[i] = float(np.mean([x[j] for j, m in enumerate(nodes) if m[3] == i]))
    fig, ax = plt.subplots(figsize=(max(8, 1.3 * len(leaves)), 4.5))
    style = {"module": ("s", "lightgray", "black"), "parameter": ("o", "tab:blue", "tab:blue"),
             "buffer": ("D", "tab:green", "tab:green"), "buffer (non-persistent)": ("D", "white", "tab:green")}
    for i, (kind, label, depth, parent) in enumerate(nodes):
        if parent is not None:
            ax.plot([x[parent], x[i]], [-nodes[parent][2], -depth], color="gray", linewidth=1, zorder=1)
        marker, face, edge = style[kind]
        ax.scatter([x[i]], [-depth], marker=marker, s=260, facecolor=face, edgecolor=edge, zorder=3)
        if kind == "module":
            text = label
        else:
            name, shape, key_list = label
            text = f"{name} {shape}" + ("\n" + "\n".join(key_list) if show_keys and key_list else "")
        ax.annotate(text, (x[i], -depth), textcoords="offset points", xytext=(0, -16), ha="center", va="top",
                    fontsize=8)
    for owner, node in extra_edges:  # a tied parameter's other owner: a dashed arc
        ax.annotate("", (x[node], -nodes[node][2]), xytext=(x[owner], -nodes[owner][2]), zorder=2,
                    arrowprops=dict(arrowstyle="-", color="tab:red", linestyle="--", linewidth=1.5,
                                    connectionstyle="arc3,rad=0.25"))
    for kind, (marker, face, edge) in style.items():
        ax.scatter([], [], marker=marker, s=80, facecolor=face, edgecolor=edge, label=kind)
    ax.plot([], [], color="tab:red", linestyle="--", label="tied: another owner")
    ax.legend(loc="lower left", fontsize=8, frameon=False)
    n_params = len(model.named_parameters())
    ax.set_title(f"{model_name}: {n_params} entries in named_parameters(), {len(model.state_dict())} keys in "
                 f"state_dict(), {len(model.named_buffers())} buffers", fontsize=10)
    ax.set_ylim(-max(n[2] for n in nodes) - 1.6, 0.6)
    ax.set_xlim(-0.8, len(leaves) - 0.2)
    ax.axis("off")
    fig.tight_layout()
    plt.show()


model_picker = widgets.Dropdown(options=list(figure_models()), description="model")
keys_box = widgets.Checkbox(value=False, description="state_dict keys")
figure_output = widgets.interactive_output(draw_ownership, {"model_name": model_picker, "show_keys": keys_box})
display(widgets.HBox([model_picker, keys_box]), figure_output)

# %% [markdown]
# ## 9. Putting it together
#
# We build a PyTorch MLP, load its weights into our `MLP` by key, and check that both give the
# same outputs. Then we train both for a few steps on the same regression task, ours with our
# `SGD` and the engine in save mode `"check"`, torch's with `torch.optim.SGD`, and print both
# losses: they agree to rounding, step after step. Last, we run `step()` between a forward pass
# and its backward pass, the classic ordering bug, and our engine refuses it as torch would.

# %% nbgrader={"grade": false, "grade_id": "putting_it_together", "locked": true, "schema_version": 3, "solution": false, "task": false}
import torch
from torch.optim.sgd import sgd as torch_sgd

with checks.when_written("this example"):
    torch.manual_seed(0)
    torch_model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).double()
    ours = MLP([4, 16, 3], rng=0)
    ours.load_state_dict({k: v.detach().numpy().copy() for k, v in torch_model.state_dict().items()})

    data_rng = np.random.default_rng(0)
    X = data_rng.standard_normal((64, 4))
    Y = np.sin(X @ data_rng.standard_normal((4, 3)))
    with torch.no_grad():
        gap = np.abs(ours(Tensor(X)).data - torch_model(torch.from_numpy(X)).numpy()).max()
    print(f"largest difference between the outputs after loading: {gap:.2e}")

    our_opt = SGD(ours.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    # torch_sgd is the update that torch.optim.SGD.step applies; we call it directly because building
    # the SGD object imports torch's compiler, which takes seconds.
    torch_params = list(torch_model.parameters())
    torch_buffers = [None] * len(torch_params)
    for step in range(6):
        with save_mode("check"):
            ours.zero_grad()
            diff = ours(Tensor(X)) - Tensor(Y)
            loss = (diff * diff).mean()
            loss.backward()
        our_opt.step()
        torch_model.zero_grad()
        torch_loss = torch.nn.functional.mse_loss(torch_model(torch.from_numpy(X)), torch.from_numpy(Y))
        torch_loss.backward()
        with torch.no_grad():
            torch_sgd(torch_params, [p.grad for p in torch_params], torch_buffers, weight_decay=1e-3,
                      momentum=0.9, lr=0.1, dampening=0.0, nesterov=False, maximize=False, foreach=False)
        print(f"step {step}: our loss {loss.data.item():.6f}   torch's loss {torch_loss.item():.6f}")

    with save_mode("check"):
        diff = ours(Tensor(X)) - Tensor(Y)
        loss = (diff * diff).mean()
        our_opt.step()  # the bug: the weights move between forward and backward
        try:
            loss.backward()
        except RuntimeError as exc:
            print("step() before backward():", exc)

# %% [markdown]
# ## Summary
#
# - Basic indexing and most reshapes return views, advanced indexing and `flatten` return copies;
#   an edit through a view reaches its base, and `np.shares_memory` tells which arrays alias.
# - An engine that saves arrays by reference gives a wrong gradient, silently, when a saved array is
#   edited in place between forward and backward.
# - Version counters catch it: in-place ops bump a counter that views share with their base,
#   saving records the versions, and backward raises torch's `RuntimeError` if one moved on. The
#   check is cheap and conservative. Saving copies makes the edit harmless instead, at the cost of
#   one copy of every saved array.
# - A `Module` registers `Parameter`s and sub-modules in `__setattr__`, and buffers with
#   `register_buffer`; `named_parameters()` walks the tree depth first, own entries first, each
#   tied parameter once, while `state_dict()` lists every name and leaves out non-persistent
#   buffers. Its values alias the model: copy them for a snapshot.
# - `load_state_dict` copies in place and reports missing keys, unexpected keys and size
#   mismatches as torch does, so a torch model's weights load into our `MLP` and give its outputs.
# - `SGD` adds weight decay to the gradient, then applies momentum, and updates the parameters in
#   place, so their versions move on: stepping between forward and backward is caught.
#
# Next, in the mini-project (unit 1.8), we assemble the whole engine, with the broadcasting ops,
# the layout rules of unit 1.6 and the guards of this unit, and test it against PyTorch with
# differential checks.

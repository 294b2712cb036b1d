# %% [markdown]
# # 1.8 Mini-project: tensor reverse-mode engine with differential checks
#
# In units 1.1 to 1.7 we built every piece of a small deep-learning library one at a time: affine
# layers, stable losses, reverse accumulation, broadcasting, gradient checks, layouts and modules.
# In this capstone we write the whole engine again, in one notebook, from a bare `Tensor`/`Function`
# skeleton, and we train a real classifier with it. Then we turn the question around: how do we
# know an engine is right? We write our own **differential tests**, which compare an engine with
# PyTorch and with finite differences, and the grader measures them by how many engines with
# planted bugs they catch.
#
# ## Learning goals
#
# After this unit we can:
#
# 1. write a broadcast-aware reverse-mode tensor engine (elementwise ops, `MatMul`, reductions,
#    shape ops and a fused, stable cross-entropy) whose every gradient matches PyTorch in float64;
# 2. run reverse accumulation over a topological order without recursion, with PyTorch's rules for
#    the seed, for leaves and for repeated calls;
# 3. build `Module`, `Linear`, `MLP` and `SGD` with PyTorch's `state_dict` keys and update rule, so
#    that weights move between our engine and PyTorch unchanged;
# 4. write differential tests (random broadcast shape pairs, random upstream gradients, a branched
#    graph against central differences) and judge a test suite by the bugs it catches;
# 5. train a two-layer MLP on a 3-class spiral to at least 95% training accuracy, and justify every
#    tolerance and step size we used in writing.
#
# ## Readings
#
# - **Understanding Deep Learning** (Prince), chapters 6 (fitting models: SGD, momentum) and 7
#   (gradients: backpropagation and its algorithmic view). <https://udlbook.github.io/udlbook/>
# - **Dive into Deep Learning**, 2.5 *Automatic Differentiation*, 5.3 *Forward Propagation,
#   Backward Propagation, and Computational Graphs*, 5.2 *Implementation of Multilayer
#   Perceptrons* and 12.6 *Momentum*. <https://d2l.ai>
# - **CS231n**, *Neural Networks Case Study* (the spiral data set and a two-layer network trained
#   on it) and *Neural Networks 3*, section *Gradient checks* (centered formula, relative error,
#   step size, kinks). <https://cs231n.github.io/>
# - **PyTorch documentation**: *Broadcasting semantics*, *Autograd mechanics*, *Extending
#   torch.autograd*, `torch.nn.Module` (`state_dict`), `torch.nn.functional.cross_entropy`,
#   `torch.optim.SGD` (the update rule with momentum and weight decay) and
#   `torch.autograd.gradcheck`. <https://pytorch.org/docs/stable/>
#
# ## How this notebook works
#
# Each exercise has a heading with its task ID, the math, a worked example, a cell for our code and
# a test cell. The visible checks in each test cell are small; when the notebook is graded, hidden
# checks of the same kinds run with other seeds, comparing our engine with PyTorch and with central
# finite differences in float64, with random upstream gradients, a zero upstream gradient, size-1
# and 0-d shapes and non-contiguous inputs. The rules:
#
# - **NumPy only in the engine.** An op, module or optimizer that calls torch earns no points for
#   its exercise. Our *differential tests* (part 5) are the exception: comparing with PyTorch is
#   their job.
# - **Same dtype as torch.** float32 in, float32 out.
# - **No warnings.** A NumPy `RuntimeWarning` fails the check: nbgrader gives no points to a test
#   cell that writes to stderr.
# - **Later parts use earlier ones.** `backward` is tested on graphs of our ops, the modules on
#   our `MatMul` and `Add`, training on everything. Fix the first failing test first.
#
# | part | task | points |
# |---|---|---|
# | 1 | `unbroadcast` | 4 |
# | 2 | `binary_ops` | 10 |
# | 2 | `reductions` | 6 |
# | 2 | `unary_ops` | 6 |
# | 2 | `cross_entropy` | 6 |
# | 3 | `backward` (two test cells: gradients, and PyTorch's rules) | 8 + 4 |
# | 4 | `modules` | 6 |
# | 4 | `sgd` | 5 |
# | 5 | concept check `fd_step` | 2 |
# | 5 | `differential_tests` (scored by the planted bugs caught) | 20 |
# | 6 | `train_step` | 8 |
# | 7 | `note` (written, graded by hand) | 15 |
# | | **total** | **100** |

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math
import types
import warnings

import numpy as np

from autograder.inside import checks

# The one exercise where torch is the point: the differential tests compare our engine with
# PyTorch. Everywhere else a solution that calls torch earns no points.
TORCH_TASKS = ("differential_tests",)

# %% [markdown]
# ## 1. The skeleton, and broadcasting's adjoint
#
# The next cell (locked) is all we are given: the three classes of units 1.3 and 1.4, modelled on
# `torch.autograd`.
#
# - `Context`: shared by one forward call and the matching backward call.
#   `ctx.save_for_backward(*values)` keeps arrays (or shapes) for backward, which reads them back from
#   `ctx.saved_tensors`; options such as `axis` are plain attributes (`ctx.axis = axis`).
# - `Function`: the base class of every op. A subclass defines `forward(ctx, *arrays, **options)`,
#   computing on NumPy arrays, and `backward(ctx, grad)`, which receives $\bar c = \partial L /
#   \partial c$ (always called `grad`) and returns one gradient per positional input of forward,
#   in order (`None` for an input that needs none, such as integer targets). We call
#   `Mul.apply(a, b)`, never `forward` directly: `apply` unwraps tensors, runs forward with a fresh
#   `Context`, and links the result into the graph (`out.fn`, `out.ctx`, `out.inputs`) when some
#   input requires grad.
# - `Tensor`: an array `data` with `requires_grad`, `grad` and the links above. Its operators
#   (`+ - * / @`, unary `-`, `.sum()`, `.mean()`, `.exp()`, `.log()`, `.tanh()`, `.relu()`,
#   `.reshape()`, `.transpose()`, `.T`) look our op classes up by name when they run, and
#   `t.backward(grad)` calls the function `backward` of part 3. A Python number in an expression
#   takes the tensor's dtype, as in torch (`float32 tensor * 2.0` stays float32). Integer arrays
#   stay integer (class targets), and only floating tensors may require grad.

# %% nbgrader={"grade": false, "grade_id": "skeleton", "locked": true, "schema_version": 3, "solution": false, "task": false}
class Context:
    """Scratch space shared by one forward call and the matching backward call."""

    def __init__(self):
        self.saved_tensors = ()

    def save_for_backward(self, *values):
        """Keep arrays (or shapes) for backward, which reads them from ``ctx.saved_tensors``."""
        self.saved_tensors = values


class Function:
    """Base class of the ops. Subclasses define ``forward`` and ``backward``; call ``apply``."""

    @staticmethod
    def forward(ctx, *arrays, **options):
        """Compute the result from NumPy arrays; save what backward needs on ``ctx``."""
        raise NotImplementedError

    @staticmethod
    def backward(ctx, grad):
        """Given dL/d(output), return dL/d(input) for each positional input of forward, in order."""
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs, **options):
        """Run the op on tensors (numbers and arrays become constant tensors)."""
        inputs = tuple(t if isinstance(t, Tensor) else Tensor(t) for t in inputs)
        ctx = Context()
        out = Tensor(cls.forward(ctx, *[t.data for t in inputs], **options))
        if any(t.requires_grad for t in inputs):  # record the step only where a gradient can flow
            out.requires_grad = True
            out.fn = cls  # the Function,
            out.ctx = ctx  # what its forward saved,
            out.inputs = inputs  # and the tensors it read
        return out


class Tensor:
    """A NumPy array that remembers how it was computed."""

    __array_ufunc__ = None  # so that `array * tensor` calls Tensor.__rmul__ instead of NumPy

    def __init__(self, data, requires_grad=False):
        self.data = np.asarray(data.data if isinstance(data, Tensor) else data)
        if requires_grad and not np.issubdtype(self.data.dtype, np.floating):
            raise RuntimeError(f"only floating point tensors can require grad (this one is {self.data.dtype})")
        self.requires_grad = bool(requires_grad)
        self.grad = None  # filled in by backward, for leaves that require grad
        self.fn = None  # the Function that made this tensor (None for a leaf)
        self.ctx = None  # what that Function saved
        self.inputs = ()  # the tensors this one was computed from

    shape = property(lambda t: t.data.shape)
    ndim = property(lambda t: t.data.ndim)
    dtype = property(lambda t: t.data.dtype)
    is_leaf = property(lambda t: t.fn is None)

    def __repr__(self):
        origin = f"fn={self.fn.__name__}" if self.fn else f"requires_grad={self.requires_grad}"
        return f"Tensor({np.array2string(self.data, precision=4)}, {origin})"

    def item(self):
        return self.data.item()

    def backward(self, grad=None):
        backward(self, grad)  # the function written in part 3

    def _lift(self, other):
        """A Python number takes this tensor's dtype (as in torch); anything else becomes a Tensor."""
        if isinstance(other, Tensor):
            return other
        if isinstance(other, (int, float)):
            return Tensor(np.array(other, dtype=np.result_type(self.data.dtype, other)))
        return Tensor(other)

    def _binary(self, name, other, reflected=False):
        """Apply the op class called ``name``, looked up when the operator runs."""
        other = self._lift(other)
        return globals()[name].apply(*((other, self) if reflected else (self, other)))

    __add__ = lambda self, other: self._binary("Add", other)
    __radd__ = lambda self, other: self._binary("Add", other, reflected=True)
    __sub__ = lambda self, other: self._binary("Sub", other)
    __rsub__ = lambda self, other: self._binary("Sub", other, reflected=True)
    __mul__ = lambda self, other: self._binary("Mul", other)
    __rmul__ = lambda self, other: self._binary("Mul", other, reflected=True)
    __truediv__ = lambda self, other: self._binary("Div", other)
    __rtruediv__ = lambda self, other: self._binary("Div", other, reflected=True)
    __matmul__ = lambda self, other: self._binary("MatMul", other)
    __rmatmul__ = lambda self, other: self._binary("MatMul", other, reflected=True)
    __neg__ = lambda self: self._binary("Sub", 0, reflected=True)

    def sum(self, axis=None, keepdims=False):
        return Sum.apply(self, keepdims=keepdims, axis=axis)

    def mean(self, axis=None, keepdims=False):
        return Mean.apply(self, keepdims=keepdims, axis=axis)

    def exp(self):
        return Exp.apply(self)

    def log(self):
        return Log.apply(self)

    def tanh(self):
        return Tanh.apply(self)

    def relu(self):
        return ReLU.apply(self)

    def reshape(self, *shape):
        """``t.reshape(2, 3)`` or ``t.reshape((2, 3))``; one size may be -1."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return Reshape.apply(self, shape=tuple(shape))

    def transpose(self, dim0, dim1):
        return Transpose.apply(self, dim1=dim1, dim0=dim0)

    T = property(lambda t: t.transpose(0, 1))


# %% [markdown]
# ### Broadcasting and its adjoint
#
# NumPy and torch broadcast by aligning shapes on the right: missing leading axes count as size 1,
# and an axis of size 1 is stretched to the other operand's size. So $z = a + b$ with $a$ of shape
# $(2, 3)$ and $b$ of shape $(3,)$ uses every $b_j$ twice: $z_{ij} = a_{ij} + b_j$. By the chain
# rule a value used several times receives the **sum** of the gradients of its uses:
#
# $$\bar b_j = \sum_i \bar z_{ij}.$$
#
# In general, if $b$ was broadcast from shape $s$ to the shape of $\bar z$, then $\bar b$ is $\bar z$
# summed over the prepended axes and over every axis where $s$ has size 1 (kept, with size 1), so
# that $\bar b$ has exactly the shape $s$. The adjoint of broadcast is sum (PyTorch docs,
# *Broadcasting semantics*, "backwards compatibility"; unit 1.4).
#
# **Worked example.** $\bar z = \begin{pmatrix} 1 & 2 & 3 \\ 4 & 5 & 6 \end{pmatrix}$: for $s = (3,)$
# we sum the prepended axis 0 and get $(5, 7, 9)$; for $s = (2, 1)$ we sum axis 1 and keep it, giving
# $\begin{pmatrix} 6 \\ 15 \end{pmatrix}$; for $s = (1, 1)$ we get $((21))$; for $s = ()$ the 0-d
# $21$; and for $s = (2, 3)$ nothing changes.
#
# ### Exercise `unbroadcast`

# %% nbgrader={"grade": false, "grade_id": "unbroadcast", "locked": false, "schema_version": 3, "solution": true, "task": false}
def unbroadcast(grad, shape):
    """Sum ``grad`` over the axes that broadcasting ``shape`` to ``grad.shape`` added or stretched.

    Those are the leading axes that ``shape`` lacks, and the axes where ``shape`` has size 1 but
    ``grad`` does not (kept with size 1). The result has exactly ``shape``.
    """
    ### BEGIN SOLUTION
    grad = np.asarray(grad)
    lead = grad.ndim - len(shape)
    stretched = tuple(lead + i for i, size in enumerate(shape) if size == 1 and grad.shape[lead + i] != 1)
    return np.asarray(grad.sum(axis=tuple(range(lead)) + stretched)).reshape(shape)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_unbroadcast", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# unbroadcast(G, shape) must equal the gradient of sum(G * broadcast_to(b, G.shape)) with respect to b:
# the oracle "sum_to" is torch's own adjoint of broadcasting (Tensor.sum_to_size).
worked_G = np.arange(1.0, 7.0).reshape(2, 3)
worked = [checks.case(f"worked example, shape {s}", worked_G, s) for s in [(3,), (2, 1), (1, 1), (), (2, 3)]]
checks.against_torch("unbroadcast", unbroadcast, "sum_to", worked)
checks.against_torch("unbroadcast", unbroadcast, "sum_to",
                     [checks.case("non-contiguous G, shape (4, 1)", checks.strided(checks.randn(1, 4, 3)), (4, 1)),
                      checks.case("3-D to (1, 3, 1)", checks.randn(2, 2, 3, 4), (1, 3, 1))])
### BEGIN HIDDEN TESTS
rng_u = np.random.default_rng(7)
hidden_u = []
for k in range(8):
    full = tuple(int(n) for n in rng_u.integers(1, 4, size=rng_u.integers(0, 4)))
    keep = full[rng_u.integers(0, len(full) + 1):]
    shape = tuple(1 if rng_u.random() < 0.4 else n for n in keep)
    hidden_u.append(checks.case(f"random #{k}", checks.randn(100 + k, *full), shape))
checks.against_torch("unbroadcast", unbroadcast, "sum_to", hidden_u)
### END HIDDEN TESTS

# %% [markdown]
# ## 2. The ops
#
# Each op is one small class: forward computes on arrays and saves exactly what backward needs;
# backward returns one vector-Jacobian product per input. The table of units 1.3 and 1.4, which
# we now rebuild, is:
#
# | op | forward | saved | backward (to each input, before `unbroadcast`) |
# |---|---|---|---|
# | `Add` | $a + b$ | shapes | $\bar z$, $\bar z$ |
# | `Sub` | $a - b$ | shapes | $\bar z$, $-\bar z$ |
# | `Mul` | $a \odot b$ | $a, b$ | $\bar z \odot b$, $\bar z \odot a$ |
# | `Div` | $a / b$ | $a, b$ | $\bar z / b$, $-\bar z \odot a / b^2$ |
# | `MatMul` | $A B$ (2-D) | $A, B$ | $\bar Z B^\top$, $A^\top \bar Z$ |
#
# Each binary op broadcasts, so its backward ends with `unbroadcast` to each operand's shape, with
# the comment `# adjoint of broadcast is sum`. `MatMul` multiplies 2-D arrays only (no broadcasting).
#
# **Worked example.** $a = \begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}$, $b = (10, 20)$ (shape
# $(2,)$) and $\bar z = \begin{pmatrix} 1 & 0 \\ 0 & 2 \end{pmatrix}$. For `Mul`:
# $\bar a = \bar z \odot b = \begin{pmatrix} 10 & 0 \\ 0 & 40 \end{pmatrix}$ and
# $\bar b = \sum_i (\bar z \odot a)_{i\cdot} = (1, 0) + (0, 8) = (1, 8)$. For `Div`:
# $\bar b = \sum_i -\bar z_{ij} a_{ij} / b_j^2 = (-1/100, -8/400) = (-0.01, -0.02)$.
#
# ### Exercise `binary_ops`

# %% nbgrader={"grade": false, "grade_id": "binary_ops", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Add(Function):
    """a + b, broadcasting. Saves the two shapes (as ctx attributes), not the values."""

    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.a_shape, ctx.b_shape = a.shape, b.shape
        return a + b
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        # adjoint of broadcast is sum
        return unbroadcast(grad, ctx.a_shape), unbroadcast(grad, ctx.b_shape)
        ### END SOLUTION


class Sub(Function):
    """a - b, broadcasting. Saves the two shapes."""

    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.a_shape, ctx.b_shape = a.shape, b.shape
        return a - b
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        # adjoint of broadcast is sum
        return unbroadcast(grad, ctx.a_shape), unbroadcast(-grad, ctx.b_shape)
        ### END SOLUTION


class Mul(Function):
    """a * b, elementwise, broadcasting. Saves (a, b)."""

    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.save_for_backward(a, b)
        return a * b
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        a, b = ctx.saved_tensors
        # adjoint of broadcast is sum
        return unbroadcast(grad * b, a.shape), unbroadcast(grad * a, b.shape)
        ### END SOLUTION


class Div(Function):
    """a / b, elementwise, broadcasting. Saves (a, b)."""

    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.save_for_backward(a, b)
        return a / b
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        a, b = ctx.saved_tensors
        # adjoint of broadcast is sum
        return unbroadcast(grad / b, a.shape), unbroadcast(-grad * a / (b * b), b.shape)
        ### END SOLUTION


class MatMul(Function):
    """A @ B for 2-D arrays A (n, k) and B (k, m). Saves (A, B)."""

    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.save_for_backward(a, b)
        return a @ b
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        a, b = ctx.saved_tensors
        return grad @ b.T, a.T @ grad
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_binary_ops", "locked": true, "points": 10, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# check_function: forward against torch, backward against torch autograd and central differences
# (random float64 upstream grad), a zero upstream grad gives zero grads, non-contiguous inputs give
# the same results. The shape pairs broadcast in every way: prepended axes, stretched size-1 axes
# on either side, 0-d operands.
worked_a, worked_b = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([10.0, 20.0])
pairs = [((2, 3), (3,)), ((3, 1), (1, 4)), ((), (2, 2)), ((2, 1, 3), (4, 1))]
for Op, oracle in [(Add, "add"), (Sub, "sub"), (Mul, "mul")]:
    checks.check_function("binary_ops", Op, oracle, [checks.case(f"{Op.__name__}, worked example", worked_a, worked_b)]
                          + checks.random_cases(1, pairs, label=Op.__name__), names=["a", "b"], seed=1)
checks.check_function("binary_ops", Div, "div", [checks.case("Div, worked example", worked_a, worked_b)]
                      + checks.random_cases(2, pairs, label="Div", positive=True), names=["a", "b"], seed=2)
checks.check_function("binary_ops", MatMul, "matmul", checks.random_cases(3, [((2, 3), (3, 4)), ((3, 3), (3, 3)),
                                                                              ((1, 2), (2, 1))], label="MatMul"),
                      names=["A", "B"], seed=3)
### BEGIN HIDDEN TESTS
hidden_pairs = [((4, 1, 2), (3, 1)), ((1,), (2, 3)), ((2, 2), ()), ((1, 3), (2, 1)), ((3,), (3,))]
for n, (Op, oracle) in enumerate([(Add, "add"), (Sub, "sub"), (Mul, "mul")]):
    checks.check_function("binary_ops", Op, oracle, checks.random_cases(10 + n, hidden_pairs, label=Op.__name__),
                          names=["a", "b"], seed=10 + n)
checks.check_function("binary_ops", Div, "div", checks.random_cases(13, hidden_pairs, label="Div", positive=True),
                      names=["a", "b"], seed=13)
checks.check_function("binary_ops", MatMul, "matmul", checks.random_cases(14, [((4, 2), (2, 4)), ((2, 2), (2, 2)),
                                                                               ((1, 1), (1, 3))], label="MatMul"),
                      names=["A", "B"], seed=14)
### END HIDDEN TESTS

# %% [markdown]
# ### Reductions
#
# `Sum` with `axis` (None, an int or a tuple of ints) and `keepdims` adds entries together, so each
# input entry receives the gradient of the one output entry it went into: backward puts the reduced
# axes back (with `np.expand_dims`, unless `keepdims` kept them) and broadcasts $\bar z$ to the
# input's shape. `Mean` is `Sum` divided by the number of entries reduced, $n = \prod_{k \in
# \text{axes}} s_k$ (all entries when `axis` is None), so its backward is the same divided by $n$.
# Both save only the input's shape.
#
# **Worked example.** $x$ of shape $(2, 3)$, `Mean(axis=1)` gives shape $(2,)$; with
# $\bar z = (3, 6)$, every entry of row 0 receives $3/3 = 1$ and every entry of row 1 receives
# $6/3 = 2$. With `axis=(0, 1)` and $\bar z = 6$, every entry receives $6/6 = 1$.
#
# ### Exercise `reductions`

# %% nbgrader={"grade": false, "grade_id": "reductions", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Sum(Function):
    """a.sum(axis, keepdims); axis is None, an int or a tuple. Saves a's shape."""

    @staticmethod
    def forward(ctx, a, *, axis=None, keepdims=False):
        ### BEGIN SOLUTION
        ctx.axis, ctx.keepdims = axis, keepdims
        ctx.save_for_backward(a.shape)
        return a.sum(axis=axis, keepdims=keepdims)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        (shape,) = ctx.saved_tensors
        if ctx.axis is not None and not ctx.keepdims:
            grad = np.expand_dims(grad, ctx.axis)
        return np.broadcast_to(grad, shape).copy()
        ### END SOLUTION


class Mean(Function):
    """a.mean(axis, keepdims); axis is None, an int or a tuple. Saves a's shape."""

    @staticmethod
    def forward(ctx, a, *, axis=None, keepdims=False):
        ### BEGIN SOLUTION
        ctx.axis, ctx.keepdims = axis, keepdims
        ctx.save_for_backward(a.shape)
        return a.mean(axis=axis, keepdims=keepdims)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        (shape,) = ctx.saved_tensors
        axes = range(len(shape)) if ctx.axis is None else np.atleast_1d(ctx.axis)
        count = math.prod(shape[k] for k in axes)
        if ctx.axis is not None and not ctx.keepdims:
            grad = np.expand_dims(grad, ctx.axis)
        return np.broadcast_to(grad, shape) / count
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_reductions", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
x23, x234 = checks.randn(20, 2, 3), checks.randn(21, 2, 3, 4)
reduction_cases = [checks.case("worked example, axis=1", x23, axis=1),
                   checks.case("axis=(0, 1)", x23, axis=(0, 1)),
                   checks.case("axis=None", x23),
                   checks.case("axis=-1, keepdims", x234, axis=-1, keepdims=True),
                   checks.case("axis=(0, 2)", x234, axis=(0, 2)),
                   checks.case("axis=None, keepdims", x234, keepdims=True),
                   checks.case("0-d", checks.randn(22))]
checks.check_function("reductions", Sum, "sum", reduction_cases, seed=20)
checks.check_function("reductions", Mean, "mean", reduction_cases, seed=21)


# float32 in, float32 out: forward, and backward with a float32 upstream gradient, against torch
def forward_of(Fn):
    return lambda a, **options: Fn.forward(Context(), a, **options)


def backward_of(Fn):
    def gradient(a, grad, **options):
        ctx = Context()
        Fn.forward(ctx, a, **options)
        g = Fn.backward(ctx, grad)
        return g[0] if isinstance(g, tuple) else g
    return gradient


def float32_cases(x, axes, seed):
    """(forward cases, backward cases) of float32 x, one per (label, options), upstream drawn from seed."""
    forward, backward = [], []
    for k, (label, options) in enumerate(axes):
        shape = np.sum(x, **options).shape
        forward.append(checks.case(f"float32, {label}", x, **options))
        backward.append(checks.case(f"float32, {label}", x, checks.randn(seed + k, *shape, dtype=np.float32), **options))
    return forward, backward


def check_float32(cases):
    for Fn, name in ((Sum, "sum"), (Mean, "mean")):
        checks.against_torch("reductions", forward_of(Fn), name, cases[0])
        checks.against_torch("reductions", backward_of(Fn), f"{name}_backward", cases[1])


check_float32(float32_cases(checks.randn(26, 2, 3, dtype=np.float32), [("axis=1", dict(axis=1)),
                                                                        ("axis=None, keepdims", dict(keepdims=True))], 27))
### BEGIN HIDDEN TESTS
y = checks.randn(23, 3, 1, 2)
hidden_red = [checks.case("axis=1 (size 1)", y, axis=1), checks.case("axis=(-1, 0), keepdims", y, axis=(-1, 0), keepdims=True),
              checks.case("axis=2", y, axis=2), checks.case("non-square axis=0", checks.randn(24, 5, 2), axis=0),
              checks.case("1-D", checks.randn(25, 4), axis=0)]
checks.check_function("reductions", Sum, "sum", hidden_red, seed=22)
checks.check_function("reductions", Mean, "mean", hidden_red, seed=23)
check_float32(float32_cases(checks.randn(29, 3, 1, 4, dtype=np.float32), [("axis=(0, 2)", dict(axis=(0, 2))),
                                                                           ("axis=-1, keepdims", dict(axis=-1, keepdims=True)),
                                                                           ("axis=None", {})], 30))
### END HIDDEN TESTS

# %% [markdown]
# ### Unary and shape ops
#
# | op | forward | saved | backward |
# |---|---|---|---|
# | `Exp` | $e^x$ | the output $y$ | $\bar y \odot y$ |
# | `Log` | $\log x$ | the input $x$ | $\bar y / x$ |
# | `Tanh` | $\tanh x$ | the output $y$ | $\bar y \odot (1 - y^2)$ |
# | `ReLU` | $\max(x, 0)$ | the mask $x > 0$ | $\bar y \odot [x > 0]$ (0 at the kink $x = 0$, as torch) |
# | `Reshape` | `x.reshape(shape)` | the input shape | $\bar y$ reshaped back |
# | `Transpose` | swap axes `dim0`, `dim1` | nothing | swap them back |
#
# `Exp` and `Tanh` save their *output* because their derivatives are functions of it, and saving
# it costs nothing extra (it exists anyway). `ReLU` saves a boolean mask: one byte per entry and no
# reference to the input, which may be edited later (unit 1.7).
#
# **Worked example.** $x = (0, \log 2)$: `Exp` gives $y = (1, 2)$ and, with $\bar y = (3, 1)$,
# $\bar x = (3, 2)$. `ReLU` at $x = (-1, 0, 2)$ with $\bar y = (1, 1, 1)$ gives $(0, 0, 1)$. For
# `Transpose(0, 1)` of a $(2, 3)$ input, $\bar y$ has shape $(3, 2)$ and $\bar x = \bar y^\top$.
#
# ### Exercise `unary_ops`

# %% nbgrader={"grade": false, "grade_id": "unary_ops", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Exp(Function):
    """exp(x). Saves the output."""

    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        y = np.exp(x)
        ctx.save_for_backward(y)
        return y
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        (y,) = ctx.saved_tensors
        return grad * y
        ### END SOLUTION


class Log(Function):
    """log(x). Saves the input."""

    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        ctx.save_for_backward(x)
        return np.log(x)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        (x,) = ctx.saved_tensors
        return grad / x
        ### END SOLUTION


class Tanh(Function):
    """tanh(x). Saves the output."""

    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        y = np.tanh(x)
        ctx.save_for_backward(y)
        return y
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        (y,) = ctx.saved_tensors
        return grad * (1 - y * y)
        ### END SOLUTION


class ReLU(Function):
    """max(x, 0), with gradient 0 at x = 0 (as torch). Saves the mask x > 0."""

    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        ctx.save_for_backward(x > 0)
        return np.maximum(x, 0)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        (mask,) = ctx.saved_tensors
        return grad * mask
        ### END SOLUTION


class Reshape(Function):
    """x.reshape(shape). Saves the input shape."""

    @staticmethod
    def forward(ctx, x, *, shape):
        ### BEGIN SOLUTION
        ctx.save_for_backward(x.shape)
        return x.reshape(shape)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        (shape,) = ctx.saved_tensors
        return grad.reshape(shape)
        ### END SOLUTION


class Transpose(Function):
    """x with axes dim0 and dim1 swapped. Saves nothing (dim0, dim1 as ctx attributes)."""

    @staticmethod
    def forward(ctx, x, *, dim0, dim1):
        ### BEGIN SOLUTION
        ctx.dim0, ctx.dim1 = dim0, dim1
        return np.swapaxes(x, dim0, dim1)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        return np.swapaxes(grad, ctx.dim0, ctx.dim1)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_unary_ops", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
unary_shapes = [((2, 3),), ((1,),), ((),), ((3, 1, 2),)]
checks.check_function("unary_ops", Exp, "exp", [checks.case("worked example", np.array([0.0, np.log(2.0)]))]
                      + checks.random_cases(30, unary_shapes, label="Exp"), seed=30)
checks.check_function("unary_ops", Log, "log", checks.random_cases(31, unary_shapes, label="Log", positive=True), seed=31)
checks.check_function("unary_ops", Tanh, "tanh", checks.random_cases(32, unary_shapes, label="Tanh"), seed=32)
checks.check_function("unary_ops", ReLU, "relu", checks.random_cases(33, unary_shapes, label="ReLU"), seed=33)
# The kink: torch's ReLU has gradient 0 at exactly 0 (finite differences would say 1/2 there, so
# this case is compared with torch alone).
checks.check_function("unary_ops", ReLU, "relu", [checks.case("the kink x = 0", np.array([-1.0, 0.0, 2.0, 0.0]))],
                      seed=34, fd=False)
checks.check_function("unary_ops", Reshape, "reshape", [checks.case("(2, 3) -> (3, 2)", checks.randn(35, 2, 3), shape=(3, 2)),
                                                         checks.case("-1", checks.randn(36, 2, 2, 3), shape=(-1, 3))], seed=35)
checks.check_function("unary_ops", Transpose, "transpose",
                      [checks.case("worked example", checks.randn(37, 2, 3), dim0=0, dim1=1),
                       checks.case("3-D, axes 0 and 2", checks.randn(38, 2, 3, 4), dim0=0, dim1=2)], seed=37)
### BEGIN HIDDEN TESTS
hidden_unary = [((4, 2),), ((2, 1, 3),), ((),)]
checks.check_function("unary_ops", Exp, "exp", checks.random_cases(40, hidden_unary, label="Exp"), seed=40)
checks.check_function("unary_ops", Log, "log", checks.random_cases(41, hidden_unary, label="Log", positive=True), seed=41)
checks.check_function("unary_ops", Tanh, "tanh", checks.random_cases(42, hidden_unary, label="Tanh"), seed=42)
checks.check_function("unary_ops", ReLU, "relu", checks.random_cases(43, hidden_unary, label="ReLU"), seed=43)
checks.check_function("unary_ops", ReLU, "relu", [checks.case("zeros", np.zeros((2, 2)))], seed=44, fd=False)
checks.check_function("unary_ops", Reshape, "reshape", [checks.case("to 0-d", checks.randn(45, 1, 1), shape=()),
                                                         checks.case("(4,) -> (2, 1, 2)", checks.randn(46, 4), shape=(2, 1, 2))], seed=45)
hidden_transpose = [checks.case("negative dims", checks.randn(47, 3, 2, 4), dim0=-1, dim1=-2),
                    checks.case("same dim", checks.randn(48, 2, 3), dim0=1, dim1=1)]
checks.check_function("unary_ops", Transpose, "transpose", hidden_transpose, seed=47)
### END HIDDEN TESTS

# %% [markdown]
# ### The fused cross-entropy
#
# For logits $z$ of shape $(N, C)$ and integer targets $t$, unit 1.2 computed
# $\ell_n = \operatorname{logsumexp}(z_n) - z_{n, t_n}$ stably, with the max shift
# $\operatorname{logsumexp}(z_n) = m_n + \log \sum_j e^{z_{nj} - m_n}$, $m_n = \max_j z_{nj}$, so
# float32 logits of magnitude $10^3$ give a finite loss. The shift changes nothing in exact
# arithmetic, so the gradient is unchanged:
#
# $$\frac{\partial \ell_n}{\partial z_{nc}} = \mathrm{softmax}(z_n)_c - [c = t_n].$$
#
# Fusing the loss into one op lets backward use this short formula instead of differentiating
# `log`, `exp` and `sum`. `reduction` is `"mean"` (divide the sum by the number of targets that are
# *not* `ignore_index`), `"sum"` or `"none"` (one loss per row; then $\bar z$ row $n$ is scaled by
# $\bar\ell_n$); rows whose target is `ignore_index` give loss 0 and gradient 0. Forward saves the
# probabilities (computed stably) and the targets; backward returns `None` for the targets.
#
# **Worked example.** $z = \begin{pmatrix} 0 & 0 \\ 1000 & 0 \end{pmatrix}$ in float32, $t = (0, 1)$:
# row 0 has $\ell_0 = \log 2 \approx 0.693$, row 1 has $m = 1000$ and
# $\ell_1 = 1000 + \log(1 + e^{-1000}) - 0 = 1000$; the mean is $500.35$. Without the shift,
# $e^{1000}$ overflows to `inf` and the loss is `nan`. The gradient of the mean is
# $\frac12 \begin{pmatrix} -0.5 & 0.5 \\ 1 & -1 \end{pmatrix}$. With `ignore_index=1` the second row
# is ignored and the mean is $0.693 / 1$.
#
# ### Exercise `cross_entropy`

# %% nbgrader={"grade": false, "grade_id": "cross_entropy", "locked": false, "schema_version": 3, "solution": true, "task": false}
class CrossEntropy(Function):
    """F.cross_entropy(logits, target, reduction=..., ignore_index=...) for logits (N, C) and
    integer targets (N,). Stable for float32 logits of magnitude 1e3; keeps the logits' dtype.
    Saves the probabilities and the targets; backward returns (grad_logits, None)."""

    @staticmethod
    def forward(ctx, logits, target, *, reduction="mean", ignore_index=-100):
        ### BEGIN SOLUTION
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        kept = target != ignore_index
        picked = log_probs[np.arange(len(target)), np.where(kept, target, 0)]
        losses = np.where(kept, -picked, 0).astype(logits.dtype)
        ctx.reduction, ctx.ignore_index = reduction, ignore_index
        ctx.save_for_backward(np.exp(log_probs), target)
        if reduction == "none":
            return losses
        if reduction == "sum":
            return losses.sum()
        return losses.sum() / logits.dtype.type(kept.sum())
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        probs, target = ctx.saved_tensors
        kept = target != ctx.ignore_index
        out = probs.copy()
        out[np.arange(len(target)), np.where(kept, target, 0)] -= 1  # softmax minus one-hot
        out *= kept[:, None]
        if ctx.reduction == "none":
            return out * grad[:, None], None
        count = kept.sum() if ctx.reduction == "mean" else 1
        return out * (grad / out.dtype.type(count)), None  # a count of the logits' dtype keeps float32 float32
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_cross_entropy", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# float64 logits: forward, and the gradient of the logits against torch and central differences.
# float32 logits of magnitude 1e3: the loss and the gradient of the mean must be finite and match torch.
def ce_forward(logits, target, **options):
    return CrossEntropy.forward(Context(), logits, target, **options)


def ce_mean_grad(logits, target, **options):
    ctx = Context()
    CrossEntropy.forward(ctx, logits, target, **options)
    return CrossEntropy.backward(ctx, np.ones((), logits.dtype))[0]


targets5 = np.array([0, 2, 1, 2, 0])
ce_cases = [checks.case(f"reduction={r}", checks.randn(50, 5, 3), targets5, reduction=r) for r in ("mean", "sum", "none")]
ce_cases.append(checks.case("ignore_index=2, mean", checks.randn(51, 5, 3), targets5, ignore_index=2))
checks.check_function("cross_entropy", CrossEntropy, "cross_entropy", ce_cases, seed=50)
worked_z = np.array([[0.0, 0.0], [1000.0, 0.0]], dtype=np.float32)
extreme = [checks.case("worked example, float32", worked_z, np.array([0, 1])),
           checks.case("float32 logits of magnitude 1e3", checks.randn(52, 4, 3, scale=1e3, dtype=np.float32),
                       np.array([0, 1, 2, 1]))]
checks.against_torch("cross_entropy", ce_forward, "cross_entropy", extreme)
checks.against_torch("cross_entropy", ce_mean_grad, "cross_entropy_backward", extreme)
### BEGIN HIDDEN TESTS
targets7 = np.array([1, 0, 3, 3, 2, 1, 0])
hidden_ce = [checks.case("ignore_index=3, sum", checks.randn(53, 7, 4), targets7, reduction="sum", ignore_index=3),
             checks.case("ignore_index=0, none", checks.randn(54, 7, 4), targets7, reduction="none", ignore_index=0),
             checks.case("ignore_index=1, mean", checks.randn(55, 7, 4), targets7, ignore_index=1),
             checks.case("one row", checks.randn(56, 1, 4), np.array([2]))]
checks.check_function("cross_entropy", CrossEntropy, "cross_entropy", hidden_ce, seed=53)
hidden_extreme = [checks.case("float32 1e3, ignore_index", checks.randn(57, 5, 4, scale=1e3, dtype=np.float32),
                              np.array([0, 3, 1, 1, 2]), ignore_index=1),
                  checks.case("float32 -1e3 everywhere but one", np.full((2, 3), -1e3, np.float32), np.array([1, 2]))]
checks.against_torch("cross_entropy", ce_forward, "cross_entropy", hidden_extreme)
checks.against_torch("cross_entropy", ce_mean_grad, "cross_entropy_backward", hidden_extreme)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Reverse accumulation: `backward`
#
# `backward(root, grad=None)` first orders the graph topologically (every node after the nodes it
# was computed from) with an **explicit stack**, not recursion, so a chain of 10,000 ops needs no
# deep call stack. Then it walks that order in reverse, keeping a dictionary from `id(node)` to the
# gradient received so far:
#
# 1. **The seed.** Without `grad`, a root with exactly one element is seeded with ones; any other
#    root raises `RuntimeError("grad can be implicitly created only for scalar outputs")`. With
#    `grad`, the result is the gradient of `(grad * root).sum()`.
# 2. **The sweep.** For each node that received a gradient: a leaf adds it into `node.grad`; any
#    other node calls `node.fn.backward(node.ctx, g)` (a single array for a one-input op) and
#    **adds** (`+=`, into a fresh array) each result into its input's entry, skipping inputs that
#    do not require grad and `None` gradients.
# 3. **Leaves only.** Only leaves that require grad get a `.grad`; constants and intermediate nodes
#    keep `None`.
# 4. **Repeated calls add up.** A second `backward` adds into the existing `.grad`.
#
# **Worked example.** $L = (xy + x) \cdot xy$ at $x = 2$, $y = 3$ (unit 1.3): with $q = xy$ and
# $r = q + x$, the sweep gives $\bar r = 6$, $\bar q = 8 + 6 = 14$ (two paths, added), and
# $\bar x = 6 + 14 \cdot 3 = 48$, $\bar y = 14 \cdot 2 = 28$.
#
# ### Exercise `backward`

# %% nbgrader={"grade": false, "grade_id": "backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
def backward(root, grad=None):
    """Add d(root)/d(leaf), weighted by ``grad``, into ``.grad`` of every leaf under ``root`` that
    requires grad, following torch's rules (see the text above). Iterative: no recursion."""
    ### BEGIN SOLUTION
    if grad is None:
        if root.data.size != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        grad = np.ones_like(root.data)
    order, seen, stack = [], set(), [(root, False)]
    while stack:  # depth-first search with an explicit stack: (node, its inputs are done)
        node, done = stack.pop()
        if done:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((t, False) for t in node.inputs if id(t) not in seen)
    received = {id(root): np.asarray(grad, dtype=root.dtype)}
    for node in reversed(order):
        node_grad = received.pop(id(node), None)
        if node_grad is None or not node.requires_grad:
            continue
        if node.is_leaf:
            if node.grad is None:
                node.grad = np.zeros_like(node.data)
            node.grad += node_grad
            continue
        input_grads = node.fn.backward(node.ctx, node_grad)
        input_grads = input_grads if isinstance(input_grads, tuple) else (input_grads,)
        for parent, parent_grad in zip(node.inputs, input_grads):
            if parent.requires_grad and parent_grad is not None:
                if id(parent) not in received:
                    received[id(parent)] = np.zeros_like(parent.data)
                received[id(parent)] += parent_grad
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_backward", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# check_graph builds each graph on our Tensor and on torch, calls .backward() and compares every
# leaf's .grad with torch autograd and central differences. Every graph reuses a node.
def worked_example(x, y):
    q = x * y
    return (q + x) * q


def branched(x, b, W):
    h = (x * x + b).tanh()  # x reused, b broadcast over the rows
    return ((h @ W).relu() / (1 + x.mean())).sum() - (h * b).mean(axis=0).sum()


_, (x, y) = checks.check_graph("backward", Tensor, worked_example, [np.array(2.0), np.array(3.0)], names=["x", "y"])
# exact: every value and gradient in the worked example is a small integer, exact in float64
assert (x.grad, y.grad) == (48.0, 28.0), "[backward] the worked example gives x.grad = 48, y.grad = 28."
checks.check_graph("backward", Tensor, branched, [checks.randn(60, 3, 4), checks.randn(61, 4), checks.randn(62, 4, 2)],
                   names=["x", "b", "W"])


def long_chain(x0, n):
    x = Tensor(x0, requires_grad=True)
    y = x
    for _ in range(n):
        y = y + x  # after k steps y = (k + 1) x: x fans out to every step
    y.sum().backward()
    return x


n_chain = 3_000  # three times Python's default recursion limit: recursion would fail
x_chain = checks.run_student("backward", long_chain, checks.randn(63, 3), n_chain)
checks.assert_close(x_chain.grad, np.full(3, n_chain + 1.0), task="backward", kind="grad",
                    case=f"a chain of {n_chain:,} Adds, y = x + ... + x", name="grad of x")
### BEGIN HIDDEN TESTS
def diamond(x, y):
    h = (x * y).exp()  # h reaches the loss along three paths
    return ((h * h + h).log() - x / 2).sum()


checks.check_graph("backward", Tensor, diamond, [checks.randn(64, 3, 2), checks.randn(65, 2)], names=["x", "y"], seed=64)
checks.check_graph("backward", Tensor, branched, [checks.randn(66, 2, 3), checks.randn(67, 1, 3), checks.randn(68, 3, 3)],
                   names=["x", "b", "W"], seed=66)
_ = checks.check_graph("backward", Tensor, lambda x: (x.T @ x).reshape(-1).tanh().sum() * x.sum(),
                   [checks.strided(checks.randn(69, 3, 2))], names=["x"], seed=69)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_backward_rules", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# torch's rules: implicit seed only for one-element roots, leaves accumulate across calls,
# intermediate nodes and constants get no .grad, an explicit grad is the seed.
def rules_graph():
    x = Tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    c = Tensor(np.array([0.5, 0.5, 2.0]))  # a constant: requires_grad=False
    h = x * c
    loss = (h * h).sum()
    loss.backward()
    first = x.grad.copy()
    loss.backward()
    return x, c, h, loss, first


x, c, h, loss, first = checks.run_student("backward", rules_graph)
assert h.grad is None and loss.grad is None, "[backward] only leaves keep a .grad (h = x * c and the root have one)."
assert c.grad is None, "[backward] c was created with requires_grad=False, but it received a .grad."
checks.assert_close(first, 2 * x.data * c.data**2, task="backward", case="loss = sum((x * c)**2)",
                    name="grad of x (2 x c^2)", kind="grad")
checks.assert_close(x.grad, 4 * x.data * c.data**2, task="backward", name="grad of x after two backward() calls",
                    case="the second call must add to .grad, not replace it", kind="grad",
                    hints=[checks.added_not_replaced])
x22 = Tensor(checks.randn(70, 2, 2), requires_grad=True)
checks.expect_raises("backward", RuntimeError, backward, checks.run_student("backward", lambda: x22 * x22))
### BEGIN HIDDEN TESTS
x0, G = checks.randn(71, 2, 3), checks.randn(72, 2, 3)
_, (x_ref, _) = checks.check_graph("backward", Tensor, lambda x, g: ((x * x).tanh() * g).sum(), [x0, G],
                                   names=["x", "G"], seed=71)


def explicit_seed():
    x = Tensor(x0.copy(), requires_grad=True)
    (x * x).tanh().backward(G.copy())
    return x


checks.assert_close(checks.run_student("backward", explicit_seed).grad, x_ref.grad, task="backward",
                    case="y.backward(G) on a non-scalar y", name="grad of x", kind="grad")
_ = checks.check_graph("backward", Tensor, lambda x, w: (x @ w).tanh() * (x @ w),
                       [checks.randn(73, 1, 3), checks.randn(74, 3, 1)], names=["x", "w"], seed=73)
### END HIDDEN TESTS

# %% [markdown]
# ## 4. Modules and the optimizer
#
# A `Module` owns what is assigned to it: assigning a `Parameter` (a `Tensor` that requires grad
# by default) or a sub-`Module` as an attribute **registers** it, in assignment order. The
# traversals then follow torch: `named_parameters()` yields `(name, parameter)` for this module's
# own parameters, then each sub-module's under the prefix `"<attribute>."`; `parameters()` the
# parameters alone in the same order; `state_dict()` maps the same names to the parameters'
# arrays **themselves** (not copies, as torch's tensors share storage); `zero_grad()` sets every
# `.grad` to `None`; calling a module calls its `forward`.
#
# `Linear(in_features, out_features, rng)` holds `weight` of shape (out, in) and `bias` of shape
# (out,), both drawn uniformly from $[-1/\sqrt{\text{in}}, 1/\sqrt{\text{in}}]$ (torch's default)
# with `np.random.default_rng(rng)`, in float64, and computes $y = x W^\top + b$.
# `MLP(sizes, rng)` is `Linear(sizes[0], sizes[1])`, ReLU, `Linear(sizes[1], sizes[2])`, ... with no
# ReLU after the last layer; it makes one generator, `np.random.default_rng(rng)`, and passes it to
# each `Linear` in turn, so that every layer draws fresh numbers (a seed given to each layer would
# start each one on the same numbers). So that its `state_dict` has the keys of torch's
# `nn.Sequential(nn.Linear(...), nn.ReLU(), nn.Linear(...), ...)`, the `k`-th Linear layer is
# registered under the name `str(2 * k)` (`setattr(self, "0", layer)`): the ReLUs hold no
# parameters, but they take the odd positions.
#
# **Worked example.** `MLP([2, 16, 3])` has `state_dict` keys `0.weight` (16, 2), `0.bias` (16,),
# `2.weight` (3, 16) and `2.bias` (3,): $32 + 16 + 48 + 3 = 99$ parameters, and these four arrays
# load unchanged into the torch `nn.Sequential` of the same layers.
#
# ### Exercise `modules`

# %% nbgrader={"grade": false, "grade_id": "modules", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Parameter(Tensor):
    """A Tensor that a Module registers; requires grad by default."""

    def __init__(self, data, requires_grad=True):
        ### BEGIN SOLUTION
        super().__init__(data, requires_grad=requires_grad)
        ### END SOLUTION


class Module:
    """Base class of layers and models: registers Parameters and sub-Modules assigned as attributes."""

    def __init__(self):
        ### BEGIN SOLUTION
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
        ### END SOLUTION

    def __setattr__(self, name, value):
        ### BEGIN SOLUTION
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)
        ### END SOLUTION

    def named_parameters(self, prefix=""):
        """(name, parameter) pairs: own parameters first, then each sub-module's, with torch's names."""
        ### BEGIN SOLUTION
        for name, p in self._parameters.items():
            yield prefix + name, p
        for name, module in self._modules.items():
            yield from module.named_parameters(prefix + name + ".")
        ### END SOLUTION

    def parameters(self):
        ### BEGIN SOLUTION
        return [p for _, p in self.named_parameters()]
        ### END SOLUTION

    def state_dict(self):
        """{name: the parameter's array itself (no copy)}, in named_parameters order."""
        ### BEGIN SOLUTION
        return {name: p.data for name, p in self.named_parameters()}
        ### END SOLUTION

    def zero_grad(self):
        ### BEGIN SOLUTION
        for p in self.parameters():
            p.grad = None
        ### END SOLUTION

    def __call__(self, *args):
        return self.forward(*args)


class Linear(Module):
    """y = x W^T + b, W of shape (out, in), W and b uniform on [-1/sqrt(in), 1/sqrt(in)]."""

    def __init__(self, in_features, out_features, rng=None):
        ### BEGIN SOLUTION
        super().__init__()
        rng = np.random.default_rng(rng)
        bound = 1 / math.sqrt(in_features)
        self.weight = Parameter(rng.uniform(-bound, bound, (out_features, in_features)))
        self.bias = Parameter(rng.uniform(-bound, bound, out_features))
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        return x @ self.weight.T + self.bias
        ### END SOLUTION


class MLP(Module):
    """Linear, ReLU, Linear, ... (no ReLU at the end); the k-th Linear registered as str(2 * k)."""

    def __init__(self, sizes, rng=None):
        ### BEGIN SOLUTION
        super().__init__()
        rng = np.random.default_rng(rng)
        self.layers = [Linear(n_in, n_out, rng=rng) for n_in, n_out in zip(sizes[:-1], sizes[1:])]
        for k, layer in enumerate(self.layers):
            setattr(self, str(2 * k), layer)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        for k, layer in enumerate(self.layers):
            x = layer(x)
            if k < len(self.layers) - 1:
                x = x.relu()
        return x
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_modules", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
from autograder.outside import oracles


def check_mlp(sizes, seed, x):
    model = checks.run_student("modules", MLP, sizes, rng=seed)
    sd = checks.run_student("modules", model.state_dict)
    expected = oracles.oracle("sequential_state_shapes")(sizes)  # torch's keys and shapes
    got = [(k, tuple(np.shape(v))) for k, v in sd.items()]
    assert got == expected, f"[modules] MLP({sizes}).state_dict(): expected keys and shapes {expected}, got {got}."
    params = checks.run_student("modules", lambda: list(model.parameters()))
    assert len(params) == len(sd) and all(isinstance(p, Parameter) and p.requires_grad for p in params), (
        "[modules] parameters() must list every Parameter (requires_grad=True), once, in state_dict order.")
    assert all(np.shares_memory(p.data, v) for p, v in zip(params, sd.values())), (
        "[modules] state_dict() values must be the parameters' own arrays (no copies), in parameters() order.")
    for key, value in sd.items():
        bound = 1 / np.sqrt(value.shape[-1] if key.endswith("weight") else sd[key[:-4] + "weight"].shape[1])
        assert value.dtype == np.float64 and np.all(np.abs(value) <= bound) and (value.size < 4 or np.std(value) > bound / 10), (
            f"[modules] {key} should be float64, uniform on [-1/sqrt(in), 1/sqrt(in)] = +-{bound:.4g}.")
    weights = [v.copy() for v in sd.values()]  # ours: the model's forward could write into its own arrays
    checks.against_torch("modules", lambda x, *w: model(Tensor(x)).data, "mlp_stack",
                         [checks.case(f"MLP({sizes}) forward", x, *weights)])
    return model


mlp = check_mlp([2, 16, 3], 0, checks.randn(80, 5, 2))
again = checks.run_student("modules", MLP, [2, 16, 3], rng=0)
assert np.array_equal(again.state_dict()["0.weight"], mlp.state_dict()["0.weight"]), (
    "[modules] the same rng seed must give the same weights: draw them from np.random.default_rng(rng).")
for p in mlp.parameters():
    p.grad = np.ones_like(p.data)
checks.run_student("modules", mlp.zero_grad)
assert all(p.grad is None for p in mlp.parameters()), "[modules] zero_grad() sets every .grad to None (torch's default)."
### BEGIN HIDDEN TESTS
check_mlp([3, 4, 5, 2], 7, checks.strided(checks.randn(81, 6, 3)))
_ = check_mlp([4, 1], 8, checks.randn(82, 2, 4))
### END HIDDEN TESTS

# %% [markdown]
# ### SGD with momentum and weight decay
#
# `torch.optim.SGD` (dampening 0, no Nesterov) updates each parameter $p$ that has a gradient:
#
# $$d_t = g_t + \lambda p_{t-1}, \qquad b_t = \begin{cases} d_1 & t = 1 \\ \mu b_{t-1} + d_t & t > 1 \end{cases}, \qquad p_t = p_{t-1} - \eta\, b_t,$$
#
# with weight decay $\lambda$, momentum $\mu$ (with $\mu = 0$, $b_t = d_t$) and learning rate $\eta$.
# The order matters: weight decay goes into $d_t$ *before* the momentum buffer. Parameters whose
# `.grad` is `None` are skipped. The update is **in place** (`p.data -= ...`), so the arrays of
# `state_dict()` stay the parameters' own.
#
# **Worked example.** $p_0 = 1$, $\eta = 0.1$, $\mu = 0.9$, $\lambda = 0.5$, gradients $g = 2$ then
# $g = 2$: $d_1 = 2.5$, $b_1 = 2.5$, $p_1 = 0.75$; $d_2 = 2 + 0.375 = 2.375$,
# $b_2 = 2.25 + 2.375 = 4.625$, $p_2 = 0.75 - 0.4625 = 0.2875$.
#
# ### Exercise `sgd`

# %% nbgrader={"grade": false, "grade_id": "sgd", "locked": false, "schema_version": 3, "solution": true, "task": false}
class SGD:
    """torch.optim.SGD(params, lr, momentum, weight_decay), dampening 0, no Nesterov."""

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0):
        ### BEGIN SOLUTION
        self.params = list(params)
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.buffers = [None] * len(self.params)
        ### END SOLUTION

    def step(self):
        ### BEGIN SOLUTION
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            d = p.grad + self.weight_decay * p.data
            if self.momentum:
                self.buffers[i] = d.copy() if self.buffers[i] is None else self.momentum * self.buffers[i] + d
                d = self.buffers[i]
            p.data -= self.lr * d
        ### END SOLUTION

    def zero_grad(self):
        ### BEGIN SOLUTION
        for p in self.params:
            p.grad = None
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sgd", "locked": true, "points": 5, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# The parameters after each of several steps, against torch.optim.SGD fed the same gradients.
def sgd_trajectory(p0, grads, lr, momentum=0.0, weight_decay=0.0):
    p, idle = Parameter(p0.copy()), Parameter(p0.copy())
    optimizer = SGD([p, idle], lr=lr, momentum=momentum, weight_decay=weight_decay)
    array, path = p.data, []
    for g in grads:
        optimizer.zero_grad()
        p.grad = g.copy()  # idle keeps grad None: SGD must skip it
        optimizer.step()
        path.append(p.data.copy())
    assert p.data is array, "[sgd] update the parameters in place (p.data -= ...): state_dict() shares their arrays."
    assert np.array_equal(idle.data, p0), "[sgd] a parameter whose .grad is None must not move."
    return np.stack(path)


worked = checks.case("worked example", np.array(1.0), np.array([2.0, 2.0]), lr=0.1, momentum=0.9, weight_decay=0.5)
sgd_cases = [checks.case("plain", checks.randn(90, 3), checks.randn(91, 3, 3), lr=0.1),
             checks.case("momentum", checks.randn(92, 2, 2), checks.randn(93, 4, 2, 2), lr=0.05, momentum=0.9),
             checks.case("momentum and weight decay", checks.randn(94, 3), checks.randn(95, 4, 3), lr=0.1,
                         momentum=0.8, weight_decay=0.3)]
checks.against_torch("sgd", sgd_trajectory, "sgd_trajectory", [worked] + sgd_cases)
### BEGIN HIDDEN TESTS
checks.against_torch("sgd", sgd_trajectory, "sgd_trajectory",
                     [checks.case("weight decay only", checks.randn(96, 2, 3), checks.randn(97, 3, 2, 3), lr=0.2, weight_decay=0.1),
                      checks.case("long run", checks.randn(98, 4), checks.randn(99, 8, 4), lr=0.05, momentum=0.5,
                                  weight_decay=0.01)])
### END HIDDEN TESTS

# %% [markdown]
# ## 5. Differential tests
#
# Every check in this notebook so far was written by the course. Now we write our own, the way
# PyTorch's own test suite does: run the same computation in two implementations and compare. A
# **differential test** takes an engine, runs each op on random inputs, and compares the forward
# value and every gradient with PyTorch (and, for a whole graph, with central finite
# differences). It passes silently on a correct engine and raises `AssertionError` on a wrong one.
#
# Our tests receive the engine as a namespace, `engine`, with the attributes `Tensor`,
# `Parameter`, `SGD`, `backward` and the op classes `Add`, `Sub`, `Mul`, `Div`, `MatMul`, `Sum`,
# `Mean`, `Exp`, `Log`, `Tanh`, `ReLU`, `Reshape`, `Transpose` and `CrossEntropy`. The tests use
# only this interface:
#
# - `engine.Tensor(array, requires_grad=True)`, `t.data`, `t.grad`;
# - ops as `engine.Mul.apply(a, b)`, `engine.Sum.apply(x, axis=1, keepdims=True)`,
#   `engine.CrossEntropy.apply(logits, target, reduction="sum", ignore_index=1)`. **Never
#   operators or methods** (`a * b`, `x.sum()`): they belong to one engine's `Tensor` class and
#   may not use the op classes of the namespace under test;
# - `engine.backward(root, grad)`;
# - `engine.Parameter(array)`, `engine.SGD([p], lr=..., momentum=..., weight_decay=...)`,
#   `p.grad = array`, `optimizer.step()`.
#
# The grader runs our two functions against our own engine and a correct reference engine, where
# they must pass (a test that fails a correct engine scores 0), and against engines with **planted
# bugs**; we score by the share of planted bugs our tests catch. The feedback says how many were
# caught and which kinds were missed, never more. Bugs that good tests catch include: a gradient
# not reduced to a broadcast operand's shape, a gradient that is replaced instead of added, a
# missing transpose, a wrong saved value, an unstable loss, a wrong divisor, a sign, a kink, an
# optimizer rule in the wrong order, and a reduction that is wrong only with `ignore_index`.
#
# What makes a test catch bugs:
#
# 1. **Random upstream gradients.** With $\bar z = 1$ everywhere, a backward that ignores $\bar z$'s
#    values looks right.
# 2. **Random broadcast-compatible shape pairs**, not one fixed shape: prepended axes, size-1 axes
#    on either side, 0-d operands, square and non-square matrices.
# 3. **The edge cases on purpose:** exact zeros for ReLU's kink, float32 logits of magnitude
#    $10^3$, targets equal to `ignore_index`, several optimizer steps with momentum *and* weight
#    decay, non-contiguous inputs.
# 4. **float64 and stated tolerances.** Two correct float64 implementations agree to about
#    $10^{-13}$ relative, so `rtol=1e-9` has a wide margin yet misses no real bug. Central
#    differences $\frac{f(x + h) - f(x - h)}{2h}$ have truncation error $\sim h^2 |f'''|$ and
#    rounding error $\sim \epsilon |f| / h$; their sum is smallest near $h = (\epsilon/2)^{1/3}
#    \approx 5 \times 10^{-6}$ (CS231n, *Gradient checks*). We use $h = 10^{-6}$, a round step a
#    little below it, where the total is still about $10^{-10}$ relative, and compare with
#    `rtol=1e-5`. In float32 ($\epsilon \approx 1.2 \times 10^{-7}$) the best step is near
#    $4 \times 10^{-3}$ and still leaves about $5 \times 10^{-5}$ relative error; with
#    $h = 10^{-6}$ the rounding error alone is about $\epsilon / h \approx 0.1$. So a float32
#    finite-difference check with a tight tolerance fails correct engines.
# 5. **A graph that reuses nodes** (`x * x`, a hidden layer used twice) and broadcasts on one path,
#    so that accumulation and `unbroadcast` meet.
#
# **Worked example.** A test of `Sub` on shapes $(2, 3)$ and $(3,)$ with upstream
# $\bar z = \mathbf 1$ compares $\bar b = (-2, -2, -2)$ with torch. An engine that forgets the minus
# sign gives $(2, 2, 2)$: caught. An engine that forgets `unbroadcast` for $b$ returns a $(2, 3)$
# gradient: caught by the shape. An engine whose `Exp.backward` returns `y * grad.mean()` instead
# of `y * grad` agrees with torch for $\bar z = \mathbf 1$: missed, unless the upstream gradient is
# random.
#
# The next cell (locked) gives our engine as a namespace, `my_engine`, and five **example bugs**
# made from our own ops, with `catches(test, engine)`, which says whether `test(engine)` raised. The
# test cell requires `property_test` to catch the first four and `branched_graph_test` the fifth;
# the planted bugs of the grader are others.

# %% nbgrader={"grade": false, "grade_id": "example_bugs", "locked": true, "schema_version": 3, "solution": false, "task": false}
OP_NAMES = ("Add", "Sub", "Mul", "Div", "MatMul", "Sum", "Mean", "Exp", "Log", "Tanh", "ReLU", "Reshape", "Transpose",
            "CrossEntropy")


def engine_namespace(**changes):
    """Our engine as a namespace; ``changes`` replace some of its parts (op classes, backward...)."""
    parts = {name: globals()[name] for name in OP_NAMES + ("Tensor", "Parameter", "SGD", "backward")}
    return types.SimpleNamespace(**{**parts, **changes})


def _buggy(base, backward, forward=None):
    """A subclass of the op ``base`` whose backward (and forward) we replace."""
    body = {"backward": staticmethod(backward)}
    if forward is not None:
        body["forward"] = staticmethod(forward)
    return type(base.__name__, (base,), body)


def _note_operands(base):
    def forward(ctx, a, b):
        ctx.example_bug_operands = (np.shape(a), np.shape(b), a is b)
        return base.forward(ctx, a, b)
    return forward


def _stretched(a_shape, b_shape):
    """b keeps all of a's axes but stretches a size-1 one."""
    return len(b_shape) == len(a_shape) and any(m == 1 and n > 1 for m, n in zip(b_shape, a_shape))


def _sub_sign(ctx, grad):
    ga, gb = Sub.backward(ctx, grad)
    return ga, -gb


def _exp_upstream(ctx, grad):
    return Exp.backward(ctx, np.full_like(grad, grad.mean()))  # right only when grad is constant


def _add_prepended(ctx, grad):
    ga, gb = Add.backward(ctx, grad)
    a_shape, b_shape, _ = ctx.example_bug_operands
    return ga, (2 * gb if len(b_shape) < len(a_shape) else gb)


def _mul_stretched(ctx, grad):
    ga, gb = Mul.backward(ctx, grad)
    a_shape, b_shape, _ = ctx.example_bug_operands
    return ga, (gb / 2 if _stretched(a_shape, b_shape) else gb)


def _mul_reuse(ctx, grad):
    ga, gb = Mul.backward(ctx, grad)
    _, _, same = ctx.example_bug_operands
    return ga, (0 * gb if same else gb)  # x * x: one of the two contributions is lost


def example_bugs():
    """{name: (engine with one bug, what is wrong)} for five bugs made from our own ops."""
    return {
        "sub_sign": (engine_namespace(Sub=_buggy(Sub, _sub_sign)), "Sub's gradient for b has the wrong sign"),
        "exp_upstream": (engine_namespace(Exp=_buggy(Exp, _exp_upstream)),
                         "Exp's backward is right only when the upstream gradient is constant"),
        "add_prepended": (engine_namespace(Add=_buggy(Add, _add_prepended, _note_operands(Add))),
                          "Add's gradient for b is doubled when b has fewer axes than a"),
        "mul_stretched": (engine_namespace(Mul=_buggy(Mul, _mul_stretched, _note_operands(Mul))),
                          "Mul's gradient for b is halved when b stretches a size-1 axis"),
        "mul_reuse": (engine_namespace(Mul=_buggy(Mul, _mul_reuse, _note_operands(Mul))),
                      "Mul drops one contribution when both operands are the same tensor (x * x)"),
    }


def catches(test, engine):
    """True when ``test(engine)`` raises (it found a bug), False when it returns (it passed)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            test(engine)
        except Exception:
            return True
    return False


my_engine = engine_namespace()

# %% [markdown]
# ### Concept check `fd_step`
#
# In float64, $\epsilon \approx 2.2 \times 10^{-16}$. For central differences the total error
# behaves like $h^2 + \epsilon / h$ (for $f$ and its derivatives of order 1). Set `fd_step_exponent`
# to the integer $k$ for which $h = 10^{k}$ gives the smallest value of $h^2 + \epsilon / h$ among
# the powers of ten (evaluate it at the integers near the optimum: the step $10^{-6}$ that our
# tests use is a round choice near it, not necessarily the best power of ten).

# %% nbgrader={"grade": false, "grade_id": "fd_step", "locked": false, "schema_version": 3, "solution": true, "task": false}
fd_step_exponent = None
### BEGIN SOLUTION
fd_step_exponent = -5
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_fd_step", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
checks.check_hash("fd_step", "fd_step_exponent", fd_step_exponent,
                  "37aa1ccf80e481832b2db282d4d4f895ee1e31219b7d0f6aee8dc8968828341b",
                  hint="minimise h^2 + eps/h: the derivative 2h - eps/h^2 vanishes at h = (eps/2)^(1/3).")

# %% [markdown]
# ### Exercise `differential_tests`
#
# Write `property_test(engine)` and `branched_graph_test(engine)`; any helpers go in the same cell.
#
# - `property_test` draws random broadcast-compatible shape pairs and compares every op's forward
#   value and every input's gradient with PyTorch in float64, with a random upstream gradient; it
#   also covers the edge cases above (square matrices, axes and `keepdims`, ReLU at 0, extreme
#   float32 logits, `ignore_index` with every reduction, non-contiguous inputs) and compares a few
#   `SGD` steps with momentum and weight decay with `torch.optim.SGD`.
# - `branched_graph_test` builds one branched graph (a node reused, a broadcast on one path, a
#   matrix product and the cross-entropy), and compares the leaves' gradients with PyTorch and with
#   central differences of the engine's own forward, in float64, with the step and tolerances we
#   justify in the note.
#
# Both raise `AssertionError` (for example through `np.testing.assert_allclose`) when the engine
# is wrong, and return `None` when it is right. When graded, each runs up to about 15 times (on
# correct engines and on engines with planted bugs) within one cell's time limit, so keep each well
# under a second: small arrays, a few dozen cases. PyTorch is allowed here, and only here. For
# `SGD`, compare with `torch_sgd` (imported in the cell), the update function that
# `torch.optim.SGD.step` runs: `torch_sgd(params, grads, momentum_buffers, lr=..., momentum=...,
# weight_decay=..., dampening=0.0, nesterov=False, maximize=False)` updates each tensor of the list
# `params` in place, given the list `grads` of their gradients; `momentum_buffers` holds one entry
# per parameter (start with `[None]`), which it fills on the first step and reuses on the next.
# Building a `torch.optim.SGD` object instead imports torch's compiler stack, which takes seconds
# the first time.

# %% nbgrader={"grade": false, "grade_id": "differential_tests", "locked": false, "schema_version": 3, "solution": true, "task": false}
import torch
from torch.optim.sgd import sgd as torch_sgd  # the update rule torch.optim.SGD.step runs


def property_test(engine):
    """Compare every op of ``engine`` (and its SGD) with PyTorch on random inputs; raise
    AssertionError on the first difference."""
    ### BEGIN SOLUTION
    def _reduce(name):
        def reduce(x, axis=None, keepdims=False):
            if axis is None:
                out = getattr(x, name)()
                return out.reshape((1,) * x.ndim) if keepdims else out
            return getattr(x, name)(dim=axis, keepdim=keepdims)
        return reduce

    TORCH_OPS = {
        "Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b, "Div": lambda a, b: a / b,
        "MatMul": torch.matmul, "Sum": _reduce("sum"), "Mean": _reduce("mean"), "Exp": torch.exp, "Log": torch.log,
        "Tanh": torch.tanh, "ReLU": torch.relu, "Reshape": lambda x, shape: x.reshape(shape),
        "Transpose": lambda x, dim0, dim1: x.transpose(dim0, dim1),
        "CrossEntropy": lambda z, t, **options: torch.nn.functional.cross_entropy(z, t, **options),
    }

    def compare(engine, name, arrays, rng, tol=(1e-9, 1e-12), **options):
        """engine.<name> against torch: the forward value, and each float input's gradient for a random
        upstream gradient. float64 tolerances by default: correct implementations agree to ~1e-13."""
        leaves = [engine.Tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
        out = getattr(engine, name).apply(*leaves, **options)
        upstream = rng.standard_normal(np.shape(out.data)).astype(out.data.dtype)
        engine.backward(out, upstream.copy())
        t_leaves = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
        t_out = TORCH_OPS[name](*t_leaves, **options)
        t_out.backward(torch.from_numpy(upstream))
        where = f"{name} on shapes {[a.shape for a in arrays]} with {options}"
        rtol, atol = tol
        assert np.all(np.isfinite(out.data)), f"{where}: forward is not finite"
        np.testing.assert_allclose(out.data, t_out.detach().numpy(), rtol=rtol, atol=atol, err_msg=f"{where}: forward")
        for k, (leaf, t_leaf) in enumerate(zip(leaves, t_leaves)):
            if t_leaf.requires_grad:
                assert leaf.grad is not None and leaf.grad.shape == leaf.data.shape, f"{where}: grad {k} shape"
                np.testing.assert_allclose(leaf.grad, t_leaf.grad.numpy(), rtol=rtol, atol=atol, err_msg=f"{where}: grad {k}")

    def compare_sgd(engine, rng, steps=4):
        """Four SGD steps with momentum and weight decay against torch's SGD fed the same gradients.

        torch_sgd is the function that torch.optim.SGD.step calls; building a torch.optim.SGD
        the first time imports torch's compiler stack, which takes seconds."""
        for lr, momentum, weight_decay in [(0.1, 0.0, 0.0), (0.1, 0.9, 0.2)]:
            p0 = rng.standard_normal(3)
            p, t_p, buffers = engine.Parameter(p0.copy()), torch.tensor(p0), [None]
            optimizer = engine.SGD([p], lr=lr, momentum=momentum, weight_decay=weight_decay)
            for _ in range(steps):
                g = rng.standard_normal(3)
                p.grad = g.copy()
                optimizer.step()
                torch_sgd([t_p], [torch.tensor(g)], buffers, lr=lr, momentum=momentum, weight_decay=weight_decay,
                          dampening=0.0, nesterov=False, maximize=False)
                np.testing.assert_allclose(p.data, t_p.numpy(), rtol=1e-9, atol=1e-12,
                                           err_msg=f"SGD lr={lr} momentum={momentum} weight_decay={weight_decay}")

    rng = np.random.default_rng(0)

    def randn(*shape, positive=False, zeros=False):
        x = rng.standard_normal(shape)
        if positive:
            x = np.abs(x) + 0.5
        if zeros and x.size:
            x.reshape(-1)[::3] = 0.0  # the kink: ReLU's gradient at exactly 0 is 0
        return x

    def noncontiguous(*shape):
        return np.swapaxes(randn(*shape[::-1]), 0, -1) if len(shape) > 1 else randn(*shape)

    def shape_pair():
        full = tuple(int(n) for n in rng.integers(1, 4, size=rng.integers(0, 4)))

        def operand():
            kept = full[rng.integers(0, len(full) + 1):]  # drop some leading axes
            return tuple(1 if rng.random() < 0.4 else n for n in kept)  # and shrink some to 1

        return operand(), operand()

    pairs = [((2, 3), (3,)), ((3, 1), (1, 4)), ((2, 3), ()), ((1, 3), (2, 1)), ((2, 2, 3), (2, 1, 3))]
    pairs += [shape_pair() for _ in range(4)]
    for sa, sb in pairs:
        for name in ("Add", "Sub", "Mul", "Div"):
            compare(engine, name, [randn(*sa), randn(*sb, positive=name == "Div")], rng)
    compare(engine, "Mul", [noncontiguous(2, 3), randn(3)], rng)
    for n, k, m in [(2, 3, 4), (3, 3, 3), (1, 2, 1), (4, 2, 2)]:
        compare(engine, "MatMul", [randn(n, k), randn(k, m)], rng)
    compare(engine, "MatMul", [noncontiguous(3, 2), noncontiguous(2, 2)], rng)
    for name in ("Sum", "Mean"):
        for shape, axis, keepdims in [((2, 3, 4), None, False), ((2, 3, 4), 1, False), ((2, 3, 4), (0, 2), True),
                                      ((3, 1, 2), -1, True), ((4,), 0, False), ((), None, True)]:
            compare(engine, name, [randn(*shape)], rng, axis=axis, keepdims=keepdims)
    for shape in [(2, 3), (1, 4), ()]:
        compare(engine, "Exp", [randn(*shape)], rng)
        compare(engine, "Log", [randn(*shape, positive=True)], rng)
        compare(engine, "Tanh", [randn(*shape)], rng)
        compare(engine, "ReLU", [randn(*shape, zeros=True)], rng)
    compare(engine, "Tanh", [noncontiguous(3, 2)], rng)
    compare(engine, "Reshape", [randn(2, 3, 4)], rng, shape=(4, 6))
    compare(engine, "Reshape", [noncontiguous(3, 2)], rng, shape=(-1,))
    compare(engine, "Transpose", [randn(2, 3, 4)], rng, dim0=0, dim1=2)
    compare(engine, "Transpose", [randn(2, 3)], rng, dim0=-1, dim1=0)
    target = np.array([0, 1, 3, 1, 2, 1])
    for reduction in ("mean", "sum", "none"):
        compare(engine, "CrossEntropy", [randn(6, 4), target], rng, reduction=reduction)
        compare(engine, "CrossEntropy", [randn(6, 4), target], rng, reduction=reduction, ignore_index=1)
    # float32 logits of magnitude 1e3: float32 rounding, so float32 tolerances (eps 1.2e-7, values ~1e3)
    extreme = (1e3 * randn(6, 4)).astype(np.float32)
    compare(engine, "CrossEntropy", [extreme, target], rng, tol=(1e-4, 1e-3))
    compare_sgd(engine, rng)
    ### END SOLUTION


def branched_graph_test(engine):
    """A branched float64 graph (x reused, b broadcast): leaf gradients against PyTorch and against
    central differences of the engine's forward; raise AssertionError on a difference."""
    ### BEGIN SOLUTION
    rng = np.random.default_rng(1)
    x, b, W = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((4, 2))
    target = np.array([0, 1, 1])

    def loss_of(E, x, b, W):
        hidden = E.Tanh.apply(E.Add.apply(E.Mul.apply(x, x), b))  # x used twice, b broadcast over rows
        z = E.MatMul.apply(hidden, W)
        return E.Add.apply(E.CrossEntropy.apply(z, target), E.Mean.apply(E.Mul.apply(hidden, b)))  # hidden twice

    leaves = [engine.Tensor(a.copy(), requires_grad=True) for a in (x, b, W)]
    engine.backward(loss_of(engine, *leaves))
    t_leaves = [torch.tensor(a, requires_grad=True) for a in (x, b, W)]
    tx, tb, tW = t_leaves
    t_hidden = torch.tanh(tx * tx + tb)
    t_loss = torch.nn.functional.cross_entropy(t_hidden @ tW, torch.tensor(target)) + (t_hidden * tb).mean()
    t_loss.backward()

    def forward(*arrays):  # the engine's own forward, on constants (no graph)
        return float(loss_of(engine, *[engine.Tensor(a) for a in arrays]).data)

    h = 1e-6  # near (eps/2)^(1/3) ~ 5e-6: truncation ~h^2 and rounding ~eps/h are both below 1e-9
    arrays = [x, b, W]
    for k, (leaf, t_leaf, name) in enumerate(zip(leaves, t_leaves, "xbW")):
        assert leaf.grad is not None and leaf.grad.shape == arrays[k].shape, f"grad of {name}: wrong shape or None"
        # float64 against torch: correct implementations agree to ~1e-13
        np.testing.assert_allclose(leaf.grad, t_leaf.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=f"{name} vs torch")
        numeric = np.zeros_like(arrays[k])
        for i in np.ndindex(arrays[k].shape):
            plus = [a.copy() for a in arrays]
            minus = [a.copy() for a in arrays]
            plus[k][i] += h
            minus[k][i] -= h
            numeric[i] = (forward(*plus) - forward(*minus)) / (2 * h)
        # central differences: error ~1e-9 here; 1e-5 relative leaves a wide margin and misses no bug
        np.testing.assert_allclose(leaf.grad, numeric, rtol=1e-5, atol=1e-7, err_msg=f"{name} vs central differences")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_differential_tests", "locked": true, "points": 20, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# Our tests must pass on our own engine (a test that fails a correct engine is worth nothing),
# and catch the five example bugs. When graded, they also run against a correct reference engine
# (where they must pass) and against engines with planted bugs: the score is 20 points times the
# share of planted bugs caught.
checks.run_student("differential_tests", property_test, my_engine, numpy_only=False)
checks.run_student("differential_tests", branched_graph_test, my_engine, numpy_only=False)
for name, (bug, what) in example_bugs().items():
    test = branched_graph_test if name == "mul_reuse" else property_test
    assert catches(test, bug), (
        f"[differential_tests] {test.__name__} passes on the example bug {name!r}: {what}. Hint: call ops as "
        "engine.Op.apply(...) (operators would use another engine's ops), use random upstream gradients and "
        "random broadcast shape pairs, and reuse a node (x * x) in the branched graph.")
### BEGIN HIDDEN TESTS
from autograder.outside import torch_engine
reference = torch_engine.torch_engine()
R = reference


def _tuple(grads):
    return grads if isinstance(grads, tuple) else (grads,)


def _mul_no_unbroadcast(ctx, grad):
    ga, _ = R.Mul.backward(ctx, grad)
    return ga, grad * ctx.arrays[0]


def _sub_sign(ctx, grad):
    ga, gb = R.Sub.backward(ctx, grad)
    return ga, -gb


def _div_power(ctx, grad):
    ga, gb = R.Div.backward(ctx, grad)
    return ga, gb * ctx.arrays[1]


def _matmul_square(ctx, grad):
    ga, gb = R.MatMul.backward(ctx, grad)
    b = ctx.arrays[1]
    return (grad @ b if b.shape[0] == b.shape[1] else ga), gb


def _tanh_input(ctx, grad):
    return (grad * (1 - ctx.arrays[0] ** 2),)


def _relu_kink(ctx, grad):
    return (grad * (ctx.arrays[0] >= 0),)


def _mean_total(ctx, grad):
    (g,) = _tuple(R.Mean.backward(ctx, grad))
    return (g / np.size(grad),)


def _transpose_reshape(ctx, grad):
    return (np.asarray(grad).reshape(ctx.arrays[0].shape),)


def _ce_ignored_mean(ctx, grad):
    g, _ = R.CrossEntropy.backward(ctx, grad)
    target, options = ctx.arrays[1], ctx.options
    if options.get("reduction", "mean") == "mean":
        g = g * np.sum(target != options.get("ignore_index", -100)) / len(target)
    return g, None


def _ce_naive_forward(ctx, logits, target, reduction="mean", ignore_index=-100):
    with np.errstate(all="ignore"):
        e = np.exp(logits)
        probs = e / e.sum(axis=1, keepdims=True)
        kept = target != ignore_index
        picked = probs[np.arange(len(target)), np.where(kept, target, 0)]
        losses = np.where(kept, -np.log(picked), 0).astype(logits.dtype)
    ctx.naive = (probs, np.where(kept, target, 0), kept, reduction)
    if reduction == "none":
        return losses
    return losses.sum() if reduction == "sum" else losses.sum() / logits.dtype.type(kept.sum())


def _ce_naive_backward(ctx, grad):
    probs, target, kept, reduction = ctx.naive
    out = probs.copy()
    out[np.arange(len(target)), target] -= 1
    out = out * kept[:, None]
    if reduction == "none":
        return out * np.asarray(grad)[:, None], None
    return out * (grad / (kept.sum() if reduction == "mean" else 1)), None


class _SGDDecayAfterMomentum(R.SGD):
    def step(self):
        for i, p in enumerate(self.params):
            if p.grad is not None:
                buffer = self.planted_buffers.get(i)
                buffer = p.grad.copy() if buffer is None else self.momentum * buffer + p.grad
                self.planted_buffers[i] = buffer
                p.data -= self.lr * ((buffer if self.momentum else p.grad) + self.weight_decay * p.data)

    planted_buffers = property(lambda self: self.__dict__.setdefault("_planted", {}))


def _planted(**backward_of):
    return {op: type(op, (getattr(R, op),), {"backward": staticmethod(fn)}) for op, fn in backward_of.items()}


PLANTED = {
    "broadcasting (a gradient not reduced to its operand's shape)": _planted(Mul=_mul_no_unbroadcast),
    "accumulation (a gradient replaced instead of added)": {
        "backward": lambda root, grad=None: torch_engine.engine_backward(root, grad, combine=lambda old, new: new)},
    "a missing transpose": _planted(MatMul=_matmul_square),
    "a wrong saved value": _planted(Tanh=_tanh_input),
    "numerical stability (no max shift)": {
        "CrossEntropy": type("CrossEntropy", (R.CrossEntropy,), {"forward": staticmethod(_ce_naive_forward),
                                                                 "backward": staticmethod(_ce_naive_backward)})},
    "a reduction's divisor": _planted(Mean=_mean_total),
    "a sign": _planted(Sub=_sub_sign),
    "a kink": _planted(ReLU=_relu_kink),
    "an optimizer rule in the wrong order": {"SGD": _SGDDecayAfterMomentum},
    "a reduction that is wrong only with ignore_index": _planted(CrossEntropy=_ce_ignored_mean),
    "layout (a transpose undone by a reshape)": _planted(Transpose=_transpose_reshape),
    "a quotient rule": _planted(Div=_div_power),
}
# A correct engine built the way the planted ones are (replaced parts defined here), so that a
# test which tells planted engines apart by how they are built, not by what they compute, fails.
DECOY = dict(**_planted(Sub=lambda ctx, grad: R.Sub.backward(ctx, grad)), SGD=type("SGD", (R.SGD,), {}),
             backward=lambda root, grad=None: torch_engine.engine_backward(root, grad))
# Each test runs on the correct engines among the planted ones, in an order drawn for each student:
# a test that counts the engines it is handed cannot tell which ones must pass. Each run gets an
# engine built for it, every part new (torch_engine._fresh): one that keeps what it was handed
# cannot tell a planted part seen before by its identity. Whether a test caught a bug is decided
# here (it raised), not by the notebook's `catches`, which a cell can rebind.
TESTS = {"property_test": property_test, "branched_graph_test": branched_graph_test}
runs = [(name, None, changes) for name in TESTS for changes in ({}, DECOY)]
runs += [(name, kind, changes) for kind, changes in PLANTED.items() for name in TESTS]
found = set()
for i in np.random.default_rng(checks.student_seed(18)).permutation(len(runs)):
    name, kind, engine = runs[i]
    if kind is None:
        try:
            checks.run_student("differential_tests", TESTS[name], torch_engine.torch_engine(**engine), numpy_only=False)
        except checks.CheckFailure as failure:
            raise checks.CheckFailure(f"[differential_tests] {name} fails on a correct engine, so it scores 0: "
                                      f"{failure}") from None
    elif kind not in found:
        try:
            checks.run_student("differential_tests", TESTS[name], torch_engine.torch_engine(**engine),
                               allow_warnings=True, numpy_only=False)
        except checks.CheckFailure:
            found.add(kind)
missed = [kind for kind in PLANTED if kind not in found]
caught = len(PLANTED) - len(missed)
print(f"[differential_tests] caught {caught} of {len(PLANTED)} planted bugs"
      + (f"; missed kinds: {', '.join(missed)}" if missed else ""))
round(20 * caught / len(PLANTED), 2)
### END HIDDEN TESTS

# %% [markdown]
# ## 6. Training on a spiral
#
# The data set is CS231n's spiral: three arms of 100 points each in the plane, which no linear
# classifier separates (a linear model reaches about 50%). Arm $k$ has radius $r \in [0, 1]$ and angle
# $4k + 4r + 0.2\,\varepsilon$ with Gaussian noise $\varepsilon$; the next cell (locked) makes it
# from a seed.
#
# One training step of full-batch gradient descent is: logits $= \text{model}(X)$, loss $=$
# `CrossEntropy.apply(logits, y)` (the mean over the batch), `optimizer.zero_grad()`,
# `backward(loss)`, `optimizer.step()`. The gradients left in `.grad` after the step are those of
# the loss at the weights *before* the step, so we can compare them with a PyTorch copy of the same
# model.
#
# **Worked example.** At initialisation the logits are small, so the softmax is nearly uniform and
# the first loss is close to $\log 3 \approx 1.0986$; a loss far above that at step 0 means the
# initialisation or the loss is wrong. With `MLP([2, 32, 3])`, `SGD(lr=1.0, momentum=0.9)` and 200
# steps the training accuracy passes 95%.
#
# ### Exercise `train_step`

# %% nbgrader={"grade": false, "grade_id": "spiral", "locked": true, "schema_version": 3, "solution": false, "task": false}
def make_spiral(n_per_class=100, n_classes=3, seed=0):
    """CS231n's spiral: X (n_per_class * n_classes, 2) float64 and y (int64) from a seed."""
    generator = np.random.default_rng(seed)
    radius = np.tile(np.linspace(0.0, 1.0, n_per_class), n_classes)
    y = np.arange(n_classes).repeat(n_per_class)
    angle = 4.0 * y + 4.0 * radius + 0.2 * generator.standard_normal(y.size)
    X = np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1)
    return X, y


def accuracy(model, X, y):
    """The share of rows whose largest logit is at the true class."""
    return float(np.mean(model(Tensor(X)).data.argmax(axis=1) == y))


X_spiral, y_spiral = make_spiral(seed=0)
SPIRAL_SETUP = {"sizes": [2, 32, 3], "lr": 1.0, "momentum": 0.9, "steps": 200}

# %% nbgrader={"grade": false, "grade_id": "train_step", "locked": false, "schema_version": 3, "solution": true, "task": false}
def train_step(model, optimizer, X, y):
    """One full-batch step on (X, y) with the mean cross-entropy; returns the loss before the step
    as a Python float. Leaves the gradients of that loss in the parameters' .grad."""
    ### BEGIN SOLUTION
    loss = CrossEntropy.apply(model(Tensor(X)), y)
    optimizer.zero_grad()
    backward(loss)
    optimizer.step()
    return float(loss.data)
    ### END SOLUTION


def fit(X, y, sizes, lr, momentum, steps, seed=0):
    """Train MLP(sizes, rng=seed) with SGD; returns the model and the loss curve."""
    model = MLP(sizes, rng=seed)
    optimizer = SGD(model.parameters(), lr=lr, momentum=momentum)
    return model, [train_step(model, optimizer, X, y) for _ in range(steps)]


# %% nbgrader={"grade": true, "grade_id": "test_train_step", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# The first step's gradients against a torch copy of the same model (float64), then a whole run.
def first_step(X, y, W1, b1, W2, b2):
    model = MLP([W1.shape[1], W1.shape[0], W2.shape[0]], rng=0)
    for array, value in zip(model.state_dict().values(), (W1, b1, W2, b2)):
        array[...] = value  # state_dict() shares the parameters' arrays
    loss = train_step(model, SGD(model.parameters(), lr=0.1), X, y)
    assert isinstance(loss, float), "[train_step] return the loss as a Python float (loss.item())."
    return tuple(p.grad for p in model.parameters())


def initial_weights(seed, sizes):
    model = checks.run_student("train_step", MLP, sizes, rng=seed)
    return [v.copy() for v in model.state_dict().values()]


# The course's data and setup as the locked cell made them (graded, outside our kernel, where no cell can change them).
SPIRAL = checks.locked_cell("spiral")
checks.against_torch("train_step", first_step, "mlp_cross_entropy_grads",
                     [checks.case("spiral, MLP([2, 32, 3]) at its initial weights", SPIRAL.X_spiral[::7],
                                  SPIRAL.y_spiral[::7], *initial_weights(0, [2, 32, 3]))])
# fit gets copies: a write into an array it receives reaches ours, and we score the weights on the originals
model, losses = checks.run_student("train_step", fit, SPIRAL.X_spiral.copy(), SPIRAL.y_spiral.copy(),
                                   **SPIRAL.SPIRAL_SETUP)
# A loss far from log(3) at step 0 means a wrong initialisation or loss (0.2: the initial logits are ~0.5)
assert abs(losses[0] - np.log(3)) < 0.2, f"[train_step] the first loss is {losses[0]:.4f}, expected about log 3 = 1.0986."
# The accuracy of the weights that fit trained, through torch's MLP on them (test_modules checks that ours computes
# the same), so that neither our model's forward nor our accuracy helper is taken at its word.
weights = [v.copy() for v in checks.run_student("train_step", model.state_dict).values()]
logits = checks.oracle_value("mlp_stack", SPIRAL.X_spiral, *weights)
train_accuracy = float(np.mean(logits.argmax(axis=1) == SPIRAL.y_spiral))
assert train_accuracy >= 0.95, (f"[train_step] training accuracy {train_accuracy:.1%} after "
                                f"{SPIRAL.SPIRAL_SETUP['steps']} steps; expected >= 95%. Hint: does each step call "
                                "optimizer.zero_grad() before backward? (Otherwise gradients pile up across steps.)")
### BEGIN HIDDEN TESTS
X_h, y_h = SPIRAL.make_spiral(40, 3, seed=5)
hidden_first = [checks.case("spiral seed 5, MLP([2, 8, 3])", X_h, y_h, *initial_weights(3, [2, 8, 3]))]
checks.against_torch("train_step", first_step, "mlp_cross_entropy_grads", hidden_first)
### END HIDDEN TESTS

# %% [markdown]
# ## 7. The note
#
# ### Explain `note`
#
# Write a one-page note (about 400 to 600 words) on the engine and the tests we built, organised by
# the five criteria of the project rubric. Be specific to *our* code: name ops, shapes, tolerances
# and tests. (a) **Gradient correctness**: the tolerance of each check (against torch, against
# central differences) and the step $h$, each with its reason. (b) **Broadcasting**: which
# operand shapes our tests draw, and why reducing with `unbroadcast` is the adjoint of
# broadcasting. (c) **Numerical stability**: why the max shift keeps `CrossEntropy` finite on
# float32 logits of magnitude $10^3$ and leaves its gradient unchanged, and what the naive form
# gives on the same input. (d) **Saved values and mutation**: what each op saves for backward and
# why, and what happens in our engine if a saved input is edited in place before backward.
# (e) **Layout**: why transposed and non-contiguous inputs give the same gradients as contiguous
# copies in our engine, and which of our tests shows it. (Graded by hand; 3 points per part, 15 in
# all: a part earns 2 for the rubric's *Pass* level and 3 for its *Strong* level.)

# %% [markdown] nbgrader={"grade": true, "grade_id": "note", "locked": false, "points": 15, "schema_version": 3, "solution": true, "task": false}
# **Model answer.**
#
# *(a) Gradient correctness (3 points).* Every op is compared with PyTorch in float64 on random
# inputs with a random upstream gradient, with `rtol=1e-9, atol=1e-12`: two correct float64
# implementations differ by a few ulps per term summed, about $10^{-13}$ for our sizes, while any
# real bug is off by more than $10^{-3}$. The branched graph (x reused in `x * x`, b broadcast over
# the rows, `MatMul`, `CrossEntropy`, a `Mean`) is also compared with central differences of our
# own forward with $h = 10^{-6}$: the truncation error is about $h^2 |f'''| \approx 10^{-12}$ and the
# rounding error about $\epsilon |f| / h \approx 10^{-10}$ (the optimum is near
# $(\epsilon/2)^{1/3} \approx 5 \times 10^{-6}$), so `rtol=1e-5, atol=1e-7` has a margin of 100 and
# still catches a wrong factor or sign. *Strong:* both references agree on the branched graph, and
# these reasons are stated. *Pass:* only the torch comparison with a stated tolerance.
#
# *(b) Broadcasting (3 points).* If $b$ is broadcast to the output's shape, each $b_j$ is used once
# per copy, so by the chain rule $\bar b_j$ is the sum of the upstream gradient over the copies:
# summing over the prepended axes and the stretched size-1 axes (keeping them) is the adjoint of
# broadcasting. `property_test` draws random compatible pairs (a random output shape, operands that
# drop leading axes and shrink random axes to 1, 0-d operands) plus fixed pairs such as
# `(3, 1)` with `(1, 4)`, and compares both gradients' shapes and values with torch. *Pass:* fixed
# broadcast cases; *Strong:* random pairs against torch.
#
# *(c) Numerical stability (3 points).* With $m = \max_j z_j$,
# $\log\sum_j e^{z_j} = m + \log \sum_j e^{z_j - m}$: every exponent is at most 0, the sum lies in
# $[1, C]$, so nothing overflows and the log never sees 0. For float32 logits near $10^3$ the naive
# form computes $e^{1000} = \infty$ and $\infty / \infty = $ nan. The shift is exact in real
# arithmetic, so the loss as a function of $z$ is the same function and its gradient,
# $\mathrm{softmax}(z) - \mathrm{onehot}(t)$, is unchanged (softmax is invariant to adding a
# constant to every logit). `property_test` feeds float32 logits of magnitude $10^3$ and asserts a
# finite loss equal to torch's; the planted naive engine fails exactly there. *Strong* adds the
# naive form failing on the same input.
#
# *(d) Saved values and mutation (3 points).* `Add`, `Sub`: the two shapes only (the gradient
# does not depend on the values). `Mul`, `Div`: both inputs ($\bar a$ needs $b$ and $\bar b$ needs
# $a$; `Div` also $b^2$). `MatMul`: $A$ and $B$. `Sum`, `Mean`, `Reshape`: the input shape (and the
# axes). `Transpose`: nothing but the two dims. `Exp`, `Tanh`: their output, because the
# derivative is a function of it ($y$, $1 - y^2$). `Log`: its input ($1/x$). `ReLU`: the boolean mask
# $x > 0$ (one byte per entry, no alias of $x$). `CrossEntropy`: the probabilities and the targets.
# Our skeleton saves references, not copies: if $x$ is edited in place after `Mul` saved it and
# before `backward`, the gradient silently uses the new value (unit 1.7's defect). A test that
# edits a saved input between forward and backward and compares with a gradient computed
# before the edit reproduces it; the fix is to save a copy (or a version counter that makes
# backward refuse, as torch does). `ReLU` survives by design, since its mask is a new array.
#
# *(e) Layout (3 points).* Every op computes with NumPy functions that accept any strides, and no
# backward assumes C order: `unbroadcast` sums and reshapes, `Transpose` swaps axes back, `Reshape`
# reshapes the gradient (a copy when needed). The checks pass non-contiguous (strided and
# transposed) inputs and compare the gradients with those of contiguous copies, and
# `property_test` feeds transposed views to `Mul`, `MatMul`, `Tanh` and `Reshape`. *Strong*
# would add storage and offset assertions for a slice, a transpose and an expand against
# `torch.Tensor.stride()`.

# %% [markdown]
# ## 8. Figure: the loss curve and the decision boundary
#
# The figure trains the spiral model once more with our engine and keeps a copy of the weights
# every 10 steps. Left: the training loss against the step. Right: the plane coloured by the class
# the model predicts, with the training points; the slider steps through training, from the
# random initial boundary to the three interleaved arms. Where the accuracy is still below 95%, the
# colours cut straight across the arms.

# %% nbgrader={"grade": false, "grade_id": "training_figure", "locked": true, "schema_version": 3, "solution": false, "task": false}
import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display
from matplotlib.colors import ListedColormap

with checks.when_written("this figure"):
    figure_model = MLP(SPIRAL_SETUP["sizes"], rng=0)
    figure_optimizer = SGD(figure_model.parameters(), lr=SPIRAL_SETUP["lr"], momentum=SPIRAL_SETUP["momentum"])
    figure_losses, figure_snapshots = [], {}
    for step in range(SPIRAL_SETUP["steps"] + 1):
        if step % 10 == 0:
            figure_snapshots[step] = {k: v.copy() for k, v in figure_model.state_dict().items()}
        if step < SPIRAL_SETUP["steps"]:
            figure_losses.append(train_step(figure_model, figure_optimizer, X_spiral, y_spiral))
    _axis = np.linspace(-1.2, 1.2, 81)
    FIGURE_GRID = np.stack(np.meshgrid(_axis, _axis), axis=-1).reshape(-1, 2)


    def draw_training(step):
        snapshot = figure_snapshots[step]
        for array, value in zip(figure_model.state_dict().values(), snapshot.values()):
            array[...] = value
        classes = figure_model(Tensor(FIGURE_GRID)).data.argmax(axis=1).reshape(len(_axis), len(_axis))
        fig, (ax_loss, ax_plane) = plt.subplots(1, 2, figsize=(11, 4.4))
        ax_loss.plot(figure_losses, color="black")
        ax_loss.axvline(step, color="tab:red")
        ax_loss.set_xlabel("step")
        ax_loss.set_ylabel("mean cross-entropy")
        ax_loss.set_yscale("log")
        ax_loss.set_title("training loss")
        ax_plane.imshow(classes, origin="lower", extent=(-1.2, 1.2, -1.2, 1.2), vmin=0, vmax=2,
                        cmap=ListedColormap(["#9ecae1", "#fdae6b", "#a1d99b"]))
        ax_plane.scatter(X_spiral[:, 0], X_spiral[:, 1], c=np.array(["tab:blue", "tab:orange", "tab:green"])[y_spiral],
                         edgecolors="white", s=18)
        ax_plane.set_title(f"decision boundary at step {step}: accuracy {accuracy(figure_model, X_spiral, y_spiral):.0%}")
        ax_plane.set_aspect("equal")
        fig.tight_layout()
        plt.show()


    figure_slider = widgets.IntSlider(value=SPIRAL_SETUP["steps"], min=0, max=SPIRAL_SETUP["steps"], step=10,
                                      description="step", continuous_update=False)
    display(figure_slider, widgets.interactive_output(draw_training, {"step": figure_slider}))

# %% [markdown]
# ## 9. Putting it together
#
# Our engine trained a classifier; the same weights should now work unchanged in PyTorch, because
# `state_dict` uses torch's keys and shapes and our ops follow torch's semantics. The cell loads our
# trained weights into `torch.nn.Sequential(Linear, ReLU, Linear)` and compares the two models'
# logits on a fresh spiral drawn with another seed (so also the accuracy on points the model never
# saw), and runs our own differential tests on our own engine one last time.

# %% nbgrader={"grade": false, "grade_id": "putting_it_together", "locked": true, "schema_version": 3, "solution": false, "task": false}
with checks.when_written("this example"):
    sizes = SPIRAL_SETUP["sizes"]
    trained = MLP(sizes, rng=0)  # the weights after the last step, whatever the slider shows
    for array, value in zip(trained.state_dict().values(), figure_snapshots[SPIRAL_SETUP["steps"]].values()):
        array[...] = value
    torch_model = torch.nn.Sequential(torch.nn.Linear(sizes[0], sizes[1]), torch.nn.ReLU(),
                                      torch.nn.Linear(sizes[1], sizes[2])).double()
    torch_model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in trained.state_dict().items()})
    X_fresh, y_fresh = make_spiral(seed=1)
    ours = trained(Tensor(X_fresh)).data
    with torch.no_grad():
        theirs = torch_model(torch.from_numpy(X_fresh)).numpy()
    print(f"largest difference between our logits and torch's: {np.max(np.abs(ours - theirs)):.2e}")
    print(f"training accuracy {accuracy(trained, X_spiral, y_spiral):.1%}, "
          f"accuracy on a fresh spiral {accuracy(trained, X_fresh, y_fresh):.1%}")
    print("our differential tests on our engine:",
          "fail" if catches(property_test, my_engine) or catches(branched_graph_test, my_engine) else "pass")

# %% [markdown]
# ## Summary
#
# - A reverse-mode tensor engine is a skeleton plus one small class per op: forward saves exactly
#   what backward needs, backward returns one vector-Jacobian product per input, and every binary op
#   ends with `unbroadcast`, because the adjoint of broadcast is sum.
# - `backward` orders the graph with an explicit stack, seeds a one-element root with ones, adds
#   (`+=`) the contributions of every path, and leaves `.grad` on leaves only, accumulating across
#   calls, as torch does.
# - `CrossEntropy` fused with the max shift is finite on extreme float32 logits, and its gradient is
#   softmax minus one-hot, divided by the number of targets that are not ignored.
# - `Module` registration gives torch's `state_dict` keys, so weights move between our engine and
#   PyTorch unchanged; `SGD` follows `torch.optim.SGD` step for step.
# - A differential test is judged by the bugs it catches: random upstream gradients, random
#   broadcast shape pairs, deliberate edge cases, float64 with justified tolerances, and a branched
#   graph checked against torch and central differences.
#
# This is the last unit of the course. From here, the same engine extends naturally: more ops
# (indexing, convolution), other optimizers (Adam), and PyTorch's own `torch.autograd.gradcheck`
# and `torch.testing` utilities for testing real extensions.

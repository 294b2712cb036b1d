# %% [markdown]
# # 1.4 Branches, broadcasting and saved values in backward
#
# In unit 1.3 our engine could only combine arrays of the same shape. Real networks never do:
# the bias of a linear layer has shape `(out,)` and is added to a batch of shape `(N, out)`, a
# per-row statistic of shape `(N, 1)` scales a whole `(N, C)` matrix, and a learning rate is a
# 0-d scalar. NumPy and PyTorch handle this with **broadcasting**: the smaller operand is
# stretched, without copying, to the shape of the larger one. In this unit we teach our engine
# to broadcast, and we derive the rule that makes its backward pass right: broadcasting copies
# values, so the gradient of a broadcast is a **sum** over the copies.
#
# Along the way we add the remaining operations a classifier needs (`Sub`, `Div`, reductions
# over several axes, `Mean`, `Reshape`, `Transpose`), we turn unit 1.2's loss into one fused
# `CrossEntropy` operation, and we look closely at what each operation keeps from its forward
# pass for its backward pass. At the end, our own engine trains the two-layer network of unit
# 1.1.
#
# ## Learning goals
#
# After this unit we can:
#
# 1. compute the shape two or more arrays broadcast to, with NumPy's and PyTorch's rule, and say
#    when they cannot be broadcast;
# 2. derive that the adjoint of a broadcast is a sum over the prepended and the stretched axes,
#    and reduce a gradient to exactly the shape of its input;
# 3. write the backward passes of `Add`, `Sub`, `Mul` and `Div` for operands of different shapes;
# 4. write the backward passes of sums and means over several axes, of `Reshape` and of
#    `Transpose`;
# 5. fuse softmax, log and the reduction into one `CrossEntropy` operation whose backward is
#    softmax minus one-hot, stable for float32 logits of magnitude $10^3$;
# 6. follow a gradient along several paths of one graph, one of them through a broadcast;
# 7. decide what each operation must save for its backward pass, and why.
#
# ## Readings
#
# - **Understanding Deep Learning** (Prince), chapter 7, *Gradients and initialization*: the
#   sections on computing derivatives, the toy example and the backpropagation algorithm, whose
#   matrix form sums the bias gradient over the batch.
# - **Dive into Deep Learning**, 2.1.4 *Broadcasting* (the rule, with examples), 2.5 *Automatic
#   Differentiation* (2.5.2 backward for non-scalar variables) and 5.3 *Forward Propagation,
#   Backward Propagation, and Computational Graphs*.
# - **CS231n**, *Backpropagation, Intuitions* ("Patterns in backward flow": add distributes, gradients
#   add up at forks; "Gradients for vectorized operations") and Justin Johnson's note *Derivatives,
#   Backpropagation, and Vectorization*.
# - **PyTorch documentation**: *Broadcasting semantics*, `torch.broadcast_shapes`,
#   `torch.Tensor.sum_to_size` (our `unbroadcast`), *Autograd mechanics* (section *Saved
#   tensors*), *Extending torch.autograd* (`ctx.save_for_backward`) and
#   `torch.nn.CrossEntropyLoss`.
# - **NumPy documentation**: *Broadcasting* (the general rule, with the "aligned on the right"
#   pictures).
#
# ## How this notebook works
#
# Each exercise has a heading with its task ID, the math, a worked example, a cell for our code
# and a test cell. The test cells run visible checks; when the notebook is graded, hidden checks
# in the same cells run the same kinds of cases with other random seeds, and the broadcast
# operations on shape pairs drawn for each student. Every operation is
# compared with PyTorch: its forward value, what it saves, and its backward pass against torch
# autograd and central finite differences, with a random upstream gradient, a zero upstream
# gradient, 0-d and size-1 shapes and non-contiguous inputs. Three rules hold throughout:
#
# - **NumPy only.** A solution that calls torch earns no points for that exercise.
# - **Same dtype as torch.** float32 in, float32 out; float64 in, float64 out.
# - **No warnings.** A NumPy `RuntimeWarning` (overflow, divide by zero, invalid value) fails the
#   check: nbgrader gives no points to a test cell that writes to stderr.
#
# Part 1 gives the engine of unit 1.3 in a locked cell; the exercises add to it, and later
# checks use the operations written earlier (the `branched_loss` check runs `Add`, `Mul`,
# `Sum` and `Mean` from this notebook). If an early check fails, fix it first.
#
# | part | task | points |
# |---|---|---|
# | 2 | `broadcast_shape` | 6 |
# | 2 | concept check `broadcast_result` | 3 |
# | 3 | `unbroadcast` | 10 |
# | 3 | concept check `bias_grad_terms` | 3 |
# | 4 | `add_sub` | 8 |
# | 4 | `mul_div` | 10 |
# | 5 | `sum`, `mean` | 8 + 6 |
# | 5 | concept check `mean_count` | 3 |
# | 5 | `reshape_transpose` | 6 |
# | 6 | `cross_entropy` (two test cells: the exact cases, and float32 logits of magnitude 1e3) | 10 + 5 |
# | 7 | `branched_loss` | 10 |
# | 8 | `explain_saved` (written, graded by hand) | 12 |
# | | **total** | **100** |

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math

import numpy as np
from autograder.inside import checks

# %% [markdown]
# ## 1. The engine from unit 1.3
#
# The next cell (locked) is the engine we built in unit 1.3, so that this notebook runs on its
# own:
#
# - `Context`, with `ctx.save_for_backward(*values)` and `ctx.saved_tensors`; options such as
#   `axis` are kept as plain attributes (`ctx.axis = axis`);
# - `Function`, whose subclasses define `forward(ctx, *arrays, **options)` and
#   `backward(ctx, grad)`, and which we call as `Add.apply(a, b)`;
# - `Tensor`, with `data`, `requires_grad`, `grad` and the `fn`, `ctx` and `inputs` that made it.
#   Its operators `+ - * / @`, unary `-`, `.sum()`, `.mean()`, `.reshape()`, `.transpose()`,
#   `.exp()`, `.log()`, `.tanh()` and `.relu()` look their Function up by name when they run, so
#   they use the classes we write below. A Python number in an expression takes the tensor's
#   dtype (`x * 0.5` stays float32 for a float32 `x`), as in torch;
# - `topological_order(root)` and `backward(root, grad=None)`, unit 1.3's reverse accumulation.
#   It adds (`+=`) every gradient an input receives, so a node reached along several paths gets
#   the sum, and, as torch does, it refuses a gradient whose shape is not its input's shape;
# - the operations of unit 1.3 that need no change: `Neg`, `MatMul` (2-D), `Exp`, `Log`,
#   `Tanh` and `ReLU`.
#
# This unit rewrites `Add` and `Mul` for operands of different shapes, adds `Sub` and `Div`,
# extends `Sum` to several axes, and adds `Mean`, `Reshape`, `Transpose` and `CrossEntropy`.

# %% nbgrader={"grade": false, "grade_id": "machinery", "locked": true, "schema_version": 3, "solution": false, "task": false}
class Context:
    """Scratch space shared by one forward call and the matching backward call."""

    def __init__(self):
        self.saved_tensors = ()

    def save_for_backward(self, *values):
        """Keep arrays (or shapes) for backward, which reads them from ``ctx.saved_tensors``."""
        self.saved_tensors = values


class Function:
    """Base class of the operations. Subclasses define ``forward`` and ``backward``; call ``apply``."""

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
        """Run the operation on tensors (numbers and arrays become constant tensors)."""
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
        self.data = np.asarray(data)  # integer class targets stay integers
        self.requires_grad = bool(requires_grad)
        self.grad = None  # filled in by backward, for leaves that require grad
        self.fn = None  # the Function that made this tensor (None for a leaf)
        self.ctx = None  # that Function's Context: what its forward saved
        self.inputs = ()  # the tensors this one was computed from

    @property
    def is_leaf(self):
        return self.fn is None

    @property
    def shape(self):
        return self.data.shape

    @property
    def ndim(self):
        return self.data.ndim

    @property
    def dtype(self):
        return self.data.dtype

    def __repr__(self):
        origin = f"fn={self.fn.__name__}" if self.fn else f"requires_grad={self.requires_grad}"
        return f"Tensor({np.array2string(self.data, precision=4)}, {origin})"

    def backward(self, grad=None):
        backward(self, grad)

    def _operand(self, other):
        """A Tensor for the other operand: a Python number takes this tensor's float dtype."""
        if isinstance(other, Tensor):
            return other
        if isinstance(other, (int, float)) and np.issubdtype(self.dtype, np.floating):
            return Tensor(np.asarray(other, dtype=self.dtype))
        return Tensor(other)

    # Each operator looks its Function up by name when it runs, so it uses the classes below.
    def __add__(self, other):
        return Add.apply(self, self._operand(other))

    def __radd__(self, other):
        return Add.apply(self._operand(other), self)

    def __sub__(self, other):
        return Sub.apply(self, self._operand(other))

    def __rsub__(self, other):
        return Sub.apply(self._operand(other), self)

    def __mul__(self, other):
        return Mul.apply(self, self._operand(other))

    def __rmul__(self, other):
        return Mul.apply(self._operand(other), self)

    def __truediv__(self, other):
        return Div.apply(self, self._operand(other))

    def __rtruediv__(self, other):
        return Div.apply(self._operand(other), self)

    def __matmul__(self, other):
        return MatMul.apply(self, self._operand(other))

    def __rmatmul__(self, other):
        return MatMul.apply(self._operand(other), self)

    def __neg__(self):
        return Neg.apply(self)

    def sum(self, axis=None, keepdims=False):
        return Sum.apply(self, keepdims=keepdims, axis=axis)

    def mean(self, axis=None, keepdims=False):
        return Mean.apply(self, keepdims=keepdims, axis=axis)

    def reshape(self, *shape):
        """``t.reshape(2, 3)`` or ``t.reshape((2, 3))``; one size may be -1."""
        new_shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return Reshape.apply(self, shape=new_shape)

    def transpose(self, dim0, dim1):
        return Transpose.apply(self, dim1=dim1, dim0=dim0)

    def exp(self):
        return Exp.apply(self)

    def log(self):
        return Log.apply(self)

    def tanh(self):
        return Tanh.apply(self)

    def relu(self):
        return ReLU.apply(self)


def topological_order(root):
    """Every node that ``root`` was computed from, and ``root``, each once and after its inputs.

    Depth-first, with an explicit stack of (node, iterator over its inputs) instead of recursion.
    """
    order, visited = [], {id(root)}
    stack = [(root, iter(root.inputs))]
    while stack:
        node, pending = stack[-1]
        for parent in pending:
            if id(parent) not in visited:
                visited.add(id(parent))
                stack.append((parent, iter(parent.inputs)))
                break
        else:  # every input of node is placed: node comes next
            stack.pop()
            order.append(node)
    return order


def backward(root, grad=None):
    """Unit 1.3's reverse accumulation: add d(root)/d(leaf), weighted by ``grad``, into the
    ``.grad`` of every leaf under ``root`` that requires grad."""
    if grad is None:
        if root.data.size != 1:
            raise RuntimeError("backward() needs a grad for a root with more than one element")
        grad = np.ones(root.shape, dtype=root.dtype)
    received = {id(root): np.asarray(grad)}  # id(node) -> the sum of the gradients sent to it so far
    for node in topological_order(root)[::-1]:  # every consumer before the nodes it used
        node_grad = received.pop(id(node), None)
        if node_grad is None or not node.requires_grad:
            continue
        if node.is_leaf:
            if node.grad is None:
                node.grad = np.zeros_like(node.data)
            node.grad += node_grad
            continue
        input_grads = node.fn.backward(node.ctx, node_grad)
        if not isinstance(input_grads, tuple):
            input_grads = (input_grads,)
        for k, (parent, parent_grad) in enumerate(zip(node.inputs, input_grads)):
            if not parent.requires_grad or parent_grad is None:
                continue
            if np.shape(parent_grad) != parent.shape:  # torch refuses such a gradient too
                raise RuntimeError(f"{node.fn.__name__}.backward returned a gradient of shape "
                                   f"{np.shape(parent_grad)} for input {k}, whose shape is {parent.shape}")
            if id(parent) not in received:
                received[id(parent)] = np.zeros_like(parent.data)
            received[id(parent)] += parent_grad


class Neg(Function):
    """-x. Saves nothing."""

    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, grad):
        return -grad


class MatMul(Function):
    """A @ B for 2-D arrays A (n, k) and B (k, m). Saves (A, B)."""

    @staticmethod
    def forward(ctx, A, B):
        ctx.save_for_backward(A, B)
        return A @ B

    @staticmethod
    def backward(ctx, grad):
        A, B = ctx.saved_tensors
        return grad @ B.T, A.T @ grad


class Exp(Function):
    """exp(x). Saves its output."""

    @staticmethod
    def forward(ctx, x):
        out = np.exp(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out


class Log(Function):
    """log(x). Saves its input."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.log(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / x


class Tanh(Function):
    """tanh(x). Saves its output."""

    @staticmethod
    def forward(ctx, x):
        out = np.tanh(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * (1 - out * out)


class ReLU(Function):
    """max(x, 0), with slope 0 at x = 0. Saves its mask x > 0."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x > 0)
        return np.maximum(x, 0)

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return np.where(mask, grad, 0)


# %% [markdown]
# ## 2. Broadcasting: the forward rule
#
# Two arrays can be combined elementwise when their shapes **broadcast**. NumPy and PyTorch
# use the same rule:
#
# 1. **Align the shapes on the right.** If one shape has fewer axes, it is padded with axes of
#    size 1 on the *left*: `(4,)` against `(3, 4)` is read as `(1, 4)`. These new axes are the
#    **prepended** axes.
# 2. **Compare axis by axis.** Two sizes are compatible when they are equal or when one of them
#    is 1. An axis of size 1 is **stretched** to the other size, whatever it is, even 0: `(1,)`
#    against `(0,)` gives `(0,)`. Any other pair of sizes (3 against 4, or 0 against 3) cannot
#    be broadcast.
#
# The result has, on every axis, the size that is not 1 (or 1 if both are). Formally, for shapes
# $s^{(1)}, \dots, s^{(k)}$ padded on the left with ones to a common length $n$, the result is
#
# $$
# r_i = \begin{cases} 1 & \text{if } s^{(j)}_i = 1 \text{ for every } j, \\
# \text{the common size of the } s^{(j)}_i \ne 1 & \text{otherwise (which must all be equal).} \end{cases}
# $$
#
# Broadcasting is **free**: NumPy does not copy the smaller array, it reads the same element
# again for every position along a stretched axis (a stride of 0; unit 1.6 shows how). In the
# computation graph, though, it does something important: one input value is **used several
# times**, once per position it is stretched to. Part 3 draws the consequence for the gradient.
#
# **Worked example.** `(3, 1)` with `(1, 4)`: no padding; axis 0 has sizes 3 and 1, so 3; axis 1
# has 1 and 4, so 4: the result is `(3, 4)`. `(4,)` with `(3, 4)`: padded to `(1, 4)`, result
# `(3, 4)`. A 0-d scalar `()` with `(3, 4)`: padded to `(1, 1)`, result `(3, 4)`. Three shapes
# `(2, 1)`, `(1,)` and `(3, 1, 5)`: padded to `(1, 2, 1)`, `(1, 1, 1)` and `(3, 1, 5)`, result
# `(3, 2, 5)`. And `(2, 3)` with `(3, 2)`: axis -1 has sizes 3 and 2, neither of them 1, so they
# cannot be broadcast.
#
# ### Exercise `broadcast_shape`
#
# Write `broadcast_shape(*shapes)`, like `torch.broadcast_shapes`, but raising `ValueError` (torch
# raises `RuntimeError`) when the shapes cannot be broadcast.

# %% nbgrader={"grade": false, "grade_id": "broadcast_shape", "locked": false, "schema_version": 3, "solution": true, "task": false}
def broadcast_shape(*shapes):
    """The shape that the given shapes broadcast to, like torch.broadcast_shapes.

    shapes : one or more shapes, each a tuple of ints (() for a 0-d array), any number of them.

    Returns a tuple of ints. Shapes are aligned on the right; a size-1 axis stretches to any
    size (0 included). Raises ValueError when two sizes on one axis differ and neither is 1.
    """
    ### BEGIN SOLUTION
    ndim = max(len(shape) for shape in shapes)
    result = [1] * ndim
    for shape in shapes:
        padded = (1,) * (ndim - len(shape)) + tuple(shape)  # align on the right
        for axis, size in enumerate(padded):
            if size == 1:
                continue  # a size-1 axis stretches to whatever the others have
            if result[axis] not in (1, size):
                raise ValueError(f"shapes {shapes} cannot be broadcast: axis {axis - ndim} has sizes "
                                 f"{result[axis]} and {size}, and neither is 1")
            result[axis] = size
    return tuple(result)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_broadcast_shape", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def alignment_hint(got, expected):
    if got.shape == expected.shape and sorted(got.tolist()) == sorted(expected.tolist()):
        return "the sizes are right but in the wrong places: align the shapes on the right, padding on the left."
    if np.any((expected == 0) & (got == 1)):
        return "a size-1 axis stretches to the other size even when that size is 0: (1,) with (0,) gives (0,)."
    return None


got = checks.run_student("broadcast_shape", broadcast_shape, (3, 1), (1, 4))
assert isinstance(got, tuple), f"[broadcast_shape] return a tuple of ints, as torch.Size is one; got {type(got).__name__}."
listed = [((3, 1), (1, 4)), ((4,), (3, 4)), ((), (3, 4)), ((2, 3), ()), ((2, 1), (1,), (3, 1, 5)),
          ((5, 1, 3), (4, 1)), ((1,), (0,)), ((7,),)]
checks.against_torch("broadcast_shape", broadcast_shape, "broadcast_shape",
                     [checks.case(f"shapes {s}", *s) for s in listed]
                     + [checks.case(f"random compatible shapes {s}", *s) for s in checks.broadcast_pairs(1, 4)],
                     check_dtype=False, hints=[alignment_hint])
for shapes in [((2, 3), (3, 2)), ((3,), (4,)), ((0,), (3,)), ((1, 2), (4, 3), (1,))]:
    checks.expect_raises("broadcast_shape", ValueError, broadcast_shape, *shapes)
### BEGIN HIDDEN TESTS
def incompatible(pair, seed):
    """The pair with one size of its longer shape replaced by a size that conflicts with the other."""
    rng = np.random.default_rng(seed)
    a, b = (list(s) for s in pair)
    long, short = (a, b) if len(a) >= len(b) else (b, a)
    if not long:  # both 0-d
        long.append(1)
    if not short:
        short.append(1)
    axis = int(rng.integers(1, len(short) + 1))
    short[-axis] = 2 if short[-axis] == 1 else short[-axis]
    long[-axis] = short[-axis] + 1  # neither equal nor 1
    return tuple(a), tuple(b)


# fixed pairs, then pairs drawn for each student (checks.student_seed): what the fixed ones catch
# never depends on the draw
more = [((2, 1, 4), (3, 1)), ((1, 5), (4, 3, 1)), ((6,), (1, 1, 6)), ((3, 1, 1, 2), (4, 1)), ((1,), ()),
        ((2, 3, 1, 5, 1), (1, 4, 5, 1))]
more += checks.broadcast_pairs(checks.student_seed("broadcast_shape"), 12, max_ndim=5)
hidden_cases = [checks.case(f"shapes {s} (hidden)", *s) for s in more] + [
    checks.case("three shapes", (4, 1, 1), (1, 3, 1), (2,)), checks.case("one 0-d shape", ()),
    checks.case("size 0 against 1", (0, 1), (1, 5)), checks.case("all size 1", (1, 1), (1,))]
checks.against_torch("broadcast_shape", broadcast_shape, "broadcast_shape", hidden_cases, hints=[alignment_hint],
                     check_dtype=False)
for k, pair in enumerate(more):
    checks.expect_raises("broadcast_shape", ValueError, broadcast_shape, *incompatible(pair, 100 + k))
### END HIDDEN TESTS

# %% [markdown]
# ### Concept check `broadcast_result`
#
# This is the example of PyTorch's *Broadcasting semantics* page. We add `x` of shape
# `(8, 1, 6, 1)` and `y` of shape `(7, 1, 5)`.
#
# - `broadcast_out_shape`: the shape of `x + y`, as a tuple.
# - `y_grad_sum_axes`: the axes of the result (counted from 0, non-negative) along which `y` was
#   copied, by prepending or by stretching, as a tuple. Part 3 shows why the gradient of `y` is
#   a sum over exactly these axes.

# %% nbgrader={"grade": false, "grade_id": "broadcast_result", "locked": false, "schema_version": 3, "solution": true, "task": false}
broadcast_out_shape = None  # the shape of x + y, a tuple
y_grad_sum_axes = None  # the result's axes along which y was copied, a tuple of non-negative ints
### BEGIN SOLUTION
broadcast_out_shape = (8, 7, 6, 5)
y_grad_sum_axes = (0, 2)
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_broadcast_result", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
for name in ("broadcast_out_shape", "y_grad_sum_axes"):
    assert isinstance(globals()[name], (tuple, list)), f"[broadcast_result] set `{name}` to a tuple of whole numbers."
checks.check_hash("broadcast_result", "broadcast_out_shape", tuple(int(v) for v in broadcast_out_shape),
                  "061a73c5c97b5de6c0170579d5e1670b943257e93ada60375bc0b262a4b3561b",
                  hint="pad y on the left to four axes, then take the size that is not 1 on every axis.")
checks.check_hash("broadcast_result", "y_grad_sum_axes", tuple(sorted(int(v) for v in y_grad_sum_axes)),
                  "1f64673779413bef9a029dc55b8d5d14cb3039370b90148a649a5baa4584a2b2",
                  hint="y padded on the left is (1, 7, 1, 5): which axes were prepended, and which are 1 against a larger size?")

# %% [markdown]
# ## 3. The adjoint of broadcasting is a sum
#
# Take $b$ of shape $(4,)$ broadcast to $B$ of shape $(3, 4)$: $B_{ij} = b_j$ for every row $i$.
# Each $b_j$ is used three times, once per row. By the chain rule of unit 1.3, a value used
# several times receives the **sum** of the gradients of all its uses:
#
# $$
# \bar b_j = \sum_{i} \frac{\partial B_{ij}}{\partial b_j} \bar B_{ij} = \sum_i \bar B_{ij} .
# $$
#
# In matrix terms, broadcasting is the linear map $b \mapsto B = \mathbf 1 b^\top$, and the
# vector-Jacobian product of a linear map is its transpose, $\bar b = \bar B^\top \mathbf 1$: the
# column sums. This is the general rule. When `shape` is broadcast to a larger shape, an element
# of the result reads the input element found by dropping the prepended axes and setting every
# stretched axis to index 0. So the gradient of the input is the upstream gradient summed
#
# - over the **prepended axes**, which then disappear (the input never had them), and
# - over the **stretched axes** (size 1 in `shape`, larger in the gradient), which stay with
#   size 1 (`keepdims=True`), because the input has them.
#
# Axes that were not stretched pass through unchanged. The result has **exactly** `shape`:
# summing a stretched axis without `keepdims` would give `(3,)` for an input of shape `(3, 1)`,
# and NumPy, aligning on the right, would later stretch that `(3,)` along the wrong axis without
# any error (our `backward` refuses a gradient of the wrong shape, as torch does). This function
# is what `torch.Tensor.sum_to_size` does, and what every binary operation of part 4 calls in
# its backward pass.
#
# **Worked example.** An input of shape $(3, 1)$ was broadcast to $(2, 3, 4)$: axis 0 was
# prepended, axis 2 stretched from 1 to 4. Take the upstream gradient
# $G$ = `np.arange(24).reshape(2, 3, 4)`. Summing over axis 0 gives
# $\begin{pmatrix} 12 & 14 & 16 & 18 \\ 20 & 22 & 24 & 26 \\ 28 & 30 & 32 & 34 \end{pmatrix}$, and
# summing that over its last axis with `keepdims=True` gives
# $\begin{pmatrix} 60 \\ 92 \\ 124 \end{pmatrix}$, of shape $(3, 1)$. For shape $()$ (a 0-d
# scalar) every axis is prepended and the result is the 0-d total, 276.
#
# ### Exercise `unbroadcast`
#
# Write `unbroadcast(grad, shape)`, like `torch.Tensor.sum_to_size(shape)`.

# %% nbgrader={"grade": false, "grade_id": "unbroadcast", "locked": false, "schema_version": 3, "solution": true, "task": false}
def unbroadcast(grad, shape):
    """Reduce the gradient of a broadcast result to the shape of the input that was broadcast.

    grad  : float array, the gradient of a result of shape grad.shape.
    shape : tuple of ints, the shape of the input, which broadcasts to grad.shape.

    Returns an array of exactly `shape` and grad's dtype: grad summed over the prepended axes
    (removed) and over the axes where `shape` has size 1 and grad does not (kept, with size 1).
    """
    ### BEGIN SOLUTION
    grad = np.asarray(grad)
    prepended = grad.ndim - len(shape)
    grad = grad.sum(axis=tuple(range(prepended)))  # prepended axes: summed and dropped
    stretched = tuple(axis for axis, size in enumerate(shape) if size == 1 and grad.shape[axis] != 1)
    return grad.sum(axis=stretched, keepdims=True)  # stretched axes: summed, kept with size 1
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_unbroadcast", "locked": true, "points": 10, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def shape_cases(seed, pairs, label, dtype=np.float64):
    """One case per operand of each pair: a random gradient of the broadcast shape, and the operand's shape."""
    out = []
    for i, pair in enumerate(pairs):
        full = np.broadcast_shapes(*pair)
        for j, shape in enumerate(pair):
            grad = checks.randn(seed * 100 + 2 * i + j, *full, dtype=dtype)
            out.append(checks.case(f"{label}: {full} back to {shape}", grad, shape))
    return out


worked = np.arange(24.0).reshape(2, 3, 4)
checks.against_torch("unbroadcast", unbroadcast, "unbroadcast", [
    checks.case("worked example", worked, (3, 1)),
    checks.case("worked example, to a 0-d scalar", worked, ()),
])
listed = [((3, 1), (1, 4)), ((4,), (3, 4)), ((), (3, 4)), ((5, 1, 3), (4, 1)), ((3, 4), (3, 4)), ((1, 1), (2, 1, 3))]
visible = shape_cases(1, listed, "listed") + shape_cases(2, checks.broadcast_pairs(3, 4), "random")
visible += shape_cases(4, [((3, 1), (1, 4)), ((), (2, 3))], "float32", dtype=np.float32)
visible.append(checks.case("non-contiguous grad", checks.strided(checks.randn(5, 3, 4)), (1, 4)))
checks.against_torch("unbroadcast", unbroadcast, "unbroadcast", visible)
### BEGIN HIDDEN TESTS
# fixed pairs, then pairs drawn for each student (checks.student_seed)
hidden = shape_cases(15, [((1,), (6,)), ((2, 1, 1), (1, 3, 4)), ((1, 1, 1), ()), ((4, 1, 3), (2, 1, 1, 3))],
                     "size-1 and 0-d (hidden)")
hidden += shape_cases(17, [((2, 1, 3), (5, 1)), ((1, 4), ())], "float32 (hidden)", dtype=np.float32)
hidden += shape_cases(checks.student_seed(11), checks.broadcast_pairs(checks.student_seed(12), 12, max_ndim=5),
                      "random (hidden)")
hidden += shape_cases(checks.student_seed(13), checks.broadcast_pairs(checks.student_seed(14), 6), "float32 (hidden)",
                      dtype=np.float32)
hidden.append(checks.case("transposed grad (hidden)", checks.randn(16, 4, 3).T, (3, 1)))
checks.against_torch("unbroadcast", unbroadcast, "unbroadcast", hidden)
### END HIDDEN TESTS

# %% [markdown]
# ### Concept check `bias_grad_terms`
#
# A linear layer computes `y = x @ W + b` with `x` of shape `(32, 10)`, `W` of shape `(10, 5)`
# and `b` of shape `(5,)`, and backward receives an upstream gradient $\bar y$ of shape
# `(32, 5)`.
#
# - `terms_in_b_grad`: how many entries of $\bar y$ are added up into `b.grad[0]`?
# - `terms_in_x_grad`: how many products $\bar y_{nm} W_{dm}$ are added up into `x.grad[0, 0]`?

# %% nbgrader={"grade": false, "grade_id": "bias_grad_terms", "locked": false, "schema_version": 3, "solution": true, "task": false}
terms_in_b_grad = None  # entries of the upstream gradient summed into b.grad[0]
terms_in_x_grad = None  # products summed into x.grad[0, 0]
### BEGIN SOLUTION
terms_in_b_grad = 32
terms_in_x_grad = 5
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_bias_grad_terms", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
checks.check_hash("bias_grad_terms", "terms_in_b_grad", terms_in_b_grad,
                  "e29c9c180c6279b0b02abd6a1801c7c04082cf486ec027aa13515e4f3884bb6b",
                  hint="b is broadcast over the batch axis: each b[m] is used once per row of the batch.")
checks.check_hash("bias_grad_terms", "terms_in_x_grad", terms_in_x_grad,
                  "ef2d127de37b942baad06145e54b0c619a1f22327b2ebbcfbec78f5564afe39d",
                  hint="x[0, 0] enters y[0, m] for every output m, through the matrix product (x grad = y grad @ W^T).")

# %% [markdown]
# ## 4. Broadcast-aware binary operations
#
# A binary operation on operands of different shapes is the composition of two steps:
# broadcast both operands to the common shape, then apply the same-shape operation of unit 1.3.
# The chain rule goes back through both steps: first the same-shape rule, which gives a gradient
# of the **result's** shape for each operand, then `unbroadcast`, which reduces it to that
# operand's shape. With $\tilde a$ and $\tilde b$ the broadcast operands and $\bar z$ the
# upstream gradient:
#
# | $z$ | $\bar a$ | $\bar b$ | saves |
# |---|---|---|---|
# | $a + b$ | $\operatorname{unbroadcast}(\bar z)$ | $\operatorname{unbroadcast}(\bar z)$ | the two shapes only |
# | $a - b$ | $\operatorname{unbroadcast}(\bar z)$ | $\operatorname{unbroadcast}(-\bar z)$ | the two shapes only |
# | $a \odot b$ | $\operatorname{unbroadcast}(\bar z \odot \tilde b)$ | $\operatorname{unbroadcast}(\bar z \odot \tilde a)$ | $(a, b)$ |
# | $a / b$ | $\operatorname{unbroadcast}(\bar z / \tilde b)$ | $\operatorname{unbroadcast}(-\bar z \odot \tilde a / \tilde b^2)$ | $(a, b)$ |
#
# each `unbroadcast` going to the shape of its own operand. The quotient rule gives the last
# row: $\partial (a/b) / \partial a = 1/b$ and $\partial (a/b) / \partial b = -a/b^2$. In NumPy
# we never form $\tilde a$ or $\tilde b$: `grad * b` broadcasts by itself, and the product has
# the result's shape.
#
# **What to save.** `Add` and `Sub` need no values at all, only the two input **shapes**, for
# `unbroadcast`; we save them as `ctx.save_for_backward(a.shape, b.shape)`, as unit 1.3's `Sum`
# saved its input's shape. `Mul` and `Div` save their two inputs, `(a, b)`. `Div` could also
# work from its output $z = a / b$ (since $-a/b^2 = -z/b$), but with broadcasting the output
# can be far larger than the inputs: a `(1000, 1)` column divided by a `(1, 1000)` row makes a
# million numbers from two thousand. So `Div` saves `(a, b)`, never its output.
#
# Every backward below calls `unbroadcast` once per operand, with the comment
# `# adjoint of broadcast is sum`, even when the shapes happen to match (it then changes
# nothing).
#
# **Worked example.** $a$ = `[[1], [2], [3]]`, shape $(3, 1)$, and $b$ = `[10, 20, 30, 40]`,
# shape $(4,)$; the result has shape $(3, 4)$. Take $\bar z$ = `np.arange(12.0).reshape(3, 4)`.
#
# `Add` gives $\bar a$, the row sums with `keepdims`, `[[6], [22], [38]]`, and $\bar b$, the
# column sums, `[12, 15, 18, 21]`. `Sub` gives the same $\bar a$ and $\bar b$ =
# `[-12, -15, -18, -21]`.
#
# ### Exercise `add_sub`
#
# Write `Add` and `Sub` for operands that broadcast.

# %% nbgrader={"grade": false, "grade_id": "add_sub", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Add(Function):
    """a + b, with broadcasting. Saves no arrays: only the shapes (a.shape, b.shape)."""

    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.save_for_backward(a.shape, b.shape)
        return a + b
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        a_shape, b_shape = ctx.saved_tensors
        # adjoint of broadcast is sum
        return unbroadcast(grad, a_shape), unbroadcast(grad, b_shape)
        ### END SOLUTION


class Sub(Function):
    """a - b, with broadcasting. Saves no arrays: only the shapes (a.shape, b.shape)."""

    @staticmethod
    def forward(ctx, a, b):
        ### BEGIN SOLUTION
        ctx.save_for_backward(a.shape, b.shape)
        return a - b
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        a_shape, b_shape = ctx.saved_tensors
        # adjoint of broadcast is sum
        return unbroadcast(grad, a_shape), unbroadcast(-grad, b_shape)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_add_sub", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# Each op on the worked example, on every shape pair of part 2 (including a 0-d scalar on either
# side) and on random compatible pairs: forward and saved values against torch, backward against
# torch autograd and central differences with a random, a zero and a non-contiguous case.
def shapes_only(a, b, out):
    return [(a.shape, b.shape), ()]  # the shapes, saved or kept as attributes; no arrays


spec_pairs = [((3, 1), (1, 4)), ((4,), (3, 4)), ((3, 4), (4,)), ((), (3, 4)), ((2, 3), ()), ((1, 1), (1,))]
worked_a, worked_b = np.array([[1.0], [2.0], [3.0]]), np.array([10.0, 20.0, 30.0, 40.0])
pair_cases = ([checks.case("worked example (3, 1) with (4,)", worked_a, worked_b)]
              + checks.random_cases(40, spec_pairs, label="shape pair of part 2")
              + checks.random_cases(41, checks.broadcast_pairs(41, 3), label="random compatible shapes"))
checks.check_function("add_sub", Add, "add", pair_cases, saves=shapes_only, names=["a", "b"])
checks.check_function("add_sub", Sub, "sub", pair_cases, saves=shapes_only, names=["a", "b"])
### BEGIN HIDDEN TESTS
# fixed pairs, then pairs drawn for each student (checks.student_seed)
seeded = checks.random_cases(44, [((1,), (5, 1)), ((), ()), ((2, 1, 3), (4, 1)), ((3, 1, 2), (1, 4, 1))],
                             label="size-1 and 0-d (hidden)")
drawn = checks.broadcast_pairs(checks.student_seed(43), 8, max_ndim=5)
seeded += checks.random_cases(checks.student_seed(42), drawn, label="random compatible shapes (hidden)")
checks.check_function("add_sub", Add, "add", seeded, saves=shapes_only, names=["a", "b"],
                      seed=checks.student_seed(45))
checks.check_function("add_sub", Sub, "sub", seeded, saves=shapes_only, names=["a", "b"],
                      seed=checks.student_seed(46))
### END HIDDEN TESTS

# %% [markdown]
# **Worked example.** The same $a$, $b$ and $\bar z$ as for `add_sub`. `Mul` gives
# $\bar a_i = \sum_j \bar z_{ij} b_j$ = `[[200], [600], [1000]]` (row 0 is
# $0 \cdot 10 + 1 \cdot 20 + 2 \cdot 30 + 3 \cdot 40$) and $\bar b_j = \sum_i \bar z_{ij} a_i$ =
# `[32, 38, 44, 50]`. For `Div`, take a 0-d $a = 6$ and $b$ = `[1, 2, 3]`: $z$ = `[6, 3, 2]`, and
# with $\bar z$ = `[1, 1, 1]`, $\bar a = \sum_j 1 / b_j = 1.8333$ (0-d, the sum over the prepended
# axis) and $\bar b = -a / b^2$ = `[-6, -1.5, -0.6667]`.
#
# ### Exercise `mul_div`
#
# Write `Mul` and `Div` for operands that broadcast. Both save `(a, b)`.

# %% nbgrader={"grade": false, "grade_id": "mul_div", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Mul(Function):
    """a * b, elementwise, with broadcasting. Saves (a, b)."""

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
    """a / b, elementwise, with broadcasting. Saves (a, b), not its output."""

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


# %% nbgrader={"grade": true, "grade_id": "test_mul_div", "locked": true, "points": 10, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def both_inputs(a, b, out):
    return [(a, b)]


spec_pairs = [((3, 1), (1, 4)), ((4,), (3, 4)), ((3, 4), (4,)), ((), (3, 4)), ((2, 3), ()), ((1, 1), (1,))]
mul_cases = ([checks.case("worked example (3, 1) with (4,)", np.array([[1.0], [2.0], [3.0]]),
                          np.array([10.0, 20.0, 30.0, 40.0]))]
             + checks.random_cases(50, spec_pairs, label="shape pair of part 2")
             + checks.random_cases(51, checks.broadcast_pairs(51, 3), label="random compatible shapes"))
checks.check_function("mul_div", Mul, "mul", mul_cases, saves=both_inputs, names=["a", "b"])
# Div: denominators drawn from [0.5, 2.5], away from 0, so that central differences are accurate
div_cases = ([checks.case("worked example 6 / (1, 2, 3)", np.array(6.0), np.array([1.0, 2.0, 3.0]))]
             + checks.random_cases(52, spec_pairs, label="shape pair of part 2", positive=True)
             + checks.random_cases(53, checks.broadcast_pairs(53, 3), label="random compatible shapes", positive=True))
checks.check_function("mul_div", Div, "div", div_cases, saves=both_inputs, names=["a", "b"])
### BEGIN HIDDEN TESTS
# fixed pairs, then pairs drawn for each student (checks.student_seed)
fixed_pairs = [((1,), (5, 1)), ((), ()), ((2, 1, 3), (4, 1)), ((3, 1, 2), (1, 4, 1))]
drawn_pairs = checks.broadcast_pairs(checks.student_seed(54), 8, max_ndim=5)
mul_hidden = (checks.random_cases(59, fixed_pairs, label="hidden pair")
              + checks.random_cases(checks.student_seed(55), drawn_pairs, label="hidden pair"))
div_hidden = (checks.random_cases(60, fixed_pairs, label="hidden pair", positive=True)
              + checks.random_cases(checks.student_seed(57), drawn_pairs, label="hidden pair", positive=True))
checks.check_function("mul_div", Mul, "mul", mul_hidden, saves=both_inputs, names=["a", "b"],
                      seed=checks.student_seed(56))
checks.check_function("mul_div", Div, "div", div_hidden, saves=both_inputs, names=["a", "b"],
                      seed=checks.student_seed(58))
### END HIDDEN TESTS

# %% [markdown]
# ## 5. Reductions and shape operations
#
# ### Sums and means over several axes
#
# Unit 1.3's `Sum` reduced one axis or all of them. NumPy and torch also accept a **tuple** of
# axes, `x.sum(axis=(0, 2))`, which sums over all of them at once. The backward rule does not
# change: every summed element gets the upstream gradient of the sum it went into, so backward
# **copies** $\bar y$ back along every summed axis,
#
# $$
# y_{j} = \sum_{i, k} x_{ijk} \quad\Longrightarrow\quad \bar x_{ijk} = \bar y_{j} .
# $$
#
# This is broadcasting again, the other way round: summing is the adjoint of broadcasting, and
# broadcasting is the adjoint of summing. With `keepdims=False` the summed axes are gone from
# $\bar y$, so we first put them all back with size 1, `np.expand_dims(grad, axis)` (which takes a
# tuple, with negative axes counted in the input's number of dimensions), and then stretch with
# `np.broadcast_to(grad, shape)`. With `keepdims=True` they are still there. `axis` is `None`
# (every axis), an int or a tuple of ints, negative values counting from the end.
#
# The **mean** divides the sum by the number $k$ of elements that went into each output value,
# the product of the sizes of the reduced axes (of every axis for `axis=None`). So
# $\bar x = \bar y / k$, copied the same way. $k$ is the count of **reduced** elements, not the
# size of the whole input (unless every axis is reduced), nor the size of the output.
#
# Both save only the input's **shape** (`ctx.save_for_backward(x.shape)`), and keep `axis` and
# `keepdims` as attributes of `ctx`.
#
# **Worked example.** $x$ of shape $(2, 3, 4)$, `axis=(0, 2)`: $y$ has shape $(3,)$. With
# $\bar y = (1, 2, 3)$, backward expands to shape $(1, 3, 1)$ and broadcasts: $\bar x_{ijk} = \bar y_j$,
# so every entry of $\bar x[:, 1, :]$ is 2. With `axis=(2, 0)` the result is the same: the order
# of the axes in the tuple does not matter.
#
# ### Exercise `sum`
#
# Write `Sum`, like `x.sum(axis=axis, keepdims=keepdims)`.

# %% nbgrader={"grade": false, "grade_id": "sum", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Sum(Function):
    """x.sum(axis=axis, keepdims=keepdims), axis None, an int or a tuple of ints. Saves x.shape."""

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        ### BEGIN SOLUTION
        ctx.axis, ctx.keepdims = axis, keepdims
        ctx.save_for_backward(x.shape)
        return np.sum(x, axis=axis, keepdims=keepdims)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        (shape,) = ctx.saved_tensors
        if ctx.axis is not None and not ctx.keepdims:
            grad = np.expand_dims(grad, ctx.axis)  # every summed axis comes back with size 1
        return np.broadcast_to(grad, shape)  # each summed element gets the gradient of its sum
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sum", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
x234 = checks.randn(60, 2, 3, 4)
reductions = [
    checks.case("worked example, axis=(0, 2)", x234, axis=(0, 2)),
    checks.case("axis=(2, 0), the same axes in another order", x234, axis=(2, 0)),
    checks.case("axis=(0, -1), keepdims", x234, axis=(0, -1), keepdims=True),
    checks.case("axis=1", x234, axis=1),
    checks.case("axis=-1, keepdims", x234, axis=-1, keepdims=True),
    checks.case("axis=None", x234),
    checks.case("axis=None, keepdims", x234, keepdims=True),
    checks.case("a size-1 axis, axis=1", checks.randn(61, 3, 1, 2), axis=1),
    checks.case("0-d", checks.randn(62)),
]
checks.check_function("sum", Sum, "sum", reductions, saves=lambda x, out, **options: [(x.shape,)], names=["x"])
### BEGIN HIDDEN TESTS
x3345 = checks.randn(63, 3, 3, 4, 5)
hidden_reductions = [
    checks.case("4-D, axis=(1, 3) (hidden)", x3345, axis=(1, 3)),
    checks.case("4-D, axis=(3, 0, 1), keepdims (hidden)", x3345, axis=(3, 0, 1), keepdims=True),
    checks.case("4-D, axis=(-2, -3) (hidden)", x3345, axis=(-2, -3)),
    checks.case("square, axis=0 (hidden)", checks.randn(64, 3, 3), axis=0),
    checks.case("square, axis=(1,) (hidden)", checks.randn(65, 3, 3), axis=(1,)),
    checks.case("1-D, axis=0, keepdims (hidden)", checks.randn(66, 5), axis=0, keepdims=True),
    checks.case("size-1 axes, axis=(0, 2) (hidden)", checks.randn(67, 1, 4, 1), axis=(0, 2)),
    checks.case("0-d, keepdims (hidden)", checks.randn(68), keepdims=True),
]
checks.check_function("sum", Sum, "sum", hidden_reductions, saves=lambda x, out, **options: [(x.shape,)], names=["x"], seed=69)
### END HIDDEN TESTS

# %% [markdown]
# **Worked example.** The same $x$ of shape $(2, 3, 4)$ and `axis=(0, 2)`: each of the 3 means
# averages $k = 2 \cdot 4 = 8$ elements, so with $\bar y = (1, 2, 3)$ every entry of
# $\bar x[:, 1, :]$ is $2/8 = 0.25$. With `axis=None` a single mean averages all 24 elements and
# every entry of $\bar x$ is $\bar y / 24$; with `axis=1`, $k = 3$.
#
# ### Exercise `mean`
#
# Write `Mean`, like `x.mean(axis=axis, keepdims=keepdims)`.

# %% nbgrader={"grade": false, "grade_id": "mean", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Mean(Function):
    """x.mean(axis=axis, keepdims=keepdims), axis None, an int or a tuple of ints. Saves x.shape."""

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        ### BEGIN SOLUTION
        ctx.axis, ctx.keepdims = axis, keepdims
        ctx.save_for_backward(x.shape)
        return np.mean(x, axis=axis, keepdims=keepdims)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        (shape,) = ctx.saved_tensors
        axes = range(len(shape)) if ctx.axis is None else np.atleast_1d(ctx.axis)
        count = math.prod(shape[axis] for axis in axes)  # the elements that went into each mean
        if ctx.axis is not None and not ctx.keepdims:
            grad = np.expand_dims(grad, ctx.axis)
        return np.broadcast_to(grad, shape) / count
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_mean", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
x234 = checks.randn(70, 2, 3, 4)
means = [
    checks.case("worked example, axis=(0, 2)", x234, axis=(0, 2)),
    checks.case("axis=(2, 0), keepdims", x234, axis=(2, 0), keepdims=True),
    checks.case("axis=1", x234, axis=1),
    checks.case("axis=-1, keepdims", x234, axis=-1, keepdims=True),
    checks.case("axis=None", x234),
    checks.case("a size-1 axis, axis=(0, 1)", checks.randn(71, 3, 1, 2), axis=(0, 1)),
    checks.case("0-d", checks.randn(72)),
]
checks.check_function("mean", Mean, "mean", means, saves=lambda x, out, **options: [(x.shape,)], names=["x"])
### BEGIN HIDDEN TESTS
x3345 = checks.randn(73, 3, 3, 4, 5)
hidden_means = [
    checks.case("4-D, axis=(1, 3) (hidden)", x3345, axis=(1, 3)),
    checks.case("4-D, axis=(3, 0, 1), keepdims (hidden)", x3345, axis=(3, 0, 1), keepdims=True),
    checks.case("4-D, axis=None, keepdims (hidden)", x3345, keepdims=True),
    checks.case("square, axis=0 (hidden)", checks.randn(74, 3, 3), axis=0),
    checks.case("1-D, axis=-1 (hidden)", checks.randn(75, 5), axis=-1),
    checks.case("0-d, keepdims (hidden)", checks.randn(76), keepdims=True),
]
checks.check_function("mean", Mean, "mean", hidden_means, saves=lambda x, out, **options: [(x.shape,)], names=["x"], seed=77)
### END HIDDEN TESTS

# %% [markdown]
# ### Concept check `mean_count`
#
# For `x` of shape `(4, 5, 6)` and the loss `L = x.mean(axis=(0, 2)).sum()`, every entry of
# `x.grad` after `L.backward()` equals $1/k$ for one whole number $k$. Set `mean_grad_k` to $k$.

# %% nbgrader={"grade": false, "grade_id": "mean_count", "locked": false, "schema_version": 3, "solution": true, "task": false}
mean_grad_k = None  # every entry of x.grad is 1 / mean_grad_k
### BEGIN SOLUTION
mean_grad_k = 24
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_mean_count", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
checks.check_hash("mean_count", "mean_grad_k", mean_grad_k,
                  "c2356069e9d1e79ca924378153cfbbfb4d4416b1f99d41a2940bfdb66c5319db",
                  hint="each mean averages the elements along the reduced axes only: multiply their sizes.")

# %% [markdown]
# ### Reshape and transpose
#
# `Reshape` keeps every element and its row-major (C) order and only changes the shape; it is a
# relabelling of positions, a permutation matrix whose transpose is its inverse. So backward
# reshapes the gradient **back to the input's shape**: $\bar x$ = `grad.reshape(x.shape)`.
# `Reshape` saves the input's shape, `ctx.save_for_backward(x.shape)`.
#
# `Transpose(dim0, dim1)` swaps two axes, like `torch.transpose(x, dim0, dim1)` and
# `np.swapaxes`. Swapping the same two axes again undoes it, so backward swaps `dim0` and `dim1`
# of the gradient. It needs no value at all; `dim0` and `dim1` are kept as attributes of `ctx`
# and nothing is saved. Note that `grad.T` reverses **all** axes: it is the right backward only
# for 2-D arrays.
#
# **Worked example.** $x$ of shape $(2, 3)$ reshaped to $(3, 2)$: with upstream gradient
# `[[1, 2], [3, 4], [5, 6]]`, $\bar x$ = `[[1, 2, 3], [4, 5, 6]]`: the same numbers in the same
# row-major order. $x$ of shape $(2, 3, 4)$ transposed with `dim0=0, dim1=2` has shape
# $(4, 3, 2)$; its gradient, of shape $(4, 3, 2)$, is swapped back to $(2, 3, 4)$:
# $\bar x_{ijk} = \bar y_{kji}$. Here `grad.T` would happen to give the same result, because
# reversing three axes swaps the outer two; with `dim0=0, dim1=1` it would not even give the right
# shape: the output is $(3, 2, 4)$, and `grad.T` has shape $(4, 2, 3)$ instead of $(2, 3, 4)$.
#
# ### Exercise `reshape_transpose`
#
# Write `Reshape` (its option `shape` may contain one `-1`, as in NumPy) and `Transpose`.

# %% nbgrader={"grade": false, "grade_id": "reshape_transpose", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Reshape(Function):
    """x.reshape(shape) (one size may be -1). Saves x.shape."""

    @staticmethod
    def forward(ctx, x, shape):
        ### BEGIN SOLUTION
        ctx.save_for_backward(x.shape)
        return np.reshape(x, shape)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        (shape,) = ctx.saved_tensors
        return np.reshape(grad, shape)  # the same elements, back in the input's shape
        ### END SOLUTION


class Transpose(Function):
    """x with axes dim0 and dim1 swapped, like torch.transpose. Saves nothing."""

    @staticmethod
    def forward(ctx, x, dim0, dim1):
        ### BEGIN SOLUTION
        ctx.dim0, ctx.dim1 = dim0, dim1
        return np.swapaxes(x, dim0, dim1)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        return np.swapaxes(grad, ctx.dim0, ctx.dim1)  # swapping the same axes again undoes it
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_reshape_transpose", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
x23 = np.arange(6.0).reshape(2, 3)
checks.check_function("reshape_transpose", Reshape, "reshape", [
    checks.case("worked example (2, 3) -> (3, 2)", x23, shape=(3, 2)),
    checks.case("(2, 3, 4) -> (4, -1)", checks.randn(80, 2, 3, 4), shape=(4, -1)),
    checks.case("(6,) -> (1, 6, 1)", checks.randn(81, 6), shape=(1, 6, 1)),
    checks.case("0-d -> (1, 1)", checks.randn(82), shape=(1, 1)),
    checks.case("(1, 1) -> 0-d", checks.randn(83, 1, 1), shape=()),
], saves=lambda x, out, **options: [(x.shape,)], names=["x"])
checks.check_function("reshape_transpose", Transpose, "transpose", [
    checks.case("worked example (2, 3, 4), dims 0 and 2", checks.randn(84, 2, 3, 4), dim0=0, dim1=2),
    checks.case("(2, 3, 4), dims 0 and 1", checks.randn(85, 2, 3, 4), dim0=0, dim1=1),
    checks.case("(2, 3), dims 1 and 0", checks.randn(86, 2, 3), dim0=1, dim1=0),
    checks.case("(3, 3), dims -1 and -2", checks.randn(87, 3, 3), dim0=-1, dim1=-2),
], saves=lambda x, out, **options: [()], names=["x"])
### BEGIN HIDDEN TESTS
reshapes = [
    checks.case("(4, 3) -> (2, 2, 3) (hidden)", checks.randn(90, 4, 3), shape=(2, 2, 3)),
    checks.case("(2, 1, 5) -> (-1,) (hidden)", checks.randn(91, 2, 1, 5), shape=(-1,)),
    checks.case("(3, 3) -> (9, 1) (hidden)", checks.randn(92, 3, 3), shape=(9, 1)),
]
swaps = [
    checks.case("4-D, dims 1 and 3 (hidden)", checks.randn(94, 2, 3, 1, 4), dim0=1, dim1=3),
    checks.case("3-D, dims -1 and 0 (hidden)", checks.randn(95, 3, 2, 4), dim0=-1, dim1=0),
    checks.case("1-D, dims 0 and 0 (hidden)", checks.randn(96, 5), dim0=0, dim1=0),
]
checks.check_function("reshape_transpose", Reshape, "reshape", reshapes, saves=lambda x, out, **options: [(x.shape,)],
                      names=["x"], seed=93)
checks.check_function("reshape_transpose", Transpose, "transpose", swaps, saves=lambda x, out, **options: [()],
                      names=["x"], seed=97)
### END HIDDEN TESTS

# %% [markdown]
# ## 6. A fused cross-entropy
#
# We could already build unit 1.2's loss from our operations: a max shift (`Sub`), `Exp`, `Sum`,
# `Log`, picking the target entries (a `Mul` by a one-hot matrix), and a `Mean`. The result
# would be right, but every one of those nodes would save an array for its backward pass, and
# backward would run through all of them to arrive at a result we already know in closed form.
# Unit 1.2 derived it: for logits $z$ of shape $(N, C)$, targets $t$ and the set
# $V = \{n : t_n \ne \texttt{ignore\_index}\}$ of targets that count,
#
# $$
# \ell_n = \operatorname{LSE}(z_n) - z_{n, t_n}, \qquad
# \frac{\partial \ell_n}{\partial z_{n, c}} = p_{n,c} - [c = t_n], \qquad p_n = \mathrm{softmax}(z_n).
# $$
#
# So we make cross-entropy **one** `Function` whose forward computes the loss and whose backward
# uses this formula directly. Torch does the same (its `cross_entropy` is one fused kernel).
#
# **Forward.** As in unit 1.2: shift each row by its maximum, $s = z - \max_c z_c$, so that every
# exponent is at most 0; then $\log p = s - \log \sum_c e^{s_c}$ (never `log(softmax)`, which is
# $\log 0 = -\infty$ when a probability underflows) and $\ell_n = -\log p_{n, t_n}$ for
# $n \in V$, 0 for ignored rows. The reduction is `"none"` (the $(N,)$ losses), `"sum"`, or
# `"mean"` (the sum divided by $|V|$, the number of targets that count; `nan` when every target
# is ignored, as in torch).
#
# **What to save.** Backward needs $p$ and $t$, and nothing else: `ctx.save_for_backward(probs,
# target)`, with `reduction` and `ignore_index` as attributes. Saving the logits instead would
# cost the same memory and force backward to compute the softmax a second time.
#
# **Backward.** The upstream gradient $\bar L$ has the shape of the loss: a 0-d scalar for
# `"mean"` and `"sum"`, shape $(N,)$ for `"none"`. By the chain rule,
#
# $$
# \bar z_{n,c} = \begin{cases}
# \bar L \,(p_{n,c} - y_{n,c}) / |V| & \texttt{"mean"} \\
# \bar L \,(p_{n,c} - y_{n,c}) & \texttt{"sum"} \\
# \bar L_n \,(p_{n,c} - y_{n,c}) & \texttt{"none"}
# \end{cases}
# \quad \text{for } n \in V, \qquad \bar z_{n,c} = 0 \text{ for } n \notin V,
# $$
#
# where $y_n$ is the one-hot vector of $t_n$. For `"none"`, row $n$ is scaled by its own
# $\bar L_n$ (`grad[:, None]` broadcasts it across the classes). When every target is ignored the
# gradient is all zeros (there is no row to divide among), as in torch. Backward returns
# `(grad_logits, None)`: the integer target gets no gradient.
#
# **Stability.** $p - y$ lies in $[-1, 1]$ whatever the logits, so with a stable softmax the
# gradient is finite even for float32 logits of magnitude $10^3$, where `np.exp` without the
# shift overflows ($e^{89} > 3.4 \times 10^{38}$).
#
# **Worked example.** Unit 1.2's batch: logits `[[2, 1, 0.1], [0.5, 2.5, -1], [1, 1, 1]]` and
# targets `[0, 1, -100]`; the losses are $(0.4170, 0.1532, 0)$ and the mean is
# $0.5702 / 2 = 0.2851$. With `"mean"` and $\bar L = 2$, backward gives
# $2 (p - y) / 2$: rows `[-0.3410, 0.2424, 0.0986]`, `[0.1161, -0.1420, 0.0259]` and
# `[0, 0, 0]`. With `"none"` and $\bar L$ = `[0.5, -1, 3]`: rows
# `[-0.1705, 0.1212, 0.0493]`, `[-0.1161, 0.1420, -0.0259]` and `[0, 0, 0]`; the ignored row
# gets nothing, whatever its upstream gradient.
#
# ### Exercise `cross_entropy`
#
# Write `CrossEntropy`, like `torch.nn.functional.cross_entropy` for logits of shape $(N, C)$.

# %% nbgrader={"grade": false, "grade_id": "cross_entropy", "locked": false, "schema_version": 3, "solution": true, "task": false}
class CrossEntropy(Function):
    """F.cross_entropy(logits, target, reduction=reduction, ignore_index=ignore_index) as one operation.

    logits       : float array (N, C), float32 or float64.
    target       : integer array (N,) of class indices in [0, C), or ignore_index.
    reduction    : "none" (the N losses, 0 where ignored), "sum", or "mean" (the sum divided by
                   the number of targets that are not ignored; nan if every target is ignored).
    ignore_index : the target value that marks a sample to leave out.

    Forward returns the loss in the logits' dtype, finite for logits of magnitude 1e3, without
    warnings, and saves (probabilities, target), not the logits. Backward takes the upstream
    gradient of the loss (0-d, or (N,) for "none") and returns (grad_logits, None): softmax minus
    one-hot times the upstream gradient, divided by the number of counted targets for "mean",
    with zero rows for ignored targets.
    """

    @staticmethod
    def forward(ctx, logits, target, reduction="mean", ignore_index=-100):
        ### BEGIN SOLUTION
        counted = target != ignore_index  # the targets that are part of the loss
        safe = np.where(counted, target, 0)  # a valid class index on every row
        shifted = logits - logits.max(axis=1, keepdims=True)  # every exponent <= 0
        exps = np.exp(shifted)
        sums = exps.sum(axis=1, keepdims=True)  # in [1, C]: no overflow, no log(0)
        log_p = shifted - np.log(sums)
        losses = np.where(counted, -log_p[np.arange(len(safe)), safe], 0)
        ctx.reduction, ctx.ignore_index = reduction, ignore_index
        ctx.save_for_backward(exps / sums, target)  # the probabilities, not the logits
        if reduction == "none":
            return losses
        if reduction == "sum":
            return losses.sum()
        n_counted = int(counted.sum())  # a Python int keeps float32 float32
        return losses.sum() / n_counted if n_counted else logits.dtype.type(np.nan)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        probs, target = ctx.saved_tensors
        counted = target != ctx.ignore_index
        grad_logits = probs.copy()  # a fresh array: the saved probabilities stay as they are
        grad_logits[np.arange(len(target)), np.where(counted, target, 0)] -= 1  # p - onehot(t)
        grad_logits[~counted] = 0  # ignored rows are not part of the loss
        if ctx.reduction == "none":
            return grad_logits * grad[:, None], None  # row n times its own upstream gradient
        if ctx.reduction == "mean":
            grad_logits /= max(int(counted.sum()), 1)  # 1/|V|; all rows are zero when |V| = 0
        return grad_logits * grad, None
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_cross_entropy", "locked": true, "points": 10, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# Forward and saved values against torch, backward against torch autograd and central
# differences, with a random upstream gradient ((N,) for "none"), a zero one and non-contiguous logits.
def saves_probabilities(logits, target, out, **options):
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return [(e / e.sum(axis=1, keepdims=True), target)]


def ignored_rows_hint(got, expected):
    if got.ndim == 2 and np.any(np.all(expected == 0, axis=1) & np.any(got != 0, axis=1)):
        return "a row whose target is ignore_index is not part of the loss: its gradient row must be zero."
    return None


logits = np.array([[2.0, 1.0, 0.1], [0.5, 2.5, -1.0], [1.0, 1.0, 1.0]])
target = np.array([0, 1, -100])
t5 = np.array([3, 2, 0, 2, 1])  # ignore_index=2 below: class 2 is a real class that this batch leaves out
ce_cases = []
for red in ("mean", "sum", "none"):
    ce_cases += [
        checks.case(f"worked example, {red}", logits, target, reduction=red),
        checks.case(f"random, ignore_index=2, {red}", checks.randn(100, 5, 4, scale=2.0), t5, reduction=red,
                    ignore_index=2),
        checks.case(f"one sample, {red}", checks.randn(101, 1, 5), np.array([4]), reduction=red),
    ]
checks.check_function("cross_entropy", CrossEntropy, "cross_entropy", ce_cases, saves=saves_probabilities,
                      names=["logits", "target"], hints=[ignored_rows_hint])
# Every target ignored: the mean is nan and the gradient zero. Central differences of a nan loss are
# nan, so this case is compared with torch autograd only.
checks.check_function("cross_entropy", CrossEntropy, "cross_entropy",
                      [checks.case("every target ignored, mean", logits, np.full(3, -100))],
                      saves=saves_probabilities, names=["logits", "target"], fd=False)
### BEGIN HIDDEN TESTS
t6 = np.random.default_rng(102).integers(0, 4, size=6)
t6[[1, 4]] = -100
t7 = np.where(np.random.default_rng(103).random(7) < 0.3, -1, np.random.default_rng(104).integers(0, 3, size=7))
hidden_ce = []
for reduction in ("mean", "sum", "none"):
    hidden_ce += [
        checks.case(f"random, some ignored, {reduction} (hidden)", checks.randn(105, 6, 4, scale=2.0), t6,
                    reduction=reduction),
        checks.case(f"ignore_index=-1, {reduction} (hidden)", checks.randn(106, 7, 3), t7, reduction=reduction,
                    ignore_index=-1),
        checks.case(f"square logits, {reduction} (hidden)", checks.randn(107, 3, 3), np.array([2, 0, 0]),
                    reduction=reduction),
        checks.case(f"one class, {reduction} (hidden)", checks.randn(108, 3, 1), np.zeros(3, dtype=np.int64),
                    reduction=reduction),
        checks.case(f"every target ignored, {reduction} (hidden)", checks.randn(109, 3, 2), np.full(3, -100),
                    reduction=reduction),
    ]
checks.check_function("cross_entropy", CrossEntropy, "cross_entropy", [c for c in hidden_ce if "every" not in c.label],
                      saves=saves_probabilities, names=["logits", "target"], hints=[ignored_rows_hint], seed=110)
checks.check_function("cross_entropy", CrossEntropy, "cross_entropy", [c for c in hidden_ce if "every" in c.label],
                      saves=saves_probabilities, names=["logits", "target"], fd=False, seed=111)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_cross_entropy_extreme", "locked": true, "points": 5, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# float32 logits of magnitude 1e3: the loss against torch, and the gradient against torch autograd
# and central differences (in float64) with random, zero and non-contiguous cases, through forward
# and backward on a fresh Context.
def ce_forward(logits, target, **options):
    return CrossEntropy.forward(Context(), logits, target, **options)


def ce_backward(logits, target, grad, **options):
    ctx = Context()
    CrossEntropy.forward(ctx, logits, target, **options)
    return CrossEntropy.backward(ctx, grad)[0]


z_extreme = np.array([[1000.0, 999.0, 998.0], [-1000.0, -1001.0, -1002.0]], dtype=np.float32)
t_extreme = np.array([1, -100, 0, 3])
extreme = [checks.case(f"(1000, 999, 998) and (-1000, -1001, -1002), {red}", z_extreme, np.array([2, 0]),
                       reduction=red) for red in ("mean", "sum", "none")]
random_extreme = checks.randn(120, 4, 4, dtype=np.float32, scale=1000.0)
extreme += [checks.case(f"random, magnitude 1e3, one ignored, {red}", random_extreme, t_extreme, reduction=red)
            for red in ("mean", "sum", "none")]
# float32 logits near 1e3 are spaced 6e-5 apart, and torch's float32 loss rounds its own way:
# two correct float32 formulas differ by a few of those spacings, so the loss gets atol 3e-4.
checks.against_torch("cross_entropy", ce_forward, "cross_entropy", extreme, atol=3e-4)
checks.check_vjp("cross_entropy", ce_backward, "cross_entropy", extreme, names=["logits", "target"])
### BEGIN HIDDEN TESTS
t4 = np.random.default_rng(121).integers(0, 5, size=4)
t4[2] = -100
extreme_hidden = [checks.case(f"magnitude 1e3, {red} (hidden)", checks.randn(122, 4, 5, dtype=np.float32, scale=1000.0),
                              t4, reduction=red) for red in ("mean", "sum", "none")]
extreme_hidden += [checks.case(f"all near -1e3, {red} (hidden)", checks.randn(123, 3, 3, dtype=np.float32) - 1000,
                               np.array([0, 2, 1]), reduction=red) for red in ("mean", "sum", "none")]
checks.against_torch("cross_entropy", ce_forward, "cross_entropy", extreme_hidden, atol=3e-4)
checks.check_vjp("cross_entropy", ce_backward, "cross_entropy", extreme_hidden, names=["logits", "target"], seed=124)
### END HIDDEN TESTS

# %% [markdown]
# ## 7. Branches: one input, three paths
#
# In a real network one tensor feeds several operations: the input of a residual block feeds the
# block and the skip connection, a weight is shared, a regularizer reads the parameters again.
# Reverse accumulation handles this without any new machinery: each use sends its gradient back,
# and `backward` adds them up (`+=`). Broadcasting is one more kind of reuse, inside a single
# operation, and `unbroadcast` adds those copies up. Here we build a graph in which an input
# reaches the loss along three paths, one of them through a broadcast, and check that every
# contribution arrives.
#
# For `x` of shape $(N, D)$, `W` of shape $(D, M)$ and `b` of shape $(M,)$:
#
# $$
# z = \tanh(x W + b) \in \mathbb{R}^{N \times M}, \qquad
# s_n = \sum_{d} x_{nd} \ (\text{shape } (N, 1)), \qquad
# L = \frac{1}{NM} \sum_{n, m} z_{nm}\, s_n \; + \; 0.1 \sum_{n, d} x_{nd}^2 .
# $$
#
# In engine code: `z = (x @ W + b).tanh()`, `s = x.sum(axis=1, keepdims=True)`, and
# `loss = (z * s).mean() + (x * x).sum() * 0.1`. Along the way, `b` is broadcast over the $N$
# rows (its gradient sums over them) and `s`, of shape $(N, 1)$, is broadcast across the $M$
# columns of `z`: that is why `s` must keep its axis with `keepdims=True`; a sum of shape $(N,)$
# would be aligned on the right with the $M$ columns instead. `x` reaches `L`
#
# 1. through the affine map and `tanh`: $\bar x^{(1)} = \big(\bar z \odot (1 - z^2)\big) W^\top$,
#    with $\bar z_{nm} = s_n / (NM)$;
# 2. through the row sums: $\bar s_n = \sum_m z_{nm} / (NM)$ (the adjoint of the broadcast
#    across columns), copied to every $d$ by `Sum`'s backward: $\bar x^{(2)}_{nd} = \bar s_n$;
# 3. through `x * x`, which itself uses `x` twice: $\bar x^{(3)} = 0.1 \cdot 2x = 0.2\, x$;
#
# and $\bar x = \bar x^{(1)} + \bar x^{(2)} + \bar x^{(3)}$.
#
# **Worked example.** $N = 1$, $D = M = 2$: $x$ = `[[1, 2]]`, $W$ = `[[0.5, 0], [0, -0.5]]`,
# $b$ = `[0, 1]`. Then $xW + b = (0.5, 0)$, $z = (0.4621, 0)$, $s = 3$ and
# $L = (0.4621 \cdot 3 + 0) / 2 + 0.1 \cdot 5 = 1.1932$. Path 1: $\bar z = 3/2$ for both
# columns, times $1 - z^2 = (0.7864, 1)$ gives $(1.1797, 1.5)$, times $W^\top$ gives
# $(0.5899, -0.75)$. Path 2: $\bar s = 0.4621 / 2 = 0.2311$, to both entries. Path 3:
# $0.2\, x = (0.2, 0.4)$. In total $\bar x = (1.0209, -0.1189)$. Also $\bar b = (1.1797, 1.5)$
# and $\bar W = x^\top (1.1797, 1.5)$ = `[[1.1797, 1.5], [2.3593, 3]]`.
#
# ### Exercise `branched_loss`
#
# Write `branched_loss(x, W, b)` with our `Tensor` operations, exactly as described above.

# %% nbgrader={"grade": false, "grade_id": "branched_loss", "locked": false, "schema_version": 3, "solution": true, "task": false}
def branched_loss(x, W, b):
    """The loss of part 7, built from Tensor operations so that backward can reach x, W and b.

    x : Tensor (N, D);  W : Tensor (D, M);  b : Tensor (M,).

    Returns a 0-d Tensor: mean(tanh(x @ W + b) * s) + 0.1 * sum(x * x), where s is the row sum
    of x of shape (N, 1), broadcast across the M columns.
    """
    ### BEGIN SOLUTION
    z = (x @ W + b).tanh()  # path 1: the affine map, with b broadcast over the rows
    s = x.sum(axis=1, keepdims=True)  # path 2: (N, 1), broadcast across the M columns of z
    return (z * s).mean() + (x * x).sum() * 0.1  # path 3: x * x
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_branched_loss", "locked": true, "points": 10, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# The loss against torch's version of the same graph, and the gradients of x, W and b (after
# backward with a random, then a zero, upstream gradient, and on non-contiguous inputs) against
# torch autograd and central differences.
def loss_value(x, W, b):
    return branched_loss(Tensor(x), Tensor(W), Tensor(b)).data


def leaf_grads(x, W, b, grad):
    leaves = [Tensor(v, requires_grad=True) for v in (x, W, b)]
    branched_loss(*leaves).backward(grad)
    return tuple(t.grad for t in leaves)


graphs = [
    checks.case("worked example", np.array([[1.0, 2.0]]), np.array([[0.5, 0.0], [0.0, -0.5]]), np.array([0.0, 1.0])),
    checks.case("N=4, D=3, M=5", checks.randn(130, 4, 3), checks.randn(131, 3, 5), checks.randn(132, 5)),
    checks.case("N = M = 3, D=2", checks.randn(133, 3, 2), checks.randn(134, 2, 3), checks.randn(135, 3)),
]
checks.against_torch("branched_loss", loss_value, "branched_loss", graphs)
checks.check_vjp("branched_loss", leaf_grads, "branched_loss", graphs, names=["x", "W", "b"])
### BEGIN HIDDEN TESTS
hidden_graphs = [
    checks.case("N=5, D=4, M=2 (hidden)", checks.randn(136, 5, 4), checks.randn(137, 4, 2), checks.randn(138, 2)),
    checks.case("N = M = 4, D=4 (hidden)", checks.randn(139, 4, 4), checks.randn(140, 4, 4), checks.randn(141, 4)),
    checks.case("size-1 axes N=1, D=1, M=1 (hidden)", checks.randn(142, 1, 1), checks.randn(143, 1, 1),
                checks.randn(144, 1)),
    checks.case("large inputs N=3, D=2, M=4 (hidden)", checks.randn(145, 3, 2, scale=3.0), checks.randn(146, 2, 4),
                checks.randn(147, 4)),
]
checks.against_torch("branched_loss", loss_value, "branched_loss", hidden_graphs)
checks.check_vjp("branched_loss", leaf_grads, "branched_loss", hidden_graphs, names=["x", "W", "b"], seed=148)
### END HIDDEN TESTS

# %% [markdown]
# ## 8. What each operation saves
#
# Reverse mode keeps, from the whole forward pass, whatever the backward pass will read: each
# operation's saved values stay alive until backward has used them. The rule of this unit and
# the last is to **save exactly what the vector-Jacobian product needs**:
#
# | operation | saves | because backward computes |
# |---|---|---|
# | `Add`, `Sub` | the two shapes | `unbroadcast` of $\pm\bar z$: no values needed |
# | `Mul` | $(a, b)$ | $\bar z \odot b$ and $\bar z \odot a$ |
# | `Div` | $(a, b)$ | $\bar z / b$ and $-\bar z \odot a / b^2$ |
# | `Sum`, `Mean`, `Reshape` | the input's shape | a copy, a scaled copy or a reshape of $\bar y$ |
# | `Transpose` | nothing (`dim0`, `dim1` as attributes) | the same swap of $\bar y$ |
# | `Exp`, `Tanh` | the output | $\bar y \odot y$, $\bar y \odot (1 - y^2)$ |
# | `Log` | the input | $\bar y / x$ |
# | `CrossEntropy` | $(p, t)$ | $(p - \mathrm{onehot}(t))$, scaled |
#
# Two things decide between saving an input and saving an output: which one the derivative is
# written in (`Exp` against `Log`), and, with broadcasting, which one is **smaller**. The output
# of a broadcast operation has the broadcast shape and can be much larger than both inputs.
#
# ### Explain `explain_saved`
#
# Apply this to operations that are not in this notebook.
#
# (a) A `Sigmoid` Function computes $y = \sigma(x) = 1 / (1 + e^{-x})$. What should it save, and
# why? (3 points)
#
# (b) A student's `Div` saves its output $z = a / b$ and $b$ instead of $(a, b)$. Do its
# gradients still come out right? For $a$ of shape $(4096, 1)$ and $b$ of shape $(1, 4096)$, how
# many numbers does it keep, and how many would $(a, b)$ keep? (4 points)
#
# (c) Suppose we build cross-entropy from our small operations instead of the fused
# `CrossEntropy`: `shifted = z - z_max`, `e = shifted.exp()`,
# `lse = e.sum(axis=1, keepdims=True).log()`, `logp = shifted - lse`,
# `loss = -(logp * onehot).sum(axis=1).mean()`. List what those nodes save, and compare with the
# fused operation for logits of shape $(N, C)$. (3 points)
#
# (d) A `Flip` Function reverses the order of the elements along one axis. What does it save, and
# what does its backward compute? (2 points)
#
# (Graded by hand; 12 points.)

# %% [markdown] nbgrader={"grade": true, "grade_id": "explain_saved", "locked": false, "points": 12, "schema_version": 3, "solution": true, "task": false}
# **Model answer.**
#
# *(a) Sigmoid saves its output (3 points).* $\sigma'(x) = \sigma(x)\,(1 - \sigma(x)) = y (1 - y)$ is
# written in the output, so `Sigmoid` saves $y$ and backward is $\bar x = \bar y \odot y \odot (1 - y)$,
# two multiplications. Saving $x$ would take the same memory and force backward to compute the
# exponential again (as for `Exp` and `Tanh`).
#
# *(b) Div saving its output (4 points).* The gradients are still right: $\bar a = \bar z / b$
# needs only $b$, and $\bar b = -\bar z\, a / b^2 = -\bar z\, z / b$, where $z$ has the broadcast
# shape, and both are then unbroadcast. The cost is memory: $z$ has shape $(4096, 4096)$, so this
# `Div` keeps $4096^2 + 4096 = 16{,}781{,}312$ numbers (about 134 MB in float64), while $(a, b)$ is
# $2 \cdot 4096 = 8192$ numbers. With broadcasting the output can be quadratically larger than
# the inputs, so `Div` saves its inputs. (Saving $z$ also ties the gradient to a rounded quotient,
# a minor point.)
#
# *(c) The unfused loss (3 points).* `Sub` (twice) and `Sum` (twice) and `Mean` save only shapes,
# but `Exp` saves its output $e$, $(N, C)$; `Log` saves its input, the row sums, $(N, 1)$; `Mul`
# saves both `logp` and `onehot`, two more $(N, C)$ arrays (plus `z_max` if it is part of the
# graph). That is three $(N, C)$ arrays and a column, against the fused operation's one $(N, C)$
# array $p$ and $N$ integers. Backward also runs through seven nodes and builds intermediate
# $(N, C)$ gradients to arrive at $p - y$, which the fused operation writes down directly. (The
# max shift keeps both forward passes finite; the fused form also never differentiates through
# the `max`.)
#
# *(d) Flip saves nothing (2 points).* Flipping is a permutation of positions; its adjoint is the
# same flip, $\bar x$ = `np.flip(grad, axis)`, which needs no value of $x$ and not even its shape
# (the gradient has the same shape). The axis is kept as an attribute, `ctx.axis`, like
# `Transpose`'s `dim0` and `dim1`.

# %% [markdown]
# ## 9. Figure: a broadcasting visualizer
#
# Type two shapes. The figure aligns them on the right, as broadcasting does, and draws one box
# per axis: blue where an operand already has the result's size, orange where a size-1 axis is
# **stretched**, grey and dashed where an axis is **prepended**, red where two sizes clash. Under
# each operand, the gradient's reduction is marked: $\Sigma$ on the axes its gradient is summed
# over (dropped for prepended axes, kept with size 1 for stretched ones), which is exactly what
# `unbroadcast(grad, shape)` does. Try `(3, 1)` with `(4,)`, `()` with `(2, 3)`, `(8, 1, 6, 1)`
# with `(7, 1, 5)`, and `(2, 3)` with `(3, 2)`.
#
# The figure computes its own broadcast, so it works before the exercises are done.

# %% nbgrader={"grade": false, "grade_id": "broadcast_figure", "locked": true, "schema_version": 3, "solution": false, "task": false}
import ipywidgets as widgets
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
from IPython.display import display

FIGURE_COLOURS = {"same": "#a8dadc", "stretched": "#f4a261", "prepended": "#e9ecef", "clash": "#e63946"}


def parse_shape(text):
    """'3, 1' or '(3, 1)' -> (3, 1); '' or '()' -> ()."""
    cleaned = text.strip().strip("()[]").replace(",", " ")
    return tuple(int(part) for part in cleaned.split())


def draw_broadcast(first, second):
    try:
        shapes = [parse_shape(first), parse_shape(second)]
    except ValueError:
        print("Type each shape as whole numbers separated by commas, for example 3, 1 (or () for a 0-d scalar).")
        return
    ndim = max(len(s) for s in shapes)
    padded = [(None,) * (ndim - len(s)) + s for s in shapes]
    result, clash = [], []
    for axis in range(ndim):
        sizes = [1 if p[axis] is None else p[axis] for p in padded]
        big = [size for size in sizes if size != 1]
        clash.append(len(set(big)) > 1)
        result.append(big[0] if big else 1)
    fig, ax = plt.subplots(figsize=(2.2 + 1.3 * max(ndim, 1), 3.6))
    rows = [("a", padded[0]), ("b", padded[1]), ("a + b", tuple(result))]
    for r, (name, sizes) in enumerate(rows):
        y = 2 - r
        ax.text(-0.7, y, name, ha="right", va="center", fontsize=11, family="monospace")
        for axis, size in enumerate(sizes):
            if clash[axis]:
                kind, label = "clash", f"{size}"
            elif r == 2:
                kind, label = "same", f"{size}"
            elif size is None:
                kind, label = "prepended", f"(new)\n\u2192{result[axis]}\n\u03a3 drop"
            elif size == 1 and result[axis] != 1:
                kind, label = "stretched", f"1\u2192{result[axis]}\n\u03a3 keep 1"
            else:
                kind, label = "same", f"{size}"
            ax.add_patch(Rectangle((axis - 0.42, y - 0.38), 0.84, 0.76, facecolor=FIGURE_COLOURS[kind],
                                   edgecolor="#333333", linestyle="--" if kind == "prepended" else "-"))
            ax.text(axis, y, label, ha="center", va="center", fontsize=9)
    for axis in range(ndim):
        ax.text(axis, 2.65, f"axis {axis - ndim}", ha="center", va="center", fontsize=8, color="#555555")
    ax.set_xlim(-1.6, max(ndim, 1) - 0.4)
    ax.set_ylim(-0.6, 2.9)
    ax.axis("off")
    if any(clash):
        title = f"{shapes[0]} and {shapes[1]} cannot be broadcast: the red axes have sizes that differ, neither 1"
    else:
        reductions = []
        for name, p in zip("ab", padded):
            summed = [axis for axis in range(ndim) if p[axis] is None or (p[axis] == 1 and result[axis] != 1)]
            reductions.append(f"grad of {name}: sum over result axes {tuple(summed)}")
        title = f"result {tuple(result)};  " + ";  ".join(reductions)
    ax.set_title(title, fontsize=9)
    plt.show()


first_shape = widgets.Text(value="3, 1", description="shape of a", continuous_update=False)
second_shape = widgets.Text(value="4", description="shape of b", continuous_update=False)
figure_output = widgets.interactive_output(draw_broadcast, {"first": first_shape, "second": second_shape})
display(widgets.HBox([first_shape, second_shape]), figure_output)

# %% [markdown]
# ## 10. Putting it together
#
# Our engine now has everything the two-layer network of unit 1.1 needs: `linear` is
# `x @ W.transpose(0, 1) + b`, with PyTorch's `(out, in)` weight layout, a `Transpose` and a bias
# broadcast over the batch; ReLU between the layers; and the fused `CrossEntropy` of unit 1.2's
# loss on top. The next cell trains it with plain stochastic gradient descent on three clusters
# of 2-D points: each step runs forward, clears the gradients, calls `loss.backward()` (our
# reverse accumulation, with our `unbroadcast` summing the bias gradients over the batch), and
# moves every parameter against its gradient, $\theta \leftarrow \theta - \eta \bar\theta$. With
# small random weights the loss would start at $\log 3 = 1.0986$ (unit 1.2's initial-loss check);
# the weights drawn here already separate the clusters a little, so it starts a bit lower (1.03;
# PyTorch gives the same number for these weights) and falls as the accuracy rises.

# %% nbgrader={"grade": false, "grade_id": "putting_it_together", "locked": true, "schema_version": 3, "solution": false, "task": false}
def mlp_logits(x, W1, b1, W2, b2):
    """Unit 1.1's two-layer MLP on our Tensors: linear, ReLU, linear (weights are (out, in))."""
    hidden = (x @ W1.transpose(0, 1) + b1).relu()
    return hidden @ W2.transpose(0, 1) + b2


def train_mlp(steps=40, learning_rate=0.5, data_seed=0):
    rng = np.random.default_rng(data_seed)
    centers = np.array([[0.0, 2.0], [-2.0, -1.0], [2.0, -1.0]])
    points = np.concatenate([c + 0.8 * rng.standard_normal((40, 2)) for c in centers])
    labels = np.repeat(np.arange(3), 40)
    params = [Tensor(0.1 * rng.standard_normal((16, 2)), requires_grad=True), Tensor(np.zeros(16), requires_grad=True),
              Tensor(0.1 * rng.standard_normal((3, 16)), requires_grad=True), Tensor(np.zeros(3), requires_grad=True)]
    for step in range(steps + 1):
        logits = mlp_logits(Tensor(points), *params)
        loss = CrossEntropy.apply(logits, labels, reduction="mean")
        if step % 10 == 0:
            accuracy = np.mean(np.argmax(logits.data, axis=1) == labels)
            print(f"step {step:3d}   loss {float(loss.data):.4f}   accuracy {accuracy:.0%}")
        for p in params:
            p.grad = None  # zero_grad: our backward adds into .grad
        loss.backward()
        for p in params:
            p.data = p.data - learning_rate * p.grad  # one SGD step


with checks.when_written("this example"):
    train_mlp()

# %% [markdown]
# ## Summary
#
# - Broadcasting aligns shapes on the right, prepends size-1 axes to the shorter shape, and
#   stretches every size-1 axis to the other size; any other mismatch is an error.
# - Broadcasting copies values, so its adjoint is a sum: `unbroadcast` sums the gradient over the
#   prepended axes (dropped) and the stretched axes (kept with size 1), and returns exactly the
#   input's shape. Every binary operation calls it for each operand.
# - Summing is in turn the adjoint of broadcasting: `Sum` and `Mean` copy the gradient back along
#   the reduced axes, `Mean` divided by the number of reduced elements; `Reshape` and `Transpose`
#   undo their relabelling of positions.
# - A fused `CrossEntropy` saves only the probabilities and the targets, and its backward is
#   $(p - \mathrm{onehot}(t))$, scaled by the upstream gradient and $1/|V|$, with zero rows for
#   ignored targets; it is finite for any logits.
# - A value used several times, whether by several operations or by broadcasting inside one,
#   receives the sum of the gradients of all its uses.
# - Each operation saves exactly what its vector-Jacobian product reads, choosing inputs or
#   output by the form of the derivative and by size.
#
# Next, in unit 1.5, we stop trusting our derivations and check every one of these operations
# with finite differences, with `gradcheck`, the tool that the hidden tests have been using all
# along.

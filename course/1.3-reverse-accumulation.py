# %% [markdown]
# # 1.3 Computation graphs and reverse accumulation
#
# In units 1.1 and 1.2 we derived every gradient by hand: `linear_backward`, `relu_backward`,
# `cross_entropy_backward`. That works for one layer and one loss, but every new model would need a
# new derivation, and every derivation is a new place for a sign or a transpose to go wrong. In this
# unit we build the machine that does the bookkeeping for us: a small **reverse-mode automatic
# differentiation engine** on NumPy, organised like PyTorch's autograd. By the end of the notebook,
# `loss.backward()` on any expression built from our nine operations fills in `x.grad` for every
# input `x`, and the grader compares the result with PyTorch and with finite differences.
#
# ## Learning goals
#
# After this unit we can:
#
# 1. draw the computation graph of an expression and read off which value was computed from which;
# 2. write the backward rule of an operation as a vector-Jacobian product, and decide what the
#    operation must save during its forward pass so that backward can run;
# 3. explain why one reverse pass gives the whole gradient of a scalar loss, while forward mode needs
#    one pass per input;
# 4. order a graph topologically without recursion, and run reverse accumulation over it, summing
#    the contributions of every path, with PyTorch's rules for the seed, for leaves and for repeated
#    calls;
# 5. train the MLP of unit 1.1 with the loss of unit 1.2 on our own engine, and see that its
#    gradients are the ones we derived by hand.
#
# ## Readings
#
# - **Understanding Deep Learning** (Prince), chapter 7 "Gradients and initialization": the
#   sections on computing derivatives, the toy example and the backpropagation algorithm.
#   <https://udlbook.github.io/udlbook/>
# - **Dive into Deep Learning**, section 2.5 "Automatic Differentiation" and section 5.3 "Forward
#   Propagation, Backward Propagation, and Computational Graphs".
#   <https://d2l.ai/chapter_preliminaries/autograd.html>,
#   <https://d2l.ai/chapter_multilayer-perceptrons/backprop.html>
# - **PyTorch documentation**, "Autograd mechanics" (how autograd records the graph, saved
#   tensors) and "Extending torch.autograd" (the `Function` / `ctx` design we copy).
#   <https://pytorch.org/docs/stable/notes/autograd.html>,
#   <https://pytorch.org/docs/stable/notes/extending.html>
# - Andrej Karpathy's **micrograd**, a reverse-mode engine for scalars in about a hundred lines. Our
#   engine has the same shape, with arrays instead of scalars and one class per operation.
#   <https://github.com/karpathy/micrograd>
# - **External drills** (the course outline's "external-tests"): TensorTonic's *Build Micrograd
#   from Scratch* study plan, its problems on value graphs, reverse mode and accumulation, solved
#   in a blank file with their local tests kept as evidence; and, as one changed-prompt drill,
#   Deep-ML's problem 26 *Basic Autograd Operations*.
# - Optional: Baydin, Pearlmutter, Radul and Siskind, "Automatic differentiation in machine
#   learning: a survey" (JMLR, 2018), section 3, for forward and reverse mode side by side.
#
# ## How this notebook works
#
# Each exercise has a heading with its task ID, the math, a worked example, a cell for our code
# (with `raise NotImplementedError()` where our code goes) and a test cell. The test cells run
# visible checks, with the same kinds of cases as the grader: random shapes, 0-d and size-1
# arrays, non-contiguous inputs, random and zero upstream gradients, and PyTorch's exact rules.
# When the notebook is graded, hidden checks rerun them with other seeds and compare with
# PyTorch, and every gradient also with central finite differences. Two rules hold throughout:
#
# - **NumPy only.** A solution that hands the work to torch earns no points for that exercise.
# - **No warnings.** A NumPy `RuntimeWarning` fails the check: nbgrader gives no points to a
#   test cell that writes to stderr.
#
# | part | task | points |
# |---|---|---|
# | 2 | concept check `passes` | 4 |
# | 4 | `add_mul_neg` | 8 |
# | 4 | `matmul` | 8 |
# | 4 | `sum` | 8 |
# | 4 | `exp_log` | 8 |
# | 4 | `tanh_relu` | 8 |
# | 4 | `explain_saved` (written, graded by hand) | 10 |
# | 5 | `topological_order` | 12 |
# | 6 | `backward` (two test cells: gradients, and PyTorch's rules) | 14 + 12 |
# | 6 | concept check `fan_out` | 3 |
# | 6 | `explain_accumulate` (written, graded by hand) | 5 |
# | | **total** | **100** |

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import numpy as np

# The checks compare our code with PyTorch, which loads (a few seconds) when the first test cell runs.
from autograder.inside import checks

# %% [markdown]
# ## 1. Computation graphs
#
# Every expression we can compute is a composition of a few primitive operations. If we give each
# intermediate result a name, the expression becomes a list of small steps. Our running example is
#
# $$L = (xy + x)\,xy, \qquad\text{computed as}\qquad q = x \cdot y, \qquad r = q + x, \qquad L = r \cdot q .$$
#
# Each value is a **node** of a graph, and there is an **edge** from every input of a step to the
# value it computes:
#
# ```
#  x ──┬───────────────► r = q + x ──► L = r · q
#      │                 ▲              ▲
#      └──► q = x · y ───┴──────────────┘
#  y ───────┘
# ```
#
# The nodes `x` and `y` are **leaves**: we created them, nothing computed them. The others are
# computed, and `L` is the **root** we want to differentiate. The graph is directed and acyclic (a
# DAG), because a step can only use values that exist already. It is not a tree: `x` feeds two
# steps (**fan-out**), and `q` reaches `L` along two paths, directly and through `r` (a
# **diamond**). With $x = 2$ and $y = 3$ the forward pass gives $q = 6$, $r = 8$, $L = 48$.
#
# ## 2. The chain rule, one node at a time
#
# Write $\bar v = \partial L / \partial v$ for the gradient of the root with respect to a node $v$;
# it has the same shape as $v$. The root only depends on $v$ through the nodes that consume $v$, so
# the multivariable chain rule says
#
# $$\bar v \;=\; \sum_{c\ \in\ \text{consumers}(v)} \Big(\frac{\partial c}{\partial v}\Big)^{\!\top} \bar c .$$
#
# Here $\partial c / \partial v$ is the Jacobian of one step (flatten $c$ and $v$ to vectors to read
# it as a matrix), and $(\partial c / \partial v)^\top \bar c$, the same numbers as the row vector
# $\bar c^{\top} \, \partial c / \partial v$, is a **vector-Jacobian product** (VJP). Two
# consequences shape the whole engine.
#
# 1. **Each operation only needs its own VJP.** Given $\bar c$ (the argument `grad` of its
#    `backward`), an operation returns $(\partial c / \partial v)^\top \bar c$ for each of its inputs.
#    It never builds the Jacobian: for `exp` on a million elements the Jacobian is a
#    $10^6 \times 10^6$ diagonal matrix, while the VJP is one elementwise product.
# 2. **A node used several times gets the sum.** One term per consumer, and one term per use
#    inside a consumer: in `x * x` both inputs of the multiplication are `x`, so `x` receives two
#    terms. Adding these terms up is what "accumulation" means in reverse accumulation.
#
# **Worked example.** We start from $\bar L = 1$ and process each node only once all of its
# consumers have been processed:
#
# | step | node | receives | sends |
# |---|---|---|---|
# | 1 | $L = r \cdot q$ | $\bar L = 1$ | $\bar r \mathrel{+}= \bar L \, q = 6$, $\ \bar q \mathrel{+}= \bar L \, r = 8$ |
# | 2 | $r = q + x$ | $\bar r = 6$ | $\bar q \mathrel{+}= 6$, $\ \bar x \mathrel{+}= 6$ |
# | 3 | $q = x \cdot y$ | $\bar q = 8 + 6 = 14$ | $\bar x \mathrel{+}= 14 \cdot y = 42$, $\ \bar y \mathrel{+}= 14 \cdot x = 28$ |
#
# So $\bar x = 6 + 42 = 48$ and $\bar y = 28$. Expanding $L = x^2 y^2 + x^2 y$ confirms it:
# $\partial L/\partial x = 2xy^2 + 2xy = 36 + 12 = 48$ and $\partial L/\partial y = 2x^2 y + x^2 = 24 + 4 = 28$.
#
# The order matters: `q` may only pass its gradient on once it has heard from **both** of its
# consumers, `r` and `L`. Had we processed `q` right after `L`, it would have passed on $8$ instead
# of $14$. In a **topological order** every node comes after the nodes it was computed from, so in
# the **reverse** of a topological order every node comes after all of its consumers: exactly the
# order we need.
#
# ### Why reverse mode: counting passes
#
# For $f : \mathbb{R}^n \to \mathbb{R}^m$ built from $K$ steps, the Jacobian is the product of the
# steps' Jacobians, $J = J_K \cdots J_2 J_1$ (an $m \times n$ matrix).
#
# - **Forward mode** pushes a tangent $\dot x$ from the inputs towards the output:
#   $J \dot x = J_K(\cdots(J_2(J_1 \dot x)))$, a Jacobian-vector product. One pass gives one
#   *column* of $J$ (take $\dot x = e_i$), so the full Jacobian needs $n$ passes.
# - **Reverse mode** pulls an adjoint $\bar y$ from the output back to the inputs:
#   $\bar y^\top J = ((\bar y^\top J_K) \cdots J_2) J_1$. One pass gives one *row* of $J$, so the
#   full Jacobian needs $m$ passes.
#
# A training loss is a scalar, $m = 1$: **one** reverse pass gives all $n$ partial derivatives, at a
# cost of a small constant multiple of one evaluation of $f$, however large $n$ is. With a million
# parameters, forward mode would need a million passes. The price of reverse mode is memory: the
# backward pass needs values from the forward pass ($q$ and $r$ above), so they must be kept until
# backward has used them. These are the values each operation *saves for backward*, and choosing
# them well is part of every exercise below.
#
# ### Concept check `passes`
#
# A *pass* is one sweep through the graph, forward or reverse. Set each variable to a whole number.
#
# - `reverse_passes`, `forward_passes`: for $f : \mathbb{R}^{1000} \to \mathbb{R}$, how many reverse
#   passes, and how many forward-mode passes, give the full gradient?
# - `jacobian_reverse_passes`, `jacobian_forward_passes`: the same for the full Jacobian of
#   $g : \mathbb{R}^{10} \to \mathbb{R}^{1000}$.

# %% nbgrader={"grade": false, "grade_id": "passes", "locked": false, "schema_version": 3, "solution": true, "task": false}
reverse_passes = None           # reverse passes for the gradient of f: R^1000 -> R
forward_passes = None           # forward-mode passes for the same gradient
jacobian_reverse_passes = None  # reverse passes for the Jacobian of g: R^10 -> R^1000
jacobian_forward_passes = None  # forward-mode passes for the same Jacobian
### BEGIN SOLUTION
reverse_passes = 1
forward_passes = 1000
jacobian_reverse_passes = 1000
jacobian_forward_passes = 10
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_passes", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# Stored as hashes (checks.answer_digest) so that the cell does not print the answers: one reverse
# pass per output (a row of the Jacobian), one forward pass per input (a column).
hint = "one reverse pass per output, one forward pass per input (section 2)."
checks.check_hash("passes", "reverse_passes", reverse_passes,
                  "6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b", hint=hint)
checks.check_hash("passes", "forward_passes", forward_passes,
                  "40510175845988f13f6162ed8526f0b09f73384467fa855e1e79b44a56562a58", hint=hint)
checks.check_hash("passes", "jacobian_reverse_passes", jacobian_reverse_passes,
                  "40510175845988f13f6162ed8526f0b09f73384467fa855e1e79b44a56562a58", hint=hint)
checks.check_hash("passes", "jacobian_forward_passes", jacobian_forward_passes,
                  "4a44dc15364204a80fe80e9039455cc1608281820fe2b24f1e5233ade6af1dd5", hint=hint)
### BEGIN HIDDEN TESTS
# The same answers computed from the question's sizes: n_in inputs, n_out outputs.
for n_in, n_out, rev, fwd in [(1000, 1, reverse_passes, forward_passes),
                              (10, 1000, jacobian_reverse_passes, jacobian_forward_passes)]:
    checks.check_value("passes", "a reverse pass count", rev, n_out, hint=hint)
    checks.check_value("passes", "a forward pass count", fwd, n_in, hint=hint)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. The machinery we are given
#
# The next cell (locked) gives three small classes, modelled on `torch.autograd`:
#
# - `Context`: a scratch object shared by one forward call and the matching backward call.
#   `ctx.save_for_backward(*arrays)` keeps arrays (or shapes) for backward, which reads them back
#   from `ctx.saved_tensors`. Options such as `axis` are stored as plain attributes, `ctx.axis = axis`.
# - `Function`: the base class of every operation. A subclass defines two static methods:
#   `forward(ctx, *arrays, **options)`, which computes on NumPy arrays and saves what backward
#   needs, and `backward(ctx, grad)`, which receives $\bar c$ (always called `grad`) and returns
#   one gradient per positional input of forward, in order. A one-input operation may return a
#   single array instead of a 1-tuple, as in torch. We never call `forward` ourselves; we call
#   `Add.apply(a, b)`, which unwraps the tensors, runs `forward` with a fresh `Context`, and wraps
#   the result in a new `Tensor` that remembers the Function (`fn`), the context (`ctx`) and the
#   input tensors (`inputs`). As in torch, that link is only recorded when some input requires a
#   gradient; otherwise the result is a plain constant.
# - `Tensor`: a NumPy array (`data`) plus `requires_grad`, `grad` and the `fn`, `ctx` and `inputs`
#   that made it. A tensor with no `fn` is a **leaf** (`is_leaf`). Its operators (`+ - * @`, unary
#   `-`, `.sum()`, `.exp()`, `.log()`, `.tanh()`, `.relu()`) call `Add.apply`, `Mul.apply`, ... and
#   look these classes up by name *when they run*, so they use the classes we write below. Python
#   numbers and arrays mixed into an expression become constant tensors. `t.backward(grad=None)`
#   calls the function `backward` that we write at the end.
#
# For the running example, once `Add` and `Mul` are written:
#
# ```python
# >>> x, y = Tensor(2.0, requires_grad=True), Tensor(3.0, requires_grad=True)
# >>> q = x * y
# >>> r = q + x
# >>> L = r * q
# >>> L
# Tensor(48., fn=Mul)
# >>> L.inputs[0] is r, L.inputs[1] is q, r.inputs[1] is x, x.is_leaf
# (True, True, True, True)
# ```

# %% nbgrader={"grade": false, "grade_id": "machinery", "locked": true, "schema_version": 3, "solution": false, "task": false}
class Context:
    """Scratch space shared by one forward call and the matching backward call."""

    def __init__(self):
        self.saved_tensors = ()

    def save_for_backward(self, *arrays):
        """Keep arrays (or shapes) for backward, which reads them from ``ctx.saved_tensors``."""
        self.saved_tensors = arrays


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
        arrays = [t.data for t in inputs]
        out = Tensor(cls.forward(ctx, *arrays, **options))
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
        data = np.asarray(data)
        self.data = data if np.issubdtype(data.dtype, np.floating) else data.astype(np.float64)
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

    def __repr__(self):
        origin = f"fn={self.fn.__name__}" if self.fn else f"requires_grad={self.requires_grad}"
        return f"Tensor({np.array2string(self.data, precision=4)}, {origin})"

    def backward(self, grad=None):
        backward(self, grad)  # the function written in Exercise `backward`

    # Each operator looks its Function up by name when it runs, so it uses the classes below.
    def __add__(self, other):
        return Add.apply(self, other)

    def __radd__(self, other):
        return Add.apply(other, self)

    def __sub__(self, other):
        return self + (-other)

    def __rsub__(self, other):
        return other + (-self)

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

    def exp(self):
        return Exp.apply(self)

    def log(self):
        return Log.apply(self)

    def tanh(self):
        return Tanh.apply(self)

    def relu(self):
        return ReLU.apply(self)


# %% [markdown]
# ## 4. The operations
#
# Every operation in this unit takes operands of the **same shape** (broadcasting, and the `Sum`
# it needs in backward, is unit 1.4). In each backward, `grad` has the shape of the output, and each
# returned gradient must have the shape of its input. We read each rule off the chain rule of
# section 2: for an elementwise step the Jacobian is diagonal, so its VJP is an elementwise product.
#
# ### Exercise `add_mul_neg`: `Add`, `Mul` and `Neg`
#
# For $z = x + y$ every $z_i$ depends on $x_i$ with slope 1, so $\bar x = \bar z$ and
# $\bar y = \bar z$: addition passes the gradient through to both inputs unchanged and needs nothing
# from the forward pass. For $z = -x$, $\bar x = -\bar z$, again with nothing saved.
#
# For the elementwise product $z = x \odot y$ we have $\partial z_i / \partial x_i = y_i$ and
# $\partial z_i / \partial y_i = x_i$, so
#
# $$\bar x = \bar z \odot y, \qquad \bar y = \bar z \odot x .$$
#
# Each input's gradient needs the *other* input, so `Mul` saves both: `ctx.save_for_backward(x, y)`.
#
# **Worked example.** $x = (1, 2)$, $y = (3, -1)$ and upstream $\bar z = (0.5, 2)$. `Mul` returns
# $\bar x = (0.5 \cdot 3,\ 2 \cdot (-1)) = (1.5, -2)$ and $\bar y = (0.5 \cdot 1,\ 2 \cdot 2) = (0.5, 4)$;
# `Add` returns $(0.5, 2)$ twice; `Neg` returns $(-0.5, -2)$.
#
# The tests check what each Function saves, so save exactly what its backward needs: `Add` and
# `Neg` save nothing, `Mul` saves `(x, y)`.

# %% nbgrader={"grade": false, "grade_id": "add_mul_neg", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Add(Function):
    """x + y for two arrays of the same shape. Saves nothing."""

    @staticmethod
    def forward(ctx, x, y):
        ### BEGIN SOLUTION
        return x + y
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        return grad, grad
        ### END SOLUTION


class Mul(Function):
    """x * y, elementwise, for two arrays of the same shape. Saves (x, y)."""

    @staticmethod
    def forward(ctx, x, y):
        ### BEGIN SOLUTION
        ctx.save_for_backward(x, y)
        return x * y
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        x, y = ctx.saved_tensors
        return grad * y, grad * x
        ### END SOLUTION


class Neg(Function):
    """-x. Saves nothing."""

    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        return -x
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        return -grad
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_add_mul_neg", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# Forward against torch, the saved values, and backward against torch autograd and central
# differences; each check also runs a zero upstream grad and non-contiguous inputs.
worked_x, worked_y, worked_grad = np.array([1.0, 2.0]), np.array([3.0, -1.0]), np.array([0.5, 2.0])
binary_shapes = [((3, 4), (3, 4)), ((), ()), ((1, 5), (1, 5)), ((2, 1, 3), (2, 1, 3))]
checks.check_function("add_mul_neg", Add, "add", [checks.case("Add, worked example", worked_x, worked_y)],
                      saves=lambda x, y, out: [()], names=["x", "y"], upstream=worked_grad)
checks.check_function("add_mul_neg", Mul, "mul", [checks.case("Mul, worked example", worked_x, worked_y)],
                      saves=lambda x, y, out: [(x, y)], names=["x", "y"], upstream=worked_grad)
checks.check_function("add_mul_neg", Neg, "neg", [checks.case("Neg, worked example", worked_x)],
                      saves=lambda x, out: [()], names=["x"], upstream=worked_grad)
checks.check_function("add_mul_neg", Add, "add", checks.random_cases(1, binary_shapes, label="Add"),
                      saves=lambda x, y, out: [()], names=["x", "y"], seed=1)
checks.check_function("add_mul_neg", Mul, "mul", checks.random_cases(2, binary_shapes, label="Mul"),
                      saves=lambda x, y, out: [(x, y)], names=["x", "y"], seed=2)
checks.check_function("add_mul_neg", Neg, "neg", checks.random_cases(3, [((3, 4),), ((),), ((1, 5),)], label="Neg"),
                      saves=lambda x, out: [()], names=["x"], seed=3)
### BEGIN HIDDEN TESTS
binary_shapes = [((4, 3), (4, 3)), ((1, 1), (1, 1)), ((), ()), ((2, 3, 1), (2, 3, 1)), ((5,), (5,))]
checks.check_function("add_mul_neg", Add, "add", checks.random_cases(101, binary_shapes, label="Add"),
                      saves=lambda x, y, out: [()], names=["x", "y"], seed=101)
checks.check_function("add_mul_neg", Mul, "mul", checks.random_cases(102, binary_shapes, label="Mul"),
                      saves=lambda x, y, out: [(x, y)], names=["x", "y"], seed=102)
checks.check_function("add_mul_neg", Neg, "neg",
                      checks.random_cases(103, [((4, 3),), ((1,),), ((),), ((2, 3, 1),)], label="Neg"),
                      saves=lambda x, out: [()], names=["x"], seed=103)
### END HIDDEN TESTS


# %% [markdown]
# ### Exercise `matmul`: `MatMul`
#
# For $C = AB$ with $A$ of shape $(n, k)$ and $B$ of shape $(k, m)$, $C_{ij} = \sum_l A_{il} B_{lj}$.
# The entry $A_{il}$ appears in every $C_{ij}$ of row $i$, with slope $B_{lj}$, so
#
# $$\bar A_{il} = \sum_j \bar C_{ij} B_{lj} = (\bar C B^\top)_{il}, \qquad
#   \bar B_{lj} = \sum_i A_{il} \bar C_{ij} = (A^\top \bar C)_{lj} .$$
#
# The shapes are a good memory aid: $\bar A$ must be $(n, k)$, and the only way to get that from
# $\bar C$, $(n, m)$, and $B$, $(k, m)$, is $\bar C B^\top$. `MatMul` saves both inputs, `(A, B)`;
# it does not need its output. In this unit `MatMul` multiplies 2-D arrays only.
#
# **Worked example.** $A = \begin{pmatrix} 1 & 2 \end{pmatrix}$, $B = \begin{pmatrix} 3 \\ 4 \end{pmatrix}$,
# so $C = (11)$. With $\bar C = (2)$: $\bar A = \bar C B^\top = \begin{pmatrix} 6 & 8 \end{pmatrix}$ and
# $\bar B = A^\top \bar C = \begin{pmatrix} 2 \\ 4 \end{pmatrix}$.

# %% nbgrader={"grade": false, "grade_id": "matmul", "locked": false, "schema_version": 3, "solution": true, "task": false}
class MatMul(Function):
    """A @ B for 2-D arrays A (n, k) and B (k, m). Saves (A, B)."""

    @staticmethod
    def forward(ctx, A, B):
        ### BEGIN SOLUTION
        ctx.save_for_backward(A, B)
        return A @ B
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        A, B = ctx.saved_tensors
        return grad @ B.T, A.T @ grad
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_matmul", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
matmul_saves = lambda A, B, out: [(A, B)]  # noqa: E731
checks.check_function("matmul", MatMul, "matmul",
                      [checks.case("worked example", np.array([[1.0, 2.0]]), np.array([[3.0], [4.0]]))],
                      saves=matmul_saves, names=["A", "B"], upstream=np.array([[2.0]]))
checks.check_function("matmul", MatMul, "matmul",
                      checks.random_cases(10, [((3, 4), (4, 2)), ((1, 3), (3, 1)), ((3, 3), (3, 3))]),
                      saves=matmul_saves, names=["A", "B"], seed=10)
### BEGIN HIDDEN TESTS
matmul_shapes = [((2, 5), (5, 3)), ((1, 3), (3, 1)), ((1, 1), (1, 1)), ((4, 1), (1, 5)), ((3, 3), (3, 3))]
checks.check_function("matmul", MatMul, "matmul", checks.random_cases(11, matmul_shapes),
                      saves=matmul_saves, names=["A", "B"], seed=11)
### END HIDDEN TESTS


# %% [markdown]
# ### Exercise `sum`: `Sum`
#
# For $y = \sum_j x_{ij}$ (a sum over axis 1), each $x_{ij}$ enters $y_i$ once, with slope 1, so
# $\bar x_{ij} = \bar y_i$: backward **copies** the upstream gradient back along the summed axis.
# Summing over every axis (`axis=None`) gives every element the same scalar gradient.
#
# The work is in the shapes. With `keepdims=False` the summed axis is gone from `grad`, so we first
# put it back with length 1 (`np.expand_dims(grad, axis)`) and then stretch it to the input shape
# (`np.broadcast_to(grad, shape)`). Skipping the first step is a classic bug: NumPy aligns shapes
# on the right, so a `grad` of shape `(2,)` cannot stretch to `(2, 3)`, and for a square input it
# stretches along the wrong axis without any error. With `keepdims=True` the axis is still there.
#
# `Sum` saves only the input's **shape**, `ctx.save_for_backward(x.shape)`: the values of $x$ play
# no part in the gradient. It keeps its options as attributes, `ctx.axis` and `ctx.keepdims`, as
# torch's Functions do with arguments that are not tensors. `axis` is `None` or one int (negative
# ints count from the end, as in NumPy). `np.broadcast_to` returns a read-only view; returning it is
# fine.
#
# **Worked example.** $x$ of shape $(2, 3)$, `axis=1`: $y$ has shape $(2,)$. With
# $\bar y = (10, 20)$, backward expands to shape $(2, 1)$ and broadcasts to
# $\bar x = \begin{pmatrix} 10 & 10 & 10 \\ 20 & 20 & 20 \end{pmatrix}$.

# %% nbgrader={"grade": false, "grade_id": "sum", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Sum(Function):
    """x.sum(axis=axis, keepdims=keepdims) with axis None or an int. Saves the input's shape."""

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        ### BEGIN SOLUTION
        ctx.axis = axis
        ctx.keepdims = keepdims
        ctx.save_for_backward(x.shape)
        return np.sum(x, axis=axis, keepdims=keepdims)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        shape = ctx.saved_tensors[0]
        if ctx.axis is not None and not ctx.keepdims:
            grad = np.expand_dims(grad, ctx.axis)  # the summed axis comes back with length 1
        return np.broadcast_to(grad, shape)  # each summed element gets the same gradient
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sum", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
sum_saves = lambda x, out, **options: [(x.shape,)]  # noqa: E731
sum_x = np.arange(6.0).reshape(2, 3)
checks.check_function("sum", Sum, "sum", [checks.case("worked example, axis=1", sum_x, axis=1)],
                      saves=sum_saves, names=["x"], upstream=np.array([10.0, 20.0]))


def sum_cases(seed):
    """Every axis option on random inputs: square inputs catch a gradient stretched along the wrong axis."""
    x34, x33 = checks.randn(seed, 3, 4), checks.randn(seed + 1, 3, 3)
    return [
        checks.case("every element", x34),
        checks.case("axis=0", x34, axis=0),
        checks.case("axis=-1, keepdims", x34, axis=-1, keepdims=True),
        checks.case("axis=None, keepdims", x34, axis=None, keepdims=True),
        checks.case("square input, axis=1", x33, axis=1),
        checks.case("square input, axis=0, keepdims", x33, axis=0, keepdims=True),
        checks.case("size-1 axis", checks.randn(seed + 2, 2, 1, 3), axis=1),
        checks.case("3-D, axis=2", checks.randn(seed + 3, 2, 3, 4), axis=2),
        checks.case("1-D", checks.randn(seed + 4, 5), axis=0),
        checks.case("0-d", checks.randn(seed + 5)),
    ]


checks.check_function("sum", Sum, "sum", sum_cases(20), saves=sum_saves, names=["x"], seed=20)
### BEGIN HIDDEN TESTS
checks.check_function("sum", Sum, "sum", sum_cases(120), saves=sum_saves, names=["x"], seed=120)
### END HIDDEN TESTS


# %% [markdown]
# ### Exercise `exp_log`: `Exp` and `Log`
#
# For $y = e^x$ the derivative is $e^x = y$, the output itself: $\bar x = \bar y \odot y$. So `Exp`
# saves its **output**; backward then needs one multiplication, and no second `exp`.
#
# For $y = \log x$ the derivative is $1/x$: $\bar x = \bar y / x$. Now the output is no help
# (recovering $x = e^y$ would cost an `exp`), so `Log` saves its **input**.
#
# In `forward`, compute the result once, save it if it is what backward needs, and return it.
#
# **Worked example.** `Exp` on $x = (0, \log 2)$ gives $y = (1, 2)$; with $\bar y = (3, 3)$,
# $\bar x = (3, 6)$. `Log` on $x = (1, 4)$ with $\bar y = (2, 2)$ gives $\bar x = (2, 0.5)$.

# %% nbgrader={"grade": false, "grade_id": "exp_log", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Exp(Function):
    """exp(x), elementwise. Saves its output."""

    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        out = np.exp(x)
        ctx.save_for_backward(out)
        return out
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        (out,) = ctx.saved_tensors
        return grad * out
        ### END SOLUTION


class Log(Function):
    """log(x), elementwise, for positive x. Saves its input."""

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


# %% nbgrader={"grade": true, "grade_id": "test_exp_log", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
exp_saves, log_saves = (lambda x, out: [(out,)]), (lambda x, out: [(x,)])
checks.check_function("exp_log", Exp, "exp", [checks.case("Exp, worked example", np.array([0.0, np.log(2.0)]))],
                      saves=exp_saves, names=["x"], upstream=np.array([3.0, 3.0]))
checks.check_function("exp_log", Log, "log", [checks.case("Log, worked example", np.array([1.0, 4.0]))],
                      saves=log_saves, names=["x"], upstream=np.array([2.0, 2.0]))
unary_shapes = [((3, 4),), ((),), ((1, 5),), ((2, 1, 3),)]
checks.check_function("exp_log", Exp, "exp", checks.random_cases(30, unary_shapes, label="Exp"),
                      saves=exp_saves, names=["x"], seed=30)
checks.check_function("exp_log", Log, "log", checks.random_cases(31, unary_shapes, label="Log", positive=True),
                      saves=log_saves, names=["x"], seed=31)
### BEGIN HIDDEN TESTS
unary_shapes = [((4, 3),), ((1, 5),), ((),), ((3, 1, 2),), ((1,),)]
checks.check_function("exp_log", Exp, "exp", checks.random_cases(130, unary_shapes, label="Exp"),
                      saves=exp_saves, names=["x"], seed=130)
checks.check_function("exp_log", Log, "log", checks.random_cases(131, unary_shapes, label="Log", positive=True),
                      saves=log_saves, names=["x"], seed=131)
### END HIDDEN TESTS


# %% [markdown]
# ### Exercise `tanh_relu`: `Tanh` and `ReLU`
#
# For $y = \tanh x$, $\;dy/dx = 1 - \tanh^2 x = 1 - y^2$: like `Exp`, the derivative is a function
# of the output, so `Tanh` saves its **output** and backward returns $\bar y \odot (1 - y^2)$.
#
# For $y = \max(x, 0)$ the slope is 1 where $x > 0$ and 0 where $x < 0$. At $x = 0$ the function
# has a kink and no derivative; PyTorch uses 0 there, and so do we (`x > 0`, not `x >= 0`). So
# $\bar x = \bar y \odot [x > 0]$. `ReLU` saves either its **input** or the boolean **mask**
# `x > 0`, which is all backward needs (and takes one byte per element instead of eight).
#
# **Worked example.** `Tanh` at $x = (0, \operatorname{artanh} 0.5)$ gives $y = (0, 0.5)$; with
# $\bar y = (1, 1)$, $\bar x = (1, 0.75)$. `ReLU` at $x = (-1, 0, 2)$ with $\bar y = (5, 5, 5)$
# gives $\bar x = (0, 0, 5)$: the middle entry sits on the kink, and passes no gradient.

# %% nbgrader={"grade": false, "grade_id": "tanh_relu", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Tanh(Function):
    """tanh(x), elementwise. Saves its output."""

    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        out = np.tanh(x)
        ctx.save_for_backward(out)
        return out
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        (out,) = ctx.saved_tensors
        return grad * (1.0 - out**2)
        ### END SOLUTION


class ReLU(Function):
    """max(x, 0), elementwise, with slope 0 at x = 0. Saves its input or its mask x > 0."""

    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION
        ctx.save_for_backward(x)
        return np.maximum(x, 0.0)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        (x,) = ctx.saved_tensors
        return np.where(x > 0, grad, 0.0)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_tanh_relu", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
tanh_saves, relu_saves = (lambda x, out: [(out,)]), (lambda x, out: [(x,), (x > 0,)])


def kink_hint(got, expected):
    if np.any((expected == 0) & (got != 0)):
        return "where x <= 0 the gradient is 0; at the kink x == 0, torch's ReLU gradient is 0 too (x > 0, not x >= 0)."
    return None


checks.check_function("tanh_relu", Tanh, "tanh",
                      [checks.case("Tanh, worked example", np.array([0.0, np.arctanh(0.5)]))],
                      saves=tanh_saves, names=["x"], upstream=np.array([1.0, 1.0]))
checks.check_function("tanh_relu", ReLU, "relu", [checks.case("ReLU, worked example", np.array([-1.0, 0.0, 2.0]))],
                      saves=relu_saves, names=["x"], upstream=np.array([5.0, 5.0, 5.0]), fd=False,
                      hints=[kink_hint])
unary_shapes = [((3, 4),), ((),), ((1, 5),), ((2, 1, 3),)]
checks.check_function("tanh_relu", Tanh, "tanh", checks.random_cases(40, unary_shapes, label="Tanh"),
                      saves=tanh_saves, names=["x"], seed=40)
# Random normal inputs are never within the finite-difference step (1e-6) of ReLU's kink.
checks.check_function("tanh_relu", ReLU, "relu", checks.random_cases(41, unary_shapes, label="ReLU"),
                      saves=relu_saves, names=["x"], seed=41)


def relu_kink_cases(seed):
    """Exact zeros among random values: torch's gradient at the kink x = 0 is 0. Central differences
    would give 1/2 there, so torch alone judges these cases (fd=False)."""
    x = checks.randn(seed, 3, 4)
    x[0, 1] = x[1, :2] = x[2, 3] = 0.0
    x[2, 0] = -0.0
    return [checks.case("exact zeros in x (the kink)", x), checks.case("0-d x = 0 (the kink)", np.asarray(0.0))]


checks.check_function("tanh_relu", ReLU, "relu", relu_kink_cases(42), saves=relu_saves, names=["x"], seed=42,
                      fd=False, hints=[kink_hint])
### BEGIN HIDDEN TESTS
unary_shapes = [((4, 3),), ((1, 5),), ((),), ((3, 1, 2),), ((1,),)]
checks.check_function("tanh_relu", Tanh, "tanh", checks.random_cases(140, unary_shapes, label="Tanh"),
                      saves=tanh_saves, names=["x"], seed=140)
checks.check_function("tanh_relu", ReLU, "relu", checks.random_cases(141, unary_shapes, label="ReLU"),
                      saves=relu_saves, names=["x"], seed=141)
checks.check_function("tanh_relu", ReLU, "relu", relu_kink_cases(142), saves=relu_saves, names=["x"], seed=142,
                      fd=False, hints=[kink_hint])
### END HIDDEN TESTS


# %% [markdown]
# ### Explain `explain_saved`
#
# Each operation above saves exactly what its backward needs. Apply the same reasoning to three
# operations we have not written, from the form of their derivatives:
#
# (a) `Sigmoid`, $y = \sigma(x)$: what should it save, and what would backward compute from it?
# (b) `Div`, $z = x / y$: what does backward need for $\bar x$ and for $\bar y$, and which two
#     arrays could it save? (Two answers are possible.)
# (c) `Max` over an axis, $y_i = \max_j x_{ij}$: what must it save, and why can't it get away with
#     saving only the shape, as `Sum` does?
#
# (Graded by hand; 10 points: (a) 3, (b) 4, (c) 3.)

# %% [markdown] nbgrader={"grade": true, "grade_id": "explain_saved", "locked": false, "points": 10, "schema_version": 3, "solution": true, "task": false}
# **Model answer.**
#
# *(a) Sigmoid (3 points).* $\sigma'(x) = \sigma(x)(1 - \sigma(x)) = y(1 - y)$ is a function of the
# output alone, as for `Exp` and `Tanh`, so `Sigmoid` saves its **output** $y$ and backward returns
# $\bar y \odot y \odot (1 - y)$: one multiplication, no second `exp`. Saving the input would mean
# recomputing $\sigma(x)$ in backward, the same memory for more work.
#
# *(b) Div (4 points).* $\partial z / \partial x = 1/y$ and $\partial z / \partial y = -x / y^2$, so
# $\bar x = \bar z / y$ and $\bar y = -\bar z\, x / y^2$. Both need $y$; $\bar y$ also needs $x$.
# So `Div` saves $(x, y)$, or $(y, z)$ with $\bar y = -\bar z\, z / y$, since $x / y^2 = z / y$.
# Saving only $x$ is not enough: $y$ appears in both gradients.
#
# *(c) Max (3 points).* $y_i$ depends only on the entry that attains the maximum of row $i$, with
# slope 1; every other entry has slope 0. So backward must know **where** the maximum was: `Max`
# saves a mask of the arg-max entries (or their indices), and backward puts $\bar y_i$ there and 0
# elsewhere. The shape alone says nothing about where the maximum sits. `Sum` can save only its
# shape because every entry has the same slope, 1.

# %% [markdown]
# ## 5. Topological order
#
# A **topological order** of the graph under a root lists every node the root depends on (and the
# root itself) exactly once, each node after all of its inputs. For the running example,
# `[x, y, q, r, L]` and `[y, x, q, r, L]` are both topological orders; `[x, q, y, r, L]` is not,
# because `q` comes before its input `y`.
#
# Depth-first search gives one directly: visit a node's inputs first, then append the node. As a
# recursive function that reads
#
# ```python
# def visit(node):
#     if id(node) not in seen:
#         seen.add(id(node))
#         for parent in node.inputs:
#             visit(parent)
#         order.append(node)   # after all of its inputs
# ```
#
# The set `seen` makes every node appear once even when several nodes use it; it holds `id(node)`,
# the identity of the tensor object, because two different nodes can hold equal values, and
# looking an id up in a set is instant while `node in order` scans the whole list.
#
# This recursive version has one fatal problem: each call waits on the call stack for its inputs,
# so the stack grows as deep as the longest path in the graph. Python stops at
# `sys.getrecursionlimit()` frames (1000 by default) with a `RecursionError`, and graphs that deep
# are ordinary: a loop that applies 10,000 updates to one tensor, or a recurrent network unrolled
# over a long sequence. Raising the limit with `sys.setrecursionlimit` only moves the failure: deep
# enough, the interpreter's own stack overflows and the kernel dies. (The tests count how deeply
# our Python calls nest, so a recursive walk fails them whatever the limit is set to.) So we
# manage the stack ourselves, in a Python list. One way is to keep, for
# each node on the stack, an iterator over the inputs it has not visited yet; that list then holds
# exactly what the recursive version keeps in its frames. (Other correct choices: push each node
# twice, once to expand it and once to emit it; or Kahn's algorithm, which counts each node's
# consumers and emits a node once all of them are done.)
#
# Every tensor reachable from the root through `.inputs` belongs in the order, including leaves
# that do not require grad (constants such as the `2.0` in `x * 2.0`).
#
# ### Exercise `topological_order`
#
# Write `topological_order(root)`, iteratively, with the stack in a Python list.

# %% nbgrader={"grade": false, "grade_id": "topological_order", "locked": false, "schema_version": 3, "solution": true, "task": false}
def topological_order(root):
    """Every tensor reachable from ``root`` through ``.inputs``, and ``root``, each exactly once,
    each after all of its inputs, as a list. Iterative (an explicit stack, no recursive calls): a
    chain of 10,000 operations must work, and raising the recursion limit does not count."""
    ### BEGIN SOLUTION
    order = []
    seen = {id(root)}
    stack = [(root, iter(root.inputs))]  # each entry: a node and its inputs not visited yet
    while stack:
        node, pending_inputs = stack[-1]
        for parent in pending_inputs:
            if id(parent) not in seen:
                seen.add(id(parent))
                stack.append((parent, iter(parent.inputs)))
                break  # visit this input first; come back to the node afterwards
        else:  # every input is already in the order, so the node can follow them
            stack.pop()
            order.append(node)
    return order
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_topological_order", "locked": true, "points": 12, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
class Node(Function):
    """A stand-in operation with any number of inputs: the tests use it to build graphs of any shape."""

    @staticmethod
    def forward(ctx, *arrays):
        return np.zeros(())


def check_order(graph, what):
    """Run topological_order on the graph's root (its last node) and check: only the graph's nodes,
    each once, all reachable nodes, inputs first. ``graph`` is ``(nodes, inputs)`` from make_graph:
    the test knows each node's inputs itself. The walk may not recurse: the checks count how deeply
    its Python calls nest, whatever the recursion limit says."""
    nodes, inputs = graph
    index = {id(node): i for i, node in enumerate(nodes)}
    order = list(checks.run_shallow("topological_order", topological_order, nodes[-1], what=what))
    position = {}
    for i, node in enumerate(order):
        assert id(node) in index, (
            f"[topological_order] {what}: item {i} is not a node of this graph (a {type(node).__name__}); the order "
            "holds the Tensors themselves.")
        assert index[id(node)] not in position, (
            f"[topological_order] {what}: the node at position {i} already appeared at position "
            f"{position[index[id(node)]]}. Each node must appear once, even when several nodes use it: remember the "
            "ids you have visited.")
        position[index[id(node)]] = i
    reachable, stack = {len(nodes) - 1}, [len(nodes) - 1]
    while stack:
        for parent in inputs[stack.pop()]:
            if parent not in reachable:
                reachable.add(parent)
                stack.append(parent)
    missing, extra = len(reachable - position.keys()), len(position.keys() - reachable)
    assert not missing, (f"[topological_order] {what}: {missing} of the {len(reachable)} nodes reachable from the "
                         "root are missing (leaves and constants belong in the order too).")
    assert not extra, f"[topological_order] {what}: {extra} node(s) in the order are not reachable from the root."
    for node, i in position.items():
        for parent in inputs[node]:
            assert position[parent] < i, (
                f"[topological_order] {what}: the node at position {i} comes before its input at "
                f"position {position[parent]}. A node must come after all of its inputs.")
    return order


def make_graph(leaves, steps, requires):
    """The leaves (``requires[i]``: leaf i requires grad), then one Node per step on the nodes whose
    indices the step lists. Returns ``(nodes, inputs)``, where ``inputs[i]`` lists the indices of
    node i's inputs: none for a leaf, and none for a node that no gradient reaches (Function.apply
    records a step only when some input requires grad)."""
    inputs, requires = [[] for _ in leaves], list(requires)
    for step in steps:
        requires.append(any(requires[i] for i in step))
        inputs.append(list(step) if requires[-1] else [])
    return checks.build_graph(Node.apply, leaves, steps), inputs


def random_dag(seed, n_nodes):
    """Leaves (some constants), then nodes with 1 to 3 inputs, often repeated, mostly from recent nodes."""
    gen = np.random.default_rng(seed)
    requires = [bool(i % 3) for i in range(4)]
    leaves = [Tensor(np.zeros(()), requires_grad=r) for r in requires]
    steps = []
    for n in range(len(leaves), len(leaves) + n_nodes):
        recent = max(0, n - 6)
        steps.append([int(gen.integers(recent if gen.random() < 0.7 else 0, n)) for _ in range(int(gen.integers(1, 4)))])
    return make_graph(leaves, steps, requires)


def chain(n, width=1):
    """n operations in a row; with width 2 each step also reads the step before last (a ladder of diamonds)."""
    return make_graph([Tensor(np.zeros(()), requires_grad=True)],
                      [list(range(max(0, k - width + 1), k + 1)) for k in range(n)], [True])


x, y = Tensor(2.0, requires_grad=True), Tensor(3.0, requires_grad=True)
c = Tensor(np.ones(()))  # a constant input is a node too
# the worked example: q = x * y (node 2), r = q + x (node 3), L = r * q (node 4)
assert len(check_order(make_graph([x, y], [[0, 1], [2, 0], [3, 2]], [True, True]), "the worked example")) == 5
check_order(make_graph([x], [[0, 0]], [True]), "x * x")
assert check_order(make_graph([x], [], [True]), "a single leaf") == [x], "[topological_order] the order of a lone leaf is [leaf]."
check_order(make_graph([x, c], [[0, 1], [2, 1, 0]], [True, False]), "a graph with a constant")
def check_random_graphs(seeds):
    for seed in seeds:
        check_order(random_dag(seed, 40), f"random graph (seed {seed})")


check_random_graphs(range(5))
# 10,000 operations in a row: an explicit stack needs no deeper Python calls than a small graph.
assert len(check_order(chain(10_000), "a chain of 10,000 operations")) == 10_001
### BEGIN HIDDEN TESTS
check_random_graphs(range(100, 120))
check_order(make_graph([x], [[0, 0, 0]], [True]), "a node using the same input three times")
assert len(check_order(chain(1_500, width=2), "a ladder of 1,500 diamonds")) == 1_501
### END HIDDEN TESTS


# %% [markdown]
# ## 6. Reverse accumulation: `backward`
#
# Now we put it together. `backward(root, grad=None)` computes $\bar v$ for every node and stores it
# in `.grad` of the leaves that require grad, following PyTorch's rules.
#
# 1. **The seed.** $\bar L = \partial L / \partial L = 1$: for a root with exactly one element
#    (0-d, or a shape like `(1, 1)`; torch's rule counts elements), the seed is
#    `np.ones_like(root.data)`. A root with more elements has no single derivative, and
#    `backward` without `grad` raises a `RuntimeError`, as torch does ("grad can be implicitly
#    created only for scalar outputs"). When `grad` is given (an array of the root's shape),
#    it is the seed: `y.backward(g)` computes the gradient of `(g * y).sum()`.
# 2. **The sweep.** Walk `reversed(topological_order(root))`, keeping a dictionary from `id(node)`
#    to the gradient that node has received so far. For each node that has received a gradient:
#    if it is a leaf, add it into `node.grad`; otherwise call `node.fn.backward(node.ctx, g)`,
#    which returns one gradient per input (a single array for one input), and **add** each into the
#    entry of its input, skipping inputs that do not require grad (constants).
# 3. **Leaves only.** Only leaves that require grad get a `.grad`. Intermediate gradients live in
#    the dictionary and can be dropped (`dict.pop`) as soon as the node has passed them on, which
#    frees their memory; torch does the same, and keeps one only if asked (`t.retain_grad()`).
# 4. **Repeated calls add up.** A second `backward` adds into the existing `.grad` instead of
#    replacing it, as in torch; this is why training loops call `zero_grad()` before each step.
#    (Unlike torch, our graph keeps its saved values after backward, so a second call needs no
#    `retain_graph=True`.)
#
# **The aliasing trap.** `Add.backward` returns the *same array object* for both of its inputs. If
# we stored that object as the gradient of `x`, a later `+=` into `x`'s gradient would change `y`'s
# too. So each sum starts from a fresh array (`np.zeros_like(node.data)`), and `+=` adds into it.
#
# **Worked example.** For the running example, a valid order is `[x, y, q, r, L]`, so the sweep
# visits `L, r, q, y, x`. The dictionary goes `{L: 1}` → `{r: 6, q: 8}` → `{q: 14, x: 6}` →
# `{x: 48, y: 28}`, and finally `y.grad = 28`, `x.grad = 48`. The figure at the end of the notebook
# replays this sweep, step by step, with our own code.
#
# ### Exercise `backward`
#
# Write `backward(root, grad=None)`, following the four rules above; `Tensor.backward` calls it.

# %% nbgrader={"grade": false, "grade_id": "backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
def backward(root, grad=None):
    """Add d(root)/d(leaf), weighted by ``grad``, into ``.grad`` of every leaf under ``root`` that
    requires grad.

    ``grad`` defaults to ones for a root with exactly one element; for any other root it is
    required, and a ``RuntimeError`` is raised without it. Visits the nodes in reverse
    topological order (use ``topological_order``). A node reached along several paths receives
    the sum of their contributions. Nodes that are not leaves keep no ``.grad``; leaves add to
    the ``.grad`` they already have.
    """
    ### BEGIN SOLUTION
    if grad is None:
        if np.size(root.data) != 1:  # torch counts elements: a (1, 1) root is a scalar here
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        grad = np.ones(root.shape, dtype=root.data.dtype)
    received = {id(root): np.asarray(grad)}  # id(node) -> sum of the gradients sent to it so far
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
        for parent, parent_grad in zip(node.inputs, input_grads):
            if parent.requires_grad:
                if id(parent) not in received:
                    received[id(parent)] = np.zeros_like(parent.data)
                received[id(parent)] += parent_grad
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_backward", "locked": true, "points": 14, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# check_graph builds each graph on our Tensor (leaves with requires_grad=True), calls .backward()
# and compares every leaf's .grad with torch autograd and with central differences. The graphs use
# our operations: if an operation's test above fails, fix that first.
def order_hint(build, leaves):
    """A hint for check_graph: when a gradient is wrong, is our topological order of this graph valid?"""
    def hint(got, expected):
        try:
            root = build(*[Tensor(a.copy(), requires_grad=True) for a in leaves])
            position = {id(t): i for i, t in enumerate(topological_order(root))}
        except Exception:  # the order's own test reports its errors
            return None
        stack, seen = [root], {id(root)}
        while stack:
            node = stack.pop()
            for parent in node.inputs:
                if id(parent) not in position or id(node) not in position or position[id(parent)] > position[id(node)]:
                    return ("topological_order(root) of this graph is not a valid order (a node comes before one of "
                            "its inputs, or is missing), so backward passes some gradients on before they are "
                            "complete. Fix topological_order first (its test above shows where).")
                if id(parent) not in seen:
                    seen.add(id(parent))
                    stack.append(parent)
        return None
    return hint


def graph_check(build, leaves, names, seed=0):
    return checks.check_graph("backward", Tensor, build, leaves, names=names, seed=seed,
                              hints=[order_hint(build, leaves)])


def worked_example(x, y):
    q = x * y
    return (q + x) * q


def diamond(x, y):
    h = (x * y).exp()  # h reaches the loss along three paths
    return ((h * h + h).log() - 0.5 * x).sum()


def mlp(x, W1, W2):
    h = (x @ W1).tanh()  # h feeds the output layer and a penalty term
    out = (h @ W2).relu()  # out + out * out: where ReLU is off, the upstream grad is 1, not 0
    return (out * out + out).sum() + (h * h).sum(axis=1).sum()


def check_long_chain(seed, n):
    x_chain = Tensor(checks.randn(seed, 3), requires_grad=True)
    # y = x + x, then y = y + x again and again: after k steps y = (k + 1) x, and x fans out to every step
    y = checks.run_student("backward", checks.build_graph, "add", [x_chain], [[k, 0] for k in range(n)])[-1]
    checks.run_student("backward", lambda: y.sum().backward())
    # exact: the gradient is n + 1 added up one 1 at a time, an integer far below 2**53
    checks.assert_close(x_chain.grad, np.full(3, n + 1.0), task="backward", case=f"a chain of {n:,} Adds, y = x + ... + x",
                        name="grad of x", kind="grad", rtol=0, atol=0)


graph_check(lambda x: (x * x).sum(), [checks.randn(50, 3, 4)], names=["x"])
_, (x, y) = graph_check(worked_example, [np.array(2.0), np.array(3.0)], names=["x", "y"])
# exact: every value and gradient in the worked example is a small integer, exact in float64
assert (x.grad, y.grad) == (48.0, 28.0), "[backward] the worked example of section 2 gives x.grad = 48, y.grad = 28."
graph_check(lambda x, y: worked_example(x, y).sum(), [checks.randn(51, 2, 3), checks.randn(52, 2, 3)], ["x", "y"], 51)
graph_check(diamond, [checks.randn(53, 3, 2), checks.randn(54, 3, 2)], ["x", "y"], 53)
graph_check(mlp, [checks.randn(55, 4, 3), checks.randn(56, 3, 5), checks.randn(57, 5, 2)], ["x", "W1", "W2"], 55)
check_long_chain(59, 3_000)  # three times Python's default recursion limit: one recursive call per node fails
### BEGIN HIDDEN TESTS
graph_check(lambda x, y: worked_example(x, y).sum(), [checks.randn(151, 3, 2), checks.randn(152, 3, 2)], ["x", "y"],
            151)
graph_check(diamond, [checks.randn(153, 2, 4), checks.randn(154, 2, 4)], ["x", "y"], 153)
graph_check(mlp, [checks.randn(155, 3, 4), checks.randn(156, 4, 3), checks.randn(157, 3, 3)], ["x", "W1", "W2"], 155)
graph_check(lambda x: (x.tanh() * x - x).exp().sum(axis=0, keepdims=True).sum(), [checks.randn(158, 3, 2)], ["x"],
            158)
check_long_chain(159, 4_000)
### END HIDDEN TESTS


# %% nbgrader={"grade": true, "grade_id": "test_backward_rules", "locked": true, "points": 12, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# PyTorch's rules: implicit seed only for one-element roots, leaves accumulate across calls,
# intermediate nodes and constants get no .grad.
X0, C0 = np.array([1.0, -2.0, 3.0]), np.array([0.5, 0.5, 2.0])


def rules_graph():
    x = Tensor(X0.copy(), requires_grad=True)
    c = Tensor(C0.copy())  # a constant: requires_grad=False
    h = x * c
    loss = (h * h).sum()
    loss.backward()
    return x, c, h, loss


def reuse(x, y):
    return (x * x + (x + y)).sum()  # x: three contributions; x + y: Add sends one array to both


def check_two_calls(seed):
    """backward() twice on the same graph: every leaf's .grad must be twice one call's."""
    x0, y0 = checks.randn(seed, 2, 3), checks.randn(seed + 1, 2, 3)
    out, leaves = checks.check_graph("backward", Tensor, reuse, [x0, y0], names=["x", "y"], seed=seed)
    first = [2 * x0 + 1, np.ones_like(y0)]  # one call's gradients of sum(x * x + (x + y)), from the math
    checks.run_student("backward", out.backward)
    for t, g, name in zip(leaves, first, ["x", "y"]):
        # 2 * g: the same sums once more, up to a few roundings (the float64 default)
        checks.assert_close(t.grad, 2 * g, task="backward", case="a second backward() on the same graph",
                            name=f"grad of {name} (twice one call's)", kind="grad", hints=[checks.added_not_replaced])


def check_explicit_seed(seed):
    """y.backward(G) on a non-scalar y must equal backward of (y * G).sum()."""
    x0, G = checks.randn(seed, 2, 3), checks.randn(seed + 1, 2, 3)
    checks.check_graph("backward", Tensor, lambda x, g: ((x * x).tanh() * g).sum(), [x0, G],
                                       names=["x", "G"], seed=seed)

    def explicit_seed():
        x = Tensor(x0.copy(), requires_grad=True)
        (x * x).tanh().backward(G.copy())
        return x

    # d/dx sum(tanh(x^2) * G) = G * (1 - tanh(x^2)^2) * 2 x, from the math
    expected = G * (1 - np.tanh(x0 * x0) ** 2) * 2 * x0
    checks.assert_close(checks.run_student("backward", explicit_seed).grad, expected, task="backward",
                        case="y.backward(G) on a non-scalar y", name="grad of x", kind="grad")


def one_by_one(x, w):
    h = x @ w
    return h.tanh() * h


x, c, h, loss = checks.run_student("backward", rules_graph)
assert h.grad is None, ("[backward] the intermediate node h = x * c has a .grad after backward(). Only leaves keep "
                        "their gradient (torch does the same unless asked with h.retain_grad()).")
assert loss.grad is None, "[backward] the root is not a leaf: it should keep no .grad."
assert c.grad is None, "[backward] c was created with requires_grad=False, but it received a .grad."
checks.assert_close(x.grad, 2 * X0 * C0**2, task="backward", case="loss = sum((x * c)**2)",
                    name="grad of x (2 x c^2)", kind="grad")
raised = checks.expect_raises("backward", RuntimeError, backward, checks.run_student("backward", lambda: x * x))
check_two_calls(60)
check_explicit_seed(62)
# A root with one element that is not 0-d, shape (1, 1): torch seeds it with ones.
checks.check_graph("backward", Tensor, one_by_one, [checks.randn(64, 1, 3), checks.randn(65, 3, 1)],
                   names=["x", "w"], seed=64)
### BEGIN HIDDEN TESTS
check_two_calls(160)
check_explicit_seed(162)
checks.check_graph("backward", Tensor, one_by_one, [checks.randn(164, 1, 4), checks.randn(165, 4, 1)],
                   names=["x", "w"], seed=164)
x22 = Tensor(checks.randn(166, 2, 2), requires_grad=True)
raised = checks.expect_raises("backward", RuntimeError, backward,
                              checks.run_student("backward", lambda: x22.tanh() * x22))
### END HIDDEN TESTS


# %% [markdown]
# ### Concept check `fan_out`
#
# Count the separate gradient terms that `backward` adds into the entry of `x` (each is one `+=`).
# Set each variable to a whole number.
#
# - `square_terms`: for `y = x * x`, how many terms does the `Mul` node send to `x`?
# - `cube_terms`: for `y = (x * x) * x`, how many terms does `x` receive in total?

# %% nbgrader={"grade": false, "grade_id": "fan_out", "locked": false, "schema_version": 3, "solution": true, "task": false}
square_terms = None  # terms that Mul(x, x) sends to x
cube_terms = None    # terms that x receives in (x * x) * x
### BEGIN SOLUTION
square_terms = 2
cube_terms = 3
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_fan_out", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# Stored as hashes (checks.answer_digest), so that the cell does not print the answers.
square_hint, cube_hint = ("Mul has two inputs, and in x * x both of them are x.",
                          "count the input slots holding x in both Mul nodes.")
checks.check_hash("fan_out", "square_terms", square_terms,
                  "d4735e3a265e16eee03f59718b9b5d03019c07d8b6c51f90da3a666eec13ab35", hint=square_hint)
checks.check_hash("fan_out", "cube_terms", cube_terms,
                  "4e07408562bedb8b60ce05c1decfe3ad16b72230967de01f640b7e4729b49fce", hint=cube_hint)
### BEGIN HIDDEN TESTS
# A node sends one term per input slot: Mul(x, x) fills both slots with x; Mul(x * x, x) fills one.
inner_slots, outer_slots = 2, 1
checks.check_value("fan_out", "square_terms", square_terms, inner_slots, hint=square_hint)
checks.check_value("fan_out", "cube_terms", cube_terms, inner_slots + outer_slots, hint=cube_hint)
### END HIDDEN TESTS

# %% [markdown]
# ### Explain `explain_accumulate`
#
# (a) Our `backward` adds every incoming gradient into a running sum. Take $y = x \cdot x \cdot x$
# computed as `(x * x) * x` at $x = 2$: what does a `backward` that *assigns* each incoming gradient
# (`=` instead of `+=`) give for `x.grad`, and what is the right value? Count the terms `x`
# receives, and say which node sends each.
#
# (b) Leaves also add to their `.grad` across `backward` calls instead of replacing it. Describe a
# situation in training where this is exactly what we want, and say what a training loop has to do
# when it is not.
#
# (Graded by hand; 5 points: (a) 3, (b) 2.)

# %% [markdown] nbgrader={"grade": true, "grade_id": "explain_accumulate", "locked": false, "points": 5, "schema_version": 3, "solution": true, "task": false}
# **Model answer.**
#
# *(a) Assignment loses paths (3 points).* The right value is $dy/dx = 3x^2 = 12$. With
# $s = x \cdot x$ and $y = s \cdot x$, the outer `Mul` sends $\bar y \cdot s = 4$ to `x` and
# $\bar y \cdot x = 2$ to `s`; then `s` sends $2 \cdot x = 4$ to `x` twice, once per input slot.
# The three terms $4 + 4 + 4 = 12$ are one per path from `x` to `y`, and the chain rule sums them.
# With assignment each term overwrites the previous one, so `x.grad` is a single term, $4 = x^2$, a
# third of the true value. (Here every term is $x^2$, so the order in which they arrive does not
# matter; in general assignment keeps whichever term came last.)
# Any node with fan-out (a diamond, a shared weight, a residual connection) would keep only the
# contribution of whichever path was processed last.
#
# *(b) Gradient accumulation (2 points).* When a batch of 256 examples does not fit in memory, we
# split it into 4 micro-batches of 64 and call `backward` on each micro-batch's loss (divided by
# 4), so `.grad` after the 4 calls is the gradient of the full-batch mean loss, and one optimizer
# step follows. When accumulation is not wanted, which is the usual case of one backward per step,
# the loop must reset the gradients before each backward (`optimizer.zero_grad()`); otherwise
# every step would also apply the gradients of all the previous steps.

# %% [markdown]
# ## 7. Figure: watching reverse accumulation
#
# The figure draws the computation graph of a small expression of scalars. Each box shows a node's
# name, the operation that computed it, its value, and the gradient it has received so far. The
# slider steps through the sweep **as our `backward` performs it**: step 0 is the seed, and each
# later step is one call of a node's `backward` (highlighted), with the gradients it sends written
# on the edges to its inputs. Watch `q` in the worked example receive 8 and then 6, and `x` in
# `x * x` receive two terms from the same node. In `log(e^x + e^y)` the two leaf gradients are the
# softmax of $(x, y)$ from unit 1.2, and add up to 1. The figure works once the operations are
# written, and shows gradients once `topological_order` and `backward` are.

# %% nbgrader={"grade": false, "grade_id": "figure", "locked": true, "schema_version": 3, "solution": false, "task": false}
import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display


def _worked_example():
    x, y = Tensor(2.0, requires_grad=True), Tensor(3.0, requires_grad=True)
    q = x * y
    r = q + x
    return {"x": x, "y": y, "q": q, "r": r, "L": r * q}


def _square():
    x = Tensor(3.0, requires_grad=True)
    return {"x": x, "y": x * x}


def _neuron():
    w, x, b = Tensor(0.5, requires_grad=True), Tensor(2.0, requires_grad=True), Tensor(-0.25, requires_grad=True)
    a = w * x
    z = a + b
    h = z.tanh()
    return {"w": w, "x": x, "b": b, "a": a, "z": z, "h": h, "L": h * z}


def _log_sum_exp():
    x, y = Tensor(1.0, requires_grad=True), Tensor(-0.5, requires_grad=True)
    ex, ey = x.exp(), y.exp()
    s = ex + ey
    return {"x": x, "y": y, "e^x": ex, "e^y": ey, "s": s, "L": s.log()}


EXAMPLES = {  # each builder returns its nodes by name, in the order they were created
    "worked example: q = x*y, r = q + x, L = r*q": _worked_example,
    "x * x": _square,
    "neuron: a = w*x, z = a + b, L = tanh(z) * z": _neuron,
    "log(e^x + e^y)": _log_sum_exp,
}


def replay(build):
    """Build an example and run our backward on it, recording each Function.backward call.

    Returns (nodes, steps, note): steps are (node, grad received, grads sent) in the order our
    backward made the calls; note says what is still to be written, if anything.
    """
    try:
        nodes = build()
    except NotImplementedError:
        return None, [], "Write the operations (Exercises add_mul_neg to tanh_relu) to see this graph."
    by_ctx = {id(t.ctx): t for t in nodes.values() if t.ctx is not None}
    classes = {t.fn for t in nodes.values() if t.fn is not None}
    own = {fn: fn.__dict__.get("backward") for fn in classes}
    steps = []

    def watch(inner):
        def watched(ctx, grad):
            sent = inner(ctx, grad)
            steps.append((by_ctx[id(ctx)], grad, sent if isinstance(sent, tuple) else (sent,)))
            return sent
        return staticmethod(watched)

    for fn in classes:  # watch each backward during this one call, then put the originals back
        fn.backward = watch(fn.backward)
    try:
        backward(list(nodes.values())[-1])
    except NotImplementedError:
        return nodes, [], "Write topological_order and backward to see the gradients flow."
    finally:
        for fn, original in own.items():
            if original is None:
                del fn.backward
            else:
                fn.backward = original
    return nodes, steps, None


def draw(nodes, steps, note, step):
    names = {id(t): name for name, t in nodes.items()}
    depth = {}
    for t in nodes.values():  # creation order is a topological order
        depth[id(t)] = max((depth[id(p)] + 1 for p in t.inputs), default=0)
    layers = {}
    for t in nodes.values():
        layers.setdefault(depth[id(t)], []).append(t)
    pos = {id(t): (d, (len(ts) - 1) / 2 - i) for d, ts in layers.items() for i, t in enumerate(ts)}
    root = list(nodes.values())[-1]
    received = {id(root): 1.0} if steps else {}
    sent_on = {}
    for node, _, sent in steps[:step]:
        for j, (parent, g) in enumerate(zip(node.inputs, sent)):
            if parent.requires_grad:
                received[id(parent)] = received.get(id(parent), 0.0) + float(np.sum(g))
                sent_on[(id(node), j)] = float(np.sum(g))
    current = steps[step - 1][0] if step else None
    done = {id(n) for n, _, _ in steps[:step]}

    fig, ax = plt.subplots(figsize=(10, 4.2))
    half_height = max(len(ts) for ts in layers.values()) / 2 + 0.3
    ax.set_xlim(-0.6, max(layers) + 0.6)
    ax.set_ylim(-half_height, half_height)
    ax.axis("off")
    to_screen = ax.transData.transform
    for t in nodes.values():
        for j, p in enumerate(t.inputs):
            copies = [k for k, other in enumerate(t.inputs) if other is p]
            rad = 0.35 * (copies.index(j) - (len(copies) - 1) / 2)  # x * x: two curved edges
            if depth[id(t)] - depth[id(p)] > 1:  # an edge that skips a layer bends away from the middle row
                rad += -0.3 if pos[id(p)][1] + pos[id(t)][1] > 0 else 0.3
            ax.annotate("", xy=pos[id(t)], xytext=pos[id(p)],
                        arrowprops=dict(arrowstyle="-|>", color="#555555", shrinkA=34, shrinkB=34,
                                        connectionstyle=f"arc3,rad={rad}"))
            if (id(t), j) in sent_on:  # label the middle of the arc, which arc3 bends in screen space
                (x0, y0), (x1, y1) = to_screen(pos[id(p)]), to_screen(pos[id(t)])
                middle = ((x0 + x1) / 2 + rad * (y1 - y0) / 2, (y0 + y1) / 2 - rad * (x1 - x0) / 2)
                ax.text(*ax.transData.inverted().transform(middle), f"{sent_on[(id(t), j)]:.4g}",
                        color="#b00020", fontsize=9, ha="center", va="center",
                        bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none"))
    for t in nodes.values():
        g = received.get(id(t))
        label = (f"{names[id(t)]} = {t.fn.__name__ if t.fn else 'leaf'}\n"
                 f"data {float(t.data):.4g}\ngrad {'-' if g is None else f'{g:.4g}'}")
        colour = "#f4a261" if t is current else "#a8dadc" if id(t) in done else "#e9ecef"
        ax.text(*pos[id(t)], label, ha="center", va="center", fontsize=9, family="monospace",
                bbox=dict(boxstyle="round,pad=0.4", fc=colour, ec="#333333"))
    if note:
        title = note
    elif step == 0:
        title = f"step 0: the seed, {names[id(root)]} receives grad 1"
    else:
        node, grad, sent = steps[step - 1]
        parts = ", ".join(f"{float(np.sum(g)):.4g} to {names.get(id(p), 'a constant')}"
                          for p, g in zip(node.inputs, sent) if p.requires_grad)
        title = (f"step {step} of {len(steps)}: {names[id(node)]}.fn.backward receives grad "
                 f"{float(np.sum(grad)):.4g} and sends {parts}")
    ax.set_title(title, fontsize=10)
    plt.show()


example = widgets.Dropdown(options=list(EXAMPLES), description="expression", layout=widgets.Layout(width="520px"))
step_slider = widgets.IntSlider(min=0, max=0, description="step")
canvas = widgets.Output()
state = {}


def redraw(*_):
    with canvas:
        canvas.clear_output(wait=True)
        if state["nodes"] is None:
            print(state["note"])
        else:
            draw(state["nodes"], state["steps"], state["note"], step_slider.value)


def choose(*_):
    state["nodes"], state["steps"], state["note"] = replay(EXAMPLES[example.value])
    step_slider.value, step_slider.max = 0, len(state["steps"])
    redraw()


example.observe(choose, names="value")
step_slider.observe(redraw, names="value")
choose()
display(widgets.VBox([example, step_slider, canvas]))

# %% [markdown]
# ## 8. Putting it together
#
# Our engine now trains a network. The locked cell below builds the two-layer ReLU MLP of unit 1.1
# and the mean cross-entropy of unit 1.2 out of our operations, on the four XOR clusters of unit
# 1.1's figure, and takes a few steps of gradient descent with the gradients that `backward`
# leaves in `.grad`. Our operations only take operands of the same shape (broadcasting is unit
# 1.4), so the biases ride along as an extra row of each weight matrix, multiplied by a column of
# ones, and the loss shifts the logits by their row maximum as a constant: by unit 1.2's
# `explain_max_shift`, that changes neither the loss nor its gradient.
#
# Before the first step, the cell compares the engine's gradients with the ones we derived by
# hand in units 1.1 and 1.2: `cross_entropy_backward` for the logits, then `linear_backward` and
# `relu_backward` down the layers (given here in their reference form). They agree to rounding:
# reverse accumulation is those hand derivations, chained for us.

# %% nbgrader={"grade": false, "grade_id": "putting_it_together", "locked": true, "schema_version": 3, "solution": false, "task": false}
def linear_backward(x, W, grad_out):  # unit 1.1, for 2-D x
    return grad_out @ W, grad_out.T @ x, grad_out.sum(axis=0)


def relu_backward(x, grad_out):  # unit 1.1
    return np.where(x > 0, grad_out, 0.0)


def cross_entropy_backward(logits, target):  # unit 1.2, reduction="mean", no ignored targets
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(target)), target] -= 1
    return p / len(target)


def with_ones(a):
    """a with a column of ones appended: x @ [[W.T], [b]] = linear(x, W, b)."""
    return np.concatenate([a, np.ones((len(a), 1))], axis=1)


_rng = np.random.default_rng(0)
centers = np.array([[1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]])
X = np.concatenate([c + 0.3 * _rng.standard_normal((10, 2)) for c in centers])  # (40, 2)
t = np.repeat([0, 0, 1, 1], 10)  # the XOR classes
N, D, H, C = len(X), 2, 8, 2
W1, b1 = _rng.standard_normal((H, D)), np.zeros(H)
W2, b2 = 0.5 * _rng.standard_normal((C, H)), np.zeros(C)
onehot = np.eye(C)[t]
keep_h = np.eye(H, H + 1)  # h @ keep_h puts h in the first H columns; the last column gets the ones
ones_h = np.zeros((N, H + 1))
ones_h[:, -1] = 1.0


def engine_loss(V1, V2):
    """Mean cross-entropy of the MLP, built from our operations; V1 = [W1 | b1].T, V2 = [W2 | b2].T."""
    h = (Tensor(with_ones(X)) @ V1).relu()  # (N, H): the hidden layer of unit 1.1
    z = h @ keep_h + ones_h  # (N, H + 1): h with a column of ones
    logits = z @ V2  # (N, C)
    s = logits - logits.data.max(axis=1, keepdims=True).repeat(C, axis=1)  # a constant shift
    lse = s.exp().sum(axis=1).log()  # (N,)
    picked = (s * onehot).sum(axis=1)  # (N,): the true class's shifted logit
    return (lse - picked).sum() * (1.0 / N), logits


with checks.when_written("this example"):
    V1 = Tensor(np.vstack([W1.T, b1]), requires_grad=True)
    V2 = Tensor(np.vstack([W2.T, b2]), requires_grad=True)
    loss, logits = engine_loss(V1, V2)
    loss.backward()
    pre = with_ones(X) @ V1.data
    grad_h, grad_W2, grad_b2 = linear_backward(np.maximum(pre, 0), W2, cross_entropy_backward(logits.data, t))
    _, grad_W1, grad_b1 = linear_backward(X, W1, relu_backward(pre, grad_h))
    by_hand = [np.vstack([grad_W1.T, grad_b1]), np.vstack([grad_W2.T, grad_b2])]
    gaps = [float(np.max(np.abs(V.grad - g))) for V, g in zip([V1, V2], by_hand)]
    print(f"engine vs hand-derived gradients: largest difference {gaps[0]:.1e} (layer 1), "
          f"{gaps[1]:.1e} (layer 2)")
    for step in range(30):
        if step % 5 == 0:
            accuracy = np.mean(logits.data.argmax(axis=1) == t)
            print(f"step {step:2d}: loss {float(loss.data):.4f}, accuracy {accuracy:.0%}")
        for V in (V1, V2):
            V.data -= 0.5 * V.grad  # one step of gradient descent
            V.grad = None  # zero_grad: the next backward would add to it
        loss, logits = engine_loss(V1, V2)
        loss.backward()
    print(f"step 30: loss {float(loss.data):.4f}, accuracy {np.mean(logits.data.argmax(axis=1) == t):.0%}")

# %% [markdown]
# ## Summary
#
# - A computation graph records each value and the values it was computed from. Leaves are the
#   values we create; the root is the value we differentiate.
# - Each operation knows only its own vector-Jacobian product, and saves from its forward pass just
#   what that product needs: inputs, an output, a shape or a mask.
# - Reverse accumulation visits the nodes in reverse topological order, so that each node has
#   received the sum of the gradients from all of its consumers before it passes its own on. One
#   reverse pass gives the whole gradient of a scalar; forward mode would need one pass per input.
# - We follow PyTorch's rules: the implicit seed only for one-element roots, gradients kept on
#   leaves only, and accumulated across calls.
#
# Next, in unit 1.4, the operands of `Add` and `Mul` may have different shapes. Broadcasting copies
# values in the forward pass, so by the same reasoning as `Sum` here, the backward pass has to sum
# gradients over the broadcast axes.

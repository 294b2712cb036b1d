# %% [markdown]
# # 1.1 Affine maps, nonlinearities and logits
#
# A neural network for classification takes an input vector, applies a few layers, and returns
# one real number per class: the **logits**. In this unit we build that path with NumPy, one
# piece at a time. An affine layer mixes the inputs; a nonlinearity bends the result; two layers
# make a multilayer perceptron (MLP) whose last layer outputs logits. Then we derive, by hand,
# how a gradient flows back through each piece, the rules that reverse-mode differentiation
# (units 1.3 and 1.4) will chain together automatically. Every function is checked against
# PyTorch, and every gradient also against finite differences.
#
# Unit 1.2 takes the logits from here and turns them into probabilities and a loss.
#
# ## Learning goals
#
# After this unit we can:
#
# 1. write an affine layer $y = x W^\top + b$ for any number of leading batch dimensions, with
#    PyTorch's weight layout `(out_features, in_features)`;
# 2. implement ReLU, sigmoid, SiLU and the tanh form of GELU, and keep sigmoid and SiLU finite and
#    free of overflow warnings for inputs as large as $10^4$;
# 3. say what a logit is, how it relates to a probability, and why the last layer of a classifier
#    has no activation;
# 4. derive the backward pass of an affine layer and of elementwise nonlinearities (ReLU,
#    sigmoid, tanh, SiLU and the tanh form of GELU) as vector-Jacobian products, including the sum
#    over batch dimensions for shared parameters;
# 5. prove that a stack of affine layers without nonlinearities collapses to one affine layer;
# 6. count the parameters of an MLP, as `torch.nn.Linear` allocates them.
#
# ## Readings
#
# - **Understanding Deep Learning** (Prince), chapter 3, *Shallow neural networks* (3.1 the
#   neural network example with ReLU hidden units, 3.2 the universal approximation theorem, 3.3
#   multivariate inputs and outputs, 3.5 terminology: pre-activations, activations, hidden
#   units), and chapter 4, *Deep neural networks* (4.1 composing networks, 4.3 the matrix notation
#   $h_k = a[\beta_k + \Omega_k h_{k-1}]$, 4.4 counting parameters, shallow against deep). Section
#   3.1 and figure 3.13 also survey the other activation functions. Chapter 7.3-7.4 derives the
#   backward pass of the same networks.
# - **Dive into Deep Learning**, 5.1 *Multilayer Perceptrons* (5.1.1 hidden layers, and why a
#   stack of affine layers alone is still affine; 5.1.2 activation functions: ReLU, sigmoid,
#   tanh, with their derivatives) and 5.3 *Forward Propagation, Backward Propagation, and
#   Computational Graphs*.
# - **PyTorch documentation**: `torch.nn.Linear` and `torch.nn.functional.linear` (the weight is
#   stored as `(out_features, in_features)` and the layer computes $y = x A^\top + b$),
#   `torch.nn.ReLU`, `torch.nn.Sigmoid`, `torch.nn.SiLU`, `torch.nn.GELU` (its `approximate="tanh"`
#   option) and `torch.nn.Module.parameters`.
# - **External drills** (the course outline's "external-tests"): the derivative and operator
#   problems of TensorTonic's *Build Micrograd from Scratch* study plan (its first problems:
#   derivatives of elementwise functions, then the affine layer), solved in a blank file with their
#   local tests kept as evidence.
# - Optional: Hendrycks and Gimpel, *Gaussian Error Linear Units (GELUs)* (2016), for the tanh
#   approximation; Elfwing, Uchibe and Doya (2018) and Ramachandran, Zoph and Le (2017, "Swish")
#   for SiLU.
#
# ## How this notebook works
#
# Each exercise has a heading with its task ID, the math, a worked example, a cell for our code
# and a test cell. The test cells run small visible checks; the grader adds hidden checks that
# compare our functions with PyTorch on seeded random inputs, in float32 and float64, with large
# values, size-1 and 0-d shapes and non-contiguous arrays, and every gradient also with central
# finite differences. Three rules hold throughout:
#
# - **NumPy only.** A solution that calls torch earns no points for that exercise.
# - **Same dtype as torch.** float32 in, float32 out; float64 in, float64 out.
# - **No warnings.** A NumPy `RuntimeWarning` (overflow, invalid value) fails the check: nbgrader
#   gives no points to a test cell that writes to stderr, and a warning nearly always means an
#   `inf` or a `nan` somewhere.
#
# | part | task | points |
# |---|---|---|
# | 1 | `linear` | 6 |
# | 2 | `relu`, `sigmoid`, `silu`, `gelu_tanh` | 4 + 7 + 5 + 5 |
# | 3 | `mlp_logits` | 6 |
# | 3 | concept check `logits_probabilities` | 4 |
# | 4 | `linear_backward` | 12 |
# | 4 | `relu_backward`, `sigmoid_backward`, `tanh_backward` | 5 + 6 + 4 |
# | 4 | `silu_backward`, `gelu_tanh_backward` | 5 + 6 |
# | 5 | `collapse_linear_stack` | 6 |
# | 5 | `explain_linear_stack` (written, graded by hand) | 12 |
# | 6 | `mlp_parameter_count` | 4 |
# | 6 | concept check `linear_params` | 3 |
# | | **total** | **100** |

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import numpy as np

# The checks compare our code with PyTorch, which loads (a few seconds) when the first test cell runs.
from autograder.inside import checks

# %% [markdown]
# ## 1. Affine maps
#
# A **linear layer** (PyTorch's name; mathematically an *affine* map) with `in` inputs and `out`
# outputs holds a weight matrix $W \in \mathbb{R}^{\text{out} \times \text{in}}$ and a bias
# $b \in \mathbb{R}^{\text{out}}$. For one input vector $x \in \mathbb{R}^{\text{in}}$, output
# $o$ is a weighted sum of the inputs plus an offset,
#
# $$
# y_o = \sum_{i=1}^{\text{in}} W_{o i}\, x_i + b_o, \qquad\text{that is}\qquad y = W x + b .
# $$
#
# Each row $W_{o,:}$ holds the weights of one output unit. This is UDL's
# $\beta + \Omega x$ and D2L's $\mathbf{x}\mathbf{W} + \mathbf{b}$, with the weight stored the
# other way round: PyTorch's `nn.Linear(in_features, out_features)` keeps its weight as
# `(out_features, in_features)`, and we follow PyTorch.
#
# **Batches.** We never push one vector through a network at a time. With inputs stacked as the
# rows of $X \in \mathbb{R}^{N \times \text{in}}$, the outputs are the rows of
#
# $$
# Y = X W^\top + b ,
# $$
#
# where $b$ is added to every row (broadcasting). PyTorch's `F.linear` allows any number of
# leading batch axes: $x$ of shape `(..., in)` gives $y$ of shape `(..., out)`, and every vector
# along the last axis goes through the same layer. A sequence model uses `(batch, time, in)`,
# for example. NumPy's `@` (`np.matmul`) already does this: it treats all axes but the last two
# as a stack and broadcasts the matrix $W^\top$ against them, and for a 1-D $x$ it computes a
# vector-matrix product. `W.T` is a transposed *view* of `W`, so nothing is copied.
#
# **Shapes to keep straight.** `x @ W` would multiply the inputs by the wrong axis of $W$: it
# fails when `in != out`, and for a square $W$ it silently computes a different layer. The
# output's last axis has size `out`, the number of *rows* of $W$.
#
# **Worked example.** With
# $W = \begin{pmatrix} 1 & -1 \\ 0.5 & 2 \\ 0 & 1 \end{pmatrix}$ (3 outputs, 2 inputs),
# $b = (0.5, 0, -1)$ and $x = (1, 2)$:
# $y = (1 - 2 + 0.5,\ 0.5 + 4 + 0,\ 0 + 2 - 1) = (-0.5, 4.5, 1)$. Stacking the same $x$ twice as
# a `(2, 2)` batch gives two identical rows $(-0.5, 4.5, 1)$.
#
# ### Exercise `linear`
#
# Write `linear(x, W, b=None)`, like `torch.nn.functional.linear(x, W, b)`.

# %% nbgrader={"grade": false, "grade_id": "linear", "locked": false, "schema_version": 3, "solution": true, "task": false}
def linear(x, W, b=None):
    """The affine map y = x W^T + b, like torch.nn.functional.linear.

    x : float array of shape (..., in): any number of leading batch axes, or just (in,).
    W : float array of shape (out, in), the weight (PyTorch's layout).
    b : float array of shape (out,), or None for no bias.

    Returns an array of shape (..., out) and x's dtype.
    """
    ### BEGIN SOLUTION
    y = np.matmul(x, np.swapaxes(W, -1, -2))  # (..., in) @ (in, out): every leading axis is a batch axis
    return y if b is None else y + b
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_linear", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
W = np.array([[1.0, -1.0], [0.5, 2.0], [0.0, 1.0]])
b = np.array([0.5, 0.0, -1.0])
x = np.array([1.0, 2.0])
checks.assert_close(checks.run_student("linear", linear, x.copy(), W.copy(), b.copy()), np.array([-0.5, 4.5, 1.0]),
                    task="linear",
                    case="worked example")
checks.against_torch("linear", linear, "linear", [
    checks.case("worked example", x, W, b),
    checks.case("worked example, a batch of two", np.stack([x, x]), W, b),
    checks.case("worked example, no bias", x, W),
])


def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    cases = []
    for dt in (np.float64, np.float32):
        cases += [
            checks.case("a batch (N, in)", checks.randn(s + 1, 6, 4, dtype=dt), checks.randn(s + 2, 5, 4, dtype=dt),
                        checks.randn(s + 3, 5, dtype=dt)),
            checks.case("no bias", checks.randn(s + 4, 6, 4, dtype=dt), checks.randn(s + 5, 5, 4, dtype=dt)),
            checks.case("square W (in = out)", checks.randn(s + 6, 3, 4, dtype=dt), checks.randn(s + 7, 4, 4, dtype=dt),
                        checks.randn(s + 8, 4, dtype=dt)),
            checks.case("1-D x", checks.randn(s + 9, 4, dtype=dt), checks.randn(s + 10, 3, 4, dtype=dt), checks.randn(s + 11, 3, dtype=dt)),
            checks.case("3-D x (batch, time, in)", checks.randn(s + 12, 2, 3, 4, dtype=dt), checks.randn(s + 13, 5, 4, dtype=dt),
                        checks.randn(s + 14, 5, dtype=dt)),
            checks.case("4-D x with a size-1 axis", checks.randn(s + 15, 2, 1, 3, 4, dtype=dt), checks.randn(s + 16, 2, 4, dtype=dt),
                        checks.randn(s + 17, 2, dtype=dt)),
            checks.case("size-1 everything", checks.randn(s + 18, 1, 1, dtype=dt), checks.randn(s + 19, 1, 1, dtype=dt),
                        checks.randn(s + 20, 1, dtype=dt)),
            checks.case("one output", checks.randn(s + 21, 5, 3, dtype=dt), checks.randn(s + 22, 1, 3, dtype=dt),
                        checks.randn(s + 23, 1, dtype=dt)),
            checks.case("non-contiguous x (sliced)", checks.strided(checks.randn(s + 24, 6, 4, dtype=dt)),
                        checks.randn(s + 25, 5, 4, dtype=dt), checks.randn(s + 26, 5, dtype=dt)),
            checks.case("non-contiguous W (transposed)", checks.randn(s + 27, 6, 4, dtype=dt),
                        checks.randn(s + 28, 4, 5, dtype=dt).T, checks.strided(checks.randn(s + 29, 5, dtype=dt))),
        ]
    checks.against_torch("linear", linear, "linear", cases)


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ## 2. Nonlinearities
#
# An **activation function** $\phi$ is applied elementwise to the output of an affine layer (its
# *pre-activation*). Without it, part 5 shows, any number of layers adds up to a single affine
# map. Four activations cover most networks in use.
#
# **ReLU**, $\mathrm{relu}(x) = \max(x, 0)$, is the default of UDL chapter 3: it keeps positive
# inputs and zeroes negative ones, so a network of ReLUs is piecewise linear. Its derivative is
# 1 for $x > 0$ and 0 for $x < 0$; at the kink $x = 0$ PyTorch uses 0 (part 4).
#
# **Worked example.** $\mathrm{relu}(-2, -0.5, 0, 0.5, 2) = (0, 0, 0, 0.5, 2)$.
#
# One practical point that the tests check: our functions must **return a new array** and leave
# their input alone. `x[x < 0] = 0` changes the caller's array in place: in a network, that array
# is the pre-activation that the backward pass needs later.
#
# ### Exercise `relu`
#
# Write `relu(x)`, like `torch.relu(x)`.

# %% nbgrader={"grade": false, "grade_id": "relu", "locked": false, "schema_version": 3, "solution": true, "task": false}
def relu(x):
    """max(x, 0) elementwise, like torch.relu.

    x : float array of any shape (including 0-d), float32 or float64; it may hold +-inf.

    Returns a new array of x's shape and dtype; x itself is not modified.
    """
    ### BEGIN SOLUTION
    return np.maximum(x, 0)  # a Python 0 is "weak": float32 stays float32
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_relu", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def check_input_kept(task, fn, *args):
    """Call fn and check that it did not modify any of its array arguments."""
    before = [a.copy() for a in args]
    np.asarray(checks.run_student(task, fn, *args))  # (a result that computes when read does so here)
    for a, a0 in zip(args, before):
        assert np.array_equal(a, a0, equal_nan=True), (
            f"[{task}] your function changed its input array in place; compute a new array instead "
            "(np.maximum, np.where), so that the caller's array keeps its values.")


x = np.array([-2.0, -0.5, 0.0, 0.5, 2.0])
checks.against_torch("relu", relu, "relu", [checks.case("worked example", x)])
check_input_kept("relu", relu, x.copy())


def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    cases = []
    for dt in (np.float64, np.float32):
        cases += [
            checks.case("random", checks.randn(s + 31, 5, 7, dtype=dt, scale=3.0)),
            checks.case("3-D", checks.randn(s + 32, 2, 3, 4, dtype=dt)),
            checks.case("0-d, negative", np.asarray(-1.5, dtype=dt)),
            checks.case("0-d, positive", np.asarray(2.5, dtype=dt)),
            checks.case("size-1 axes", checks.randn(s + 33, 1, 4, 1, dtype=dt)),
            checks.case("exact zeros, large values and infinities",
                        np.array([0.0, -0.0, 1e4, -1e4, 3e38, -3e38, np.inf, -np.inf], dtype=dt)),
            checks.case("non-contiguous (sliced)", checks.strided(checks.randn(s + 34, 4, 6, dtype=dt))),
            checks.case("non-contiguous (transposed)", checks.randn(s + 35, 6, 4, dtype=dt).T),
        ]
    checks.against_torch("relu", relu, "relu", cases)
    check_input_kept("relu", relu, checks.randn(s + 36, 4, 5))
    check_input_kept("relu", relu, np.asarray(-3.0, dtype=np.float32))


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ### The logistic sigmoid, and how to compute it without overflow
#
# The **sigmoid** squashes any real number into $(0, 1)$:
#
# $$
# \sigma(x) = \frac{1}{1 + e^{-x}} .
# $$
#
# It is the probability of a binary classifier with logit $x$ (part 3), and the gate of LSTMs and
# of SiLU. Two identities are worth knowing: $\sigma(-x) = 1 - \sigma(x)$, and
# $\sigma(x) = \tfrac12\big(1 + \tanh(x/2)\big)$.
#
# **The textbook formula overflows.** For $x = -10^4$, $e^{-x} = e^{10^4}$ is far beyond the
# largest float64 ($e^{709.8}$), let alone float32 ($e^{88.7}$). NumPy returns `inf` with an
# overflow warning, and $1 / (1 + \infty) = 0$ happens to be right, but the warning fails the
# test, and in other formulas the same `inf` turns into `nan`.
#
# **The stable form.** For $x \ge 0$, $e^{-x} \in (0, 1]$ cannot overflow. For $x < 0$ we
# multiply numerator and denominator by $e^{x}$:
#
# $$
# \sigma(x) = \frac{1}{1 + e^{-x}} = \frac{e^{x}}{e^{x} + 1} .
# $$
#
# Both branches only ever exponentiate a number $\le 0$. With $e = e^{-|x|} \in (0, 1]$:
#
# $$
# \sigma(x) = \begin{cases} \dfrac{1}{1 + e} & x \ge 0 \\[2ex] \dfrac{e}{1 + e} & x < 0 . \end{cases}
# $$
#
# A trap: `np.where(cond, a, b)` evaluates **both** `a` and `b` for every element before choosing.
# `np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))` still computes `np.exp(-x)`
# for $x = -10^4$ and warns. Computing $e = e^{-|x|}$ once, as above, avoids this. (Silencing the
# warning with `np.errstate` also works here, but it is better to never create the `inf`.)
#
# **Worked example.** $\sigma(0) = 0.5$, $\sigma(2) = 1 / (1 + e^{-2}) = 0.8808$,
# $\sigma(-2) = e^{-2} / (1 + e^{-2}) = 0.1192 = 1 - \sigma(2)$. In float32, $\sigma(10^4) = 1$
# and $\sigma(-10^4) = 0$, with no warning.
#
# ### Exercise `sigmoid`
#
# Write `sigmoid(x)`, like `torch.sigmoid(x)`, stable for $|x|$ up to $10^4$ in float32 and
# float64.

# %% nbgrader={"grade": false, "grade_id": "sigmoid", "locked": false, "schema_version": 3, "solution": true, "task": false}
def sigmoid(x):
    """The logistic function 1 / (1 + exp(-x)), like torch.sigmoid.

    x : float array of any shape (including 0-d), float32 or float64.

    Returns an array of x's shape and dtype, finite for every finite x (|x| up to 1e4 and beyond),
    without any NumPy warning.
    """
    ### BEGIN SOLUTION
    e = np.exp(-np.abs(x))  # in (0, 1]: never overflows
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sigmoid", "locked": true, "points": 7, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
x = np.array([-2.0, 0.0, 2.0])
big32 = np.array([-1e4, -100.0, -20.0, 20.0, 100.0, 1e4], dtype=np.float32)
checks.against_torch("sigmoid", sigmoid, "sigmoid", [
    checks.case("worked example", x),
    checks.case("|x| up to 1e4 in float32 (exponentiate only -|x|, which is <= 0)", big32),
])


def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    extreme = [-1e4, -1e3, -745.0, -710.0, -105.0, -88.8, -50.0, -30.0, -17.0, -1e-8, 0.0, 1e-8, 17.0, 30.0, 50.0,
               88.8, 105.0, 710.0, 745.0, 1e3, 1e4]
    cases = []
    for dt in (np.float64, np.float32):
        cases += [
            checks.case("random", checks.randn(s + 41, 5, 7, dtype=dt, scale=3.0)),
            checks.case("3-D", checks.randn(s + 42, 2, 3, 4, dtype=dt, scale=5.0)),
            checks.case("0-d, negative", np.asarray(-3.0, dtype=dt)),
            checks.case("0-d, very negative", np.asarray(-1e4, dtype=dt)),
            checks.case("size-1 axes", checks.randn(s + 43, 1, 4, 1, dtype=dt)),
            checks.case("|x| up to 1e4", np.array(extreme, dtype=dt)),
            checks.case("random, |x| up to ~1e4", checks.randn(s + 44, 6, 5, dtype=dt, scale=3000.0)),
            checks.case("non-contiguous (sliced)", checks.strided(checks.randn(s + 45, 4, 6, dtype=dt, scale=3.0))),
            checks.case("non-contiguous (transposed)", checks.randn(s + 46, 6, 4, dtype=dt, scale=100.0).T),
        ]
    checks.against_torch("sigmoid", sigmoid, "sigmoid", cases)


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ### SiLU and GELU: smooth relatives of ReLU
#
# Modern networks often use smooth activations that behave like ReLU for large $|x|$ but have no
# kink at 0 and let small negative values through.
#
# **SiLU** (sigmoid-weighted linear unit, also called *swish*) multiplies the input by its own
# sigmoid:
#
# $$
# \mathrm{silu}(x) = x\,\sigma(x) .
# $$
#
# For $x \to +\infty$, $\sigma(x) \to 1$ and $\mathrm{silu}(x) \approx x$; for $x \to -\infty$ it
# tends to 0 from below, with a minimum of about $-0.278$ near $x = -1.28$. It is stable exactly
# when our $\sigma$ is: $x / (1 + e^{-x})$ overflows for $x = -10^4$ just like the textbook
# sigmoid.
#
# **Worked example.** $\mathrm{silu}(2) = 2 \cdot 0.8808 = 1.7616$,
# $\mathrm{silu}(-2) = -2 \cdot 0.1192 = -0.2384$, $\mathrm{silu}(0) = 0$.
#
# ### Exercise `silu`
#
# Write `silu(x)`, like `torch.nn.functional.silu(x)`, stable for $|x|$ up to $10^4$. We may call
# our `sigmoid`.

# %% nbgrader={"grade": false, "grade_id": "silu", "locked": false, "schema_version": 3, "solution": true, "task": false}
def silu(x):
    """SiLU (swish) x * sigmoid(x), like torch.nn.functional.silu.

    x : float array of any shape (including 0-d), float32 or float64.

    Returns an array of x's shape and dtype, finite for every finite x, without NumPy warnings.
    """
    ### BEGIN SOLUTION
    return x * sigmoid(x)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_silu", "locked": true, "points": 5, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
checks.against_torch("silu", silu, "silu", [
    checks.case("worked example", np.array([-2.0, 0.0, 2.0])),
    checks.case("|x| up to 1e4 in float32 (is your sigmoid stable?)",
                np.array([-1e4, -100.0, 100.0, 1e4], dtype=np.float32)),
])


def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    extreme = [-1e4, -1e3, -745.0, -710.0, -105.0, -88.8, -30.0, -1.28, 0.0, 1.28, 30.0, 88.8, 710.0, 1e3, 1e4]
    cases = []
    for dt in (np.float64, np.float32):
        cases += [
            checks.case("random", checks.randn(s + 51, 5, 7, dtype=dt, scale=3.0)),
            checks.case("3-D", checks.randn(s + 52, 2, 3, 4, dtype=dt)),
            checks.case("0-d", np.asarray(-1.5, dtype=dt)),
            checks.case("0-d, very negative", np.asarray(-1e4, dtype=dt)),
            checks.case("size-1 axes", checks.randn(s + 53, 1, 4, 1, dtype=dt)),
            checks.case("|x| up to 1e4", np.array(extreme, dtype=dt)),
            checks.case("random, |x| up to ~1e4", checks.randn(s + 54, 6, 5, dtype=dt, scale=3000.0)),
            checks.case("non-contiguous (sliced)", checks.strided(checks.randn(s + 55, 4, 6, dtype=dt, scale=3.0))),
            checks.case("non-contiguous (transposed)", checks.randn(s + 56, 6, 4, dtype=dt, scale=3.0).T),
        ]
    checks.against_torch("silu", silu, "silu", cases)


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# **GELU** (Gaussian error linear unit) weights the input by the probability that a standard
# normal variable is below it, $\mathrm{gelu}(x) = x\,\Phi(x)$, where $\Phi$ is the standard
# normal CDF. $\Phi$ needs the error function, so BERT and GPT-2 used Hendrycks and Gimpel's
# tanh approximation, which PyTorch offers as `F.gelu(x, approximate="tanh")`:
#
# $$
# \mathrm{gelu}_{\tanh}(x) = \tfrac12\, x \left(1 + \tanh\!\Big(\sqrt{2/\pi}\,\big(x + 0.044715\, x^3\big)\Big)\right).
# $$
#
# The two differ by less than $5 \times 10^{-4}$, but they are different functions, and a model
# trained with one should be run with the same one; our tests compare with the tanh form to
# float64 precision. `np.tanh` saturates to $\pm 1$ without overflow, so the formula is safe for
# large $|x|$ as written.
#
# **A dtype trap.** `np.sqrt(2 / np.pi)` is a NumPy `float64` *scalar*, and NumPy 2 promotes a
# float32 array multiplied by a NumPy float64 scalar to float64. A Python `float` (such as
# `math.sqrt(2 / math.pi)` or `float(np.sqrt(2 / np.pi))`) is "weak" and keeps float32 as
# float32, as torch does.
#
# **Worked example.** For $x = 1$: $\sqrt{2/\pi}\,(1 + 0.044715) = 0.83356$,
# $\tanh(0.83356) = 0.68238$, and $\mathrm{gelu}_{\tanh}(1) = 0.5 \cdot 1.68238 = 0.84119$ (the
# exact GELU gives $\Phi(1) = 0.84134$). Further,
# $\mathrm{gelu}_{\tanh}(-2, -0.5, 0, 0.5, 2) = (-0.0454, -0.1543, 0, 0.3457, 1.9546)$.
#
# ### Exercise `gelu_tanh`
#
# Write `gelu_tanh(x)`, like `torch.nn.functional.gelu(x, approximate="tanh")`.

# %% nbgrader={"grade": false, "grade_id": "gelu_tanh", "locked": false, "schema_version": 3, "solution": true, "task": false}
def gelu_tanh(x):
    """GELU with the tanh approximation, like torch.nn.functional.gelu(x, approximate="tanh").

    x : float array of any shape (including 0-d), float32 or float64.

    Returns an array of x's shape and dtype.
    """
    ### BEGIN SOLUTION
    c = float(np.sqrt(2.0 / np.pi))  # a Python float: float32 inputs stay float32
    return 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * (x * x * x))))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_gelu_tanh", "locked": true, "points": 5, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def exact_gelu_hint(got, expected):
    if got.shape == expected.shape and np.all(np.isfinite(got)) and np.max(np.abs(got - expected)) < 1e-3:
        return ("close, but not the same function: are you computing the exact GELU x * Phi(x), or another "
                "approximation? The task is the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).")
    return None


checks.against_torch("gelu_tanh", gelu_tanh, "gelu_tanh", [
    checks.case("worked example", np.array([-2.0, -0.5, 0.0, 0.5, 1.0, 2.0])),
    checks.case("float32", np.array([-2.0, -0.5, 0.0, 0.5, 1.0, 2.0], dtype=np.float32)),
], hints=[exact_gelu_hint])


def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    cases = []
    for dt in (np.float64, np.float32):
        cases += [
            checks.case("random", checks.randn(s + 61, 5, 7, dtype=dt, scale=2.0)),
            checks.case("3-D", checks.randn(s + 62, 2, 3, 4, dtype=dt)),
            checks.case("0-d", np.asarray(-0.7, dtype=dt)),
            checks.case("size-1 axes", checks.randn(s + 63, 1, 4, 1, dtype=dt)),
            checks.case("where the approximation matters (|x| in [1, 4])", np.linspace(-4, 4, 33).astype(dt)),
            checks.case("large |x|", np.array([-1e4, -1e3, -50.0, -10.0, 10.0, 50.0, 1e3, 1e4], dtype=dt)),
            checks.case("non-contiguous (sliced)", checks.strided(checks.randn(s + 64, 4, 6, dtype=dt, scale=2.0))),
            checks.case("non-contiguous (transposed)", checks.randn(s + 65, 6, 4, dtype=dt, scale=2.0).T),
        ]
    checks.against_torch("gelu_tanh", gelu_tanh, "gelu_tanh", cases, hints=[exact_gelu_hint])


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. A two-layer MLP, and what its outputs mean
#
# A **multilayer perceptron** with one hidden layer of $H$ units and $C$ outputs computes
#
# $$
# h = \phi(x W_1^\top + b_1), \qquad z = h W_2^\top + b_2 ,
# $$
#
# with $W_1 \in \mathbb{R}^{H \times D}$, $b_1 \in \mathbb{R}^H$, $W_2 \in \mathbb{R}^{C \times H}$,
# $b_2 \in \mathbb{R}^C$, an input of $D$ features, and $\phi$ applied elementwise. In UDL's
# notation this is $\beta_1 + \Omega_1 a[\beta_0 + \Omega_0 x]$. The activation sits *between*
# the two affine maps, never after the last one: the outputs $z$ are the **logits**.
#
# **Logits are not probabilities.** A logit is any real number: negative, larger than 1, and the
# logits of one input need not sum to anything in particular. A classifier turns them into
# probabilities only at the end, and only through a fixed function:
#
# - with **one logit** (binary classification), $P(y = 1 \mid x) = \sigma(z)$. Inverting,
#   $z = \log \frac{p}{1 - p}$: the logit is the **log-odds** of the positive class, which is where
#   the name comes from ("log" + "odds"; the inverse of the sigmoid is called the logit function).
#   $z = 0$ means $p = 0.5$, and each unit of $z$ multiplies the odds $p / (1 - p)$ by $e$.
# - with **$C$ logits**, $P(y = c \mid x) = \mathrm{softmax}(z)_c = e^{z_c} / \sum_j e^{z_j}$
#   (unit 1.2 computes this stably). Taking logs, $\log p_c = z_c - \log \sum_j e^{z_j}$: logits
#   are log-probabilities up to a constant that is the same for every class. So only *differences*
#   of logits matter, and $z_a - z_b = \log (p_a / p_b)$. Adding 5 to every logit changes nothing.
#
# Why output logits and not probabilities? The largest logit is the predicted class either way,
# but losses are best computed from logits: $\log \sigma(z)$ and $\log \mathrm{softmax}(z)$ have
# stable formulas in terms of $z$ (unit 1.2), while $\log p$ of an already rounded probability
# loses everything once $p$ rounds to 0 or 1. This is why `nn.CrossEntropyLoss` and
# `nn.BCEWithLogitsLoss` take logits, and why a classifier's last layer has no activation. A ReLU
# after the last layer would clip every negative logit to 0. That does not forbid small
# probabilities (the logits $(5, 0, 0)$ still give $p \approx (0.987, 0.0066, 0.0066)$), but every
# class whose pre-activation is negative ties at exactly 0, and ReLU's zero gradient there stops
# those outputs from learning at all.
#
# **Worked example.** $D = 2$, $H = 2$, $C = 2$, with
# $W_1 = \begin{pmatrix} 1 & -1 \\ -1 & 1 \end{pmatrix}$, $b_1 = (0, 0)$,
# $W_2 = \begin{pmatrix} 1 & 1 \\ -1 & -1 \end{pmatrix}$, $b_2 = (-1, 1)$ and ReLU.
# For $x = (1, -1)$: the pre-activations are $(2, -2)$, so $h = (2, 0)$ and
# $z = (2 - 1, -2 + 1) = (1, -1)$. For $x = (1, 1)$: the pre-activations are $(0, 0)$, $h = (0, 0)$ and
# $z = b_2 = (-1, 1)$. The class with the larger logit changes between the two inputs: this is
# the XOR network of the figure at the end of the notebook.
#
# ### Exercise `mlp_logits`
#
# Write `mlp_logits(x, W1, b1, W2, b2, activation=relu)`: the logits of the two-layer MLP above,
# for any leading batch axes of `x`. `activation` is a function applied elementwise (our `relu`
# by default; the tests also pass others, such as `np.tanh`). We may call our `linear`.

# %% nbgrader={"grade": false, "grade_id": "mlp_logits", "locked": false, "schema_version": 3, "solution": true, "task": false}
def mlp_logits(x, W1, b1, W2, b2, activation=relu):
    """Logits of a two-layer MLP: linear(activation(linear(x, W1, b1)), W2, b2).

    x          : float array (..., D).
    W1, b1     : the hidden layer, (H, D) and (H,).
    W2, b2     : the output layer, (C, H) and (C,).
    activation : an elementwise function, applied to the hidden pre-activations only.

    Returns the logits, an array of shape (..., C) and x's dtype.
    """
    ### BEGIN SOLUTION
    return linear(activation(linear(x, W1, b1)), W2, b2)  # no activation after the last layer
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_mlp_logits", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def mlp_by_name(x, W1, b1, W2, b2, activation="relu"):
    """mlp_logits with the activation named as the torch oracle names it."""
    if activation == "relu":
        return mlp_logits(x, W1, b1, W2, b2)  # the default activation
    return mlp_logits(x, W1, b1, W2, b2, activation={"tanh": np.tanh}[activation])


W1 = np.array([[1.0, -1.0], [-1.0, 1.0]])
b1 = np.zeros(2)
W2 = np.array([[1.0, 1.0], [-1.0, -1.0]])
b2 = np.array([-1.0, 1.0])
xor = np.array([[1.0, -1.0], [1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0]])
checks.assert_close(checks.run_student("mlp_logits", mlp_logits, *[a.copy() for a in (xor, W1, b1, W2, b2)]),
                    np.array([[1.0, -1.0], [-1.0, 1.0], [1.0, -1.0], [-1.0, 1.0]]), task="mlp_logits",
                    case="worked example (the XOR network)")
checks.against_torch("mlp_logits", mlp_by_name, "mlp_logits", [
    checks.case("worked example", xor, W1, b1, W2, b2),
    checks.case("worked example, tanh", xor, W1, b1, W2, b2, activation="tanh"),
])


def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    def mlp_params(seed, D, H, C, dt):
        return (checks.randn(s + seed, H, D, dtype=dt), checks.randn(s + seed + 1, H, dtype=dt),
                checks.randn(s + seed + 2, C, H, dtype=dt), checks.randn(s + seed + 3, C, dtype=dt))


    cases = []
    for dt in (np.float64, np.float32):
        for act in ("relu", "tanh"):
            cases += [
                checks.case("a batch (N, D)", checks.randn(s + 71, 6, 4, dtype=dt), *mlp_params(72, 4, 5, 3, dt), activation=act),
                checks.case("1-D x", checks.randn(s + 76, 4, dtype=dt), *mlp_params(77, 4, 3, 2, dt), activation=act),
                checks.case("3-D x", checks.randn(s + 81, 2, 3, 4, dtype=dt), *mlp_params(82, 4, 6, 5, dt), activation=act),
                checks.case("square layers (D = H = C)", checks.randn(s + 86, 5, 3, dtype=dt), *mlp_params(87, 3, 3, 3, dt),
                            activation=act),
                checks.case("one hidden unit, one logit", checks.randn(s + 91, 4, 2, dtype=dt), *mlp_params(92, 2, 1, 1, dt),
                            activation=act),
                checks.case("non-contiguous x and W1", checks.strided(checks.randn(s + 96, 6, 4, dtype=dt)),
                            checks.randn(s + 97, 4, 5, dtype=dt).T, *mlp_params(97, 4, 5, 3, dt)[1:], activation=act),
            ]
    checks.against_torch("mlp_logits", mlp_by_name, "mlp_logits", cases)


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ### Concept check `logits_probabilities`
#
# Three questions about logits and probabilities. Four decimals are enough; we may use NumPy to
# compute them.
#
# - `p_from_logit`: a binary classifier outputs the logit $z = 2$ for an input. What probability
#   does it give the positive class?
# - `logit_for_p`: which logit makes a binary classifier give the positive class probability
#   $p = 0.8$?
# - `logit_gap`: a 3-class softmax classifier gives the probabilities $p = (0.7, 0.2, 0.1)$. Its
#   logits cannot be recovered from $p$, but one thing about them can: what is $z_0 - z_2$?

# %% nbgrader={"grade": false, "grade_id": "logits_probabilities", "locked": false, "schema_version": 3, "solution": true, "task": false}
p_from_logit = None  # the probability of the positive class for the logit z = 2
logit_for_p = None   # the logit that gives p = 0.8
logit_gap = None     # z_0 - z_2 for p = (0.7, 0.2, 0.1)
### BEGIN SOLUTION
p_from_logit = 1 / (1 + np.exp(-2.0))
logit_for_p = np.log(0.8 / (1 - 0.8))
logit_gap = np.log(0.7 / 0.1)
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_logits_probabilities", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# The answers are stored as digests (checks.close_digests) so that this cell does not print them:
# a value passes when it rounds, to 3 decimals, to the answer or a neighbour (within about 1e-3).
hints = {"p_from_logit": "a single logit z gives the probability sigmoid(z) = 1 / (1 + exp(-z)).",
         "logit_for_p": "invert p = sigmoid(z): the logit is the log-odds log(p / (1 - p)).",
         "logit_gap": "log p_c = z_c - logsumexp(z): the constant cancels in a difference of two classes."}
digests = {"p_from_logit": ("36da33f726e4ea51a6a9e5f411ac1b62a7d4089eebc7f24df8d3d8858c12d7fb",
                      "88c31da5d6f5989f4450a93dea60911f211315a0b3cbba3673ca3e39ec5cf69f",
                      "a7e650be62fdeea96637bd4da7c81668e65bf813eaf7c23442e5be006047b98b"),
           "logit_for_p": ("34cb38d3471ccd546c621f3af34bb60985d43f273021274030a9aa1817ea1add",
                      "2efb87f813b4dfb23df643f6e0bff1bc3243028ab386e6a06d0bb514055c8af4",
                      "584edc46d4b9eb28c22166cee76d1944f444e7422de0dc4a8fcb36f10d8679fa"),
           "logit_gap": ("24abb3f911aee09e5e9a154d97918ab2f3f40d30826e38f37890b641a3840427",
                      "fde53b182a3254fdef1ebf4e96c28f85cb913ef79b50c508e48415f107d989bb",
                      "a781acf586198cb03269d581eb3f5f35e0b0780e2c711721c7d0dda2e04b318b")}
for name, answer in [("p_from_logit", p_from_logit), ("logit_for_p", logit_for_p), ("logit_gap", logit_gap)]:
    checks.check_close_hash("logits_probabilities", name, answer, digests[name], hint=hints[name])
### BEGIN HIDDEN TESTS
# The sigmoid, its inverse (the log-odds) and softmax's log-ratio, with the numbers of the question;
# 1e-3: four decimals (0.8808, 1.3863, 1.9459), or three.
z, p, probs = 2.0, 0.8, np.array([0.7, 0.2, 0.1])
for name, got, expected in [("p_from_logit", p_from_logit, 1 / (1 + np.exp(-z))),
                            ("logit_for_p", logit_for_p, np.log(p / (1 - p))),
                            ("logit_gap", logit_gap, np.log(probs[0] / probs[2]))]:
    checks.check_value("logits_probabilities", name, got, expected, atol=1e-3, hint=hints[name])
### END HIDDEN TESTS


# %% [markdown]
# ## 4. Backward by hand
#
# Training needs the gradient of a scalar loss $L$ with respect to every parameter. Reverse mode
# (unit 1.3) gets it by passing $\bar y = \partial L / \partial y$, the **upstream gradient** of a
# layer's output, backwards through each layer in turn. Each layer only has to answer one
# question: given $\bar y$, what are $\bar x = \partial L / \partial x$ and the gradients of its
# parameters? By the chain rule, for every input entry $x_j$,
#
# $$
# \bar x_j = \frac{\partial L}{\partial x_j} = \sum_i \frac{\partial L}{\partial y_i}\frac{\partial y_i}{\partial x_j}
# = \sum_i \bar y_i\, J_{ij}, \qquad\text{that is}\qquad \bar x = \bar y\, J ,
# $$
#
# a **vector-Jacobian product** (VJP). We never build the Jacobian $J$: for the layers of this
# unit, the product has a closed form that costs about as much as the forward pass. Each
# `*_backward(x, ..., grad_out)` below takes the layer's input and $\bar y$ (`grad_out`, the shape
# of the output) and returns the gradients, each with the shape of what it is the gradient of.
# The tests use a random upstream gradient, compare with torch autograd and with central finite
# differences, and check that a zero upstream gradient gives zero gradients.
#
# ### The affine layer
#
# Take one input row first: $y_o = \sum_i W_{oi}\, x_i + b_o$, so
# $\partial y_o / \partial x_i = W_{oi}$, $\partial y_o / \partial W_{oi} = x_i$ (and 0 for the other
# rows of $W$), and $\partial y_o / \partial b_o = 1$. Therefore
#
# $$
# \bar x_i = \sum_o \bar y_o W_{oi}, \qquad
# \bar W_{oi} = \bar y_o\, x_i, \qquad
# \bar b_o = \bar y_o ,
# $$
#
# that is $\bar x = \bar y\, W$, $\bar W = \bar y^\top x$ (an outer product) and $\bar b = \bar y$.
#
# With a batch, the rows $n = 1, \dots, N$ each have their own $x_n$ and $y_n$, so $\bar x$ keeps
# one row per input row, $\bar X = \bar Y W$. But $W$ and $b$ are **shared** by every row: each
# row contributes a term, and the total derivative sums them:
#
# $$
# \bar X = \bar Y W \;\; (N \times \text{in}), \qquad
# \bar W = \sum_n \bar y_n^\top x_n = \bar Y^\top X \;\; (\text{out} \times \text{in}), \qquad
# \bar b = \sum_n \bar y_n \;\; (\text{out}) .
# $$
#
# With more leading axes, `(..., in)`, "every row" means every position of **all** the leading
# axes together: $\bar W$ and $\bar b$ sum over all of them, not only over the first. The
# simplest way is to flatten the leading axes into one, `X = x.reshape(-1, in)` and
# `G = grad_out.reshape(-1, out)`, and use the 2-D formulas; $\bar x = \bar y W$ works for any
# leading axes directly. A check on the shapes catches most mistakes: $\bar W$ must have $W$'s
# shape `(out, in)`, and $\bar b$ must be `(out,)`, whatever the batch shape.
#
# (These are the same rules in another guise: $\bar b$ is the sum because $b$ is *broadcast* over
# the batch, and the adjoint of a broadcast is a sum, unit 1.4's theme.)
#
# **Worked example.** $x = (1, 2)$ and $W$ from part 1, with upstream gradient
# $\bar y = (1, 0, -1)$:
# $\bar x = 1 \cdot (1, -1) + 0 \cdot (0.5, 2) - 1 \cdot (0, 1) = (1, -2)$,
# $\bar W = \bar y^\top x = \begin{pmatrix} 1 & 2 \\ 0 & 0 \\ -1 & -2 \end{pmatrix}$ and
# $\bar b = (1, 0, -1)$. For the batch of the two rows $x = (1, 2)$ and $(1, 2)$ with upstream
# gradients $(1, 0, -1)$ and $(0, 1, 0)$: $\bar X$ has rows $(1, -2)$ and $(0.5, 2)$,
# $\bar W = \begin{pmatrix} 1 & 2 \\ 1 & 2 \\ -1 & -2 \end{pmatrix}$ and $\bar b = (1, 1, -1)$.
#
# ### Exercise `linear_backward`
#
# Write `linear_backward(x, W, grad_out)`, which returns `(grad_x, grad_W, grad_b)` for
# `y = linear(x, W, b)`. (The gradients do not depend on $b$, so $b$ is not an argument.)

# %% nbgrader={"grade": false, "grade_id": "linear_backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
def linear_backward(x, W, grad_out):
    """Gradients of y = linear(x, W, b) given the upstream gradient grad_out = dL/dy.

    x        : float array (..., in), the layer's input (any leading batch axes, or just (in,)).
    W        : float array (out, in).
    grad_out : float array (..., out), the shape of y.

    Returns (grad_x, grad_W, grad_b) with the shapes of x, W and (out,), in x's dtype: the
    gradients of W and b are summed over every leading batch axis.
    """
    ### BEGIN SOLUTION
    out_features, in_features = W.shape
    G = np.reshape(grad_out, (-1, out_features))  # all leading axes as rows
    X = np.reshape(x, (-1, in_features))
    grad_x = np.matmul(grad_out, W)               # (..., out) @ (out, in)
    grad_W = G.T @ X                              # sum over rows of outer products
    grad_b = G.sum(axis=0)
    return grad_x, grad_W, grad_b
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_linear_backward", "locked": true, "points": 12, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def linear_backward_with_b(x, W, b, grad_out):
    """linear_backward with the bias among the inputs, as check_vjp differentiates F.linear(x, W, b)."""
    return linear_backward(x, W, grad_out)


names = ["x", "W", "b"]
W = np.array([[1.0, -1.0], [0.5, 2.0], [0.0, 1.0]])
x = np.array([1.0, 2.0])
# The worked example, with the text's upstream gradients (one row, then the batch of two rows):
checks.check_vjp("linear_backward", linear_backward_with_b, "linear", [checks.case("worked example", x, W, np.zeros(3))],
                 upstream=np.array([1.0, 0.0, -1.0]), names=names)
checks.check_vjp("linear_backward", linear_backward_with_b, "linear",
                 [checks.case("worked example, a batch of two", np.stack([x, x]), W, np.zeros(3))],
                 upstream=np.array([[1.0, 0.0, -1.0], [0.0, 1.0, 0.0]]), names=names)


def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    def layer(seed, out, inp, dt=np.float64):
        return checks.randn(s + seed, out, inp, dtype=dt), checks.randn(s + seed + 1, out, dtype=dt)


    cases = [
        checks.case("a batch (N, in)", checks.randn(s + 101, 6, 4), *layer(102, 5, 4)),
        checks.case("1-D x", checks.randn(s + 103, 4), *layer(104, 3, 4)),
        checks.case("3-D x (batch, time, in)", checks.randn(s + 105, 2, 3, 4), *layer(106, 5, 4)),
        checks.case("4-D x with size-1 axes", checks.randn(s + 107, 2, 1, 3, 2), *layer(108, 1, 2)),
        checks.case("square W (in = out)", checks.randn(s + 109, 3, 4), *layer(110, 4, 4)),
        checks.case("size-1 everything", checks.randn(s + 111, 1, 1), *layer(112, 1, 1)),
        checks.case("one row, a size-1 batch", checks.randn(s + 113, 1, 3), *layer(114, 2, 3)),
        checks.case("transposed x and W", checks.randn(s + 115, 4, 6).T, checks.randn(s + 116, 4, 5).T, checks.randn(s + 117, 5)),
    ]
    checks.check_vjp("linear_backward", linear_backward_with_b, "linear", cases, names=names, seed=s + 1)
    # float32 in, float32 out: compared with torch autograd in float32 (the oracle "linear_backward" is
    # the gradient of F.linear); finite differences need float64, as above.
    cases32 = []
    for seed, x_shape, out in [(121, (6, 4), 5), (124, (4,), 3), (127, (2, 3, 4), 5), (130, (1, 1), 1)]:
        x32 = checks.randn(s + seed, *x_shape, dtype=np.float32)
        cases32.append(checks.case("float32", x32, checks.randn(s + seed + 1, out, x_shape[-1], dtype=np.float32),
                                   checks.randn(s + seed + 2, *x_shape[:-1], out, dtype=np.float32)))
    checks.against_torch("linear_backward", linear_backward, "linear_backward", cases32)


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ### Elementwise activations
#
# An elementwise $y = \phi(x)$ has a diagonal Jacobian: $y_i$ depends on $x_i$ only, so
# $\partial y_i / \partial x_j = \phi'(x_i)$ when $i = j$ and 0 otherwise, and the VJP is an
# elementwise product:
#
# $$
# \bar x = \bar y \odot \phi'(x) .
# $$
#
# For our three activations:
#
# - **ReLU.** $\mathrm{relu}'(x) = 1$ for $x > 0$ and $0$ for $x < 0$. At $x = 0$ the derivative
#   does not exist (the left and right slopes are 0 and 1), and any value in $[0, 1]$ is a valid
#   subgradient. **PyTorch uses 0**, and so do we: $\bar x = \bar y \odot [x > 0]$, with a strict
#   inequality. Exact zeros are common in practice: the input of a ReLU is often the output of
#   another ReLU. (Finite differences cannot judge this point: a central difference at $x = 0$
#   gives $\tfrac12$. The tests compare the kink with torch only.)
# - **Sigmoid.** Differentiating $\sigma(x) = (1 + e^{-x})^{-1}$,
#
#   $$
#   \sigma'(x) = \frac{e^{-x}}{(1 + e^{-x})^2} = \frac{1}{1 + e^{-x}} \cdot \frac{e^{-x}}{1 + e^{-x}}
#   = \sigma(x)\,\big(1 - \sigma(x)\big) = \sigma(x)\,\sigma(-x) .
#   $$
#
#   The derivative is expressed through $\sigma$ itself, so we compute it with our stable
#   `sigmoid`, never with `np.exp(-x)` directly, which overflows for $x = -10^3$ in float64.
#   (The form $\sigma(x)\sigma(-x)$ also avoids the cancellation in $1 - \sigma(x)$ when
#   $\sigma(x)$ is close to 1; both forms are accurate enough for our tests.) The derivative is
#   at most $\tfrac14$, at $x = 0$: a chain of sigmoids shrinks gradients, the *vanishing
#   gradient* problem of deep sigmoid networks.
# - **Tanh.** $\tanh'(x) = 1 - \tanh^2(x) = \operatorname{sech}^2 x$. We compute it as
#   $1 - t^2$ with $t = \tanh(x)$; `1 / np.cosh(x)**2` is the same number in exact arithmetic,
#   but `np.cosh` overflows for $|x| > 710$ in float64.
#
# In all three, `x` is the *input* of the activation, and the upstream gradient multiplies the
# local derivative: with a zero upstream gradient, the result must be zero.
#
# **Worked example.** At $x = (-1, 0, 2)$ with $\bar y = (3, 3, 3)$:
# ReLU gives $(0, 0, 3)$; sigmoid gives $3\,\sigma(x)\sigma(-x) = (0.5898, 0.75, 0.3150)$; tanh
# gives $3(1 - \tanh^2 x) = (1.2599, 3, 0.2120)$.
#
# ### Exercise `relu_backward`
#
# Write `relu_backward(x, grad_out)`, the gradient of `relu` at `x`, with PyTorch's 0 at the kink.
# Return a new array and leave `grad_out` unchanged: in a network it may be shared with another
# branch.

# %% nbgrader={"grade": false, "grade_id": "relu_backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
def relu_backward(x, grad_out):
    """dL/dx for y = relu(x), given grad_out = dL/dy (PyTorch's convention: 0 where x == 0).

    x, grad_out : float arrays of the same shape (any, including 0-d) and dtype.

    Returns a new array of x's shape and dtype; neither argument is modified.
    """
    ### BEGIN SOLUTION
    return np.where(x > 0, grad_out, 0)  # strict: the kink x == 0 passes no gradient
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_relu_backward", "locked": true, "points": 5, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def check_inputs_kept(task, fn, *args):
    """Call fn and check that it did not modify any of its array arguments."""
    before = [a.copy() for a in args]
    np.asarray(checks.run_student(task, fn, *args))  # (a result that computes when read does so here)
    for a, a0 in zip(args, before):
        assert np.array_equal(a, a0, equal_nan=True), (
            f"[{task}] your function changed an argument in place; compute a new array instead "
            "(np.where, or a product), so that the caller's arrays keep their values.")


def local_derivative_hint(got, expected):
    if np.all((got == 0) | (got == 1)) and not np.all((expected == 0) | (expected == 1)):
        return "your gradient holds only 0s and 1s: multiply the local derivative [x > 0] by grad_out."
    return None


def kink_hint(got, expected):
    if np.any((expected == 0) & (got != 0)):
        return "where x <= 0 the gradient is 0; at the kink x == 0, torch's relu gradient is 0 too (x > 0, not x >= 0)."
    return None


relu_hints = [local_derivative_hint, kink_hint]
x = np.array([-1.0, 0.0, 2.0])
# The worked example, with the text's upstream gradient (3, 3, 3); x = 0 is the kink, where torch
# alone judges (a central difference there gives 1/2).
checks.check_vjp("relu_backward", relu_backward, "relu", [checks.case("worked example", x)], upstream=np.full(3, 3.0),
                 names=["x"], hints=relu_hints, fd=False)
check_inputs_kept("relu_backward", relu_backward, x.copy(), np.full(3, 3.0))


def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    shapes = [((5, 7),), ((2, 3, 4),), ((),), ((1, 4, 1),), ((6,),)]
    checks.check_vjp("relu_backward", relu_backward, "relu", checks.random_cases(s + 11, shapes, label="relu"),
                     names=["x"], seed=s + 11, hints=relu_hints)
    # The kink: torch's gradient at x == 0 is 0; central differences would give 1/2 there, so torch alone judges.
    kink = np.array([[0.0, -0.0, 1.0, -1.0], [0.0, 2.0, 0.0, -3.0]])
    kink_cases = [checks.case("exact zeros in x (torch's gradient at the kink x = 0 is 0)", kink),
                  checks.case("0-d x = 0 (torch's gradient at the kink is 0)", np.asarray(0.0))]
    checks.check_vjp("relu_backward", relu_backward, "relu", kink_cases, names=["x"], fd=False, seed=s + 12, hints=relu_hints)
    cases32 = [checks.case("float32", checks.randn(s + 13, 5, 7, dtype=np.float32), checks.randn(s + 14, 5, 7, dtype=np.float32)),
               checks.case("float32 with exact zeros", kink.astype(np.float32), checks.randn(s + 15, 2, 4, dtype=np.float32))]
    checks.against_torch("relu_backward", relu_backward, "relu_backward", cases32, hints=relu_hints)
    check_inputs_kept("relu_backward", relu_backward, checks.randn(s + 16, 4, 5), checks.randn(s + 17, 4, 5))
    check_inputs_kept("relu_backward", relu_backward, kink.copy(), checks.randn(s + 18, 2, 4))


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise `sigmoid_backward`
#
# Write `sigmoid_backward(x, grad_out)`, the gradient of `sigmoid` at `x`, without overflow for
# $|x|$ up to $10^4$. We may call our `sigmoid`.

# %% nbgrader={"grade": false, "grade_id": "sigmoid_backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
def sigmoid_backward(x, grad_out):
    """dL/dx for y = sigmoid(x), given grad_out = dL/dy.

    x, grad_out : float arrays of the same shape (any, including 0-d) and dtype.

    Returns an array of x's shape and dtype, without NumPy warnings for |x| up to 1e4.
    """
    ### BEGIN SOLUTION
    return grad_out * (sigmoid(x) * sigmoid(-x))  # sigma'(x) = sigma(x) (1 - sigma(x)) = sigma(x) sigma(-x)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_sigmoid_backward", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
x = np.array([-1.0, 0.0, 2.0])
checks.check_vjp("sigmoid_backward", sigmoid_backward, "sigmoid", [checks.case("worked example", x)],
                 upstream=np.full(3, 3.0), names=["x"])


def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    shapes = [((5, 7),), ((2, 3, 4),), ((),), ((1, 4, 1),), ((6,),)]
    checks.check_vjp("sigmoid_backward", sigmoid_backward, "sigmoid", checks.random_cases(s + 21, shapes, label="sigmoid"),
                     names=["x"], seed=s + 21)
    extreme_cases = [checks.case("|x| up to 1e3 (exp(-x) overflows float64 past 709.8)",
                                 np.array([-1e3, -745.0, -710.0, -40.0, -17.0, 0.0, 17.0, 40.0, 710.0, 745.0, 1e3])),
                     checks.case("0-d, very negative", np.asarray(-1e3))]
    checks.check_vjp("sigmoid_backward", sigmoid_backward, "sigmoid", extreme_cases, names=["x"], seed=s + 22)
    extreme32 = np.array([-1e4, -1e3, -100.0, -88.8, -17.0, 0.0, 17.0, 88.8, 100.0, 1e3, 1e4], dtype=np.float32)
    cases32 = [checks.case("float32", checks.randn(s + 23, 5, 7, dtype=np.float32, scale=3.0), checks.randn(s + 24, 5, 7, dtype=np.float32)),
               checks.case("float32, |x| up to 1e4", extreme32, checks.randn(s + 25, 11, dtype=np.float32)),
               checks.case("float32, 0-d", np.asarray(-1e4, dtype=np.float32), np.asarray(2.0, dtype=np.float32))]
    checks.against_torch("sigmoid_backward", sigmoid_backward, "sigmoid_backward", cases32)


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise `tanh_backward`
#
# Write `tanh_backward(x, grad_out)`, the gradient of `np.tanh` at `x`, without overflow for
# $|x|$ up to $10^4$.

# %% nbgrader={"grade": false, "grade_id": "tanh_backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
def tanh_backward(x, grad_out):
    """dL/dx for y = tanh(x), given grad_out = dL/dy.

    x, grad_out : float arrays of the same shape (any, including 0-d) and dtype.

    Returns an array of x's shape and dtype, without NumPy warnings for |x| up to 1e4.
    """
    ### BEGIN SOLUTION
    t = np.tanh(x)
    return grad_out * (1 - t * t)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_tanh_backward", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
x = np.array([-1.0, 0.0, 2.0])
checks.check_vjp("tanh_backward", tanh_backward, "tanh", [checks.case("worked example", x)], upstream=np.full(3, 3.0),
                 names=["x"])


def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    shapes = [((5, 7),), ((2, 3, 4),), ((),), ((1, 4, 1),), ((6,),)]
    checks.check_vjp("tanh_backward", tanh_backward, "tanh", checks.random_cases(s + 31, shapes, label="tanh"),
                     names=["x"], seed=s + 31)
    extreme_cases = [checks.case("|x| up to 1e3 (cosh overflows float64 past 710)",
                                 np.array([-1e3, -711.0, -20.0, -0.5, 0.0, 0.5, 20.0, 711.0, 1e3]))]
    checks.check_vjp("tanh_backward", tanh_backward, "tanh", extreme_cases, names=["x"], seed=s + 32)
    extreme32 = np.array([-1e4, -100.0, -90.0, -9.0, 0.0, 9.0, 90.0, 100.0, 1e4], dtype=np.float32)
    cases32 = [checks.case("float32", checks.randn(s + 33, 5, 7, dtype=np.float32), checks.randn(s + 34, 5, 7, dtype=np.float32)),
               checks.case("float32, |x| up to 1e4", extreme32, checks.randn(s + 35, 9, dtype=np.float32))]
    checks.against_torch("tanh_backward", tanh_backward, "tanh_backward", cases32)


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ### SiLU and GELU backward
#
# The smooth activations of part 2 follow the same pattern, $\bar x = \bar y \odot \phi'(x)$, with
# derivatives we get from the product rule.
#
# **SiLU.** $\mathrm{silu}(x) = x\,\sigma(x)$, so
#
# $$
# \mathrm{silu}'(x) = \sigma(x) + x\,\sigma'(x) = \sigma(x) + x\,\sigma(x)\sigma(-x)
# = \sigma(x)\big(1 + x\,\sigma(-x)\big).
# $$
#
# Unlike ReLU's, this derivative is nonzero for negative $x$ (it is negative below $x = -1.28$,
# where SiLU has its minimum), and it peaks at 1.0998 near $x = 2.4$ before settling at 1. Computed with our stable
# `sigmoid`, it needs no `exp` of its own and stays finite for $|x|$ up to $10^4$.
#
# **Worked example.** At $x = (-1, 0, 2)$ with $\bar y = (3, 3, 3)$: $\sigma(-1) = 0.2689$, so
# $\mathrm{silu}'(-1) = 0.2689\,(1 - 0.7311) = 0.0723$; $\mathrm{silu}'(0) = 0.5$;
# $\mathrm{silu}'(2) = 0.8808\,(1 + 2 \cdot 0.1192) = 1.0908$. So $\bar x = (0.2170, 1.5, 3.2724)$.
#
# ### Exercise `silu_backward`
#
# Write `silu_backward(x, grad_out)`, the gradient of `silu` at `x`, without overflow for $|x|$ up
# to $10^4$. We may call our `sigmoid`.

# %% nbgrader={"grade": false, "grade_id": "silu_backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
def silu_backward(x, grad_out):
    """dL/dx for y = silu(x), given grad_out = dL/dy.

    x, grad_out : float arrays of the same shape (any, including 0-d) and dtype.

    Returns an array of x's shape and dtype, without NumPy warnings for |x| up to 1e4.
    """
    ### BEGIN SOLUTION
    s = sigmoid(x)
    return grad_out * (s * (1 + x * (1 - s)))  # sigma(x) (1 + x sigma(-x))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_silu_backward", "locked": true, "points": 5, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def act_backward_cases(seed, dt=np.float64):
    shapes = [(5, 7), (2, 3, 4), (), (1, 4, 1), (6,)]
    return [checks.case(f"random {shape}", checks.randn(seed + i, *shape, dtype=dt, scale=3.0))
            for i, shape in enumerate(shapes)]


def act_backward_32(seed, extreme):
    """float32 inputs, against torch autograd in float32 (finite differences need float64)."""
    return [checks.case("float32", checks.randn(seed, 5, 7, dtype=np.float32, scale=3.0),
                        checks.randn(seed + 1, 5, 7, dtype=np.float32)),
            checks.case("float32, |x| up to 1e4", np.array(extreme, dtype=np.float32),
                        checks.randn(seed + 2, len(extreme), dtype=np.float32))]


silu_extreme = [-1e4, -1e3, -100.0, -88.8, -17.0, -2.4, 0.0, 2.4, 17.0, 88.8, 100.0, 1e3, 1e4]
checks.check_vjp("silu_backward", silu_backward, "silu", [checks.case("worked example", np.array([-1.0, 0.0, 2.0]))],
                 upstream=np.full(3, 3.0), names=["x"])


def silu_families(seed, extreme):
    """Random shapes (float64, against torch and central differences), extremes, and float32."""
    checks.check_vjp("silu_backward", silu_backward, "silu", act_backward_cases(seed), names=["x"], seed=seed)
    checks.check_vjp("silu_backward", silu_backward, "silu",
                     [checks.case("|x| up to 1e3 (exp(-x) overflows float64 past 709.8)", np.array(extreme[1:-1])),
                      checks.case("0-d, very negative", np.asarray(extreme[1]))], names=["x"], seed=seed + 1)
    checks.against_torch("silu_backward", silu_backward, "silu_backward", act_backward_32(seed + 2, extreme))


silu_families(200, silu_extreme)
### BEGIN HIDDEN TESTS
silu_families(210, silu_extreme[::-1])
### END HIDDEN TESTS

# %% [markdown]
# **GELU, derived.** The tanh form is a product too,
# $\mathrm{gelu}_{\tanh}(x) = \tfrac12\, x\,(1 + t)$ with $t = \tanh(u)$ and
# $u = \sqrt{2/\pi}\,(x + 0.044715\,x^3)$. Its derivative is ours to derive, with three facts we
# already have: the product rule, $\tanh'(u) = 1 - \tanh^2 u$ (part 4) and the chain rule for
# $t = \tanh(u(x))$. Write it in terms of $x$, $t$ and $du/dx$, and check it on the worked example
# before coding it. The same dtype trap as in part 2 applies: keep the constants Python floats.
#
# **Worked example.** At $x = 1$: $u = 0.83356$, $t = 0.68238$, $du/dx = \sqrt{2/\pi}\,(1 + 3
# \cdot 0.044715) = 0.90492$, and the derivative is $1.0830$. At $x = (-1, 0, 2)$ with
# $\bar y = (3, 3, 3)$, $\bar x = (-0.2489, 1.5, 3.2583)$: like SiLU's, GELU's slope is slightly
# negative for moderately negative $x$.
#
# ### Exercise `gelu_tanh_backward`
#
# Write `gelu_tanh_backward(x, grad_out)`, the gradient of `gelu_tanh` at `x`, from the
# derivative we derived.

# %% nbgrader={"grade": false, "grade_id": "gelu_tanh_backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
def gelu_tanh_backward(x, grad_out):
    """dL/dx for y = gelu_tanh(x), given grad_out = dL/dy.

    x, grad_out : float arrays of the same shape (any, including 0-d) and dtype.

    Returns an array of x's shape and dtype, without NumPy warnings for |x| up to 1e4.
    """
    ### BEGIN SOLUTION
    c = float(np.sqrt(2.0 / np.pi))  # a Python float: float32 inputs stay float32
    t = np.tanh(c * (x + 0.044715 * (x * x * x)))
    du_dx = c * (1 + 3 * 0.044715 * (x * x))
    return grad_out * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du_dx)  # product rule, then the chain rule
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_gelu_tanh_backward", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def missing_chain_hint(got, expected):
    if got.shape == expected.shape and np.all(np.isfinite(got)) and np.max(np.abs(got - expected)) < 0.5:
        return ("close but not equal: did you apply the chain rule all the way? d tanh(u)/dx = (1 - t^2) du/dx, "
                "with du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).")
    return None


gelu_extreme = [-1e4, -1e3, -50.0, -10.0, -3.0, -0.75, 0.0, 0.75, 3.0, 10.0, 50.0, 1e3, 1e4]
checks.check_vjp("gelu_tanh_backward", gelu_tanh_backward, "gelu_tanh",
                 [checks.case("worked example", np.array([-1.0, 0.0, 2.0]))], upstream=np.full(3, 3.0), names=["x"],
                 hints=[missing_chain_hint])


def gelu_families(seed, extreme):
    """Random shapes, where the tanh bends, large |x| (float64, against torch and central differences), float32."""
    bends = np.linspace(-4, 4, 17) + 0.1 * checks.randn(seed, 17)
    checks.check_vjp("gelu_tanh_backward", gelu_tanh_backward, "gelu_tanh", act_backward_cases(seed), names=["x"],
                     seed=seed, hints=[missing_chain_hint])
    checks.check_vjp("gelu_tanh_backward", gelu_tanh_backward, "gelu_tanh",
                     [checks.case("where the tanh bends (|x| up to 4)", bends),
                      checks.case("large |x|", np.array(extreme[1:-1]))], names=["x"], seed=seed + 1,
                     hints=[missing_chain_hint])
    checks.against_torch("gelu_tanh_backward", gelu_tanh_backward, "gelu_tanh_backward", act_backward_32(seed + 2, extreme),
                         hints=[missing_chain_hint])


gelu_families(220, gelu_extreme)
### BEGIN HIDDEN TESTS
gelu_families(230, gelu_extreme[::-1])
### END HIDDEN TESTS

# %% [markdown]
# ## 5. Depth needs nonlinearity
#
# Apply two affine layers in a row, with nothing in between:
#
# $$
# W_2 (W_1 x + b_1) + b_2 = (W_2 W_1)\, x + (W_2 b_1 + b_2) .
# $$
#
# The result is again an affine map, with weight $W_2 W_1$ and bias $W_2 b_1 + b_2$. By
# induction, any stack of $k$ affine layers equals one affine layer with
#
# $$
# W = W_k W_{k-1} \cdots W_1, \qquad b = \text{the result of } b \leftarrow W_i\, b + b_i \text{ for } i = 1, \dots, k
# $$
#
# (starting from $b = 0$). Note the order: the *first* layer's matrix is on the *right*, next to
# $x$, because it acts first. The product has shape $(\text{out}_k \times \text{in}_1)$, and
# $W_1 W_2$ would not even be defined unless the layers are square. A bias that is `None` counts
# as zero.
#
# So a deep network without nonlinearities is no more expressive than logistic (or softmax)
# regression, whatever its depth (D2L 5.1.1, UDL 4.1): with two classes its decision boundary is
# one hyperplane; with $C$ classes each class wins where its affine logit is the largest, so the
# regions are convex and their boundaries are pieces of hyperplanes, piecewise linear but never
# curved, and never able to wrap one class around another. The nonlinearity
# between the layers is what lets depth pay off. (A product of matrices can still *restrict* the
# map: with a narrow middle layer, $W$ has low rank.)
#
# **Worked example.** $W_1 = \begin{pmatrix} 1 & 2 \\ 0 & 1 \end{pmatrix}$, $b_1 = (1, 0)$,
# $W_2 = \begin{pmatrix} 1 & -1 \end{pmatrix}$, $b_2 = (2)$. Then
# $W = W_2 W_1 = \begin{pmatrix} 1 & 1 \end{pmatrix}$ and $b = W_2 b_1 + b_2 = 1 + 2 = 3$. Check
# with $x = (1, 1)$: the stack gives $W_1 x + b_1 = (4, 1)$ and then $4 - 1 + 2 = 5$; the single
# layer gives $1 + 1 + 3 = 5$.
#
# ### Exercise `collapse_linear_stack`
#
# Write `collapse_linear_stack(layers)`: `layers` is a list of `(W, b)` pairs applied in order,
# with no nonlinearity between them; return the single equivalent `(W, b)`.

# %% nbgrader={"grade": false, "grade_id": "collapse_linear_stack", "locked": false, "schema_version": 3, "solution": true, "task": false}
def collapse_linear_stack(layers):
    """The single affine layer equivalent to a stack of affine layers.

    layers : a non-empty list [(W1, b1), (W2, b2), ...], applied in that order (W1 first).
             Wi has shape (out_i, in_i) with in_{i+1} = out_i; bi has shape (out_i,) or is
             None (no bias, which counts as zero).

    Returns (W, b) with W of shape (out_last, in_first) and b of shape (out_last,) (an array,
    also when every bias is None), in the layers' dtype, such that
    linear(x, W, b) equals applying the layers one after the other.
    """
    ### BEGIN SOLUTION
    W_total, b_total = None, None
    for W, b in layers:
        b = np.zeros(W.shape[0], dtype=W.dtype) if b is None else b
        if W_total is None:
            W_total, b_total = W, b
        else:
            W_total, b_total = W @ W_total, W @ b_total + b  # the later layer acts on the left
    return W_total, b_total
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_collapse_linear_stack", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def collapse_flat(*flat):
    """collapse_linear_stack with the layers given as W1, b1, W2, b2, ... (the form the oracle takes)."""
    return collapse_linear_stack(list(zip(flat[0::2], flat[1::2])))


W1, b1 = np.array([[1.0, 2.0], [0.0, 1.0]]), np.array([1.0, 0.0])
W2, b2 = np.array([[1.0, -1.0]]), np.array([2.0])
got = checks.run_student("collapse_linear_stack", collapse_linear_stack, [(W1.copy(), b1.copy()), (W2.copy(), b2.copy())])
assert isinstance(got, (tuple, list)) and len(got) == 2, "[collapse_linear_stack] return the pair (W, b)"
checks.assert_close(got[0], np.array([[1.0, 1.0]]), task="collapse_linear_stack", case="worked example", name="W")
checks.assert_close(got[1], np.array([3.0]), task="collapse_linear_stack", case="worked example", name="b")
checks.against_torch("collapse_linear_stack", collapse_flat, "collapse_linear_stack", [
    checks.case("worked example", W1, b1, W2, b2),
])


def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    def stack(seed, sizes, dt, biases=True):
        flat = []
        for k, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            flat += [checks.randn(s + seed + 2 * k, n_out, n_in, dtype=dt),
                     checks.randn(s + seed + 2 * k + 1, n_out, dtype=dt) if biases else None]
        return flat


    cases = []
    for dt in (np.float64, np.float32):
        cases += [
            checks.case("one layer", *stack(141, [3, 4], dt)),
            checks.case("two layers 3 -> 4 -> 2", *stack(143, [3, 4, 2], dt)),
            checks.case("three layers 3 -> 5 -> 4 -> 2", *stack(147, [3, 5, 4, 2], dt)),
            checks.case("four square layers", *stack(153, [3, 3, 3, 3, 3], dt)),
            checks.case("a narrow middle layer 4 -> 1 -> 3", *stack(161, [4, 1, 3], dt)),
            checks.case("one output 5 -> 3 -> 1", *stack(165, [5, 3, 1], dt)),
            checks.case("no biases (None)", *stack(169, [3, 4, 2], dt, biases=False)),
            checks.case("a None bias in the middle", *stack(173, [2, 3, 2], dt)[:3], None,
                        *stack(177, [2, 4], dt)),
            checks.case("non-contiguous W (transposed)", checks.randn(s + 181, 3, 4, dtype=dt).T, checks.randn(s + 182, 4, dtype=dt),
                        checks.randn(s + 183, 4, 2, dtype=dt).T, checks.strided(checks.randn(s + 184, 2, dtype=dt))),
        ]
    checks.against_torch("collapse_linear_stack", collapse_flat, "collapse_linear_stack", cases)


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ### Explain `explain_linear_stack`
#
# In a few sentences (and at most a few lines of math):
#
# (a) A colleague trains a 3-class classifier on 2-D inputs with five affine layers of width 64
# and no activations, and hopes the depth lets it carve out a class that sits in a ring around
# another. Use `collapse_linear_stack` to say what function the network computes, what the three
# class regions in the plane can look like, and why the ring is out of reach however it is
# trained.
# (b) Someone puts a ReLU after the last layer of `mlp_logits`, arguing that "negative logits
# mean nothing". What does this do to the logits, to the probabilities a softmax makes of them,
# and to training?
# (c) The figure at the end trains nothing: it shows the XOR network of part 3 with one logit,
# and sliders for its weights. Why can no setting of its sliders classify all four XOR clusters
# correctly when the activation is "identity", while ReLU can?
#
# (Graded by hand; 12 points: (a) 4, (b) 4, (c) 4.)

# %% [markdown] nbgrader={"grade": true, "grade_id": "explain_linear_stack", "locked": false, "points": 12, "schema_version": 3, "solution": true, "task": false}
# **Model answer.**
#
# *(a) Five layers are one layer (4 points).* Composing affine maps gives an affine map,
# $W_2(W_1 x + b_1) + b_2 = (W_2 W_1)x + (W_2 b_1 + b_2)$, so `collapse_linear_stack` turns the
# five layers into one $z = Wx + b$ with $W$ of shape $(3, 2)$: softmax regression, whatever the
# widths. Class $c$ wins where $z_c = w_c^\top x + b_c$ is the largest logit, an intersection of
# the half-planes $z_c \ge z_{c'}$, so each class region is convex (a wedge or a strip), and the
# boundaries are pieces of straight lines: piecewise linear with three classes, one line with
# two. A ring is not convex around its hole (and the inner class would have to be surrounded by
# a convex region), so no $W$, $b$ draws it; depth without activations only changes how $W$ is
# parameterised (at most it lowers its rank).
#
# *(b) A ReLU on the logits (4 points).* Every negative logit becomes exactly 0, so the classes
# with negative pre-activations tie at 0 and the network can no longer rank them. The
# probabilities need not be large: logits $(5, 0, 0)$ still give $p \approx (0.987, 0.0066,
# 0.0066)$; but the lowest logit is 0, so no class can be pushed further down than the others that
# were clipped. Worse for training, ReLU's gradient is 0 for negative pre-activations, so a
# clipped output receives no gradient from the loss and stops learning. Logits are unconstrained
# by design; the loss (softmax, sigmoid) turns them into probabilities.
#
# *(c) XOR (4 points).* The XOR clusters at $(1, 1)$ and $(-1, -1)$ are one class and
# $(1, -1)$ and $(-1, 1)$ the other. With the identity activation the whole network is affine, so
# its boundary is a single line, and no line has both diagonal pairs on different sides: if
# $f(x) = w^\top x + b$ is positive at $(1,-1)$ and $(-1,1)$ and negative at $(1,1)$ and
# $(-1,-1)$, adding the first two gives $2b > 0$ and adding the last two gives $2b < 0$, a
# contradiction. With ReLU, the hidden units $\mathrm{relu}(x_1 - x_2)$ and
# $\mathrm{relu}(x_2 - x_1)$ are zero on the diagonal clusters and positive on the others, so in
# the hidden space the classes are separable by a line, and the output layer draws it: in input
# space the boundary is piecewise linear, two parallel lines here.

# %% [markdown]
# ## 6. Counting parameters
#
# `nn.Linear(n_in, n_out)` allocates a weight of shape `(n_out, n_in)` and, unless `bias=False`,
# a bias of shape `(n_out,)`: $n_{\text{in}} n_{\text{out}} + n_{\text{out}}$ numbers. An MLP
# with layer widths $(n_0, n_1, \dots, n_k)$ (input width first, number of logits last) has $k$
# such layers, so
#
# $$
# \#\text{params} = \sum_{i=1}^{k} \big( n_{i-1}\, n_i + n_i \big) \quad\text{(with biases)},
# \qquad \sum_{i=1}^{k} n_{i-1}\, n_i \quad\text{(without)}.
# $$
#
# Activations have no parameters, and the input layer has no bias of its own: biases belong to
# the *outputs* of each layer. The count is what `sum(p.numel() for p in model.parameters())`
# reports for `nn.Sequential(nn.Linear(n_0, n_1), nn.ReLU(), ..., nn.Linear(n_{k-1}, n_k))`
# (UDL 4.4 counts parameters the same way). It grows with the *products* of neighbouring widths:
# doubling every hidden width roughly quadruples the count.
#
# **Worked example.** `[784, 256, 10]` (MNIST images, 256 hidden units, 10 classes):
# $784 \cdot 256 + 256 = 200\,960$ for the first layer and $256 \cdot 10 + 10 = 2\,570$ for the
# second, $203\,530$ in total; without biases, $200\,704 + 2\,560 = 203\,264$.
#
# ### Exercise `mlp_parameter_count`
#
# Write `mlp_parameter_count(sizes, bias=True)`, the number of parameters of a
# `torch.nn.Sequential` of `nn.Linear(sizes[i], sizes[i + 1], bias=bias)` layers.

# %% nbgrader={"grade": false, "grade_id": "mlp_parameter_count", "locked": false, "schema_version": 3, "solution": true, "task": false}
def mlp_parameter_count(sizes, bias=True):
    """Number of parameters of nn.Sequential(nn.Linear(sizes[0], sizes[1], bias=bias), ...).

    sizes : a list (or tuple) of at least two layer widths, input width first, number of outputs last.
    bias  : whether every layer has a bias.

    Returns the count as an integer; for example [784, 256, 10] -> 203530.
    """
    ### BEGIN SOLUTION
    return sum(n_in * n_out + (n_out if bias else 0) for n_in, n_out in zip(sizes[:-1], sizes[1:]))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_mlp_parameter_count", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def count_hint(got, expected):
    return ("each nn.Linear(n_in, n_out) has n_in * n_out weights and, only when bias=True, n_out biases "
            "(one per output); activations have no parameters.")


checks.against_torch("mlp_parameter_count", mlp_parameter_count, "mlp_parameter_count", [
    checks.case("worked example", [784, 256, 10]),
    checks.case("worked example, no biases", [784, 256, 10], bias=False),
], check_dtype=False, hints=[count_hint])


def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    cases = []
    for bias in (True, False):
        cases += [
            checks.case("one layer", [768, 3072], bias=bias),
            checks.case("a deep MLP", [10, 20, 30, 40, 5], bias=bias),
            checks.case("a tuple of widths", (3, 7, 2), bias=bias),
            checks.case("width 1 in the middle", [50, 1, 50], bias=bias),
            checks.case("one input, one output", [1, 1], bias=bias),
            checks.case("a wide MLP", [4096, 4096, 4096, 1000], bias=bias),
        ]
    checks.against_torch("mlp_parameter_count", mlp_parameter_count, "mlp_parameter_count", cases, check_dtype=False,
                         hints=[count_hint])


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ### Concept check `linear_params`
#
# A transformer block of a BERT-base-sized model widens each token's 768 features to 3072 with
# `nn.Linear(768, 3072)`. How many parameters does this one layer have? Set
# `linear_768_3072_params` to a whole number.

# %% nbgrader={"grade": false, "grade_id": "linear_params", "locked": false, "schema_version": 3, "solution": true, "task": false}
linear_768_3072_params = None  # the number of parameters of nn.Linear(768, 3072)
### BEGIN SOLUTION
linear_768_3072_params = 768 * 3072 + 3072
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_linear_params", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# Stored as a digest (checks.answer_digest), so that this cell does not print the answer.
hint = "nn.Linear(in, out) has an (out, in) weight and a bias of size out, not in."
checks.check_hash("linear_params", "linear_768_3072_params", linear_768_3072_params,
                  "3b428298b1deec0282aaa696c711f23770f1060824f21b1d58d36f5e7daaf2a1", hint=hint)
### BEGIN HIDDEN TESTS
# A (3072, 768) weight and a (3072,) bias: in * out + out, exactly.
n_in, n_out = 768, 3072
checks.check_value("linear_params", "linear_768_3072_params", linear_768_3072_params, n_in * n_out + n_out, hint=hint)
### END HIDDEN TESTS


# %% [markdown]
# ## 7. Figure: a 2-D toy classifier
#
# The figure shows the two-layer network of part 3 with two inputs, two hidden units and one
# output logit $z$, on four clusters of points in the XOR pattern: the clusters at $(1, 1)$ and
# $(-1, -1)$ are class 0 (blue), those at $(1, -1)$ and $(-1, 1)$ are class 1 (red). The class is
# predicted as 1 where $z > 0$, that is where $\sigma(z) > \tfrac12$.
#
# - **Left:** the logit surface $z(x_1, x_2)$ as colours (red positive, blue negative), the
#   decision boundary $z = 0$ as a black line, and the data.
# - **Right:** the same points after the hidden layer, $h = \phi(W_1 x + b_1)$, with the output
#   layer's boundary $W_2 h + b_2 = 0$, always a straight line in this space.
#
# The sliders set $W_1$, $b_1$, $W_2$ and $b_2$, and the menu sets $\phi$. The initial weights
# are those of the XOR network of part 3 (its first logit) with ReLU: the hidden layer folds the
# plane so that a line in hidden space separates the classes. Switch to "identity" and try to find weights that
# classify everything (see `explain_linear_stack`); then try sigmoid, tanh, SiLU and GELU with
# the same weights, and see how the smooth activations bend the boundary.
#
# The figure computes its own activations, so it works before the exercises are done.

# %% nbgrader={"grade": false, "grade_id": "toy_classifier_figure", "locked": true, "schema_version": 3, "solution": false, "task": false}
import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display

FIGURE_ACTIVATIONS = {
    "relu": lambda h: np.maximum(h, 0),
    "sigmoid": lambda h: 0.5 * (1 + np.tanh(0.5 * h)),
    "tanh": np.tanh,
    "silu": lambda h: h * 0.5 * (1 + np.tanh(0.5 * h)),
    "gelu_tanh": lambda h: 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3))),
    "identity": lambda h: h,
}
_figure_rng = np.random.default_rng(0)
FIGURE_CENTERS = np.array([[1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]])
FIGURE_X = np.concatenate([c + 0.3 * _figure_rng.standard_normal((25, 2)) for c in FIGURE_CENTERS])
FIGURE_Y = np.repeat([0, 0, 1, 1], 25)
_grid = np.linspace(-2.5, 2.5, 161)
FIGURE_GRID = np.stack(np.meshgrid(_grid, _grid), axis=-1)  # (161, 161, 2)


def draw_toy_classifier(w11, w12, w21, w22, c1, c2, v1, v2, c0, activation):
    W1_ = np.array([[w11, w12], [w21, w22]])
    b1_ = np.array([c1, c2])
    w2_ = np.array([v1, v2])
    phi = FIGURE_ACTIVATIONS[activation]
    z_grid = phi(FIGURE_GRID @ W1_.T + b1_) @ w2_ + c0
    h = phi(FIGURE_X @ W1_.T + b1_)
    accuracy = np.mean((h @ w2_ + c0 > 0) == (FIGURE_Y == 1))
    fig, (ax_z, ax_h) = plt.subplots(1, 2, figsize=(11, 4.6))
    top = max(float(np.max(np.abs(z_grid))), 1e-6)
    surface = ax_z.contourf(_grid, _grid, z_grid, levels=np.linspace(-top, top, 21), cmap="RdBu_r")
    if np.min(z_grid) < 0 < np.max(z_grid):
        ax_z.contour(_grid, _grid, z_grid, levels=[0.0], colors="black", linewidths=2)
    fig.colorbar(surface, ax=ax_z, label="logit z")
    colors = np.where(FIGURE_Y == 1, "tab:red", "tab:blue")
    ax_z.scatter(FIGURE_X[:, 0], FIGURE_X[:, 1], c=colors, edgecolors="white", s=25)
    ax_z.set_xlabel("$x_1$")
    ax_z.set_ylabel("$x_2$")
    ax_z.set_title(f"logit surface and boundary z = 0 ({activation}); accuracy {accuracy:.0%}")
    ax_h.scatter(h[:, 0], h[:, 1], c=colors, edgecolors="white", s=25)
    lo = float(min(h.min(), 0.0)) - 0.5
    hi = float(max(h.max(), 1.0)) + 0.5
    line = np.linspace(lo, hi, 2)
    if abs(v2) > 1e-9:
        ax_h.plot(line, -(c0 + v1 * line) / v2, color="black", linewidth=2)
    elif abs(v1) > 1e-9:
        ax_h.axvline(-c0 / v1, color="black", linewidth=2)
    ax_h.set_xlim(lo, hi)
    ax_h.set_ylim(lo, hi)
    ax_h.set_xlabel("$h_1$")
    ax_h.set_ylabel("$h_2$")
    ax_h.set_title("hidden space h = phi(W1 x + b1), boundary W2 h + b2 = 0")
    fig.tight_layout()
    plt.show()


def _weight_slider(value, description):
    return widgets.FloatSlider(value=value, min=-3.0, max=3.0, step=0.1, description=description,
                               continuous_update=False, layout=widgets.Layout(width="260px"))


figure_controls = {
    "w11": _weight_slider(1.0, "W1[0,0]"), "w12": _weight_slider(-1.0, "W1[0,1]"),
    "w21": _weight_slider(-1.0, "W1[1,0]"), "w22": _weight_slider(1.0, "W1[1,1]"),
    "c1": _weight_slider(0.0, "b1[0]"), "c2": _weight_slider(0.0, "b1[1]"),
    "v1": _weight_slider(1.0, "W2[0,0]"), "v2": _weight_slider(1.0, "W2[0,1]"),
    "c0": _weight_slider(-1.0, "b2[0]"),
    "activation": widgets.Dropdown(options=list(FIGURE_ACTIVATIONS), value="relu", description="activation"),
}
figure_output = widgets.interactive_output(draw_toy_classifier, figure_controls)
display(widgets.VBox([widgets.HBox([figure_controls[k] for k in row])
                      for row in (("w11", "w12", "c1"), ("w21", "w22", "c2"), ("v1", "v2", "c0"), ("activation",))]),
        figure_output)

# %% [markdown]
# ## 8. Putting it together
#
# With a forward pass and hand-derived backward rules we can already train a network. The locked
# cell below fits the two-layer ReLU MLP of part 3 (two inputs, eight hidden units, one logit) to
# the XOR clusters of the figure, by gradient descent. The forward pass is our `mlp_logits`; the
# loss is the mean binary cross-entropy of unit 1.2, whose gradient with respect to the logit is
# $(\sigma(z) - y) / N$ (given here, derived in unit 1.2), computed with our `sigmoid`; and the
# backward pass chains our `linear_backward` and `relu_backward` from the logit down to $W_1$.
# A network without the ReLU could not get past 50% here (part 5).

# %% nbgrader={"grade": false, "grade_id": "putting_it_together", "locked": true, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(1)
X = np.concatenate([c + 0.3 * _rng.standard_normal((25, 2)) for c in FIGURE_CENTERS])  # (100, 2)
y = np.repeat([0.0, 0.0, 1.0, 1.0], 25)  # the XOR classes
params = {"W1": _rng.standard_normal((8, 2)), "b1": np.zeros(8),
          "W2": 0.5 * _rng.standard_normal((1, 8)), "b2": np.zeros(1)}
with checks.when_written("this example"):
    for step in range(301):
        pre = linear(X, params["W1"], params["b1"])  # forward, keeping what backward needs
        h = relu(pre)
        z = mlp_logits(X, params["W1"], params["b1"], params["W2"], params["b2"])[:, 0]
        p = sigmoid(z)
        if step % 100 == 0:
            loss = np.mean(np.logaddexp(0, z) - y * z)  # binary cross-entropy on logits (unit 1.2)
            print(f"step {step:3d}: loss {loss:.4f}, accuracy {np.mean((z > 0) == (y == 1)):.0%}")
        grad_z = ((p - y) / len(y))[:, None]  # d(mean BCE)/dz, (N, 1)
        grad_h, grad_W2, grad_b2 = linear_backward(h, params["W2"], grad_z)
        _, grad_W1, grad_b1 = linear_backward(X, params["W1"], relu_backward(pre, grad_h))
        for name, grad in zip(["W1", "b1", "W2", "b2"], [grad_W1, grad_b1, grad_W2, grad_b2]):
            params[name] = params[name] - 1.0 * grad  # one step of gradient descent

# %% [markdown]
# ## Summary
#
# - An affine layer computes $y = x W^\top + b$ with PyTorch's `(out, in)` weight, for any leading
#   batch axes; `np.matmul` broadcasts over them.
# - ReLU, sigmoid, SiLU and GELU are elementwise. Sigmoid (and with it SiLU) is computed from
#   $e^{-|x|}$ so that nothing overflows, and constants are Python floats so that float32 stays
#   float32.
# - An MLP's last layer outputs logits: unconstrained scores whose differences are log-ratios of
#   probabilities, turned into probabilities by a sigmoid or softmax only at the end.
# - Backward passes are vector-Jacobian products: $\bar x = \bar y W$, $\bar W = \bar Y^\top X$
#   and $\bar b = \sum \bar y$ over every batch position for the affine layer, and
#   $\bar y \odot \phi'(x)$ for an activation, with ReLU's gradient 0 at the kink.
# - Without nonlinearities a stack of affine layers is one affine layer,
#   $W = W_k \cdots W_1$; the parameter count of an MLP is $\sum (n_{i-1} n_i + n_i)$.
#
# Next, in unit 1.2, the logits go into a softmax and a cross-entropy loss, computed stably, and
# its gradient with respect to the logits starts the backward pass that this unit's rules
# continue.

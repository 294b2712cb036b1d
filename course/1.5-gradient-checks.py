# %% [markdown]
# # 1.5 Gradient checks with finite differences
#
# Our engine from units 1.3 and 1.4 computes gradients by reverse accumulation: every operation
# applies its own hand-derived backward rule, and the engine chains them. A single wrong sign or a
# missing square in one rule gives gradients that are wrong, yet finite and plausible: training
# still runs, the loss may even go down, and nothing crashes. The only reliable way to catch such
# a bug is to compare the analytic gradient with one computed in a completely different way. In
# this unit we build that second way, **finite differences**, and the tool that compares the two,
# a **gradient check** with the same rule and defaults as `torch.autograd.gradcheck`.
#
# Finite differences look like a one-liner, but floating-point arithmetic makes them a balancing
# act between two errors. We derive both, measure them, find out why gradient checks run in
# float64 and never in float32, and learn where a check gives false alarms (at the kink of a
# ReLU). At the end we use our checker to find a planted bug in an engine, and then run it over
# every operation we have written so far.
#
# ## Learning goals
#
# After this unit we can:
#
# 1. derive the central difference from Taylor's theorem, and say why its error shrinks like
#    $h^2$ while the one-sided difference's shrinks like $h$;
# 2. compute numerical gradients and vector-Jacobian products of array functions without
#    changing their input;
# 3. compare an analytic and a numeric gradient with PyTorch's test
#    $|a - n| \le \text{atol} + \text{rtol}\,|n|$, and report the worst coordinate;
# 4. balance truncation error against rounding error, predict the best step in float64 and in
#    float32, and choose a tolerance that fits the step;
# 5. recognise false alarms at non-differentiable points such as ReLU's kink;
# 6. use a gradient checker to locate a wrong backward rule in an engine.
#
# ## Readings
#
# - **CS231n**, *Neural Networks Part 3: Learning and Evaluation*, section *Gradient checks*:
#   use the centered formula, use relative error for the comparison, use double precision, and
#   beware of kinks in the objective. <https://cs231n.github.io/neural-networks-3/#gradcheck>
# - **Understanding Deep Learning** (Prince), chapter 7 *Gradients and initialization*, sections
#   7.2 to 7.4 (computing derivatives, a toy example, the backpropagation algorithm): the
#   gradients that our checker verifies. <https://udlbook.github.io/udlbook/>
# - **Dive into Deep Learning**, section 2.4 *Calculus* (the difference quotient as the
#   definition of the derivative) and section 5.3 *Forward Propagation, Backward Propagation,
#   and Computational Graphs*. <https://d2l.ai/chapter_preliminaries/calculus.html>
# - **PyTorch documentation**: `torch.autograd.gradcheck` (its arguments `eps=1e-6`,
#   `atol=1e-5`, `rtol=1e-3`, and its advice to use double precision) and the note *Gradcheck
#   mechanics*. <https://pytorch.org/docs/stable/notes/gradcheck.html>
# - Optional: Goldberg, *What every computer scientist should know about floating-point
#   arithmetic* (1991), sections 1.1 to 1.4, on relative error, ulps and cancellation.
#
# ## How this notebook works
#
# Each exercise has a heading with its task ID, the math, a worked example, a cell for our code
# and a test cell. The test cells run visible checks that we can run ourselves; when the notebook
# is graded, hidden checks run the same kinds of cases with other seeds and shapes, and compare
# with PyTorch's autograd and with central differences. Three rules hold throughout:
#
# - **NumPy only.** A solution that calls torch earns no points for that exercise.
# - **Same dtype in and out.** A function given a float32 array returns float32, unless its
#   docstring says otherwise.
# - **No warnings.** A NumPy `RuntimeWarning` fails the check: nbgrader gives no points to a test
#   cell that writes to stderr.
#
# | part | task | points |
# |---|---|---|
# | 1 | `numerical_gradient` | 12 |
# | 1 | `numerical_vjp` | 8 |
# | 1 | concept check `difference_errors` | 4 |
# | 2 | `relative_error` | 7 |
# | 2 | `gradcheck` (two test cells: the verdict, and the error it raises) | 16 + 8 |
# | 3 | `step_size_sweep` | 8 |
# | 3 | concept check `best_step` | 3 |
# | 3 | `explain_float32` (written, graded by hand) | 12 |
# | 4 | `kink_mask` | 6 |
# | 4 | concept check `kink_value` | 3 |
# | 5 | `find_the_bug` | 13 |
# | | **total** | **100** |

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import numpy as np
from autograder.inside import checks

# %% [markdown]
# ## 1. Central differences
#
# The derivative is a limit of difference quotients, $f'(x) = \lim_{h \to 0} (f(x+h) - f(x))/h$.
# A computer cannot take the limit, so it stops at a small step $h$ and accepts an error. Taylor's
# theorem tells us how large that error is. Expanding $f$ around $x$,
#
# $$
# f(x \pm h) = f(x) \pm h f'(x) + \frac{h^2}{2} f''(x) \pm \frac{h^3}{6} f'''(x) + O(h^4).
# $$
#
# **The forward (one-sided) difference** keeps only the $+$ expansion:
#
# $$
# \frac{f(x+h) - f(x)}{h} = f'(x) + \frac{h}{2} f''(x) + O(h^2),
# $$
#
# so its error is proportional to $h$: a first-order method.
#
# **The central difference** subtracts the two expansions. The even terms $f(x)$ and
# $\tfrac{h^2}{2} f''(x)$ cancel, and dividing by $2h$ leaves
#
# $$
# \frac{f(x+h) - f(x-h)}{2h} = f'(x) + \frac{h^2}{6} f'''(x) + O(h^4),
# $$
#
# an error proportional to $h^2$: a second-order method, for the price of one more evaluation
# of $f$. This error, which comes from cutting off the Taylor series, is the **truncation
# error**. It is what CS231n means by "use the centered formula".
#
# **Many inputs.** For $f : \mathbb{R}^n \to \mathbb{R}$ we apply the same formula to one
# coordinate at a time, moving along the unit vector $e_i$:
#
# $$
# \frac{\partial f}{\partial x_i}(x) \approx \frac{f(x + h e_i) - f(x - h e_i)}{2h}, \qquad i = 1, \dots, n .
# $$
#
# That is $2n$ evaluations of $f$ for the whole gradient, against one backward pass for reverse
# mode: fine for checking a small case, far too slow for training. For an array $x$ of any shape,
# "coordinate $i$" is a multi-index such as `(1, 2)`; `np.ndindex(x.shape)` lists them all, and
# for a 0-d array it gives the single index `()`.
#
# **Leaving $x$ as we found it.** The simplest way to form $x \pm h e_i$ is to change `x[i]` in
# place, call $f$, and change it back. If we forget to put the old value back, or put back a
# value computed as `x[i] + h - 2*h + h` (which need not equal `x[i]` in floating point), every
# later coordinate is differentiated at a different point, and the caller's array, often a
# parameter of a model, is silently corrupted. So we save `old = x[i]` and restore exactly
# `x[i] = old`. Working on a copy of $x$ is just as good. One trap: `x.reshape(-1)` (like
# `x.ravel()`) is a view only when NumPy can walk through `x` in C order with one fixed stride:
# a contiguous `x`, or one sliced with a step along its last axis such as `base[:, ::2]`. For a
# transposed `x` (`base.T`), or a slice that skips part of each row (`base[:, :2]`), it is a
# copy, and changing the copy does not change what $f$ sees: the gradient comes out all zeros.
# `x.flat[k]` and `x[index]` always write into `x` itself.
#
# **Worked example.** $f(x) = x^3$ at $x = 2$, where $f'(2) = 12$ and $f''' = 6$, so the central
# error is exactly $\tfrac{h^2}{6} \cdot 6 = h^2$. With $h = 0.1$:
#
# - forward: $(2.1^3 - 2^3)/0.1 = (9.261 - 8)/0.1 = 12.61$, error $0.61$
#   ($\approx \tfrac{h}{2} f''(2) = 0.05 \cdot 12 = 0.6$);
# - central: $(2.1^3 - 1.9^3)/0.2 = (9.261 - 6.859)/0.2 = 12.01$, error $0.01 = h^2$.
#
# Dividing by $h$ instead of $2h$ would give $24.02$: twice the derivative.
#
# ### Exercise `numerical_gradient`
#
# Write `numerical_gradient(f, x, eps=1e-6)`: the central-difference gradient of a scalar function
# `f` at the array `x`.

# %% nbgrader={"grade": false, "grade_id": "numerical_gradient", "locked": false, "schema_version": 3, "solution": true, "task": false}
def numerical_gradient(f, x, eps=1e-6):
    """Central-difference gradient of the scalar function f at the array x.

    f   : called as f(v) with an array v of x's shape and dtype; returns a scalar (a float or a
          0-d array).
    x   : a float32 or float64 array of any shape, including 0-d and non-contiguous arrays.
    eps : the step h of (f(x + h e_i) - f(x - h e_i)) / (2 h), for every coordinate i.

    Returns an array of x's shape and dtype. When it returns, x holds exactly its old values.
    """
    ### BEGIN SOLUTION
    grad = np.zeros(x.shape, dtype=x.dtype)
    for index in np.ndindex(x.shape):
        old = x[index]
        try:
            x[index] = old + eps
            plus = f(x)
            x[index] = old - eps
            minus = f(x)
        finally:
            x[index] = old  # the saved value, not old + eps - eps
        grad[index] = (plus - minus) / (2 * eps)
    return grad
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_numerical_gradient", "locked": true, "points": 12, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks


def np_scalar(v):
    """The NumPy twin of the oracle "gc_scalar": sum(v^3) / 3 + sum(tanh(v) * v)."""
    return np.sum(v * v * v) / 3 + np.sum(np.tanh(v) * v)


def difference_hint(got, expected):
    nonzero = expected != 0
    if np.any(nonzero) and np.all(got == 0):
        return ("the gradient is all zeros, so f never saw the perturbation: x.reshape(-1) (or x.ravel()) of a "
                "transposed x, or of a slice such as base[:, :2], is a copy, and writing into the copy leaves x "
                "unchanged. Write into x itself: x[index] with np.ndindex(x.shape), or x.flat[k].")
    if np.any(nonzero) and np.all(np.abs(got[nonzero] - 2 * expected[nonzero]) <= 1e-3 * np.abs(expected[nonzero])):
        return "twice the central difference: divide f(x + h) - f(x - h) by 2 h, not by h."
    return ("check the formula (f(x + h e_i) - f(x - h e_i)) / (2 h): a one-sided difference (f(x + h) - f(x)) / h "
            "has an error proportional to h, and shows here.")


def check_numerical_gradient(label, f, x, oracle=None, eps=None):
    """numerical_gradient(f, x[, eps]) against the exact central difference with that step (and, with
    an oracle, against torch's gradient); x must come back unchanged, bit for bit."""
    before = x.copy()
    kwargs = {} if eps is None else {"eps": eps}
    c = checks.case(label, x, **kwargs)
    got = checks.run_student("numerical_gradient", numerical_gradient, f, x, **kwargs)
    if not np.array_equal(x, before, equal_nan=True):
        k = np.unravel_index(np.argmax(x != before), x.shape) if x.ndim else ()
        raise checks.CheckFailure(
            f"[numerical_gradient] {c.describe()}: x was changed: at index {k} it held {before[k]!r} and now holds "
            f"{x[k]!r}. Save old = x[i] before perturbing and restore x[i] = old afterwards.")
    h = 1e-6 if eps is None else eps
    if x.dtype == np.float64:
        # The same central difference, coordinate by coordinate, in float64: only the order of a few
        # roundings may differ, a relative 1e-9 at h = 1e-3 (1e-6 at h = 1e-6).
        exact = checks.numerical_vjp(f, [x], 0, np.ones(()), eps=h)
        tol = 1e-9 if h >= 1e-4 else 1e-6
        checks.assert_close(got, exact, task="numerical_gradient", case=c.describe() + " vs the central difference",
                            name="gradient", rtol=tol, atol=tol, kind="grad", hints=[difference_hint])
    if oracle is not None:
        (expected,) = checks.torch_gradients(oracle, [x.astype(np.float64)])
        # float64, h = 1e-6: truncation h^2 |f'''| / 6 ~ 1e-12, rounding ~1e-16 |f| / h ~ 1e-9 for |f| ~ 10.
        # float32 with h = 1e-2 (the only float32 step used): rounding ~6e-8 |f| / h ~ 1e-4 |f|, |f| < 10.
        rtol, atol = (1e-6, 1e-7) if x.dtype == np.float64 else (1e-2, 2e-3)
        checks.assert_close(got, expected.astype(x.dtype), task="numerical_gradient", case=c.describe() + " vs torch autograd",
                            name="gradient", rtol=rtol, atol=atol, kind="grad", hints=[difference_hint])
    return got


# The worked example: f(x) = x^3 at 2 with h = 0.1 gives (2.1^3 - 1.9^3) / 0.2 = 12.01.
got = check_numerical_gradient("worked example, h = 0.1", lambda v: np.sum(v**3), np.array([2.0]), eps=0.1)
checks.assert_close(got, np.array([(2.1**3 - 1.9**3) / 0.2]), task="numerical_gradient",
                    case="worked example, f(x) = x^3 at x = 2 with eps = 0.1", name="gradient", hints=[difference_hint])
for label, x in [("random (3, 4)", checks.randn(1, 3, 4)),
                 ("0-d", np.asarray(0.7)),
                 ("size-1 axes", checks.randn(2, 1, 3, 1)),
                 ("non-contiguous (sliced with a step)", checks.strided(checks.randn(3, 2, 3))),
                 ("non-contiguous (sliced, part of each row)", checks.randn(7, 3, 5)[:, :2]),
                 ("non-contiguous (transposed)", checks.randn(4, 3, 2).T)]:
    check_numerical_gradient(label, np_scalar, x, oracle="gc_scalar")
    check_numerical_gradient(label + ", eps = 1e-3", np_scalar, x, eps=1e-3)
check_numerical_gradient("float32, eps = 1e-2", np_scalar, checks.randn(5, 2, 3, dtype=np.float32), oracle="gc_scalar",
                         eps=1e-2)
got32 = check_numerical_gradient("float32, default eps", np_scalar, checks.randn(6, 4, dtype=np.float32))
assert got32.dtype == np.float32, f"[numerical_gradient] a float32 x gives a float32 gradient, got {got32.dtype}"
### BEGIN HIDDEN TESTS
for s, shape in enumerate([(5,), (2, 3, 2), (1,), (4, 1)]):
    x = checks.randn(100 + s, *shape)
    check_numerical_gradient(f"random {shape}", np_scalar, x, oracle="gc_scalar")
    check_numerical_gradient(f"random {shape}, eps = 1e-3", np_scalar, x, eps=1e-3)
    check_numerical_gradient(f"random {shape}, eps = 1e-2", np_scalar, x, eps=1e-2)
check_numerical_gradient("0-d, eps = 1e-3", np_scalar, np.asarray(-1.3), eps=1e-3, oracle="gc_scalar")
check_numerical_gradient("non-contiguous (sliced)", np_scalar, checks.strided(checks.randn(110, 3, 3)), oracle="gc_scalar")
check_numerical_gradient("non-contiguous (transposed, 3-D)", np_scalar, checks.randn(111, 2, 3, 4).transpose(2, 0, 1),
                         oracle="gc_scalar")
check_numerical_gradient("non-contiguous, eps = 1e-3", np_scalar, checks.randn(112, 4, 3).T, eps=1e-3)
check_numerical_gradient("sliced, part of each row", np_scalar, checks.randn(113, 2, 3, 4)[:, 1:, :3], oracle="gc_scalar")
for s in range(3):
    x32 = checks.randn(120 + s, 3, 2, dtype=np.float32)
    check_numerical_gradient("float32, eps = 1e-2", np_scalar, x32, oracle="gc_scalar", eps=1e-2)
    got32 = check_numerical_gradient("float32, default eps", np_scalar, checks.strided(x32))
    assert got32.dtype == np.float32, f"[numerical_gradient] a float32 (sliced) x gives a float32 gradient, got {got32.dtype}"
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise `numerical_vjp`
#
# Reverse mode never forms a Jacobian. For $f : \mathbb{R}^n \to \mathbb{R}^m$ and an upstream
# gradient $g \in \mathbb{R}^m$ (the shape of $f(x)$), each backward rule computes the
# **vector-Jacobian product** $g^\top J$, whose entry $i$ is $\sum_j g_j \, \partial f_j / \partial x_i$.
# That is exactly the gradient of the scalar function
#
# $$
# \phi(x) = \sum_j g_j f_j(x) = \texttt{np.sum(g * f(x))},
# $$
#
# so one call of `numerical_gradient` on $\phi$ gives the numeric VJP to compare with a backward
# rule. A random $g$ matters: with $g$ all ones, $\phi$ is just `f(x).sum()`, and a backward rule
# that mixes up which output goes with which input (a missing transpose, a forgotten permutation)
# can still give the right sum. Because $g$ multiplies $f$ inside $\phi$, a zero $g$ gives a zero
# gradient, exactly.
#
# **Worked example.** $f(x_1, x_2) = (x_1 x_2,\ x_1 + x_2)$ at $x = (1, 2)$ with $g = (1, 10)$:
# $\phi = x_1 x_2 + 10 (x_1 + x_2)$, so $g^\top J = (x_2 + 10,\ x_1 + 10) = (12, 11)$. Weighting the
# numerical gradient of $\sum_j f_j$ by $g$ afterwards would give the wrong $(1 \cdot 3, 10 \cdot 3) = (3, 30)$:
# for a function that is not elementwise, $g$ has to go inside.
#
# Write `numerical_vjp(f, x, grad_out, eps=1e-6)`.

# %% nbgrader={"grade": false, "grade_id": "numerical_vjp", "locked": false, "schema_version": 3, "solution": true, "task": false}
def numerical_vjp(f, x, grad_out, eps=1e-6):
    """Central-difference vector-Jacobian product grad_out^T (df/dx) of an array function f.

    f        : called as f(v) with an array v of x's shape and dtype; returns an array of
               grad_out's shape.
    x        : a float32 or float64 array of any shape, including 0-d and non-contiguous arrays.
    grad_out : the upstream gradient, an array of f(x)'s shape.

    Returns the gradient of sum(grad_out * f(x)) with respect to x: an array of x's shape and
    dtype. When it returns, x holds exactly its old values.
    """
    ### BEGIN SOLUTION
    grad_out = np.asarray(grad_out)
    return numerical_gradient(lambda v: np.sum(grad_out * f(v)), x, eps)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_numerical_vjp", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks


def check_numerical_vjp(label, f, oracle, x, extra=(), seed=0):
    """numerical_vjp(f, x, g) against torch's VJP for a random g, a zero g (zero gradient), and x unchanged."""
    c = checks.case(label, x)
    before = x.copy()
    (expected_shape,) = {np.shape(f(x.copy()))}
    for kind, g in [("random", checks.randn(seed, *expected_shape)), ("zero", np.zeros(expected_shape))]:
        # what we expect, before numerical_vjp runs, from arrays it never receives (a write into one it receives
        # reaches our copy: that is how we see x changed)
        (expected,) = checks.torch_gradients(oracle, [before, *extra], g)
        got = checks.run_student("numerical_vjp", numerical_vjp, f, x, g.copy())
        if not np.array_equal(x, before):
            raise checks.CheckFailure(f"[numerical_vjp] {c.describe()}: x was changed; it must hold exactly its old values "
                                      "when numerical_vjp returns.")
        # float64, h = 1e-6: rounding ~1e-16 |sum(g * f)| / h ~ 1e-9; truncation ~1e-12.
        checks.assert_close(got, expected, task="numerical_vjp", case=f"{c.describe()} with a {kind} grad_out vs torch",
                            name="vjp", rtol=1e-6, atol=1e-7, kind="grad", hints=[lambda got, exp: (
                                "is grad_out inside the sum? The VJP is the gradient of sum(grad_out * f(x)), "
                                "not grad_out times a gradient of sum(f(x)).")])


W = checks.randn(20, 4, 3)
tanh_matmul = lambda v: np.tanh(v @ W)
W_ORACLE = W.copy()  # the oracle's W, which no code of ours receives
worked = lambda v: np.array([v[0] * v[1], v[0] + v[1]])
got = checks.run_student("numerical_vjp", numerical_vjp, worked, np.array([1.0, 2.0]), np.array([1.0, 10.0]))
checks.assert_close(got, np.array([2.0 + 10.0, 1.0 + 10.0]), task="numerical_vjp", case="worked example", name="vjp",
                    rtol=1e-6, atol=1e-7)
check_numerical_vjp("exp, (3, 4)", np.exp, "exp", checks.randn(21, 3, 4), seed=1)
check_numerical_vjp("tanh(x @ W), (2, 4)", tanh_matmul, "gc_tanh_matmul", checks.randn(22, 2, 4), extra=(W_ORACLE,),
                    seed=2)
check_numerical_vjp("tanh(x @ W), non-contiguous", tanh_matmul, "gc_tanh_matmul", checks.randn(23, 4, 2).T,
                    extra=(W_ORACLE,), seed=3)
check_numerical_vjp("exp, 0-d", np.exp, "exp", np.asarray(0.3), seed=4)
check_numerical_vjp("exp, size-1 axes", np.exp, "exp", checks.randn(24, 1, 3, 1), seed=5)
x32 = checks.randn(25, 3, dtype=np.float32)
got32 = checks.run_student("numerical_vjp", numerical_vjp, np.exp, x32, np.ones(3, dtype=np.float32))
assert got32.dtype == np.float32 and np.array_equal(x32, checks.randn(25, 3, dtype=np.float32)), \
    "[numerical_vjp] a float32 x must come back unchanged, and its VJP is float32."
### BEGIN HIDDEN TESTS
W2 = checks.randn(30, 3, 5)
tanh_matmul2 = lambda v: np.tanh(v @ W2)
W2_ORACLE = W2.copy()
for s, shape in enumerate([(5,), (2, 3, 2), (1,), ()]):
    check_numerical_vjp(f"exp, {shape}", np.exp, "exp", checks.randn(31 + s, *shape), seed=10 + s)
for s, rows in enumerate([1, 3, 4]):
    check_numerical_vjp(f"tanh(x @ W), ({rows}, 3)", tanh_matmul2, "gc_tanh_matmul", checks.randn(40 + s, rows, 3),
                        extra=(W2_ORACLE,), seed=20 + s)
check_numerical_vjp("tanh(x @ W), sliced", tanh_matmul2, "gc_tanh_matmul", checks.strided(checks.randn(45, 2, 3)),
                    extra=(W2_ORACLE,), seed=25)
check_numerical_vjp("exp, transposed", np.exp, "exp", checks.randn(46, 3, 2).T, seed=26)
### END HIDDEN TESTS

# %% [markdown]
# ### Concept check `difference_errors`
#
# Take the worked example again, $f(x) = x^3$ at $x = 2$, now with $h = 0.01$. What are the
# errors (computed value minus 12) of the central and of the forward difference? Set
# `central_error` and `forward_error` to numbers; four significant digits are enough. (Predict
# them from the error terms first, then compute them.)

# %% nbgrader={"grade": false, "grade_id": "difference_errors", "locked": false, "schema_version": 3, "solution": true, "task": false}
central_error = None  # (f(2 + h) - f(2 - h)) / (2 h) - 12 for f(x) = x^3 and h = 0.01
forward_error = None  # (f(2 + h) - f(2)) / h - 12
### BEGIN SOLUTION
central_error = 0.01**2  # h^2 f'''/6 with f''' = 6: exactly h^2
forward_error = 0.01 / 2 * 12 + 0.01**2  # h f''/2 + h^2 f'''/6
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_difference_errors", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# The expected errors are the two differences themselves, evaluated in float64 (the hidden part checks
# that they equal the Taylor error terms). 1e-3 relative: four significant digits.
h, x0 = 0.01, 2.0
expected_central = ((x0 + h)**3 - (x0 - h)**3) / (2 * h) - 3 * x0**2
expected_forward = ((x0 + h)**3 - x0**3) / h - 3 * x0**2
checks.check_value("difference_errors", "central_error", central_error, expected_central,
                   rtol=1e-3, hint="the central error is h^2 f'''(x) / 6, and f''' = 6 for x^3: it shrinks 100-fold when h does 10-fold.")
checks.check_value("difference_errors", "forward_error", forward_error, expected_forward,
                   rtol=1e-3, hint="the forward error is h f''(x) / 2 + h^2 f'''(x) / 6, with f''(2) = 12.")
### BEGIN HIDDEN TESTS
# Where the values come from: for x^3 the Taylor series ends, so the errors are exactly h^2 f'''/6 = h^2 and
# h f''/2 + h^2 f'''/6 = 3 x h + h^2 (up to the float64 rounding of the differences, about 1e-12).
assert abs(expected_central - h**2) <= 1e-11 and abs(expected_forward - (3 * x0 * h + h**2)) <= 1e-11
### END HIDDEN TESTS

# %% [markdown]
# ## 2. Comparing two gradients
#
# A gradient check computes two arrays, the analytic gradient $a$ from backward and the numeric
# gradient $n$ from central differences, and must decide whether they agree. They never agree
# exactly: even for a correct backward rule, $n$ carries the truncation and rounding errors of
# part 3, about $10^{-10}$ relative in float64 with $h = 10^{-6}$. A bug, on the other hand,
# usually makes them disagree in the first or second digit: a wrong sign, a factor 2, a missing
# term. The comparison needs a scale, because "off by $10^{-4}$" is tiny for a gradient entry of
# size 100 and huge for one of size $10^{-6}$.
#
# **Relative error.** CS231n compares with the elementwise relative error
#
# $$
# r_i = \frac{|a_i - n_i|}{\max(|a_i| + |n_i|,\ 10^{-12})}, \qquad r = \max_i r_i ,
# $$
#
# which lies in $[0, 1]$ (the triangle inequality gives $|a_i - n_i| \le |a_i| + |n_i|$). It is 1
# when the signs are opposite or one of the two is zero, and about $10^{-7}$ or less for a
# correct gradient in float64. The floor $10^{-12}$ matters: where both gradients are zero (a
# ReLU that is off, a parameter that does not reach the loss), the plain formula is $0/0$, which
# is `nan` with a NumPy warning, and a `nan` maximum hides every other entry. Note that the floor
# sits inside the maximum, it is not added to the denominator.
#
# **Worked example.** $a = (1, 0, 10^{-13})$ and $n = (1.001, 0, 0)$:
# $r = (0.001 / 2.001,\ 0 / 10^{-12},\ 10^{-13} / 10^{-12}) = (4.998 \times 10^{-4},\ 0,\ 0.1)$,
# so `relative_error(a, n)` is $0.1$. The third entry shows the weakness of relative error:
# two gradients that are both essentially zero can still be "10% apart". Taking
# $\max_i |a_i - n_i| / \max_i(|a_i| + |n_i|)$ instead, one ratio for the whole array, would
# give $0.001 / 2.001$ and hide a wrong small entry behind a large correct one.
#
# ### Exercise `relative_error`
#
# Write `relative_error(a, b)`: $\max_i |a_i - b_i| / \max(|a_i| + |b_i|, 10^{-12})$.

# %% nbgrader={"grade": false, "grade_id": "relative_error", "locked": false, "schema_version": 3, "solution": true, "task": false}
def relative_error(a, b):
    """The worst elementwise relative error max_i |a_i - b_i| / max(|a_i| + |b_i|, 1e-12).

    a, b : float arrays of the same shape (any shape, including 0-d).

    Returns a float. Two zeros give 0, not nan, and no NumPy warning is raised.
    """
    ### BEGIN SOLUTION
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(a) + np.abs(b), 1e-12)))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_relative_error", "locked": true, "points": 7, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks


def floor_hint(got, expected):
    if np.isnan(got):
        return "0 / 0 is nan: where both entries are 0, divide by the floor max(|a| + |b|, 1e-12) instead."
    return ("compute the ratio elementwise, with the floor inside: max(|a_i| + |b_i|, 1e-12), then take the "
            "largest ratio.")


def check_relative_error(label, a, b, rtol=1e-12):
    c = checks.case(label, a, b)
    expected = checks.oracle_value("gc_relative_error", a, b)  # torch, in float64
    got = checks.run_student("relative_error", relative_error, a.copy(), b.copy())  # (a test may reuse a or b)
    if not isinstance(got, (float, np.floating)) or np.ndim(got) != 0:
        raise checks.CheckFailure(f"[relative_error] {c.describe()}: return one float (the worst element), got {got!r}.")
    # The formula in float64 leaves a few ulps of room (rtol 1e-12); float32 inputs may be compared in float32.
    checks.assert_close(np.asarray(got, dtype=np.float64), expected, task="relative_error",
                        case=c.describe(), name="relative error", rtol=rtol, atol=0.0, check_dtype=False,
                        hints=[floor_hint])


check_relative_error("worked example", np.array([1.0, 0.0, 1e-13]), np.array([1.001, 0.0, 0.0]))
check_relative_error("both zero everywhere", np.zeros(3), np.zeros(3))
check_relative_error("a small entry off by a lot, a large one close", np.array([100.0, 1e-3]), np.array([100.0001, 2e-3]))
check_relative_error("opposite signs", np.array([[0.5, -2.0]]), np.array([[-0.5, -2.0]]))
check_relative_error("random, non-contiguous", checks.randn(1, 4, 3).T, checks.strided(checks.randn(2, 3, 4)))
check_relative_error("0-d", np.asarray(3.0), np.asarray(3.3))
check_relative_error("float32", checks.randn(3, 5, dtype=np.float32), checks.randn(4, 5, dtype=np.float32), rtol=1e-6)
### BEGIN HIDDEN TESTS
for s, shape in enumerate([(6,), (2, 3, 2), (1, 1), ()]):
    a = checks.randn(10 + s, *shape)
    check_relative_error(f"random {shape}", a, a + 1e-4 * checks.randn(20 + s, *shape))
    check_relative_error(f"random {shape}, unrelated", a, checks.randn(30 + s, *shape))
z = checks.randn(40, 4, 3)
z[1] = 0.0
check_relative_error("zero rows in both", z, z * (1 + 1e-7))
check_relative_error("tiny values below the floor", np.array([3e-13, 0.0, 1.0]), np.array([0.0, 5e-13, 1.0]))
check_relative_error("all zero, 0-d", np.asarray(0.0), np.asarray(0.0))
check_relative_error("float32, sliced", checks.strided(checks.randn(41, 3, 3, dtype=np.float32)),
                     checks.randn(42, 3, 3, dtype=np.float32), rtol=1e-6)
### END HIDDEN TESTS

# %% [markdown]
# ### The engine, and `GradcheckError`
#
# A gradient check tests an **engine**, not a formula: the analytic gradient is whatever
# `backward` produces for a function built from the engine's operations. The next cell gives the
# engine of units 1.3 and 1.4, complete and locked: `Context`, `Function`, `Tensor`, `unbroadcast`,
# `topological_order`, `backward`, and the operations `Add`, `Sub`, `Mul`, `Div`, `Neg`, `MatMul`,
# `Sum`, `Mean`, `Exp`, `Log`, `Tanh`, `ReLU`, `Reshape`, `Transpose` and the fused
# `CrossEntropy`. If we have done units 1.3 and 1.4, this is the code we wrote there. A Tensor's
# operators (`+ - * / @`, unary `-`, `.sum()`, `.mean()`, `.exp()`, `.log()`, `.tanh()`,
# `.relu()`, `.reshape()`, `.transpose()`, `.T`) call these operations; `Mul.apply(a, b)` calls one
# directly.

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
        result = Tensor(cls.forward(ctx, *[t.data for t in inputs], **options))
        if any(t.requires_grad for t in inputs):  # record the step only where a gradient can flow
            result.requires_grad = True
            result.fn = cls  # the Function,
            result.ctx = ctx  # what its forward saved,
            result.inputs = inputs  # and the tensors it read
        return result


class Tensor:
    """A NumPy array that remembers how it was computed."""

    __array_ufunc__ = None  # so that `array * tensor` calls Tensor.__rmul__ instead of NumPy

    def __init__(self, data, requires_grad=False):
        data = np.asarray(data)
        self.data = data if np.issubdtype(data.dtype, np.floating) else data.astype(np.float64)
        self.requires_grad = bool(requires_grad)
        self.grad = None  # filled in by backward, for leaves that require grad
        self.fn = None  # the Function that made this tensor (None for a leaf)
        self.ctx = None  # the Context of that Function
        self.inputs = ()  # the tensors this one was computed from

    @property
    def is_leaf(self):
        return self.fn is None

    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    def __repr__(self):
        origin = f"fn={self.fn.__name__}" if self.fn else f"requires_grad={self.requires_grad}"
        return f"Tensor({np.array2string(self.data, precision=4)}, {origin})"

    def backward(self, grad=None):
        backward(self, grad)

    def _wrap(self, value):
        """A Python number takes this tensor's dtype (float32 * 2.0 stays float32, as in torch)."""
        if isinstance(value, Tensor):
            return value
        return Tensor(np.asarray(value, dtype=self.dtype) if isinstance(value, (int, float)) else value)

    def __add__(self, o):
        return Add.apply(self, self._wrap(o))

    def __radd__(self, o):
        return Add.apply(self._wrap(o), self)

    def __sub__(self, o):
        return Sub.apply(self, self._wrap(o))

    def __rsub__(self, o):
        return Sub.apply(self._wrap(o), self)

    def __mul__(self, o):
        return Mul.apply(self, self._wrap(o))

    def __rmul__(self, o):
        return Mul.apply(self._wrap(o), self)

    def __truediv__(self, o):
        return Div.apply(self, self._wrap(o))

    def __rtruediv__(self, o):
        return Div.apply(self._wrap(o), self)

    def __matmul__(self, o):
        return MatMul.apply(self, self._wrap(o))

    def __rmatmul__(self, o):
        return MatMul.apply(self._wrap(o), self)

    def __neg__(self):
        return Neg.apply(self)

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
        return Reshape.apply(self, shape=shape[0] if len(shape) == 1 else shape)

    def transpose(self, d0, d1):
        return Transpose.apply(self, dim0=d0, dim1=d1)

    @property
    def T(self):
        return self.transpose(0, 1)


def topological_order(root):
    """Every tensor reachable from ``root`` (and ``root``), once each, each after its inputs. Iterative."""
    order, visited = [], {id(root)}
    stack = [(root, iter(root.inputs))]  # each entry: a node and its inputs not visited yet
    while stack:
        node, pending = stack[-1]
        for parent in pending:
            if id(parent) not in visited:
                visited.add(id(parent))
                stack.append((parent, iter(parent.inputs)))
                break
        else:  # every input is in the order: the node can follow them
            stack.pop()
            order.append(node)
    return order


def backward(root, grad=None):
    """Add d(root)/d(leaf), weighted by ``grad`` (ones for a one-element root), into each leaf's ``.grad``."""
    if grad is None:
        if root.data.size != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs (as in torch)")
        grad = np.ones(root.shape, root.dtype)
    pending = {id(root): np.asarray(grad, dtype=root.dtype)}  # gradients received, by node
    for node in topological_order(root)[::-1]:
        g = pending.pop(id(node), None)
        if g is None:
            continue
        if node.is_leaf:
            if node.requires_grad:
                if node.grad is None:
                    node.grad = np.zeros_like(node.data)
                node.grad += g  # accumulates across calls, as in torch
            continue
        grads = node.fn.backward(node.ctx, g)
        if not isinstance(grads, tuple):
            grads = (grads,)
        for t, t_grad in zip(node.inputs, grads):
            if not t.requires_grad or t_grad is None:
                continue
            if np.shape(t_grad) != t.shape:
                raise RuntimeError(f"{node.fn.__name__}.backward returned a gradient of shape {np.shape(t_grad)} "
                                   f"for an input of shape {t.shape}")
            if id(t) in pending:
                pending[id(t)] += t_grad  # a node reached by several paths gets the sum
            else:
                pending[id(t)] = np.array(t_grad, dtype=t.dtype)


def unbroadcast(grad, shape):
    """Sum ``grad`` over the axes that broadcasting stretched, so that it has exactly ``shape``."""
    lead = grad.ndim - len(shape)
    stretched = tuple(lead + i for i, n in enumerate(shape) if n == 1 and grad.shape[lead + i] != 1)
    return np.sum(grad, axis=tuple(range(lead)) + stretched).reshape(shape)


class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (a.shape, b.shape)  # shapes only: nothing is saved
        return a + b

    @staticmethod
    def backward(ctx, grad):
        a_shape, b_shape = ctx.shapes
        # adjoint of broadcast is sum
        return unbroadcast(grad, a_shape), unbroadcast(grad, b_shape)


class Sub(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (a.shape, b.shape)
        return a - b

    @staticmethod
    def backward(ctx, grad):
        a_shape, b_shape = ctx.shapes
        # adjoint of broadcast is sum
        return unbroadcast(grad, a_shape), unbroadcast(-grad, b_shape)


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        # adjoint of broadcast is sum
        return unbroadcast(b * grad, a.shape), unbroadcast(a * grad, b.shape)


class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a / b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        # adjoint of broadcast is sum
        return unbroadcast(grad / b, a.shape), unbroadcast(-(grad * a) / b**2, b.shape)


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


def _spread(grad, shape, axis, keepdims):
    """The adjoint of a sum over ``axis``: put the removed axes back, then copy the gradient along them."""
    if not keepdims and axis is not None:
        grad = np.expand_dims(grad, axis=axis)
    return np.broadcast_to(grad, shape).copy()


class Sum(Function):
    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        ctx.options = (axis, keepdims)
        ctx.save_for_backward(x.shape)
        return np.sum(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad):
        (shape,) = ctx.saved_tensors
        return _spread(grad, shape, *ctx.options)


class Mean(Function):
    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        ctx.options = (axis, keepdims)
        ctx.save_for_backward(x.shape)
        return np.mean(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad):
        (shape,) = ctx.saved_tensors
        axis = ctx.options[0]
        count = np.prod(shape) if axis is None else np.prod([shape[k] for k in np.atleast_1d(axis)])
        return _spread(grad, shape, *ctx.options) / count


class Exp(Function):
    @staticmethod
    def forward(ctx, a):
        out = np.exp(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out


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
        out = np.tanh(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * (1 - out * out)


class ReLU(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a > 0)  # the mask: slope 1 where a > 0, and 0 elsewhere (also at a = 0)
        return np.maximum(a, 0)

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad * mask


class Reshape(Function):
    @staticmethod
    def forward(ctx, x, shape):
        ctx.save_for_backward(x.shape)
        return np.reshape(x, shape)

    @staticmethod
    def backward(ctx, grad):
        (shape,) = ctx.saved_tensors
        return np.reshape(grad, shape)


class Transpose(Function):
    @staticmethod
    def forward(ctx, a, dim0, dim1):
        ctx.dims = (dim0, dim1)
        return np.swapaxes(a, *ctx.dims)

    @staticmethod
    def backward(ctx, grad):
        return np.swapaxes(grad, *ctx.dims)


class CrossEntropy(Function):
    """F.cross_entropy(logits, target, reduction, ignore_index) for logits (N, C); saves the
    probabilities and the target, not the logits."""

    @staticmethod
    def forward(ctx, logits, target, reduction="mean", ignore_index=-100):
        target = target.astype(np.int64)
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        counted = target != ignore_index
        rows = np.arange(len(target))
        losses = -log_probs[rows, np.where(counted, target, 0)] * counted
        ctx.options = (reduction, ignore_index)
        ctx.save_for_backward(np.exp(log_probs), target)
        if reduction == "none":
            return losses
        count = counted.sum() if reduction == "mean" else 1
        return losses.sum() / count if count else np.asarray(np.nan, dtype=logits.dtype)

    @staticmethod
    def backward(ctx, grad):
        probabilities, target = ctx.saved_tensors
        reduction, ignore_index = ctx.options
        counted = target != ignore_index
        rows = np.arange(len(target))
        d_logits = probabilities.copy()
        d_logits[rows, np.where(counted, target, 0)] -= 1  # softmax minus one-hot
        d_logits *= counted[:, None]  # ignored targets contribute nothing
        if reduction == "none":
            return d_logits * grad[:, None], None
        count = max(int(counted.sum()), 1) if reduction == "mean" else 1
        return d_logits * (grad / count), None


# %% [markdown]
# When a check fails, we want to know where. The next cell gives the exception our checker
# raises. Like torch's `GradcheckError`, it is an `AssertionError`, so a failed check stops a test
# the way a failed `assert` does. Besides its message, it keeps the facts as attributes, so that
# code (the tests, or `find_the_bug` in part 5) can read them without parsing text.

# %% nbgrader={"grade": false, "grade_id": "error_class", "locked": true, "schema_version": 3, "solution": false, "task": false}
class GradcheckError(AssertionError):
    """An analytic gradient that disagrees with central differences.

    GradcheckError(message, input_index, index, analytic, numeric): the input (its position in
    ``inputs``), the coordinate that fails by the widest margin (a tuple of ints), and the
    analytic and numeric values there (floats).
    """

    def __init__(self, message, input_index=None, index=None, analytic=None, numeric=None):
        super().__init__(message)
        self.input_index = input_index
        self.index = index
        self.analytic = analytic
        self.numeric = numeric


# %% [markdown]
# ### Exercise `gradcheck`
#
# **PyTorch's test.** `torch.autograd.gradcheck` does not use the relative error. It accepts
# coordinate $i$ when
#
# $$
# |a_i - n_i| \le \text{atol} + \text{rtol}\, |n_i| ,
# $$
#
# with defaults `eps=1e-6`, `atol=1e-5`, `rtol=1e-3`, and fails if any coordinate does not pass.
# The two tolerances split the work: `rtol` allows an error proportional to the size of the
# reference value $n_i$, and `atol` allows a small absolute error where $n_i$ is (nearly) zero,
# exactly where a relative test is meaningless. Note that the reference is the numeric value
# $n_i$, not $a_i$, and that a `nan` anywhere fails (a comparison with `nan` is never true, so
# we test "passes" and fail what does not pass, rather than test "fails").
#
# **What is checked.** `gradcheck(f, inputs)` takes a function of engine Tensors and a list of
# inputs (float64 arrays, or engine Tensors, whose `.data` is used):
#
# 1. *Analytic.* Wrap a copy of each input in a Tensor that requires grad, compute
#    `out = f(*tensors)` and call `out.backward(w)`. For a one-element output $w$ is ones; for
#    any other output $w$ is a random upstream gradient drawn with
#    `rng = np.random.default_rng(seed)`, for the reason given before `numerical_vjp`. We draw
#    `rng.standard_normal(out.shape)`; any continuous distribution does the job (the tests only
#    need $w$ random, and the same for the same seed). An input that does not reach the output
#    gets no `.grad`: its analytic gradient is zero.
# 2. *Numeric.* For input $k$, the central difference of the scalar
#    $\phi(v) = \sum w \odot f(\dots, v, \dots)\texttt{.data}$, where $v$ replaces input $k$ and
#    every input is a plain Tensor (no gradient needed), at every coordinate, or at
#    `n_samples` distinct coordinates drawn with the same `rng` when `n_samples` is given (a
#    big input with $10^6$ entries would need $2 \times 10^6$ evaluations of $f$ otherwise).
#    How we draw them is our choice (`rng.choice(x.size, n_samples, replace=False)`, or the
#    start of `rng.permutation(x.size)`; before or after $w$): the tests accept any sampling
#    that checks `n_samples` distinct coordinates of the input, the same ones for the same
#    seed, and other ones for other seeds.
# 3. *Compare* with the rule above. Return `True` if every checked coordinate passes. Otherwise
#    raise `GradcheckError` for the first input that fails, naming the coordinate that fails by
#    the widest margin, the largest $|a_i - n_i| - (\text{atol} + \text{rtol}\,|n_i|)$. A
#    coordinate where $a_i$ or $n_i$ is `nan` counts as failing by an infinite margin: it is
#    the one reported (the first such coordinate in C order, if there are several).
#
# A check must not change what it checks: the caller's arrays and Tensors (their `.data` and
# their `.grad`) are left as they were.
#
# **Worked example.** With the defaults, a coordinate whose numeric value is $n = 2$ passes when
# $|a - 2| \le 10^{-5} + 10^{-3} \cdot 2 = 2.01 \times 10^{-3}$: $a = 2.0015$ passes, $a = 2.003$
# fails. Where $n = 0$ only `atol` is left: $a = 9 \times 10^{-6}$ passes, $a = 2 \times 10^{-5}$
# fails. For $f(x) = \texttt{(x * x).sum()}$ at $x = (1, 2)$ the engine gives $a = 2x = (2, 4)$,
# the central differences give $(2, 4)$ up to $10^{-10}$, and `gradcheck` returns `True`. Had
# `Mul.backward` forgotten one of the two paths of `x * x`, it would return $a = (1, 2)$ and the
# message would read something like
#
# ```
# gradcheck failed for input 0: worst index (1,): analytic 2.0 vs numeric 4.0000000000 (...)
# ```

# %% nbgrader={"grade": false, "grade_id": "gradcheck", "locked": false, "schema_version": 3, "solution": true, "task": false}
def gradcheck(f, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, n_samples=None, seed=0):
    """Check the engine's gradients of f against central differences, like torch.autograd.gradcheck.

    f         : takes one Tensor per input and returns a Tensor (any shape) built with engine ops.
    inputs    : a list or tuple of float64 arrays or Tensors (a Tensor's .data is used).
    eps       : the central-difference step.
    atol, rtol: a coordinate passes when |a - n| <= atol + rtol * |n| (a analytic, n numeric);
                nan never passes.
    n_samples : None checks every coordinate of every input; an int checks that many distinct
                coordinates of each input (all of them if it has fewer), drawn with the rng below.
    seed      : rng = np.random.default_rng(seed) draws the upstream gradient of a non-scalar
                output (ones for a one-element output) and the sampled coordinates.

    Returns True. Otherwise raises GradcheckError(message, input_index, index, analytic, numeric)
    for the first failing input, at its coordinate with the largest |a - n| - (atol + rtol * |n|)
    (a nan counts as the largest: the first nan coordinate in C order is reported);
    the message contains "input <k>", the index as a tuple of ints such as (1, 2), and both
    values. An input that does not reach the output has a zero analytic gradient. The caller's
    arrays and Tensors are left unchanged.
    """
    ### BEGIN SOLUTION
    rng = np.random.default_rng(seed)
    arrays = [np.array(x.data if isinstance(x, Tensor) else x, dtype=np.float64) for x in inputs]
    tensors = [Tensor(x.copy(), requires_grad=True) for x in arrays]
    out = f(*tensors)
    weight = np.ones(out.shape) if out.data.size == 1 else rng.standard_normal(out.shape)
    out.backward(weight)
    for k, (x, t) in enumerate(zip(arrays, tensors)):
        analytic = np.zeros(x.shape) if t.grad is None else t.grad

        def phi(v, k=k):
            return np.sum(weight * f(*[Tensor(v if j == k else a) for j, a in enumerate(arrays)]).data)

        if n_samples is None or n_samples >= x.size:
            coords = list(np.ndindex(x.shape))
        else:
            picked = rng.choice(x.size, size=n_samples, replace=False)
            coords = [tuple(int(i) for i in np.unravel_index(p, x.shape)) for p in np.sort(picked)]
        worst = None
        for index in coords:
            old = x[index]
            x[index] = old + eps
            plus = phi(x)
            x[index] = old - eps
            minus = phi(x)
            x[index] = old
            a, n = float(analytic[index]), float((plus - minus) / (2 * eps))
            margin = abs(a - n) - (atol + rtol * abs(n))
            if not margin <= 0:  # nan fails too
                margin = np.inf if np.isnan(margin) else margin
                if worst is None or margin > worst[0]:
                    worst = (margin, index, a, n)
        if worst is not None:
            _, index, a, n = worst
            raise GradcheckError(
                f"gradcheck failed for input {k} (shape {x.shape}): worst index {index}: analytic {a!r} vs numeric "
                f"{n!r}; |a - n| = {abs(a - n):.3g} > atol + rtol * |n| = {atol + rtol * abs(n):.3g}",
                input_index=k, index=index, analytic=a, numeric=n)
    return True
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_gradcheck", "locked": true, "points": 16, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks


# The ops below have backward rules that are wrong (or right) on purpose. When graded, each backward
# runs in the grader (checks.op_in_grader): gradcheck can tell them apart only by checking them.
def offset_op(scale, *deltas):
    """y = scale * x, whose backward adds delta to the true gradient at each (index, delta) given."""
    def forward(ctx, x):
        return scale * x

    def backward(ctx, grad):
        out = np.array(scale * grad)
        for index, delta in deltas:
            out[index] += delta
        return out
    return checks.op_in_grader(Function, "Offset", forward, backward)


def flip_op(correct):
    """y = x[::-1] (the first axis reversed); its wrong backward forgets to reverse the gradient back,
    which an upstream gradient of ones cannot see."""
    def forward(ctx, x):
        return x[::-1].copy()

    def backward(ctx, grad):
        return grad[::-1].copy() if correct else grad.copy()
    return checks.op_in_grader(Function, "Flip", forward, backward)


def offset_sum(scale, *deltas):
    op = offset_op(scale, *deltas)
    return lambda x: op.apply(x).sum()


# More graphs, for cases that run only in grading.
def offset_value(scale, *deltas):
    op = offset_op(scale, *deltas)
    return lambda x: op.apply(x)


def product_plus_offset(scale, *deltas):
    op = offset_op(scale, *deltas)
    return lambda x, y, z: (x * y).sum() + op.apply(z).sum()


def square_plus_offset(scale, *deltas):
    op = offset_op(scale, *deltas)
    return lambda x, y: (x * x).sum() + op.apply(y).sum()


def flip_times_two(correct):
    op = flip_op(correct)
    return lambda x: op.apply(x) * 2.0


mlp_like = lambda a, b, c: ((a @ b).tanh() * c).exp().mean()
relu_matmul_minus_sum = lambda a, b: (a @ b).relu() - b.sum(axis=0)
cube_sum = lambda x: (x * x * x).sum()
tanh_of_square = lambda z: (z @ z).tanh().sum()


def verdict(label, f, inputs, expect_pass, **kwargs):
    """Run the student's gradcheck and compare its verdict; return the GradcheckError, if any."""
    where = f"[gradcheck] case '{label}'" + (f" with {kwargs}" if kwargs else "")
    try:
        result = checks.run_student("gradcheck", gradcheck, f, inputs, **kwargs)
    except checks.CheckFailure as failure:
        error = failure.__cause__
        if not isinstance(error, GradcheckError):
            raise
        if expect_pass:
            raise checks.CheckFailure(f"{where}: the gradients are right (within the tolerance), but gradcheck raised: "
                                      f"{error}") from None
        return error
    if not expect_pass:
        raise checks.CheckFailure(
            f"{where}: the analytic gradient is wrong, but gradcheck returned {result!r} instead of raising "
            "GradcheckError. Check every coordinate of every input, with |a - n| <= atol + rtol * |n|, and raise "
            "(do not return False) when one fails.")
    if result is not True:
        raise checks.CheckFailure(f"{where}: the gradients are right, so gradcheck must return True, got {result!r}.")
    return None


x34, y34 = checks.randn(1, 3, 4), checks.randn(2, 3, 4)
pos34 = checks.randn(3, 3, 4, low=0.5, scale=2.0)
# Right engines pass: the worked example, ops with broadcasting, a non-scalar output (random upstream).
verdict("worked example (x * x).sum()", lambda x: (x * x).sum(), [np.array([1.0, 2.0])], True)
verdict("tanh(x * y) / b, broadcast b", lambda x, y, b: ((x * y).tanh() / b).sum(),
        [x34, y34, pos34[:1, :]], True)
verdict("non-scalar output exp(x) @ W", lambda x, W: x.exp() @ W, [x34, checks.randn(4, 4, 2)], True)
verdict("a 0-d and a size-1 input", lambda s, v: (v * s).log().sum(), [np.asarray(1.5), np.array([[0.7]])], True)
verdict("an input that does not reach the output", lambda x, unused: (x * x).sum(), [x34, y34], True)
verdict("non-contiguous inputs", lambda x, y: (x - y).tanh().mean(), [x34.T, checks.strided(y34.T)], True)
# Wrong backward rules fail: everywhere, at the last coordinate only, in the second input only.
verdict("wrong everywhere", offset_sum(2.0, *[((i, j), 0.5) for i in range(3) for j in range(4)]), [x34], False)
verdict("wrong at the last coordinate only", offset_sum(2.0, ((2, 3), 0.5)), [x34], False)
wrong_in_y = offset_op(2.0, ((0, 1), 0.3))
verdict("wrong in the second input only", lambda x, y: x.tanh().sum() + wrong_in_y.apply(y).sum(), [x34, y34], False)
unflipped, flipped = flip_op(False), flip_op(True)
verdict("non-scalar output, backward forgets a permutation", lambda x: unflipped.apply(x), [x34], False)
verdict("non-scalar output, the right permutation", lambda x: flipped.apply(x), [x34], True)
verdict("a nan gradient", offset_sum(2.0, ((1, 1), np.nan)), [x34], False)
# The tolerance rule: n = 2 allows 1e-5 + 2e-3 = 2.01e-3; n = 0 allows atol = 1e-5 only.
verdict("a = n + 2.005e-3 at n = 2 (inside atol + rtol |n|)", offset_sum(2.0, ((0, 0), 2.005e-3)), [x34], True)
verdict("a = n + 2.011e-3 at n = 2 (outside; rtol applies to |n|, not |a|)", offset_sum(2.0, ((0, 0), 2.011e-3)),
        [x34], False)
verdict("a = 9e-6 at n = 0 (inside atol)", offset_sum(0.0, ((1, 2), 9e-6)), [x34], True)
verdict("a = 2e-5 at n = 0 (outside atol)", offset_sum(0.0, ((1, 2), 2e-5)), [x34], False)
verdict("rtol=1e-2 given: a = n + 1.5e-2 at n = 2", offset_sum(2.0, ((0, 0), 1.5e-2)), [x34], True, rtol=1e-2, atol=0.0)
verdict("atol=1e-3 given: a = 5e-4 at n = 0", offset_sum(0.0, ((0, 0), 5e-4)), [x34], True, atol=1e-3)
verdict("eps=0.5 given: the step is too coarse for x^3", lambda x: (x * x * x).sum(), [x34], False, eps=0.5)
# Tensors as inputs, twice on the same Tensors: their data and grad stay as they were.
tx, ty = Tensor(x34.copy(), requires_grad=True), Tensor(y34.copy())
for attempt in ("first", "second"):
    verdict(f"Tensors as inputs ({attempt} call)", lambda x, y: (x * y + x).sum(), [tx, ty], True)
assert tx.grad is None and ty.grad is None and np.array_equal(tx.data, x34) and np.array_equal(ty.data, y34), \
    "[gradcheck] the caller's Tensors must be left unchanged: wrap copies of their data in new Tensors."
verdict("a Tensor input, wrong backward", offset_sum(2.0, ((1, 0), 0.5)), [Tensor(x34)], False)
arrays = [x34.copy(), y34.copy()]
verdict("the caller's arrays", lambda x, y: (x * y).sum(), arrays, True)
assert np.array_equal(arrays[0], x34) and np.array_equal(arrays[1], y34), \
    "[gradcheck] the caller's arrays must be left unchanged."


def perturbed(n_samples, seed, size=20):
    """The coordinates gradcheck perturbs (and how often f runs) for one input of `size` entries."""
    base, seen, calls = checks.randn(50, size), [], [0]
    unmoved = base.copy()

    def f(x):
        calls[0] += 1
        moved = np.flatnonzero(x.data != unmoved)
        seen.extend(int(i) for i in moved)
        return (x * x).sum()
    verdict(f"n_samples={n_samples}, seed={seed}", f, [base], True, n_samples=n_samples, seed=seed)
    return sorted(set(seen)), calls[0]


coords, calls = perturbed(4, 3)
if len(coords) != 4 or calls > 2 * 4 + 3:
    raise checks.CheckFailure(f"[gradcheck] n_samples=4 on an input of 20 entries: expected 4 distinct coordinates "
                              f"perturbed and about 2 * 4 + 1 calls of f, got {len(coords)} coordinates and {calls} calls.")
if perturbed(4, 3)[0] != coords:
    raise checks.CheckFailure("[gradcheck] the same seed must sample the same coordinates: draw them with "
                              "np.random.default_rng(seed).")
if len({tuple(perturbed(4, s)[0]) for s in range(4)}) == 1:
    raise checks.CheckFailure("[gradcheck] seeds 0 to 3 all sampled the same coordinates: draw them at random "
                              "with np.random.default_rng(seed), not the first n_samples.")
if len(perturbed(50, 0)[0]) != 20:
    raise checks.CheckFailure("[gradcheck] n_samples larger than the input checks every coordinate.")
verdict("n_samples=5, wrong everywhere", offset_sum(2.0, *[((i,), 0.5) for i in range(20)]), [checks.randn(51, 20)], False,
        n_samples=5)
### BEGIN HIDDEN TESTS
for s in range(3):
    a, b = checks.randn(60 + s, 2, 5), checks.randn(70 + s, 5, 3)
    c = checks.randn(80 + s, 1, 3, low=0.5, scale=2.0)
    verdict(f"random MLP-like graph #{s}", mlp_like, [a, b, c], True, seed=s)
    verdict(f"random non-scalar #{s}", relu_matmul_minus_sum, [a, b + 0.1], True, seed=s)
    verdict(f"wrong at one coordinate #{s}", offset_sum(1.5, ((1, s), 0.2)), [a], False)
    verdict(f"flip, random upstream #{s}", flip_times_two(False), [a], False, seed=s)
    verdict(f"flip, right #{s}", flip_times_two(True), [a], True, seed=s)
verdict("third input wrong", product_plus_offset(1.0, ((2,), 0.1)),
        [checks.randn(90, 3), checks.randn(91, 3), checks.randn(92, 3)], False)
verdict("0-d input wrong", offset_value(3.0, ((), 0.1)), [np.asarray(0.4)], False)
verdict("n = -4, a = n - 4.005e-3 (inside)", offset_sum(-4.0, ((0, 2), -4.005e-3)), [x34], True)
verdict("n = -4, a = n - 4.02e-3 (outside)", offset_sum(-4.0, ((0, 2), -4.02e-3)), [x34], False)
verdict("atol=0, rtol=0.1", offset_sum(1.0, ((0, 0), 0.09)), [x34], True, atol=0.0, rtol=0.1)
verdict("atol=0, rtol=0.1, outside", offset_sum(1.0, ((0, 0), 0.11)), [x34], False, atol=0.0, rtol=0.1)
verdict("eps=1e-3 given, x^3 passes", cube_sum, [x34], True, eps=1e-3)
verdict("eps=0.3 given, x^3 fails", cube_sum, [x34], False, eps=0.3)
coords, calls = perturbed(7, 11, size=30)
assert len(coords) == 7 and calls <= 2 * 7 + 3, "[gradcheck] n_samples=7 must check 7 distinct coordinates"
assert any(perturbed(3, s, size=30)[0] != perturbed(3, s + 1, size=30)[0] for s in range(3))
tz = Tensor(checks.randn(93, 2, 2), requires_grad=True)
verdict("Tensor input with requires_grad", tanh_of_square, [tz], True)
assert tz.grad is None, "[gradcheck] the caller's Tensor got a .grad: wrap a copy of its data in a new Tensor."
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_gradcheck_error", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
import re


def check_error(label, f, inputs, input_index, index, analytic, numeric, **kwargs):
    """The GradcheckError must carry the input, the worst index and both values, and say them in its message."""
    where = f"[gradcheck] case '{label}'"
    try:
        checks.run_student("gradcheck", gradcheck, f, inputs, **kwargs)
    except checks.CheckFailure as failure:
        error = failure.__cause__
        if not isinstance(error, GradcheckError):
            raise
    else:
        raise checks.CheckFailure(f"{where}: expected GradcheckError, but gradcheck returned.")
    got_index = None if error.index is None else tuple(int(i) for i in np.atleast_1d(error.index))
    facts = [("input_index", error.input_index, input_index), ("index", got_index, index)]
    for name, got, expected in facts:
        if got != expected:
            raise checks.CheckFailure(
                f"{where}: GradcheckError.{name} is {got!r}, expected {expected!r}. Pass input_index=, index= "
                "(the coordinate with the largest |a - n| - (atol + rtol |n|), as a tuple), analytic= and numeric=.")
    for name, got, expected in [("analytic", error.analytic, analytic), ("numeric", error.numeric, numeric)]:
        # the numeric value carries the central difference's error, about 1e-9 here; a nan must stay nan
        if got is None or not (abs(float(got) - expected) <= 1e-6 or (np.isnan(expected) and np.isnan(float(got)))):
            raise checks.CheckFailure(f"{where}: GradcheckError.{name} is {got!r}, expected about {expected!r}.")
    message = str(error)
    numbers = [float(m) for m in re.findall(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?", message)]
    missing = [what for what, ok in [
        (f"'input {input_index}'", f"input {input_index}" in message),
        (f"the index {index}", str(index) in message),
        (f"the analytic value {analytic}", "nan" in message.lower() if np.isnan(analytic) else
         any(abs(v - analytic) <= 1e-3 * abs(analytic) for v in numbers)),
        (f"the numeric value {numeric}", any(abs(v - numeric) <= 1e-3 * abs(numeric) for v in numbers)),
    ] if not ok]
    if missing:
        raise checks.CheckFailure(f"{where}: the message {message!r} does not name {', '.join(missing)}. "
                                  "Hint: format the index as a tuple of Python ints, e.g. tuple(int(i) for i in index).")


x34, y34 = checks.randn(1, 3, 4), checks.randn(2, 3, 4)
# Input 1 is wrong at (0, 0) by 0.1 and at (1, 2) by 0.5: the worst is (1, 2), with a = 1.75 + 0.5, n = 1.75.
wrong_in_y = offset_op(1.75, ((0, 0), 0.1), ((1, 2), 0.5))
check_error("the worst of two wrong coordinates, in input 1", lambda x, y: x.tanh().sum() + wrong_in_y.apply(y).sum(),
            [x34, y34], 1, (1, 2), 2.25, 1.75)
check_error("the worst is the larger margin, not the first", offset_sum(1.75, ((0, 1), -0.25), ((2, 3), 0.75)),
            [x34], 0, (2, 3), 2.5, 1.75)
check_error("a 1-D input", offset_sum(3.5, ((2,), -1.25)), [checks.randn(3, 5)], 0, (2,), 2.25, 3.5)
wrong_at_0d = offset_op(3.5, ((), 1.25))
check_error("a 0-d input", lambda s, v: (v * v).sum() + wrong_at_0d.apply(s), [np.asarray(0.3), checks.randn(4, 2)],
            0, (), 4.75, 3.5)
check_error("a nan is the worst, even after a wrong coordinate", offset_sum(1.75, ((0, 3), 0.75), ((2, 1), np.nan)),
            [x34], 0, (2, 1), np.nan, 1.75)
### BEGIN HIDDEN TESTS
check_error("input 2 of three", product_plus_offset(2.5, ((4,), 0.75)),
            [checks.randn(10, 6), checks.randn(11, 6), checks.randn(12, 6)], 2, (4,), 3.25, 2.5)
check_error("a (2, 3, 2) input", offset_sum(-1.25, ((1, 2, 0), 0.5), ((0, 0, 1), 0.25)),
            [checks.randn(13, 2, 3, 2)], 0, (1, 2, 0), -0.75, -1.25)
check_error("input 1 of two, the worst is last", square_plus_offset(0.5, ((0,), 0.125), ((3,), -0.625)),
            [checks.randn(14, 4), checks.randn(15, 4)], 1, (3,), -0.125, 0.5)
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Choosing the step: truncation against rounding
#
# Part 1 suggests making $h$ as small as we can: the truncation error $\tfrac{h^2}{6}|f'''|$
# vanishes as $h \to 0$. In floating point the opposite happens. Every value of $f$ is rounded to
# the nearest representable number, with a relative error of at most the **unit roundoff**
# $\varepsilon$: $2^{-53} \approx 1.1 \times 10^{-16}$ in float64 and
# $2^{-24} \approx 6.0 \times 10^{-8}$ in float32 (half of `np.finfo(dtype).eps`). So the
# computed $f(x \pm h)$ are each off by about $\varepsilon |f|$. For a small $h$ the two values
# agree in most of their leading digits, and subtracting them cancels those digits and keeps the
# rounding errors (**catastrophic cancellation**); dividing by $2h$ then magnifies what is left.
# The **rounding error** of the quotient is about
#
# $$
# \frac{2 \varepsilon |f|}{2h} = \frac{\varepsilon |f|}{h},
# $$
#
# which grows as $h$ shrinks. (The step itself is rounded too: $x + h$ is stored with an error
# of about $\varepsilon |x|$, which adds a term of the same form.) The total error is about
#
# $$
# E(h) \approx \frac{h^2}{6} |f'''| + \frac{\varepsilon |f|}{h} .
# $$
#
# On a log-log plot the first term is a line of slope $+2$ and the second a line of slope $-1$:
# together they make a **V**. Setting $E'(h) = \tfrac{h}{3}|f'''| - \varepsilon|f|/h^2 = 0$ gives
# the bottom of the V,
#
# $$
# h^\ast = \Big(\frac{3 \varepsilon |f|}{|f'''|}\Big)^{1/3} \approx \varepsilon^{1/3}
# \quad\text{(for } |f| \approx |f'''| \approx 1\text{)}, \qquad E(h^\ast) \approx \varepsilon^{2/3} .
# $$
#
# | | $\varepsilon$ | best $h^\ast$ | error $E(h^\ast)$ | error at $h = 10^{-6}$ |
# |---|---|---|---|---|
# | float64 | $1.1 \times 10^{-16}$ | $\approx 7 \times 10^{-6}$ | $\approx 2 \times 10^{-11}$ | $\approx 10^{-10}$ |
# | float32 | $6.0 \times 10^{-8}$ | $\approx 6 \times 10^{-3}$ | $\approx 2 \times 10^{-5}$ | $\approx 6 \times 10^{-2}$ |
#
# This table is why gradient checks run in float64. There, torch's default $h = 10^{-6}$ leaves
# an error near $10^{-10}$, five orders of magnitude below its tolerances `atol=1e-5` and
# `rtol=1e-3`: room for larger $|f|$ and $|f'''|$ while every bug of relative size $10^{-3}$ or
# more still fails. In float32 the default step is ruined by rounding, and even the best step
# leaves an error of $10^{-5}$ relative to $|f|$, so the tolerance would have to be loosened until
# real bugs fit under it too.
#
# **Worked example.** $f(x) = x^3$ at $x = 2$ ($f = 8$, $f' = 12$), error of the central
# difference:
#
# | $h$ | $10^{-1}$ | $10^{-2}$ | $10^{-3}$ | $10^{-5}$ | $10^{-6}$ | $10^{-8}$ |
# |---|---|---|---|---|---|---|
# | float64 | $1.0 \times 10^{-2}$ | $1.0 \times 10^{-4}$ | $1.0 \times 10^{-6}$ | $2 \times 10^{-10}$ | $8 \times 10^{-10}$ | $1.2 \times 10^{-7}$ |
# | float32 | $1.0 \times 10^{-2}$ | $8 \times 10^{-5}$ | $4 \times 10^{-4}$ | $1.6 \times 10^{-2}$ | $0.56$ | $12$ |
#
# Down to $h = 10^{-3}$ both follow $h^2$. Below it float32 turns around at once, and at
# $h = 10^{-8}$ the step is smaller than half the spacing of float32 numbers near 2
# ($2.4 \times 10^{-7}$): $x + h$ rounds to $x$, both values of $f$ are equal, and the
# "derivative" is 0, an error of 12. float64 turns around near $10^{-5}$, as predicted.
#
# ### Exercise `step_size_sweep`
#
# Write `step_size_sweep(f, x, steps)`: for each step $h$, the largest error
# $\max_i |n_i(h) - a_i|$ of the central-difference gradient $n(h)$ against the engine's
# gradient $a$, both computed in the dtype of `x`. (Our `numerical_gradient` does the numeric
# part.)

# %% nbgrader={"grade": false, "grade_id": "step_size_sweep", "locked": false, "schema_version": 3, "solution": true, "task": false}
def step_size_sweep(f, x, steps):
    """The error of central differences against the engine's gradient, for each step.

    f     : takes a Tensor and returns a one-element Tensor built with engine ops.
    x     : a float32 or float64 array; every computation runs in its dtype.
    steps : a sequence of steps h.

    Returns a float64 array of len(steps): entry k is max_i |n_i - a_i|, where n is the
    central-difference gradient of f at x with step steps[k] and a is the gradient that
    backward gives at x. x is left unchanged.
    """
    ### BEGIN SOLUTION
    t = Tensor(x.copy(), requires_grad=True)
    f(t).backward()
    analytic = t.grad
    errors = [np.max(np.abs(numerical_gradient(lambda v: f(Tensor(v)).data, x.copy(), eps=h) - analytic)) for h in steps]
    return np.array(errors, dtype=np.float64)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_step_size_sweep", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks


def expected_sweep(f, x, steps):
    """The engine's gradient against the central differences of the checks, in x's dtype, for each step.
    The engine is the locked cell's (graded, it runs outside our kernel, as the course wrote it)."""
    engine = checks.locked_cell("machinery")
    leaf = engine.Tensor(np.array(x), requires_grad=True)
    f(leaf).backward()
    return np.array([np.max(np.abs(checks.central_differences(lambda v: f(engine.Tensor(v)).data, x, h) - leaf.grad))
                     for h in steps], dtype=np.float64)


def sweep_hint(got, expected):
    big = expected > 1e-4
    if np.any(big) and np.all(got[big] < 1e-3 * expected[big]):
        return ("your errors are far smaller than the float32 ones: compute the differences in x's dtype, do not "
                "convert x to float64.")
    return "each entry is the largest absolute error max_i |n_i - a_i| at that step, in x's dtype."


def check_sweep(label, f, x, steps):
    c = checks.case(label, x, list(steps))
    before = x.copy()
    expected = expected_sweep(f, before, steps)  # before the call, from arrays it never receives
    got = checks.run_student("step_size_sweep", step_size_sweep, f, x, steps.copy())
    if not np.array_equal(x, before):
        raise checks.CheckFailure(f"[step_size_sweep] {c.describe()}: x was changed; leave it as it was.")
    if not isinstance(got, np.ndarray) or got.dtype != np.float64:
        raise checks.CheckFailure(f"[step_size_sweep] {c.describe()}: return a float64 NumPy array, got "
                                  f"{type(got).__name__} {getattr(got, 'dtype', '')}.")
    # The same roundings in the same order give the same errors; 1e-2 leaves room for another order of
    # operations in the rounding-dominated steps (where the errors themselves are rounding noise).
    atol = 1e-13 if x.dtype == np.float64 else 1e-6
    checks.assert_close(got, expected, task="step_size_sweep", case=c.describe(), name="errors",
                        rtol=1e-2, atol=atol, hints=[sweep_hint])
    return got


sweep_tanh_exp = lambda t: (t.tanh() * t.exp()).sum()
cube = lambda t: (t * t * t).sum()
cube_third_plus_mean = lambda t: (t * t * t).sum() / 3 + t.mean()  # (these two for cases that run only in grading)
exp_over_square = lambda t: (t.exp() / (t * t + 1.0)).sum()
worked_steps = [1e-1, 1e-2, 1e-3, 1e-5, 1e-6, 1e-8]
got = check_sweep("worked example x^3 at 2, float64", cube, np.array([2.0]), worked_steps)
check_sweep("worked example x^3 at 2, float32", cube, np.array([2.0], dtype=np.float32), worked_steps)
check_sweep("tanh(x) exp(x), float64", sweep_tanh_exp, checks.randn(1, 6), np.logspace(-12, -1, 12))
check_sweep("tanh(x) exp(x), float32", sweep_tanh_exp, checks.randn(1, 6, dtype=np.float32), np.logspace(-8, -1, 8))
check_sweep("a 0-d x", lambda t: (t * t).exp(), np.asarray(0.5), [1e-2, 1e-6])
check_sweep("a non-contiguous x", lambda t: (t @ t).tanh().sum(), checks.randn(2, 3, 3).T, [1e-3, 1e-7])
### BEGIN HIDDEN TESTS
for s in range(2):
    for dt in (np.float64, np.float32):
        check_sweep(f"tanh(x) exp(x), {dt.__name__} #{s}", sweep_tanh_exp, checks.randn(10 + s, 2, 3, dtype=dt),
                    np.logspace(-10, -1, 10))
        check_sweep(f"sum(x^3) / 3 + mean(x), {dt.__name__} #{s}", cube_third_plus_mean,
                    checks.randn(20 + s, 5, dtype=dt), [3e-1, 1e-3, 1e-5, 1e-7])
check_sweep("sliced x", exp_over_square, checks.strided(checks.randn(30, 2, 4)), [1e-2, 1e-5, 1e-9])
check_sweep("size-1 axes", cube, checks.randn(31, 1, 3, 1), [1e-4])
### END HIDDEN TESTS

# %% [markdown]
# ### Concept check `best_step`
#
# Run `step_size_sweep` on $f(x) = \sum_i \tanh(x_i)\, e^{x_i}$ at the float64 point `SWEEP_X`
# below, over the steps `SWEEP_STEPS` (23 steps from $10^{-12}$ to $10^{-1}$), and set `best_step`
# to the step with the smallest error. Before running it, predict the answer from the table
# above.

# %% nbgrader={"grade": false, "grade_id": "best_step", "locked": false, "schema_version": 3, "solution": true, "task": false}
SWEEP_X = np.random.default_rng(0).standard_normal(6)
SWEEP_STEPS = np.logspace(-12, -1, 23)
best_step = None  # the step of SWEEP_STEPS with the smallest error, for float64
### BEGIN SOLUTION
best_step = SWEEP_STEPS[np.argmin(step_size_sweep(lambda t: (t.tanh() * t.exp()).sum(), SWEEP_X, SWEEP_STEPS))]
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_best_step", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# The bottom of the float64 V: h* = (3 eps |f| / |f'''|)^(1/3), with eps = 1.1e-16 and |f|, |f'''| of order 1
# to 10, is near 1e-5; any step from 1e-7 to 1e-4 is accepted (the course spec's range).
low, high = 1e-7, 1e-4
checks.check_value("best_step", "best_step", best_step, (low + high) / 2, atol=(high - low) / 2 * (1 + 1e-9),
                   hint="the bottom of the V is where truncation (h^2 |f'''| / 6) and rounding (eps |f| / h) "
                        "balance: h near eps^(1/3) for float64's eps = 1.1e-16.")

# %% [markdown]
# ### Explain `explain_float32`
#
# A colleague has written a new layer whose kernels exist only in float32; there is no float64
# version to check against. At the point they want to check, the loss is about $|f| \approx 20$,
# and its third derivatives are about $|f'''| \approx 1$. They run `gradcheck` on float32 inputs
# with the defaults `eps=1e-6`, `atol=1e-5`, `rtol=1e-3`. (a) Estimate the error of one central
# difference in their setting, and explain why the check fails even if the layer is right.
# (b) Which step would you choose instead, and what error is left at that step? (c) Which `atol`
# and `rtol` would you set for this float32 check, why, and what does the looser tolerance cost?
# (Graded by hand; 12 points.)

# %% [markdown] nbgrader={"grade": true, "grade_id": "explain_float32", "locked": false, "points": 12, "schema_version": 3, "solution": true, "task": false}
# **Model answer.**
#
# *(a) Why it fails (4 points).* float32 keeps about 7 digits: each value of $f$ is rounded with a
# relative error up to $\varepsilon = 6 \times 10^{-8}$, so $f(x \pm h)$ are each off by about
# $\varepsilon |f| = 1.2 \times 10^{-6}$. With $h = 10^{-6}$ the two values differ by only about
# $2h|f'| \approx 10^{-6}$ times the gradient, the same size as their rounding errors, and the
# quotient inherits an error of about $\varepsilon |f| / h \approx 1.2$, larger than a typical
# gradient entry (the truncation term $h^2 |f'''| / 6 \approx 10^{-13}$ is negligible). Even $x + h$
# is poorly represented: near $|x| \approx 1$ float32 numbers are $1.2 \times 10^{-7}$ apart, so a
# step of $10^{-6}$ is only about 8 spacings. Against `atol + rtol * |n|` of about $10^{-3}$ the
# check fails on a correct layer: the numeric side is wrong, not the analytic one.
#
# *(b) The step (4 points).* Balance the two errors:
# $h^\ast = (3 \varepsilon |f| / |f'''|)^{1/3} = (3 \cdot 6 \times 10^{-8} \cdot 20)^{1/3}
# \approx (3.6 \times 10^{-6})^{1/3} \approx 1.5 \times 10^{-2}$. The error left there is
# $E = h^2 |f'''| / 6 + \varepsilon |f| / h \approx 4 \times 10^{-5} + 8 \times 10^{-5}
# \approx 1.2 \times 10^{-4}$, absolute, per coordinate (not relative to the gradient). A step near
# $10^{-2}$, not $10^{-6}$; and since the estimate is rough, a quick `step_size_sweep` in float32
# confirms where the bottom of the V really is.
#
# *(c) The tolerance (4 points).* The tolerance must sit safely above the error of a correct
# gradient, about $10^{-4}$ absolute: for example `atol=1e-3` (about 10 times the estimate, since
# $|f|$, $|f'''|$ and the rounding vary between coordinates) and `rtol=1e-2`, against `1e-5` and
# `1e-3` in float64, where the error is about $10^{-10}$. The cost is sensitivity: any bug that
# changes a gradient entry by less than about 1% (a small missing term, a wrong regularisation
# constant, an error on a few coordinates of small gradient) now passes. Typical bugs (a sign, a
# factor 2, a missing transpose) are still caught, but the check proves less; the better fix is to
# run the check in float64, even if that means writing a float64 reference of the layer just for
# the test.

# %% [markdown]
# ## 4. Kinks: where a correct gradient fails the check
#
# Central differences assume that $f$ is smooth between $x - h$ and $x + h$. ReLU is not smooth at
# 0: its derivative jumps from 0 to 1, and the engine (like torch) uses the slope 0 at exactly 0.
# On either side of the kink ReLU is linear, so the central difference is exact there. It goes
# wrong only when the two points $x - h$ and $x + h$ lie on **different sides** of the kink,
# $x - h < 0 < x + h$, that is $|x| < h$. Then
#
# $$
# \frac{\mathrm{relu}(x + h) - \mathrm{relu}(x - h)}{2h} = \frac{(x + h) - 0}{2h} = \frac{1}{2} + \frac{x}{2h},
# $$
#
# anything strictly between 0 and 1, while the analytic slope is 0 or 1. At $|x| = h$ exactly, one
# point sits on the kink itself, where both sides agree on the value 0, and the difference is
# exact again (1 for $x = h$, 0 for $x = -h$).
#
# In a network, the kink is crossed by a **pre-activation** $z = Wx + b$, not by the input we
# perturb, but the effect is the same: the check reports a "bug" at a coordinate where the
# gradient is right. CS231n calls these kinks in the objective. With random float64 inputs and
# $h = 10^{-6}$ they are rare (a standard normal value lands within $10^{-6}$ of 0 with probability
# about $8 \times 10^{-7}$), but a network with a million ReLUs meets some, and inputs that are
# rounded, quantised or exactly zero (padding, a ReLU output fed into another ReLU) meet them
# constantly. The remedy is to find the coordinates whose stencil crosses a kink and skip them, or
# move the point away from the kink before checking.
#
# **Worked example.** With $h = 10^{-6}$ and
# $x = (-3 \times 10^{-6},\ -5 \times 10^{-7},\ 0,\ 2 \times 10^{-7},\ 10^{-6},\ 4 \times 10^{-6})$, the
# stencil crosses the kink for the second, third and fourth entries only. The central differences
# there are $0.25$, $0.5$ and $0.6$, against slopes $0$, $0$ and $1$; at $x = 10^{-6} = h$ it is
# exactly 1.
#
# ### Exercise `kink_mask`
#
# Write `kink_mask(x, eps)`: `True` where the central-difference stencil $\{x - \varepsilon,
# x + \varepsilon\}$ crosses ReLU's kink at 0.

# %% nbgrader={"grade": false, "grade_id": "kink_mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
def kink_mask(x, eps):
    """Where x - eps < 0 < x + eps: the coordinates at which the central difference of ReLU with
    step eps is wrong.

    x   : a float array of any shape (including 0-d), for example ReLU's pre-activations.
    eps : the step, a positive float.

    Returns a boolean array of x's shape. At |x| = eps exactly the difference is still exact,
    so the mask is False there.
    """
    ### BEGIN SOLUTION
    return np.abs(x) < eps
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_kink_mask", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks


def check_kink_mask(label, x, eps):
    c = checks.case(label, x, eps)
    before = np.array(x, copy=True)  # (a change that x keeps fails the case below: later cases may reuse it)
    expected = checks.oracle_value("gc_kink_mask", before, eps)  # torch: x - eps < 0 < x + eps
    got = checks.run_student("kink_mask", kink_mask, x, eps)
    got = np.asarray(got)
    if got.dtype != np.bool_ or got.shape != expected.shape:
        raise checks.CheckFailure(f"[kink_mask] {c.describe()}: return a boolean array of x's shape {expected.shape}, "
                                  f"got {got.dtype} {got.shape}.")
    if not np.array_equal(x, before):
        raise checks.CheckFailure(f"[kink_mask] {c.describe()}: x was changed.")
    wrong = np.argwhere(got != expected)
    if len(wrong):
        k = tuple(int(i) for i in wrong[0])
        raise checks.CheckFailure(
            f"[kink_mask] {c.describe()}: at index {k}, x = {float(x[k])!r}: expected {bool(expected[k])}, got {bool(got[k])}. "
            "Hint: the stencil crosses the kink exactly when x - eps < 0 < x + eps, i.e. |x| < eps (strictly: at "
            "|x| = eps one point lies on the kink and the difference is exact); negative x count too.")


h = 2.0**-20  # about 1e-6, and a binary fraction: x +- h is exact
check_kink_mask("worked example", np.array([-3, -0.5, 0, 0.2, 1, 4]) * 1e-6, 1e-6)
check_kink_mask("exactly +-eps, and just inside", np.array([-h, h, -0.75 * h, 0.75 * h, -1.25 * h, 1.25 * h]), h)
check_kink_mask("a grid of multiples of eps / 4, (3, 5)", np.arange(-7, 8).reshape(3, 5) * (h / 4), h)
check_kink_mask("0-d, on the kink", np.asarray(0.0), h)
check_kink_mask("non-contiguous", checks.strided(np.arange(-6, 6).reshape(3, 4) * (h / 2)), h)
check_kink_mask("float32, eps = 1/64", (np.arange(-8, 9) / 256).astype(np.float32), 2.0**-6)
### BEGIN HIDDEN TESTS
for s, eps in enumerate([2.0**-10, 2.0**-17, 0.5]):
    grid = np.random.default_rng(s).integers(-12, 13, size=(4, 6)) * (eps / 8)
    check_kink_mask(f"random multiples of eps / 8 (eps = {eps:g})", grid, eps)
    check_kink_mask(f"transposed (eps = {eps:g})", grid.T, eps)
    check_kink_mask(f"size-1 axes (eps = {eps:g})", grid[:1, :, None], eps)
check_kink_mask("random normal, eps = 1e-6", checks.randn(5, 20), 1e-6)
check_kink_mask("random normal, eps = 0.5", checks.randn(6, 4, 5), 0.5)
check_kink_mask("0-d, at -eps", np.asarray(-0.25), 0.25)
### END HIDDEN TESTS

# %% [markdown]
# ### Concept check `kink_value`
#
# What does the central difference of ReLU give at $x = 3 \times 10^{-7}$ with $h = 10^{-6}$? Set
# `kink_value` to the number (the engine's analytic slope there is 1).

# %% nbgrader={"grade": false, "grade_id": "kink_value", "locked": false, "schema_version": 3, "solution": true, "task": false}
kink_value = None  # (relu(x + h) - relu(x - h)) / (2 h) at x = 3e-7, h = 1e-6
### BEGIN SOLUTION
kink_value = 0.5 + 3e-7 / (2 * 1e-6)
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_kink_value", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# The expected value is the central difference of relu itself, in float64 (the hidden part checks it against
# the formula of the text); 1e-3 absolute allows rounding to three decimals.
x0, h0 = 3e-7, 1e-6
expected_kink = (max(x0 + h0, 0) - max(x0 - h0, 0)) / (2 * h0)
checks.check_value("kink_value", "kink_value", kink_value, expected_kink, atol=1e-3,
                   hint="x - h is negative, so relu(x - h) = 0, and relu(x + h) = x + h.")
### BEGIN HIDDEN TESTS
assert abs(expected_kink - (0.5 + x0 / (2 * h0))) <= 1e-9  # (x + h - 0) / 2h = 1/2 + x / 2h
### END HIDDEN TESTS

# %% [markdown]
# ## 5. Find the bug
#
# Everything so far checked a gradient we knew. Now we use `gradcheck` the way it is used in
# practice: on an engine that we suspect, to find out **which** operation is wrong. The next
# (locked) cell builds engines as namespaces of the nine elementwise operations `Add`, `Sub`,
# `Mul`, `Div`, `Neg`, `Exp`, `Log`, `Tanh` and `ReLU`, each a fresh class used as
# `engine.Mul.apply(a, b)`. `make_engine()` gives an engine with the right backward rule
# everywhere (`CORRECT_ENGINE` is one), and `make_engine((op, rule))` one whose operation `op`
# uses the wrong `rule`, a Python expression in `grad` and what that op saved. `PLANTED`, our
# engine, has exactly one wrong backward rule, drawn at random from `BUG_CANDIDATES` each time
# the cell runs; which one it drew is kept nowhere. Every engine writes each backward rule in
# freshly disguised but exactly equivalent arithmetic, so that comparing code tells us nothing:
# only running the operations does. The test does not check a name we type in: it runs our
# `find_the_bug` on `PLANTED`, on correct engines and on engines broken in other ways, and only
# afterwards works out, by running each operation next to the engine of part 2, which one was
# broken.
#
# Note that the operators of a Tensor (`a * b`) call the engine of part 2, not `PLANTED`: a probe
# must call `engine.Mul.apply(a, b)` itself.

# %% nbgrader={"grade": false, "grade_id": "planted_bug", "locked": true, "schema_version": 3, "solution": false, "task": false}
import random
import re
import types

ENGINE_OPS = ("Add", "Sub", "Mul", "Div", "Neg", "Exp", "Log", "Tanh", "ReLU")
_ENGINE_CLASSES = {"Add": Add, "Sub": Sub, "Mul": Mul, "Div": Div, "Neg": Neg, "Exp": Exp, "Log": Log, "Tanh": Tanh,
                   "ReLU": ReLU}
# What each op's backward reads from ctx, and its right rule as an expression (as in the classes above).
_SAVED = {"Add": "a_shape, b_shape = ctx.shapes", "Sub": "a_shape, b_shape = ctx.shapes",
          "Mul": "a, b = ctx.saved_tensors", "Div": "a, b = ctx.saved_tensors", "Neg": "pass",
          "Exp": "(out,) = ctx.saved_tensors", "Log": "(a,) = ctx.saved_tensors", "Tanh": "(out,) = ctx.saved_tensors",
          "ReLU": "(mask,) = ctx.saved_tensors"}
_RULES = {"Add": "unbroadcast(grad, a_shape), unbroadcast(grad, b_shape)",
          "Sub": "unbroadcast(grad, a_shape), unbroadcast(-grad, b_shape)",
          "Mul": "unbroadcast(grad * b, a.shape), unbroadcast(grad * a, b.shape)",
          "Div": "unbroadcast(grad / b, a.shape), unbroadcast(-(grad * a) / (b * b), b.shape)",
          "Neg": "-grad", "Exp": "grad * out", "Log": "grad / a", "Tanh": "grad * (1 - out * out)", "ReLU": "grad * mask"}
BUG_CANDIDATES = [
    ("Sub", "unbroadcast(grad, a_shape), unbroadcast(grad, b_shape)"),  # the minus sign for b dropped
    ("Mul", "unbroadcast(grad * a, a.shape), unbroadcast(grad * b, b.shape)"),  # the two inputs swapped
    ("Div", "unbroadcast(grad / b, a.shape), unbroadcast(-(grad * a) / b, b.shape)"),  # b instead of b^2
    ("Neg", "grad"),  # the sign dropped
    ("Exp", "grad * out * out"),  # as if d/dx exp(x) were exp(2x)
    ("Log", "grad * a"),  # times a instead of divided by a
    ("Tanh", "grad * (1 - out)"),  # the square in 1 - tanh^2 missing
    ("ReLU", "grad * ~mask"),  # the mask inverted
]
_DISGUISES = random.SystemRandom()  # not seeded: an engine's disguise cannot be replayed


def _disguised(expression):
    """The same expression, with each `grad` and `mask` written in a random, exactly equivalent way."""
    def one(match):
        if match.group(0) == "mask":
            return _DISGUISES.choice(["mask", "(~(~mask))", "(mask & mask)"])
        s = repr(2.0 ** _DISGUISES.randint(1, 6))  # a power of two: multiplying and dividing by it is exact
        return _DISGUISES.choice(["grad", f"((grad * {s}) / {s})", f"((grad / {s}) * {s})", "(-(-grad))", "(grad + 0.0)"])
    return re.sub(r"\b(grad|mask)\b", one, expression)


def make_engine(bug=None):
    """A namespace of fresh op classes; bug = (op, rule) gives the op `op` the backward expression `rule`."""
    ops = {}
    for name in ENGINE_OPS:
        rule = bug[1] if bug is not None and bug[0] == name else _RULES[name]
        scope = {"np": np, "unbroadcast": unbroadcast}
        exec(compile(f"def backward(ctx, grad):\n    {_SAVED[name]}\n    return {_disguised(rule)}\n", "<engine>", "exec"),
             scope)
        ops[name] = type(name, (_ENGINE_CLASSES[name],), {"backward": staticmethod(scope["backward"])})
    return types.SimpleNamespace(**ops)


CORRECT_ENGINE = make_engine()
PLANTED = make_engine(_DISGUISES.choice(BUG_CANDIDATES))

# %% [markdown]
# **Probing one operation.** To test `Mul` alone we call `gradcheck` on a function that applies
# only `engine.Mul`, with two different random inputs (with `a * a` both gradients are equal, and
# a rule that swaps them would pass). The output is not a scalar, so our `gradcheck` weights it
# with a random upstream gradient. Each operation needs inputs from its domain: `Log` and the
# denominator of `Div` need positive values, and `ReLU` needs values away from its kink, which
# `kink_mask` finds.
#
# **Worked example.** On the correct engine:
#
# ```python
# >>> rng = np.random.default_rng(0)
# >>> a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
# >>> gradcheck(lambda a, b: CORRECT_ENGINE.Mul.apply(a, b), [a, b])
# True
# ```
#
# and on an engine whose `Tanh` forgets the square in $1 - \tanh^2$, `gradcheck(lambda a:
# make_engine(("Tanh", "grad * (1 - out)")).Tanh.apply(a), [a])` raises a `GradcheckError` for
# input 0, whose analytic values are $\bar y (1 - \tanh a)$ instead of $\bar y (1 - \tanh^2 a)$.
#
# ### Exercise `find_the_bug`
#
# Write `find_the_bug(engine)`: probe each of the nine operations with `gradcheck` and return the
# name of the one whose backward is wrong, or `None` if every operation passes. Then run it on
# `PLANTED` to see which operation our engine breaks.

# %% nbgrader={"grade": false, "grade_id": "find_the_bug", "locked": false, "schema_version": 3, "solution": true, "task": false}
def find_the_bug(engine):
    """The name of the operation of `engine` whose backward fails gradcheck, or None.

    engine : a namespace with the operations Add, Sub, Mul, Div, Neg, Exp, Log, Tanh and ReLU,
             used as engine.Mul.apply(a, b); at most one of them has a wrong backward.

    Returns a string such as "Mul", or None when every operation passes gradcheck. Probes must
    use inputs in each operation's domain (no warnings), away from ReLU's kink.
    """
    ### BEGIN SOLUTION
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    positive = rng.uniform(0.5, 2.0, size=(2, 3))
    away_from_kink = np.where(kink_mask(x, 1e-6), 1.0, x)
    probes = {
        "Add": (lambda a, b: engine.Add.apply(a, b), [x, y]),
        "Sub": (lambda a, b: engine.Sub.apply(a, b), [x, y]),
        "Mul": (lambda a, b: engine.Mul.apply(a, b), [x, y]),
        "Div": (lambda a, b: engine.Div.apply(a, b), [x, positive]),
        "Neg": (lambda a: engine.Neg.apply(a), [x]),
        "Exp": (lambda a: engine.Exp.apply(a), [x]),
        "Log": (lambda a: engine.Log.apply(a), [positive]),
        "Tanh": (lambda a: engine.Tanh.apply(a), [x]),
        "ReLU": (lambda a: engine.ReLU.apply(a), [away_from_kink]),
    }
    for name, (f, inputs) in probes.items():
        try:
            gradcheck(f, inputs)
        except GradcheckError:
            return name
    return None
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_find_the_bug", "locked": true, "points": 13, "schema_version": 3, "solution": false, "task": false}
import random

from autograder.inside import checks

# Probe inputs for the checks' comparison with the engine of part 2 (inside every domain, away from the kink).
FIND_PROBES = {"Add": (checks.randn(1, 2, 3), checks.randn(2, 2, 3)), "Sub": (checks.randn(3, 2, 3), checks.randn(4, 1, 3)),
               "Mul": (checks.randn(5, 2, 3), checks.randn(6, 2, 3)),
               "Div": (checks.randn(7, 2, 3), checks.randn(8, 2, 3, low=0.5, scale=2.0)), "Neg": (checks.randn(9, 4),),
               "Exp": (checks.randn(10, 4),), "Log": (checks.randn(11, 4, low=0.5, scale=2.0),),
               "Tanh": (checks.randn(12, 4),), "ReLU": (checks.randn(13, 4) + np.array([1.0, -1.0, 1.0, -1.0]),)}


# The course's own code as its locked cells wrote it (graded, it runs outside our kernel): the engine of part 2, which
# each engine is compared with, and the make_engine that makes the test's engines.
LOCKED = checks.locked_cell("machinery", "planted_bug")
REFERENCE_OPS = {name: getattr(LOCKED, name) for name in FIND_PROBES}


def check_found(label, engine, planted=None):
    """find_the_bug(engine); only after it returns do the checks work out which op the engine breaks, by running
    each op next to the engine of part 2, so the answer is nowhere to be read while find_the_bug runs. `planted` is
    the op the test made the engine break (None: no op; "one": one op, unknown to the test)."""
    got = checks.run_student("find_the_bug", find_the_bug, engine)
    broken = checks.differing_backwards(engine, REFERENCE_OPS, FIND_PROBES, Context, reference_context=LOCKED.Context)
    if broken != ([] if planted is None else [planted]) and not (planted == "one" and len(broken) == 1):
        raise checks.CheckFailure(
            f"[find_the_bug] {label}: the test made this engine break {planted or 'no operation'}, but it breaks "
            f"{broken or 'none'}: a cell changed the engine of part 2 or make_engine; restart the kernel and run "
            "every cell in order.")
    expected = broken[0] if broken else None
    if got == expected:
        return
    where = f"[find_the_bug] {label}" + (f", whose {expected} is broken" if expected else ", where every operation is right")
    if expected is None:
        hint = ("probe each op inside its domain (positive inputs for Log and Div's denominator, inputs away from "
                "ReLU's kink) and return None when no gradcheck fails.")
    else:
        hint = ("probe each op alone through engine.<Op>.apply (the Tensor operators call the engine of part 2, not "
                "this one), with two different random inputs for binary ops, and return the name of the op whose "
                "gradcheck raises GradcheckError.")
    raise checks.CheckFailure(f"{where}: expected {expected!r}, got {got!r}. Hint: {hint}")


# The test's own engines, made by the locked cell's make_engine. Graded, their backward rules stay outside our
# kernel: the engine we are handed is one of our make_engine(), its classes given those rules, so that which op
# is broken is nowhere in our kernel but in how the ops behave.
def engine_for(bug=None):
    return checks.backwards_in_grader(LOCKED.make_engine(bug), make_engine)


check_found("CORRECT_ENGINE", CORRECT_ENGINE)
check_found("PLANTED, our engine", PLANTED, planted="one")
engines = [(engine_for(bug), bug[0]) for bug in LOCKED.BUG_CANDIDATES] + [(engine_for(), None)]
random.SystemRandom().shuffle(engines)  # which engine comes when says nothing about its bug
for engine, op in engines:
    check_found("an engine of make_engine", engine, op)
### BEGIN HIDDEN TESTS
# Other bugs in the same ops: other wrong formulas than the candidates the notebook shows.
OTHER_BUGS = [("Sub", "unbroadcast(-grad, a_shape), unbroadcast(grad, b_shape)"),
              ("Mul", "unbroadcast(grad * b, a.shape), unbroadcast(grad * b, b.shape)"),
              ("Div", "unbroadcast(grad * b, a.shape), unbroadcast(-(grad * a) / (b * b), b.shape)"),
              ("Neg", "-np.ones_like(grad)"), ("Exp", "out"), ("Log", "grad / (a + 1)"),
              ("Tanh", "grad * (1 - np.tanh(out) ** 2)"), ("ReLU", "grad * mask * 2.0")]
engines = [(engine_for(bug), bug[0]) for bug in OTHER_BUGS] + [(engine_for(), None)]
random.SystemRandom().shuffle(engines)
for engine, op in engines:
    check_found("an engine broken another way", engine, op)
### END HIDDEN TESTS


# %% [markdown]
# ## 6. Figure: the V-curve
#
# The figure plots the error of the central-difference gradient of
# $f(x) = \sum_i \tanh(x_i)\, e^{x_i}$ (the function of `best_step`) against the step $h$, on
# log-log axes, for float64 and float32. The dashed lines are the two error terms of part 3,
# truncation $\propto h^2$ and rounding $\propto \varepsilon / h$; the dotted line is the
# smallest tolerance `atol + rtol * |n|` of `gradcheck`'s defaults at this point. The slider
# moves the step (the dot), and the toggle chooses the dtype in which $f$ is evaluated. Watch the
# bottom of the V move from about $10^{-5}$ in float64 to about $10^{-2}$ in float32, and rise
# from $10^{-11}$ to $10^{-5}$: at torch's default $h = 10^{-6}$ the float32 error is far above the
# tolerance, so a correct gradient would fail the check.
#
# The curves are computed by our own `step_size_sweep` (part 3), so the figure shows them once
# that exercise is done; the exact gradient is the engine's.

# %% nbgrader={"grade": false, "grade_id": "step_size_figure", "locked": true, "schema_version": 3, "solution": false, "task": false}
import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display

FIGURE_X = np.random.default_rng(0).standard_normal(6)
FIGURE_STEPS = np.logspace(-12, -0.5, 43)




def _figure_f(t):
    return (t.tanh() * t.exp()).sum()


def _figure_errors(dtype, steps):
    """Our step_size_sweep of _figure_f at FIGURE_X in `dtype`, or None while it is not written (or fails)."""
    try:
        return np.asarray(step_size_sweep(_figure_f, FIGURE_X.astype(dtype), steps), dtype=np.float64)
    except Exception:  # the figure must not fail before part 3 is done
        return None


_FIGURE_CURVES = {name: _figure_errors(dt, FIGURE_STEPS) for name, dt in [("float64", np.float64), ("float32", np.float32)]}
_figure_leaf = Tensor(FIGURE_X.copy(), requires_grad=True)
_figure_f(_figure_leaf).backward()
_FIGURE_TOL = 1e-5 + 1e-3 * np.min(np.abs(_figure_leaf.grad))


def draw_v_curve(log_step, dtype):
    h = 10.0**log_step
    eps_unit = np.finfo(dtype).eps / 2
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for name, errors in _FIGURE_CURVES.items():
        if errors is None:
            continue
        chosen = name == dtype
        ax.loglog(FIGURE_STEPS, errors, "o-" if chosen else "-", markersize=3, alpha=1.0 if chosen else 0.3,
                  color="tab:blue" if name == "float64" else "tab:red", label=name)
    scale = abs(float(_figure_f(Tensor(FIGURE_X)).data))
    ax.loglog(FIGURE_STEPS, FIGURE_STEPS**2, "--", color="gray", linewidth=1, label="truncation ~ h^2")
    ax.loglog(FIGURE_STEPS, eps_unit * scale / FIGURE_STEPS, "-.", color="gray", linewidth=1,
              label=f"rounding ~ eps|f|/h ({dtype})")
    ax.axhline(_FIGURE_TOL, color="black", linestyle=":", linewidth=1, label="gradcheck tolerance")
    errors = _figure_errors(np.dtype(dtype).type, [h])
    ax.set_ylim(1e-13, 1e1)
    ax.set_xlabel("step h")
    ax.set_ylabel("max |numeric - exact|")
    if errors is None:
        ax.set_title("write step_size_sweep (part 3) to see the error curves")
    else:
        ax.loglog([h], errors, "o", color="black", markersize=9)
        verdict_text = "passes" if errors[0] <= _FIGURE_TOL else "fails"
        ax.set_title(f"{dtype}, h = {h:.1e}: error {errors[0]:.1e} ({verdict_text} the default tolerance)")
    ax.legend(loc="upper center", fontsize=8, ncol=3)
    fig.tight_layout()
    plt.show()


step_slider = widgets.FloatSlider(value=-6.0, min=-12.0, max=-0.5, step=0.25, description="log10 h")
dtype_toggle = widgets.ToggleButtons(options=["float64", "float32"], value="float64", description="dtype")
figure_output = widgets.interactive_output(draw_v_curve, {"log_step": step_slider, "dtype": dtype_toggle})
display(widgets.HBox([step_slider, dtype_toggle]), figure_output)

# %% [markdown]
# ## 7. Putting it together
#
# The last cell runs our `gradcheck` over every operation of the engine of units 1.3 and 1.4, in
# float64, on the shapes that matter: broadcasting against a row, a column and a 0-d scalar,
# reductions over an axis and over all axes, `keepdims`, reshapes and transposes, the fused
# `CrossEntropy` with each reduction, a graph that reuses a node, and a two-layer MLP with the
# fused loss. Before checking the MLP, `kink_mask` tells us whether a pre-activation sits within
# the step of ReLU's kink; the MLP has 50 parameters in `W1` alone, so we sample 10 coordinates
# of each input with `n_samples`. Each line should say `ok`.

# %% nbgrader={"grade": false, "grade_id": "putting_it_together", "locked": true, "schema_version": 3, "solution": false, "task": false}
with checks.when_written("this example"):
    rng = np.random.default_rng(2024)
    x = rng.standard_normal((3, 4))
    y = rng.standard_normal((3, 4))
    row, col, scalar = rng.standard_normal((1, 4)), rng.standard_normal((3, 1)), np.asarray(1.7)
    positive = rng.uniform(0.5, 2.0, (3, 4))
    W = rng.standard_normal((4, 2))
    target = np.array([0, 2, 1, 1])
    ignored = np.array([0, -100, 1, 2])
    logits = rng.standard_normal((4, 3))

    X_mlp = rng.standard_normal((8, 5))
    y_mlp = rng.integers(0, 3, size=8)
    W1, b1, W2 = rng.standard_normal((5, 10)) * 0.5, rng.standard_normal(10) * 0.1, rng.standard_normal((10, 3)) * 0.5
    pre_activation = X_mlp @ W1 + b1
    print("MLP pre-activations within eps of the kink:", int(kink_mask(pre_activation, 1e-6).sum()))

    probes = [
        ("Add, (3, 4) + (1, 4)", lambda a, b: a + b, [x, row]),
        ("Sub, (3, 1) - (3, 4)", lambda a, b: a - b, [col, y]),
        ("Mul, (3, 4) * 0-d", lambda a, s: a * s, [x, scalar]),
        ("Div, (3, 4) / (3, 1)", lambda a, b: a / b, [x, positive[:, :1]]),
        ("Neg", lambda a: -a, [x]),
        ("MatMul, (3, 4) @ (4, 2)", lambda a, b: a @ b, [x, W]),
        ("Sum, axis=0", lambda a: a.sum(axis=0), [x]),
        ("Sum, axis=1, keepdims", lambda a: a.sum(axis=1, keepdims=True), [x]),
        ("Mean, all axes", lambda a: a.mean(), [x]),
        ("Mean, axis=(0, 1) of 3-D", lambda a: a.mean(axis=(0, 1)), [rng.standard_normal((2, 3, 4))]),
        ("Exp", lambda a: a.exp(), [x]),
        ("Log", lambda a: a.log(), [positive]),
        ("Tanh", lambda a: a.tanh(), [x]),
        ("ReLU, away from the kink", lambda a: a.relu(), [np.where(kink_mask(x, 1e-6), 0.5, x)]),
        ("Reshape (3, 4) -> (2, 6)", lambda a: a.reshape(2, 6), [x]),
        ("Transpose", lambda a: a.T, [x]),
        ("CrossEntropy, mean", lambda z: CrossEntropy.apply(z, target), [logits]),
        ("CrossEntropy, sum, one ignored", lambda z: CrossEntropy.apply(z, ignored, reduction="sum"), [logits]),
        ("CrossEntropy, none", lambda z: CrossEntropy.apply(z, target, reduction="none"), [logits]),
        ("x reused: tanh(x * x + x) / y", lambda a, b: ((a * a + a).tanh() / b).sum(), [x, positive]),
        ("MLP + CrossEntropy, 10 samples per input",
         lambda W1, b1, W2: CrossEntropy.apply(((X_mlp @ W1 + b1).relu() @ W2), y_mlp), [W1, b1, W2]),
    ]
    for label, f, inputs in probes:
        options = {"n_samples": 10} if label.startswith("MLP") else {}
        try:
            result = gradcheck(f, inputs, **options)
            print(f"{label:45s} {'ok' if result is True else result}")
        except GradcheckError as error:
            print(f"{label:45s} FAILED: {error}")

# %% [markdown]
# ## Summary
#
# - The central difference $(f(x + h) - f(x - h)) / 2h$ has truncation error $\tfrac{h^2}{6} f'''$;
#   the one-sided difference only $\tfrac{h}{2} f''$. A numeric gradient costs two evaluations of
#   $f$ per coordinate, and must leave its input exactly as it found it.
# - A backward rule computes a vector-Jacobian product; its numeric twin is the gradient of
#   $\sum g \odot f(x)$ with a random $g$, which catches mistakes an all-ones $g$ hides.
# - Rounding adds an error $\varepsilon |f| / h$, so the total error is a V in $h$ with its bottom
#   near $\varepsilon^{1/3}$: about $10^{-5}$ in float64 (error $10^{-11}$), about $10^{-2}$ in
#   float32 (error $10^{-5}$). Gradient checks run in float64, with torch's
#   $|a - n| \le 10^{-5} + 10^{-3} |n|$ at $h = 10^{-6}$.
# - A failed check should name the input, the worst coordinate and both values. At a kink (ReLU
#   at 0) the check fails on correct code whenever $|x| < h$; such coordinates are skipped or
#   moved.
# - With one probe per operation, a gradient checker turns "the loss does not go down" into
#   "`Tanh.backward` is wrong".
#
# Next, in unit 1.6, we look under the arrays themselves: shapes, strides and storage offsets, and
# why a transposed or sliced input must give the same gradients as a contiguous copy.

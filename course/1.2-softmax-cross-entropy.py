# %% [markdown]
# # 1.2 Stable softmax, cross-entropy and loss reductions
#
# In unit 1.1 a network turned an input into a vector of **logits**: real numbers, one per class,
# with no constraint on their sign or size. In this unit we turn logits into a loss that a
# gradient can follow. The formulas fit on one line each, yet the one-line versions fail in
# practice: `exp` overflows, a probability underflows to 0 and its log becomes `-inf`, padding
# tokens dilute a mean, a float32 model quietly computes in float64. We build each piece so that
# it gives the right number for every input a training run will feed it, and we check every
# piece against PyTorch.
#
# The functions written here come back later. In unit 1.4 `cross_entropy` and
# `cross_entropy_backward` become one fused `CrossEntropy` operation of our autodiff engine, and
# in the mini-project they train a real classifier.
#
# ## Learning goals
#
# After this unit we can:
#
# 1. derive softmax, log-softmax and log-sum-exp, and say exactly where the textbook formulas
#    overflow or underflow in float32 and float64;
# 2. prove that subtracting the maximum changes neither softmax nor its gradient, and use that
#    shift to compute all three stably, including masked (`-inf`) entries;
# 3. derive cross-entropy as the negative log-likelihood of a categorical model, the softmax
#    Jacobian-vector product, and the gradient $\mathrm{softmax}(z) - \mathrm{onehot}(t)$, scaled
#    by an upstream gradient;
# 4. implement the `"none"`, `"sum"` and `"mean"` reductions and `ignore_index` exactly as
#    `torch.nn.functional.cross_entropy` does, including the empty mean;
# 5. derive the stable form of binary cross-entropy on logits, and relate MSE and L1 to Gaussian
#    and Laplace likelihoods;
# 6. keep float32 inputs in float32, and write numerical code that raises no warnings.
#
# ## Readings
#
# - **Understanding Deep Learning** (Prince), chapter 5, *Loss functions*: 5.1 (maximum
#   likelihood), 5.3 (univariate regression: least squares from a Gaussian), 5.4 (binary
#   classification: Bernoulli and the sigmoid), 5.5 (multiclass classification: categorical and
#   softmax) and 5.7 (cross-entropy loss).
# - **Dive into Deep Learning**, 4.1 *Softmax Regression* (the model and its loss, including the
#   derivative of the loss) and 4.5 *Concise Implementation of Softmax Regression*, section
#   *Softmax Revisited* (overflow, underflow and the log-sum-exp trick).
# - **CS231n**, *Linear classification* notes: the *Softmax classifier* section
#   ($L_i = -f_{y_i} + \log\sum_j e^{f_j}$) and its *Practical issues: Numeric stability*
#   paragraph (`f -= np.max(f)`).
# - **PyTorch documentation**: `torch.nn.functional.cross_entropy` and `torch.nn.CrossEntropyLoss`
#   (the `reduction` and `ignore_index` parameters: ignored targets contribute nothing, and the
#   mean is over the targets that are not ignored), `torch.nn.BCEWithLogitsLoss`,
#   `torch.nn.MSELoss`, `torch.nn.L1Loss` and `torch.logsumexp`.
# - **External drills** (the course outline's "external-tests"): the loss problems of TensorTonic's
#   *Build Micrograd from Scratch* study plan, with their local tests kept as evidence; and, as one
#   changed-prompt drill, Deep-ML's problem 1227 *Stable Softmax* or 997 *Manual Cross-Entropy
#   Backprop* (parts 2 and 4 of this notebook are their solutions).
#
# ## How this notebook works
#
# Each exercise has a heading with its task ID, the math, a worked example, a cell for our code
# and a test cell. The test cells run small visible checks; the grader adds hidden checks that
# compare our functions with PyTorch on seeded random inputs, in float32 and float64, with
# extreme values, odd shapes and non-contiguous arrays. Three rules hold throughout:
#
# - **NumPy only.** A solution that calls torch earns no points for that exercise.
# - **Same dtype as torch.** float32 in, float32 out; float64 in, float64 out.
# - **No warnings.** A NumPy `RuntimeWarning` (overflow, divide by zero, invalid value) fails the
#   check: nbgrader gives no points to a test cell that writes to stderr, and a warning is nearly
#   always the symptom of an `inf` or `nan` somewhere.
#
# | part | task | points |
# |---|---|---|
# | 2 | `logsumexp` | 8 |
# | 2 | `softmax` | 8 |
# | 2 | `log_softmax` | 8 |
# | 2 | `explain_max_shift` (written, graded by hand) | 12 |
# | 3 | concept checks `confidence_losses`, `initial_loss`, `ignored_mean` | 4 + 3 + 3 |
# | 3 | `cross_entropy` | 14 |
# | 4 | `softmax_backward` | 8 |
# | 4 | `cross_entropy_backward` | 14 |
# | 5 | `binary_cross_entropy_with_logits` | 8 |
# | 6 | `mse_loss`, `l1_loss` | 5 + 5 |
# | | **total** | **100** |

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import numpy as np

# The checks compare our code with PyTorch, which loads (a few seconds) when the first test cell runs.
from autograder.inside import checks

# %% [markdown]
# ## 1. Softmax, and how the textbook formula breaks
#
# A classifier with $C$ classes produces logits $z \in \mathbb{R}^C$. **Softmax** turns them into
# a probability distribution:
#
# $$
# \mathrm{softmax}(z)_i = \frac{e^{z_i}}{\sum_{j=1}^{C} e^{z_j}}, \qquad i = 1, \dots, C .
# $$
#
# Every entry is positive, the entries sum to 1, and the order of the logits is kept: the largest
# logit gets the largest probability. Logits are only defined up to a common constant, a fact
# that part 2 puts to work.
#
# Floating-point numbers have a finite range. The largest float32 is about
# $3.4 \times 10^{38} = e^{88.72}$ and the largest float64 about $1.8 \times 10^{308} = e^{709.78}$,
# so `np.exp(z)` **overflows** to `inf` once $z > 88.72$ in float32 (or $z > 709.78$ in float64).
# At the other end, `np.exp(z)` **underflows** to exactly 0 once $z < -104$ in float32 (below the
# smallest subnormal number) or $z < -745$ in float64. Either failure turns the quotient above
# into $\infty / \infty$ or $0 / 0$, both `nan`.
#
# Logits of that size are not exotic. A confident classifier late in training, a network with
# badly scaled initial weights, or a temperature below 1 produce them. Below is the textbook
# formula, given, and an input we reuse in the tests: one row of float32 logits near $+1000$ and
# one near $-1000$. Both rows have the same softmax as $(1, 2, 3)$ reversed, because they differ
# from it by a constant: about $(0.665, 0.245, 0.090)$.

# %% nbgrader={"grade": false, "grade_id": "naive_softmax", "locked": true, "schema_version": 3, "solution": false, "task": false}
def naive_softmax(z, axis=-1):
    """The textbook formula exp(z) / sum(exp(z)). Kept only to show how it fails."""
    numerator = np.exp(z)
    return numerator / numerator.sum(axis=axis, keepdims=True)


Z_EXTREME = np.array([[1000.0, 999.0, 998.0],
                      [-1000.0, -1001.0, -1002.0]], dtype=np.float32)

# %% [markdown]
# We run the naive formula on `Z_EXTREME`. NumPy would print an overflow warning and an
# invalid-value warning; `np.errstate` silences them for this one demonstration only, so that we
# can look at the result.

# %% nbgrader={"grade": false, "grade_id": "naive_softmax_demo", "locked": true, "schema_version": 3, "solution": false, "task": false}
with np.errstate(over="ignore", invalid="ignore"):
    print("exp(Z_EXTREME):\n", np.exp(Z_EXTREME))
    print("naive_softmax(Z_EXTREME):\n", naive_softmax(Z_EXTREME))
print("largest float32:", np.finfo(np.float32).max, "= exp(%.2f)" % np.log(np.finfo(np.float32).max))

# %% [markdown]
# The first row overflows ($e^{1000} = \infty$, and $\infty / \infty$ is `nan`); the second
# underflows ($e^{-1000} = 0$, and $0 / 0$ is `nan`). The correct answer is finite and perfectly
# ordinary. The rest of this part computes it.
#
# ## 2. The max shift, log-sum-exp and log-softmax
#
# **Shift invariance.** For any constant $c$ subtracted from every logit,
#
# $$
# \mathrm{softmax}(z - c\mathbf{1})_i
# = \frac{e^{z_i - c}}{\sum_j e^{z_j - c}}
# = \frac{e^{-c}\, e^{z_i}}{e^{-c} \sum_j e^{z_j}}
# = \mathrm{softmax}(z)_i .
# $$
#
# We choose $c = m = \max_j z_j$. Then every exponent $z_j - m$ is at most 0, so every term
# $e^{z_j - m}$ lies in $(0, 1]$, and the term of the largest logit is exactly $e^0 = 1$. The
# denominator therefore lies in $[1, C]$: nothing overflows and we never divide by zero. A term
# can still underflow to 0, but only when it is below $e^{-104}$ relative to the largest term,
# far below float32 resolution, so the result loses nothing.
#
# **Log-sum-exp.** The same shift, taken into the log, gives the log of the denominator:
#
# $$
# \operatorname{LSE}(z) = \log \sum_j e^{z_j}
# = \log\Big( e^{m} \sum_j e^{z_j - m} \Big)
# = m + \log \sum_j e^{z_j - m} .
# $$
#
# Since the sum lies in $[1, C]$, its log lies in $[0, \log C]$, and
# $m \le \operatorname{LSE}(z) \le m + \log C$: log-sum-exp is a *smooth maximum*. Its derivative
# is softmax, $\partial \operatorname{LSE} / \partial z_i = e^{z_i} / \sum_j e^{z_j}$, which we
# use in part 4.
#
# **Masked rows.** Attention and sequence models set the logits of forbidden positions to
# $-\infty$, so that $e^{-\infty} = 0$ removes them. A row whose entries are *all* $-\infty$ has
# an empty sum, and the natural answer, which torch returns, is $\log 0 = -\infty$. The shift
# needs care there: $m = -\infty$ and $z_j - m = -\infty - (-\infty)$ is `nan`. Any constant
# shift gives the same result, so for rows whose maximum is not finite we shift by 0 instead;
# such a row then sums to 0, and $\log 0 = -\infty$ is the answer we want. NumPy warns about `log(0)` ("divide by zero"), so we tell it that this one is
# intended, with `with np.errstate(divide="ignore"):` around the log.
#
# **Shapes.** The reduction runs along `axis`. Keeping that axis with `keepdims=True` while we
# compute lets $m$ broadcast against `z`; at the end we drop it unless the caller asked for
# `keepdims=True`, as `torch.logsumexp(z, dim, keepdim)` does.
#
# **Worked example.** For $z = (1, 2, 3)$: $m = 3$, the shifted terms are
# $e^{-2}, e^{-1}, e^{0} = 0.1353, 0.3679, 1$, their sum is $1.5032$, and
# $\operatorname{LSE}(z) = 3 + \log 1.5032 = 3.4076$. For the first row of `Z_EXTREME`,
# $(1000, 999, 998)$, the shifted terms are the same three numbers and the result is $1000.4076$,
# finite in float32.
#
# ### Exercise `logsumexp`
#
# Write `logsumexp(z, axis=-1, keepdims=False)`, like `torch.logsumexp(z, dim=axis, keepdim=keepdims)`.

# %% nbgrader={"grade": false, "grade_id": "logsumexp", "locked": false, "schema_version": 3, "solution": true, "task": false}
def logsumexp(z, axis=-1, keepdims=False):
    """Stable log(sum(exp(z))) along `axis`, like torch.logsumexp.

    z        : float array (float32 or float64), any shape with at least one axis.
    axis     : the axis to reduce over (negative values count from the end).
    keepdims : keep the reduced axis with size 1.

    Returns an array of z's dtype. Logits of magnitude 1e3 give finite results, a row of all
    -inf gives -inf, and no NumPy warning is raised.
    """
    ### BEGIN SOLUTION
    z = np.asarray(z)
    m = np.max(z, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)  # an all -inf row: shift by 0, not by -inf (which gives nan)
    with np.errstate(divide="ignore"):  # log(0) = -inf is the right answer for an all -inf row
        out = m + np.log(np.sum(np.exp(z - m), axis=axis, keepdims=True))
    return out if keepdims else np.squeeze(out, axis=axis)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_logsumexp", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def masked_row_hint(got, expected):
    if np.any(np.isneginf(expected) & np.isnan(got)):
        return ("a row of all -inf must give -inf. Its maximum is -inf, and z - max is -inf - (-inf) = nan: "
                "shift such rows by 0 instead of by their maximum.")
    return None


got = checks.run_student("logsumexp", logsumexp, np.array([1.0, 2.0, 3.0]))
checks.assert_close(got, np.array(3 + np.log(np.exp(-2.0) + np.exp(-1.0) + 1)), task="logsumexp",
                    case="worked example z = (1, 2, 3)")
z_extreme = checks.locked_cell("naive_softmax").Z_EXTREME
checks.against_torch("logsumexp", logsumexp, "logsumexp", [
    checks.case("the float32 input of the naive demo", z_extreme),
    checks.case("keepdims=True", z_extreme, keepdims=True),
    checks.case("axis=0", np.array([[1.0, 2.0], [3.0, 5.0], [0.0, -1.0]]), axis=0),
    checks.case("a fully masked row (all -inf)", np.array([[0.0, 1.0], [-np.inf, -np.inf]])),
], hints=[masked_row_hint])
def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    cases = []
    for dt in (np.float64, np.float32):
        z3 = checks.randn(s + 11, 2, 3, 4, dtype=dt, scale=3.0)
        masked = checks.randn(s + 12, 4, 5, dtype=dt)
        masked[0, 1] = masked[2, :3] = -np.inf  # masked entries, as an attention mask makes them
        masked[1] = -np.inf                     # a fully masked row
        cases += [
            checks.case("random rows", checks.randn(s + 10, 5, 7, dtype=dt, scale=3.0)),
            checks.case("3-D, axis=0", z3, axis=0),
            checks.case("3-D, axis=1, keepdims", z3, axis=1, keepdims=True),
            checks.case("3-D, axis=-2", z3, axis=-2),
            checks.case("1-D", checks.randn(s + 13, 6, dtype=dt)),
            checks.case("1-D, keepdims", checks.randn(s + 13, 6, dtype=dt), keepdims=True),
            checks.case("a size-1 class axis", checks.randn(s + 14, 4, 1, dtype=dt)),
            checks.case("a size-1 batch axis, axis=0", checks.randn(s + 15, 1, 5, dtype=dt), axis=0),
            checks.case("a single element", checks.randn(s + 16, 1, 1, dtype=dt), keepdims=True),
            checks.case("magnitude 1e3", checks.randn(s + 17, 6, 9, dtype=dt, scale=1000.0)),
            checks.case("all near -1e3 (every exp underflows)", checks.randn(s + 18, 3, 4, dtype=dt) - 1000),
            checks.case("non-contiguous (sliced)", checks.strided(checks.randn(s + 19, 4, 6, dtype=dt))),
            checks.case("non-contiguous (transposed), axis=0", checks.randn(s + 20, 6, 4, dtype=dt).T, axis=0),
            checks.case("masked entries and a fully masked row", masked),
            checks.case("masked, keepdims", masked, keepdims=True),
            checks.case("masked, axis=0", masked.T.copy(), axis=0),
        ]
    checks.against_torch("logsumexp", logsumexp, "logsumexp", cases, hints=[masked_row_hint])


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise `softmax`
#
# With the shift, softmax is
#
# $$
# \mathrm{softmax}(z)_i = \frac{e^{z_i - m}}{\sum_j e^{z_j - m}}, \qquad m = \max_j z_j ,
# $$
#
# computed along `axis` with the sum kept as a size-1 axis so that it broadcasts. (Equivalently,
# $\mathrm{softmax}(z) = \exp\big(z - \operatorname{LSE}(z)\big)$.) Masked entries ($-\infty$)
# get probability 0, as long as the row has at least one finite logit.
#
# **Worked example.** $\mathrm{softmax}(1, 2, 3) = (0.1353, 0.3679, 1) / 1.5032
# = (0.0900, 0.2447, 0.6652)$. The first row of `Z_EXTREME` is $(1000, 999, 998)$; after the
# shift it is $(0, -1, -2)$, and its softmax is $(0.6652, 0.2447, 0.0900)$, in float32.

# %% nbgrader={"grade": false, "grade_id": "softmax", "locked": false, "schema_version": 3, "solution": true, "task": false}
def softmax(z, axis=-1):
    """Stable softmax along `axis`, like torch.softmax(z, dim=axis).

    z    : float array (float32 or float64), any shape with at least one axis.
    axis : the axis that holds the classes.

    Returns an array of z's shape and dtype whose slices along `axis` sum to 1. Logits of
    magnitude 1e3 give finite results, and no NumPy warning is raised.
    """
    ### BEGIN SOLUTION
    z = np.asarray(z)
    e = np.exp(z - np.max(z, axis=axis, keepdims=True))  # every exponent <= 0
    return e / np.sum(e, axis=axis, keepdims=True)       # the sum lies in [1, C]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_softmax", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
checks.against_torch("softmax", softmax, "softmax", [
    checks.case("worked example z = (1, 2, 3)", np.array([1.0, 2.0, 3.0])),
    checks.case("the float32 input of the naive demo", checks.locked_cell("naive_softmax").Z_EXTREME),
    checks.case("axis=0", np.array([[1.0, 2.0], [3.0, 5.0], [0.0, -1.0]]), axis=0),
])
def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    cases, extreme32 = [], []
    for dt in (np.float64, np.float32):
        z3 = checks.randn(s + 21, 2, 3, 4, dtype=dt, scale=3.0)
        masked = checks.randn(s + 22, 4, 5, dtype=dt)
        masked[0, 1] = masked[2, :3] = -np.inf  # masked entries; every row keeps a finite logit
        cases += [
            checks.case("random rows", checks.randn(s + 23, 5, 7, dtype=dt, scale=3.0)),
            checks.case("3-D, axis=0", z3, axis=0),
            checks.case("3-D, axis=1", z3, axis=1),
            checks.case("3-D, axis=-2", z3, axis=-2),
            checks.case("1-D", checks.randn(s + 24, 6, dtype=dt)),
            checks.case("a size-1 class axis", checks.randn(s + 25, 4, 1, dtype=dt)),
            checks.case("a size-1 batch axis, axis=0", checks.randn(s + 26, 1, 5, dtype=dt), axis=0),
            checks.case("non-contiguous (sliced)", checks.strided(checks.randn(s + 29, 4, 6, dtype=dt))),
            checks.case("non-contiguous (transposed), axis=0", checks.randn(s + 30, 6, 4, dtype=dt).T, axis=0),
            checks.case("masked entries", masked),
        ]
        (extreme32 if dt == np.float32 else cases).extend([
            checks.case("magnitude 1e3", checks.randn(s + 27, 6, 9, dtype=dt, scale=1000.0)),
            checks.case("all near -1e3 (every exp underflows)", checks.randn(s + 28, 3, 4, dtype=dt) - 1000),
        ])
    checks.against_torch("softmax", softmax, "softmax", cases)
    # float32 logits up to |z| ~ 4000 are spaced up to 2.4e-4 apart, so formulas that agree in exact
    # arithmetic (z - LSE(z) against (z - m) - log s) differ by up to half that spacing: atol 3e-4.
    checks.against_torch("softmax", softmax, "softmax", extreme32, atol=3e-4)


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise `log_softmax`
#
# Losses need $\log \mathrm{softmax}(z)$, the log-probabilities. Taking the log of the formula
# and using log-sum-exp,
#
# $$
# \log \mathrm{softmax}(z)_i = z_i - \operatorname{LSE}(z) = (z_i - m) - \log \sum_j e^{z_j - m}.
# $$
#
# Why not simply `np.log(softmax(z))`? Because a probability can underflow to 0 while its log is
# an ordinary number. For the float32 logits $z = (0, -800)$ the second probability is
# $e^{-800} \approx 10^{-348}$, which is 0 in float32 (and in float64), so `np.log(softmax(z))`
# gives $-\infty$ (with a warning). The formula above gives
# $-800 - \log(1 + e^{-800}) = -800$, exactly. A model that is confidently wrong about a sample
# then has loss 800, large and finite, and its gradient can fix it; with $-\infty$ training
# would stop with `nan` weights.
#
# **Worked example.** $\log\mathrm{softmax}(1, 2, 3) = (1, 2, 3) - 3.4076 = (-2.4076, -1.4076, -0.4076)$.

# %% nbgrader={"grade": false, "grade_id": "log_softmax", "locked": false, "schema_version": 3, "solution": true, "task": false}
def log_softmax(z, axis=-1):
    """Stable log(softmax(z)) along `axis`, like torch.log_softmax(z, dim=axis).

    z    : float array (float32 or float64), any shape with at least one axis.
    axis : the axis that holds the classes.

    Returns an array of z's shape and dtype. It stays finite where a probability underflows to 0
    (float32 logits 800 apart, say), and no NumPy warning is raised.
    """
    ### BEGIN SOLUTION
    z = np.asarray(z)
    return z - logsumexp(z, axis=axis, keepdims=True)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_log_softmax", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
checks.against_torch("log_softmax", log_softmax, "log_softmax", [
    checks.case("worked example z = (1, 2, 3)", np.array([1.0, 2.0, 3.0])),
    checks.case("the float32 input of the naive demo", checks.locked_cell("naive_softmax").Z_EXTREME),
    checks.case("a probability that underflows: float32 z = (0, -800)", np.array([0.0, -800.0], dtype=np.float32)),
    checks.case("axis=0", np.array([[1.0, 2.0], [3.0, 5.0], [0.0, -1.0]]), axis=0),
])
def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    cases, extreme32 = [], []
    for dt in (np.float64, np.float32):
        z3 = checks.randn(s + 31, 2, 3, 4, dtype=dt, scale=3.0)
        masked = checks.randn(s + 32, 4, 5, dtype=dt)
        masked[0, 1] = masked[2, :3] = -np.inf  # masked entries; every row keeps a finite logit
        cases += [
            checks.case("random rows", checks.randn(s + 33, 5, 7, dtype=dt, scale=3.0)),
            checks.case("3-D, axis=0", z3, axis=0),
            checks.case("3-D, axis=1", z3, axis=1),
            checks.case("3-D, axis=-2", z3, axis=-2),
            checks.case("1-D", checks.randn(s + 34, 6, dtype=dt)),
            checks.case("a size-1 class axis", checks.randn(s + 35, 4, 1, dtype=dt)),
            checks.case("a size-1 batch axis, axis=0", checks.randn(s + 36, 1, 5, dtype=dt), axis=0),
            checks.case("non-contiguous (sliced)", checks.strided(checks.randn(s + 39, 4, 6, dtype=dt))),
            checks.case("non-contiguous (transposed), axis=0", checks.randn(s + 40, 6, 4, dtype=dt).T, axis=0),
            checks.case("masked entries", masked),
        ]
        (extreme32 if dt == np.float32 else cases).extend([
            checks.case("magnitude 1e3", checks.randn(s + 37, 6, 9, dtype=dt, scale=1000.0)),
            checks.case("all near -1e3 (every exp underflows)", checks.randn(s + 38, 3, 4, dtype=dt) - 1000),
        ])
    checks.against_torch("log_softmax", log_softmax, "log_softmax", cases)
    # float32 logits up to |z| ~ 4000 are spaced up to 2.4e-4 apart, so formulas that agree in exact
    # arithmetic (z - LSE(z) against (z - m) - log s) differ by up to half that spacing: atol 3e-4.
    checks.against_torch("log_softmax", log_softmax, "log_softmax", extreme32, atol=3e-4)


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ### Explain `explain_max_shift`
#
# In a few sentences and at most a few lines of math: (a) why does subtracting the maximum leave
# softmax unchanged? (b) Why does it leave its gradient unchanged too, even though the maximum
# $m = \max_j z_j$ itself depends on $z$? (c) What does the shift change, numerically?
# (Graded by hand; 12 points: (a) 4, (b) 5, (c) 3.)

# %% [markdown] nbgrader={"grade": true, "grade_id": "explain_max_shift", "locked": false, "points": 12, "schema_version": 3, "solution": true, "task": false}
# **Model answer.**
#
# *(a) The value (4 points).* Subtracting the same number $c$ from every logit multiplies every term
# $e^{z_j}$ by the same factor $e^{-c}$, in the numerator and in the denominator alike, so it
# cancels: $\mathrm{softmax}(z - c\mathbf{1}) = \mathrm{softmax}(z)$ for **every** real $c$.
# The maximum is just one choice of $c$.
#
# *(b) The gradient (5 points).* Because the identity holds for every $c$, the map
# $z \mapsto \mathrm{softmax}(z - m(z)\mathbf{1})$ is the *same function* as
# $z \mapsto \mathrm{softmax}(z)$ at every point, and the same function has the same derivative.
# Differentiating through $m(z)$ explicitly says the same thing: the chain rule adds the term
# $-J\,\mathbf{1}\,\nabla m(z)^\top$, where $J = \mathrm{diag}(p) - p p^\top$ is the Jacobian of
# softmax, and $J\mathbf{1} = p - p\,(p^\top \mathbf{1}) = p - p = 0$ because the probabilities
# sum to 1. Softmax is flat along the direction $\mathbf{1}$, so how $m$ moves with $z$ does not
# matter (this also covers ties, where $m$ has no unique gradient). That is why implementations
# may treat $m$ as a constant (a "stop-gradient") in backward. The same holds for log-softmax and
# cross-entropy: $\nabla_z \big(m + \operatorname{LSE}(z - m\mathbf{1})\big)
# = \nabla m + p - (p^\top\mathbf{1})\nabla m = p$.
#
# *(c) What it changes (3 points).* Only the arithmetic: after the shift every exponent is at most
# 0, so no $e^{z_j - m}$ overflows, and the largest term is exactly 1, so the denominator lies in
# $[1, C]$ and is never 0. Terms that underflow are smaller than $e^{-104}$ relative to that 1,
# so dropping them loses nothing at float32 precision. Without the shift, float32 logits above
# about 88.7 overflow to `inf` and logits below about -104 underflow to 0, and the result is
# `nan`.

# %% [markdown]
# ## 3. Cross-entropy is a negative log-likelihood
#
# A classifier models the label $t \in \{0, \dots, C-1\}$ of an input $x$ as a **categorical**
# random variable whose probabilities are the softmax of the logits $z = f(x)$:
#
# $$
# P(t = c \mid x) = \mathrm{softmax}(z)_c .
# $$
#
# Given $N$ independent samples $(x_n, t_n)$, **maximum likelihood** chooses the parameters that
# make the observed labels most probable, $\prod_n P(t_n \mid x_n)$. The log turns the product
# into a sum and a minus sign turns maximizing into minimizing, so we minimize the
# **negative log-likelihood**, a sum of one term per sample:
#
# $$
# \ell_n = -\log \mathrm{softmax}(z_n)_{t_n} = \operatorname{LSE}(z_n) - z_{n, t_n} .
# $$
#
# The right-hand form is CS231n's $L_i = -f_{y_i} + \log \sum_j e^{f_j}$. It is called
# **cross-entropy** because it equals $H(q, p) = -\sum_c q_c \log p_c$ for the one-hot
# distribution $q$ of the true label (UDL 5.7): only the true class's term survives. We compute
# it from `log_softmax`, never as `np.log(softmax(z))`, for the reason of part 2.
#
# The loss depends only on $p_t$, the probability given to the true class. It is 0 when
# $p_t = 1$ and grows without bound as $p_t \to 0$: a confident mistake costs a lot.
#
# ### Concept check `confidence_losses`
#
# What is the loss $\ell$ of one sample when the model gives the true class probability
# $p = 0.9$? And when it gives $p = 0.1$? Three decimals are enough.

# %% nbgrader={"grade": false, "grade_id": "confidence_losses", "locked": false, "schema_version": 3, "solution": true, "task": false}
loss_p09 = None  # the loss when the true class gets p = 0.9
loss_p01 = None  # the loss when the true class gets p = 0.1
### BEGIN SOLUTION
loss_p09 = -np.log(0.9)
loss_p01 = -np.log(0.1)
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_confidence_losses", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# The answers are stored as digests (checks.close_digests) so that this cell does not print them:
# a value passes when it rounds, to 3 decimals, to the answer or a neighbour (within about 1e-3).
hint = "the loss is -log p of the true class, with the natural log."
checks.check_close_hash("confidence_losses", "loss_p09", loss_p09, ("cdbd8bc4b3c98275f814af5097b0af08b4e63887be5c4dacf002245e5d04ea11",
    "82a0a6803ae51f1972a7e0c6a0ca014351478d79077139dd48eb3880613d2d11",
    "258efd13f5e66fe01ceb80ed6a6028b66d285db42d80854a2bf7bdfe5385c148"), hint=hint)
checks.check_close_hash("confidence_losses", "loss_p01", loss_p01, ("4e7b359be0c2f4a0cd156542375d2d18eeaf16c809033e37eae5dc68ef5cdf86",
    "b5b6e4ef7f3e4623bf8aa56eea7f66e78767c52da03acacbf4b1c0ddf1e7d074",
    "297e72fb6d1abe70fc0cea18e604de5638c0bcffdd672eda4d8e960474b262f7"), hint=hint)
### BEGIN HIDDEN TESTS
# 1e-3: the question asks for three decimals (0.105, 2.303)
checks.check_value("confidence_losses", "loss_p09", loss_p09, -np.log(0.9), atol=1e-3, hint=hint)
checks.check_value("confidence_losses", "loss_p01", loss_p01, -np.log(0.1), atol=1e-3, hint=hint)
### END HIDDEN TESTS


# %% [markdown]
# ### Concept check `initial_loss`
#
# A sanity check worth running before any training (CS231n recommends it): a freshly initialized
# classifier has small, nearly equal logits, so its softmax is nearly uniform. What cross-entropy
# should a 1000-class classifier (ImageNet, say) report at step 0 if all its logits are equal?
# Three decimals are enough. (A much larger number at step 0 means the initial logits are too
# large; we can see this in the figure at the end of the notebook.)

# %% nbgrader={"grade": false, "grade_id": "initial_loss", "locked": false, "schema_version": 3, "solution": true, "task": false}
initial_loss_1000 = None  # the loss of equal logits over 1000 classes
### BEGIN SOLUTION
initial_loss_1000 = np.log(1000)
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_initial_loss", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# Stored as digests (checks.close_digests): within about 1e-3 of the answer, without printing it.
hint = "equal logits give p = 1/C for every class, and the loss is -log p of the true class."
checks.check_close_hash("initial_loss", "initial_loss_1000", initial_loss_1000, ("052056927b3503489d0c8f0457ae0c38abde27fb77992483f1d69fcffed03bf2",
    "241d5817aeeeec1ec481fa48858a12e813afd49299f519bcfd7f6eb39b3a4786",
    "1fe45ae64f49dd2676ce28d0c9bf38e89bf17a190851d16dad94214fa4435cdf"), hint=hint)
### BEGIN HIDDEN TESTS
# 5e-3: three decimals (6.908), or 6.91
checks.check_value("initial_loss", "initial_loss_1000", initial_loss_1000, np.log(1000), atol=5e-3, hint=hint)
### END HIDDEN TESTS


# %% [markdown]
# ### Reductions and `ignore_index`
#
# A batch gives one loss $\ell_n$ per sample; the `reduction` argument says what to return:
#
# $$
# \texttt{"none"}: (\ell_1, \dots, \ell_N), \qquad
# \texttt{"sum"}: \sum_{n \in V} \ell_n, \qquad
# \texttt{"mean"}: \frac{1}{|V|} \sum_{n \in V} \ell_n,
# \qquad V = \{ n : t_n \ne \texttt{ignore\_index} \}.
# $$
#
# Targets equal to `ignore_index` (default $-100$) mark samples that are not part of the loss:
# padding tokens in a batch of sentences of different lengths, or unlabelled pixels in
# segmentation. They **contribute nothing**: their entry in `"none"` is 0, they add nothing to
# `"sum"`, and `"mean"` divides by $|V|$, the number of targets that count, **not** by $N$.
# Dividing by $N$ would make the loss of a sentence depend on how much padding its batch happened
# to need. Note that `ignore_index` is only a label value: it may be $-100$ (never a class) or,
# say, 2 (a real class that this dataset wants ignored), so we compare with the argument, never
# with $-100$.
#
# When every target is ignored, $|V| = 0$ and the mean is $0/0$. torch returns `nan`, and so do
# we, without dividing by zero (which would warn), and in the logits' dtype.
#
# Two implementation notes. To pick $\log p_{n, t_n}$ for every row at once we index with two
# arrays, `log_p[np.arange(N), t]`; an ignored target such as $-100$ is not a valid index (or
# is a wrong one), so we first replace it by any valid class, such as 0, and zero those rows
# afterwards. And to keep float32 results float32, we divide by $|V|$ as a Python `int`: NumPy
# treats Python numbers as "weak" and keeps the array's dtype, but dividing a float32 by a NumPy
# `int64` (what `np.sum` and `np.count_nonzero` of a boolean mask return) gives float64.
#
# **Worked example.** Three samples with logits $(2, 1, 0.1)$, $(0.5, 2.5, -1)$, $(1, 1, 1)$ and
# targets $0, 1, -100$:
#
# - row 1: $\operatorname{LSE} = 2.4170$, so $\ell_1 = 2.4170 - 2 = 0.4170$ ($p_0 = 0.659$);
# - row 2: $\operatorname{LSE} = 2.6532$, so $\ell_2 = 2.6532 - 2.5 = 0.1532$ ($p_1 = 0.858$);
# - row 3 is ignored: $\ell_3 = 0$.
#
# So `"none"` gives $(0.4170, 0.1532, 0)$, `"sum"` gives $0.5702$, and `"mean"` gives
# $0.5702 / 2 = 0.2851$ (not $0.5702 / 3$).
#
# ### Concept check `ignored_mean`
#
# A batch of four tokens has per-token losses $0.2, 1.4, \ell_3, 0.6$, where the third token is
# padding and its target is `ignore_index`. What does `reduction="mean"` return?

# %% nbgrader={"grade": false, "grade_id": "ignored_mean", "locked": false, "schema_version": 3, "solution": true, "task": false}
mean_loss_with_ignored = None  # the "mean" reduction of this batch
### BEGIN SOLUTION
mean_loss_with_ignored = (0.2 + 1.4 + 0.6) / 3
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_ignored_mean", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# Stored as digests (checks.close_digests): within about 1e-3 of the answer, without printing it.
hint = "the ignored token adds nothing to the sum, and it is not counted in the divisor either."
checks.check_close_hash("ignored_mean", "mean_loss_with_ignored", mean_loss_with_ignored, ("8bf5bfcf3dc5cbb99bd3bcac21ee6520544b5a80105e613b3235cb25cad7eacc",
    "8bbc9797a27b1a62dffd31759b6b8f64f04e05203ee38bbcc37e308d4d0831f2",
    "95d10213cf4a3119995cb8f9424c17e45e79db25163e28eb3ef5118b9391f188"), hint=hint)
### BEGIN HIDDEN TESTS
# 1e-3: three decimals (0.733)
checks.check_value("ignored_mean", "mean_loss_with_ignored", mean_loss_with_ignored, (0.2 + 1.4 + 0.6) / 3,
                   atol=1e-3, hint=hint)
### END HIDDEN TESTS


# %% [markdown]
# ### Exercise `cross_entropy`
#
# Write `cross_entropy(logits, target, reduction="mean", ignore_index=-100)`, like
# `torch.nn.functional.cross_entropy` for logits of shape $(N, C)$ and integer targets of shape
# $(N,)$. An unknown `reduction` raises `ValueError`, as in torch. We may call our `log_softmax`.

# %% nbgrader={"grade": false, "grade_id": "cross_entropy", "locked": false, "schema_version": 3, "solution": true, "task": false}
def cross_entropy(logits, target, reduction="mean", ignore_index=-100):
    """Cross-entropy of logits and class indices, like torch.nn.functional.cross_entropy.

    logits       : float array (N, C), float32 or float64.
    target       : integer array (N,) of class indices in [0, C), or ignore_index.
    reduction    : "none" -> the (N,) losses (0 for ignored targets);
                   "sum"  -> their sum;
                   "mean" -> their sum divided by the number of targets that are not ignored
                             (nan if every target is ignored). Anything else raises ValueError.
    ignore_index : the target value that marks a sample to leave out.

    Returns an array (or scalar) of the logits' dtype. Logits of magnitude 1e3 give a finite
    loss, and no NumPy warning is raised.
    """
    ### BEGIN SOLUTION
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    logits, target = np.asarray(logits), np.asarray(target)
    counted = target != ignore_index            # (N,) the targets that are part of the loss
    safe = np.where(counted, target, 0)         # a valid class index on every row
    log_p = log_softmax(logits, axis=-1)        # (N, C), stable
    picked = log_p[np.arange(len(safe)), safe]  # log p[n, t_n]
    losses = np.where(counted, -picked, 0)      # ignored rows contribute 0
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    n_counted = int(counted.sum())              # a Python int keeps float32 results float32
    if n_counted == 0:
        return logits.dtype.type(np.nan)        # the mean over no targets, as torch reports it
    return losses.sum() / n_counted
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_cross_entropy", "locked": true, "points": 14, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def divisor_hint(got, expected):
    if got.ndim == 0 and np.isfinite(got) and np.isfinite(expected) and expected != 0 and 0 < got / expected < 1:
        return (f"your mean is {float(got / expected):.4g} times torch's. Check the two things it depends on: which "
                "targets count (those not equal to the ignore_index argument, which need not be -100) and the divisor "
                "(the number of those targets, not N, the number of rows).")
    return None


def all_ignored_hint(got, expected):
    if np.any(np.isnan(expected) & ~np.isnan(got)):
        return ("every target is ignored, so the mean is over zero targets: 0/0, which torch reports as nan "
                "(in the logits' dtype). Return nan without dividing by zero.")
    return None


def ignored_rows_hint(got, expected):
    if got.ndim == 1 and np.any((expected == 0) & (got != 0)):
        return "a sample whose target is ignore_index contributes 0 to the loss."
    return None


ce_hints = [divisor_hint, all_ignored_hint, ignored_rows_hint]
logits = np.array([[2.0, 1.0, 0.1], [0.5, 2.5, -1.0], [1.0, 1.0, 1.0]])
target = np.array([0, 1, -100])
checks.expect_raises("cross_entropy", ValueError, cross_entropy, logits, target, reduction="average")
checks.against_torch("cross_entropy", cross_entropy, "cross_entropy", [
    checks.case("worked example", logits, target, reduction="none"),
    checks.case("worked example", logits, target, reduction="sum"),
    checks.case("worked example (2 of 3 targets count)", logits, target, reduction="mean"),
    checks.case("the float32 input of the naive demo", checks.locked_cell("naive_softmax").Z_EXTREME,
                np.array([2, 0])),
], hints=ce_hints)
def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    t8 = np.random.default_rng(s + 41).integers(0, 5, size=8)
    t8_ignored = t8.copy()
    t8_ignored[[1, 4, 6]] = -100
    t8_custom = np.array([2, 0, 2, 4, 1, 2, 3, 0])  # class 2 is ignored through ignore_index=2
    t6 = np.random.default_rng(s + 42).integers(0, 7, size=6)
    cases, extreme32 = [], []
    for dt in (np.float64, np.float32):
        for red in ("mean", "sum", "none"):
            cases += [
                checks.case("random", checks.randn(s + 43, 8, 5, dtype=dt, scale=2.0), t8, reduction=red),
                checks.case("some targets ignored", checks.randn(s + 44, 8, 5, dtype=dt, scale=2.0), t8_ignored, reduction=red),
                checks.case("ignore_index=2, a real class", checks.randn(s + 45, 8, 5, dtype=dt, scale=2.0), t8_custom,
                            reduction=red, ignore_index=2),
                checks.case("ignore_index=-1", checks.randn(s + 46, 8, 5, dtype=dt), np.where(t8_ignored < 0, -1, t8),
                            reduction=red, ignore_index=-1),
                checks.case("every target ignored", checks.randn(s + 47, 4, 3, dtype=dt), np.full(4, -100), reduction=red),
                checks.case("square logits (N = C)", checks.randn(s + 49, 4, 4, dtype=dt, scale=2.0), np.array([3, 0, 0, 2]),
                            reduction=red),
                checks.case("one sample", checks.randn(s + 50, 1, 4, dtype=dt), np.array([3]), reduction=red),
                checks.case("one class", checks.randn(s + 51, 3, 1, dtype=dt), np.zeros(3, dtype=np.int64), reduction=red),
                checks.case("non-contiguous (sliced)", checks.strided(checks.randn(s + 52, 8, 5, dtype=dt)), t8_ignored,
                            reduction=red),
                checks.case("non-contiguous (transposed)", checks.randn(s + 53, 7, 6, dtype=dt).T, t6, reduction=red),
            ]
            (extreme32 if dt == np.float32 else cases).extend([
                checks.case("logits of magnitude 1e3", checks.randn(s + 48, 6, 7, dtype=dt, scale=1000.0), t6, reduction=red),
                checks.case("logits of magnitude 1e3, some ignored", checks.randn(s + 54, 8, 5, dtype=dt, scale=1000.0),
                            t8_ignored, reduction=red),
            ])
    checks.expect_raises("cross_entropy", ValueError, cross_entropy, logits, target, reduction="elementwise_mean")
    checks.against_torch("cross_entropy", cross_entropy, "cross_entropy", cases, hints=ce_hints)
    # float32 logits up to |z| ~ 4000 are spaced up to 2.4e-4 apart, so formulas that agree in exact
    # arithmetic (z - LSE(z) against (z - m) - log s) differ by up to half that spacing: atol 3e-4.
    checks.against_torch("cross_entropy", cross_entropy, "cross_entropy", extreme32, atol=3e-4, hints=ce_hints)


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ## 4. Gradients: the softmax Jacobian, and softmax minus one-hot
#
# Backpropagation starts at the loss, so the first gradients any classifier computes are those of
# the loss with respect to the logits. We take them in two steps: softmax alone, then
# cross-entropy, whose gradient turns out to be much simpler than the chain of its pieces.
#
# ### The softmax Jacobian
#
# For $p = \mathrm{softmax}(z)$ with $p_i = e^{z_i} / \sum_k e^{z_k}$, the quotient rule gives
#
# $$
# \frac{\partial p_i}{\partial z_j}
# = \frac{[i = j]\, e^{z_i} \sum_k e^{z_k} - e^{z_i} e^{z_j}}{\big(\sum_k e^{z_k}\big)^2}
# = p_i\,\big([i = j] - p_j\big),
# \qquad\text{that is}\qquad J = \mathrm{diag}(p) - p\,p^\top .
# $$
#
# Every output depends on every input, so $J$ is a full $C \times C$ matrix, but we never build
# it. For an upstream gradient $\bar p = \partial L / \partial p$, the vector-Jacobian product
# (unit 1.1) is
#
# $$
# \bar z = J^\top \bar p = p \odot \bar p - p\,(p^\top \bar p) = p \odot \big(\bar p - \langle p, \bar p \rangle\big),
# $$
#
# one elementwise product and one sum per row, $O(C)$ instead of $O(C^2)$. $J$ is symmetric, so
# the same formula is also the Jacobian-vector product $J v$ that forward mode would push
# (unit 1.3). Two checks on any implementation: $J \mathbf{1} = p - p = 0$, so the entries of
# $\bar z$ sum to 0 along the class axis (shift invariance, part 2), and a zero $\bar p$ gives
# zero. The sum $\langle p, \bar p \rangle$ runs along `axis`, with `keepdims=True` so that it
# broadcasts back; computing $p$ with our stable `softmax` keeps everything finite for logits of
# magnitude $10^3$.
#
# **Worked example.** $z = (1, 2, 3)$, so $p = (0.0900, 0.2447, 0.6652)$, and $\bar p = (0, 0, 1)$
# (the loss is $p_3$ itself). Then $\langle p, \bar p \rangle = 0.6652$,
# $\bar p - 0.6652 = (-0.6652, -0.6652, 0.3348)$, and $\bar z = p \odot$ that
# $= (-0.0599, -0.1628, 0.2227)$, which sums to 0: raising $z_3$ raises $p_3$, raising the others
# lowers it.
#
# ### Exercise `softmax_backward`
#
# Write `softmax_backward(z, grad_out, axis=-1)`, which returns $J^\top \bar p$ for
# $p = $ `softmax(z, axis)` and $\bar p = $ `grad_out`, without building $J$. We may call our
# `softmax`.

# %% nbgrader={"grade": false, "grade_id": "softmax_backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
def softmax_backward(z, grad_out, axis=-1):
    """The vector-Jacobian product of softmax: dL/dz given grad_out = dL/dp for p = softmax(z, axis).

    z, grad_out : float arrays of the same shape and dtype (float32 or float64).
    axis        : the axis that holds the classes.

    Returns p * (grad_out - sum(p * grad_out, along axis)), an array of z's shape and dtype. Finite
    for logits of magnitude 1e3, without NumPy warnings; neither argument is modified.
    """
    ### BEGIN SOLUTION
    p = softmax(z, axis=axis)
    return p * (grad_out - np.sum(p * grad_out, axis=axis, keepdims=True))  # J = diag(p) - p p^T
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_softmax_backward", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def diagonal_only_hint(got, expected):
    if got.shape == expected.shape and np.all(np.isfinite(got)):
        sums = np.abs(np.sum(got, axis=-1))
        if np.max(sums) > 1e-6 and np.max(np.abs(np.sum(expected, axis=-1))) < 1e-9:
            return ("the entries of each row of the true gradient sum to 0 (J 1 = 0) and yours do not: every p_i "
                    "depends on every z_j, so keep the term -p (p . grad_out), not only the diagonal p (1 - p).")
    return None


def softmax_vjp_cases(seed, dt=np.float64):
    z3 = checks.randn(seed, 2, 3, 4, dtype=dt, scale=3.0)
    return [
        checks.case("random rows", checks.randn(seed + 1, 5, 7, dtype=dt, scale=3.0)),
        checks.case("3-D, axis=0", z3, axis=0),
        checks.case("3-D, axis=1", z3, axis=1),
        checks.case("1-D", checks.randn(seed + 2, 6, dtype=dt)),
        checks.case("a size-1 class axis", checks.randn(seed + 3, 4, 1, dtype=dt)),
        checks.case("square logits, axis=0", checks.randn(seed + 4, 4, 4, dtype=dt), axis=0),
    ]


def softmax_vjp_32(seed):
    """float32, with logits of magnitude 1e3: compared with torch autograd in float32."""
    z = checks.randn(seed, 6, 9, dtype=np.float32, scale=1000.0)
    return [checks.case("float32 logits of magnitude 1e3", z, checks.randn(seed + 1, 6, 9, dtype=np.float32)),
            checks.case("float32, axis=0", z.T.copy(), checks.randn(seed + 2, 9, 6, dtype=np.float32), axis=0)]


z = np.array([1.0, 2.0, 3.0])
checks.check_vjp("softmax_backward", softmax_backward, "softmax", [checks.case("worked example z = (1, 2, 3)", z)],
                 upstream=np.array([0.0, 0.0, 1.0]), names=["z"], hints=[diagonal_only_hint])


def softmax_vjp_families(seed):
    checks.check_vjp("softmax_backward", softmax_backward, "softmax", softmax_vjp_cases(seed), names=["z"], seed=seed,
                     hints=[diagonal_only_hint])
    # float32 logits up to |z| ~ 4000: the gradient entries are at most 1, and formulas that agree in
    # exact arithmetic differ by a few float32 ulps of p (1e-7) times the row's size: the default
    # float32 tolerance (rtol 1e-4, atol 1e-5) covers them.
    checks.against_torch("softmax_backward", softmax_backward, "softmax_backward", softmax_vjp_32(seed + 5),
                         hints=[diagonal_only_hint])


softmax_vjp_families(140)
### BEGIN HIDDEN TESTS
softmax_vjp_families(150)
### END HIDDEN TESTS

# %% [markdown]
# ### Cross-entropy: softmax minus one-hot
#
# For one sample, from $\ell = \operatorname{LSE}(z) - z_t$:
#
# $$
# \frac{\partial \ell}{\partial z_c}
# = \frac{\partial \operatorname{LSE}(z)}{\partial z_c} - \frac{\partial z_t}{\partial z_c}
# = \frac{e^{z_c}}{\sum_j e^{z_j}} - [c = t]
# = p_c - y_c ,
# $$
#
# where $p = \mathrm{softmax}(z)$ and $y$ is the one-hot vector of $t$. (Through the Jacobian
# above: $\ell = -\log p_t$ has $\bar p = -y / p_t$, and $J^\top \bar p = p \odot (\bar p + 1)$,
# whose entry $c$ is $p_c - [c = t]$. The fused formula skips the division by a $p_t$ that may
# have underflowed to 0.) Three properties follow and are worth checking in any implementation:
#
# - the entries of a row sum to $\sum_c p_c - 1 = 0$ (shift invariance again);
# - the true class's entry $p_t - 1$ is negative and all others are positive, so gradient descent
#   raises the true logit and lowers the others;
# - every entry lies in $[-1, 1]$, so the gradient is finite for logits of any size, as long as
#   $p$ is computed stably. It vanishes as $p_t \to 1$: a sample that is already right stops
#   pushing.
#
# **The upstream gradient.** The loss is usually the root of the backward pass, where its
# gradient is 1. But in unit 1.4 cross-entropy becomes one operation of our engine, whose
# backward receives an upstream `grad` like any other: a number for `"mean"` and `"sum"` (1 at
# the root, or a weight when several losses are added), and a vector of shape $(N,)$ for
# `"none"`, one entry per sample (per-sample weights, or a mask computed later). So our function
# takes `grad` too, with `None` meaning 1. With the reduction, for the whole batch:
#
# $$
# \frac{\partial L}{\partial z_{n,c}} =
# \begin{cases}
# s_n\,(p_{n,c} - y_{n,c}) & n \in V \\
# 0 & n \notin V
# \end{cases}
# \qquad
# s_n = \begin{cases} g / |V| & \texttt{"mean"} \\ g & \texttt{"sum"} \\ g_n & \texttt{"none"} \end{cases}
# $$
#
# where $g$ is `grad` (a scalar for `"mean"` and `"sum"`, an $(N,)$ array for `"none"`). When
# every target is ignored the mean loss is `nan`, but torch's gradient is all zeros, and so is
# ours: no row is part of the loss. A zero `grad` gives zero gradients.
#
# **Worked example.** For the batch of part 3 (targets $0, 1, -100$; $|V| = 2$):
# row 1 has $p = (0.6590, 0.2424, 0.0986)$, so $p - y = (-0.3410, 0.2424, 0.0986)$, and with
# `"mean"` its gradient row is half of that, $(-0.1705, 0.1212, 0.0493)$. Row 2 gives
# $(0.1161, -0.1420, 0.0259) / 2 = (0.0581, -0.0710, 0.0130)$; row 3 is all zeros. With
# `"none"` and `grad` $= (2, 1, 5)$, the rows are $2(p - y) = (-0.6820, 0.4849, 0.1971)$, then
# $(0.1161, -0.1420, 0.0259)$, and zeros (row 3 is ignored, whatever its weight).
#
# ### Exercise `cross_entropy_backward`
#
# Write `cross_entropy_backward(logits, target, reduction="mean", ignore_index=-100, grad=None)`,
# which returns $\partial L / \partial \text{logits}$ for $L$ = `grad` times the loss
# `cross_entropy(logits, target, reduction, ignore_index)` (for `"none"`, $\sum_n g_n \ell_n$).
# It is checked against torch autograd and against central finite differences. We may call our
# `softmax`.

# %% nbgrader={"grade": false, "grade_id": "cross_entropy_backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
def cross_entropy_backward(logits, target, reduction="mean", ignore_index=-100, grad=None):
    """Gradient of cross_entropy(logits, target, reduction, ignore_index) with respect to logits,
    times the upstream gradient grad.

    logits, target, reduction, ignore_index : as in cross_entropy. An unknown reduction raises
                                              ValueError.
    grad : the upstream gradient dL/d(loss), of the loss's shape: a scalar for "mean" and "sum",
           an (N,) array for "none" (row n is scaled by grad[n]). None means 1 (ones for "none").

    Returns an array of the logits' shape and dtype: softmax minus one-hot, divided by the
    number of counted targets for "mean", times grad, with zero rows for ignored targets (all
    zeros when every target is ignored). Finite for logits of magnitude 1e3; no NumPy warning is
    raised; the arguments are not modified.
    """
    ### BEGIN SOLUTION
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    logits, target = np.asarray(logits), np.asarray(target)
    counted = target != ignore_index
    safe = np.where(counted, target, 0)
    out = softmax(logits, axis=-1)            # p, a fresh array that we may change in place
    out[np.arange(len(safe)), safe] -= 1      # p - onehot(t)
    out[~counted] = 0                         # ignored rows are not part of the loss
    n_counted = int(counted.sum())            # a Python int keeps float32 results float32
    if reduction == "mean" and n_counted > 0:
        out /= n_counted                      # the 1/|V| of the mean
    if grad is not None:
        grad = np.asarray(grad, dtype=out.dtype)
        out *= grad[:, None] if reduction == "none" else grad  # one weight per row for "none"
    return out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_cross_entropy_backward", "locked": true, "points": 14, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def ignored_grad_hint(got, expected):
    if got.ndim == 2 and np.any(np.all(expected == 0, axis=1) & np.any(got != 0, axis=1)):
        return "a row whose target is ignore_index is not part of the loss: its gradient row must be zero."
    return None


def mean_scale_hint(got, expected):
    nonzero = expected != 0
    if got.ndim == 2 and np.any(nonzero) and np.all(np.isfinite(got)):
        k = got[nonzero] / expected[nonzero]
        if np.allclose(k, k[0]) and k[0] > 1.5 and abs(k[0] - round(k[0])) < 1e-6:
            return (f"your gradient is {k[0]:.0f} times torch's. With reduction='mean' the loss is (1/K) times the sum "
                    "over the K counted targets, so every row of its gradient carries that 1/K too.")
    return None


def ce_backward_upstream(logits, target, grad, reduction="mean", ignore_index=-100):
    """cross_entropy_backward with the upstream gradient passed as check_vjp passes it."""
    return cross_entropy_backward(logits, target, reduction=reduction, ignore_index=ignore_index, grad=grad)


def ce_grad_cases(seed, dt=np.float64, scale=2.0):
    """Every family with every reduction across two seeds: the reductions rotate with the seed."""
    t6 = np.random.default_rng(seed).integers(0, 4, size=6)
    t6_ignored = np.where([True, False, False, True, False, True], -100, t6)
    t6_custom = np.where([False, True, False, False, True, False], 2, t6)  # class 2 ignored through ignore_index=2
    red = ["mean", "sum", "none"] * 3
    k = seed % 3
    return [
        checks.case("random", checks.randn(seed, 6, 4, dtype=dt, scale=scale), t6, reduction=red[k]),
        checks.case("some targets ignored", checks.randn(seed + 1, 6, 4, dtype=dt, scale=scale), t6_ignored,
                    reduction=red[k + 1]),
        checks.case("ignore_index=2, a real class", checks.randn(seed + 2, 6, 4, dtype=dt, scale=scale), t6_custom,
                    reduction=red[k + 2], ignore_index=2),
        checks.case("square logits (N = C)", checks.randn(seed + 3, 4, 4, dtype=dt, scale=scale), np.array([3, 0, 0, 2]),
                    reduction=red[k + 2]),
        checks.case("one sample", checks.randn(seed + 4, 1, 4, dtype=dt), np.array([3]), reduction=red[k]),
        checks.case("one class", checks.randn(seed + 5, 3, 1, dtype=dt), np.zeros(3, dtype=np.int64), reduction=red[k + 1]),
        checks.case("transposed logits", checks.randn(seed + 6, 4, 5, dtype=dt, scale=scale).T,
                    np.array([0, 3, -100, 1, 1]), reduction=red[k + 2]),
    ]


def ce_grad_32(seed):
    """float32 logits of magnitude 1e3, with a random upstream gradient, against torch autograd in float32."""
    cases = []
    for c in ce_grad_cases(seed, np.float32, scale=1000.0):
        n_out = (len(c.args[1]),) if c.kwargs.get("reduction") == "none" else ()
        cases.append(checks.case("float32 logits of magnitude 1e3, " + c.label, *c.args,
                                 grad=checks.randn(seed + 7, *n_out, dtype=np.float32), **c.kwargs))
    return cases


grad_hints = [ignored_grad_hint, mean_scale_hint]
logits = np.array([[2.0, 1.0, 0.1], [0.5, 2.5, -1.0], [1.0, 1.0, 1.0]])
target = np.array([0, 1, -100])
checks.expect_raises("cross_entropy_backward", ValueError, cross_entropy_backward, logits, target, reduction="average")
kept_logits, weights = logits.copy(), np.array([2.0, 1.0, 5.0])
checks.run_student("cross_entropy_backward", cross_entropy_backward, kept_logits, target.copy(), reduction="none",
                   grad=weights)
assert np.array_equal(kept_logits, logits) and np.array_equal(weights, [2.0, 1.0, 5.0]), (
    "[cross_entropy_backward] your function changed its logits or grad argument in place; compute the softmax "
    "into a new array, so that the caller's logits keep their values.")
# The worked example: no upstream gradient (grad=None means 1), then "none" with grad = (2, 1, 5).
checks.check_vjp("cross_entropy_backward", cross_entropy_backward, "cross_entropy", [
    checks.case("worked example", logits, target, reduction="mean"),
    checks.case("worked example", logits, target, reduction="sum"),
    checks.case("worked example", logits, target, reduction="none"),
], upstream=False, names=["logits", "target"], hints=grad_hints)
checks.check_vjp("cross_entropy_backward", ce_backward_upstream, "cross_entropy",
                 [checks.case("worked example, grad = (2, 1, 5)", logits, target, reduction="none")],
                 upstream=np.array([2.0, 1.0, 5.0]), names=["logits", "target"], hints=grad_hints)
# Random upstream gradients (a scalar, or one per row for "none"), a zero one, and non-contiguous logits:


def ce_families(seed):
    """Random upstream gradients (a scalar, or one per row for "none"), a zero one and non-contiguous
    logits, for each family with each reduction: central differences on the first of three seeds
    (they cost 2 forward passes per logit), torch autograd alone on the others. Then float32 and
    the all-ignored batch."""
    for k in range(3):
        checks.check_vjp("cross_entropy_backward", ce_backward_upstream, "cross_entropy", ce_grad_cases(seed + k),
                         names=["logits", "target"], hints=grad_hints, seed=seed + k, fd=k == 0)
    # float32 logits up to |z| ~ 4000 are spaced up to 2.4e-4 apart, so formulas that agree in exact
    # arithmetic differ by up to half that spacing in p: atol 3e-4.
    checks.against_torch("cross_entropy_backward", cross_entropy_backward, "cross_entropy_backward",
                         ce_grad_32(seed + 4), atol=3e-4, hints=grad_hints)
    # Every target ignored: the mean loss is nan, so finite differences are nan too; torch's
    # gradient (all zeros) is the reference.
    all_ignored = [checks.case("every target ignored", checks.randn(seed + 10, 4, 3), np.full(4, -100), reduction=red)
                   for red in ("mean", "sum", "none")]
    checks.check_vjp("cross_entropy_backward", ce_backward_upstream, "cross_entropy", all_ignored,
                     names=["logits", "target"], hints=grad_hints, fd=False, seed=seed)


ce_families(63)
### BEGIN HIDDEN TESTS
ce_families(163)
### END HIDDEN TESTS

# %% [markdown]
# ## 5. Binary cross-entropy on logits
#
# For a yes/no label, or for several independent labels per sample (multi-label
# classification), the model outputs one logit $z$ per label and models $y \in \{0, 1\}$ as a
# **Bernoulli** variable with $P(y = 1 \mid x) = \sigma(z) = 1 / (1 + e^{-z})$ (UDL 5.4). The
# negative log-likelihood is
#
# $$
# \ell = -y \log \sigma(z) - (1 - y) \log\big(1 - \sigma(z)\big),
# $$
#
# and torch also accepts "soft" targets $y \in [0, 1]$ in the same formula.
#
# **The naive form fails early.** In float32, $1 + e^{-z}$ rounds to exactly 1 once
# $z > 16.6$ (in float64 once $z > 36.7$), so $\sigma(z) = 1$, $1 - \sigma(z) = 0$, and a sample
# with $y = 0$ gets $-\log 0 = \infty$. For $z = -10^4$, $e^{-z}$ overflows. Clipping $\sigma$
# to $[\epsilon, 1 - \epsilon]$ hides both, but caps the loss at $-\log \epsilon$: a logit of
# $-10^4$ on a positive sample then costs 16 instead of $10^4$, and its gradient is 0.
#
# **The stable form.** Write $\operatorname{softplus}(u) = \log(1 + e^{u})$. Then
# $\log \sigma(z) = -\operatorname{softplus}(-z)$ and
# $\log(1 - \sigma(z)) = \log \sigma(-z) = -\operatorname{softplus}(z)$, and since
# $\operatorname{softplus}(-z) = \operatorname{softplus}(z) - z$,
#
# $$
# \ell = y\,\operatorname{softplus}(-z) + (1 - y)\operatorname{softplus}(z)
#      = \operatorname{softplus}(z) - y z .
# $$
#
# Softplus itself needs the max trick: factoring $e^{\max(z, 0)}$ out of $1 + e^z$ gives
# $\operatorname{softplus}(z) = \max(z, 0) + \log(1 + e^{-|z|})$, in which $e^{-|z|} \le 1$. So
#
# $$
# \ell = \max(z, 0) - y z + \log\big(1 + e^{-|z|}\big).
# $$
#
# `np.log1p(x)` computes $\log(1 + x)$ accurately when $x$ is tiny, where `np.log(1 + x)` would
# round $1 + x$ to 1 first. (The gradient, for later: $\partial \ell / \partial z = \sigma(z) - y$,
# the same "prediction minus target" as for softmax cross-entropy.) Reductions are over all
# elements: `"mean"` divides by the number of elements of $z$. There is no `ignore_index` here.
#
# **Worked example.** $z = 2, y = 1$: $\ell = 2 - 2 + \log(1 + e^{-2}) = 0.1269$.
# $z = -1, y = 0$: $\ell = 0 + \log(1 + e^{-1}) = 0.3133$. $z = 0, y = 0.5$: $\ell = \log 2 = 0.6931$.
# $z = -30, y = 1$: $\ell = 0 + 30 + \log(1 + e^{-30}) = 30.0000$.

# %% [markdown]
# ### Exercise `binary_cross_entropy_with_logits`
#
# Write `binary_cross_entropy_with_logits(z, y, reduction="mean")`, like
# `torch.nn.functional.binary_cross_entropy_with_logits` for `z` and `y` of the same shape.

# %% nbgrader={"grade": false, "grade_id": "binary_cross_entropy_with_logits", "locked": false, "schema_version": 3, "solution": true, "task": false}
def binary_cross_entropy_with_logits(z, y, reduction="mean"):
    """Binary cross-entropy of logits z and targets y in [0, 1], like
    torch.nn.functional.binary_cross_entropy_with_logits.

    z, y      : float arrays of the same shape (any shape, including 0-d) and dtype.
    reduction : "none" -> the elementwise losses; "sum" -> their sum; "mean" -> their mean over
                all elements. Anything else raises ValueError.

    Returns an array (or scalar) of z's dtype. Stable for |z| up to 1e4 (finite, exact, and no
    NumPy warning).
    """
    ### BEGIN SOLUTION
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    z, y = np.asarray(z), np.asarray(y)
    losses = np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))  # exp of a number <= 0
    if reduction == "none":
        return losses
    return losses.sum() if reduction == "sum" else losses.mean()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_binary_cross_entropy_with_logits", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def saturation_hint(got, expected):
    large = np.isfinite(got) & np.isfinite(expected) & (np.abs(expected) > 20)
    if np.any(np.abs(got[large] - expected[large]) > 1):
        return ("your loss stops growing where torch's keeps growing: computing sigmoid(z) first (and clipping it) "
                "saturates for large |z|. Compute the loss from z directly: max(z, 0) - z y + log(1 + exp(-|z|)).")
    return None


z = np.array([2.0, -1.0, 0.0, -30.0])
y = np.array([1.0, 0.0, 0.5, 1.0])
z_big = np.array([1e4, -1e4, 1e4, -1e4, 20.0, -20.0], dtype=np.float32)
y_big = np.array([1.0, 1.0, 0.0, 0.0, 0.0, 1.0], dtype=np.float32)
checks.expect_raises("binary_cross_entropy_with_logits", ValueError, binary_cross_entropy_with_logits, z, y,
                     reduction="average")
checks.against_torch("binary_cross_entropy_with_logits", binary_cross_entropy_with_logits,
                     "binary_cross_entropy_with_logits", [
    checks.case("worked example", z, y, reduction="none"),
    checks.case("worked example", z, y, reduction="mean"),
    checks.case("worked example", z, y, reduction="sum"),
    checks.case("|z| up to 1e4 in float32", z_big, y_big, reduction="none"),
], hints=[saturation_hint])
def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    # Soft labels meet |z| = 1e4 only in float64: in float32, max(z, 0) - z y with y near 1 cancels
    # to a few ulps of 1e4 in any formula (torch's too), so hard labels are used there.
    cases = []
    for dt in (np.float64, np.float32):
        hard = np.random.default_rng(s + 81).integers(0, 2, size=(6, 5)).astype(dt)
        for red in ("mean", "sum", "none"):
            cases += [
                checks.case("soft labels", checks.randn(s + 82, 6, 5, dtype=dt, scale=3.0),
                            checks.randn(s + 83, 6, 5, dtype=dt, low=0.0), reduction=red),
                checks.case("hard labels", checks.randn(s + 84, 6, 5, dtype=dt, scale=3.0), hard, reduction=red),
                checks.case("|z| up to 1e4, hard labels", checks.randn(s + 85, 6, 5, dtype=dt, scale=3000.0), hard,
                            reduction=red),
                checks.case("|z| around 30 (sigmoid rounds to 0 or 1)", checks.randn(s + 86, 6, 5, dtype=dt, scale=30.0), hard,
                            reduction=red),
                checks.case("3-D", checks.randn(s + 87, 2, 3, 4, dtype=dt), checks.randn(s + 88, 2, 3, 4, dtype=dt, low=0.0),
                            reduction=red),
                checks.case("0-d", np.asarray(-1.5, dtype=dt), np.asarray(1.0, dtype=dt), reduction=red),
                checks.case("size-1 axes", checks.randn(s + 89, 1, 3, 1, dtype=dt), checks.randn(s + 90, 1, 3, 1, dtype=dt, low=0.0),
                            reduction=red),
                checks.case("non-contiguous", checks.strided(checks.randn(s + 91, 6, 5, dtype=dt, scale=3.0)),
                            checks.randn(s + 92, 5, 6, dtype=dt, low=0.0).T, reduction=red),
            ]
        cases.append(checks.case("|z| = 1e4, soft labels", np.array([1e4, -1e4, 5e3, -5e3]),
                                 np.array([0.25, 0.5, 0.75, 0.125]), reduction="none"))
    checks.against_torch("binary_cross_entropy_with_logits", binary_cross_entropy_with_logits, "binary_cross_entropy_with_logits",
                         cases, hints=[saturation_hint])


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ## 6. Regression losses: MSE and L1
#
# For a real-valued target, UDL 5.3 models $y$ as **Gaussian** around the prediction $\hat y$
# with a fixed variance $\sigma^2$. Its negative log-likelihood is
#
# $$
# -\log \mathcal{N}(y; \hat y, \sigma^2) = \frac{(y - \hat y)^2}{2\sigma^2} + \tfrac12 \log(2\pi\sigma^2),
# $$
#
# and dropping the constants leaves the **squared error** $(\hat y - y)^2$. Modelling $y$ as
# **Laplace** distributed instead, with density $\propto e^{-|y - \hat y| / b}$, leaves the
# **absolute error** $|\hat y - y|$. The likelihood explains their behaviour: the Gaussian's
# light tails make a far-off point very unlikely, so MSE punishes large errors quadratically and
# is pulled by outliers (its gradient $2(\hat y - y)$ grows with the error), while the Laplace's
# heavier tails make L1 robust (its gradient $\operatorname{sign}(\hat y - y)$ has size 1
# however large the error).
#
# Both are elementwise, and their `"mean"` divides by the **number of elements**, not the number
# of rows: for predictions of shape $(N, D)$ it divides by $N D$, as torch's `MSELoss` and
# `L1Loss` do.
#
# **Worked example.** $\hat y = \begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}$,
# $y = \begin{pmatrix} 1 & 0 \\ 5 & 4 \end{pmatrix}$: the differences are
# $\begin{pmatrix} 0 & 2 \\ -2 & 0 \end{pmatrix}$. MSE: the squares sum to 8 and the mean is
# $8 / 4 = 2$ (not $8 / 2$). L1: the absolute values sum to 4 and the mean is 1.
#
# ### Exercise `mse_loss`
#
# Write `mse_loss(pred, target, reduction="mean")`, like `torch.nn.functional.mse_loss` for
# arrays of the same shape.

# %% nbgrader={"grade": false, "grade_id": "mse_loss", "locked": false, "schema_version": 3, "solution": true, "task": false}
def mse_loss(pred, target, reduction="mean"):
    """Squared error (pred - target)**2, reduced like torch.nn.functional.mse_loss.

    pred, target : float arrays of the same shape (any shape, including 0-d) and dtype.
    reduction    : "none", "sum", or "mean" (over all elements). Anything else raises ValueError.

    Returns an array (or scalar) of pred's dtype.
    """
    ### BEGIN SOLUTION
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    diff = np.asarray(pred) - np.asarray(target)
    losses = diff * diff
    if reduction == "none":
        return losses
    return losses.sum() if reduction == "sum" else losses.mean()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_mse_loss", "locked": true, "points": 5, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def element_mean_hint(got, expected):
    if got.ndim == 0 and np.isfinite(got) and expected != 0 and abs(got / expected - round(got / expected)) < 1e-6 \
            and round(got / expected) > 1:
        return (f"your result is {float(got / expected):.0f} times torch's: 'mean' divides by the number of elements "
                "(N * D for an (N, D) input), not by the number of rows, and 'sum' does not divide at all.")
    return None


pred = np.array([[1.0, 2.0], [3.0, 4.0]])
target = np.array([[1.0, 0.0], [5.0, 4.0]])
checks.expect_raises("mse_loss", ValueError, mse_loss, pred, target, reduction="average")
checks.against_torch("mse_loss", mse_loss, "mse_loss", [
    checks.case("worked example", pred, target, reduction="none"),
    checks.case("worked example", pred, target, reduction="sum"),
    checks.case("worked example", pred, target, reduction="mean"),
], hints=[element_mean_hint])
def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    cases = []
    for dt in (np.float64, np.float32):
        for red in ("mean", "sum", "none"):
            cases += [
                checks.case("random (N, D)", checks.randn(s + 101, 6, 4, dtype=dt), checks.randn(s + 102, 6, 4, dtype=dt), reduction=red),
                checks.case("1-D", checks.randn(s + 103, 7, dtype=dt), checks.randn(s + 104, 7, dtype=dt), reduction=red),
                checks.case("3-D", checks.randn(s + 105, 2, 3, 4, dtype=dt), checks.randn(s + 106, 2, 3, 4, dtype=dt), reduction=red),
                checks.case("0-d", np.asarray(2.5, dtype=dt), np.asarray(-1.0, dtype=dt), reduction=red),
                checks.case("size-1 axes", checks.randn(s + 107, 1, 5, 1, dtype=dt), checks.randn(s + 108, 1, 5, 1, dtype=dt),
                            reduction=red),
                checks.case("large values", checks.randn(s + 109, 4, 3, dtype=dt, scale=1e3), checks.randn(s + 110, 4, 3, dtype=dt),
                            reduction=red),
                checks.case("non-contiguous", checks.strided(checks.randn(s + 111, 6, 4, dtype=dt)),
                            checks.randn(s + 112, 4, 6, dtype=dt).T, reduction=red),
            ]
    checks.against_torch("mse_loss", mse_loss, "mse_loss", cases, hints=[element_mean_hint])


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise `l1_loss`
#
# Write `l1_loss(pred, target, reduction="mean")`, like `torch.nn.functional.l1_loss` for arrays
# of the same shape.

# %% nbgrader={"grade": false, "grade_id": "l1_loss", "locked": false, "schema_version": 3, "solution": true, "task": false}
def l1_loss(pred, target, reduction="mean"):
    """Absolute error |pred - target|, reduced like torch.nn.functional.l1_loss.

    pred, target : float arrays of the same shape (any shape, including 0-d) and dtype.
    reduction    : "none", "sum", or "mean" (over all elements). Anything else raises ValueError.

    Returns an array (or scalar) of pred's dtype.
    """
    ### BEGIN SOLUTION
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    losses = np.abs(np.asarray(pred) - np.asarray(target))
    if reduction == "none":
        return losses
    return losses.sum() if reduction == "sum" else losses.mean()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_l1_loss", "locked": true, "points": 5, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
pred = np.array([[1.0, 2.0], [3.0, 4.0]])
target = np.array([[1.0, 0.0], [5.0, 4.0]])
checks.expect_raises("l1_loss", ValueError, l1_loss, pred, target, reduction="average")
checks.against_torch("l1_loss", l1_loss, "l1_loss", [
    checks.case("worked example", pred, target, reduction="none"),
    checks.case("worked example", pred, target, reduction="sum"),
    checks.case("worked example", pred, target, reduction="mean"),
])
def families(s):
    """The graded families of cases, every seed shifted by s: s = 0 here, other seeds when graded."""
    cases = []
    for dt in (np.float64, np.float32):
        for red in ("mean", "sum", "none"):
            cases += [
                checks.case("random (N, D)", checks.randn(s + 121, 6, 4, dtype=dt), checks.randn(s + 122, 6, 4, dtype=dt), reduction=red),
                checks.case("1-D", checks.randn(s + 123, 7, dtype=dt), checks.randn(s + 124, 7, dtype=dt), reduction=red),
                checks.case("3-D", checks.randn(s + 125, 2, 3, 4, dtype=dt), checks.randn(s + 126, 2, 3, 4, dtype=dt), reduction=red),
                checks.case("0-d", np.asarray(2.5, dtype=dt), np.asarray(-1.0, dtype=dt), reduction=red),
                checks.case("size-1 axes", checks.randn(s + 127, 1, 5, 1, dtype=dt), checks.randn(s + 128, 1, 5, 1, dtype=dt),
                            reduction=red),
                checks.case("large values", checks.randn(s + 129, 4, 3, dtype=dt, scale=1e3), checks.randn(s + 130, 4, 3, dtype=dt),
                            reduction=red),
                checks.case("non-contiguous", checks.strided(checks.randn(s + 131, 6, 4, dtype=dt)),
                            checks.randn(s + 132, 4, 6, dtype=dt).T, reduction=red),
            ]
    checks.against_torch("l1_loss", l1_loss, "l1_loss", cases)


families(0)
### BEGIN HIDDEN TESTS
families(1000)
### END HIDDEN TESTS

# %% [markdown]
# ## 7. Figure: temperature, probabilities and the loss
#
# Dividing the logits by a **temperature** $T > 0$ before the softmax,
# $p = \mathrm{softmax}(z / T)$, keeps the order of the classes but changes how peaked the
# distribution is. As $T \to 0$ the distribution approaches a one-hot vector on the largest logit
# (the softmax becomes a hard max); as $T \to \infty$ it approaches the uniform distribution, and
# the loss of every class approaches $\log C$, the value of the `initial_loss` concept check.
# Scaling all logits up by a factor has the same effect as lowering $T$: this is how large
# initial weights produce a large loss at step 0.
#
# The left panel shows $p$; the right panel shows the loss $-\log p$ as a function of the
# probability of the true class, with a dot for each class at its current probability (the loss
# we would pay if that class were the true one). The dashed line is $\log C$. Move the slider
# and watch the loss of a wrong class explode as $T$ shrinks, while the loss of the argmax class
# goes to 0: sharp predictions are cheap when right and very expensive when wrong.
#
# The figure computes its own stable softmax, so it works before the exercises are done.

# %% nbgrader={"grade": false, "grade_id": "temperature_figure", "locked": true, "schema_version": 3, "solution": false, "task": false}
import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display

FIGURE_LOGITS = np.array([2.0, 1.0, 0.2, -0.5, -1.5])


def draw_temperature(temperature, true_class):
    s = FIGURE_LOGITS / temperature
    p = np.exp(s - s.max())
    p /= p.sum()
    n_classes = len(p)
    fig, (ax_p, ax_l) = plt.subplots(1, 2, figsize=(10, 3.6))
    colors = ["tab:orange" if c == true_class else "tab:blue" for c in range(n_classes)]
    ax_p.bar(range(n_classes), p, color=colors)
    ax_p.set_xticks(range(n_classes), [f"{c}\nz={v:g}" for c, v in enumerate(FIGURE_LOGITS)])
    ax_p.set_ylim(0, 1)
    ax_p.set_ylabel("probability")
    ax_p.set_title(f"softmax(z / T), T = {temperature:.2f}")
    grid = np.geomspace(min(p.min(), 1e-3), 1, 400)
    ax_l.plot(grid, -np.log(grid), color="gray")
    ax_l.scatter(p, -np.log(p), color=colors, zorder=3)
    ax_l.axhline(np.log(n_classes), color="gray", linestyle="--", linewidth=1, label="log C (uniform p)")
    ax_l.legend(loc="upper right")
    ax_l.set_ylim(0, max(8.0, 1.1 * float(-np.log(p.min()))))
    ax_l.set_xlabel("probability of the true class")
    ax_l.set_ylabel("loss  -log p")
    ax_l.set_title(f"loss of class {true_class}: {-np.log(p[true_class]):.3f}   (log C = {np.log(n_classes):.3f})")
    fig.tight_layout()
    plt.show()


temperature_slider = widgets.FloatLogSlider(value=1.0, base=10, min=-1, max=1, step=0.02, description="T")
class_picker = widgets.Dropdown(options=list(range(len(FIGURE_LOGITS))), value=0, description="true class")
figure_output = widgets.interactive_output(draw_temperature, {"temperature": temperature_slider,
                                                              "true_class": class_picker})
display(widgets.HBox([temperature_slider, class_picker]), figure_output)

# %% [markdown]
# ## 8. Putting it together
#
# The locked cell below trains a softmax-regression classifier, logits $z = x W^\top + b$, on three
# clusters of 2-D points, with our `cross_entropy` as the loss and our `cross_entropy_backward` as
# the first step of the backward pass; the affine layer's rules of unit 1.1 do the rest
# ($\bar W = \bar Z^\top X$, $\bar b = \sum_n \bar z_n$). Its loss at step 0 is about $\log 3$,
# the value of the `initial_loss` check for three classes. The last lines use the upstream
# gradient: with `reduction="none"` and `grad` holding one weight per sample, the gradient is that
# of a weighted loss, here one that counts the points of class 2 five times as much. The weighted
# gradient equals the one of the ordinary mean loss on a data set in which each class-2 point
# appears five times.

# %% nbgrader={"grade": false, "grade_id": "putting_it_together", "locked": true, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(2)
centers = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
X = np.concatenate([c + 0.8 * _rng.standard_normal((30, 2)) for c in centers])  # (90, 2)
t = np.repeat([0, 1, 2], 30)
W, b = 0.01 * _rng.standard_normal((3, 2)), np.zeros(3)
with checks.when_written("this example"):
    for step in range(101):
        logits = X @ W.T + b
        if step % 25 == 0:
            accuracy = np.mean(logits.argmax(axis=1) == t)
            print(f"step {step:3d}: loss {float(cross_entropy(logits, t)):.4f} (log 3 = {np.log(3):.4f}), "
                  f"accuracy {accuracy:.0%}")
        grad_logits = cross_entropy_backward(logits, t)  # (N, C), the mean's gradient
        W, b = W - 0.5 * grad_logits.T @ X, b - 0.5 * grad_logits.sum(axis=0)
    weights = np.where(t == 2, 5.0, 1.0)
    weighted = cross_entropy_backward(logits, t, reduction="none", grad=weights / weights.sum())
    repeated = np.concatenate([np.arange(90), np.repeat(np.arange(60, 90), 4)])  # class 2 five times
    plain = cross_entropy_backward(logits[repeated], t[repeated])
    summed = np.zeros_like(logits)
    np.add.at(summed, repeated, plain)  # add the copies' gradient rows back onto their original rows
    print("weighted 'none' gradient equals the repeated-data mean gradient:", np.allclose(weighted, summed))

# %% [markdown]
# ## Summary
#
# - Softmax, log-softmax and log-sum-exp are unchanged by a common shift of the logits; shifting
#   by the maximum keeps every exponent at or below 0 and every denominator in $[1, C]$, which
#   makes them finite for any finite logits. A fully masked row needs a shift of 0 instead.
# - Log-probabilities come from $z - \operatorname{LSE}(z)$, never from `log(softmax(z))`.
# - Cross-entropy is the negative log-likelihood of a categorical model,
#   $\ell = \operatorname{LSE}(z) - z_t$, and its gradient is $\mathrm{softmax}(z) - \mathrm{onehot}(t)$,
#   bounded by 1 in every entry, times the upstream gradient (one weight per row for `"none"`).
#   The softmax Jacobian $\mathrm{diag}(p) - p p^\top$ is never built: its product with a vector
#   is $p \odot (v - \langle p, v \rangle)$.
# - `"mean"` divides by the number of targets that count; ignored targets contribute nothing to
#   the loss or the gradient; an empty mean is `nan`.
# - Binary cross-entropy on logits is $\max(z, 0) - y z + \log(1 + e^{-|z|})$; MSE and L1 are the
#   negative log-likelihoods of Gaussian and Laplace noise, and their mean is over elements.
#
# Next, in unit 1.3, we build the computation graph and reverse accumulation; in unit 1.4 the
# pair `cross_entropy` / `cross_entropy_backward` becomes one fused operation of that engine,
# which saves the probabilities in forward and returns $(p - y)/|V|$ in backward.

"""engine_ref.functional (units 1.1 and 1.2) against PyTorch and central differences."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.inside import checks
from engine_ref import functional as fn
from tests.strategies import strided_arrays

# Every function here must be quiet: a warning in a notebook cell fails it under nbgrader.
pytestmark = pytest.mark.filterwarnings("error")

DTYPES = [np.float32, np.float64]
ELEMENTWISE = {  # name -> (reference, torch oracle)
    "relu": (fn.relu, torch.relu),
    "sigmoid": (fn.sigmoid, torch.sigmoid),
    "silu": (fn.silu, F.silu),
    "gelu_tanh": (fn.gelu_tanh, lambda t: F.gelu(t, approximate="tanh")),
}
EXTREMES = [-1e4, -1e3, -100.0, -20.0, -1e-3, 0.0, 1e-3, 20.0, 100.0, 1e3, 1e4]


def against_torch(name, f, oracle, cases):
    """``checks.against_torch`` for reference code, which the NumPy-only guard would reject.

    It keeps each argument's layout, so the transposed and sliced cases reach ``f`` as such.
    """
    checks.against_torch(f"functional.{name}", f, oracle, cases, numpy_only=False)


def layouts(seed, shape, dtype, scale=1.0):
    """Cases for one array argument: contiguous, transposed, sliced, size-1 axes and 0-d."""
    x = checks.randn(seed, *shape, dtype=dtype, scale=scale)
    return [
        checks.case("contiguous", x),
        checks.case("transposed", np.ascontiguousarray(x.T).T),
        checks.case("sliced", checks.randn(seed + 1, shape[0], 2 * shape[1], dtype=dtype, scale=scale)[:, ::2]),
        checks.case("size-1 axes", checks.randn(seed + 2, 1, shape[1], 1, dtype=dtype, scale=scale)),
        checks.case("0-d", checks.randn(seed + 3, dtype=dtype, scale=scale)),
    ]


# --- 1.1 forward ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_forward_matches_torch(name, dtype):
    f, oracle = ELEMENTWISE[name]
    cases = layouts(1, (3, 4), dtype, scale=3.0) + [checks.case("extremes", np.array(EXTREMES, dtype=dtype))]
    against_torch(name, f, oracle, cases)  # also fails on any warning, e.g. exp overflow


@settings(max_examples=25, deadline=None)
@given(x=strided_arrays(), name=st.sampled_from(sorted(ELEMENTWISE)))
def test_elementwise_forward_any_layout(x, name):
    f, oracle = ELEMENTWISE[name]
    x = np.asarray(x)
    checks.assert_close(f(x), oracle(torch.from_numpy(x)).numpy(), task=name, case="strided input")


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_forward_matches_torch(dtype):
    x, W, b = (checks.randn(s, *shape, dtype=dtype) for s, shape in [(1, (5, 4)), (2, (3, 4)), (3, (3,))])
    cases = [
        checks.case("with bias", x, W, b),
        checks.case("no bias", x, W),
        checks.case("batch axes", checks.randn(4, 2, 3, 4, dtype=dtype), W, b),
        checks.case("1-d input", checks.randn(5, 4, dtype=dtype), W, b),
        checks.case("transposed x and W", np.ascontiguousarray(x.T).T, np.ascontiguousarray(W.T).T, b),
        checks.case("size-1 axes", checks.randn(6, 1, 4, dtype=dtype), checks.randn(7, 1, 4, dtype=dtype),
                    checks.randn(8, 1, dtype=dtype)),
    ]
    against_torch("linear", fn.linear, "linear", cases)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ["relu", "sigmoid", "silu", "gelu_tanh"])
def test_mlp_logits_matches_torch(activation, dtype):
    x, W1, b1, W2, b2 = (checks.randn(s, *shape, dtype=dtype)
                         for s, shape in enumerate([(6, 4), (5, 4), (5,), (3, 5), (3,)]))
    got = fn.mlp_logits(x, W1, b1, W2, b2, activation=ELEMENTWISE[activation][0])
    expected = checks.oracles.ORACLES["mlp_logits"](*map(torch.from_numpy, (x, W1, b1, W2, b2)), activation=activation)
    checks.assert_close(got, expected.numpy(), task="mlp_logits", case=activation)


def test_mlp_logits_default_activation_is_relu():
    x, W1, b1, W2, b2 = (checks.randn(s, *shape) for s, shape in enumerate([(6, 4), (5, 4), (5,), (3, 5), (3,)]))
    assert np.array_equal(fn.mlp_logits(x, W1, b1, W2, b2), fn.mlp_logits(x, W1, b1, W2, b2, activation=fn.relu))


# --- 1.1 backward -----------------------------------------------------------------------------
BACKWARD = {  # name -> (backward, forward, torch oracle)
    "relu": (fn.relu_backward, fn.relu, torch.relu),
    "sigmoid": (fn.sigmoid_backward, fn.sigmoid, torch.sigmoid),
    "tanh": (fn.tanh_backward, np.tanh, torch.tanh),
}


@pytest.mark.parametrize("shape", [(3, 4), (1, 4, 1), ()], ids=["matrix", "size-1 axes", "0-d"])
@pytest.mark.parametrize("name", sorted(BACKWARD))
def test_elementwise_backward(check_backward, name, shape):
    backward, forward, oracle = BACKWARD[name]
    x = checks.randn(11, *shape, scale=2.0)
    check_backward(backward, forward, oracle, (x,), wrt=(0,), seed=12)


@settings(max_examples=20, deadline=None)
@given(x=strided_arrays(), name=st.sampled_from(sorted(BACKWARD)), seed=st.integers(0, 2**16))
def test_elementwise_backward_any_layout(x, name, seed):
    backward, _, oracle = BACKWARD[name]
    x = np.asarray(x)
    g = checks.randn(seed, *x.shape)
    t = torch.from_numpy(x.copy()).requires_grad_(True)
    expected, = torch.autograd.grad(oracle(t), t, torch.from_numpy(g))
    checks.assert_close(backward(x, g), expected.numpy(), task=name, case="strided input", kind="grad")


def test_relu_backward_at_kink_is_zero_like_torch():
    x = np.array([-1.0, -0.0, 0.0, 1e-300, np.nan])
    g = checks.randn(0, 5)
    t = torch.from_numpy(x).requires_grad_(True)
    expected, = torch.autograd.grad(torch.relu(t), t, torch.from_numpy(g))
    # Exact: both sides pick either 0 or g, element by element.
    checks.assert_close(fn.relu_backward(x, g), expected.numpy(), task="relu_backward", case="kink", rtol=0, atol=0)


@pytest.mark.parametrize("x_shape", [(5, 4), (2, 3, 4), (4,), (1, 4)], ids=["matrix", "batch axes", "1-d", "size-1"])
def test_linear_backward(check_backward, x_shape):
    x, W, b = checks.randn(21, *x_shape), checks.randn(22, 3, 4), checks.randn(23, 3)
    check_backward(lambda x, W, b, g: fn.linear_backward(x, W, g), fn.linear, F.linear, (x, W, b),
                   wrt=(0, 1, 2), seed=24)


@settings(max_examples=20, deadline=None)
@given(batch=st.lists(st.integers(0, 3), max_size=3).map(tuple), n_in=st.integers(1, 4), n_out=st.integers(1, 4),
       seed=st.integers(0, 2**16))
def test_linear_backward_any_batch_axes(batch, n_in, n_out, seed):
    x, W, g = checks.randn(seed, *batch, n_in), checks.randn(seed + 1, n_out, n_in), checks.randn(seed + 2, *batch, n_out)
    tx, tW, tb = (torch.tensor(a, requires_grad=True) for a in (x, W, np.zeros(n_out)))
    expected = torch.autograd.grad(F.linear(tx, tW, tb), (tx, tW, tb), torch.from_numpy(g))
    for got, exp, name in zip(fn.linear_backward(x, W, g), expected, ["x", "W", "b"]):
        checks.assert_close(got, exp.numpy(), task="linear_backward", case=f"batch {batch}", name=f"grad_{name}",
                            kind="grad")


def test_backward_keeps_float32():
    x, W, g = checks.randn(0, 5, 4, dtype=np.float32), checks.randn(1, 3, 4, dtype=np.float32), checks.randn(
        2, 5, 3, dtype=np.float32)
    grads = [*fn.linear_backward(x, W, g), fn.relu_backward(x, x), fn.sigmoid_backward(x, x), fn.tanh_backward(x, x)]
    assert all(grad.dtype == np.float32 for grad in grads)


# --- 1.1 collapse and parameter counts --------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_collapse_linear_stack_matches_torch_sequential(with_bias, dtype):
    sizes = [4, 6, 5, 3]
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(i, o, bias=with_bias, dtype=getattr(torch, np.dtype(dtype).name))
                                  for i, o in zip(sizes[:-1], sizes[1:])])
    layers = [(m.weight.detach().numpy(), None if m.bias is None else m.bias.detach().numpy()) for m in model]
    W, b = fn.collapse_linear_stack(layers)
    assert W.dtype == dtype and b.dtype == dtype
    x = checks.randn(1, 7, sizes[0], dtype=dtype)
    with torch.no_grad():
        expected = model(torch.from_numpy(x)).numpy()
    checks.assert_close(fn.linear(x, W, b), expected, task="collapse_linear_stack")
    assert W.shape == (sizes[-1], sizes[0]) and b.shape == (sizes[-1],)


def test_collapse_linear_stack_rejects_empty_stack():
    with pytest.raises(ValueError):
        fn.collapse_linear_stack([])


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 50), min_size=2, max_size=5), bias=st.booleans())
def test_mlp_parameter_count_matches_torch(sizes, bias):
    model = torch.nn.Sequential(*[torch.nn.Linear(i, o, bias=bias) for i, o in zip(sizes[:-1], sizes[1:])])
    assert fn.mlp_parameter_count(sizes, bias=bias) == sum(p.numel() for p in model.parameters())


def test_mlp_parameter_count_spec_example():
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.Linear(256, 10))
    assert fn.mlp_parameter_count([784, 256, 10]) == sum(p.numel() for p in model.parameters())


# --- 1.2 logsumexp and softmax ----------------------------------------------------------------
def logit_cases(dtype):
    inf = np.inf
    return [
        *layouts(31, (3, 5), dtype, scale=3.0),
        checks.case("magnitude 1e3", checks.randn(32, 4, 6, dtype=dtype, scale=1e3)),
        checks.case("rows with -inf", np.array([[-inf, -inf, -inf], [0.0, -inf, 2.0], [1e3, -1e3, -inf]], dtype=dtype)),
        checks.case("rows with +inf or nan", np.array([[inf, 1.0, 2.0], [np.nan, 0.0, 1.0]], dtype=dtype)),
        checks.case("3-d", checks.randn(33, 2, 3, 4, dtype=dtype)),
    ]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
def test_softmax_family_matches_torch(name, dtype):
    against_torch(name, getattr(fn, name), name, logit_cases(dtype))


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_family_axis(name, axis):
    cases = [checks.case(f"axis={axis}", checks.randn(34, 3, 4, scale=5.0), axis=axis)]
    against_torch(name, getattr(fn, name), name, cases)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1, -3])
def test_logsumexp_axis_keepdims(axis, keepdims):
    cases = [checks.case("3-d", checks.randn(35, 2, 3, 4, scale=5.0), axis=axis, keepdims=keepdims),
             checks.case("empty axis", np.zeros((2, 0, 4)), axis=1, keepdims=keepdims)]
    against_torch("logsumexp", fn.logsumexp, "logsumexp", cases)


def test_logsumexp_of_all_neg_inf_row_is_neg_inf():
    z = np.full((2, 3), -np.inf, dtype=np.float32)
    expected = torch.logsumexp(torch.from_numpy(z), dim=-1).numpy()
    out = fn.logsumexp(z)
    assert np.all(np.isneginf(expected)) and np.all(np.isneginf(out)) and out.dtype == np.float32


def test_naive_softmax_fails_where_softmax_does_not():
    z = checks.randn(40, 4, 6, dtype=np.float32, scale=1e3)
    with pytest.warns(RuntimeWarning) as warned:  # exp overflows, then inf / inf
        naive = fn.naive_softmax(z)
    assert any("overflow" in str(w.message) for w in warned)
    assert not np.all(np.isfinite(naive))
    stable = fn.softmax(z)
    assert np.all(np.isfinite(stable))
    checks.assert_close(stable, torch.softmax(torch.from_numpy(z), -1).numpy(), task="softmax", case="magnitude 1e3")


def test_naive_softmax_is_right_on_small_logits():
    against_torch("naive_softmax", fn.naive_softmax, "softmax", layouts(41, (3, 5), np.float64))


# --- 1.2 cross-entropy ------------------------------------------------------------------------
REDUCTIONS = ["mean", "sum", "none"]


def ce_cases(dtype, reduction):
    logits = checks.randn(50, 6, 4, dtype=dtype, scale=3.0)
    target = np.array([0, 3, 1, 1, 2, 0])
    return [
        checks.case("plain", logits, target, reduction=reduction),
        checks.case("ignore_index=-100", logits, np.array([0, -100, 1, -100, 2, 3]), reduction=reduction),
        checks.case("ignore_index=1", logits, target, reduction=reduction, ignore_index=1),
        checks.case("transposed logits", np.ascontiguousarray(checks.randn(51, 6, 4, dtype=dtype).T).T, target,
                    reduction=reduction),
        checks.case("magnitude 1e3", checks.randn(52, 6, 4, dtype=dtype, scale=1e3), target, reduction=reduction),
        checks.case("one class", checks.randn(53, 3, 1, dtype=dtype), np.zeros(3, dtype=np.int64), reduction=reduction),
        checks.case("unbatched", checks.randn(54, 4, dtype=dtype), np.array(2), reduction=reduction),
        checks.case("(N, C, d)", checks.randn(55, 2, 4, 3, dtype=dtype), np.array([[0, 3, -100], [1, 1, 2]]),
                    reduction=reduction),
    ]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_matches_torch(reduction, dtype):
    against_torch("cross_entropy", fn.cross_entropy, "cross_entropy", ce_cases(dtype, reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_all_ignored(reduction):
    # torch: mean over no targets is nan, sum is 0, none is zeros; run quietly (no 0/0 warning).
    case = checks.case("all ignored", checks.randn(56, 3, 4), np.full(3, -100), reduction=reduction)
    against_torch("cross_entropy", fn.cross_entropy, "cross_entropy", [case])


def test_cross_entropy_rejects_bad_targets_like_torch():
    logits = checks.randn(57, 3, 4)
    for target in (np.array([0, 4, 1]), np.array([0, -1, 1])):
        with pytest.raises(IndexError):
            F.cross_entropy(torch.from_numpy(logits), torch.from_numpy(target))
        with pytest.raises(IndexError):
            fn.cross_entropy(logits, target)
    with pytest.raises(ValueError):
        fn.cross_entropy(logits, np.array([0, 1, 2]), reduction="average")


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("ignored", [False, True], ids=["all counted", "some ignored"])
def test_cross_entropy_backward(check_backward, reduction, ignored):
    logits = checks.randn(60, 5, 4, scale=2.0)
    target = np.array([0, -100, 3, -100, 1]) if ignored else np.array([0, 2, 3, 3, 1])
    check_backward(fn.cross_entropy_backward, fn.cross_entropy, F.cross_entropy, (logits, target), wrt=(0,),
                   kwargs={"reduction": reduction}, upstream=False)


@pytest.mark.parametrize("logits, target, kwargs", [
    (checks.randn(62, 5), np.array(3), {}),
    (checks.randn(63, 2, 4, 3), np.array([[0, 3, -100], [1, 1, 2]]), {}),
    (checks.randn(64, 4, 5), np.array([0, 1, 2, 3]), {"ignore_index": 2}),
], ids=["unbatched", "(N, C, d)", "ignore_index=2"])
def test_cross_entropy_backward_edge_cases(check_backward, logits, target, kwargs):
    check_backward(fn.cross_entropy_backward, fn.cross_entropy, F.cross_entropy, (logits, target), wrt=(0,),
                   kwargs=kwargs, upstream=False)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_backward_all_ignored_is_zero_like_torch(reduction):
    # No finite differences here: the mean loss is nan everywhere, so they are nan too.
    logits, target = checks.randn(61, 4, 5), np.full(4, -100)
    t = torch.from_numpy(logits).requires_grad_(True)
    expected, = torch.autograd.grad(F.cross_entropy(t, torch.from_numpy(target), reduction=reduction).sum(), t)
    got = fn.cross_entropy_backward(logits, target, reduction=reduction)
    # Exact: torch and the reference both return zeros for every row.
    checks.assert_close(got, expected.numpy(), task="cross_entropy_backward", case="all ignored", rtol=0, atol=0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_extreme_float32_logits(reduction):
    logits = checks.randn(65, 6, 5, dtype=np.float32, scale=1e3)
    target = np.array([0, 4, -100, 2, 2, 1])
    loss = fn.cross_entropy(logits, target, reduction=reduction)
    grad = fn.cross_entropy_backward(logits, target, reduction=reduction)
    assert np.all(np.isfinite(loss)) and np.all(np.isfinite(grad))
    t = torch.from_numpy(logits).requires_grad_(True)
    expected_loss = F.cross_entropy(t, torch.from_numpy(target), reduction=reduction)
    expected_grad, = torch.autograd.grad(expected_loss.sum(), t)
    checks.assert_close(loss, expected_loss.detach().numpy(), task="cross_entropy", case="magnitude 1e3")
    checks.assert_close(grad, expected_grad.numpy(), task="cross_entropy_backward", case="magnitude 1e3", kind="grad")
    with pytest.warns(RuntimeWarning):
        assert not np.all(np.isfinite(fn.naive_softmax(logits)))


# --- 1.2 other losses -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_with_logits_matches_torch(reduction, dtype):
    z = checks.randn(70, 4, 3, dtype=dtype, scale=3.0)
    soft = checks.randn(71, 4, 3, dtype=dtype, low=0.0)
    hard = (checks.randn(72, 4, 3) > 0).astype(dtype)
    extreme_z = np.array(EXTREMES, dtype=dtype)
    cases = [
        checks.case("soft targets", z, soft, reduction=reduction),
        checks.case("hard targets", z, hard, reduction=reduction),
        checks.case("transposed", np.ascontiguousarray(z.T).T, np.ascontiguousarray(soft.T).T, reduction=reduction),
        checks.case("|z| up to 1e4, y=1", extreme_z, np.ones_like(extreme_z), reduction=reduction),
        checks.case("|z| up to 1e4, y=0", extreme_z, np.zeros_like(extreme_z), reduction=reduction),
        checks.case("0-d", checks.randn(73, dtype=dtype), checks.randn(74, dtype=dtype, low=0.0), reduction=reduction),
    ]
    against_torch("binary_cross_entropy_with_logits", fn.binary_cross_entropy_with_logits,
                  "binary_cross_entropy_with_logits", cases)


def test_bce_with_logits_shape_mismatch_raises_like_torch():
    z, y = checks.randn(75, 3, 4), checks.randn(76, 4, low=0.0)
    with pytest.raises(ValueError):
        F.binary_cross_entropy_with_logits(torch.from_numpy(z), torch.from_numpy(y))
    with pytest.raises(ValueError):
        fn.binary_cross_entropy_with_logits(z, y)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss"])
def test_regression_losses_match_torch(name, reduction, dtype):
    pred, target = checks.randn(80, 4, 3, dtype=dtype), checks.randn(81, 4, 3, dtype=dtype)
    cases = [
        checks.case("matrix", pred, target, reduction=reduction),
        checks.case("transposed", np.ascontiguousarray(pred.T).T, np.ascontiguousarray(target.T).T, reduction=reduction),
        checks.case("size-1 axes", checks.randn(82, 1, 3, 1, dtype=dtype), checks.randn(83, 1, 3, 1, dtype=dtype),
                    reduction=reduction),
        checks.case("0-d", checks.randn(84, dtype=dtype), checks.randn(85, dtype=dtype), reduction=reduction),
        checks.case("empty", np.zeros((0, 3), dtype=dtype), np.zeros((0, 3), dtype=dtype), reduction=reduction),
    ]
    against_torch(name, getattr(fn, name), name, cases)


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "binary_cross_entropy_with_logits"])
def test_losses_reject_unknown_reduction(name):
    with pytest.raises(ValueError):
        getattr(fn, name)(checks.randn(0, 3), checks.randn(1, 3, low=0.0), reduction="average")


# --- unit 1.2: cross_entropy_backward takes an upstream gradient (unit 1.4's fused CrossEntropy) ---
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cross_entropy_backward_upstream_gradient(reduction, dtype):
    logits = checks.randn(66, 5, 4, dtype=dtype, scale=2.0)
    target = np.array([0, -100, 3, 2, 1])
    grad = checks.randn(67, *((5,) if reduction == "none" else ()), dtype=dtype)
    t = torch.from_numpy(logits).requires_grad_(True)
    loss = F.cross_entropy(t, torch.from_numpy(target), reduction=reduction)
    expected, = torch.autograd.grad(loss, t, torch.from_numpy(grad))
    got = fn.cross_entropy_backward(logits, target, reduction=reduction, grad=grad)
    checks.assert_close(got, expected.numpy(), task="cross_entropy_backward", case="upstream", kind="grad")
    zero = fn.cross_entropy_backward(logits, target, reduction=reduction, grad=np.zeros_like(grad))
    assert zero.dtype == logits.dtype and not np.any(zero)

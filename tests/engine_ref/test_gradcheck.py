"""engine_ref.gradcheck (unit 1.5): finite differences, relative error, gradcheck on the engine."""
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.inside import checks
from engine_ref.autodiff import Function, Tensor
from engine_ref.gradcheck import (
    GradcheckError, gradcheck, kink_mask, numerical_gradient, numerical_vjp, relative_error, step_size_sweep,
)
from tests.strategies import strided_arrays

pytestmark = pytest.mark.filterwarnings("error")
FD_RTOL, FD_ATOL = checks.DEFAULT_TOL["fd"]  # float64 central differences with step 1e-6, justified in checks


def f_numpy(x):
    """A smooth scalar function that reuses its input (x * x) and reduces over every axis."""
    return np.sum(np.tanh(x) * x * x + np.exp(0.5 * x))


def f_torch(x):
    return torch.sum(torch.tanh(x) * x * x + torch.exp(0.5 * x))


def torch_grad(fn, x, upstream=None):
    t = torch.from_numpy(np.array(x)).requires_grad_(True)
    out = fn(t)
    grad, = torch.autograd.grad(out, t, None if upstream is None else torch.from_numpy(upstream))
    return grad.numpy()


# --- numerical_gradient and numerical_vjp -----------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(x=strided_arrays())
def test_numerical_gradient_matches_torch_on_any_layout(x):
    x = np.asarray(x)
    before = x.copy()
    got = numerical_gradient(f_numpy, x)
    checks.assert_close(got, torch_grad(f_torch, before), task="numerical_gradient", rtol=FD_RTOL, atol=FD_ATOL)
    assert got.shape == x.shape and got.dtype == x.dtype
    np.testing.assert_array_equal(x, before)  # exact: every coordinate is put back


def test_numerical_gradient_perturbs_in_place_for_closures():
    # CS231n style: f ignores its argument and reads x through a closure, so x must move in place.
    x = checks.randn(0, 3, 4)
    got = numerical_gradient(lambda _: f_numpy(x), x)
    checks.assert_close(got, torch_grad(f_torch, x), task="numerical_gradient", rtol=FD_RTOL, atol=FD_ATOL)


def test_numerical_gradient_restores_x_when_f_raises():
    base = checks.randn(1, 4, 6)
    x = base[:, ::2]  # a non-contiguous view: the base must be restored too
    before, base_before = x.copy(), base.copy()
    calls = []

    def f(v):
        calls.append(1)
        if len(calls) == 4:  # during the second coordinate, after one perturbation
            raise FloatingPointError("boom")
        return f_numpy(v)

    with pytest.raises(FloatingPointError):
        numerical_gradient(f, x)
    np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(base, base_before)


def test_numerical_gradient_rejects_integer_arrays():
    with pytest.raises(TypeError):
        numerical_gradient(lambda v: v.sum(), np.arange(3))


@pytest.mark.parametrize("shape", [(3, 4), (1, 4, 1), ()], ids=["matrix", "size-1 axes", "0-d"])
def test_numerical_vjp_matches_torch(shape):
    x = checks.randn(2, *shape)
    g = checks.randn(3, *shape)
    got = numerical_vjp(lambda v: np.tanh(v) * v, x, g)
    expected = torch_grad(lambda t: torch.tanh(t) * t, x, g)
    checks.assert_close(got, expected, task="numerical_vjp", rtol=FD_RTOL, atol=FD_ATOL)
    assert np.all(numerical_vjp(lambda v: np.tanh(v) * v, x, np.zeros_like(g)) == 0)


def test_numerical_vjp_transposed_input():
    x = checks.randn(4, 3, 4).T  # (4, 3), Fortran order
    M, g = checks.randn(5, 3, 2), checks.randn(6, 4, 2)
    got = numerical_vjp(lambda v: np.exp(v) @ M, x, g)
    expected = torch_grad(lambda t: torch.exp(t) @ torch.from_numpy(M), x, g)
    checks.assert_close(got, expected, task="numerical_vjp", case="transposed", rtol=FD_RTOL, atol=FD_ATOL)


# --- relative_error ---------------------------------------------------------------------------
finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=50, deadline=None)
@given(pairs=st.lists(st.tuples(finite, finite), min_size=1, max_size=8))
def test_relative_error_is_the_worst_elementwise_ratio(pairs):
    a, b = np.array(pairs).T
    brute = max(abs(x - y) / max(abs(x) + abs(y), 1e-12) for x, y in pairs)
    assert relative_error(a, b) == brute  # exact: the same IEEE operations, element by element
    assert relative_error(b, a) == relative_error(a, b)
    assert relative_error(a, a) == 0.0


def test_relative_error_floor_for_zeros():
    assert relative_error(np.zeros(3), np.zeros(3)) == 0.0
    assert relative_error(np.array([0.0]), np.array([1e-13])) == 1e-13 / 1e-12


# --- gradcheck on the engine ------------------------------------------------------------------
CORRECT = {  # name -> (f on Tensors, input shapes); every graph reuses a node
    "x * x": (lambda x: (x * x).sum(), [(3, 4)]),
    "tanh, exp, log": (lambda x: ((x.tanh() * x).exp() + (x * x + 1.0).log()).sum(), [(2, 3)]),
    "broadcast mul, div": (lambda x, b: (x * b / (b * b + 1.0) + x * x).sum(), [(3, 4), (4,)]),
    "matmul": (lambda x, W: ((x @ W).tanh() * (x @ W)).sum(), [(2, 3), (3, 4)]),
    "non-scalar output": (lambda x, y: x * y + x * x, [(2, 3), (2, 3)]),
    "0-d and size-1": (lambda s, v: (s * v * v).sum() * s, [(), (1, 3, 1)]),
    "relu": (lambda x: (x.relu() * x).sum(), [(4, 5)]),
}


@pytest.mark.parametrize("n_samples", [None, 3])
@pytest.mark.parametrize("name", sorted(CORRECT))
def test_gradcheck_passes_on_correct_ops(name, n_samples):
    f, shapes = CORRECT[name]
    inputs = [checks.randn(10 + k, *shape) for k, shape in enumerate(shapes)]
    if name == "relu":  # keep every coordinate away from the kink (see kink_mask)
        inputs[0] = inputs[0] + np.where(inputs[0] >= 0, 0.1, -0.1)
    before = [a.copy() for a in inputs]
    assert gradcheck(f, inputs, n_samples=n_samples) is True
    for a, b in zip(inputs, before):
        np.testing.assert_array_equal(a, b)


def test_gradcheck_passes_on_non_contiguous_inputs():
    x = checks.randn(20, 4, 2).T  # (2, 4), transposed
    W = checks.randn(21, 8, 5)[::2, 1:4]  # (4, 3), sliced
    assert gradcheck(lambda x, W: ((x @ W) * (x @ W)).sum(), [x, W])


class WrongSquare(Function):
    """x * x with a planted bug: backward returns 3x instead of 2x."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        return 3 * a * grad


def expected_failure(analytic, numeric, atol=1e-5, rtol=1e-3):
    """The coordinate gradcheck must report, by brute force over the flattened arrays."""
    excess = np.abs(analytic - numeric) - (atol + rtol * np.abs(numeric))
    k = int(np.argmax(excess))
    return np.unravel_index(k, analytic.shape), analytic.flat[k], numeric.flat[k]


def test_gradcheck_names_input_index_and_values_of_a_planted_bug():
    x, y = checks.randn(30, 3, 4), checks.randn(31, 2, 3)
    f = lambda x, y: (x * x).sum() + WrongSquare.apply(y).sum()  # noqa: E731 - the bug is in input 1 only
    with pytest.raises(GradcheckError) as info:
        gradcheck(f, [x, y])
    err = info.value
    index, analytic, numeric = expected_failure(3 * y, torch_grad(lambda t: (t * t).sum(), y))
    assert err.input_index == 1 and err.index == tuple(int(i) for i in index)
    # analytic: the engine's own value; numeric: central differences (FD tolerance, see above)
    assert err.analytic == pytest.approx(analytic, rel=1e-12)
    assert err.numeric == pytest.approx(numeric, rel=FD_RTOL, abs=FD_ATOL)
    message = str(err)
    assert "input 1" in message and str(err.index) in message
    assert repr(err.analytic) in message and repr(err.numeric) in message
    assert isinstance(err, AssertionError)


class OffByOne(Function):
    """x * x with a planted bug: backward adds 1, so |a - n| is the same everywhere."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        return 2 * a * grad + 1


def test_gradcheck_reports_the_widest_margin_not_the_largest_difference():
    # |a - n| = 1 everywhere; the margin atol + rtol|n| is smallest where |x| is.
    x = checks.randn(33, 3, 5)
    with pytest.raises(GradcheckError) as info:
        gradcheck(lambda x: OffByOne.apply(x).sum(), [x])
    index, _, _ = expected_failure(2 * x + 1, 2 * x)
    assert info.value.index == tuple(int(i) for i in index)


class IgnoresGrad(Function):
    """x * x with the classic bug: backward forgets to multiply by the incoming grad."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        return 2 * a


def test_gradcheck_weights_a_non_scalar_output_randomly():
    # With an all-ones upstream gradient this bug would be invisible.
    with pytest.raises(GradcheckError):
        gradcheck(lambda x: IgnoresGrad.apply(x), [checks.randn(34, 3, 4)])


def make_scaled(c, delta):
    class Scaled(Function):
        """x * c whose backward is off by the relative error ``delta``."""

        @staticmethod
        def forward(ctx, a):
            return a * c

        @staticmethod
        def backward(ctx, grad):
            return grad * c * (1 + delta)

    return Scaled


@pytest.mark.parametrize("delta", [0.9995e-3, 1.0005e-3])
def test_gradcheck_tolerance_is_atol_plus_rtol_times_numeric(delta):
    # a = c(1 + delta), n = c up to rounding ~1e-7, far inside the 5e-4 gap between the two deltas
    c, atol, rtol = 1e3, 1e-5, 1e-3
    expected_pass = abs(c * (1 + delta) - c) <= atol + rtol * c
    Scaled = make_scaled(c, delta)
    f = lambda x: Scaled.apply(x).sum()  # noqa: E731
    if expected_pass:
        assert gradcheck(f, [checks.randn(35, 4)], atol=atol, rtol=rtol)
    else:
        with pytest.raises(GradcheckError):
            gradcheck(f, [checks.randn(35, 4)], atol=atol, rtol=rtol)


def test_gradcheck_catches_a_planted_bug_with_sampling_and_vjp():
    x = checks.randn(32, 3, 4)
    with pytest.raises(GradcheckError) as info:
        gradcheck(lambda x: WrongSquare.apply(x) * x, [x], n_samples=4, seed=5)
    assert info.value.input_index == 0


def test_gradcheck_samples_n_coordinates():
    calls = []

    def f(x, y):
        calls.append(1)
        return (x * y * y).sum()

    x, y = checks.randn(40, 5, 6), checks.randn(41, 5, 6)
    gradcheck(f, [x, y], n_samples=4)
    assert len(calls) == 1 + 2 * 4 * 2  # one forward for backward, then two evaluations per coordinate


def test_gradcheck_rejects_non_float_inputs():
    with pytest.raises(TypeError):
        gradcheck(lambda x: (x * x).sum(), [np.arange(3)])


# --- step_size_sweep --------------------------------------------------------------------------
STEPS = np.logspace(-13, -1, 13)


def test_step_size_sweep_matches_its_definition():
    x = checks.randn(50, 2, 3)
    f = lambda t: (t.tanh() * t * t).sum()  # noqa: E731
    errors = step_size_sweep(f, x, STEPS[::4])
    grad = torch_grad(lambda t: (torch.tanh(t) * t * t).sum(), x)
    for h, err in zip(STEPS[::4], errors):
        numeric = numerical_gradient(lambda v: np.sum(np.tanh(v) * v * v), x.copy(), eps=h)
        # Engine and torch gradients agree to a few ulps (~1e-15); the errors themselves are >= 1e-11.
        assert err == pytest.approx(np.max(np.abs(numeric - grad)), rel=1e-3, abs=1e-14)


def test_step_size_sweep_is_a_v_and_float32_needs_bigger_steps():
    f = lambda t: (t.tanh() * t * t).sum()  # noqa: E731
    x64 = checks.randn(51, 3, 3)
    e64 = step_size_sweep(f, x64, STEPS)
    e32 = step_size_sweep(f, x64.astype(np.float32), STEPS)
    best64, best32 = STEPS[np.argmin(e64)], STEPS[np.argmin(e32)]
    assert 1e-7 <= best64 <= 1e-4  # the spec's concept-check range, from eps64^(1/3) ~ 6e-6
    assert best32 > best64  # eps32^(1/3) ~ 5e-3
    assert e64[0] > e64.min() and e64[-1] > e64.min()  # both arms of the V


# --- kink_mask --------------------------------------------------------------------------------
def brute_force_kink(x, eps):
    """Exact rational arithmetic: does the central difference of relu differ from relu'(x)?"""
    X, E = Fraction(x), Fraction(eps)
    relu = lambda v: max(v, 0)  # noqa: E731
    central = (relu(X + E) - relu(X - E)) / (2 * E)
    return central != (1 if X > 0 else 0)


@settings(max_examples=60, deadline=None)
@given(eps=st.sampled_from([1e-6, 1e-3, 0.5]), data=st.data())
def test_kink_mask_matches_brute_force(eps, data):
    edge = [0.0, -0.0, eps, -eps, np.nextafter(eps, 0), -np.nextafter(eps, 0), np.nextafter(eps, 1), 3 * eps]
    values = st.one_of(st.sampled_from(edge), st.floats(-3 * eps, 3 * eps), st.floats(-10, 10))
    x = np.array(data.draw(st.lists(values, min_size=1, max_size=12)))
    expected = np.array([brute_force_kink(v, eps) for v in x])
    np.testing.assert_array_equal(kink_mask(x, eps), expected)
    np.testing.assert_array_equal(kink_mask(x.reshape(-1, 1), eps), expected.reshape(-1, 1))


def test_kink_mask_marks_where_relu_gradcheck_disagrees():
    eps = 1e-6
    x = eps * np.array([[-3.0, -0.5, 0.0], [0.25, 2.0, 40.0]])
    analytic = (x > 0).astype(float)
    numeric = numerical_gradient(lambda v: np.sum(np.maximum(v, 0)), x.copy(), eps=eps)
    # Off the kink both are exact up to rounding, ~1e-10 relative; on it they differ by >= 0.25.
    np.testing.assert_array_equal(kink_mask(x, eps), np.abs(numeric - analytic) > 1e-6)

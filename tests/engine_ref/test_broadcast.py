"""engine_ref.broadcast and the broadcasting binary ops (unit 1.4) against PyTorch.

Comparisons use the checks' default float64 tolerance (rtol 1e-7, atol 1e-9, justified in
``autograder/inside/checks.py``): the engine and torch do the same float64 arithmetic, up to the order
of the sums over broadcast axes, which moves results by a few ulps.
"""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.inside import checks
from engine_ref.autodiff import Tensor
from engine_ref.broadcast import broadcast_shape, unbroadcast
from tests.strategies import broadcast_pairs, shapes, strided_arrays

pytestmark = pytest.mark.filterwarnings("error")

BINARY = {  # operator -> the same operator on torch tensors (and on engine Tensors)
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
}
FIXED_PAIRS = [((3, 1), (1, 4)), ((4,), (3, 4)), ((), (2, 3)), ((2, 3), ()), ((), ()), ((1,), (1, 1))]


# --- broadcast_shape ---------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(pair=broadcast_pairs(), third=shapes)
def test_broadcast_shape_matches_torch(pair, third):
    assert broadcast_shape(*pair) == tuple(torch.broadcast_shapes(*pair))
    try:
        expected = tuple(torch.broadcast_shapes(*pair, third))
    except RuntimeError:
        with pytest.raises(ValueError):
            broadcast_shape(*pair, third)
    else:
        assert broadcast_shape(*pair, third) == expected


@pytest.mark.parametrize("shapes_", [((2, 3), (4, 3)), ((3,), (4,)), ((2, 1), (8, 4, 3))])
def test_broadcast_shape_rejects_incompatible_shapes_like_torch(shapes_):
    with pytest.raises(RuntimeError):
        torch.broadcast_shapes(*shapes_)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        broadcast_shape(*shapes_)


def test_broadcast_shape_edge_cases_match_torch():
    for args in [(), ((),), (5,), (3, (2, 3)), ((1, 0), (4, 1))]:  # an int is a 1-d shape, as in torch
        assert broadcast_shape(*args) == tuple(torch.broadcast_shapes(*args))


# --- unbroadcast -------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(pair=broadcast_pairs(), seed=st.integers(0, 2**16))
def test_unbroadcast_is_the_adjoint_of_broadcast(pair, seed):
    """The gradient of sum(g * broadcast_to(x, out)) with respect to x, computed by torch."""
    shape, other = pair
    out_shape = broadcast_shape(shape, other)
    g = checks.randn(seed, *out_shape)
    x = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
    (torch.from_numpy(g) * x.expand(out_shape)).sum().backward()
    got = unbroadcast(g, shape)
    assert got.shape == shape  # exactly the shape, size-1 axes kept
    checks.assert_close(got, x.grad.numpy(), task="unbroadcast", kind="grad")


def test_unbroadcast_returns_exactly_the_shape_for_size_1_and_0_d():
    g = checks.randn(0, 3, 4)
    assert unbroadcast(g, (1, 4)).shape == (1, 4)
    assert unbroadcast(g, (3, 1)).shape == (3, 1)
    assert unbroadcast(g, (4,)).shape == (4,)
    assert unbroadcast(g, ()).shape == ()
    assert isinstance(unbroadcast(g, ()), np.ndarray)
    # Exact: a sum over every axis is the same sum in both.
    assert unbroadcast(g, ()) == g.sum()


def test_unbroadcast_rejects_a_shape_that_does_not_broadcast_to_the_gradient():
    with pytest.raises(ValueError):
        unbroadcast(np.ones((3, 4)), (2, 4))
    with pytest.raises(ValueError):
        unbroadcast(np.ones((4,)), (3, 4))  # the gradient cannot be smaller than the operand


# --- binary ops through the engine -------------------------------------------------------------
def _engine_vs_torch(op, a, b, seed):
    """Forward and both gradients of ``op(x, y) * op(x, y)`` (the op's node reused) through the
    engine, for a random upstream gradient, against torch autograd."""
    x, y = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    out = op(x, y)
    g = checks.randn(seed, *out.shape)
    (out * out).backward(g)
    tx, ty = (torch.tensor(v, requires_grad=True) for v in (a, b))
    t_out = op(tx, ty)
    (t_out * t_out).backward(torch.from_numpy(g))
    checks.assert_close(out.data, t_out.detach().numpy(), task="forward")

    checks.assert_close(x.grad, tx.grad.numpy(), task="grad a", kind="grad")
    checks.assert_close(y.grad, ty.grad.numpy(), task="grad b", kind="grad")


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shape_a, shape_b", FIXED_PAIRS)
def test_binary_ops_broadcast_like_torch(name, shape_a, shape_b):
    a = checks.randn(1, *shape_a)
    b = checks.randn(2, *shape_b, low=0.5, scale=2.0)  # away from 0, for div
    _engine_vs_torch(BINARY[name], a, b, seed=3)


@settings(max_examples=40, deadline=None)
@given(pair=broadcast_pairs(), name=st.sampled_from(sorted(BINARY)), data=st.data())
def test_binary_ops_on_random_broadcast_pairs_match_torch(pair, name, data):
    a = data.draw(strided_arrays(shape=pair[0]))  # usually non-contiguous
    b = np.abs(data.draw(strided_arrays(shape=pair[1]))) + 0.5  # away from 0, for div
    _engine_vs_torch(BINARY[name], a, b, seed=data.draw(st.integers(0, 2**16)))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_op_reusing_a_broadcast_operand(name):
    """x is used twice, once stretched: its gradient sums both uses."""
    x, w = checks.randn(4, 1, 4), checks.randn(5, 3, 1, low=0.5, scale=2.0)
    _engine_vs_torch(lambda a, b: BINARY[name](BINARY[name](a, b), a) * a, x, w, seed=6)

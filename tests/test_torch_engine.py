"""autograder.outside.torch_engine, the engine the unit 1.8 grader runs students' differential tests against,
agrees with the reference engine: the same values and gradients, the same SGD steps, torch's
rules in backward, and replaced parts are used by the engine's own operators."""
import numpy as np
import pytest

import engine_ref
from autograder.outside import torch_engine


def branched(E, x, b, W, target):
    hidden = E.Tanh.apply(E.Add.apply(E.Mul.apply(x, x), b))
    z = E.MatMul.apply(E.ReLU.apply(hidden), W)
    loss = E.CrossEntropy.apply(z, target, ignore_index=1)
    return E.Add.apply(loss, E.Mean.apply(E.Div.apply(E.Sub.apply(hidden, b), E.Exp.apply(b)), axis=0).sum())


def test_gradients_match_the_reference_engine():
    rng = np.random.default_rng(0)
    arrays = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((4, 3))
    target = np.array([0, 1, 2])
    grads = []
    for E in (torch_engine.torch_engine(), engine_ref):
        leaves = [E.Tensor(a.copy(), requires_grad=True) for a in arrays]
        E.backward(branched(E, *leaves, target))
        grads.append([t.grad for t in leaves])
    for got, expected in zip(*grads):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_sgd_matches_the_reference_sgd():
    rng = np.random.default_rng(1)
    E = torch_engine.torch_engine()
    p0 = rng.standard_normal(3)
    p, q = E.Parameter(p0.copy()), engine_ref.Parameter(p0.copy())
    ours, theirs = E.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.2), engine_ref.SGD([q], lr=0.1, momentum=0.9,
                                                                                      weight_decay=0.2)
    for _ in range(4):
        g = rng.standard_normal(3)
        p.grad, q.grad = g.copy(), g.copy()
        ours.step()
        theirs.step()
        np.testing.assert_allclose(p.data, q.data, rtol=1e-12)


def test_backward_follows_torch_rules():
    E = torch_engine.torch_engine()
    x = E.Tensor(np.ones((2, 2)), requires_grad=True)
    with pytest.raises(RuntimeError, match="scalar outputs"):
        E.backward(x * x)
    loss = (x * x).sum()
    E.backward(loss)
    E.backward(loss)
    np.testing.assert_array_equal(x.grad, 4 * np.ones((2, 2)))  # two calls add up: 2 * 2x


def test_a_replaced_op_is_used_by_the_operators():
    base = torch_engine.torch_engine()

    class Sub(base.Sub):
        @staticmethod
        def backward(ctx, grad):
            ga, gb = base.Sub.backward(ctx, grad)
            return ga, -gb

    E = torch_engine.torch_engine(Sub=Sub)
    a, b = E.Tensor(np.ones(3), requires_grad=True), E.Tensor(np.ones(3), requires_grad=True)
    ((a - b) * 2.0).sum().backward()
    np.testing.assert_array_equal(b.grad, 2 * np.ones(3))  # the planted sign, through an operator


def test_two_engines_share_no_part_even_with_the_same_changes():
    """A test that keeps the engines it is handed cannot tell a planted part, handed again, by its
    identity: each engine's parts are its own, and a replaced part still does what it did."""
    R = torch_engine.torch_engine()
    changes = {"Sub": type("Sub", (R.Sub,), {"backward": staticmethod(lambda ctx, grad: (grad, grad))}),
               "backward": lambda root, grad=None: torch_engine.engine_backward(root, grad, combine=lambda o, n: n)}
    engines = [torch_engine.torch_engine(**changes) for _ in range(2)]
    parts = [vars(E) for E in engines + [torch_engine.torch_engine(), torch_engine.torch_engine()]]
    ids = [{id(v) for v in p.values()} for p in parts]
    assert all(not (ids[i] & ids[j]) for i in range(len(ids)) for j in range(i + 1, len(ids)))
    for E in engines:
        a, b = E.Tensor(np.ones(3), requires_grad=True), E.Tensor(np.ones(3), requires_grad=True)
        E.backward(E.Sum.apply(E.Sub.apply(a, b)))
        assert np.array_equal(b.grad, np.ones(3))  # the planted sign, kept
        leaf = E.Tensor(np.ones(2), requires_grad=True)
        E.backward(E.Sum.apply(E.Add.apply(leaf, leaf)))
        assert np.array_equal(leaf.grad, np.ones(2))  # the planted accumulation (replaced, not added), kept

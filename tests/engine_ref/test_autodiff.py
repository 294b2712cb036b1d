"""engine_ref.autodiff (units 1.3 and 1.4): every op and the engine against PyTorch and central
finite differences.

Unless a line says otherwise, comparisons use the checks' default tolerances, justified in
``autograder/inside/checks.py`` (float64 vs torch: rtol 1e-7, atol 1e-9; vs central differences with
step 1e-6: rtol 1e-5, atol 1e-6; float32 vs torch: rtol 1e-4, atol 1e-5).
"""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.inside import checks
from autograder.outside import oracles
from engine_ref import autodiff as ad
from engine_ref.autodiff import Tensor
from engine_ref.functional import softmax
from engine_ref.graphs import branched_loss
from tests.strategies import strided_arrays

pytestmark = pytest.mark.filterwarnings("error")


def rand(seed, *shape, positive=False):
    return checks.randn(seed, *shape, low=0.5 if positive else None, scale=2.0)


# --- every op: forward, saved values, backward (torch, finite differences, zero upstream
# --- gradient, non-contiguous inputs; all inside checks.check_function) ------------------------
def binary_cases(positive_b=False):
    pairs = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((4,), (3, 4)), ((), (2, 3)), ((2, 3), ()), ((), ()),
             ((1, 1), (1,))]
    return [checks.case(f"{sa} with {sb}", rand(2 * i, *sa), rand(2 * i + 1, *sb, positive=positive_b))
            for i, (sa, sb) in enumerate(pairs)]


def unary_cases(positive=False):
    return [checks.case(f"shape {s}", rand(i, *s, positive=positive)) for i, s in enumerate([(3, 4), (1, 5, 1), (), (2, 1, 3)])]


def reduction_cases():
    x = rand(0, 2, 3, 4)
    options = [dict(), dict(axis=1), dict(axis=-1, keepdims=True), dict(axis=(0, 2)), dict(keepdims=True),
               dict(axis=(2, -3), keepdims=True)]
    return ([checks.case(f"{kw}", x, **kw) for kw in options]
            + [checks.case("0-d", rand(1)), checks.case("size-1 axis", rand(2, 1, 3), axis=0)])


def cross_entropy_cases():
    logits, target = rand(0, 5, 4), np.array([0, 3, -100, 1, 3])
    return ([checks.case(reduction, logits, target, reduction=reduction) for reduction in ("mean", "sum", "none")]
            + [checks.case("one row", rand(1, 1, 3), np.array([2])),
               checks.case("ignore_index=1", logits, np.array([1, 1, 0, 2, 3]), ignore_index=1, reduction="sum")])


OPS = {  # name -> (Function, torch oracle, cases, saves)
    "Add": (ad.Add, "add", binary_cases(), lambda a, b, out: [()]),
    "Sub": (ad.Sub, "sub", binary_cases(), lambda a, b, out: [()]),
    "Mul": (ad.Mul, "mul", binary_cases(), lambda a, b, out: [(a, b)]),
    "Div": (ad.Div, "div", binary_cases(positive_b=True), lambda a, b, out: [(a, b)]),
    "Neg": (ad.Neg, "neg", unary_cases(), lambda a, out: [()]),
    "MatMul": (ad.MatMul, "matmul",
               [checks.case(f"{sa} @ {sb}", rand(i, *sa), rand(i + 9, *sb))
                for i, (sa, sb) in enumerate([((3, 4), (4, 2)), ((1, 3), (3, 1)), ((2, 1), (1, 3))])],
               lambda a, b, out: [(a, b)]),
    "Sum": (ad.Sum, "sum", reduction_cases(), lambda a, out, **kw: [(a.shape,)]),
    "Mean": (ad.Mean, "mean", reduction_cases(), lambda a, out, **kw: [(a.shape,)]),
    # Saved results are compared exactly, so they are recomputed with NumPy, as the op does.
    "Exp": (ad.Exp, "exp", unary_cases(), lambda a, out: [(np.exp(a),)]),
    "Log": (ad.Log, "log", unary_cases(positive=True), lambda a, out: [(a,)]),
    "Tanh": (ad.Tanh, "tanh", unary_cases(), lambda a, out: [(np.tanh(a),)]),
    "ReLU": (ad.ReLU, "relu", unary_cases(), lambda a, out: [(a > 0,)]),
    "Reshape": (ad.Reshape, "reshape",
                [checks.case(f"to {s}", rand(0, 3, 4), shape=s) for s in [(4, 3), (-1,), (2, 1, 6)]]
                + [checks.case("0-d to (1, 1)", rand(1), shape=(1, 1)), checks.case("(1,) to 0-d", rand(2, 1), shape=())],
                lambda a, out, shape: [(a.shape,)]),
    "Transpose": (ad.Transpose, "transpose",
                  [checks.case("(3, 4)", rand(0, 3, 4), dim0=0, dim1=1),
                   checks.case("(2, 3, 4) outer", rand(1, 2, 3, 4), dim0=0, dim1=2),
                   checks.case("negative dims", rand(2, 2, 1, 4), dim0=-1, dim1=0),
                   checks.case("inner dims of 3", rand(4, 2, 3, 4), dim0=1, dim1=2),
                   checks.case("same dim", rand(3, 5), dim0=0, dim1=0)],
                  lambda a, out, dim0, dim1: [()]),
    "Index": (ad.Index, lambda a, index: a[index],
              [checks.case("slices", rand(0, 4, 5), index=(slice(1, 3), slice(None, None, 2))),
               checks.case("int", rand(1, 3, 2), index=1),
               checks.case("repeated rows", rand(2, 3, 2), index=np.array([0, 2, 0])),
               checks.case("0-d result", rand(3, 2, 3), index=(1, 2))],
              lambda a, out, index: [(a.shape,)]),
    "CrossEntropy": (ad.CrossEntropy, "cross_entropy", cross_entropy_cases(),
                     lambda logits, target, out, **kw: [(softmax(logits, axis=1), target)]),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_matches_torch_and_finite_differences(name):
    Fn, oracle, cases, saves = OPS[name]
    checks.check_function(name, Fn, oracle, cases, saves=saves, numpy_only=False)  # the reference itself


def test_every_op_is_checked():
    defined = {obj.__name__ for obj in vars(ad).values()
               if isinstance(obj, type) and issubclass(obj, ad.Function) and obj is not ad.Function}
    assert defined == set(OPS)


@pytest.mark.parametrize("name", ["Mul", "Div", "Exp", "Tanh", "MatMul", "Sum", "CrossEntropy"])
def test_op_keeps_float32(name):
    """float32 in, float32 out, and float32 gradients, as in torch."""
    Fn, oracle, cases, _ = OPS[name]
    c = cases[0]
    args = [a.astype(np.float32) if a.dtype == np.float64 else a for a in c.args]
    inputs = [Tensor(a, requires_grad=a.dtype == np.float32) for a in args]
    out = Fn.apply(*inputs, **c.kwargs)
    out.backward(np.ones(out.shape, np.float32))
    targs = [torch.tensor(a, requires_grad=a.dtype == np.float32) for a in args]
    t_out = oracles.oracle(oracle)(*targs, **c.kwargs)
    t_out.backward(torch.ones(t_out.shape))
    checks.assert_close(out.data, t_out.detach().numpy(), task=name)  # checks the dtype too
    for x, tx in zip(inputs, targs):
        if x.requires_grad:
            checks.assert_close(x.grad, tx.grad.numpy(), task=name, kind="grad")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_is_finite_on_extreme_float32_logits(reduction):
    logits = np.array([[1e3, -1e3, 0.0], [-1e3, 1e3, 5e2], [2e2, -5e2, 1e3], [1e3, 1e3, -1e3]], np.float32)
    target = np.array([1, 1, 0, 2])
    x = Tensor(logits, requires_grad=True)
    loss = ad.CrossEntropy.apply(x, target, reduction=reduction)
    loss.backward(np.ones(loss.shape, np.float32))
    tx = torch.tensor(logits, requires_grad=True)
    t_loss = torch.nn.functional.cross_entropy(tx, torch.from_numpy(target), reduction=reduction)
    t_loss.backward(torch.ones(t_loss.shape))
    assert np.all(np.isfinite(loss.data)) and np.all(np.isfinite(x.grad))
    checks.assert_close(loss.data, t_loss.detach().numpy(), task="loss")  # float32 tolerance, dtype too
    checks.assert_close(x.grad, tx.grad.numpy(), task="grad", kind="grad")


def test_cross_entropy_with_every_target_ignored_is_nan_with_zero_grads_like_torch():
    logits, target = rand(0, 3, 4), np.full(3, -100)
    x = Tensor(logits, requires_grad=True)
    loss = ad.CrossEntropy.apply(x, target)
    loss.backward()
    tx = torch.tensor(logits, requires_grad=True)
    torch.nn.functional.cross_entropy(tx, torch.from_numpy(target)).backward()
    assert np.isnan(loss.item())
    assert np.array_equal(x.grad, tx.grad.numpy())  # exact: all zeros on both sides


def test_relu_gradient_at_the_kink_is_zero_like_torch():
    a, g = np.array([-1.0, 0.0, 2.0, -0.0]), rand(0, 4)
    x, tx = Tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    x.relu().backward(g)
    tx.relu().backward(torch.from_numpy(g))
    # No finite differences here: at 0 they average the one-sided slopes 0 and 1.
    assert np.array_equal(x.grad, tx.grad.numpy())  # exact: each entry is 0 or g


def test_cross_entropy_saves_no_alias_of_the_logits():

    logits = rand(0, 4, 3)
    ctx = checks.RecordingContext()
    ad.CrossEntropy.forward(ctx, logits, np.array([0, 1, 2, 0]))
    assert not any(isinstance(v, np.ndarray) and np.shares_memory(v, logits) for v in ctx.saved)


# --- graphs ------------------------------------------------------------------------------------
def scalar_broadcast_loss(x, W, b):
    """x reaches the loss through x @ W, through x.sum() (0-d) broadcast over h, and x * x."""
    h = (x @ W + b).tanh()  # b (2,) broadcasts over the rows
    z = h * x.sum()
    return (z * z).sum() + (x * x).sum() / 3 + (h.relu() + 1.5).log().sum()


GRAPHS = {  # name -> (build, leaves); every graph reuses a node
    "x * x": (lambda x: (x * x).sum(), [rand(0, 3, 4)]),
    "diamond": (lambda x, y: (lambda p: (p.exp() * p - y / x).sum())(x * y),
                [rand(1, 2, 3, positive=True), rand(2, 2, 3)]),
    "branched_loss (unit 1.4)": (branched_loss, [rand(3, 3, 4), rand(4, 4, 2), rand(5, 2)]),
    "0-d sum broadcast": (scalar_broadcast_loss, [rand(3, 3, 4), rand(4, 4, 2), rand(5, 2)]),
    "broadcast (3, 1) and (1, 4)": (lambda a, b: ((a * b) * a + b).tanh().sum(), [rand(6, 3, 1), rand(7, 1, 4)]),
    "0-d leaf": (lambda s, x: (s * x * s - x).sum(), [rand(8), rand(9, 2, 3)]),
}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_graph_gradients_match_torch_and_finite_differences(name):
    build, leaves = GRAPHS[name]
    checks.check_graph(name, Tensor, build, leaves, numpy_only=False)  # the reference itself


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_graph_with_random_and_zero_upstream_gradient(name):
    """A vector-valued root: backward(g) gives the vector-Jacobian product, and g = 0 gives 0."""
    build, leaves = GRAPHS[name]
    scale = rand(10)  # a random upstream gradient for the scalar root, not 1
    xs = [Tensor(a, requires_grad=True) for a in leaves]
    build(*xs).backward(scale)
    ts = [torch.tensor(a, requires_grad=True) for a in leaves]
    build(*ts).backward(torch.from_numpy(scale))
    for x, t in zip(xs, ts):
        checks.assert_close(x.grad, t.grad.numpy(), task=name, kind="grad")
    zs = [Tensor(a, requires_grad=True) for a in leaves]
    build(*zs).backward(np.zeros(()))
    assert all(np.all(z.grad == 0) for z in zs)


def test_branched_loss_with_non_contiguous_leaves_matches_torch():
    leaves = [checks.strided(a) for a in GRAPHS["branched_loss (unit 1.4)"][1]]
    xs = [Tensor(a, requires_grad=True) for a in leaves]
    branched_loss(*xs).backward()
    ts = [torch.from_numpy(a).requires_grad_() for a in leaves]
    branched_loss(*ts).backward()
    for x, t in zip(xs, ts):
        checks.assert_close(x.grad, t.grad.numpy(), task="branched, strided", kind="grad")


@settings(max_examples=30, deadline=None)
@given(x=strided_arrays(), seed=st.integers(0, 2**16))
def test_layout_invariance(x, seed):
    """Transposed and sliced inputs give the same gradients as contiguous copies."""
    def build(t):
        y = (t * t).tanh() * t.exp()
        return (y * y).sum(axis=0) if t.ndim else y * y

    grads = []
    for a in (x, np.array(x, order="C")):  # ascontiguousarray would turn 0-d into (1,)
        t = Tensor(a, requires_grad=True)
        out = build(t)
        out.backward(checks.randn(seed, *out.shape))
        grads.append(t.grad)
    # Same arithmetic on the same values in another memory order: at most the order of the
    # axis-0 sums changes, a few ulps of float64 (~1e-15), far below 1e-12.
    checks.assert_close(grads[0], grads[1], task="layout", rtol=1e-12, atol=1e-12, kind="grad")


def test_matmul_layout_invariance():
    a, b = rand(0, 4, 3), rand(1, 2, 4)
    got = []
    for x, w in [(a, b), (np.asfortranarray(a), np.ascontiguousarray(b.T).T[:, :]), (checks.strided(a), checks.strided(b))]:
        tx, tw = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
        ((tx.T @ tw.T) * (tx.T @ tw.T)).sum().backward()
        got.append((tx.grad, tw.grad))
    for other in got[1:]:
        for g, h in zip(got[0], other):
            # BLAS may order a dot product's partial sums differently per layout: a few ulps.
            checks.assert_close(h, g, task="matmul layout", rtol=1e-12, atol=1e-12, kind="grad")


# --- the engine --------------------------------------------------------------------------------
def test_topological_order_lists_every_node_once_after_its_inputs():
    x = Tensor(rand(0, 3), requires_grad=True)
    y = x * x
    root = (y + y.exp() * x).sum()
    order = ad.topological_order(root)
    assert len(order) == len({id(n) for n in order})
    position = {id(n): i for i, n in enumerate(order)}
    for node in order:
        for parent in node.inputs:
            assert position[id(parent)] < position[id(node)]
    assert order[-1] is root
    assert {id(x), id(y)} <= set(position)


def test_chain_of_10000_ops_backward_without_recursion_error():
    x = Tensor(rand(0, 3), requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y + x
    y.sum().backward()
    # d/dx of 10,001 copies of x added up: every entry is 10001, exact in float64.
    assert np.array_equal(x.grad, np.full(3, 10_001.0))


def test_scalar_root_is_seeded_with_ones_and_non_scalar_root_raises_like_torch():
    x = Tensor(rand(0, 2, 3), requires_grad=True)
    (x * x).sum().backward()
    assert np.array_equal(x.grad, 2 * x.data)  # exact: one multiplication by 2
    tx = torch.tensor(rand(0, 2, 3), requires_grad=True)
    with pytest.raises(RuntimeError) as torch_error:
        (tx * tx).backward()
    with pytest.raises(RuntimeError) as ours:
        (x * x).backward()
    assert str(ours.value) == str(torch_error.value)


def test_backward_from_a_root_without_grad_raises_like_torch():
    with pytest.raises(RuntimeError) as torch_error:
        torch.ones(3).sum().backward()
    with pytest.raises(RuntimeError) as ours:
        Tensor(np.ones(3)).sum().backward()
    assert str(ours.value) == str(torch_error.value)


def test_backward_rejects_a_grad_of_the_wrong_shape():
    x = Tensor(rand(0, 3), requires_grad=True)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * x).backward(np.ones(2))


def test_grads_accumulate_across_backward_calls_like_torch():
    a = rand(0, 3, 2)
    x = Tensor(a, requires_grad=True)
    loss = (x * x.tanh()).sum()
    loss.backward()
    loss.backward()
    tx = torch.tensor(a, requires_grad=True)
    t_loss = (tx * tx.tanh()).sum()
    t_loss.backward(retain_graph=True)
    t_loss.backward()
    checks.assert_close(x.grad, tx.grad.numpy(), task="accumulate", kind="grad")


def test_only_leaves_that_require_grad_get_a_grad():
    x, c = Tensor(rand(0, 3), requires_grad=True), Tensor(rand(1, 3))
    h = x * c
    (h * h).sum().backward()
    assert h.grad is None and c.grad is None
    assert h.requires_grad and not h.is_leaf
    assert x.grad is not None and x.grad.shape == x.shape


def test_no_graph_without_grad_and_inside_no_grad():
    x = Tensor(rand(0, 3), requires_grad=True)
    assert (Tensor(rand(1, 3)) * 2).fn is None
    with ad.no_grad():
        y = x * x
    assert y.fn is None and y.ctx is None and not y.requires_grad
    assert ad.is_grad_enabled()


def test_backward_returning_a_wrong_shape_is_reported():
    """A planted broadcasting bug (no unbroadcast) is caught with both shapes in the message."""
    class BadAdd(ad.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, grad):
            return grad, grad

    x, b = Tensor(rand(0, 3, 4), requires_grad=True), Tensor(rand(1, 4), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"BadAdd.backward returned an invalid gradient at index 1 - got \[3, 4\] but expected shape \[4\]"):
        BadAdd.apply(x, b).sum().backward()


def test_backward_returning_too_few_gradients_is_reported():
    class OneGrad(ad.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * 1.0

        @staticmethod
        def backward(ctx, grad):
            return grad

    with pytest.raises(RuntimeError, match="expected 2, got 1"):
        OneGrad.apply(Tensor(rand(0, 2), requires_grad=True), rand(1, 2)).sum().backward()


# --- the Tensor API ----------------------------------------------------------------------------
REFLECTED = {
    "2 + x": lambda x: 2 + x, "x + 2.5": lambda x: x + 2.5, "1 - x": lambda x: 1 - x, "x - 3": lambda x: x - 3,
    "3 * x": lambda x: 3 * x, "x * 0.5": lambda x: x * 0.5, "2 / x": lambda x: 2 / x, "x / 4": lambda x: x / 4,
    "-x": lambda x: -x,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(REFLECTED))
def test_python_scalars_on_either_side_match_torch(name, dtype):
    a = rand(0, 2, 3, positive=True).astype(dtype)
    x, tx = Tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    out, t_out = REFLECTED[name](x * x), REFLECTED[name](tx * tx)
    out.sum().backward()
    t_out.sum().backward()
    checks.assert_close(out.data, t_out.detach().numpy(), task=name)  # also checks the dtype is kept
    checks.assert_close(x.grad, tx.grad.numpy(), task=name, kind="grad")


def test_arrays_on_either_side_give_tensors():
    a, x = rand(0, 3, 4), Tensor(rand(1, 3, 4), requires_grad=True)
    for out in (a + x, a - x, a * x, a / x, x + a, a.T @ x):
        assert isinstance(out, Tensor) and out.requires_grad


def test_tensor_methods_match_torch():
    a = rand(0, 2, 3, positive=True)
    x, tx = Tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    ours = [x.sum(axis=1), x.mean(axis=0, keepdims=True), x.exp(), x.log(), x.tanh(), x.relu(),
            x.reshape(3, 2), x.reshape((6,)), x.transpose(0, 1), x.T, x[1], x[:, ::2]]
    theirs = [tx.sum(dim=1), tx.mean(dim=0, keepdim=True), tx.exp(), tx.log(), tx.tanh(), tx.relu(),
              tx.reshape(3, 2), tx.reshape((6,)), tx.transpose(0, 1), tx.T, tx[1], tx[:, ::2]]
    for i, (o, t) in enumerate(zip(ours, theirs)):
        g = checks.randn(i, *o.shape)  # a random upstream gradient for each output
        (o * o).backward(g)
        (t * t).backward(torch.from_numpy(g))

        checks.assert_close(o.data, t.detach().numpy(), task=f"method {i}")
    checks.assert_close(x.grad, tx.grad.numpy(), task="methods", kind="grad")
    assert (x.shape, x.ndim, x.dtype) == ((2, 3), 2, np.float64)


def test_T_is_for_matrices():
    with pytest.raises(ValueError, match="transpose"):
        Tensor(rand(0, 2, 3, 4)).T


def test_detach_numpy_and_item_follow_torch():
    x = Tensor(rand(0, 3), requires_grad=True)
    with pytest.raises(RuntimeError) as torch_error:
        torch.ones(3, requires_grad=True).numpy()
    with pytest.raises(RuntimeError) as ours:
        x.numpy()
    assert str(ours.value) == str(torch_error.value)
    d = x.detach()
    assert not d.requires_grad and d.numpy() is x.data  # the same memory, no copy
    assert Tensor(np.array([2.5])).item() == 2.5


def test_only_floating_tensors_can_require_grad():
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match="floating point"):
        Tensor(np.array([1, 2]), requires_grad=True)


def test_numpy_ufuncs_refuse_tensors_instead_of_leaving_the_graph():
    with pytest.raises(TypeError):
        np.exp(Tensor(rand(0, 3), requires_grad=True))


def test_numpy_conversion_copies_when_asked_like_torch():
    t = Tensor(rand(0, 3))
    assert np.shares_memory(np.asarray(t), t.data)  # no copy needed
    assert not np.shares_memory(np.array(t), t.data)  # np.array copies by default

"""engine_ref.nn (units 1.7 and 1.8): Module, Linear, MLP and SGD against torch.nn and torch.optim.

Value comparisons use the checks' default float64 tolerance (rtol 1e-7, atol 1e-9, justified in
``autograder/inside/checks.py``) unless a line says otherwise: both sides run the same float64 layers.
"""
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from autograder.inside import checks
from engine_ref import nn
from engine_ref.autodiff import CrossEntropy, Tensor

pytestmark = pytest.mark.filterwarnings("error")

OURS = SimpleNamespace(Module=nn.Module, Linear=nn.Linear, ReLU=nn.ReLU, Sequential=nn.Sequential,
                       Parameter=nn.Parameter, array=np.asarray)
TORCH = SimpleNamespace(Module=torch.nn.Module, Linear=lambda *a, **k: torch.nn.Linear(*a, **k).double(),
                        ReLU=torch.nn.ReLU, Sequential=torch.nn.Sequential,
                        Parameter=lambda a: torch.nn.Parameter(torch.tensor(a)), array=torch.tensor)


def torch_sequential(sizes):
    layers = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        layers += [torch.nn.Linear(n_in, n_out), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1]).double()


def numpy_state(module):
    return {k: v.detach().numpy() for k, v in module.state_dict().items()}


def make_net(lib):
    """One module tree, built with either library: nested modules, a tied weight, a module
    registered twice, a parameter registered after submodules, and both kinds of buffer."""
    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.scale = lib.Parameter(np.ones(4))
            self.body = lib.Sequential(lib.Linear(3, 4), lib.ReLU(), lib.Linear(4, 4))
            self.head = lib.Linear(4, 4, bias=False)
            self.head.weight = self.body[2].weight  # tied
            self.again = self.body  # the same module under two names
            self.register_buffer("running", lib.array(np.zeros(4)))
            self.register_buffer("scratch", lib.array(np.zeros(2)), persistent=False)
            self.offset = lib.Parameter(np.zeros(4))

        def forward(self, x):
            return self.head(self.body(x) * self.scale + self.offset)

    return Net()


# --- registration and traversal ----------------------------------------------------------------
def test_traversals_match_torch_including_tied_and_shared():
    ours, theirs = make_net(OURS), make_net(TORCH)
    names = lambda pairs: [name for name, _ in pairs]
    assert names(ours.named_parameters()) == names(theirs.named_parameters())  # the tied weight once
    assert len(list(ours.parameters())) == len(list(theirs.parameters()))
    assert names(ours.named_buffers()) == names(theirs.named_buffers())
    assert len(list(ours.buffers())) == len(list(theirs.buffers()))
    assert names(ours.named_modules()) == names(theirs.named_modules())  # the shared module once
    assert names(ours.named_children()) == names(theirs.named_children())
    assert len(list(ours.children())) == len(list(theirs.children()))
    assert len(list(ours.modules())) == len(list(theirs.modules()))
    assert list(ours.state_dict()) == list(theirs.state_dict())  # torch lists every name here


def test_tied_weight_is_one_parameter():
    net = make_net(OURS)
    assert net.head.weight is net.body[2].weight
    assert net.state_dict()["head.weight"] is net.state_dict()["body.2.weight"]


def test_state_dict_values_alias_the_parameters_like_torch():
    ours, theirs = nn.Linear(3, 2, rng=0), torch.nn.Linear(3, 2)
    assert ours.state_dict()["weight"] is ours.weight.data
    assert theirs.state_dict()["weight"].data_ptr() == theirs.weight.data_ptr()


def test_reassigning_and_deleting_attributes_like_torch():
    for lib in (OURS, TORCH):
        m = lib.Linear(2, 3)
        with pytest.raises(TypeError):
            m.weight = lib.array(np.zeros((3, 2)))  # a plain tensor cannot replace a parameter
        m.bias = None
        assert m.bias is None and "bias" not in m.state_dict()
        m.extra = lib.Linear(3, 1)
        with pytest.raises(TypeError):
            m.extra = 5  # only a Module or None can replace a submodule
        m.extra = None
        assert [name for name, _ in m.named_children()] == []
        del m.weight
        assert "weight" not in m.state_dict()


def test_registration_errors_like_torch():
    for lib in (OURS, TORCH):
        class Early(lib.Module):
            def __init__(self):
                self.w = lib.Parameter(np.ones(2))  # before Module.__init__

        with pytest.raises(AttributeError):
            Early()
        m = lib.Linear(2, 2)
        with pytest.raises(KeyError):
            m.register_buffer("a.b", lib.array(np.zeros(1)))
        with pytest.raises(KeyError):
            m.register_buffer("weight", lib.array(np.zeros(1)))
        with pytest.raises(AttributeError):
            m.nothing_here


# --- Linear and MLP ----------------------------------------------------------------------------
@pytest.mark.parametrize("sizes", [[2, 3], [4, 5, 3], [3, 8, 8, 2]])
def test_mlp_state_dict_keys_and_shapes_equal_torch_sequential(sizes):
    ours, theirs = nn.MLP(sizes, rng=0).state_dict(), torch_sequential(sizes).state_dict()
    assert [(k, v.shape) for k, v in ours.items()] == [(k, tuple(v.shape)) for k, v in theirs.items()]
    assert repr(nn.MLP(sizes)).replace("MLP", "Sequential", 1) == repr(torch_sequential(sizes))


@pytest.mark.parametrize("bias", [True, False])
def test_linear_state_dict_and_repr_equal_torch(bias):
    ours, theirs = nn.Linear(3, 5, bias=bias, rng=0), torch.nn.Linear(3, 5, bias=bias)
    assert [(k, v.shape) for k, v in ours.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("x_shape", [(7, 4), (2, 3, 4), (4,), (1, 4)])
def test_mlp_with_torch_weights_reproduces_torch_outputs(x_shape):
    theirs = torch_sequential([4, 6, 5, 3])
    ours = nn.MLP([4, 6, 5, 3], rng=1)
    ours.load_state_dict(numpy_state(theirs))
    x = checks.randn(0, *x_shape)
    checks.assert_close(ours(Tensor(x)).data, theirs(torch.from_numpy(x)).detach().numpy(), task="MLP")


def test_linear_init_is_torchs_uniform_and_seeded():
    n_in, n_out = 400, 300
    bound = 1 / np.sqrt(n_in)  # torch's kaiming_uniform_(a=sqrt(5)) bound, and the bias bound
    layer = nn.Linear(n_in, n_out, rng=0)
    w, b = layer.weight.data, layer.bias.data
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.99 * bound  # 120,000 uniform draws reach the edge
    # U(-c, c) has variance c^2 / 3; over 120,000 draws the sample variance has a relative
    # standard error of about 0.3%, so 2% is a loose bound that still rejects a wrong c.
    assert abs(w.var() / (bound**2 / 3) - 1) < 0.02
    t = torch.nn.Linear(n_in, n_out).weight.detach().numpy()
    assert np.abs(t).max() <= bound  # torch's init lives on the same interval
    assert np.array_equal(nn.Linear(n_in, n_out, rng=0).weight.data, w)  # exact: same seed, same draws
    assert not np.array_equal(nn.Linear(n_in, n_out, rng=1).weight.data, w)
    assert nn.Linear(3, 2, dtype=np.float32).weight.dtype == np.float32


# --- load_state_dict ---------------------------------------------------------------------------
def test_load_state_dict_copies_in_place():
    ours = nn.MLP([3, 4, 2], rng=0)
    before = ours.state_dict()

    params = list(ours.parameters())
    source = numpy_state(torch_sequential([3, 4, 2]))
    assert ours.load_state_dict(source) == ([], [])
    for key, array in ours.state_dict().items():
        assert array is before[key]  # the same arrays, overwritten
        assert np.array_equal(array, source[key])  # exact: a copy
        assert not np.shares_memory(array, source[key])
    assert [p._version for p in params] == [1] * len(params)  # an in-place edit, counted


def torch_message(error):
    """torch's message with shapes printed as ours are, e.g. torch.Size([3]) -> (3,)."""
    return re.sub(r"torch\.Size\(\[([^\]]*)\]\)", lambda m: str(tuple(int(d) for d in m.group(1).split(", ") if d)),
                  str(error))


SCENARIOS = {  # change a state dict in ways load_state_dict must report
    "missing": lambda sd: {k: v for k, v in sd.items() if k != "2.bias"},
    "unexpected": lambda sd: {**sd, "9.weight": np.zeros(1), "extra": np.zeros(2)},
    "both": lambda sd: {**{k: v for k, v in sd.items() if not k.startswith("0.")}, "1.weight": np.zeros(1)},
    "shape mismatch": lambda sd: {**sd, "0.weight": np.zeros((2, 2)), "2.bias": np.zeros(1)},
    "everything": lambda sd: {"0.weight": np.zeros((1, 3)), "foo": np.zeros(3)},
}


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_load_state_dict_reports_like_torch(name, strict):
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).double()
    ours = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    sd = SCENARIOS[name](numpy_state(theirs))
    try:
        expected = theirs.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()}, strict=strict)
    except RuntimeError as error:
        with pytest.raises(RuntimeError) as ours_error:
            ours.load_state_dict(sd, strict=strict)
        assert str(ours_error.value) == torch_message(error)
    else:
        got = ours.load_state_dict(sd, strict=strict)
        assert (got.missing_keys, got.unexpected_keys) == (expected.missing_keys, expected.unexpected_keys)
    loaded = numpy_state(theirs)
    for key, value in ours.state_dict().items():
        if key in sd and sd[key].shape == value.shape:  # a valid entry: torch loaded it, so must we
            # Exact: copies of the same numbers.
            assert np.array_equal(value, sd[key]) and np.array_equal(loaded[key], sd[key])



def test_load_state_dict_accepts_tensors_and_torch_tensors_and_skips_non_persistent_buffers():
    m = nn.Linear(2, 2, rng=0)
    m.register_buffer("count", np.zeros(1))
    m.register_buffer("cache", np.zeros(3), persistent=False)
    sd = {"weight": torch.ones(2, 2, dtype=torch.float64), "bias": Tensor(np.full(2, 3.0)), "count": np.ones(1)}
    m.load_state_dict(sd)
    assert np.array_equal(m.weight.data, np.ones((2, 2))) and np.array_equal(m.bias.data, np.full(2, 3.0))
    assert np.array_equal(m.count.data, np.ones(1))
    assert list(m.state_dict()) == ["weight", "bias", "count"]


# --- modes and gradients -----------------------------------------------------------------------
def test_train_eval_and_zero_grad_like_torch():
    ours, theirs = make_net(OURS), make_net(TORCH)
    for method in ("eval", "train"):
        assert getattr(ours, method)() is ours
        getattr(theirs, method)()
        assert [m.training for m in ours.modules()] == [m.training for m in theirs.modules()]
    x = checks.randn(0, 5, 3)
    ours.load_state_dict(numpy_state(theirs))
    ours(Tensor(x)).sum().backward()
    theirs(torch.from_numpy(x)).sum().backward()
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        checks.assert_close(p.grad, q.grad.numpy(), task=name, kind="grad")  # the tied weight sums both uses
    ours.zero_grad()
    theirs.zero_grad()
    assert all(p.grad is None for p in ours.parameters()) and all(q.grad is None for q in theirs.parameters())


def test_parameter_is_a_tensor_that_requires_grad():
    p = nn.Parameter(np.zeros(2))
    assert isinstance(p, Tensor) and p.requires_grad and p.is_leaf
    assert repr(p).startswith("Parameter containing:")
    assert not nn.Parameter(np.zeros(2), requires_grad=False).requires_grad


def test_sequential_indexing():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[1], nn.ReLU) and seq[-1] is list(seq)[2]


# --- SGD ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("momentum, weight_decay", [(0.0, 0.0), (0.9, 0.0), (0.0, 0.01), (0.9, 0.01)])
def test_sgd_matches_torch_step_by_step(momentum, weight_decay):
    sizes = [4, 8, 3]
    theirs = torch_sequential(sizes)
    ours = nn.MLP(sizes, rng=0)
    ours.load_state_dict(numpy_state(theirs))
    opt = nn.SGD(ours.parameters(), lr=0.1, momentum=momentum, weight_decay=weight_decay)
    t_opt = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=momentum, weight_decay=weight_decay)
    x, y = checks.randn(1, 16, 4), np.random.default_rng(2).integers(0, 3, 16)
    for step in range(5):
        opt.zero_grad()
        CrossEntropy.apply(ours(Tensor(x)), y).backward()
        opt.step()
        t_opt.zero_grad()
        torch.nn.functional.cross_entropy(theirs(torch.from_numpy(x)), torch.from_numpy(y)).backward()
        t_opt.step()
        # torch's update may use a fused multiply-add, ours rounds twice: a few ulps per step,
        # far inside the default float64 tolerance.
        for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
            checks.assert_close(p.data, q.detach().numpy(), task=f"SGD step {step}", name=name)


def test_sgd_skips_parameters_without_grad_and_zero_grad_sets_none():
    a, b = nn.Parameter(np.ones(2)), nn.Parameter(np.ones(2))
    opt = nn.SGD([a, b], lr=0.5, momentum=0.9)
    (a * a).sum().backward()
    opt.step()
    assert np.array_equal(a.data, np.zeros(2))  # exact: 1 - 0.5 * 2
    assert np.array_equal(b.data, np.ones(2)) and b._version == 0
    opt.zero_grad()
    assert a.grad is None


def test_sgd_rejects_negative_hyperparameters_like_torch():
    for kwargs in (dict(lr=-1.0), dict(lr=0.1, momentum=-0.5), dict(lr=0.1, weight_decay=-1.0)):
        with pytest.raises(ValueError):
            torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], **kwargs)
        with pytest.raises(ValueError):
            nn.SGD([nn.Parameter(np.ones(1))], **kwargs)

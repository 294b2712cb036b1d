"""The PyTorch side of every check, frozen when this module is imported.

Each oracle takes torch tensors (and plain options) in the argument order of the exercise it
judges and returns a tensor, or a tuple of tensors. The torch callables are looked up once,
here, and kept in this module's own names: a notebook that later rebinds ``torch.softmax`` or
``F.cross_entropy`` cannot change what the checks compare against.

Options follow the NumPy spelling the exercises use (``axis``, ``keepdims``); the oracles
translate them into torch's (``dim``, ``keepdim``).
"""
import builtins

import torch
import torch.nn.functional as F

# As in autograder.checks: the functions below look builtins (sum, zip, len...) up in a private
# copy, taken before any notebook code ran, so `builtins.sum = ...` in a notebook cannot reach them.
__builtins__ = dict(vars(builtins))

_as_tensor = torch.as_tensor
_logsumexp = torch.logsumexp
_softmax = torch.softmax
_log_softmax = torch.log_softmax
_exp = torch.exp
_log = torch.log
_tanh = torch.tanh
_relu = torch.relu
_sigmoid = torch.sigmoid
_matmul = torch.matmul
_zeros = torch.zeros
_linear = F.linear
_silu = F.silu
_gelu = F.gelu
_cross_entropy = F.cross_entropy
_bce_logits = F.binary_cross_entropy_with_logits
_mse = F.mse_loss
_l1 = F.l1_loss
_broadcast_shapes = torch.broadcast_shapes
_grad = torch.autograd.grad
_no_grad = torch.no_grad
_enable_grad = torch.enable_grad
_Linear = torch.nn.Linear
_Sequential = torch.nn.Sequential


def _sum(x, axis=None, keepdims=False):
    if axis is None:
        out = x.sum()
        return out.reshape((1,) * x.ndim) if keepdims else out
    return x.sum(dim=axis, keepdim=keepdims)


def _mean(x, axis=None, keepdims=False):
    if axis is None:
        out = x.mean()
        return out.reshape((1,) * x.ndim) if keepdims else out
    return x.mean(dim=axis, keepdim=keepdims)


def _cross_entropy_backward(logits, target, reduction="mean", ignore_index=-100):
    """d/d(logits) of F.cross_entropy, of the sum of the losses for ``reduction="none"``, by autograd."""
    x = logits.detach().requires_grad_(True)
    with _enable_grad():
        loss = _cross_entropy(x, target, reduction=reduction, ignore_index=ignore_index)
        (g,) = _grad(loss.sum(), [x])
    return g


def _mlp_logits(x, W1, b1, W2, b2, activation="relu"):
    act = {"relu": _relu, "sigmoid": _sigmoid, "silu": _silu, "gelu_tanh": lambda h: _gelu(h, approximate="tanh"),
           "tanh": _tanh}[activation]
    return _linear(act(_linear(x, W1, b1)), W2, b2)


def _vjp(forward, inputs, grad_out):
    """The gradients of ``sum(grad_out * forward(*inputs))`` with respect to every input, by autograd."""
    xs = [t.detach().requires_grad_(True) for t in inputs]
    with _enable_grad():
        grads = _grad(forward(*xs), xs, grad_out)
    return grads[0] if len(grads) == 1 else tuple(grads)


def _linear_backward(x, W, grad_out):
    """(grad_x, grad_W, grad_b) of F.linear(x, W, b) by autograd (b is zero: the gradients do not depend on it)."""
    return _vjp(_linear, (x, W, _zeros(W.shape[0], dtype=W.dtype)), grad_out)


def _collapse_linear_stack(*flat):
    """(W1, b1, W2, b2, ...) applied in that order -> the (W, b) of the composed affine map.

    A bias of None counts as zero.
    """
    W_total, b_total = None, None
    for W, b in zip(flat[0::2], flat[1::2]):
        b = _zeros(W.shape[0], dtype=W.dtype) if b is None else b
        if W_total is None:
            W_total, b_total = W, b
        else:
            W_total, b_total = _matmul(W, W_total), _matmul(W, b_total) + b
    return W_total, b_total


def _mlp_parameter_count(sizes, bias=True):
    """The number of parameters of ``nn.Sequential(nn.Linear(sizes[0], sizes[1], bias), ...)``.

    The layers live on the meta device: shapes only, no memory and no initialisation.
    """
    layers = [_Linear(n_in, n_out, bias=bias, device="meta") for n_in, n_out in zip(sizes[:-1], sizes[1:])]
    return sum(p.numel() for p in _Sequential(*layers).parameters())


ORACLES = {
    # 1.1 affine maps and nonlinearities
    "linear": lambda x, W, b=None: _linear(x, W, b),
    "relu": _relu,
    "sigmoid": _sigmoid,
    "silu": _silu,
    "tanh": _tanh,
    "gelu_tanh": lambda x: _gelu(x, approximate="tanh"),
    "mlp_logits": _mlp_logits,
    "linear_backward": _linear_backward,
    "relu_backward": lambda x, grad_out: _vjp(_relu, (x,), grad_out),
    "sigmoid_backward": lambda x, grad_out: _vjp(_sigmoid, (x,), grad_out),
    "tanh_backward": lambda x, grad_out: _vjp(_tanh, (x,), grad_out),
    "collapse_linear_stack": _collapse_linear_stack,
    "mlp_parameter_count": _mlp_parameter_count,
    # 1.2 losses
    "logsumexp": lambda z, axis=-1, keepdims=False: _logsumexp(z, dim=axis, keepdim=keepdims),
    "softmax": lambda z, axis=-1: _softmax(z, dim=axis),
    "log_softmax": lambda z, axis=-1: _log_softmax(z, dim=axis),
    "cross_entropy": lambda logits, target, reduction="mean", ignore_index=-100: _cross_entropy(
        logits, target, reduction=reduction, ignore_index=ignore_index),
    "binary_cross_entropy_with_logits": lambda z, y, reduction="mean": _bce_logits(z, y, reduction=reduction),
    "mse_loss": lambda pred, target, reduction="mean": _mse(pred, target, reduction=reduction),
    "l1_loss": lambda pred, target, reduction="mean": _l1(pred, target, reduction=reduction),
    "cross_entropy_backward": _cross_entropy_backward,
    # 1.3 / 1.4 engine ops
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "neg": lambda a: -a,
    "matmul": _matmul,
    "exp": _exp,
    "log": _log,
    "sum": _sum,
    "mean": _mean,
    "reshape": lambda x, shape: x.reshape(shape),
    "transpose": lambda x, dim0, dim1: x.transpose(dim0, dim1),
}


def oracle(name_or_fn):
    """Return the torch callable for an oracle name; a callable is returned unchanged."""
    if callable(name_or_fn):
        return name_or_fn
    try:
        return ORACLES[name_or_fn]
    except KeyError:
        raise KeyError(f"no torch oracle named {name_or_fn!r}; known: {sorted(ORACLES)}") from None


# --- unit 1.7 ---
# Module fixtures are written once, against a namespace ``nn`` (``Module``, ``Parameter``, ``Linear``,
# ``ReLU``, ``buffer``), and built twice: on the student's classes in the test cell and on torch's here.
import re as _re
import types as _types

import numpy as _np

_nn = torch.nn
_Parameter = torch.nn.Parameter
_ReLU = torch.nn.ReLU
from torch.optim.sgd import sgd as _sgd  # noqa: E402  (SGD.step's update; see _sgd_steps)
_manual_seed = torch.manual_seed
_torch_float64 = torch.float64
_size_text = _re.compile(r"torch\.Size\(\[([0-9, ]*)\]\)")

TORCH_NN = _types.SimpleNamespace(
    Module=_nn.Module,
    Parameter=lambda a: _Parameter(_as_tensor(_np.array(a))),
    Linear=lambda n_in, n_out, bias=True: _Linear(n_in, n_out, bias=bias, dtype=_torch_float64),
    ReLU=_ReLU,
    buffer=lambda a: _as_tensor(_np.array(a)),
    tensor=lambda a: _as_tensor(_np.array(a)),
)


def _numpy_shape(match):
    """``torch.Size([3, 4])`` as NumPy spells the shape: ``(3, 4)``; ``torch.Size([3])`` as ``(3,)``."""
    sizes = [s for s in match.group(1).replace(" ", "").split(",") if s]
    return "(" + ", ".join(sizes) + ("," if len(sizes) == 1 else "") + ")"


def _module_layout(build):
    """``build(nn)`` on torch: the (key, shape) lists of named_parameters, named_buffers and
    state_dict, and the class name of each module, in torch's order."""
    model = build(TORCH_NN)
    shapes = lambda items: [(k, tuple(v.shape)) for k, v in items]
    return {
        "named_parameters": shapes(model.named_parameters()),
        "named_buffers": shapes(model.named_buffers()),
        "state_dict": shapes(model.state_dict().items()),
    }


def _load_report(build, state, strict=True):
    """``build(nn).load_state_dict(state, strict)`` on torch, with ``state`` a dict of NumPy arrays:
    ``("raised", message)`` with shapes in NumPy's spelling, or ``("returned", missing, unexpected)``."""
    model = build(TORCH_NN)
    try:
        result = model.load_state_dict({k: _as_tensor(_np.array(v)) for k, v in state.items()}, strict=strict)
    except RuntimeError as exc:
        return ("raised", _size_text.sub(_numpy_shape, str(exc)))
    return ("returned", list(result.missing_keys), list(result.unexpected_keys))


def _mlp_reference(sizes, x, seed):
    """A torch ``nn.Sequential(Linear, ReLU, ..., Linear)`` in float64, seeded: its state_dict as
    NumPy arrays (copies) and its output on ``x``."""
    _manual_seed(seed)
    layers = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        layers += [_Linear(n_in, n_out, dtype=_torch_float64), _ReLU()]
    model = _Sequential(*layers[:-1])
    with _no_grad():
        out = model(_as_tensor(_np.array(x)))
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}, out.numpy()


def _sgd_steps(params, grads, lr, momentum=0.0, weight_decay=0.0):
    """``torch.optim.SGD`` on copies of ``params`` (arrays); ``grads[step][i]`` is parameter i's
    gradient at that step (None: no gradient). After every step: the parameters, as arrays, and
    their version counters.

    Each step calls ``torch.optim.sgd.sgd``, the update that ``SGD.step`` applies to the
    parameters that have a gradient, without building the optimizer object, whose constructor
    imports torch._dynamo (3 s, more than a test cell may take)."""
    ps = [_as_tensor(_np.array(p)) for p in params]
    buffers = [None] * len(ps)
    out = []
    for step in grads:
        live = [i for i, g in enumerate(step) if g is not None]
        bufs = [buffers[i] for i in live]
        with _no_grad():
            _sgd([ps[i] for i in live], [_as_tensor(_np.array(step[i])) for i in live], bufs, foreach=False,
                 weight_decay=weight_decay, momentum=momentum, lr=lr, dampening=0.0, nesterov=False, maximize=False)
        for i, b in zip(live, bufs):
            buffers[i] = b
        out.append(([p.numpy().copy() for p in ps], [p._version for p in ps]))
    return out


ORACLES.update({
    "w_x_x": lambda x, w: w * x * x,
    "w_sum_times_x": lambda x, w: w.sum() * x,
    "module_layout": _module_layout,
    "load_report": _load_report,
    "mlp_reference": _mlp_reference,
    "sgd_steps": _sgd_steps,
})

TORCH_TENSORS = _types.SimpleNamespace(
    tensor=lambda a, requires_grad=False: torch.tensor(_np.array(a), requires_grad=requires_grad),
    no_grad=_no_grad,
    numpy=lambda t: t.detach().numpy(),
)
ORACLES["version_trace"] = lambda scenario, data: scenario(TORCH_TENSORS, data)  # in-place ops, run by torch

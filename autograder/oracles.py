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
_ones_like = torch.ones_like
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


def _cross_entropy_backward(logits, target, reduction="mean", ignore_index=-100, grad=None):
    """d/d(logits) of F.cross_entropy times the upstream ``grad`` (of the loss's shape; None: ones), by autograd."""
    x = logits.detach().requires_grad_(True)
    with _enable_grad():
        loss = _cross_entropy(x, target, reduction=reduction, ignore_index=ignore_index)
        (g,) = _grad(loss, [x], _ones_like(loss) if grad is None else _as_tensor(grad, dtype=loss.dtype))
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

# --- unit 1.2 ---
ORACLES["softmax_backward"] = lambda z, grad_out, axis=-1: _vjp(lambda t: _softmax(t, dim=axis), (z,), grad_out)
ORACLES["silu_backward"] = lambda x, grad_out: _vjp(_silu, (x,), grad_out)
ORACLES["gelu_tanh_backward"] = lambda x, grad_out: _vjp(lambda t: _gelu(t, approximate="tanh"), (x,), grad_out)

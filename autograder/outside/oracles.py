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

# As in autograder.inside.checks: the functions below look builtins (sum, zip, len...) up in a private
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
        return out.reshape([1] * x.ndim) if keepdims else out
    return x.sum(dim=axis, keepdim=keepdims)


def _mean(x, axis=None, keepdims=False):
    if axis is None:
        out = x.mean()
        return out.reshape([1] * x.ndim) if keepdims else out
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
    "sum_backward": lambda x, grad_out, axis=None, keepdims=False: _vjp(lambda t: _sum(t, axis, keepdims), (x,), grad_out),
    "mean_backward": lambda x, grad_out, axis=None, keepdims=False: _vjp(lambda t: _mean(t, axis, keepdims), (x,),
                                                                          grad_out),
    "reshape": lambda x, shape: x.reshape(shape),
    "transpose": lambda x, dim0, dim1: x.transpose(dim0, dim1),
    # --- unit 1.5 --- test functions whose gradients the finite differences are checked against
    "gc_scalar": lambda x: (x * x * x).sum() / 3 + (_tanh(x) * x).sum(),
    "gc_tanh_matmul": lambda x, W: _tanh(_matmul(x, W)),
    # the worst elementwise relative error, and where a central-difference stencil crosses ReLU's kink
    "gc_relative_error": lambda a, b: ((a.double() - b.double()).abs()
                                       / (a.double().abs() + b.double().abs()).clamp(min=1e-12)).max(),
    "gc_kink_mask": lambda x, eps: (x.double() - eps < 0) & (x.double() + eps > 0),
}


def oracle(name_or_fn):
    """Return the torch callable for an oracle name; a callable is returned unchanged."""
    if callable(name_or_fn):
        return name_or_fn
    try:
        return ORACLES[name_or_fn]
    except KeyError:
        raise KeyError(f"no torch oracle named {name_or_fn!r}; known: {sorted(ORACLES)}") from None


# --- unit 1.4 ---
_int64 = torch.int64


def _branched_loss(x, W, b):
    """The graph of unit 1.4: x reaches the loss through the affine map, a broadcast row sum and x * x."""
    z = _tanh(_matmul(x, W) + b)
    s = x.sum(dim=1, keepdim=True)  # (N, 1), broadcast across the M columns of z
    return (z * s).mean() + 0.1 * (x * x).sum()


ORACLES.update({
    "broadcast_shape": lambda *shapes: _as_tensor(list(_broadcast_shapes(*shapes)), dtype=_int64),
    "unbroadcast": lambda grad, shape: grad.sum_to_size(shape),
    "branched_loss": _branched_loss,
})


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
    for n_in, n_out in zip(sizes, sizes[1:]):
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
# --- unit 1.6 ---------------------------------------------------------------------------------
# Layout oracles: each takes the exercise's plain arguments (tuples of ints, and for
# read_through_layout a NumPy storage) and returns what torch reports, as Python ints and
# tuples: (shape, strides, offset) for the view-making functions. Torch has no negative
# strides, so a layout with one is answered by NumPy instead (same rules, strides in bytes
# divided by the item size): these oracles say which library answered in ``layout_judge``.
import numpy as _np  # noqa: E402  (the NumPy side of the layout oracles)

_arange = torch.arange
_as_strided = torch.as_strided
_empty_strided = torch.empty_strided
_empty = torch.empty
_int64 = torch.int64
_np_arange = _np.arange
_np_as_strided = _np.lib.stride_tricks.as_strided
_np_asarray = _np.asarray
_np_transpose = _np.transpose
_np_swapaxes = _np.swapaxes


def layout_judge(strides):
    """Which library answers for a layout: "torch", or "numpy" where a stride is negative."""
    return "numpy" if any(s < 0 for s in strides) else "torch"


def _extent(shape, strides, offset):
    """(lowest, highest) storage position a layout reads (offset alone for an empty layout)."""
    low = high = offset
    if 0 in shape:
        return low, high
    for n, s in zip(shape, strides):
        if s > 0:
            high += (n - 1) * s
        else:
            low += (n - 1) * s
    return low, high


def _torch_layout(shape, strides, offset=0):
    """A torch tensor with exactly this layout over a storage holding 0, 1, 2, ... (int64)."""
    _, high = _extent(shape, strides, offset)
    return _as_strided(_arange(high + 1, dtype=_int64), tuple(shape), tuple(strides), offset)


def _numpy_layout(shape, strides, offset=0):
    """A NumPy view with this layout (strides may be negative) and its base, over 0, 1, 2, ..."""
    low, high = _extent(shape, strides, offset)
    base = _np_arange(high - min(low, 0) + 1, dtype=_np.int64)
    start = base[offset - min(low, 0):]
    return _np_as_strided(start, tuple(shape), tuple(s * base.itemsize for s in strides)), base, -min(low, 0)


def _describe(t):
    return tuple(t.shape), tuple(t.stride()), int(t.storage_offset())


def _describe_numpy(view, base, shift):
    size = base.itemsize
    pointer = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return (tuple(int(n) for n in view.shape), tuple(int(s) // size for s in view.strides),
            int(pointer // size - shift))


def _layout_op(shape, strides, offset, torch_op, numpy_op):
    if layout_judge(strides) == "torch":
        return _describe(torch_op(_torch_layout(shape, strides, offset)))
    view, base, shift = _numpy_layout(shape, strides, offset)
    return _describe_numpy(numpy_op(view), base, shift)


def _wrap(dim, ndim):
    return dim % ndim if ndim else 0


def _slice_index(ndim, dim, start, stop, step):
    return (slice(None),) * _wrap(dim, ndim) + (slice(start, stop, step),)


def _numpy_slice(a, dim, start, stop, step):
    """NumPy's slice, where it agrees with torch: torch moves the offset of an empty slice to its
    start, NumPy does not, so an empty slice of a layout with negative strides has no answer."""
    index = _slice_index(a.ndim, dim, start, stop, step)
    out = a[index]
    if out.size == 0:
        raise ValueError("an empty slice of a layout with negative strides: NumPy and torch disagree on its offset")
    return out


def _contiguous_strides(shape):
    return tuple(_empty(tuple(shape), device="meta").stride())


def _element_offset(index, strides, storage_offset=0):
    shape = tuple(i + 1 for i in index)
    if layout_judge(strides) == "torch":
        return int(_torch_layout(shape, strides, storage_offset)[tuple(index)])
    view, base, shift = _numpy_layout(shape, strides, storage_offset)
    return int(view[tuple(index)]) - shift


def _is_contiguous(shape, strides):
    if layout_judge(strides) == "torch":
        return bool(_empty_strided(tuple(shape), tuple(strides), device="meta").is_contiguous())
    return bool(_numpy_layout(shape, strides)[0].flags.c_contiguous)


def _view_strides(shape, strides, new_shape):
    """The strides of ``t.view(new_shape)``, or None where torch refuses the view (it raises
    RuntimeError "view size is not compatible with input tensor's size and stride")."""
    t = _torch_layout(shape, strides)
    try:
        return tuple(t.view(tuple(new_shape)).stride())
    except RuntimeError as exc:
        if "view size is not compatible" in str(exc):
            return None
        raise ValueError(str(exc)) from None


def _read_through_layout(storage, shape, strides, offset):
    storage = _np_asarray(storage)
    if layout_judge(strides) == "torch":
        return _as_strided(_as_tensor(storage), tuple(shape), tuple(strides), offset).clone()
    step = storage.itemsize
    return _as_tensor(_np_as_strided(storage[offset:], tuple(shape), tuple(s * step for s in strides)).copy())


def _chain(t, ops):
    """``t`` after a chain of views: ``ops`` is a list of (name, args) with the layout functions'
    arguments (expand: (new_shape,); slice: (dim, start, stop, step); permute: (dims,);
    transpose: (dim0, dim1))."""
    for name, args in ops:
        if name == "expand":
            t = t.expand(tuple(args[0]))
        elif name == "slice":
            t = t[_slice_index(t.ndim, *args)]
        elif name == "permute":
            t = t.permute(tuple(args[0]))
        elif name == "transpose":
            t = t.transpose(*args)
        else:
            raise ValueError(f"unknown view {name!r}")
    return t


ORACLES.update({
    "contiguous_strides": _contiguous_strides,
    "element_offset": _element_offset,
    "is_contiguous": _is_contiguous,
    "transpose_layout": lambda shape, strides, dim0, dim1, offset=0: _layout_op(
        shape, strides, offset, lambda t: t.transpose(dim0, dim1), lambda a: _np_swapaxes(a, dim0, dim1)),
    "permute_layout": lambda shape, strides, dims, offset=0: _layout_op(
        shape, strides, offset, lambda t: t.permute(tuple(dims)), lambda a: _np_transpose(a, tuple(dims))),
    "slice_layout": lambda shape, strides, offset, dim, start, stop, step: _layout_op(
        shape, strides, offset, lambda t: t[_slice_index(t.ndim, dim, start, stop, step)],
        lambda a: _numpy_slice(a, dim, start, stop, step)),
    # expand has torch's rules only: NumPy's broadcast_to zeroes the stride of a size-1 axis that
    # stays size 1, where torch keeps it, so there is no NumPy answer for negative strides.
    "expand_layout": lambda shape, strides, new_shape, offset=0: _describe(
        _torch_layout(shape, strides, offset).expand(tuple(new_shape))),
    "view_strides": _view_strides,
    "read_through_layout": _read_through_layout,
    "chain_layout": lambda shape, strides, offset, ops: _describe(_chain(_torch_layout(shape, strides, offset), ops)),
    "chain_values": lambda storage, shape, strides, offset, ops: _chain(
        _as_strided(storage, tuple(shape), tuple(strides), offset), ops).clone(),
    "shares_storage": lambda t1, t2: (t1.untyped_storage().data_ptr() == t2.untyped_storage().data_ptr()
                                      and t1.untyped_storage().data_ptr() != 0),
    # the engine's view ops (forward functions, for autograd)
    "slice": lambda x, dim, start=None, stop=None, step=None: x[_slice_index(x.ndim, dim, start, stop, step)],
    "expand": lambda x, shape: x.expand(tuple(shape)),
})


# --- unit 1.8 ---------------------------------------------------------------------------------
# The torch side of the mini-project: MLP and SGD oracles, and a whole engine that runs on torch
# autograd, against which the grader runs the students' differential tests.
import types as _types  # noqa: E402

import numpy as _np  # noqa: E402
from torch.optim.sgd import sgd as _sgd  # noqa: E402  (what torch.optim.SGD.step runs)

_ReLU = torch.nn.ReLU
_stack = torch.stack
_np_asarray = _np.asarray
_np_array = _np.array
_np_ones = _np.ones
_np_size = _np.size
_np_floating = _np.floating
_np_issubdtype = _np.issubdtype
_np_result_type = _np.result_type
_SimpleNamespace = _types.SimpleNamespace


def _sequential_state_shapes(sizes):
    """[(key, shape)] of the state_dict of nn.Sequential(Linear, ReLU, Linear, ..., Linear) on ``sizes``."""
    layers = []
    for n_in, n_out in zip(sizes, sizes[1:]):
        layers += [_Linear(n_in, n_out, device="meta"), _ReLU()]
    return [(key, tuple(value.shape)) for key, value in _Sequential(*layers[:-1]).state_dict().items()]


def _mlp_stack(x, *weights):
    """Linear layers (W, b pairs, in order) with ReLU between them, none after the last."""
    for k in range(0, len(weights), 2):
        x = _linear(x, weights[k], weights[k + 1])
        if k + 2 < len(weights):
            x = _relu(x)
    return x


def _mlp_cross_entropy_grads(x, target, *weights):
    """The gradients of F.cross_entropy(_mlp_stack(x, *weights), target) for every weight, by autograd."""
    grads = _vjp(lambda *w: _cross_entropy(_mlp_stack(x, *w), target), weights, _as_tensor(1.0, dtype=x.dtype))
    return tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)


def _sgd_trajectory(p0, grads, lr, momentum=0.0, weight_decay=0.0):
    """torch's SGD on one parameter fed ``grads`` one by one: the parameter after each step, stacked."""
    p, buffers, path = p0.detach().clone(), [None], []
    for g in grads:
        _sgd([p], [g.clone()], buffers, lr=lr, momentum=momentum, weight_decay=weight_decay, dampening=0.0,
             nesterov=False, maximize=False)
        path.append(p.clone())
    return _stack(path)


ORACLES.update({
    "sum_to": lambda grad, shape: grad.sum_to_size(shape),
    "sequential_state_shapes": _sequential_state_shapes,
    "mlp_stack": _mlp_stack,
    "mlp_cross_entropy_grads": _mlp_cross_entropy_grads,
    "sgd_trajectory": _sgd_trajectory,
})

# --- unit 1.2 ---
ORACLES["softmax_backward"] = lambda z, grad_out, axis=-1: _vjp(lambda t: _softmax(t, dim=axis), (z,), grad_out)
ORACLES["silu_backward"] = lambda x, grad_out: _vjp(_silu, (x,), grad_out)
ORACLES["gelu_tanh_backward"] = lambda x, grad_out: _vjp(lambda t: _gelu(t, approximate="tanh"), (x,), grad_out)

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
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
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
    return grads if isinstance(grads, tuple) else (grads,)


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

ENGINE_OPS = {  # the op classes of the mini-project's engine namespace, and their torch forward
    "Add": ORACLES["add"], "Sub": ORACLES["sub"], "Mul": ORACLES["mul"], "Div": ORACLES["div"],
    "MatMul": ORACLES["matmul"], "Sum": ORACLES["sum"], "Mean": ORACLES["mean"], "Exp": ORACLES["exp"],
    "Log": ORACLES["log"], "Tanh": ORACLES["tanh"], "ReLU": ORACLES["relu"], "Reshape": ORACLES["reshape"],
    "Transpose": ORACLES["transpose"], "CrossEntropy": ORACLES["cross_entropy"],
}


def engine_backward(root, grad=None, combine=lambda old, new: old + new):
    """Reverse accumulation with torch's rules over a :func:`torch_engine` graph. ``combine`` merges
    two contributions to one node's gradient (the sum)."""
    if not root.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if grad is None:
        if _np_size(root.data) != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        grad = _np_ones(root.data.shape, root.data.dtype)
    grad = _np_array(grad.data if hasattr(grad, "requires_grad") else grad, dtype=root.data.dtype)
    if grad.shape != root.data.shape:
        raise RuntimeError(f"Mismatch in shape: grad has a shape of {grad.shape} and output has a shape of {root.data.shape}.")
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((t, False) for t in node.inputs if id(t) not in seen)
    received = {id(root): grad}
    for node in reversed(order):
        g = received.pop(id(node), None)
        if g is None:
            continue
        if node.fn is None:
            node.grad = g.copy() if node.grad is None else node.grad + g
            continue
        input_grads = node.fn.backward(node.ctx, g)
        input_grads = input_grads if isinstance(input_grads, tuple) else (input_grads,)
        for tensor, tensor_grad in zip(node.inputs, input_grads):
            if tensor.requires_grad and tensor_grad is not None:
                tensor_grad = _np_asarray(tensor_grad)
                if tensor_grad.shape != tensor.data.shape:
                    raise RuntimeError(f"Function {node.fn.__name__}.backward returned a gradient of shape "
                                       f"{tensor_grad.shape} for an input of shape {tensor.data.shape}")
                old = received.get(id(tensor))
                received[id(tensor)] = tensor_grad.copy() if old is None else combine(old, tensor_grad)


def torch_engine(**changes):
    """A fresh engine namespace for the mini-project's differential tests, computed by torch.

    It has ``Tensor``, ``Parameter``, ``SGD`` (torch's SGD update on copies of the parameters),
    ``backward`` (:func:`engine_backward`) and the op classes of ``ENGINE_OPS``, with the
    notebook's interface: ``Op.apply(*tensors, **options)``, ``forward(ctx, *arrays, **options)``
    and ``backward(ctx, grad)`` on NumPy arrays. Each op's forward runs its torch function on
    copies of the arrays, and its backward is ``torch.autograd.grad`` of that output. ``changes``
    replace parts by name; a replacement op class is used by this engine's operators and graph.
    """
    ns = _SimpleNamespace()

    class Tensor:
        __array_ufunc__ = None

        def __init__(self, data, requires_grad=False):
            self.data = _np_asarray(data.data if isinstance(data, Tensor) else data)
            if requires_grad and not _np_issubdtype(self.data.dtype, _np_floating):
                raise RuntimeError(f"only floating point tensors can require gradients, not {self.data.dtype}")
            self.requires_grad, self.grad = bool(requires_grad), None
            self.fn, self.ctx, self.inputs = None, None, ()

        shape = property(lambda self: self.data.shape)
        ndim = property(lambda self: self.data.ndim)
        dtype = property(lambda self: self.data.dtype)
        is_leaf = property(lambda self: self.fn is None)
        T = property(lambda self: ns.Transpose.apply(self, dim0=0, dim1=1))

        def item(self):
            return self.data.item()

        def backward(self, grad=None):
            ns.backward(self, grad)

        def _lift(self, other):
            if isinstance(other, Tensor):
                return other
            if isinstance(other, (int, float)):
                return Tensor(_np_asarray(other, dtype=_np_result_type(self.dtype, other)))
            return Tensor(other)

        __add__ = lambda self, other: ns.Add.apply(self, self._lift(other))
        __radd__ = lambda self, other: ns.Add.apply(self._lift(other), self)
        __sub__ = lambda self, other: ns.Sub.apply(self, self._lift(other))
        __rsub__ = lambda self, other: ns.Sub.apply(self._lift(other), self)
        __mul__ = lambda self, other: ns.Mul.apply(self, self._lift(other))
        __rmul__ = lambda self, other: ns.Mul.apply(self._lift(other), self)
        __truediv__ = lambda self, other: ns.Div.apply(self, self._lift(other))
        __rtruediv__ = lambda self, other: ns.Div.apply(self._lift(other), self)
        __matmul__ = lambda self, other: ns.MatMul.apply(self, self._lift(other))
        __rmatmul__ = lambda self, other: ns.MatMul.apply(self._lift(other), self)
        __neg__ = lambda self: ns.Sub.apply(self._lift(0), self)
        sum = lambda self, axis=None, keepdims=False: ns.Sum.apply(self, axis=axis, keepdims=keepdims)
        mean = lambda self, axis=None, keepdims=False: ns.Mean.apply(self, axis=axis, keepdims=keepdims)
        exp = lambda self: ns.Exp.apply(self)
        log = lambda self: ns.Log.apply(self)
        tanh = lambda self: ns.Tanh.apply(self)
        relu = lambda self: ns.ReLU.apply(self)
        transpose = lambda self, dim0, dim1: ns.Transpose.apply(self, dim0=dim0, dim1=dim1)

        def reshape(self, *shape):
            shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
            return ns.Reshape.apply(self, shape=shape)

    class Parameter(Tensor):
        def __init__(self, data, requires_grad=True):
            super().__init__(data, requires_grad=requires_grad)

    class Function:
        torch_fn = None

        @classmethod
        def apply(cls, *args, **options):
            engine_tensor = cls.engine.Tensor  # the Tensor of the engine this class is installed in
            inputs = tuple(a if isinstance(a, engine_tensor) else engine_tensor(a) for a in args)
            ctx = _SimpleNamespace(needs_grad=any(t.requires_grad for t in inputs))
            out = engine_tensor(cls.forward(ctx, *(t.data for t in inputs), **options))
            if any(t.requires_grad for t in inputs):
                out.requires_grad, out.fn, out.ctx, out.inputs = True, cls, ctx, inputs
            return out

        @classmethod
        def forward(cls, ctx, *arrays, **options):
            ctx.arrays, ctx.options = arrays, options
            ctx.torch_inputs = [_as_tensor(_np_array(a)) for a in arrays]
            if not getattr(ctx, "needs_grad", True):  # a constant: no torch graph either
                with _no_grad():
                    return cls.torch_fn(*ctx.torch_inputs, **options).numpy().copy()
            for t in ctx.torch_inputs:
                if t.is_floating_point():
                    t.requires_grad_(True)
            with _enable_grad():
                ctx.torch_output = cls.torch_fn(*ctx.torch_inputs, **options)
            return ctx.torch_output.detach().numpy().copy()

        @classmethod
        def backward(cls, ctx, grad):
            wrt = [t for t in ctx.torch_inputs if t.requires_grad]
            upstream = _as_tensor(_np_array(grad, dtype=ctx.torch_output.detach().numpy().dtype))
            grads = iter(_grad(ctx.torch_output, wrt, upstream, retain_graph=True, allow_unused=True))
            out = []
            for t in ctx.torch_inputs:
                g = next(grads) if t.requires_grad else None
                out.append(None if not t.requires_grad else _np_array(0.0 * t.detach().numpy()) if g is None
                           else g.numpy().copy())
            return tuple(out)

    class SGD:
        def __init__(self, params, lr, momentum=0.0, weight_decay=0.0):
            self.params = list(params)
            self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
            self.buffers = [None] * len(self.params)

        def step(self):
            for i, p in enumerate(self.params):
                if p.grad is not None:
                    mirror, buffers = _as_tensor(_np_array(p.data)), self.buffers[i:i + 1]
                    _sgd([mirror], [_as_tensor(_np_array(p.grad, dtype=p.data.dtype))], buffers, lr=self.lr,
                         momentum=self.momentum, weight_decay=self.weight_decay, dampening=0.0, nesterov=False,
                         maximize=False)
                    self.buffers[i] = buffers[0]
                    p.data[...] = mirror.numpy()

        def zero_grad(self):
            for p in self.params:
                p.grad = None

    ns.Tensor, ns.Parameter, ns.SGD = Tensor, Parameter, SGD
    ns.backward = engine_backward
    for name, torch_fn in ENGINE_OPS.items():
        setattr(ns, name, type(name, (Function,), {"torch_fn": staticmethod(torch_fn)}))
    for name, part in changes.items():
        setattr(ns, name, part)
    for name in ENGINE_OPS:
        getattr(ns, name).engine = ns
    return ns

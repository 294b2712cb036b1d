"""A whole engine that runs on torch autograd: the reference and the planted-bug engines against
which the unit 1.8 grader runs the students' differential tests (``torch_engine``).

Instructor-only, like the hidden tests that import it: the student repository ships the checks
and what they import (``autograder student-repo``), and this module holds, in torch, every
algorithm the mini-project asks the students to write (reverse accumulation, Module, SGD).
"""
import types

import numpy as np
import torch
from torch.optim.sgd import sgd as _sgd  # what torch.optim.SGD.step runs

from .oracles import ORACLES

_as_tensor = torch.as_tensor
_grad = torch.autograd.grad
_no_grad = torch.no_grad
_enable_grad = torch.enable_grad
_np_asarray = np.asarray
_np_array = np.array
_np_ones = np.ones
_np_size = np.size
_np_floating = np.floating
_np_issubdtype = np.issubdtype
_np_result_type = np.result_type
_SimpleNamespace = types.SimpleNamespace


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


def _fresh(part):
    """``part`` as an object of its own, made for one engine: a subclass of a class, a function
    that calls a function. Every part of every engine is then new to the student's code, which
    sees each as a lent object: a test that kept the engines it was handed could otherwise tell
    a planted part, handed again in that kind's next run, by its identity (red team, stop 38)."""
    if isinstance(part, type):
        return type(part.__name__, (part,), {})
    if callable(part):
        return lambda *args, **kwargs: part(*args, **kwargs)
    return part


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
        # what the student's differential tests may read of a tensor (autograder.outside.verdicts._lent):
        # the notebook's Tensor interface, not how a planted engine saved its values (ctx)
        lends = frozenset({"data", "grad", "requires_grad", "fn", "inputs", "shape", "ndim", "dtype", "is_leaf", "T",
                           "item", "backward", "sum", "mean", "exp", "log", "tanh", "relu", "transpose", "reshape"})
        # what returns a new tensor and changes nothing (autograder.outside.verdicts._makes): making a tensor
        makes = frozenset({"__init__"})

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
        lends = frozenset({"apply"})  # forward and backward are how an op is built, which tells planted ones apart
        makes = frozenset({"apply"})  # a new tensor (its inputs, and their graph, stay as they are)

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
        lends = frozenset({"step", "zero_grad", "params", "lr", "momentum", "weight_decay"})

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
    ns.backward = _fresh(engine_backward)
    for name, torch_fn in ENGINE_OPS.items():
        setattr(ns, name, type(name, (Function,), {"torch_fn": staticmethod(torch_fn)}))
    for name, part in changes.items():
        setattr(ns, name, _fresh(part))
    for name in ENGINE_OPS:
        getattr(ns, name).engine = ns
    return ns

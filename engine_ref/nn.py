"""Modules, parameters and SGD on the engine (units 1.7 and 1.8), after ``torch.nn``.

A ``Module`` owns what is assigned to it: a ``Parameter`` or a sub-``Module`` assigned as an
attribute is registered, in assignment order, and ``register_buffer`` registers a tensor that
is state but not a parameter. The traversals (``parameters``, ``modules``, ``state_dict``...)
walk those registries exactly as torch does, so the keys of ``state_dict`` are torch's, and a
parameter shared by two modules (tied weights) is one parameter, listed once.
"""
from collections import namedtuple

import numpy as np

from . import autodiff
from .autodiff import Tensor, no_grad

__all__ = ["Parameter", "Module", "IncompatibleKeys", "Linear", "ReLU", "Sequential", "MLP", "SGD"]

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class Parameter(Tensor):
    """A tensor that a ``Module`` registers as a parameter; it requires grad by default."""

    def __init__(self, data, requires_grad=True):
        super().__init__(data, requires_grad=requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


def _as_buffer(value):
    return value if value is None or isinstance(value, Tensor) else Tensor(value)


class Module:
    """Base class of the layers and models; subclasses define ``forward``."""

    def __init__(self):
        for name in ("_parameters", "_buffers", "_modules"):
            object.__setattr__(self, name, {})
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "training", True)

    # ---- registration
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign to a Module before Module.__init__() call")
        if isinstance(value, Parameter):
            registry = self._parameters
        elif isinstance(value, Module):
            registry = self._modules
        elif name in self._buffers:
            registry, value = self._buffers, _as_buffer(value)
        elif name in self._parameters or name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as '{name}': a Parameter, a Module or None expected")
            registry = self._parameters if name in self._parameters else self._modules
        else:
            registry = self.__dict__
        for other in (self._parameters, self._buffers, self._modules, self.__dict__):
            if other is not registry:
                other.pop(name, None)
        if registry is not self._buffers:
            self._non_persistent.discard(name)
        if registry is self.__dict__:
            object.__setattr__(self, name, value)
        else:
            registry[name] = value

    def __getattr__(self, name):  # only called when normal lookup fails
        for registry in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(registry, {}):
                return self.__dict__[registry][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for registry in (self._parameters, self._buffers, self._modules):
            if name in registry:
                del registry[name]
                self._non_persistent.discard(name)
                return
        object.__delattr__(self, name)

    def register_buffer(self, name, value, persistent=True):
        """Register ``value`` (a Tensor, an array or None) as state that is not a parameter.

        A persistent buffer goes into ``state_dict``; a non-persistent one does not.
        """
        if not name or "." in name:
            raise KeyError(f"buffer name must be a non-empty string without '.', got {name!r}")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        self._buffers[name] = _as_buffer(value)
        (self._non_persistent.discard if persistent else self._non_persistent.add)(name)

    # ---- traversal
    def named_modules(self, memo=None, prefix=""):
        """``(name, module)`` for this module and every descendant, depth first, each once."""
        memo = set() if memo is None else memo
        if id(self) not in memo:
            memo.add(id(self))
            yield prefix, self
            for name, child in self._modules.items():
                if child is not None:
                    yield from child.named_modules(memo, f"{prefix}.{name}" if prefix else name)

    def modules(self):
        return (module for _, module in self.named_modules())

    def named_children(self):
        seen = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self):
        return (child for _, child in self.named_children())

    def _named_members(self, registry, prefix, recurse):
        seen = set()
        modules = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, registry).items():
                if value is not None and id(value) not in seen:  # a tied weight is listed once
                    seen.add(id(value))
                    yield (f"{module_prefix}.{name}" if module_prefix else name), value

    def named_parameters(self, prefix="", recurse=True):
        return self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse=True):
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix="", recurse=True):
        return self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse=True):
        return (b for _, b in self.named_buffers(recurse=recurse))

    # ---- state
    def _state_tensors(self, prefix=""):
        """The tensors of ``state_dict`` by key. Like torch, this follows every registration, so
        a tied weight appears under each of its names."""
        out = {prefix + name: p for name, p in self._parameters.items() if p is not None}
        out.update((prefix + name, b) for name, b in self._buffers.items()
                   if b is not None and name not in self._non_persistent)
        for name, child in self._modules.items():
            if child is not None:
                out.update(child._state_tensors(f"{prefix}{name}."))
        return out

    def state_dict(self, *, prefix=""):
        """Parameters and persistent buffers by torch's key names, as the arrays themselves
        (no copies, as torch returns tensors sharing storage): copy them to keep a snapshot."""
        return {key: tensor.data for key, tensor in self._state_tensors(prefix).items()}

    def load_state_dict(self, state_dict, strict=True):
        """Copy ``state_dict``'s values into this module's tensors, in place.

        Values may be arrays, Tensors or torch tensors. Like torch, raises ``RuntimeError``
        listing the missing and unexpected keys (when ``strict``) and every shape mismatch
        (always); otherwise returns ``IncompatibleKeys(missing_keys, unexpected_keys)``.
        """
        own = self._state_tensors()
        missing, errors = [], []
        for key, tensor in own.items():
            if key not in state_dict:
                missing.append(key)
                continue
            value = state_dict[key]
            value = np.asarray(value.data if isinstance(value, Tensor) else value)
            if value.shape != tensor.shape:
                errors.append(f"size mismatch for {key}: copying a param with shape {value.shape} from "
                              f"checkpoint, the shape in current model is {tensor.shape}.")
                continue
            with no_grad():
                tensor[...] = value
        unexpected = [key for key in state_dict if key not in own]
        if strict:
            for label, keys in (("Unexpected", unexpected), ("Missing", missing)):
                if keys:
                    quoted = ", ".join(f'"{key}"' for key in keys)
                    errors.insert(0, f"{label} key(s) in state_dict: {quoted}. ")


        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        return IncompatibleKeys(missing, unexpected)

    # ---- modes and calls
    def zero_grad(self):
        """Set every parameter's ``grad`` to None (torch's default, ``set_to_none=True``)."""
        for p in self.parameters():
            p.grad = None

    def train(self, mode=True):
        for module in self.modules():
            module.training = mode
        return self

    def eval(self):
        return self.train(False)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def extra_repr(self):
        return ""

    def __repr__(self):
        children = [f"({name}): " + repr(child).replace("\n", "\n  ") for name, child in self._modules.items()]
        if not children:
            return f"{type(self).__name__}({self.extra_repr()})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(children) + "\n)"


class Linear(Module):
    """``y = x W^T + b`` with ``W`` of shape (out, in), like ``torch.nn.Linear``.

    ``W`` and ``b`` start uniform on [-1/sqrt(in), 1/sqrt(in)], torch's default, drawn from
    ``np.random.default_rng(rng)`` (``rng``: a seed, a Generator or None).
    """

    def __init__(self, in_features, out_features, bias=True, rng=None, dtype=np.float64):
        super().__init__()
        rng = np.random.default_rng(rng)
        self.in_features, self.out_features = in_features, out_features
        bound = 1 / np.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = Parameter(rng.uniform(-bound, bound, (out_features, in_features)).astype(dtype))
        self.bias = Parameter(rng.uniform(-bound, bound, out_features).astype(dtype)) if bias else None

    def forward(self, x):
        """``x`` of shape (..., in) gives (..., out); MatMul is 2-D, so other ranks are reshaped."""
        flat = x if x.ndim == 2 else x.reshape(-1, self.in_features)
        y = flat @ self.weight.T
        if self.bias is not None:
            y = y + self.bias
        return y if x.ndim == 2 else y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class ReLU(Module):
    def forward(self, x):
        return autodiff.ReLU.apply(x)


class Sequential(Module):
    """Modules applied in order, registered under the names "0", "1", ... as in torch."""

    def __init__(self, *modules):
        super().__init__()
        for index, module in enumerate(modules):
            setattr(self, str(index), module)

    def forward(self, x):
        for module in self._modules.values():
            x = module(x)
        return x

    def __getitem__(self, index):
        return list(self._modules.values())[index]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class MLP(Sequential):
    """``Linear(sizes[0], sizes[1]), ReLU(), Linear(sizes[1], sizes[2]), ...`` with no ReLU after
    the last layer: the same keys and shapes as the torch ``nn.Sequential`` of those layers."""

    def __init__(self, sizes, rng=None, dtype=np.float64):
        rng = np.random.default_rng(rng)
        layers = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            layers += [Linear(n_in, n_out, rng=rng, dtype=dtype), ReLU()]
        super().__init__(*layers[:-1])


class SGD:
    """``torch.optim.SGD`` with dampening 0 and no Nesterov momentum.

    For each parameter ``p`` with a gradient, ``d = p.grad + weight_decay * p``; with momentum,
    ``buf = d`` on the first step and ``buf = momentum * buf + d`` after, and ``d = buf``; then
    ``p -= lr * d``, in place (so the parameter's version counter moves on, as in torch).
    """

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"invalid lr, momentum or weight_decay: {lr}, {momentum}, {weight_decay}")
        self.params = list(params)
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.momentum_buffers = [None] * len(self.params)

    def step(self):
        with no_grad():
            for i, p in enumerate(self.params):
                if p.grad is None:
                    continue
                d = p.grad + self.weight_decay * p.data if self.weight_decay else p.grad
                if self.momentum:
                    if self.momentum_buffers[i] is None:
                        self.momentum_buffers[i] = d.copy()
                    else:
                        self.momentum_buffers[i] *= self.momentum
                        self.momentum_buffers[i] += d
                    d = self.momentum_buffers[i]
                p.add_(d, alpha=-self.lr)

    def zero_grad(self):
        for p in self.params:
            p.grad = None

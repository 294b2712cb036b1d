"""engine_ref: the reference solutions of every exercise in the course (instructor only).

Every name in the course spec is importable from here, e.g.
``from engine_ref import softmax, cross_entropy, Tensor, Function, Context, topological_order,
unbroadcast, gradcheck, view_strides, Module, Linear, MLP, SGD``. ``ReLU`` is the autodiff
``Function``; the module of the same name is ``engine_ref.nn.ReLU``. The backward formula and
saved values of every op are tabulated in ``DERIVATIVES.md`` beside this file.
"""
from . import autodiff as _autodiff, functional as _functional, gradcheck as _gradcheck, layout as _layout
from . import nn, train as _train, versions as _versions
from .autodiff import *  # noqa: F401,F403
from .broadcast import broadcast_shape, unbroadcast
from .functional import *  # noqa: F401,F403
from .gradcheck import *  # noqa: F401,F403
from .graphs import branched_loss
from .layout import *  # noqa: F401,F403
from .nn import IncompatibleKeys, Linear, MLP, Module, Parameter, SGD, Sequential
from .train import *  # noqa: F401,F403
from .versions import *  # noqa: F401,F403

__all__ = sorted(
    set(_autodiff.__all__) | set(_functional.__all__) | set(_gradcheck.__all__) | set(_layout.__all__)
    | set(_train.__all__) | set(_versions.__all__) | {"broadcast_shape", "unbroadcast", "branched_loss"}
    | (set(nn.__all__) - {"ReLU"})
)

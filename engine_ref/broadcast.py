"""Broadcasting and its adjoint (unit 1.4).

Broadcasting aligns shapes on the right and stretches size-1 axes. Forward, it copies values
along the stretched and prepended axes; so backward, the adjoint of a broadcast is a sum over
exactly those axes. ``unbroadcast`` is that sum, and every binary op calls it in its backward.
"""
import numpy as np

__all__ = ["broadcast_shape", "unbroadcast"]


def broadcast_shape(*shapes):
    """The shape that ``shapes`` broadcast to, like ``torch.broadcast_shapes``.

    An int stands for a 1-D shape, as in torch. Raises ``ValueError`` when two shapes have
    different sizes, neither of them 1, on an axis.

    >>> broadcast_shape((3, 1), (1, 4))
    (3, 4)
    """
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    out = [1] * max((len(s) for s in shapes), default=0)
    for s in shapes:
        for i, size in enumerate(s, start=len(out) - len(s)):
            if size != out[i] and 1 not in (size, out[i]):
                raise ValueError(
                    f"shapes {', '.join(map(str, shapes))} cannot be broadcast: axis {i - len(out)} "
                    f"has sizes {out[i]} and {size}, and neither is 1"
                )
            out[i] = size if out[i] == 1 else out[i]
    return tuple(out)


def unbroadcast(grad, shape):
    """Sum ``grad`` over the axes that broadcasting ``shape`` to ``grad.shape`` stretched.

    Those are the prepended axes and the axes where ``shape`` has size 1 (kept, with size 1).
    The result has exactly ``shape``. Raises ``ValueError`` if ``shape`` does not broadcast to
    ``grad.shape``.

    >>> unbroadcast(np.ones((3, 4)), (4,))
    array([3., 3., 3., 3.])
    """
    grad, shape = np.asarray(grad), tuple(shape)
    if broadcast_shape(grad.shape, shape) != grad.shape:
        raise ValueError(f"a gradient of shape {grad.shape} cannot come from broadcasting {shape}")
    lead = grad.ndim - len(shape)
    stretched = tuple(lead + i for i, size in enumerate(shape) if size == 1 and grad.shape[lead + i] != 1)
    return np.asarray(grad.sum(axis=tuple(range(lead)) + stretched)).reshape(shape)

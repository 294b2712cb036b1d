"""Whole graphs the course asks for by name."""
__all__ = ["branched_loss"]


def branched_loss(x, W, b):
    r"""The unit 1.4 graph, in which ``x`` reaches the loss through three paths.

    With ``x`` of shape (N, D), ``W`` (D, M) and ``b`` (M,)::

        z    = tanh(x @ W + b)          # path 1: the affine map (b is broadcast over rows)
        s    = x.sum(axis=1, keepdims=True)   # (N, 1)
        loss = mean(z * s) + 0.1 * sum(x * x)

    Path 2 is ``s``, which is broadcast across the M columns of ``z`` (so its gradient is a sum
    over them); path 3 is ``x * x``, which itself uses ``x`` twice. Works on engine Tensors and,
    unchanged, on torch tensors.
    """
    z = (x @ W + b).tanh()
    s = x.sum(axis=1, keepdims=True)
    return (z * s).mean() + (x * x).sum() * 0.1

"""Hypothesis strategies shared by the test suite (after minitorch's ``strategies``).

* ``broadcast_pairs``: two shapes that broadcast together, with prepended and size-1 axes.
* ``strided_arrays``: float64 arrays with permuted axes and sliced (non-unit) steps, so that
  tests see non-contiguous layouts as often as contiguous ones.
"""
import numpy as np
from hypothesis import strategies as st

small_dim = st.integers(min_value=1, max_value=4)
shapes = st.lists(small_dim, min_size=0, max_size=4).map(tuple)


@st.composite
def broadcast_pairs(draw, max_ndim=4):
    """A pair of shapes ``(a, b)`` that broadcast, e.g. ``(3, 1)`` and ``(1, 4)`` or ``()`` and ``(2, 3)``."""
    full = draw(st.lists(small_dim, min_size=0, max_size=max_ndim))
    out = []
    for _ in range(2):
        keep = draw(st.integers(min_value=0, max_value=len(full)))  # drop leading axes
        dims = full[len(full) - keep:]
        out.append(tuple(d if draw(st.booleans()) else 1 for d in dims))
    return out[0], out[1]


@st.composite
def strided_arrays(draw, shape=None, dtype=np.float64):
    """A float array with the given (or a drawn) shape and a random, usually non-contiguous, layout."""
    shape = draw(shapes) if shape is None else tuple(shape)
    steps = [draw(st.integers(min_value=1, max_value=3)) for _ in shape]
    perm = draw(st.permutations(range(len(shape))))
    seed = draw(st.integers(min_value=0, max_value=2**32 - 1))
    rng = np.random.default_rng(seed)
    # Allocate a bigger base in permuted order, slice it with steps, then permute back.
    base_shape = [shape[p] * steps[p] for p in perm]
    base = rng.standard_normal(base_shape).astype(dtype)
    view = base[tuple(slice(None, None, steps[p]) for p in perm)]
    return view.transpose(np.argsort(perm)) if shape else view


# --- layouts (unit 1.6) ---------------------------------------------------------------------
dim_or_zero = st.integers(min_value=0, max_value=4)
shapes_with_zeros = st.lists(dim_or_zero, min_size=0, max_size=4).map(tuple)


def storage_size(shape, strides, offset):
    """The smallest storage that ``(shape, strides, offset)`` stays inside (``offset`` if empty)."""
    if 0 in shape:
        return offset
    return offset + 1 + sum((n - 1) * s for n, s in zip(shape, strides))


@st.composite
def raw_layouts(draw, max_ndim=4):
    """``(shape, strides, offset)`` with arbitrary non-negative strides: zero, overlapping, gapped."""
    shape = draw(st.lists(dim_or_zero, min_size=0, max_size=max_ndim).map(tuple))
    strides = tuple(draw(st.integers(min_value=0, max_value=12)) for _ in shape)
    return shape, strides, draw(st.integers(min_value=0, max_value=5))


def _optional(strategy):
    return st.one_of(st.none(), strategy)


@st.composite
def view_chains(draw, max_ops=4):
    """``(base_shape, ops)``: a contiguous shape and a chain of valid view ops on it.

    Each op is ``("transpose", dim0, dim1)``, ``("permute", dims)``,
    ``("slice", dim, start, stop, step)`` (start/stop/step may be None, start/stop out of
    range or negative) or ``("expand", new_shape)`` (with -1, new leading axes, size-0 targets).
    torch applies the ops while drawing, so every op is valid for the shape it meets.
    """
    import torch

    base_shape = draw(shapes_with_zeros)
    t = torch.empty(base_shape)
    ops = []
    for _ in range(draw(st.integers(min_value=0, max_value=max_ops))):
        n = t.dim()
        kinds = ["expand"] + (["transpose", "permute", "slice"] if n else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "transpose":
            dim0, dim1 = draw(st.integers(-n, n - 1)), draw(st.integers(-n, n - 1))
            op, t = (kind, dim0, dim1), t.transpose(dim0, dim1)
        elif kind == "permute":
            dims = [d - n * draw(st.booleans()) for d in draw(st.permutations(range(n)))]
            op, t = (kind, tuple(dims)), t.permute(dims)
        elif kind == "slice":
            dim = draw(st.integers(-n, n - 1))
            start, stop = (draw(_optional(st.integers(-6, 6))) for _ in range(2))
            step = draw(_optional(st.integers(1, 3)))
            index = (slice(None),) * (dim % n) + (slice(start, stop, step),)
            op, t = (kind, dim, start, stop, step), t[index]
        else:
            lead = draw(st.lists(st.integers(0, 3), max_size=2))
            sizes = [draw(st.sampled_from([-1, 0, 1, 2, 3])) if size == 1 else draw(st.sampled_from([-1, size]))
                     for size in t.shape]
            new_shape = tuple(lead + sizes)
            op, t = (kind, new_shape), t.expand(new_shape)
        ops.append(op)
    return base_shape, ops


@st.composite
def reshape_targets(draw, shape):
    """A shape with as many elements as ``shape``, by merging, splitting, adding and dropping
    axes (so that it is often, but not always, a valid view), sometimes with one -1."""
    dims = list(shape)
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        move = draw(st.sampled_from(["merge", "split", "insert 1", "drop 1"]))
        if move == "merge" and len(dims) >= 2:
            i = draw(st.integers(0, len(dims) - 2))
            dims[i:i + 2] = [dims[i] * dims[i + 1]]
        elif move == "split" and dims:
            i = draw(st.integers(0, len(dims) - 1))
            divisors = [k for k in range(1, dims[i] + 1) if dims[i] % k == 0] or [0]
            k = draw(st.sampled_from(divisors))
            dims[i:i + 1] = [k, dims[i] // k if k else 0]
        elif move == "insert 1":
            dims.insert(draw(st.integers(0, len(dims))), 1)
        elif move == "drop 1" and 1 in dims:
            dims.remove(1)
    if dims and draw(st.booleans()):
        dims[draw(st.integers(0, len(dims) - 1))] = -1
    return tuple(dims)

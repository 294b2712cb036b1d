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

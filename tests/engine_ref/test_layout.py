"""engine_ref.layout (unit 1.6) against what torch reports for the same views.

Layouts are integers, so every comparison here is exact.
"""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine_ref import layout
from tests.strategies import raw_layouts, reshape_targets, shapes_with_zeros, storage_size, view_chains

pytestmark = pytest.mark.filterwarnings("error")


def torch_layout(t):
    return tuple(t.shape), t.stride(), t.storage_offset()


def as_strided(shape, strides, offset, extra=0):
    """A tensor with exactly this layout over an ``arange`` storage, so values are positions."""
    storage = torch.arange(storage_size(shape, strides, offset) + extra, dtype=torch.float64)
    return storage.as_strided(shape, strides, offset)


def apply_op(op, t, state):
    """Apply one op of ``view_chains`` to a torch tensor and to a ``(shape, strides, offset)``."""
    shape, strides, offset = state
    kind, *args = op
    if kind == "transpose":
        return t.transpose(*args), layout.transpose_layout(shape, strides, *args, offset=offset)
    if kind == "permute":
        return t.permute(args[0]), layout.permute_layout(shape, strides, args[0], offset=offset)
    if kind == "slice":
        dim, start, stop, step = args
        index = (slice(None),) * (dim % t.dim()) + (slice(start, stop, step),)
        return t[index], layout.slice_layout(shape, strides, offset, dim, start, stop, step)
    return t.expand(args[0]), layout.expand_layout(shape, strides, args[0], offset=offset)


def run_chain(base_shape, ops):
    """Follow a chain with torch and with the layout functions; compare after every op."""
    t = torch.arange(int(np.prod(base_shape)), dtype=torch.float64).reshape(base_shape)
    state = torch_layout(t)
    for op in ops:
        t, state = apply_op(op, t, state)
        assert state == torch_layout(t), f"after {op}"
        assert all(isinstance(v, int) for v in (*state[0], *state[1], state[2]))
    return t, state


@settings(max_examples=40, deadline=None)
@given(shape=shapes_with_zeros)
def test_contiguous_strides_matches_torch(shape):
    assert layout.contiguous_strides(shape) == torch.empty(shape).stride()


@settings(max_examples=80, deadline=None)
@given(raw=raw_layouts())
def test_is_contiguous_matches_torch_on_any_strides(raw):
    shape, strides, offset = raw
    assert layout.is_contiguous(shape, strides) == as_strided(shape, strides, offset).is_contiguous()


@settings(max_examples=60, deadline=None)
@given(chain=view_chains())
def test_view_chain_matches_torch(chain):
    base_shape, ops = chain
    t, (shape, strides, offset) = run_chain(base_shape, ops)
    assert layout.is_contiguous(shape, strides) == t.is_contiguous()
    storage = np.arange(max(int(np.prod(base_shape)), 1), dtype=np.float64)
    dense = layout.read_through_layout(storage, shape, strides, offset)
    np.testing.assert_array_equal(dense, t.numpy())  # exact: values are storage positions
    for index in np.ndindex(shape):
        assert layout.element_offset(index, strides, offset) == t[index].item()


@settings(max_examples=80, deadline=None)
@given(chain=view_chains(), data=st.data())
def test_view_strides_matches_torch_view(chain, data):
    t, (shape, strides, _) = run_chain(*chain)
    new_shape = data.draw(reshape_targets(shape), label="new_shape")
    try:
        expected = t.view(new_shape).stride()
    except RuntimeError as torch_error:
        if "invalid for input of size" in str(torch_error) or "ambiguous" in str(torch_error):
            with pytest.raises(ValueError):
                layout.view_strides(shape, strides, new_shape)
        else:  # "view size is not compatible with input tensor's size and stride"
            assert layout.view_strides(shape, strides, new_shape) is None
    else:
        assert layout.view_strides(shape, strides, new_shape) == expected


@pytest.mark.parametrize("shape, strides, new_shape", [
    ((4, 3), (1, 4), (12,)),          # transposed: not viewable
    ((4, 3), (1, 4), (4, 3, 1)),      # adding a size-1 axis is always a view
    ((2, 3, 4), (12, 4, 1), (6, -1)),
    ((2, 3, 4), (24, 4, 1), (6, 4)),  # gap between the first two axes
    ((2, 3, 4), (24, 4, 1), (2, 12)),
    ((2, 1, 3), (3, 7, 1), (6,)),     # a size-1 axis never breaks contiguity
    ((3, 1), (0, 1), (3,)),           # expanded
    ((3, 2), (0, 1), (6,)),
    ((0, 3), (3, 1), (3, 0)),
    ((), (), (1, 1)),
    ((1,), (5,), ()),
])
def test_view_strides_examples(shape, strides, new_shape):
    t = as_strided(shape, strides, 0)
    try:
        expected = t.view(new_shape).stride()
    except RuntimeError:
        expected = None
    assert layout.view_strides(shape, strides, new_shape) == expected


@pytest.mark.parametrize("new_shape", [(5,), (-1, -1), (-1, 5), (4, -2)])
def test_view_strides_rejects_impossible_shapes_like_torch(new_shape):
    with pytest.raises(RuntimeError):
        torch.empty(3, 4).view(new_shape)
    with pytest.raises(ValueError):
        layout.view_strides((3, 4), (4, 1), new_shape)


def test_view_strides_rejects_ambiguous_inference_like_torch():
    with pytest.raises(RuntimeError, match="ambiguous"):
        torch.empty(0, 4).view(0, -1)
    with pytest.raises(ValueError, match="ambiguous"):
        layout.view_strides((0, 4), (4, 1), (0, -1))


@settings(max_examples=80, deadline=None)
@given(raw=raw_layouts(), extra=st.integers(0, 3))
def test_read_through_layout_matches_as_strided(raw, extra):
    shape, strides, offset = raw
    storage = np.random.default_rng(len(shape)).standard_normal(storage_size(shape, strides, offset) + extra)
    expected = torch.from_numpy(storage).as_strided(shape, strides, offset).numpy()
    got = layout.read_through_layout(storage, shape, strides, offset)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)  # exact: both gather the same storage values


@settings(max_examples=40, deadline=None)
@given(raw=raw_layouts(), data=st.data())
def test_element_offset_matches_torch(raw, data):
    shape, strides, offset = raw
    if 0 in shape:
        return
    index = tuple(data.draw(st.integers(0, n - 1)) for n in shape)
    assert layout.element_offset(index, strides, offset) == as_strided(shape, strides, offset)[index].item()


# --- invalid arguments: torch refuses, and so does the reference ------------------------------
T = torch.empty(2, 3)
S = ((2, 3), (3, 1))  # T's shape and strides
INVALID = {  # name -> (torch op on T, the same op on S, the exception the reference raises)
    "transpose range": (lambda: T.transpose(0, 2), lambda: layout.transpose_layout(*S, 0, 2), IndexError),
    "transpose 0-d": (lambda: T[0, 0].transpose(0, 1), lambda: layout.transpose_layout((), (), 0, 1), IndexError),
    "permute duplicate": (lambda: T.permute(0, 0), lambda: layout.permute_layout(*S, (0, 0)), ValueError),
    "permute -2 and 0": (lambda: T.permute(-2, 0), lambda: layout.permute_layout(*S, (-2, 0)), ValueError),
    "permute length": (lambda: T.permute(0), lambda: layout.permute_layout(*S, (0,)), ValueError),
    "permute range": (lambda: T.permute(0, 2), lambda: layout.permute_layout(*S, (0, 2)), IndexError),
    "slice step 0": (lambda: T[::0], lambda: layout.slice_layout(*S, 0, 0, None, None, 0), ValueError),
    "slice step -1": (lambda: T[::-1], lambda: layout.slice_layout(*S, 0, 0, None, None, -1), ValueError),
    "slice 0-d": (lambda: T[0, 0][0:1], lambda: layout.slice_layout((), (), 0, 0, 0, 1, 1), IndexError),
    "expand mismatch": (lambda: T.expand(3, 4), lambda: layout.expand_layout(*S, (3, 4)), ValueError),
    "expand too few": (lambda: T.expand(3), lambda: layout.expand_layout(*S, (3,)), ValueError),
    "expand leading -1": (lambda: T.expand(-1, 2, 3), lambda: layout.expand_layout(*S, (-1, 2, 3)), ValueError),
    "expand -2": (lambda: T[:, :1].expand(2, -2), lambda: layout.expand_layout((2, 1), (3, 1), (2, -2)), ValueError),
}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_arguments_raise_like_torch(name):
    torch_op, ref_op, error = INVALID[name]
    with pytest.raises((RuntimeError, IndexError, ValueError)):
        torch_op()
    with pytest.raises(error):
        ref_op()


def test_read_through_layout_rejects_out_of_bounds_like_torch():
    storage = np.arange(6.0)
    with pytest.raises(RuntimeError):
        torch.from_numpy(storage).as_strided((2, 3), (3, 1), 1)
    with pytest.raises(ValueError):
        layout.read_through_layout(storage, (2, 3), (3, 1), 1)


# --- shares_storage (torch exercise) ----------------------------------------------------------
def _root(t):
    """The tensor that owns ``t``'s storage, from torch's own view tracking (``_base``)."""
    return t if t._base is None else t._base


def _pairs():
    a = torch.randn(4, 6)
    b = torch.randn(4, 6)
    return {
        "slice": (a, a[1:]),
        "disjoint slices": (a[:2], a[2:]),
        "transpose": (a, a.T),
        "expand": (a[:1], a[:1].expand(5, 6)),
        "view": (a, a.view(24)),
        "empty slice": (a, a[4:]),
        "clone": (a, a.clone()),
        "contiguous copy": (a.T, a.T.contiguous()),
        "reshape copy": (a.T, a.T.reshape(24)),
        "other tensor": (a, b),
        "two empty tensors": (torch.empty(0), torch.empty(0)),
    }


@pytest.mark.parametrize("name", sorted(_pairs()))
def test_shares_storage_matches_view_tracking(name):
    t1, t2 = _pairs()[name]
    assert layout.shares_storage(t1, t2) == (_root(t1) is _root(t2))
    assert layout.shares_storage(t2, t1) == layout.shares_storage(t1, t2)

r"""Reference solutions for unit 1.6: tensor layout as shape, strides and storage offset.

A strided tensor is a flat storage plus three numbers per view: ``shape``, ``strides`` (in
elements, as ``torch.Tensor.stride()`` reports them) and a storage ``offset``. Element
``(i_0, ..., i_{k-1})`` lives at storage position

.. math:: \text{offset} + \sum_d i_d \, \text{strides}_d .

Transpose, permute, slice and expand only rewrite those numbers; they never touch the storage,
which is why they return views. ``view`` can reuse the storage only when the new shape can be
walked with strides (``view_strides``); otherwise ``reshape`` has to copy.

Each layout function returns ``(shape, strides, offset)`` as tuples of Python ints (offset an
int), with exactly the values torch reports. The view-making functions take the current storage
``offset`` as an optional last argument so that they can be chained; transpose, permute and
expand return it unchanged. Dimensions may be negative (``-1`` is the last one), as in torch.
Invalid arguments raise ``IndexError`` for a dimension out of range (as torch does) and
``ValueError`` otherwise (torch raises ``RuntimeError`` there).
"""
import numpy as np

__all__ = [
    "contiguous_strides", "element_offset", "is_contiguous", "transpose_layout", "permute_layout", "slice_layout",
    "expand_layout", "view_strides", "read_through_layout", "shares_storage",
]


def _ints(values):
    return tuple(int(v) for v in values)


def _wrap_dim(dim, ndim):
    """Wrap a possibly negative ``dim``; a 0-d tensor accepts 0 and -1, as in torch."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def _check_layout(shape, strides):
    if len(shape) != len(strides):
        raise ValueError(f"shape {tuple(shape)} and strides {tuple(strides)} have different lengths")


def contiguous_strides(shape):
    """Row-major (C order) strides in elements, like ``torch.empty(shape).stride()``.

    The last axis has stride 1 and each axis steps over one whole row of the axes after it:
    ``strides[d] = strides[d + 1] * max(shape[d + 1], 1)``. The ``max`` is torch's rule for
    size-0 axes, e.g. ``(2, 0, 3) -> (3, 3, 1)``.
    """
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return _ints(reversed(strides))


def element_offset(index, strides, storage_offset=0):
    """Storage position of the element at ``index``: ``storage_offset + sum(i * s)``."""
    if len(index) != len(strides):
        raise ValueError(f"index {tuple(index)} has {len(index)} entries, but there are {len(strides)} strides")
    return int(storage_offset + sum(i * s for i, s in zip(index, strides)))


def is_contiguous(shape, strides):
    """Whether the layout is C-contiguous, exactly as ``torch.Tensor.is_contiguous()`` decides.

    A layout is contiguous when walking it in index order reads consecutive storage. Torch
    skips size-1 axes (their stride is never used) and calls any layout with no elements
    contiguous; every other axis must have stride ``prod(shape[d + 1:])``.
    """
    _check_layout(shape, strides)
    if 0 in shape:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True


def transpose_layout(shape, strides, dim0, dim1, offset=0):
    """Layout of ``t.transpose(dim0, dim1)``: swap two entries of the shape and of the strides."""
    _check_layout(shape, strides)
    dim0, dim1 = _wrap_dim(dim0, len(shape)), _wrap_dim(dim1, len(shape))
    shape, strides = list(shape), list(strides)
    if shape:
        shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
        strides[dim0], strides[dim1] = strides[dim1], strides[dim0]
    return _ints(shape), _ints(strides), int(offset)


def permute_layout(shape, strides, dims, offset=0):
    """Layout of ``t.permute(dims)``: axis ``k`` of the result is axis ``dims[k]`` of the input."""
    _check_layout(shape, strides)
    if len(dims) != len(shape):
        raise ValueError(f"permute: got {len(dims)} dims for a tensor with {len(shape)} dimensions")
    dims = [_wrap_dim(d, len(shape)) for d in dims]
    if len(set(dims)) != len(dims):
        raise ValueError("permute(): duplicate dims are not allowed.")
    return _ints(shape[d] for d in dims), _ints(strides[d] for d in dims), int(offset)


def slice_layout(shape, strides, offset, dim, start, stop, step):
    """Layout of ``t[..., start:stop:step]`` along ``dim`` (``start``/``stop`` may be None).

    Python's rules pick the indices ``start, start + step, ...`` below ``stop``, after negative
    values count from the end and out-of-range values are clamped to ``[0, size]``. The view
    starts at element ``start`` (so ``offset`` grows by ``start * strides[dim]``, even when the
    slice is empty, as in torch), has ``ceil((stop - start) / step)`` entries along ``dim``,
    and walks ``step`` times further per index. ``step`` must be positive, as in torch.
    """
    _check_layout(shape, strides)
    if step is not None and step <= 0:
        raise ValueError("step must be greater than zero")
    if not shape:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    dim = _wrap_dim(dim, len(shape))
    picked = range(*slice(start, stop, step).indices(shape[dim]))
    shape, strides = list(shape), list(strides)
    offset += picked.start * strides[dim]
    shape[dim], strides[dim] = len(picked), strides[dim] * picked.step
    return _ints(shape), _ints(strides), int(offset)


def expand_layout(shape, strides, new_shape, offset=0):
    """Layout of ``t.expand(new_shape)``, following torch's ``inferExpandGeometry``.

    Shapes are aligned on the right. A size-1 axis may grow to any size by getting stride 0,
    so that every index along it reads the same element; ``-1`` keeps an existing axis's size
    and stride; new leading axes may be added (their stride is 0 when their size is not 1).
    Any other change of size is an error.
    """
    _check_layout(shape, strides)
    ndim, old_ndim = len(new_shape), len(shape)
    if ndim < old_ndim:
        raise ValueError(f"expand: the number of sizes provided ({ndim}) must be greater or equal to "
                         f"the number of dimensions in the tensor ({old_ndim})")
    out_shape, out_strides = [0] * ndim, [0] * ndim
    for i in range(ndim - 1, -1, -1):
        old = i - (ndim - old_ndim)  # the input axis aligned with output axis i, if any
        target = new_shape[i]
        if target < -1:
            raise ValueError(f"The expanded size of the tensor ({target}) is negative at dimension {i}")
        if old < 0:
            if target == -1:
                raise ValueError(f"The expanded size of the tensor (-1) isn't allowed in a leading, "
                                 f"non-existing dimension {i}")
            # torch gives a new leading size-1 axis the stride of a contiguous outer axis
            # (and every axis of an expanded 0-d tensor stride 0)
            size = 1
            stride = out_shape[i + 1] * out_strides[i + 1] if old_ndim else 0
        else:
            size, stride = shape[old], strides[old]
            target = size if target == -1 else target
        if size != target:
            if size != 1:
                raise ValueError(f"The expanded size of the tensor ({target}) must match the existing size "
                                 f"({size}) at non-singleton dimension {i}.  Target sizes: {list(new_shape)}.  "
                                 f"Tensor sizes: {list(shape)}")
            size, stride = target, 0
        out_shape[i], out_strides[i] = size, stride
    return _ints(out_shape), _ints(out_strides), int(offset)


def _infer_shape(new_shape, numel):
    """Replace a single ``-1`` in ``new_shape`` by the size that keeps ``numel`` elements."""
    new_shape = list(new_shape)
    if new_shape.count(-1) > 1:
        raise ValueError("only one dimension can be inferred")
    if any(d < -1 for d in new_shape):
        raise ValueError(f"invalid shape dimension {min(new_shape)}")
    known = int(np.prod([d for d in new_shape if d != -1], dtype=np.int64))
    if -1 in new_shape:
        if known == 0:
            raise ValueError(f"cannot reshape tensor of {numel} elements into shape {new_shape} because "
                             "the unspecified dimension size -1 can be any value and is ambiguous")
        if numel % known == 0:
            new_shape[new_shape.index(-1)] = numel // known
            known = numel
    if known != numel:
        raise ValueError(f"shape '{new_shape}' is invalid for input of size {numel}")
    return new_shape


def view_strides(shape, strides, new_shape):
    """Strides of ``t.view(new_shape)``, or None when torch's ``view`` refuses (``reshape`` copies).

    Following torch's ``computeStride``: split the old axes into *chunks* of axes that are
    contiguous with each other (``strides[d] == shape[d + 1] * strides[d + 1]``; size-1 axes
    never break a chunk). A chunk behaves like one flat axis with the stride of its last axis,
    so the new shape is viewable exactly when it can be cut, from the right, into consecutive
    groups with the same numbers of elements as the chunks; each group then gets contiguous
    strides on top of its chunk's base stride. A single ``-1`` in ``new_shape`` is inferred;
    a ``new_shape`` with the wrong number of elements raises ``ValueError`` (torch: RuntimeError),
    because no layout, view or copy, can have it.
    """
    _check_layout(shape, strides)
    numel = int(np.prod(shape, dtype=np.int64))
    new_shape = _infer_shape(new_shape, numel)
    if not shape:
        return (1,) * len(new_shape)
    if numel == 0:
        return _ints(strides) if list(shape) == new_shape else contiguous_strides(new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = strides[-1]
    tensor_numel = view_numel = 1
    for tensor_d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[tensor_d]
        chunk_ends = tensor_d == 0 or (shape[tensor_d - 1] != 1
                                       and strides[tensor_d - 1] != tensor_numel * chunk_base_stride)
        if chunk_ends:
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = strides[tensor_d - 1]
                tensor_numel = view_numel = 1
    return _ints(new_strides) if view_d == -1 else None


def read_through_layout(storage, shape, strides, offset):
    """The dense array that ``(shape, strides, offset)`` describes over a 1-D ``storage``.

    Like ``torch.as_strided(storage, shape, strides, offset)`` followed by a copy. The storage
    position of every element is built by broadcasting one ``arange(size) * stride`` per axis
    and adding them to ``offset``; one fancy index then gathers all elements. Strides and the
    offset must be non-negative (torch has no negative strides) and every position must lie
    inside the storage.
    """
    storage = np.asarray(storage)
    _check_layout(shape, strides)
    if storage.ndim != 1:
        raise ValueError(f"storage must be 1-D, got shape {storage.shape}")
    if offset < 0 or any(s < 0 for s in strides):
        raise ValueError("as_strided: negative strides and offsets are not supported")
    positions = np.asarray(offset, dtype=np.intp)
    for size, stride in zip(shape, strides):
        positions = positions[..., None] + np.arange(size, dtype=np.intp) * stride
    if positions.size and positions.max() >= storage.size:
        raise ValueError(f"layout shape={tuple(shape)}, strides={tuple(strides)}, offset={offset} reads "
                         f"position {positions.max()}, out of bounds for a storage of size {storage.size}")
    return storage[positions.reshape(-1)].reshape(tuple(shape))


def shares_storage(t1, t2):
    """Whether two torch tensors are views of the same storage (torch exercise).

    Compares the address of each tensor's whole storage, not of its first element, so a slice
    that starts later in the storage still counts. Tensors without a storage allocation (no
    bytes, address 0) share nothing.
    """
    p1, p2 = t1.untyped_storage().data_ptr(), t2.untyped_storage().data_ptr()
    return p1 == p2 and p1 != 0

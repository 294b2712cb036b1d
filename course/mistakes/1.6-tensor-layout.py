"""Student solutions that the grader of unit 1.6 must judge correctly.

Each variant changes one solution cell of the reference. ``loses`` names the test cells that
must lose points. Later exercises reuse earlier ones: ``view_strides`` calls
``contiguous_strides`` (for layouts with no elements), the chain test of
``read_through_layout`` calls every layout function, and ``assert_view`` calls
``shares_storage``; a mistake that shows there also loses there.
"""
from autograder.outside.catalogue import Variant

VARIANTS = [
    # --- contiguous_strides -----------------------------------------------------------------
    Variant(
        "contiguous_strides_in_bytes", "contiguous_strides",
        loses=("test_contiguous_strides",),
        find="return tuple(strides)", replace="return tuple(8 * s for s in strides)",
        why="NumPy's .strides are in bytes (8 per float64); torch's stride() counts elements."),
    Variant(
        "contiguous_strides_fortran_order", "contiguous_strides",
        loses=("test_contiguous_strides",),
        code='''strides, step = [], 1
for size in shape:
    strides.append(step)
    step *= max(int(size), 1)
return tuple(strides)''',
        why="Fortran order: the first axis moves fastest. Torch allocates C order (last axis stride 1)."),
    Variant(
        "contiguous_strides_size0_plain_product", "contiguous_strides",
        loses=("test_contiguous_strides",),
        find="max(int(shape[d + 1]), 1)", replace="int(shape[d + 1])",
        why="Multiplies by a size-0 axis, giving (0, 3, 1) for (2, 0, 3) where torch gives (3, 3, 1)."),
    Variant(
        "contiguous_strides_np_prod_float", "contiguous_strides",
        loses=("test_contiguous_strides",),
        code="return tuple(np.prod(shape[d + 1:]) for d in range(len(shape)))",
        why="np.prod of an empty tuple is the float 1.0, so the last stride is a float (and size-0 axes "
            "are not counted as 1)."),
    Variant(
        "contiguous_strides_include_own_axis", "contiguous_strides",
        loses=("test_contiguous_strides",),
        code="return tuple(int(np.prod([max(n, 1) for n in shape[d:]], dtype=np.int64)) for d in range(len(shape)))",
        why="prod(shape[d:]) includes the axis's own size: the last stride becomes shape[-1] instead of 1."),
    # --- element_offset ---------------------------------------------------------------------
    Variant(
        "element_offset_forgets_storage_offset", "element_offset",
        loses=("test_element_offset",),
        find="return int(storage_offset) + sum(", replace="return sum(",
        why="Forgets the storage offset: a slice x[1:] reads from the start of the storage."),
    Variant(
        "element_offset_strides_reversed", "element_offset",
        loses=("test_element_offset",),
        find="zip(index, strides)", replace="zip(index, reversed(strides))",
        why="Pairs each index with the stride of the mirrored axis (as if strides were listed last axis first)."),
    # --- is_contiguous ----------------------------------------------------------------------
    Variant(
        "is_contiguous_exact_strides", "is_contiguous",
        loses=("test_is_contiguous",),
        code='''if 0 in shape:
    return True
return tuple(strides) == contiguous_strides(shape)''',
        why="Compares every stride, including those of size-1 axes, which torch ignores: (2, 1, 3) with "
            "strides (3, 100, 1) is contiguous."),
    Variant(
        "is_contiguous_last_stride_only", "is_contiguous",
        loses=("test_is_contiguous",),
        code="return len(strides) == 0 or 0 in shape or strides[-1] == 1",
        why="Only checks that the last stride is 1: a slice x[:, :2] (gaps between rows) passes."),
    Variant(
        "is_contiguous_empty_not_special", "is_contiguous",
        loses=("test_is_contiguous",),
        find="    if 0 in shape:\n        return True\n", replace="",
        why="A layout with no elements is contiguous in torch whatever its strides."),
    Variant(
        "is_contiguous_decreasing_strides", "is_contiguous",
        loses=("test_is_contiguous",),
        code="return list(strides) == sorted(strides, reverse=True)",
        why="'No transpose' is not 'contiguous': decreasing strides can still leave gaps (a slice with a step)."),
    # --- transpose_layout -------------------------------------------------------------------
    Variant(
        "transpose_swaps_shape_only", "transpose_layout",
        loses=("test_transpose_layout",),
        find="    strides[dim0], strides[dim1] = strides[dim1], strides[dim0]\n", replace="",
        why="Swaps the shape but not the strides: that is a reshape of the same storage, not a transpose."),
    Variant(
        "transpose_resets_offset", "transpose_layout",
        loses=("test_transpose_layout",),
        find="tuple(int(s) for s in strides), int(offset)", replace="tuple(int(s) for s in strides), 0",
        why="Drops the input's storage offset: a transpose of a slice must keep where the slice starts."),
    # --- permute_layout ---------------------------------------------------------------------
    Variant(
        "permute_inverse_permutation", "permute_layout",
        loses=("test_permute_layout",),
        code='''inverse = np.argsort(dims)
return tuple(int(shape[d]) for d in inverse), tuple(int(strides[d]) for d in inverse), int(offset)''',
        why="Uses the inverse permutation: axis dims[k] of the input should become axis k, not the reverse."),
    Variant(
        "permute_shape_only", "permute_layout",
        loses=("test_permute_layout",),
        find="tuple(int(strides[d]) for d in dims)", replace="tuple(int(s) for s in strides)",
        why="Permutes the shape but keeps the strides in the old order."),
    # --- slice_layout -----------------------------------------------------------------------
    Variant(
        "slice_forgets_offset", "slice_layout",
        loses=("test_slice_layout",),
        find="    offset = offset + start * strides[dim]\n", replace="",
        why="The view starts at element `start`: without the offset every slice reads from the old start."),
    Variant(
        "slice_ignores_step", "slice_layout",
        loses=("test_slice_layout",),
        find="    strides[dim] = strides[dim] * step\n", replace="",
        why="Keeps the stride along dim: t[::2] would read neighbours instead of every other element."),
    Variant(
        "slice_floor_length", "slice_layout",
        loses=("test_slice_layout",),
        find="shape[dim] = len(range(start, stop, step))", replace="shape[dim] = max(0, (stop - start) // step)",
        why="(stop - start) // step rounds down: 7 elements with step 3 are indices 0, 3, 6 (3 of them), not 2."),
    Variant(
        "slice_no_python_rules", "slice_layout",
        loses=("test_slice_layout",),
        code='''if step is not None and step <= 0:
    raise ValueError("slice step must be positive")
start = 0 if start is None else start
stop = shape[dim] if stop is None else stop
step = 1 if step is None else step
shape, strides = list(shape), list(strides)
offset = offset + start * strides[dim]
shape[dim] = max(0, -(-(stop - start) // step))
strides[dim] = strides[dim] * step
return tuple(shape), tuple(strides), int(offset)''',
        why="Uses start and stop as given: negative values do not count from the end and out-of-range ones "
            "are not clamped, as Python and torch do."),
    Variant(
        "slice_empty_keeps_offset", "slice_layout",
        loses=("test_slice_layout",),
        find="    offset = offset + start * strides[dim]\n",
        replace="    offset = offset + (start * strides[dim] if start < stop else 0)\n",
        why="Moves the offset only when the slice has a first element; torch moves it for empty slices too."),
    Variant(
        "slice_accepts_negative_step", "slice_layout",
        loses=("test_slice_layout",),
        find='    if step is not None and step <= 0:\n        raise ValueError("slice step must be positive")\n',
        replace="",
        why="Accepts a negative step (Python would reverse); torch has no negative steps and must be refused."),
    # --- expand_layout ----------------------------------------------------------------------
    Variant(
        "expand_stride_one", "expand_layout",
        loses=("test_expand_layout",),
        find="size, stride = target, 0", replace="size, stride = target, 1",
        why="An expanded axis reads the same element for every index: its stride is 0, not 1."),
    Variant(
        "expand_leading_size1_stride_zero", "expand_layout",
        loses=("test_expand_layout",),
        find="(out_shape[d + 1] * out_strides[d + 1] if d + 1 < len(new_shape) else 0)", replace="0",
        why="Gives a new leading axis of size 1 stride 0; torch gives it shape[d + 1] * strides[d + 1]."),
    Variant(
        "expand_no_size_check", "expand_layout",
        loses=("test_expand_layout",),
        find='            if size != 1 or target < 0:\n                raise ValueError(f"expand: size {size} of axis {d} cannot become {target}")\n',
        replace="",
        why="Lets an axis whose size is not 1 change size (stride 0): torch raises."),
    Variant(
        "expand_forgets_minus_one", "expand_layout",
        loses=("test_expand_layout",),
        find="            target = size if target == -1 else target\n", replace="",
        why="-1 means 'keep this size'; without it every -1 raises."),
    # --- view_strides -----------------------------------------------------------------------
    Variant(
        "view_allowed_on_any_layout", "view_strides",
        loses=("test_view_strides",),
        find="    if len(shape) == 0:\n        return (1,) * len(new_shape)\n",
        replace="    return contiguous_strides(new_shape)\n",
        why="Ignores the input's strides: answers contiguous strides where torch's view raises (a transpose "
            "flattened) and wrong strides for views of non-contiguous layouts."),
    Variant(
        "view_only_if_contiguous", "view_strides",
        loses=("test_view_strides",),
        find="    if len(shape) == 0:\n        return (1,) * len(new_shape)\n",
        replace="    if not is_contiguous(shape, strides):\n        return None\n    return contiguous_strides(new_shape)\n",
        why="Too strict: torch views many non-contiguous layouts (x[::2].view(2, 2, 2) splits a chunk)."),
    Variant(
        "view_size1_breaks_chunk", "view_strides",
        loses=("test_view_strides",),
        find="chunk_ends = d == 0 or (shape[d - 1] != 1 and strides[d - 1] != chunk_numel * base)",
        replace="chunk_ends = d == 0 or strides[d - 1] != chunk_numel * base",
        why="A size-1 axis with an unusual stride ends a chunk, so views torch allows come back as None."),
    Variant(
        "view_no_minus_one_inference", "view_strides",
        loses=("test_view_strides",),
        find="        new_shape[new_shape.index(-1)] = numel // known\n", replace="",
        why="Does not infer -1: every shape with -1 raises."),
    Variant(
        "view_wrong_numel_returns_none", "view_strides",
        loses=("test_view_strides",),
        find='        raise ValueError(f"shape {new_shape} is invalid for input of size {numel}")', replace="        return None",
        why="A shape with a different number of elements is not 'needs a copy': no layout can have it."),
    # --- read_through_layout ----------------------------------------------------------------
    Variant(
        "read_through_ignores_offset", "read_through_layout",
        loses=("test_read_through_layout", "test_read_through_layout_chain"),
        find="positions = np.asarray(offset, dtype=np.int64)", replace="positions = np.asarray(0, dtype=np.int64)",
        why="Reads from position 0 whatever the offset: every slice reads the wrong elements."),
    Variant(
        "read_through_no_bounds_check", "read_through_layout",
        loses=("test_read_through_layout",),
        find='''    if positions.size and (positions.min() < 0 or positions.max() >= storage.size):
        raise ValueError(f"the layout reads positions {positions.min()}..{positions.max()}, "
                         f"outside a storage of {storage.size} elements")
''', replace="",
        why="NumPy reads a negative position from the end and raises IndexError past the end: out-of-bounds "
            "layouts must raise ValueError."),
    Variant(
        "read_through_float64_result", "read_through_layout",
        loses=("test_read_through_layout",),
        code='''storage = np.asarray(storage)
out = np.zeros(shape)
for index in np.ndindex(*shape):
    position = offset + sum(i * s for i, s in zip(index, strides))
    if not 0 <= position < storage.size:
        raise ValueError("out of bounds")
    out[index] = storage[position]
return out''',
        why="np.zeros(shape) is float64: a float32 or int64 storage comes back as float64."),
    Variant(
        "read_through_rejects_negative_strides", "read_through_layout",
        loses=("test_read_through_layout",),
        find="    storage = np.asarray(storage)\n",
        replace='    storage = np.asarray(storage)\n    if any(s < 0 for s in strides):\n        raise ValueError("negative stride")\n',
        why="Refuses negative strides as torch.as_strided does; the exercise asks for them (NumPy's a[::-1])."),
    Variant(
        "read_through_delegates_to_torch", "read_through_layout",
        loses=("test_read_through_layout", "test_read_through_layout_chain"),
        code='''import torch
t = torch.as_tensor(np.asarray(storage))
return torch.as_strided(t, tuple(shape), tuple(strides), offset).clone().numpy()''',
        why="Hands the work to torch.as_strided where torch is not the point: no points."),
    # --- shares_storage (torch) ---------------------------------------------------------------
    Variant(
        "shares_storage_tensor_data_ptr", "shares_storage",
        loses=("test_shares_storage", "test_assert_view"),
        find="p1, p2 = t1.untyped_storage().data_ptr(), t2.untyped_storage().data_ptr()",
        replace="p1, p2 = t1.data_ptr(), t2.data_ptr()",
        why="data_ptr() is the address of the first element: x[1:] starts later in the same storage."),
    Variant(
        "shares_storage_memory_overlap", "shares_storage",
        loses=("test_shares_storage",),
        code="return bool(np.shares_memory(t1.numpy(), t2.numpy()))",
        why="Overlap is not sharing: x[:1] and x[1:] are disjoint views of one storage."),
    Variant(
        "shares_storage_equal_values", "shares_storage",
        loses=("test_shares_storage", "test_assert_view"),
        code="return t1.shape == t2.shape and bool(torch.equal(t1, t2))",
        why="Equal values are not shared memory: a clone has the same values in a new storage."),
    Variant(
        "shares_storage_no_null_check", "shares_storage",
        loses=("test_shares_storage",),
        find="return p1 == p2 and p1 != 0", replace="return p1 == p2",
        why="Two tensors without memory both have storage address 0, yet share nothing."),
    # --- assert_view (torch) ------------------------------------------------------------------
    Variant(
        "assert_view_no_storage_check", "assert_view",
        loses=("test_assert_view",),
        find='    assert shares_storage(base, view), "the tensor is a copy: it does not share the base\'s storage"\n',
        replace="",
        why="Checks the numbers only: a copy with the same layout numbers passes."),
    Variant(
        "assert_view_returns_bool", "assert_view",
        loses=("test_assert_view",),
        code='''return (shares_storage(base, view) and tuple(view.shape) == tuple(shape)
        and tuple(view.stride()) == tuple(strides) and view.storage_offset() == offset)''',
        why="Returns False instead of raising: an assertion helper that never fails a test."),
    Variant(
        "assert_view_no_offset_check", "assert_view",
        loses=("test_assert_view",),
        find='    assert view.storage_offset() == offset, f"storage offset {view.storage_offset()}, expected {offset}"',
        replace="",
        why="Forgets the storage offset: a slice predicted to start at the wrong element passes."),
    # --- view_ops -----------------------------------------------------------------------------
    Variant(
        "transpose_backward_reshape", "view_ops",
        loses=("test_view_ops", "test_view_ops_invariance"),
        find="return (np.swapaxes(grad, *ctx.dims),)",
        replace="return (grad.reshape(np.swapaxes(grad, *ctx.dims).shape),)",
        why="Reshapes the gradient to the input's shape instead of transposing it back: right shape, "
            "elements paired with the wrong inputs."),
    Variant(
        "slice_forward_copies", "view_ops",
        loses=("test_view_ops_invariance",),
        find="        return a[index]\n", replace="        return a[index].copy()\n",
        why="Right values and gradients, but a copy: a view op returns a view of its input, as torch does."),
    Variant(
        "expand_backward_no_sum", "view_ops",
        loses=("test_view_ops", "test_view_ops_invariance"),
        find="        return (unbroadcast(grad, shape),)", replace="        return (grad,)",
        why="The gradient of an expand keeps the expanded shape: an element read k times must get the sum "
            "of its k gradients."),
    Variant(
        "expand_forward_assumes_contiguous", "view_ops",
        loses=("test_view_ops", "test_view_ops_invariance"),
        find="        return np.broadcast_to(a, shape)\n",
        replace='''        in_strides = [s * a.itemsize for s in contiguous_strides(a.shape)]  # as if a were contiguous
        new = [0] * extra + [s if n == m else 0 for n, m, s in zip(a.shape, shape[extra:], in_strides)]
        return np.lib.stride_tricks.as_strided(a, shape, new, writeable=False)
''',
        why="Builds the strides from the shape, as if the input were contiguous: right for a fresh array, "
            "wrong values for a transposed or sliced one. Layout invariance catches it."),
    # --- requirements checked beyond the main cases -----------------------------------------
    Variant(
        "slice_compares_none_step", "slice_layout",
        loses=("test_slice_layout",),
        find="    if step is not None and step <= 0:\n", replace="    if step <= 0:\n",
        why="step=None means 1: comparing None with 0 raises TypeError."),
    Variant(
        "expand_leading_minus_one_as_one", "expand_layout",
        loses=("test_expand_layout",),
        find='            if target < 0:\n                raise ValueError(f"expand: -1 is not allowed on the new leading axis {d}")\n',
        replace="            target = 1 if target == -1 else target\n",
        why="Reads -1 on a new leading axis as 1; there is no size to keep there, and torch raises."),
    Variant(
        "expand_size1_always_stride_zero", "expand_layout",
        loses=("test_expand_layout",),
        find="        if target != size:\n", replace="        if target != size or size == 1:\n",
        why="Gives every size-1 axis stride 0 (NumPy's broadcast_to does); torch keeps the stride of a size-1 "
            "axis that stays size 1."),
    Variant(
        "view_minus_one_beside_zero_divides", "view_strides",
        loses=("test_view_strides",),
        find="        if known == 0 or numel % known != 0:", replace="        if numel % known != 0:",
        why="A -1 beside a 0 is ambiguous and must raise ValueError; numel % 0 raises ZeroDivisionError instead."),
    Variant(
        "view_no_empty_rule", "view_strides",
        loses=("test_view_strides",),
        find="        return tuple(int(s) for s in strides) if tuple(shape) == tuple(new_shape) else contiguous_strides(new_shape)\n",
        replace="        pass\n",
        why="Runs the chunk rule on a tensor with no elements, where torch keeps the strides (same shape) or "
            "uses contiguous ones."),
    Variant(
        "read_through_returns_view", "read_through_layout",
        loses=("test_read_through_layout",),
        find="    return storage[positions]",
        replace="    return np.lib.stride_tricks.as_strided(storage[offset:], shape, [s * storage.itemsize for s in strides])",
        why="Right values, but a view of the storage (as_strided without the copy): writing to it changes the storage."),
    Variant(
        "assert_view_no_messages", "assert_view",
        loses=("test_assert_view",),
        code="""assert shares_storage(base, view)
assert tuple(view.shape) == tuple(shape)
assert tuple(view.stride()) == tuple(strides)
assert view.storage_offset() == offset""",
        why="Bare asserts: a failing test then says AssertionError and nothing about what differs."),
    Variant(
        "transpose_backward_bare_array", "view_ops",
        loses=("test_view_ops_invariance",),
        find="return (np.swapaxes(grad, *ctx.dims),)", replace="return np.swapaxes(grad, *ctx.dims)",
        why="Returns the gradient itself instead of a one-element tuple: the engine pairs inputs with the rows "
            "of the array."),
    # --- correct alternatives ----------------------------------------------------------------
    Variant(
        "view_size1_axes_stride_one", "view_strides",
        find="return tuple(int(s) for s in out) if v == -1 else None",
        replace="return tuple(1 if n == 1 else int(s) for s, n in zip(out, new_shape)) if v == -1 else None",
        why="Gives every size-1 axis of the new shape the stride 1, where torch's own rule may pick another: "
            "a size-1 axis is never stepped along, so any stride is right there (a student's solution, found "
            "by a student who solved the notebook from its text)."),
    Variant(
        "contiguous_strides_cumprod", "contiguous_strides",
        code='''if len(shape) == 0:
    return ()
sizes = [max(int(n), 1) for n in shape[1:]] + [1]
return tuple(int(s) for s in np.cumprod(sizes[::-1])[::-1])''',
        why="A reversed cumulative product of the sizes after each axis (size 0 counted as 1)."),
    Variant(
        "element_offset_dot", "element_offset",
        code="return int(storage_offset + np.dot(np.asarray(index, dtype=np.int64), np.asarray(strides, dtype=np.int64)))",
        why="The sum of products as a dot product of int64 arrays."),
    Variant(
        "is_contiguous_against_contiguous_strides", "is_contiguous",
        code='''if 0 in shape:
    return True
wanted = contiguous_strides(shape)
return all(s == w for n, s, w in zip(shape, strides, wanted) if n != 1)''',
        why="Compares with contiguous_strides on the axes of size other than 1 (size-1 axes multiply by 1)."),
    Variant(
        "slice_manual_clamping", "slice_layout",
        code='''step = 1 if step is None else step
if step <= 0:
    raise ValueError("slice step must be positive")
n = shape[dim]


def clamp(value, default):
    if value is None:
        return default
    if value < 0:
        value += n
    return min(max(value, 0), n)


start, stop = clamp(start, 0), clamp(stop, n)
shape, strides = list(shape), list(strides)
offset += start * strides[dim]
shape[dim] = max(0, -(-(stop - start) // step))
strides[dim] *= step
return tuple(shape), tuple(strides), offset''',
        why="Python's slice rules written out (count from the end, clamp to [0, n]) instead of slice.indices."),
    Variant(
        "read_through_ndindex_loop", "read_through_layout",
        code='''storage = np.asarray(storage)
out = np.empty(shape, dtype=storage.dtype)
for index in np.ndindex(*shape):
    position = offset + sum(i * s for i, s in zip(index, strides))
    if not 0 <= position < storage.size:
        raise ValueError(f"position {position} is outside the storage")
    out[index] = storage[position]
return out''',
        why="One element at a time with np.ndindex, into an array of the storage's dtype."),
    Variant(
        "expand_backward_explicit_axes", "view_ops",
        find="        # adjoint of broadcast is sum\n        return (unbroadcast(grad, shape),)",
        replace='''        extra = grad.ndim - len(shape)
        axes = tuple(range(extra)) + tuple(extra + d for d, n in enumerate(shape)
                                           if n == 1 and grad.shape[extra + d] != 1)
        # adjoint of broadcast is sum
        return (grad.sum(axis=axes).reshape(shape),)''',
        why="Sums over the new leading axes and the expanded size-1 axes directly, then restores the shape."),
]

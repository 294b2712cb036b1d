"""Mistakes, correct alternatives and a torch delegation for unit 1.4 (broadcasting, saved values).

The binary operations call the student's ``unbroadcast``, and ``branched_loss`` runs the student's
``Add``, ``Mul``, ``Sum`` and ``Mean``: a mistake in one of those also loses the cells that use it,
and ``loses`` lists them too.
"""
from autograder.outside.catalogue import Variant

USERS_OF_UNBROADCAST = ("test_unbroadcast", "test_add_sub", "test_mul_div", "test_branched_loss")

VARIANTS = [
    # ---------------------------------------------------------------- broadcast_shape
    Variant(
        "broadcast_shape_left_aligned", "broadcast_shape", ("test_broadcast_shape",),
        find="padded = (1,) * (ndim - len(shape)) + tuple(shape)  # align on the right",
        replace="padded = tuple(shape) + (1,) * (ndim - len(shape))",
        why="Shapes are aligned on the right: (4,) against (3, 4) is (1, 4), not (4, 1)."),
    Variant(
        "broadcast_shape_never_raises", "broadcast_shape", ("test_broadcast_shape",),
        find="""            if result[axis] not in (1, size):
                raise ValueError(f"shapes {shapes} cannot be broadcast: axis {axis - ndim} has sizes "
                                 f"{result[axis]} and {size}, and neither is 1")
            result[axis] = size""",
        replace="""            result[axis] = max(result[axis], size)""",
        why="Taking the larger size on every axis: (3,) with (4,) gives (4,) instead of an error."),
    Variant(
        "broadcast_shape_max_of_sizes", "broadcast_shape", ("test_broadcast_shape",),
        code="""ndim = max(len(shape) for shape in shapes)
result = [1] * ndim
for shape in shapes:
    padded = (1,) * (ndim - len(shape)) + tuple(shape)
    for axis, size in enumerate(padded):
        if result[axis] != size and 1 not in (result[axis], size):
            raise ValueError(f"shapes {shapes} cannot be broadcast")
        result[axis] = max(result[axis], size)
return tuple(result)""",
        why="The larger of two compatible sizes is right except for 0: (1,) with (0,) broadcasts to (0,)."),
    Variant(
        "broadcast_shape_two_shapes_only", "broadcast_shape", ("test_broadcast_shape",),
        code="""a, b = shapes[0], shapes[-1]
ndim = max(len(a), len(b))
a = (1,) * (ndim - len(a)) + tuple(a)
b = (1,) * (ndim - len(b)) + tuple(b)
result = []
for x, y in zip(a, b):
    if x != y and 1 not in (x, y):
        raise ValueError(f"shapes {shapes} cannot be broadcast")
    result.append(y if x == 1 else x)
return tuple(result)""",
        why="Written for two shapes: a third (or a single) shape is ignored or counted twice."),
    Variant(
        "broadcast_shape_zip_truncates", "broadcast_shape", ("test_broadcast_shape",),
        code="""result = []
for sizes in zip(*[shape[::-1] for shape in shapes]):
    big = {size for size in sizes if size != 1}
    if len(big) > 1:
        raise ValueError(f"shapes {shapes} cannot be broadcast")
    result.append(big.pop() if big else 1)
return tuple(result[::-1])""",
        why="zip stops at the shortest shape: the leading axes of the longer shapes are lost."),
    Variant(
        "broadcast_shape_returns_list", "broadcast_shape", ("test_broadcast_shape",),
        find="    return tuple(result)", replace="    return result",
        why="torch.broadcast_shapes returns a torch.Size, a tuple; a list is not a shape."),
    Variant(
        "broadcast_shape_raises_runtime_error", "broadcast_shape", ("test_broadcast_shape",),
        find="raise ValueError(f\"shapes {shapes} cannot be broadcast: axis {axis - ndim} has sizes \"",
        replace="raise RuntimeError(f\"shapes {shapes} cannot be broadcast: axis {axis - ndim} has sizes \"",
        why="Copying torch's exception type: the exercise asks for ValueError."),
    # ---------------------------------------------------------------- unbroadcast
    Variant(
        "unbroadcast_without_keepdims", "unbroadcast", USERS_OF_UNBROADCAST,
        find="return grad.sum(axis=stretched, keepdims=True)  # stretched axes: summed, kept with size 1",
        replace="return grad.sum(axis=stretched)",
        why="Summing the stretched axes without keepdims: a (3, 1) input gets a (3,) gradient."),
    Variant(
        "unbroadcast_prepended_only", "unbroadcast", USERS_OF_UNBROADCAST,
        find="return grad.sum(axis=stretched, keepdims=True)  # stretched axes: summed, kept with size 1",
        replace="return grad",
        why="Forgetting the stretched size-1 axes: only the prepended axes are summed."),
    Variant(
        "unbroadcast_stretched_only", "unbroadcast", USERS_OF_UNBROADCAST,
        find="grad = grad.sum(axis=tuple(range(prepended)))  # prepended axes: summed and dropped",
        replace="grad = grad[(0,) * prepended]",
        why="Taking one copy along the prepended axes instead of summing all of them."),
    Variant(
        "unbroadcast_mean_of_copies", "unbroadcast", USERS_OF_UNBROADCAST,
        code="""grad = np.asarray(grad)
prepended = grad.ndim - len(shape)
grad = grad.mean(axis=tuple(range(prepended)))
stretched = tuple(axis for axis, size in enumerate(shape) if size == 1 and grad.shape[axis] != 1)
return grad.mean(axis=stretched, keepdims=True)""",
        why="Averaging the copies: each copy contributes its whole gradient, so they are summed."),
    Variant(
        "unbroadcast_left_aligned", "unbroadcast", USERS_OF_UNBROADCAST,
        code="""grad = np.asarray(grad)
stretched = tuple(axis for axis, size in enumerate(shape) if size == 1 and grad.shape[axis] != 1)
grad = grad.sum(axis=stretched, keepdims=True)
return grad.sum(axis=tuple(range(len(shape), grad.ndim)))""",
        why="Comparing shape with grad.shape from the left: the extra axes are at the front, not the end."),
    Variant(
        "unbroadcast_float64_accumulator", "unbroadcast", ("test_unbroadcast",),
        code="""grad = np.asarray(grad)
prepended = grad.ndim - len(shape)
grad = grad.sum(axis=tuple(range(prepended)))
stretched = tuple(axis for axis, size in enumerate(shape) if size == 1 and grad.shape[axis] != 1)
out = np.zeros(shape)
out += grad.sum(axis=stretched, keepdims=True)
return out""",
        why="Accumulating into np.zeros(shape), which is float64: a float32 gradient comes back float64."),
    # ---------------------------------------------------------------- Add, Sub
    Variant(
        "add_forgets_unbroadcast_b", "add_sub", ("test_add_sub", "test_branched_loss"),
        find="return unbroadcast(grad, a_shape), unbroadcast(grad, b_shape)",
        replace="return unbroadcast(grad, a_shape), grad",
        why="A forgotten unbroadcast on one operand: b's gradient keeps the broadcast shape."),
    Variant(
        "add_saves_inputs", "add_sub", ("test_add_sub",),
        find="""        ctx.save_for_backward(a.shape, b.shape)
        return a + b

    @staticmethod
    def backward(ctx, grad):
        a_shape, b_shape = ctx.saved_tensors""",
        replace="""        ctx.save_for_backward(a, b)
        return a + b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        a_shape, b_shape = a.shape, b.shape""",
        why="Add needs no values, only shapes: saving both arrays keeps memory alive for nothing."),
    Variant(
        "sub_no_negation", "add_sub", ("test_add_sub",),
        find="return unbroadcast(grad, a_shape), unbroadcast(-grad, b_shape)",
        replace="return unbroadcast(grad, a_shape), unbroadcast(grad, b_shape)",
        why="d(a - b)/db is -1: b's gradient is the negated upstream gradient."),
    # ---------------------------------------------------------------- Mul, Div
    Variant(
        "mul_grads_swapped", "mul_div", ("test_mul_div", "test_branched_loss"),
        find="return unbroadcast(grad * b, a.shape), unbroadcast(grad * a, b.shape)",
        replace="return unbroadcast(grad * a, a.shape), unbroadcast(grad * b, b.shape)",
        why="d(ab)/da is b: each operand's gradient needs the other operand."),
    Variant(
        "mul_forgets_unbroadcast_b", "mul_div", ("test_mul_div", "test_branched_loss"),
        find="return unbroadcast(grad * b, a.shape), unbroadcast(grad * a, b.shape)",
        replace="return unbroadcast(grad * b, a.shape), grad * a",
        why="A forgotten unbroadcast on b: its gradient has the result's shape."),
    Variant(
        "div_forgets_unbroadcast_a", "mul_div", ("test_mul_div",),
        find="return unbroadcast(grad / b, a.shape), unbroadcast(-grad * a / (b * b), b.shape)",
        replace="return grad / b, unbroadcast(-grad * a / (b * b), b.shape)",
        why="A forgotten unbroadcast on a: a 0-d numerator gets a gradient of the result's shape."),
    Variant(
        "div_saves_output", "mul_div", ("test_mul_div",),
        find="""        ctx.save_for_backward(a, b)
        return a / b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        # adjoint of broadcast is sum
        return unbroadcast(grad / b, a.shape), unbroadcast(-grad * a / (b * b), b.shape)""",
        replace="""        out = a / b
        ctx.save_for_backward(out, b)
        ctx.a_shape = a.shape
        return out

    @staticmethod
    def backward(ctx, grad):
        out, b = ctx.saved_tensors
        # adjoint of broadcast is sum
        return unbroadcast(grad / b, ctx.a_shape), unbroadcast(-grad * out / b, b.shape)""",
        why="Right gradients, wrong saved values: the output has the broadcast shape, larger than (a, b)."),
    Variant(
        "div_grad_b_sign", "mul_div", ("test_mul_div",),
        find="unbroadcast(-grad * a / (b * b), b.shape)", replace="unbroadcast(grad * a / (b * b), b.shape)",
        why="d(a/b)/db = -a/b^2: the minus sign is lost."),
    Variant(
        "div_grad_b_without_a", "mul_div", ("test_mul_div",),
        find="unbroadcast(-grad * a / (b * b), b.shape)", replace="unbroadcast(-grad / (b * b), b.shape)",
        why="d(a/b)/db = -a/b^2, not -1/b^2."),
    # ---------------------------------------------------------------- Sum, Mean
    Variant(
        "sum_expand_axes_one_by_one", "sum", ("test_sum",),
        find="""            grad = np.expand_dims(grad, ctx.axis)  # every summed axis comes back with size 1""",
        replace="""            for axis in np.atleast_1d(ctx.axis):
                grad = np.expand_dims(grad, axis)""",
        why="Putting the summed axes back one at a time in the order given: axis=(2, 0) fails."),
    Variant(
        "sum_no_expand_dims", "sum", ("test_sum",),
        find="""        if ctx.axis is not None and not ctx.keepdims:
            grad = np.expand_dims(grad, ctx.axis)  # every summed axis comes back with size 1
""",
        replace="",
        why="Broadcasting grad without putting the summed axes back aligns it on the right: wrong axes."),
    Variant(
        "sum_saves_input", "sum", ("test_sum",),
        find="""        ctx.save_for_backward(x.shape)
        return np.sum(x, axis=axis, keepdims=keepdims)""",
        replace="""        ctx.save_for_backward(x)
        return np.sum(x, axis=axis, keepdims=keepdims)""",
        why="Sum's gradient does not depend on x: save its shape, not the array."),
    Variant(
        "mean_divides_by_input_size", "mean", ("test_mean",),
        find="count = math.prod(shape[axis] for axis in axes)  # the elements that went into each mean",
        replace="count = math.prod(shape)",
        why="The divisor is the number of reduced elements, not the size of the whole input."),
    Variant(
        "mean_divides_by_output_size", "mean", ("test_mean",),
        find="count = math.prod(shape[axis] for axis in axes)  # the elements that went into each mean",
        replace="count = max(np.size(grad), 1)",
        why="The divisor is the number of elements averaged into each output, not the number of outputs."),
    Variant(
        "mean_backward_not_divided", "mean", ("test_mean", "test_branched_loss"),
        find="return np.broadcast_to(grad, shape) / count", replace="return np.broadcast_to(grad, shape)",
        why="Mean backward copied like Sum's, without the 1/k of the mean."),
    Variant(
        "mean_saves_input", "mean", ("test_mean",),
        find="""        ctx.save_for_backward(x.shape)
        return np.mean(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad):
        (shape,) = ctx.saved_tensors""",
        replace="""        ctx.save_for_backward(x)
        return np.mean(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        shape = x.shape""",
        why="Mean's gradient does not depend on x's values: save its shape, not the array."),
    # ---------------------------------------------------------------- Reshape, Transpose
    Variant(
        "reshape_backward_keeps_output_shape", "reshape_transpose", ("test_reshape_transpose",),
        find="return np.reshape(grad, shape)  # the same elements, back in the input's shape",
        replace="return grad",
        why="Reshape backward must restore the input's shape."),
    Variant(
        "reshape_saves_input", "reshape_transpose", ("test_reshape_transpose",),
        find="""        ctx.save_for_backward(x.shape)
        return np.reshape(x, shape)

    @staticmethod
    def backward(ctx, grad):
        (shape,) = ctx.saved_tensors""",
        replace="""        ctx.save_for_backward(x)
        return np.reshape(x, shape)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        shape = x.shape""",
        why="Reshape needs only the input's shape; saving the array keeps it alive for nothing."),
    Variant(
        "transpose_backward_T", "reshape_transpose", ("test_reshape_transpose",),
        find="return np.swapaxes(grad, ctx.dim0, ctx.dim1)  # swapping the same axes again undoes it",
        replace="return grad.T",
        why=".T reverses every axis: the right backward only for 2-D arrays."),
    Variant(
        "transpose_forward_T", "reshape_transpose", ("test_reshape_transpose",),
        find="        return np.swapaxes(x, dim0, dim1)\n", replace="        return x.T\n",
        why="Transpose(dim0, dim1) swaps two axes; .T reverses all of them."),
    Variant(
        "transpose_backward_identity", "reshape_transpose", ("test_reshape_transpose",),
        find="return np.swapaxes(grad, ctx.dim0, ctx.dim1)  # swapping the same axes again undoes it",
        replace="return grad",
        why="The gradient of a transpose must be transposed back."),
    Variant(
        "transpose_saves_input", "reshape_transpose", ("test_reshape_transpose",),
        find="        ctx.dim0, ctx.dim1 = dim0, dim1\n",
        replace="        ctx.dim0, ctx.dim1 = dim0, dim1\n        ctx.save_for_backward(x)\n",
        why="Transpose needs no value of x: it saves nothing."),
    # ---------------------------------------------------------------- CrossEntropy
    Variant(
        "cross_entropy_saves_logits", "cross_entropy", ("test_cross_entropy",),
        find="""        ctx.save_for_backward(exps / sums, target)  # the probabilities, not the logits""",
        replace="""        ctx.save_for_backward(logits, target)""",
        why="The fused loss saves probabilities, not logits; here backward also reads them as probabilities."),
    Variant(
        "cross_entropy_saves_logits_recomputes", "cross_entropy", ("test_cross_entropy",),
        find="""        ctx.save_for_backward(exps / sums, target)  # the probabilities, not the logits
        if reduction == "none":
            return losses
        if reduction == "sum":
            return losses.sum()
        n_counted = int(counted.sum())  # a Python int keeps float32 float32
        return losses.sum() / n_counted if n_counted else logits.dtype.type(np.nan)

    @staticmethod
    def backward(ctx, grad):
        probs, target = ctx.saved_tensors""",
        replace="""        ctx.save_for_backward(logits, target)
        if reduction == "none":
            return losses
        if reduction == "sum":
            return losses.sum()
        n_counted = int(counted.sum())  # a Python int keeps float32 float32
        return losses.sum() / n_counted if n_counted else logits.dtype.type(np.nan)

    @staticmethod
    def backward(ctx, grad):
        logits, target = ctx.saved_tensors
        exps = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs = exps / exps.sum(axis=1, keepdims=True)""",
        why="Right gradient, wrong saved values: saving the logits costs a second softmax in backward."),
    Variant(
        "cross_entropy_no_max_shift", "cross_entropy", ("test_cross_entropy_extreme",),
        find="shifted = logits - logits.max(axis=1, keepdims=True)  # every exponent <= 0",
        replace="shifted = logits",
        why="Without the max shift, exp overflows for float32 logits of magnitude 1e3."),
    Variant(
        "cross_entropy_log_of_softmax", "cross_entropy", ("test_cross_entropy_extreme",),
        find="log_p = shifted - np.log(sums)", replace="log_p = np.log(exps / sums)",
        why="log(softmax) is log(0) = -inf once a probability underflows (logits of magnitude 1e3)."),
    Variant(
        "cross_entropy_mean_over_all_rows", "cross_entropy", ("test_cross_entropy",),
        find="grad_logits /= max(int(counted.sum()), 1)  # 1/|V|; all rows are zero when |V| = 0",
        replace="grad_logits /= len(target)",
        why="The mean divides by the number of targets that are not ignored, not by N."),
    Variant(
        "cross_entropy_forward_mean_over_all_rows", "cross_entropy", ("test_cross_entropy",),
        find="n_counted = int(counted.sum())  # a Python int keeps float32 float32",
        replace="n_counted = len(target)",
        why="The mean loss divides by the number of targets that are not ignored, not by N."),
    Variant(
        "cross_entropy_mean_numpy_int_divisor", "cross_entropy", ("test_cross_entropy_extreme",),
        find="n_counted = int(counted.sum())  # a Python int keeps float32 float32",
        replace="n_counted = counted.sum()",
        why="Dividing a float32 sum by a NumPy int64 gives float64; torch keeps float32."),
    Variant(
        "cross_entropy_ignore_index_hard_coded", "cross_entropy", ("test_cross_entropy",),
        find="counted = target != ctx.ignore_index", replace="counted = target != -100",
        why="ignore_index is an argument: ignore_index=2 leaves class 2 out, not -100."),
    Variant(
        "cross_entropy_ignored_rows_kept", "cross_entropy", ("test_cross_entropy",),
        find="        grad_logits[~counted] = 0  # ignored rows are not part of the loss\n", replace="",
        why="Rows whose target is ignored get zero gradient."),
    Variant(
        "cross_entropy_none_ignores_upstream", "cross_entropy", ("test_cross_entropy", "test_cross_entropy_extreme"),
        find="return grad_logits * grad[:, None], None  # row n times its own upstream gradient",
        replace="return grad_logits, None",
        why="For reduction='none' each row is scaled by its own upstream gradient."),
    Variant(
        "cross_entropy_scalar_upstream_ignored", "cross_entropy", ("test_cross_entropy", "test_cross_entropy_extreme"),
        find="return grad_logits * grad, None", replace="return grad_logits, None",
        why="The upstream gradient of a scalar loss is not always 1: multiply by it."),
    Variant(
        "cross_entropy_onehot_assigned", "cross_entropy", ("test_cross_entropy", "test_cross_entropy_extreme"),
        find="grad_logits[np.arange(len(target)), np.where(counted, target, 0)] -= 1  # p - onehot(t)",
        replace="grad_logits[np.arange(len(target)), np.where(counted, target, 0)] = -1",
        why="= instead of -=: the target entry is p - 1, not -1."),
    Variant(
        "cross_entropy_all_ignored_divides_by_zero", "cross_entropy", ("test_cross_entropy",),
        find="grad_logits /= max(int(counted.sum()), 1)  # 1/|V|; all rows are zero when |V| = 0",
        replace="grad_logits /= int(counted.sum())",
        why="With every target ignored, 0/0 gives nan gradients and a warning; torch's gradient is zero."),
    Variant(
        "cross_entropy_all_ignored_mean_zero", "cross_entropy", ("test_cross_entropy",),
        find="return losses.sum() / n_counted if n_counted else logits.dtype.type(np.nan)",
        replace="return losses.sum() / max(n_counted, 1)",
        why="The mean over no targets is nan in torch, not 0."),
    # ---------------------------------------------------------------- branched_loss
    Variant(
        "branched_row_sum_without_keepdims", "branched_loss", ("test_branched_loss",),
        find="s = x.sum(axis=1, keepdims=True)", replace="s = x.sum(axis=1)",
        why="A (N,) row sum is aligned with the M columns, not the N rows: an error, or a wrong loss when N = M."),
    Variant(
        "branched_sum_instead_of_mean", "branched_loss", ("test_branched_loss",),
        find="return (z * s).mean() + (x * x).sum() * 0.1", replace="return (z * s).sum() + (x * x).sum() * 0.1",
        why="The first term is a mean over the N x M entries."),
    Variant(
        "branched_no_tanh", "branched_loss", ("test_branched_loss",),
        find="z = (x @ W + b).tanh()", replace="z = x @ W + b",
        why="The graph applies tanh after the affine map."),
    Variant(
        "branched_drops_third_path", "branched_loss", ("test_branched_loss",),
        find="return (z * s).mean() + (x * x).sum() * 0.1", replace="return (z * s).mean()",
        why="Leaving out the 0.1 * sum(x * x) term drops the third path from x."),
    # ---------------------------------------------------------------- concept checks
    Variant(
        "broadcast_result_left_aligned", "broadcast_result", ("test_broadcast_result",),
        find="y_grad_sum_axes = (0, 2)", replace="y_grad_sum_axes = (1, 3)",
        why="y is padded on the left: its prepended axis is axis 0 of the result."),
    Variant(
        "bias_terms_one_per_entry", "bias_grad_terms", ("test_bias_grad_terms",),
        find="terms_in_b_grad = 32", replace="terms_in_b_grad = 1",
        why="b[0] is used once per row of the batch, so its gradient sums 32 entries."),
    Variant(
        "mean_count_whole_input", "mean_count", ("test_mean_count",),
        find="mean_grad_k = 24", replace="mean_grad_k = 120",
        why="Each mean averages 4 * 6 elements, not all 120."),
    # ---------------------------------------------------------------- correct alternatives
    Variant(
        "broadcast_shape_reversed_zip_longest", "broadcast_shape",
        code="""from itertools import zip_longest
result = []
for sizes in zip_longest(*[reversed(shape) for shape in shapes], fillvalue=1):
    big = {size for size in sizes if size != 1}
    if len(big) > 1:
        raise ValueError(f"shapes {shapes} cannot be broadcast")
    result.append(big.pop() if big else 1)
return tuple(reversed(result))""",
        why="Walks the axes from the right with zip_longest, padding with 1."),
    Variant(
        "unbroadcast_loop", "unbroadcast",
        code="""grad = np.asarray(grad)
while grad.ndim > len(shape):
    grad = grad.sum(axis=0)
for axis, size in enumerate(shape):
    if size == 1:
        grad = grad.sum(axis=axis, keepdims=True)
return grad""",
        why="Sums the leading axes away one at a time, then every size-1 axis with keepdims."),
    Variant(
        "add_shapes_as_attributes", "add_sub",
        find="""        ctx.save_for_backward(a.shape, b.shape)
        return a + b

    @staticmethod
    def backward(ctx, grad):
        a_shape, b_shape = ctx.saved_tensors""",
        replace="""        ctx.a_shape, ctx.b_shape = a.shape, b.shape
        return a + b

    @staticmethod
    def backward(ctx, grad):
        a_shape, b_shape = ctx.a_shape, ctx.b_shape""",
        why="The shapes kept as ctx attributes: still no arrays saved."),
    Variant(
        "div_backward_via_quotient", "mul_div",
        find="unbroadcast(-grad * a / (b * b), b.shape)", replace="unbroadcast(-(grad / b) * (a / b), b.shape)",
        why="-a/b^2 written as -(1/b)(a/b), from the saved inputs."),
    Variant(
        "mean_backward_full", "mean",
        find="return np.broadcast_to(grad, shape) / count",
        replace="return np.full(shape, 1.0 / count, dtype=np.result_type(grad, 1.0)) * grad",
        why="Multiplies a filled array of 1/k by the (expanded) gradient: the same copy, divided."),
    Variant(
        "transpose_backward_dims_swapped", "reshape_transpose",
        find="return np.swapaxes(grad, ctx.dim0, ctx.dim1)  # swapping the same axes again undoes it",
        replace="return np.swapaxes(grad, ctx.dim1, ctx.dim0)",
        why="Swapping two axes is symmetric in its arguments."),
    Variant(
        "cross_entropy_onehot_matrix", "cross_entropy",
        find="""        grad_logits = probs.copy()  # a fresh array: the saved probabilities stay as they are
        grad_logits[np.arange(len(target)), np.where(counted, target, 0)] -= 1  # p - onehot(t)
        grad_logits[~counted] = 0  # ignored rows are not part of the loss""",
        replace="""        onehot = np.eye(probs.shape[1], dtype=probs.dtype)[np.where(counted, target, 0)]
        grad_logits = (probs - onehot) * counted[:, None]""",
        why="Builds the one-hot matrix with np.eye and masks the ignored rows by multiplication."),
    # ---------------------------------------------------------------- delegation
    Variant(
        "unbroadcast_through_torch", "unbroadcast", USERS_OF_UNBROADCAST,
        code="""import torch
return torch.from_numpy(np.ascontiguousarray(grad)).sum_to_size(shape).numpy()""",
        why="Hands the reduction to torch's sum_to_size: no points for the exercise (and the ops using it)."),
]

"""Student solutions that the grader of unit 1.2 must judge correctly.

Each variant changes one solution cell of the reference. ``loses`` names every test cell that
must lose points; later exercises reuse earlier ones (``log_softmax`` calls ``logsumexp``,
``cross_entropy`` calls ``log_softmax``, ``cross_entropy_backward`` calls ``softmax``), so a
mistake that shows on the later tests' inputs also loses there. Every other cell must keep its
points.
"""
from autograder.outside.catalogue import Variant

REDUCTION_CHECK = '''if reduction not in ("none", "mean", "sum"):
    raise ValueError(f"{reduction} is not a valid value for reduction")
'''

VARIANTS = [
    # --- logsumexp --------------------------------------------------------------------------
    Variant(
        "logsumexp_no_max_shift", "logsumexp",
        loses=("test_logsumexp", "test_log_softmax", "test_cross_entropy"),
        code='''z = np.asarray(z)
return np.log(np.sum(np.exp(z), axis=axis, keepdims=keepdims))''',
        why="The textbook formula: exp overflows for float32 logits above 88.7 (inf, an overflow warning) "
            "and underflows to log(0) for logits below -104. log_softmax and cross_entropy inherit it."),
    Variant(
        "logsumexp_no_masked_row_guard", "logsumexp",
        loses=("test_logsumexp",),
        find="    m = np.where(np.isfinite(m), m, 0)  # an all -inf row: shift by 0, not by -inf (which gives nan)\n",
        replace="",
        why="Shifts by the maximum even when it is -inf: an all -inf (fully masked) row computes "
            "-inf - (-inf) = nan with an invalid-value warning instead of returning -inf. No other "
            "exercise feeds it such a row, so only logsumexp loses."),
    Variant(
        "logsumexp_keepdims_ignored", "logsumexp",
        loses=("test_logsumexp", "test_log_softmax", "test_cross_entropy"),
        find="return out if keepdims else np.squeeze(out, axis=axis)",
        replace="return np.squeeze(out, axis=axis)",
        why="Drops the reduced axis even when keepdims=True, so z - logsumexp(z, keepdims=True) in "
            "log_softmax no longer broadcasts row by row."),
    # --- softmax ----------------------------------------------------------------------------
    Variant(
        "softmax_no_max_shift", "softmax",
        loses=("test_softmax", "test_cross_entropy_backward"),
        find="e = np.exp(z - np.max(z, axis=axis, keepdims=True))",
        replace="e = np.exp(z)",
        why="No max shift: exp(1000) overflows to inf and inf/inf is nan, with an overflow warning. "
            "The backward, which needs softmax, fails on the same float32 1e3 logits."),
    Variant(
        "softmax_axis_ignored", "softmax",
        loses=("test_softmax",),
        code='''z = np.asarray(z)
e = np.exp(z - np.max(z, axis=-1, keepdims=True))
return e / np.sum(e, axis=-1, keepdims=True)''',
        why="Hard-codes the last axis and ignores the axis argument; right for (N, C) logits, wrong for "
            "axis=0 or -2."),
    Variant(
        "softmax_sum_without_keepdims", "softmax",
        loses=("test_softmax", "test_cross_entropy_backward"),
        find="return e / np.sum(e, axis=axis, keepdims=True)",
        replace="return e / np.sum(e, axis=axis)",
        why="Drops keepdims in the denominator: an (N, C) array divided by an (N,) array broadcasts "
            "along the wrong axis (or raises), so rows are normalised by the wrong sums."),
    Variant(
        "softmax_float64_promotion", "softmax",
        loses=("test_softmax", "test_cross_entropy_backward"),
        find="z = np.asarray(z)",
        replace="z = np.asarray(z, dtype=float)",
        why="Converts the input to float64, so float32 logits give float64 probabilities (torch keeps "
            "float32), and the backward's float32 gradient becomes float64 too."),
    # --- log_softmax ------------------------------------------------------------------------
    Variant(
        "log_of_softmax", "log_softmax",
        loses=("test_log_softmax", "test_cross_entropy"),
        code="return np.log(softmax(z, axis=axis))",
        why="log(softmax(z)) instead of z - logsumexp(z): a probability that underflows to 0 (float32 "
            "logits 800 apart) gives log(0) = -inf with a divide-by-zero warning, where the true "
            "log-probability is finite. cross_entropy then returns inf on the 1e3 logits."),
    # --- cross_entropy ----------------------------------------------------------------------
    Variant(
        "ce_mean_over_all_rows", "cross_entropy",
        loses=("test_cross_entropy",),
        find="return losses.sum() / n_counted",
        replace="return losses.sum() / len(losses)",
        why="Divides the mean by N, the number of rows, instead of by the number of targets that are "
            "not ignore_index, so padding dilutes the loss."),
    Variant(
        "ce_all_ignored_returns_zero", "cross_entropy",
        loses=("test_cross_entropy",),
        find="n_counted = int(counted.sum())              # a Python int keeps float32 results float32",
        replace="n_counted = max(int(counted.sum()), 1)      # never divide by zero",
        why="Guards the division by clamping the count to 1, so a batch with every target ignored "
            "returns 0 where torch returns nan."),
    Variant(
        "ce_ignore_index_hardcoded", "cross_entropy",
        loses=("test_cross_entropy",),
        find="counted = target != ignore_index",
        replace="counted = target != -100",
        why="Compares with the default -100 instead of the ignore_index argument, so ignore_index=2 or "
            "-1 is not honoured (and -1 silently picks the last class)."),
    Variant(
        "ce_float64_promotion", "cross_entropy",
        loses=("test_cross_entropy",),
        find="n_counted = int(counted.sum())",
        replace="n_counted = counted.sum()",
        why="Divides by the NumPy int64 that np.sum of a mask returns: float32 / int64 is float64 "
            "under NumPy's promotion rules, so float32 logits give a float64 mean."),
    Variant(
        "ce_class_axis_0", "cross_entropy",
        loses=("test_cross_entropy",),
        find="log_p = log_softmax(logits, axis=-1)",
        replace="log_p = log_softmax(logits, axis=0)",
        why="Normalises over the batch axis instead of the class axis: each column sums to one, not "
            "each row. Square (N = C) logits do not even raise."),
    Variant(
        "ce_ignored_not_zeroed", "cross_entropy",
        loses=("test_cross_entropy",),
        find="losses = np.where(counted, -picked, 0)",
        replace="losses = -picked",
        why="Replaces ignored targets by class 0 to index safely, but forgets to zero their losses, so "
            "ignored samples contribute the loss of class 0."),
    # --- cross_entropy_backward -------------------------------------------------------------
    Variant(
        "backward_ignored_not_zeroed", "cross_entropy_backward",
        loses=("test_cross_entropy_backward",),
        find="    out[~counted] = 0                         # ignored rows are not part of the loss\n",
        replace="",
        why="Ignored rows keep softmax minus one-hot(0), although they are not part of the loss; "
            "their gradient must be zero."),
    Variant(
        "backward_no_mean_scale", "cross_entropy_backward",
        loses=("test_cross_entropy_backward",),
        find="        out /= n_counted                      # the 1/|V| of the mean\n",
        replace="        pass\n",
        why="Forgets that the mean's 1/|V| carries into the gradient: the 'mean' gradient is |V| times "
            "too large (the gradient of the sum)."),
    Variant(
        "backward_divides_by_N", "cross_entropy_backward",
        loses=("test_cross_entropy_backward",),
        find="out /= n_counted ",
        replace="out /= len(target)",
        why="Scales the mean's gradient by 1/N instead of 1/|V|, the mistake of ce_mean_over_all_rows "
            "made in backward."),
    Variant(
        "backward_wrong_sign", "cross_entropy_backward",
        loses=("test_cross_entropy_backward",),
        find="    return out",
        replace="    return -out",
        why="Returns one-hot minus softmax, the direction of steepest descent rather than the gradient."),
    Variant(
        "backward_ignores_upstream", "cross_entropy_backward",
        loses=("test_cross_entropy_backward",),
        find="""    if grad is not None:
        grad = np.asarray(grad, dtype=out.dtype)
        out *= grad[:, None] if reduction == "none" else grad  # one weight per row for "none"
""",
        replace="",
        why="Ignores the upstream gradient: right only at the root of the graph (grad = 1), wrong for the "
            "fused CrossEntropy of unit 1.4 inside a larger graph, and nonzero for a zero upstream."),
    Variant(
        "backward_upstream_not_per_row", "cross_entropy_backward",
        loses=("test_cross_entropy_backward",),
        find='out *= grad[:, None] if reduction == "none" else grad',
        replace="out *= grad",
        why="For 'none' grad holds one weight per row, (N,); multiplying it into (N, C) aligns it with the "
            "class axis instead (an error, or a silently wrong scaling for square logits)."),
    Variant(
        "backward_int64_count", "cross_entropy_backward",
        loses=("test_cross_entropy_backward",),
        find="        out /= n_counted                      # the 1/|V| of the mean\n",
        replace="        out = out / counted.sum()\n",
        why="Divides by the NumPy int64 count: float32 / int64 is float64, so float32 logits give a float64 "
            "gradient; the docstring says the logits' dtype."),
    Variant(
        "backward_softmax_in_place", "cross_entropy_backward",
        loses=("test_cross_entropy_backward",),
        find="    out = softmax(logits, axis=-1)            # p, a fresh array that we may change in place\n",
        replace="""    out = logits
    out -= out.max(axis=-1, keepdims=True)
    np.exp(out, out=out)
    out /= out.sum(axis=-1, keepdims=True)
""",
        why="Computes softmax in place in the caller's logits: right gradient, but the docstring says the "
            "arguments are not modified (a network needs its logits again)."),
    # --- softmax_backward ---------------------------------------------------------------------
    Variant(
        "softmax_backward_diagonal_only", "softmax_backward",
        loses=("test_softmax_backward",),
        code="""p = softmax(z, axis=axis)
return grad_out * p * (1 - p)""",
        why="Only the diagonal of the Jacobian: every p_i depends on every z_j, so the -p (p . grad_out) "
            "term is missing (the rows no longer sum to 0)."),
    Variant(
        "softmax_backward_sum_last_axis", "softmax_backward",
        loses=("test_softmax_backward",),
        find="np.sum(p * grad_out, axis=axis, keepdims=True)",
        replace="np.sum(p * grad_out, axis=-1, keepdims=True)",
        why="The inner product runs along the class axis, which is `axis`, not always the last one."),
    Variant(
        "softmax_backward_no_keepdims", "softmax_backward",
        loses=("test_softmax_backward",),
        find="np.sum(p * grad_out, axis=axis, keepdims=True)",
        replace="np.sum(p * grad_out, axis=axis)",
        why="Without keepdims the row sums align with the last axis when broadcast back: an error, or the "
            "wrong sums for square inputs."),
    Variant(
        "softmax_backward_naive_exp", "softmax_backward",
        loses=("test_softmax_backward",),
        find="    p = softmax(z, axis=axis)\n",
        replace="    p = np.exp(z) / np.sum(np.exp(z), axis=axis, keepdims=True)\n",
        why="The textbook softmax inside backward: float32 logits of magnitude 1e3 overflow (nan, warnings)."),
    Variant(
        "softmax_backward_no_upstream", "softmax_backward",
        loses=("test_softmax_backward",),
        code="""p = softmax(z, axis=axis)
return p * (1 - np.sum(p, axis=axis, keepdims=True))""",
        why="Forgets the upstream gradient: the Jacobian applied to ones, which is zero."),
    Variant(
        "softmax_backward_jacobian_matrix", "softmax_backward",
        code="""p = np.moveaxis(softmax(z, axis=axis), axis, -1)
g = np.moveaxis(grad_out, axis, -1)
J = p[..., :, None] * np.eye(p.shape[-1], dtype=p.dtype) - p[..., :, None] * p[..., None, :]
return np.moveaxis(np.einsum("...ij,...i->...j", J, g), -1, axis)""",
        why="Builds each row's Jacobian diag(p) - p p^T explicitly and multiplies: O(C^2), but correct."),
    # --- binary_cross_entropy_with_logits ---------------------------------------------------
    Variant(
        "bce_naive_log_sigmoid", "binary_cross_entropy_with_logits",
        loses=("test_binary_cross_entropy_with_logits",),
        code=REDUCTION_CHECK + '''z, y = np.asarray(z), np.asarray(y)
p = 1 / (1 + np.exp(-z))
losses = -(y * np.log(p) + (1 - y) * np.log(1 - p))
if reduction == "none":
    return losses
return losses.sum() if reduction == "sum" else losses.mean()''',
        why="The textbook form through sigmoid: exp(-z) overflows for z = -1e4, and sigmoid rounds to "
            "exactly 1 for float32 z > 16.6, so log(1 - p) = log(0); warnings and inf."),
    Variant(
        "bce_clipped_sigmoid", "binary_cross_entropy_with_logits",
        loses=("test_binary_cross_entropy_with_logits",),
        code=REDUCTION_CHECK + '''z, y = np.asarray(z), np.asarray(y)
e = np.exp(-np.abs(z))
p = np.where(z >= 0, 1 / (1 + e), e / (1 + e))
p = np.clip(p, 1e-7, 1 - 1e-7)
losses = -(y * np.log(p) + (1 - y) * np.log(1 - p))
if reduction == "none":
    return losses
return losses.sum() if reduction == "sum" else losses.mean()''',
        why="A stable sigmoid, then clipping probabilities to avoid log(0): no warning, but the loss "
            "is capped near -log(1e-7) = 16 where the true loss is 1e4 (and its gradient vanishes)."),
    # --- mse_loss and l1_loss ---------------------------------------------------------------
    Variant(
        "mse_sum_for_mean", "mse_loss",
        loses=("test_mse_loss",),
        find='return losses.sum() if reduction == "sum" else losses.mean()',
        replace="return losses.sum()",
        why="Mixes up the reductions: 'mean' returns the sum."),
    Variant(
        "mse_mean_over_rows", "mse_loss",
        loses=("test_mse_loss",),
        find="else losses.mean()",
        replace="else losses.sum() / len(losses)",
        why="Averages over rows (the batch) instead of over all elements; torch's mean divides by N*D."),
    Variant(
        "l1_sum_mean_swapped", "l1_loss",
        loses=("test_l1_loss",),
        find='return losses.sum() if reduction == "sum" else losses.mean()',
        replace='return losses.mean() if reduction == "sum" else losses.sum()',
        why="Swaps the reductions: 'sum' returns the mean and 'mean' returns the sum."),
    Variant(
        "l1_float64_promotion", "l1_loss",
        loses=("test_l1_loss",),
        find="losses = np.abs(np.asarray(pred) - np.asarray(target))",
        replace="losses = np.abs(np.asarray(pred, dtype=np.float64) - np.asarray(target, dtype=np.float64))",
        why="Computes in float64 'for accuracy', so float32 inputs give a float64 loss."),
    # --- concept checks ---------------------------------------------------------------------
    Variant(
        "confidence_log10", "confidence_losses",
        loses=("test_confidence_losses",),
        code='''loss_p09 = -np.log10(0.9)
loss_p01 = -np.log10(0.1)''',
        why="Uses the base-10 log; cross-entropy (like torch) uses the natural log."),
    Variant(
        "ignored_mean_over_all", "ignored_mean",
        loses=("test_ignored_mean",),
        code="mean_loss_with_ignored = (0.2 + 1.4 + 0.6) / 4",
        why="Counts the padding token in the divisor."),

    # --- correct alternatives (must keep full marks) -----------------------------------------
    Variant(
        "logsumexp_log_where", "logsumexp",
        code='''z = np.asarray(z)
m = np.max(z, axis=axis, keepdims=True)
shift = np.where(np.isfinite(m), m, 0)
s = np.sum(np.exp(z - shift), axis=axis, keepdims=True)
out = shift + np.log(s, out=np.full_like(s, -np.inf), where=s > 0)
return out if keepdims else np.squeeze(out, axis=axis)''',
        why="Avoids log(0) with the out/where arguments of np.log instead of np.errstate."),
    Variant(
        "softmax_via_logsumexp", "softmax",
        code='''z = np.asarray(z)
return np.exp(z - logsumexp(z, axis=axis, keepdims=True))''',
        why="softmax(z) = exp(z - logsumexp(z)): the same shift, through the first exercise."),
    Variant(
        "log_softmax_self_contained", "log_softmax",
        code='''z = np.asarray(z)
shifted = z - np.max(z, axis=axis, keepdims=True)
return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))''',
        why="(z - m) - log(sum(exp(z - m))) written out, without calling logsumexp."),
    Variant(
        "ce_logsumexp_minus_target_logit", "cross_entropy",
        code=REDUCTION_CHECK + '''logits, target = np.asarray(logits), np.asarray(target)
counted = target != ignore_index
rows = np.flatnonzero(counted)
losses = np.zeros(target.shape, dtype=logits.dtype)
losses[rows] = logsumexp(logits[rows], axis=-1) - logits[rows, target[rows]]
if reduction == "none":
    return losses
if reduction == "sum":
    return losses.sum()
return losses.sum() / rows.size if rows.size else np.array(np.nan, dtype=logits.dtype)''',
        why="CS231n's form LSE(z) - z_t on the counted rows only, into a zero buffer of the logits' dtype."),
    Variant(
        "ce_one_hot_sum", "cross_entropy",
        code=REDUCTION_CHECK + '''logits, target = np.asarray(logits), np.asarray(target)
counted = target != ignore_index
one_hot = np.arange(logits.shape[1]) == np.where(counted, target, 0)[:, None]
losses = -np.sum(np.where(one_hot & counted[:, None], log_softmax(logits, axis=1), 0), axis=1)
if reduction == "none":
    return losses
total = losses.sum()
if reduction == "sum":
    return total
n = int(np.count_nonzero(counted))  # a Python int: float32 / np.int64 would be float64
return total / n if n else total * np.nan''',
        why="H(q, p) = -sum_c q_c log p_c with a boolean one-hot q, and nan of the right dtype from total * nan."),
    Variant(
        "backward_eye_one_hot", "cross_entropy_backward",
        code=REDUCTION_CHECK + '''logits, target = np.asarray(logits), np.asarray(target)
counted = target != ignore_index
one_hot = np.eye(logits.shape[1], dtype=logits.dtype)[np.where(counted, target, 0)]
out = (softmax(logits, axis=1) - one_hot) * counted[:, None]
if reduction == "mean":
    out = out / max(int(np.count_nonzero(counted)), 1)
if grad is not None:  # a scalar, or one weight per row: np.reshape makes both a column
    out = out * (np.reshape(grad, (-1, 1)) if reduction == "none" else grad).astype(out.dtype)
return out''',
        why="One-hot rows from an identity matrix of the logits' dtype, and a mask multiply for ignored rows."),
    Variant(
        "bce_logaddexp", "binary_cross_entropy_with_logits",
        code=REDUCTION_CHECK + '''z, y = np.asarray(z), np.asarray(y)
losses = np.logaddexp(0, z) - y * z
if reduction == "none":
    return losses
return losses.sum() if reduction == "sum" else losses.mean()''',
        why="softplus(z) - y z with NumPy's stable np.logaddexp(0, z) = log(1 + e^z)."),
    Variant(
        "bce_torch_form", "binary_cross_entropy_with_logits",
        code=REDUCTION_CHECK + '''z, y = np.asarray(z), np.asarray(y)
losses = (1 - y) * z + np.maximum(-z, 0) + np.log1p(np.exp(-np.abs(z)))
if reduction == "none":
    return losses
return losses.sum() if reduction == "sum" else losses.mean()''',
        why="(1 - y) z + softplus(-z), the arrangement torch uses."),
    Variant(
        "mse_dispatch_table", "mse_loss",
        code=REDUCTION_CHECK + '''losses = np.square(np.subtract(pred, target))
return {"none": losses, "sum": np.sum(losses), "mean": np.mean(losses)}[reduction]''',
        why="np.square and a dictionary of reductions."),

    # --- delegation (no points for handing the work to torch) --------------------------------
    Variant(
        "ce_delegates_to_torch", "cross_entropy",
        loses=("test_cross_entropy",),
        code='''import torch
import torch.nn.functional as F
out = F.cross_entropy(torch.from_numpy(np.asarray(logits)), torch.from_numpy(np.asarray(target)),
                      reduction=reduction, ignore_index=ignore_index)
return out.numpy()''',
        why="Calls torch.nn.functional.cross_entropy: right values, no NumPy work, no points."),
]

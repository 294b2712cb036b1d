"""Student solutions that the grader of unit 1.5 must judge correctly.

Each variant changes one solution cell of the reference. ``loses`` names every test cell that
must lose points; later exercises reuse earlier ones (``numerical_vjp`` and ``step_size_sweep``
call ``numerical_gradient``; ``find_the_bug`` calls ``gradcheck`` and ``kink_mask``), so a
mistake that shows on the later tests' inputs also loses there. Every other cell must keep its
points.
"""
from autograder.outside.catalogue import Variant

# The honest part of the find_the_bug shortcuts below: gradcheck on every op, for the engines the shortcut
# does not cover.
_GRADCHECK_EVERY_OP = '''rng = np.random.default_rng(0)
x, y = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
positive = rng.uniform(0.5, 2.0, size=(2, 3))
for name in ("Add", "Sub", "Mul", "Div", "Neg", "Exp", "Log", "Tanh", "ReLU"):
    op = getattr(engine, name)
    binary = name in ("Add", "Sub", "Mul", "Div")
    inputs = [x, positive if name == "Div" else y] if binary else [positive if name in ("Log", "ReLU") else x]
    try:
        gradcheck((lambda p, q, op=op: op.apply(p, q)) if binary else (lambda p, op=op: op.apply(p)), inputs)
    except GradcheckError:
        return name
return None'''

VARIANTS = [
    # --- numerical_gradient -------------------------------------------------------------------
    Variant(
        "ng_one_sided", "numerical_gradient",
        loses=("test_numerical_gradient", "test_numerical_vjp", "test_step_size_sweep", "test_best_step"),
        code='''grad = np.zeros(x.shape, dtype=x.dtype)
for index in np.ndindex(x.shape):
    old = x[index]
    base = f(x)
    x[index] = old + eps
    plus = f(x)
    x[index] = old
    grad[index] = (plus - base) / eps
return grad''',
        why="The forward difference (f(x + h) - f(x)) / h: first-order, an error of h f''/2 (12.61 in the "
            "worked example instead of 12.01)."),
    Variant(
        "ng_divides_by_eps", "numerical_gradient",
        loses=("test_numerical_gradient", "test_numerical_vjp", "test_step_size_sweep"),
        find="grad[index] = (plus - minus) / (2 * eps)", replace="grad[index] = (plus - minus) / eps",
        why="Divides the central difference by h instead of 2 h: twice the gradient."),
    Variant(
        "ng_not_restored", "numerical_gradient",
        loses=("test_numerical_gradient", "test_numerical_vjp"),
        code='''grad = np.zeros(x.shape, dtype=x.dtype)
for index in np.ndindex(x.shape):
    old = x[index]
    x[index] = old + eps
    plus = f(x)
    x[index] = old - eps
    minus = f(x)
    grad[index] = (plus - minus) / (2 * eps)
return grad''',
        why="Perturbs x in place and never puts the old value back: x ends shifted by -eps everywhere, and "
            "every later coordinate is differentiated at a moved point."),
    Variant(
        "ng_restores_by_arithmetic", "numerical_gradient",
        loses=("test_numerical_gradient",),
        code='''grad = np.zeros(x.shape, dtype=x.dtype)
for index in np.ndindex(x.shape):
    x[index] += eps
    plus = f(x)
    x[index] -= 2 * eps
    minus = f(x)
    x[index] += eps
    grad[index] = (plus - minus) / (2 * eps)
return grad''',
        why="Restores x[i] as x[i] + eps - 2 eps + eps, which is not x[i] in floating point: x drifts by an ulp."),
    Variant(
        "ng_reshape_copy", "numerical_gradient",
        loses=("test_numerical_gradient",),
        code='''grad = np.zeros(x.shape, dtype=x.dtype)
flat, flat_grad = x.reshape(-1), grad.reshape(-1)
for k in range(flat.size):
    old = flat[k]
    flat[k] = old + eps
    plus = f(x)
    flat[k] = old - eps
    minus = f(x)
    flat[k] = old
    flat_grad[k] = (plus - minus) / (2 * eps)
return grad''',
        why="Perturbs x.reshape(-1), which is a copy for a transposed x and for a slice that skips part of "
            "each row: f never sees the change and the gradient of such an input is zero."),
    Variant(
        "ng_float64_result", "numerical_gradient",
        loses=("test_numerical_gradient",),
        find="grad = np.zeros(x.shape, dtype=x.dtype)", replace="grad = np.zeros(x.shape)",
        why="The gradient is always float64: a float32 x must give a float32 gradient."),
    Variant(
        "ng_ignores_eps", "numerical_gradient",
        loses=("test_numerical_gradient",),
        find="grad[index] = (plus - minus) / (2 * eps)", replace="grad[index] = (plus - minus) / (2 * 1e-6)",
        why="Always divides by 2e-6 whatever eps is (a hard-coded step); only the default case is right."),
    Variant(
        "ng_len_loop", "numerical_gradient",
        loses=("test_numerical_gradient", "test_numerical_vjp"),
        code='''grad = np.zeros(x.shape, dtype=x.dtype)
for i in range(len(x)):
    old = x[i].copy()
    x[i] = old + eps
    plus = f(x)
    x[i] = old - eps
    minus = f(x)
    x[i] = old
    grad[i] = (plus - minus) / (2 * eps)
return grad''',
        why="Loops over len(x): a 0-d x has no len, and for a 2-D x each step moves a whole row at once."),
    # --- numerical_vjp ------------------------------------------------------------------------
    Variant(
        "vjp_ignores_grad_out", "numerical_vjp",
        loses=("test_numerical_vjp",),
        code='''return numerical_gradient(lambda v: np.sum(f(v)), x, eps)''',
        why="Differentiates sum(f(x)): the VJP for an upstream gradient of ones, whatever grad_out is (a zero "
            "grad_out does not give zero)."),
    Variant(
        "vjp_grad_out_outside", "numerical_vjp",
        loses=("test_numerical_vjp",),
        code='''return np.asarray(grad_out) * numerical_gradient(lambda v: np.sum(f(v)), x, eps)''',
        why="Multiplies the gradient of sum(f) by grad_out afterwards: right only for elementwise f; for "
            "tanh(x @ W) the shapes do not even match."),
    Variant(
        "vjp_not_restored", "numerical_vjp",
        loses=("test_numerical_vjp",),
        code='''grad_out = np.asarray(grad_out)
out = np.zeros(x.shape, dtype=x.dtype)
for index in np.ndindex(x.shape):
    old = x[index]
    x[index] = old + eps
    plus = np.sum(grad_out * f(x))
    x[index] = old - eps
    minus = np.sum(grad_out * f(x))
    out[index] = (plus - minus) / (2 * eps)
return out''',
        why="Its own loop, without restoring x[i]: the caller's x comes back shifted."),
    # --- difference_errors ----------------------------------------------------------------------
    Variant(
        "errors_central_first_order", "difference_errors",
        loses=("test_difference_errors",),
        code='''central_error = 0.01 * 0.1  # the error at h = 0.1, scaled like h
forward_error = 0.01 / 2 * 12 + 0.01**2''',
        why="Scales the central error like h (0.001) instead of h^2 (0.0001)."),
    Variant(
        "errors_forward_leading_term_only", "difference_errors",
        loses=("test_difference_errors",),
        code='''central_error = 0.01**2
forward_error = 0.01 / 2 * 12''',
        why="Keeps only the leading term h f''/2 = 0.06 of the forward error; the h^2 term makes it 0.0601."),
    # --- relative_error -------------------------------------------------------------------------
    Variant(
        "re_no_floor", "relative_error",
        loses=("test_relative_error",),
        code='''a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
return float(np.max(np.abs(a - b) / (np.abs(a) + np.abs(b))))''',
        why="No floor: two zeros give 0 / 0 = nan, with an invalid-value warning."),
    Variant(
        "re_floor_added", "relative_error",
        loses=("test_relative_error",),
        code='''a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
return float(np.max(np.abs(a - b) / (np.abs(a) + np.abs(b) + 1e-12)))''',
        why="Adds the floor to the denominator instead of taking the maximum: 1e-13 vs 0 gives 0.0909, not 0.1."),
    Variant(
        "re_global_ratio", "relative_error",
        loses=("test_relative_error",),
        code='''a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a) + np.abs(b)), 1e-12))''',
        why="One ratio for the whole array: a wrong small entry hides behind a large right one."),
    Variant(
        "re_mean", "relative_error",
        loses=("test_relative_error",),
        code='''a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
return float(np.mean(np.abs(a - b) / np.maximum(np.abs(a) + np.abs(b), 1e-12)))''',
        why="The mean of the elementwise errors instead of the worst one."),
    Variant(
        "re_max_denominator", "relative_error",
        loses=("test_relative_error",),
        code='''a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
return float(np.max(np.abs(a - b) / np.maximum(np.maximum(np.abs(a), np.abs(b)), 1e-12)))''',
        why="max(|a|, |b|) in the denominator instead of |a| + |b|: another definition, twice as large."),
    Variant(
        "re_returns_array", "relative_error",
        loses=("test_relative_error",),
        code='''a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
return np.abs(a - b) / np.maximum(np.abs(a) + np.abs(b), 1e-12)''',
        why="Returns the elementwise errors, not the worst one."),
    Variant(
        "re_delegates_to_torch", "relative_error",
        loses=("test_relative_error",),
        code='''import torch
ta, tb = torch.as_tensor(np.asarray(a, dtype=np.float64)), torch.as_tensor(np.asarray(b, dtype=np.float64))
return float(torch.max(torch.abs(ta - tb) / torch.clamp(torch.abs(ta) + torch.abs(tb), min=1e-12)))''',
        why="Computes the error with torch: right values, no NumPy work, no points."),
    # --- gradcheck ------------------------------------------------------------------------------
    Variant(
        "gc_first_coordinate_only", "gradcheck",
        loses=("test_gradcheck",),
        find="        for index in coords:\n", replace="        for index in coords[:1]:\n",
        why="Compares only the first coordinate of each input: a bug anywhere else passes."),
    Variant(
        "gc_ignores_atol", "gradcheck",
        loses=("test_gradcheck",),
        find="margin = abs(a - n) - (atol + rtol * abs(n))", replace="margin = abs(a - n) - rtol * abs(n)",
        why="Drops atol: where the numeric gradient is 0 nothing is allowed, and rounding noise fails the check."),
    Variant(
        "gc_ignores_rtol", "gradcheck",
        loses=("test_gradcheck",),
        find="margin = abs(a - n) - (atol + rtol * abs(n))", replace="margin = abs(a - n) - atol",
        why="Drops rtol: large gradient entries get only the absolute tolerance 1e-5."),
    Variant(
        "gc_rtol_times_analytic", "gradcheck",
        loses=("test_gradcheck",),
        find="margin = abs(a - n) - (atol + rtol * abs(n))", replace="margin = abs(a - n) - (atol + rtol * abs(a))",
        why="Scales rtol by the analytic value |a| instead of the numeric |n|: a wrong, larger a earns a larger "
            "tolerance."),
    Variant(
        "gc_relative_error_rule", "gradcheck",
        loses=("test_gradcheck",),
        find="margin = abs(a - n) - (atol + rtol * abs(n))",
        replace="margin = abs(a - n) / max(abs(a) + abs(n), 1e-12) - rtol",
        why="Uses the relative error against rtol, not torch's |a - n| <= atol + rtol |n|: about twice as lenient "
            "and no atol near zero."),
    Variant(
        "gc_hardcoded_tolerances", "gradcheck",
        loses=("test_gradcheck",),
        find="margin = abs(a - n) - (atol + rtol * abs(n))", replace="margin = abs(a - n) - (1e-5 + 1e-3 * abs(n))",
        why="Ignores the atol and rtol arguments (always the defaults)."),
    Variant(
        "gc_ignores_eps", "gradcheck",
        loses=("test_gradcheck",),
        find="    rng = np.random.default_rng(seed)\n    arrays = ",
        replace="    rng = np.random.default_rng(seed)\n    eps = 1e-6  # torch's default\n    arrays = ",
        why="Always uses the default step 1e-6, whatever eps the caller asks for."),
    Variant(
        "gc_returns_false", "gradcheck",
        loses=("test_gradcheck", "test_gradcheck_error", "test_find_the_bug"),
        find="""            raise GradcheckError(
                f"gradcheck failed for input {k} (shape {x.shape}): worst index {index}: analytic {a!r} vs numeric "
                f"{n!r}; |a - n| = {abs(a - n):.3g} > atol + rtol * |n| = {atol + rtol * abs(n):.3g}",
                input_index=k, index=index, analytic=a, numeric=n)""",
        replace="""            return False""",
        why="Returns False instead of raising GradcheckError: a caller that does not look at the result never "
            "learns the check failed, and nothing says where."),
    Variant(
        "gc_nan_passes", "gradcheck",
        loses=("test_gradcheck", "test_gradcheck_error"),
        find="if not margin <= 0:  # nan fails too", replace="if margin > 0:",
        why="Tests 'fails' with margin > 0: a nan gradient compares false and passes."),
    Variant(
        "gc_ignores_n_samples", "gradcheck",
        loses=("test_gradcheck",),
        find="if n_samples is None or n_samples >= x.size:", replace="if True:",
        why="Checks every coordinate whatever n_samples says: 2 n evaluations of f for an input of n entries."),
    Variant(
        "gc_first_n_samples", "gradcheck",
        loses=("test_gradcheck",),
        find="picked = rng.choice(x.size, size=n_samples, replace=False)", replace="picked = np.arange(n_samples)",
        why="Samples the first n_samples coordinates instead of random ones: the same corner of every input."),
    Variant(
        "gc_unseeded_samples", "gradcheck",
        loses=("test_gradcheck",),
        find="picked = rng.choice(x.size, size=n_samples, replace=False)",
        replace="picked = np.random.default_rng().choice(x.size, size=n_samples, replace=False)",
        why="Draws the coordinates without the seed: two runs check different coordinates."),
    Variant(
        "gc_ones_upstream", "gradcheck",
        loses=("test_gradcheck",),
        find="weight = np.ones(out.shape) if out.data.size == 1 else rng.standard_normal(out.shape)",
        replace="weight = np.ones(out.shape)",
        why="Weights a non-scalar output by ones: a backward that forgets a permutation still gives the right sum."),
    Variant(
        "gc_random_weight_for_scalar", "gradcheck",
        loses=("test_gradcheck", "test_gradcheck_error"),
        find="weight = np.ones(out.shape) if out.data.size == 1 else rng.standard_normal(out.shape)",
        replace="weight = rng.standard_normal(out.shape)",
        why="Weights a one-element output by a random number too: the check still works, but the reported "
            "analytic and numeric values are scaled and no longer the gradient's."),
    Variant(
        "gc_first_input_only", "gradcheck",
        loses=("test_gradcheck", "test_gradcheck_error"),
        find="for k, (x, t) in enumerate(zip(arrays, tensors)):", replace="for k, (x, t) in enumerate(zip(arrays[:1], tensors)):",
        why="Checks only the first input."),
    Variant(
        "gc_first_failure_not_worst", "gradcheck",
        loses=("test_gradcheck_error",),
        find="if worst is None or margin > worst[0]:", replace="if worst is None:",
        why="Reports the first failing coordinate, not the one that fails by the widest margin."),
    Variant(
        "gc_nan_not_worst", "gradcheck",
        loses=("test_gradcheck_error",),
        find="margin = np.inf if np.isnan(margin) else margin", replace="margin = 0.0 if np.isnan(margin) else margin",
        why="A nan coordinate fails, but with margin 0 instead of an infinite one: another wrong coordinate is "
            "reported instead of the nan."),
    Variant(
        "gc_error_without_facts", "gradcheck",
        loses=("test_gradcheck_error",),
        find="                input_index=k, index=index, analytic=a, numeric=n)", replace="            )",
        why="Raises GradcheckError with a message only: input_index, index, analytic and numeric stay None."),
    Variant(
        "gc_flat_index_in_message", "gradcheck",
        loses=("test_gradcheck_error",),
        find="worst index {index}: analytic", replace="worst index {int(np.ravel_multi_index(index, x.shape))}: analytic",
        why="Names the flat position instead of the index tuple: 6 instead of (1, 2)."),
    Variant(
        "gc_reuses_caller_tensors", "gradcheck",
        loses=("test_gradcheck",),
        find="tensors = [Tensor(x.copy(), requires_grad=True) for x in arrays]",
        replace="tensors = [x if isinstance(x, Tensor) else Tensor(a.copy(), requires_grad=True) for x, a in zip(inputs, arrays)]",
        why="Uses the caller's Tensors as leaves: one that does not require grad gets no gradient, and backward "
            "writes into (and accumulates in) the caller's .grad."),
    Variant(
        "gc_float32", "gradcheck",
        loses=("test_gradcheck", "test_find_the_bug"),
        find="arrays = [np.array(x.data if isinstance(x, Tensor) else x, dtype=np.float64) for x in inputs]",
        replace="arrays = [np.array(x.data if isinstance(x, Tensor) else x, dtype=np.float32) for x in inputs]",
        why="Runs the check in float32: with eps = 1e-6 the central differences are rounding noise and right "
            "gradients fail."),
    Variant(
        "gc_unused_input_crashes", "gradcheck",
        loses=("test_gradcheck",),
        find="analytic = np.zeros(x.shape) if t.grad is None else t.grad", replace="analytic = t.grad",
        why="An input that does not reach the output has no .grad: indexing None raises TypeError."),
    Variant(
        "gc_no_copy_drifts", "gradcheck",
        loses=("test_gradcheck",),
        code='''rng = np.random.default_rng(seed)
arrays = [x.data if isinstance(x, Tensor) else x for x in inputs]
tensors = [Tensor(x.copy(), requires_grad=True) for x in arrays]
out = f(*tensors)
weight = np.ones(out.shape) if out.data.size == 1 else rng.standard_normal(out.shape)
out.backward(weight)
for k, (x, t) in enumerate(zip(arrays, tensors)):
    analytic = np.zeros(x.shape) if t.grad is None else t.grad

    def phi(v, k=k):
        return np.sum(weight * f(*[Tensor(v if j == k else a) for j, a in enumerate(arrays)]).data)

    if n_samples is None or n_samples >= x.size:
        coords = list(np.ndindex(x.shape))
    else:
        picked = rng.choice(x.size, size=n_samples, replace=False)
        coords = [tuple(int(i) for i in np.unravel_index(p, x.shape)) for p in np.sort(picked)]
    worst = None
    for index in coords:
        x[index] += eps
        plus = phi(x)
        x[index] -= 2 * eps
        minus = phi(x)
        x[index] += eps
        a, n = float(analytic[index]), float((plus - minus) / (2 * eps))
        margin = abs(a - n) - (atol + rtol * abs(n))
        if not margin <= 0:
            margin = np.inf if np.isnan(margin) else margin
            if worst is None or margin > worst[0]:
                worst = (margin, index, a, n)
    if worst is not None:
        _, index, a, n = worst
        raise GradcheckError(f"gradcheck failed for input {k}: worst index {index}: analytic {a!r} vs numeric {n!r}",
                             input_index=k, index=index, analytic=a, numeric=n)
return True''',
        why="Perturbs the caller's own arrays and restores them by arithmetic (+eps, -2 eps, +eps): the caller's "
            "values drift by an ulp."),
    # --- step_size_sweep ------------------------------------------------------------------------
    Variant(
        "sweep_in_float64", "step_size_sweep",
        loses=("test_step_size_sweep",),
        code='''x = np.asarray(x, dtype=np.float64)
t = Tensor(x.copy(), requires_grad=True)
f(t).backward()
errors = [np.max(np.abs(numerical_gradient(lambda v: f(Tensor(v)).data, x.copy(), eps=h) - t.grad)) for h in steps]
return np.array(errors, dtype=np.float64)''',
        why="Converts x to float64 first: a float32 sweep then shows the float64 V, not float32's."),
    Variant(
        "sweep_mean_error", "step_size_sweep",
        loses=("test_step_size_sweep",),
        find="errors = [np.max(np.abs(", replace="errors = [np.mean(np.abs(",
        why="The mean error over the coordinates instead of the largest one."),
    Variant(
        "sweep_relative_error", "step_size_sweep",
        loses=("test_step_size_sweep",),
        code='''t = Tensor(x.copy(), requires_grad=True)
f(t).backward()
errors = [relative_error(numerical_gradient(lambda v: f(Tensor(v)).data, x.copy(), eps=h), t.grad) for h in steps]
return np.array(errors, dtype=np.float64)''',
        why="Reports the relative error instead of the absolute error max |n - a| the docstring asks for."),
    Variant(
        "sweep_returns_list", "step_size_sweep",
        loses=("test_step_size_sweep",),
        find="return np.array(errors, dtype=np.float64)", replace="return errors",
        why="Returns a Python list of NumPy scalars instead of a float64 array."),
    Variant(
        "sweep_perturbs_x", "step_size_sweep",
        loses=("test_step_size_sweep",),
        code='''t = Tensor(x.copy(), requires_grad=True)
f(t).backward()
errors = []
for h in steps:
    numeric = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        x[i] += h
        plus = f(Tensor(x)).data
        x[i] -= 2 * h
        minus = f(Tensor(x)).data
        x[i] += h
        numeric[i] = (plus - minus) / (2 * h)
    errors.append(np.max(np.abs(numeric - t.grad)))
return np.array(errors, dtype=np.float64)''',
        why="Its own loop on the caller's x, restored by arithmetic: after large steps x has moved."),
    # --- best_step ------------------------------------------------------------------------------
    Variant(
        "best_step_argmax", "best_step",
        loses=("test_best_step",),
        code='''best_step = SWEEP_STEPS[np.argmax(step_size_sweep(lambda t: (t.tanh() * t.exp()).sum(), SWEEP_X, SWEEP_STEPS))]''',
        why="Picks the step with the largest error."),
    Variant(
        "best_step_float32", "best_step",
        loses=("test_best_step",),
        code='''best_step = SWEEP_STEPS[np.argmin(step_size_sweep(lambda t: (t.tanh() * t.exp()).sum(),
                                                     SWEEP_X.astype(np.float32), SWEEP_STEPS))]''',
        why="Sweeps in float32: the bottom of its V is near 3e-3, not float64's."),
    # --- kink_mask ------------------------------------------------------------------------------
    Variant(
        "kink_inclusive", "kink_mask",
        loses=("test_kink_mask",),
        code='''return np.abs(x) <= eps''',
        why="Includes |x| = eps, where one stencil point sits on the kink and the difference is exact."),
    Variant(
        "kink_off_by_eps", "kink_mask",
        loses=("test_kink_mask",),
        code='''return np.abs(x) < 2 * eps''',
        why="Uses the stencil's width 2 eps as the radius: marks coordinates whose stencil stays on one side."),
    Variant(
        "kink_positive_side_only", "kink_mask",
        loses=("test_kink_mask",),
        code='''return (x >= 0) & (x < eps)''',
        why="Forgets the negative side: x = -eps/2 also straddles the kink."),
    Variant(
        "kink_half_eps", "kink_mask",
        loses=("test_kink_mask",),
        code='''return np.abs(x) < eps / 2''',
        why="Halves the radius: misses the coordinates with eps/2 <= |x| < eps."),
    Variant(
        "kink_float_mask", "kink_mask",
        loses=("test_kink_mask",),
        code='''return (np.abs(x) < eps).astype(x.dtype)''',
        why="Returns 0.0/1.0 floats instead of a boolean mask (a float mask indexes nothing)."),
    # --- kink_value -----------------------------------------------------------------------------
    Variant(
        "kink_value_slope", "kink_value",
        loses=("test_kink_value",),
        code='''kink_value = 1.0  # relu's slope for x > 0''',
        why="Gives the analytic slope 1, not the central difference (x + h) / 2h = 0.65."),
    # --- find_the_bug ---------------------------------------------------------------------------
    Variant(
        "ftb_tensor_operators", "find_the_bug",
        loses=("test_find_the_bug",),
        find='''        "Add": (lambda a, b: engine.Add.apply(a, b), [x, y]),
        "Sub": (lambda a, b: engine.Sub.apply(a, b), [x, y]),
        "Mul": (lambda a, b: engine.Mul.apply(a, b), [x, y]),
        "Div": (lambda a, b: engine.Div.apply(a, b), [x, positive]),
        "Neg": (lambda a: engine.Neg.apply(a), [x]),
        "Exp": (lambda a: engine.Exp.apply(a), [x]),
        "Log": (lambda a: engine.Log.apply(a), [positive]),
        "Tanh": (lambda a: engine.Tanh.apply(a), [x]),
        "ReLU": (lambda a: engine.ReLU.apply(a), [away_from_kink]),''',
        replace='''        "Add": (lambda a, b: a + b, [x, y]),
        "Sub": (lambda a, b: a - b, [x, y]),
        "Mul": (lambda a, b: a * b, [x, y]),
        "Div": (lambda a, b: a / b, [x, positive]),
        "Neg": (lambda a: -a, [x]),
        "Exp": (lambda a: a.exp(), [x]),
        "Log": (lambda a: a.log(), [positive]),
        "Tanh": (lambda a: a.tanh(), [x]),
        "ReLU": (lambda a: a.relu(), [away_from_kink]),''',
        why="Probes with the Tensor operators, which call the engine of part 2, not the engine under test: "
            "every check passes and the answer is always None."),
    Variant(
        "ftb_same_inputs", "find_the_bug",
        loses=("test_find_the_bug",),
        find='''        "Mul": (lambda a, b: engine.Mul.apply(a, b), [x, y]),''',
        replace='''        "Mul": (lambda a: engine.Mul.apply(a, a), [x]),''',
        why="Probes Mul with a * a: both gradients are equal there, so a rule that swaps them passes."),
    Variant(
        "ftb_log_negative", "find_the_bug",
        loses=("test_find_the_bug",),
        find='''        "Log": (lambda a: engine.Log.apply(a), [positive]),''',
        replace='''        "Log": (lambda a: engine.Log.apply(a), [x]),''',
        why="Probes Log with negative inputs: nan values and an invalid-value warning, and Log is blamed on a "
            "correct engine."),
    Variant(
        "ftb_relu_on_kink", "find_the_bug",
        loses=("test_find_the_bug",),
        find='''        "ReLU": (lambda a: engine.ReLU.apply(a), [away_from_kink]),''',
        replace='''        "ReLU": (lambda a: engine.ReLU.apply(a), [np.round(x, 0)]),''',
        why="Probes ReLU at rounded inputs, several exactly 0: the stencil straddles the kink and a correct "
            "ReLU fails the check."),
    Variant(
        "ftb_binary_ops_only", "find_the_bug",
        loses=("test_find_the_bug",),
        code='''rng = np.random.default_rng(0)
x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
positive = rng.uniform(0.5, 2.0, size=(3, 4))
for name, b in [("Add", y), ("Sub", y), ("Mul", y), ("Div", positive)]:
    try:
        gradcheck(lambda a, c, op=getattr(engine, name): op.apply(a, c), [x, b])
    except GradcheckError:
        return name
return None''',
        why="Probes only the binary operations: a bug in Neg, Exp, Log, Tanh or ReLU is never found."),
    Variant(
        "ftb_reads_closure", "find_the_bug",
        loses=("test_find_the_bug",),
        code='''for name in ("Add", "Sub", "Mul", "Div", "Neg", "Exp", "Log", "Tanh", "ReLU"):
    backward = getattr(getattr(engine, name), "back" + "ward")
    cells = getattr(backward, "__clo" + "sure__") or ()
    names = getattr(backward, "__co" + "de__").co_freevars
    found = dict(zip(names, [c.cell_contents for c in cells])).get("bro" + "ken")
    if isinstance(found, str):
        return found
return None''',
        why="Reads the name of the broken op out of the closure of the engine's backward functions (attribute "
            "names built at run time) instead of running a gradient check.",
        flagged=("dynamic-lookup",)),
    Variant(
        "ftb_replays_seed", "find_the_bug",
        loses=("test_find_the_bug",),
        code='''scope = globals()
if engine is scope["PLANT" + "ED"]:
    candidates = scope["PLANTED_" + "BUGS"]
    return sorted(candidates)[scope["student_" + "seed"]() % len(candidates)]
''' + _GRADCHECK_EVERY_OP,
        why="Replays the choice of the planted bug (the candidates sorted, indexed by the student seed) for our "
            "engine, and runs gradient checks only on the others."),
    Variant(
        "ftb_matches_digest", "find_the_bug",
        loses=("test_find_the_bug",),
        code='''import hashlib
scope = globals()
if engine is scope["PLANT" + "ED"]:
    digest = scope["PLANTED_" + "DIGEST"]
    for name in ("Add", "Sub", "Mul", "Div", "Neg", "Exp", "Log", "Tanh", "ReLU"):
        if hashlib.sha256(name.lower().encode()).hexdigest() == digest:
            return name
''' + _GRADCHECK_EVERY_OP,
        why="Finds our engine's broken op by hashing the nine names and comparing with a stored digest of the "
            "answer, and runs gradient checks only on the other engines."),
    Variant(
        "ftb_compares_code", "find_the_bug",
        loses=("test_find_the_bug",),
        code='''reference = globals()["CORRECT_" + "ENGINE"]
for name in ("Add", "Sub", "Mul", "Div", "Neg", "Exp", "Log", "Tanh", "ReLU"):
    mine = getattr(getattr(engine, name), "backward").__code__
    right = getattr(getattr(reference, name), "backward").__code__
    if (mine.co_code, mine.co_names) != (right.co_code, right.co_names):
        return name
return None''',
        why="Compares the bytecode of each backward with the correct engine's instead of running the op: every "
            "engine disguises its rules differently, so the code of a right rule differs too."),
    Variant(
        "ftb_hard_coded", "find_the_bug",
        loses=("test_find_the_bug",),
        code='''return "Tanh"  # what gradcheck said about my engine''',
        why="Types in the answer found for one engine: wrong for the correct engine and for every other bug."),
    # --- correct alternatives -------------------------------------------------------------------
    Variant(
        "ng_flat_iterator", "numerical_gradient",
        code='''grad = np.zeros(x.shape, dtype=x.dtype)
for k in range(x.size):
    old = x.flat[k]
    x.flat[k] = old + eps
    plus = f(x)
    x.flat[k] = old - eps
    minus = f(x)
    x.flat[k] = old
    grad.flat[k] = (plus - minus) / (2 * eps)
return grad''',
        why="x.flat indexes the array in C order and writes through, also for non-contiguous x."),
    Variant(
        "ng_perturbs_a_copy", "numerical_gradient",
        code='''grad = np.zeros_like(x)
for index in np.ndindex(x.shape):
    v = x.copy()
    v[index] = x[index] + eps
    plus = f(v)
    v[index] = x[index] - eps
    minus = f(v)
    grad[index] = (plus - minus) / (2 * eps)
return grad''',
        why="Never touches x: each evaluation sees a perturbed copy."),
    Variant(
        "vjp_own_loop", "numerical_vjp",
        code='''grad_out = np.asarray(grad_out)
out = np.zeros(x.shape, dtype=x.dtype)
for index in np.ndindex(x.shape):
    v = x.copy()
    v[index] = x[index] + eps
    plus = np.asarray(f(v))
    v[index] = x[index] - eps
    minus = np.asarray(f(v))
    out[index] = np.sum(grad_out * (plus - minus)) / (2 * eps)
return out''',
        why="Differences the whole output first, then weights by grad_out: the same VJP, other roundings."),
    Variant(
        "re_where_floor", "relative_error",
        code='''a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
diff, size = np.abs(a - b), np.abs(a) + np.abs(b)
ratio = diff / np.where(size < 1e-12, 1e-12, size)
return float(ratio.max())''',
        why="The floor with np.where instead of np.maximum."),
    Variant(
        "gc_vectorised_compare", "gradcheck",
        code='''rng = np.random.default_rng(seed)
arrays = [np.array(x.data if isinstance(x, Tensor) else x, dtype=np.float64) for x in inputs]
leaves = [Tensor(a.copy(), requires_grad=True) for a in arrays]
out = f(*leaves)
w = np.ones(out.shape) if out.data.size == 1 else rng.standard_normal(out.shape)
out.backward(w)
for k, x in enumerate(arrays):
    ana = np.zeros_like(x) if leaves[k].grad is None else leaves[k].grad
    flat = np.arange(x.size) if n_samples is None or n_samples >= x.size else np.sort(
        rng.choice(x.size, n_samples, replace=False))
    where = [tuple(int(i) for i in np.unravel_index(p, x.shape)) for p in flat]
    num = np.empty(len(where))
    for j, ix in enumerate(where):
        values = []
        for step in (eps, -eps):
            moved = x.copy()
            moved[ix] = x[ix] + step
            args = [Tensor(moved if i == k else b) for i, b in enumerate(arrays)]
            values.append(np.sum(w * f(*args).data))
        num[j] = (values[0] - values[1]) / (2 * eps)
    got = np.array([ana[ix] for ix in where])
    with np.errstate(invalid="ignore"):
        margin = np.abs(got - num) - (atol + rtol * np.abs(num))
    margin = np.where(np.isnan(margin), np.inf, margin)
    if np.any(margin > 0):
        j = int(np.argmax(margin))
        raise GradcheckError(f"input {k} fails at {where[j]}: analytic={got[j]:.8g}, numeric={num[j]:.8g}",
                             k, where[j], float(got[j]), float(num[j]))
return True''',
        why="Collects every checked coordinate, then compares them at once with NumPy; perturbs copies."),
    Variant(
        "sweep_own_loop", "step_size_sweep",
        code='''leaf = Tensor(np.array(x), requires_grad=True)
f(leaf).backward()
out = np.empty(len(steps))
for k, h in enumerate(steps):
    numeric = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        v = x.copy()
        v[i] = x[i] + h
        plus = f(Tensor(v)).data
        v[i] = x[i] - h
        minus = f(Tensor(v)).data
        numeric[i] = (plus - minus) / (2 * h)
    out[k] = np.abs(numeric - leaf.grad).max()
return out''',
        why="Its own central differences on copies, without numerical_gradient."),
    Variant(
        "kink_two_sided", "kink_mask",
        code='''return (x - eps < 0) & (x + eps > 0)''',
        why="The definition itself: the two stencil points on different sides of 0."),
    Variant(
        "ftb_positive_inputs_everywhere", "find_the_bug",
        code='''rng = np.random.default_rng(1)
a, b = rng.uniform(0.5, 2.0, size=(2, 5)), rng.uniform(0.5, 2.0, size=(2, 5))
found = []
for name in ("Add", "Sub", "Mul", "Div", "Neg", "Exp", "Log", "Tanh", "ReLU"):
    op = getattr(engine, name)
    binary = name in ("Add", "Sub", "Mul", "Div")
    try:
        gradcheck((lambda p, q, op=op: op.apply(p, q)) if binary else (lambda p, op=op: op.apply(p)),
                  [a, b] if binary else [a])
    except GradcheckError:
        found.append(name)
return found[0] if found else None''',
        why="Positive inputs for every op (inside every domain, far from ReLU's kink), checking all nine."),
]

"""Student solutions that the grader of unit 1.1 must judge correctly.

Each variant changes one solution cell of the reference. ``loses`` names every test cell that
must lose points; later exercises reuse earlier ones (``mlp_logits`` calls ``linear`` and, by
default, ``relu``; ``silu`` and ``sigmoid_backward`` call ``sigmoid``), so a mistake that shows
on the later tests' inputs also loses there. Every other cell must keep its points.
"""
from autograder.outside.catalogue import Variant

VARIANTS = [
    # --- linear -----------------------------------------------------------------------------
    Variant(
        "linear_W_not_transposed", "linear",
        loses=("test_linear", "test_mlp_logits"),
        find="y = np.matmul(x, np.swapaxes(W, -1, -2))",
        replace="y = np.matmul(x, W)",
        why="Multiplies by W instead of W^T: PyTorch stores the weight as (out, in). Raises when in != out and "
            "silently computes another layer when W is square; mlp_logits inherits it."),
    Variant(
        "linear_W_times_x", "linear",
        loses=("test_linear", "test_mlp_logits"),
        code='''y = np.matmul(W, x)
return y if b is None else y + b''',
        why="The textbook W x for one column vector: right for a 1-D x, but a batch of rows (N, in) does not "
            "fit W @ x (or, when N = in, mixes samples instead of features)."),
    # --- relu -------------------------------------------------------------------------------
    Variant(
        "relu_in_place", "relu",
        loses=("test_relu",),
        code='''x = np.asarray(x)
x[x < 0] = 0
return x''',
        why="Zeroes the negative entries of the caller's array in place: right values, but the input (in a "
            "network, the pre-activation that backward needs) is destroyed."),
    Variant(
        "relu_mask_multiply", "relu",
        loses=("test_relu",),
        code="return x * (x > 0)",
        why="x * (x > 0) multiplies -inf by 0, which is nan (with an invalid-value warning), where relu(-inf) = 0."),
    # --- sigmoid ----------------------------------------------------------------------------
    Variant(
        "sigmoid_naive", "sigmoid",
        loses=("test_sigmoid", "test_silu", "test_sigmoid_backward"),
        code="return 1 / (1 + np.exp(-x))",
        why="The textbook formula: exp(-x) overflows for x = -1e4 (and float32 x < -88.7) with an overflow "
            "warning. silu and sigmoid_backward, which call sigmoid, inherit the warning."),
    Variant(
        "sigmoid_where_both_branches", "sigmoid",
        loses=("test_sigmoid", "test_silu", "test_sigmoid_backward"),
        code="return np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))",
        why="The two stable branches, but np.where evaluates both for every element, so exp(-x) still "
            "overflows for very negative x and exp(x) for very positive x."),
    Variant(
        "sigmoid_delegates_to_torch", "sigmoid",
        loses=("test_sigmoid", "test_silu", "test_sigmoid_backward"),
        code='''import torch
return torch.sigmoid(torch.as_tensor(np.asarray(x))).numpy()''',
        why="Calls torch.sigmoid: right values, no NumPy work, no points; silu and sigmoid_backward call it too."),
    # --- silu -------------------------------------------------------------------------------
    Variant(
        "silu_naive", "silu",
        loses=("test_silu",),
        code="return x / (1 + np.exp(-x))",
        why="x / (1 + exp(-x)) is x sigmoid(x) with the textbook sigmoid: exp(-x) overflows for x = -1e4."),
    # --- gelu_tanh --------------------------------------------------------------------------
    Variant(
        "gelu_exact_erf", "gelu_tanh",
        loses=("test_gelu_tanh",),
        code='''import math
erf = np.vectorize(math.erf)
return (0.5 * x * (1 + erf(x / math.sqrt(2.0)))).astype(np.asarray(x).dtype)''',
        why="The exact GELU x Phi(x) with erf, F.gelu's default, instead of the tanh approximation the task "
            "asks for: off by up to 5e-4."),
    Variant(
        "gelu_float64_constant", "gelu_tanh",
        loses=("test_gelu_tanh",),
        find="c = float(np.sqrt(2.0 / np.pi))",
        replace="c = np.sqrt(2.0 / np.pi)",
        why="np.sqrt returns a NumPy float64 scalar, which NumPy 2 does not treat as weak: float32 inputs "
            "give a float64 result, where torch keeps float32."),
    Variant(
        "gelu_sigmoid_approximation", "gelu_tanh",
        loses=("test_gelu_tanh",),
        code="return x * sigmoid(1.702 * x)",
        why="The other common approximation, x sigmoid(1.702 x): a different function, off by up to 2e-2."),
    # --- mlp_logits -------------------------------------------------------------------------
    Variant(
        "mlp_activation_on_logits", "mlp_logits",
        loses=("test_mlp_logits",),
        code="return activation(linear(activation(linear(x, W1, b1)), W2, b2))",
        why="Applies the activation after the last layer too: a ReLU there forbids negative logits."),
    Variant(
        "mlp_ignores_activation", "mlp_logits",
        loses=("test_mlp_logits",),
        code="return linear(relu(linear(x, W1, b1)), W2, b2)",
        why="Hard-codes relu and ignores the activation argument; right only for the default."),
    # --- linear_backward --------------------------------------------------------------------
    Variant(
        "linear_backward_grad_b_axis0", "linear_backward",
        loses=("test_linear_backward",),
        find="grad_b = G.sum(axis=0)",
        replace="grad_b = np.sum(grad_out, axis=0)",
        why="Sums the bias gradient over the first axis only: right for (N, out), but a (batch, time, out) "
            "upstream gradient leaves a (time, out) grad_b, and a 1-D one a scalar."),
    Variant(
        "linear_backward_grad_W_transposed", "linear_backward",
        loses=("test_linear_backward",),
        find="grad_W = G.T @ X ",
        replace="grad_W = X.T @ G ",
        why="X^T G is the gradient of W^T, shape (in, out); W is (out, in), so its gradient is G^T X."),
    Variant(
        "linear_backward_grad_x_W_transposed", "linear_backward",
        loses=("test_linear_backward",),
        find="grad_x = np.matmul(grad_out, W) ",
        replace="grad_x = np.matmul(grad_out, W.T) ",
        why="Multiplies the upstream gradient by W^T as in the forward pass; the VJP of x W^T is g W."),
    Variant(
        "linear_backward_2d_only", "linear_backward",
        loses=("test_linear_backward",),
        code='''return np.matmul(grad_out, W), grad_out.T @ x, grad_out.sum(axis=0)''',
        why="The 2-D formulas without flattening the leading axes: 1-D inputs give a dot product instead of an "
            "outer product, and 3-D ones do not fit."),
    Variant(
        "linear_backward_delegates_to_torch", "linear_backward",
        loses=("test_linear_backward",),
        code='''import torch
xt = torch.as_tensor(np.asarray(x)).requires_grad_(True)
Wt = torch.as_tensor(np.asarray(W)).requires_grad_(True)
bt = torch.zeros(W.shape[0], dtype=Wt.dtype, requires_grad=True)
y = torch.nn.functional.linear(xt, Wt, bt)
y.backward(torch.as_tensor(np.asarray(grad_out)))
return xt.grad.numpy(), Wt.grad.numpy(), bt.grad.numpy()''',
        why="Lets torch autograd derive the gradients: right values, nothing derived by hand, no points."),
    # --- relu_backward ----------------------------------------------------------------------
    Variant(
        "relu_backward_ge_at_kink", "relu_backward",
        loses=("test_relu_backward",),
        find="np.where(x > 0, grad_out, 0)",
        replace="np.where(x >= 0, grad_out, 0)",
        why="Passes the gradient at x == 0; torch's relu gradient at the kink is 0."),
    Variant(
        "relu_backward_no_upstream", "relu_backward",
        loses=("test_relu_backward",),
        code="return (x > 0).astype(x.dtype)",
        why="Returns the local derivative relu'(x) and forgets to multiply by the upstream gradient."),
    Variant(
        "relu_backward_in_place", "relu_backward",
        loses=("test_relu_backward",),
        code='''grad_out = np.asarray(grad_out)
grad_out[x <= 0] = 0
return grad_out''',
        why="Zeroes entries of the upstream gradient in place: right values, but an upstream gradient shared "
            "with another branch of the network is corrupted."),
    # --- sigmoid_backward -------------------------------------------------------------------
    Variant(
        "sigmoid_backward_uses_x", "sigmoid_backward",
        loses=("test_sigmoid_backward",),
        code="return grad_out * x * (1 - x)",
        why="Writes sigma'(x) = x (1 - x), with the input where the output sigma(x) belongs."),
    Variant(
        "sigmoid_backward_naive_exp", "sigmoid_backward",
        loses=("test_sigmoid_backward",),
        code='''e = np.exp(-x)
return grad_out * e / (1 + e) ** 2''',
        why="e^{-x} / (1 + e^{-x})^2 straight from the derivative: exp overflows for x = -1e3 in float64, with "
            "an overflow warning (and inf / inf = nan)."),
    # --- tanh_backward ----------------------------------------------------------------------
    Variant(
        "tanh_backward_sech_squared", "tanh_backward",
        loses=("test_tanh_backward",),
        code="return grad_out / np.cosh(x) ** 2",
        why="sech^2 x = 1 / cosh^2 x is right in exact arithmetic, but cosh overflows for |x| > 710 in float64 "
            "(and 89 in float32), with a warning."),
    Variant(
        "tanh_backward_uses_x", "tanh_backward",
        loses=("test_tanh_backward",),
        code="return grad_out * (1 - x * x)",
        why="1 - x^2 instead of 1 - tanh(x)^2."),
    # --- silu_backward, gelu_tanh_backward ----------------------------------------------------
    Variant(
        "silu_backward_sigma_only", "silu_backward",
        loses=("test_silu_backward",),
        code="return grad_out * sigmoid(x)",
        why="Differentiates x sigma(x) as if x were a constant factor: the product rule's x sigma'(x) term is missing."),
    Variant(
        "silu_backward_naive_exp", "silu_backward",
        loses=("test_silu_backward",),
        find="    s = sigmoid(x)\n",
        replace="    s = 1 / (1 + np.exp(-x))\n",
        why="The textbook sigmoid inside the derivative: exp(-x) overflows for x = -1e3 (a warning, and the "
            "docstring asks for none)."),
    Variant(
        "silu_backward_no_upstream", "silu_backward",
        loses=("test_silu_backward",),
        code="""s = sigmoid(x)
return s * (1 + x * (1 - s))""",
        why="Returns the local derivative silu'(x) and forgets to multiply by grad_out."),
    Variant(
        "gelu_backward_missing_inner_chain", "gelu_tanh_backward",
        loses=("test_gelu_tanh_backward",),
        find="0.5 * x * (1 - t * t) * du_dx",
        replace="0.5 * x * (1 - t * t)",
        why="Stops the chain rule at tanh: d tanh(u)/dx = (1 - t^2) du/dx, and du/dx is not 1."),
    Variant(
        "gelu_backward_float64_constant", "gelu_tanh_backward",
        loses=("test_gelu_tanh_backward",),
        find="c = float(np.sqrt(2.0 / np.pi))",
        replace="c = np.sqrt(2.0 / np.pi)",
        why="A NumPy float64 scalar promotes float32 inputs to a float64 gradient; the docstring says x's dtype."),
    Variant(
        "gelu_backward_product_rule_half", "gelu_tanh_backward",
        loses=("test_gelu_tanh_backward",),
        find="0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du_dx",
        replace="0.5 * x * (1 - t * t) * du_dx",
        why="Differentiates only the tanh factor: the product rule's 0.5 (1 + t) term is missing."),
    Variant(
        "silu_backward_two_terms", "silu_backward",
        code="""s = sigmoid(x)
return grad_out * s + grad_out * x * s * sigmoid(-x)""",
        why="The product rule term by term: sigma(x) + x sigma(x) sigma(-x)."),
    # --- collapse_linear_stack --------------------------------------------------------------
    Variant(
        "collapse_wrong_order", "collapse_linear_stack",
        loses=("test_collapse_linear_stack",),
        find="W_total, b_total = W @ W_total, W @ b_total + b",
        replace="W_total, b_total = W_total @ W, W @ b_total + b",
        why="Multiplies the layers' matrices in the order they are applied, W1 W2; the first layer acts first, "
            "so it stands on the right: W2 W1."),
    Variant(
        "collapse_biases_added", "collapse_linear_stack",
        loses=("test_collapse_linear_stack",),
        find="W_total, b_total = W @ W_total, W @ b_total + b",
        replace="W_total, b_total = W @ W_total, b_total + b",
        why="Adds the biases as they are; an earlier layer's bias passes through the later weights: W2 b1 + b2."),
    Variant(
        "collapse_none_bias_unhandled", "collapse_linear_stack",
        loses=("test_collapse_linear_stack",),
        find="        b = np.zeros(W.shape[0], dtype=W.dtype) if b is None else b\n",
        replace="",
        why="Forgets that a bias may be None (no bias): W @ b_total + None raises a TypeError."),
    # --- mlp_parameter_count ----------------------------------------------------------------
    Variant(
        "param_count_no_biases", "mlp_parameter_count",
        loses=("test_mlp_parameter_count",),
        code="return sum(n_in * n_out for n_in, n_out in zip(sizes[:-1], sizes[1:]))",
        why="Counts the weights only and forgets the biases."),
    Variant(
        "param_count_bias_flag_ignored", "mlp_parameter_count",
        loses=("test_mlp_parameter_count",),
        code="return sum(n_in * n_out + n_out for n_in, n_out in zip(sizes[:-1], sizes[1:]))",
        why="Always counts the biases, also for bias=False."),
    Variant(
        "param_count_input_biases", "mlp_parameter_count",
        loses=("test_mlp_parameter_count",),
        code="return sum(n_in * n_out + (n_in if bias else 0) for n_in, n_out in zip(sizes[:-1], sizes[1:]))",
        why="Gives each layer a bias per input instead of per output."),
    # --- concept checks ---------------------------------------------------------------------
    Variant(
        "linear_params_no_bias", "linear_params",
        loses=("test_linear_params",),
        code="linear_768_3072_params = 768 * 3072",
        why="Forgets the 3072 biases."),
    Variant(
        "linear_params_bias_per_input", "linear_params",
        loses=("test_linear_params",),
        code="linear_768_3072_params = 768 * 3072 + 768",
        why="Counts a bias per input feature."),
    Variant(
        "logit_gap_probability_difference", "logits_probabilities",
        loses=("test_logits_probabilities",),
        code='''p_from_logit = 1 / (1 + np.exp(-2.0))
logit_for_p = np.log(0.8 / 0.2)
logit_gap = 0.7 - 0.1''',
        why="Treats logits as probabilities: the difference of two logits is the log of the ratio of their "
            "probabilities, not the difference of the probabilities."),
    Variant(
        "logit_is_log_p", "logits_probabilities",
        loses=("test_logits_probabilities",),
        code='''p_from_logit = np.exp(2.0) / (1 + np.exp(2.0))
logit_for_p = np.log(0.8)
logit_gap = np.log(0.7 / 0.1)''',
        why="Takes the logit of p to be log p; a binary logit is the log-odds log(p / (1 - p))."),

    # --- correct alternatives (must keep full marks) -----------------------------------------
    Variant(
        "linear_einsum", "linear",
        code='''y = np.einsum("...i,oi->...o", x, W)
return y if b is None else y + b''',
        why="np.einsum with the weight's (out, in) layout spelled out."),
    Variant(
        "sigmoid_tanh_identity", "sigmoid",
        code="return 0.5 * (1 + np.tanh(0.5 * x))",
        why="sigma(x) = (1 + tanh(x / 2)) / 2: tanh saturates without overflow, and its rounding near 0 is far "
            "below the tolerance."),
    Variant(
        "sigmoid_masked_branches", "sigmoid",
        code='''x = np.asarray(x)
e = np.exp(-np.abs(x))
out = np.empty_like(e)
pos = x >= 0
out[pos] = 1 / (1 + e[pos])
out[~pos] = e[~pos] / (1 + e[~pos])
return out''',
        why="The stable branches through boolean masks into a preallocated array of x's dtype."),
    Variant(
        "gelu_math_constant", "gelu_tanh",
        code='''import math
inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
return 0.5 * x * (1 + np.tanh(inner))''',
        why="A Python float constant from math and x ** 3: the same formula, float32 stays float32."),
    Variant(
        "linear_backward_einsum", "linear_backward",
        code='''batch_axes = tuple(range(np.ndim(x) - 1))  # every leading axis, none for a 1-D x
grad_x = np.einsum("...o,oi->...i", grad_out, W)
grad_W = np.tensordot(grad_out, x, axes=(batch_axes, batch_axes))
grad_b = np.sum(grad_out, axis=batch_axes)
return grad_x, grad_W, grad_b''',
        why="Contracts the leading axes directly with np.tensordot and np.sum over a tuple of axes, without "
            "flattening; for a 1-D x the tuple is empty and tensordot is the outer product."),
    Variant(
        "relu_backward_mask_multiply", "relu_backward",
        code="return grad_out * (x > 0)",
        why="The upstream gradient times the boolean mask [x > 0]; a bool factor keeps float32."),
    Variant(
        "tanh_backward_factored", "tanh_backward",
        code='''t = np.tanh(x)
return grad_out * ((1 - t) * (1 + t))''',
        why="1 - t^2 as (1 - t)(1 + t)."),
    Variant(
        "collapse_from_identity", "collapse_linear_stack",
        code='''first = layers[0][0]
W_total = np.eye(first.shape[1], dtype=first.dtype)
b_total = np.zeros(first.shape[1], dtype=first.dtype)
for W, b in layers:
    W_total = W @ W_total
    b_total = W @ b_total if b is None else W @ b_total + b
return W_total, b_total''',
        why="Starts from the identity map (I, 0) and composes every layer onto it."),
    Variant(
        "param_count_loop", "mlp_parameter_count",
        code='''total = 0
for k in range(len(sizes) - 1):
    total += sizes[k] * sizes[k + 1]
    if bias:
        total += sizes[k + 1]
return total''',
        why="An explicit loop over the layers."),
]

"""Reference solutions for units 1.1 and 1.2: affine maps, nonlinearities, softmax and losses.

Everything here is NumPy only and follows PyTorch's semantics and dtypes: a float32 input gives
a float32 result (NumPy 2 keeps Python scalars "weak", so ``0.5 * x`` stays float32). Arrays may
have any layout; nothing here depends on contiguity.

Notation: ``x`` is an input, ``W`` a weight of shape ``(out, in)``, ``b`` a bias of shape
``(out,)``, ``z`` logits, ``g`` (``grad_out``) the upstream gradient dL/dy of some scalar loss L.
"""
import numpy as np

__all__ = [
    "linear", "relu", "sigmoid", "silu", "gelu_tanh", "mlp_logits", "linear_backward", "relu_backward",
    "sigmoid_backward", "tanh_backward", "collapse_linear_stack", "mlp_parameter_count", "logsumexp", "softmax",
    "log_softmax", "naive_softmax", "cross_entropy", "cross_entropy_backward", "binary_cross_entropy_with_logits",
    "mse_loss", "l1_loss",
]

_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))
_GELU_KAPPA = 0.044715
_REDUCTIONS = ("none", "mean", "sum")


# --- 1.1 affine maps and nonlinearities ---------------------------------------------------
def linear(x, W, b=None):
    r"""Affine map :math:`y = x W^\top + b`, like ``torch.nn.functional.linear``.

    ``x`` is ``(..., in)``, ``W`` is ``(out, in)``, ``b`` is ``(out,)`` or None; ``y`` is
    ``(..., out)``. The leading ``...`` axes are batch axes.
    """
    y = np.matmul(x, np.swapaxes(W, -1, -2))
    return y if b is None else y + b


def relu(x):
    r""":math:`\mathrm{relu}(x) = \max(x, 0)`, elementwise (nan stays nan, as in torch)."""
    return np.maximum(x, 0)


def sigmoid(x):
    r"""Logistic function :math:`\sigma(x) = 1 / (1 + e^{-x})`, without overflow.

    The textbook form overflows ``exp(-x)`` for very negative ``x`` (float32 already at
    ``x < -88``). With :math:`e = e^{-|x|} \in (0, 1]`, which never overflows,

    .. math:: \sigma(x) = \frac{1}{1 + e} \quad (x \ge 0), \qquad
              \sigma(x) = \frac{e}{1 + e} \quad (x < 0),

    and both branches are finite for every finite ``x``.
    """
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def silu(x):
    r"""SiLU (swish) :math:`x\,\sigma(x)`, finite for every finite ``x`` because ``sigmoid`` is."""
    return x * sigmoid(x)


def gelu_tanh(x):
    r"""GELU, tanh approximation, like ``F.gelu(x, approximate="tanh")``.

    .. math:: \mathrm{gelu}(x) \approx \tfrac12 x \left(1 + \tanh\!\left(
              \sqrt{2/\pi}\,(x + 0.044715\,x^3)\right)\right)
    """
    inner = _SQRT_2_OVER_PI * (x + _GELU_KAPPA * (x * x * x))
    return 0.5 * x * (1 + np.tanh(inner))


def mlp_logits(x, W1, b1, W2, b2, activation=relu):
    r"""Two-layer MLP :math:`\mathrm{logits} = W_2\,\phi(W_1 x + b_1) + b_2`, with :math:`\phi` = ``activation``."""
    return linear(activation(linear(x, W1, b1)), W2, b2)


def linear_backward(x, W, grad_out):
    r"""Gradients of :math:`y = x W^\top + b` for any number of leading batch axes.

    With :math:`g = \partial L / \partial y` of shape ``(..., out)`` and the batch axes
    flattened into rows (:math:`X` is ``(n, in)``, :math:`G` is ``(n, out)``):

    .. math:: \frac{\partial L}{\partial x} = g W, \qquad
              \frac{\partial L}{\partial W} = G^\top X, \qquad
              \frac{\partial L}{\partial b} = \sum_{\text{rows}} G,

    since every row of the batch uses the same ``W`` and ``b``, their gradients sum over rows.
    Returns ``(grad_x, grad_W, grad_b)`` with the shapes of ``x``, ``W`` and ``(out,)``.
    """
    out_features, in_features = W.shape
    G = np.reshape(grad_out, (-1, out_features))
    X = np.reshape(x, (-1, in_features))
    return np.matmul(grad_out, W), G.T @ X, G.sum(axis=0)


def relu_backward(x, grad_out):
    r""":math:`\partial L/\partial x = g \cdot [x > 0]`.

    At the kink ``x == 0`` the gradient is 0, as in torch (``threshold_backward`` passes the
    gradient only where ``x > 0``; where ``x`` is nan it passes it through, and so do we).
    """
    return np.where(x <= 0, 0, grad_out)


def sigmoid_backward(x, grad_out):
    r""":math:`\partial L/\partial x = g\,\sigma(x)(1 - \sigma(x)) = g\,\sigma(x)\,\sigma(-x)`.

    The second form avoids the cancellation in ``1 - sigmoid(x)`` when :math:`\sigma(x) \approx 1`.
    """
    return grad_out * (sigmoid(x) * sigmoid(-x))


def tanh_backward(x, grad_out):
    r""":math:`\partial L/\partial x = g\,(1 - \tanh^2 x)`."""
    t = np.tanh(x)
    return grad_out * (1 - t * t)


def collapse_linear_stack(layers):
    r"""Collapse affine layers ``[(W1, b1), (W2, b2), ...]`` (applied in order) into one ``(W, b)``.

    Composing :math:`y = W_2(W_1 x + b_1) + b_2 = (W_2 W_1)\,x + (W_2 b_1 + b_2)` and repeating,

    .. math:: W = W_k \cdots W_1, \qquad b \leftarrow W_i\,b + b_i \ \text{ for } i = 1..k,

    so a stack of linear layers without nonlinearities is no more expressive than one layer.
    A bias of None counts as zero; the returned ``b`` is always an array.
    """
    if not layers:
        raise ValueError("collapse_linear_stack needs at least one (W, b) layer")
    W_total, b_total = None, None
    for W, b in layers:
        W = np.asarray(W)
        b = np.zeros(W.shape[0], dtype=W.dtype) if b is None else np.asarray(b)
        if W_total is None:
            W_total, b_total = W, b
        else:
            W_total, b_total = W @ W_total, W @ b_total + b
    return W_total, b_total


def mlp_parameter_count(sizes, bias=True):
    r"""Number of parameters of ``nn.Sequential(nn.Linear(sizes[0], sizes[1]), ...)``.

    Each ``Linear(n_in, n_out)`` has an ``(n_out, n_in)`` weight and, with ``bias``, an
    ``(n_out,)`` bias: :math:`\sum_i n_i n_{i+1} + [\text{bias}]\, n_{i+1}`.
    For example ``[784, 256, 10] -> 203530``.
    """
    return sum(n_in * n_out + (n_out if bias else 0) for n_in, n_out in zip(sizes[:-1], sizes[1:]))


# --- 1.2 stable softmax, cross-entropy and loss reductions --------------------------------
def _reduction_axis(z, axis):
    """torch lets a 0-d tensor reduce over dim 0 or -1; NumPy spells that ``axis=None``."""
    return None if z.ndim == 0 and axis in (0, -1) else axis


def _shift_by_max(z, axis):
    r"""The pieces of the max-shift trick along ``axis``, all with kept dims.

    Returns ``(m, finite, shifted, log_s)``: the maximum :math:`m`, a mask of the slices whose
    maximum is finite, :math:`z - m` on those slices and
    :math:`\log \sum e^{z - m} \in [0, \log n]` on them. Every exponent is :math:`\le 0`, so
    nothing overflows. Slices whose maximum is not finite (all ``-inf``, containing ``+inf``
    or nan, or empty) get ``shifted = 0`` and ``log_s = 0``; the callers decide what they mean.
    """
    m = np.max(z, axis=axis, keepdims=True, initial=-np.inf)
    finite = np.isfinite(m)
    shifted = np.where(finite, z - np.where(finite, m, 0), 0)
    s = np.sum(np.exp(shifted), axis=axis, keepdims=True)
    log_s = np.log(s, out=np.zeros_like(s), where=finite)
    return m, finite, shifted, log_s


def logsumexp(z, axis=-1, keepdims=False):
    r"""Stable :math:`\log \sum_j e^{z_j}` along ``axis``, like ``torch.logsumexp``.

    .. math:: \log \sum_j e^{z_j} = m + \log \sum_j e^{z_j - m}, \qquad m = \max_j z_j,

    where the right-hand sum lies in :math:`[1, n]`: no overflow, and no ``log(0)``.
    A slice without a finite maximum gives its maximum, as torch does: all ``-inf`` (or empty)
    gives ``-inf``, one ``+inf`` gives ``+inf``, nan gives nan.
    """
    z = np.asarray(z)
    axis = _reduction_axis(z, axis)
    m, _, _, log_s = _shift_by_max(z, axis)
    out = m + log_s
    return out if keepdims else np.squeeze(out, axis=axis)


def log_softmax(z, axis=-1):
    r"""Stable :math:`\log \mathrm{softmax}(z)_i = z_i - \operatorname{logsumexp}(z) = (z_i - m) - \log \sum_j e^{z_j - m}`.

    Slices whose maximum is not finite give nan, as in torch.
    """
    z = np.asarray(z)
    _, finite, shifted, log_s = _shift_by_max(z, _reduction_axis(z, axis))
    return np.where(finite, shifted - log_s, np.nan)


def softmax(z, axis=-1):
    r"""Stable :math:`\mathrm{softmax}(z)_i = e^{z_i - m} / \sum_j e^{z_j - m}`, computed as
    :math:`\exp(\log\mathrm{softmax}(z)_i)`.

    Subtracting :math:`m = \max_j z_j` multiplies numerator and denominator by :math:`e^{-m}`,
    so the value (and hence its gradient) is unchanged, while every exponent is :math:`\le 0`.
    """
    return np.exp(log_softmax(z, axis))


def naive_softmax(z, axis=-1):
    r"""The textbook :math:`e^{z_i} / \sum_j e^{z_j}`, kept to show why it fails.

    ``exp`` overflows to inf once :math:`z > 88.7` (float32) or :math:`z > 709.8` (float64),
    and inf / inf is nan; NumPy warns about both. Use :func:`softmax` instead.
    """
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)


def _check_reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction (use one of {_REDUCTIONS})")


def _reduce(losses, reduction, count=None):
    """Apply a loss reduction; ``"mean"`` divides by ``count`` (default: every element).

    A mean over nothing is nan, as in torch, computed without a 0/0 (so without a warning).
    """
    _check_reduction(reduction)
    if reduction == "none":
        return losses
    total = losses.sum()
    if reduction == "sum":
        return total
    count = losses.size if count is None else count
    return total / count if count else total.dtype.type(np.nan)


def _class_targets(logits, target, ignore_index):
    """Validate ``target`` and return ``(class_axis, valid, safe_target)``.

    The class axis is 1 for ``(N, C, ...)`` logits and 0 for unbatched ``(C,)`` logits, as in
    torch. ``valid`` marks the targets that are not ``ignore_index``; ``safe_target`` replaces
    the ignored ones by class 0, so that indexing with it never goes out of range.
    """
    if not np.issubdtype(target.dtype, np.integer):
        raise TypeError(f"target must hold integer class indices, got dtype {target.dtype}")
    axis = 0 if logits.ndim == 1 else 1
    expected = logits.shape[:axis] + logits.shape[axis + 1:]
    if target.shape != expected:
        raise ValueError(f"target has shape {target.shape}, expected {expected} for logits {logits.shape}")
    valid = target != ignore_index
    n_classes = logits.shape[axis]
    if np.any(valid & ((target < 0) | (target >= n_classes))):
        raise IndexError(f"Target {target[valid].min()}..{target[valid].max()} is out of bounds "
                         f"for {n_classes} classes")
    return axis, valid, np.where(valid, target, 0)


def cross_entropy(logits, target, reduction="mean", ignore_index=-100):
    r"""Cross-entropy of logits and integer class targets, like ``F.cross_entropy``.

    For logits :math:`z` of shape ``(N, C)`` and targets :math:`t` of shape ``(N,)``,

    .. math:: \ell_n = -\log \mathrm{softmax}(z_n)_{t_n} = \operatorname{logsumexp}(z_n) - z_{n, t_n},

    computed through the stable :func:`log_softmax`, so logits of magnitude 1e3 in float32 give
    a finite loss. Rows whose target is ``ignore_index`` contribute :math:`\ell_n = 0`.
    ``"none"`` returns :math:`\ell`, ``"sum"`` returns :math:`\sum_n \ell_n` and ``"mean"``
    divides that sum by the number of rows that are not ignored (nan if all are, as in torch).
    Unbatched ``(C,)`` logits with a 0-d target and ``(N, C, d1, ...)`` logits with
    ``(N, d1, ...)`` targets work as in torch.
    """
    logits, target = np.asarray(logits), np.asarray(target)
    axis, valid, safe = _class_targets(logits, target, ignore_index)
    log_p = log_softmax(logits, axis=axis)
    picked = np.take_along_axis(log_p, np.expand_dims(safe, axis), axis=axis).squeeze(axis)
    losses = np.where(valid, -picked, 0)
    return _reduce(losses, reduction, count=int(valid.sum()))


def cross_entropy_backward(logits, target, reduction="mean", ignore_index=-100, grad=None):
    r"""Gradient of :func:`cross_entropy` with respect to the logits, times the upstream ``grad``.

    For one row, :math:`\partial \ell_n / \partial z_{n,c} = \mathrm{softmax}(z_n)_c - [c = t_n]`.
    ``grad`` is the upstream gradient :math:`\partial L / \partial \text{loss}`, of the loss's
    shape: a scalar for ``"sum"`` and ``"mean"``, one value per row for ``"none"``; ``None``
    means 1 (ones for ``"none"``: the gradient of :math:`\sum_n \ell_n`). ``"sum"`` scales every
    row by ``grad``; ``"mean"`` by ``grad`` over the number of targets that are not ignored;
    ``"none"`` row :math:`n` by ``grad[n]``. Ignored rows get zero gradient, also when every row
    is ignored (torch gives zeros there too, although the mean loss is nan). This is the
    backward of unit 1.4's fused ``CrossEntropy``.
    """
    logits, target = np.asarray(logits), np.asarray(target)
    axis, valid, safe = _class_targets(logits, target, ignore_index)
    _check_reduction(reduction)
    one_hot = np.zeros_like(logits)
    np.put_along_axis(one_hot, np.expand_dims(safe, axis), 1, axis=axis)
    out = softmax(logits, axis=axis) - one_hot
    count = int(valid.sum())
    if reduction == "mean" and count:
        out = out / count
    if grad is not None:
        grad = np.asarray(grad, dtype=logits.dtype)
        out = out * (np.expand_dims(grad, axis) if reduction == "none" else grad)
    return np.where(np.expand_dims(valid, axis), out, 0)


def binary_cross_entropy_with_logits(z, y, reduction="mean"):
    r"""Binary cross-entropy on logits, like ``F.binary_cross_entropy_with_logits``.

    With :math:`p = \sigma(z)`, :math:`\ell = -y \log p - (1 - y) \log(1 - p)`. Using
    :math:`\log \sigma(z) = \min(z, 0) - \log(1 + e^{-|z|})` and
    :math:`\log(1 - \sigma(z)) = \log \sigma(-z)`,

    .. math:: \ell = \max(z, 0) - z y + \log\!\left(1 + e^{-|z|}\right),

    in which :math:`e^{-|z|} \le 1`: stable for :math:`|z|` up to 1e4 and beyond.
    ``z`` and ``y`` must have the same shape, as torch requires.
    """
    z, y = np.asarray(z), np.asarray(y)
    if z.shape != y.shape:
        raise ValueError(f"Target size ({y.shape}) must be the same as input size ({z.shape})")
    losses = np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))
    return _reduce(losses, reduction)


def mse_loss(pred, target, reduction="mean"):
    r"""Mean squared error :math:`\ell_i = (\hat y_i - y_i)^2`, reduced like ``F.mse_loss``."""
    diff = np.asarray(pred) - np.asarray(target)
    return _reduce(diff * diff, reduction)


def l1_loss(pred, target, reduction="mean"):
    r"""Mean absolute error :math:`\ell_i = |\hat y_i - y_i|`, reduced like ``F.l1_loss``."""
    return _reduce(np.abs(np.asarray(pred) - np.asarray(target)), reduction)

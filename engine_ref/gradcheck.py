r"""Reference solutions for unit 1.5: gradient checks with central finite differences.

The central difference along coordinate :math:`i`,

.. math:: \frac{\partial f}{\partial x_i} \approx \frac{f(x + h e_i) - f(x - h e_i)}{2h},

has truncation error :math:`\tfrac{h^2}{6} f'''` (the even Taylor terms cancel) and rounding
error about :math:`\varepsilon_{\text{mach}} |f| / h`. Their sum is smallest near
:math:`h \approx \varepsilon_{\text{mach}}^{1/3}`: about 1e-5 in float64 (error ~1e-10) but
5e-3 in float32 (error ~1e-5), which is why gradient checks run in float64.

``gradcheck`` compares the engine's reverse-mode gradients (``engine_ref.autodiff``) with these
differences, using torch's test :math:`|a - n| \le \text{atol} + \text{rtol}\,|n|`.
"""
import numpy as np

__all__ = [
    "GradcheckError", "numerical_gradient", "numerical_vjp", "relative_error", "gradcheck", "step_size_sweep",
    "kink_mask",
]


class GradcheckError(AssertionError):
    """An analytic gradient that disagrees with central differences.

    The message names the input, the worst coordinate and both values; they are also kept as
    the attributes ``input_index``, ``index``, ``analytic`` and ``numeric``.
    """

    def __init__(self, message, input_index=None, index=None, analytic=None, numeric=None):
        super().__init__(message)
        self.input_index, self.index, self.analytic, self.numeric = input_index, index, analytic, numeric


def _as_scalar(value):
    value = np.asarray(value)
    if value.size != 1:
        raise ValueError(f"f must return a scalar, got an array of shape {value.shape}")
    return value.item()


def _central_difference(f, x, index, eps):
    """:math:`(f(x + h e_i) - f(x - h e_i)) / 2h` for coordinate ``index``, perturbing ``x`` in
    place (so that ``f`` may also read ``x`` through a closure); ``x[index]`` is restored even
    if ``f`` raises."""
    old = x[index]
    try:
        x[index] = old + eps
        plus = _as_scalar(f(x))
        x[index] = old - eps
        minus = _as_scalar(f(x))
    finally:
        x[index] = old
    return (plus - minus) / (2 * eps)


def _check_float_array(x, name="x"):
    if not (isinstance(x, np.ndarray) and np.issubdtype(x.dtype, np.floating)):
        raise TypeError(f"{name} must be a floating-point NumPy array (it is perturbed in place), got {type(x).__name__}"
                        + (f" of dtype {x.dtype}" if isinstance(x, np.ndarray) else ""))


def numerical_gradient(f, x, eps=1e-6):
    r"""Central-difference gradient of a scalar function ``f`` at the array ``x``.

    Each coordinate in turn is moved by :math:`\pm` ``eps`` in place and put back, so ``f``
    sees a perturbed ``x`` and, on return (or when ``f`` raises), ``x`` holds exactly its old
    values. The result has the shape and dtype of ``x``.
    """
    _check_float_array(x)
    grad = np.zeros(x.shape, dtype=x.dtype)
    for index in np.ndindex(x.shape):
        grad[index] = _central_difference(f, x, index, eps)
    return grad


def numerical_vjp(f, x, grad_out, eps=1e-6):
    r"""Central-difference vector-Jacobian product :math:`g^\top \partial f / \partial x`.

    For an array-valued ``f`` and an upstream gradient ``grad_out`` (:math:`g`, the shape of
    ``f(x)``), this is the gradient of the scalar :math:`\sum_j g_j f_j(x)`, which is what
    reverse mode propagates. ``x`` is unchanged on return.
    """
    grad_out = np.asarray(grad_out)

    def weighted(v):
        out = np.asarray(f(v))
        if out.shape != grad_out.shape:
            raise ValueError(f"grad_out has shape {grad_out.shape} but f returned shape {out.shape}")
        return np.sum(grad_out * out)

    return numerical_gradient(weighted, x, eps)


def relative_error(a, b):
    r""":math:`\max_i |a_i - b_i| / \max(|a_i| + |b_i|, 10^{-12})`: the worst elementwise relative error.

    The floor keeps two (near-)zero gradients from dividing 0 by 0. Empty arrays give 0.0;
    a nan anywhere gives nan.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    errors = np.abs(a - b) / np.maximum(np.abs(a) + np.abs(b), 1e-12)
    return float(np.max(errors, initial=0.0))


def _coordinates(shape, n_samples, rng):
    """Every index of ``shape``, or ``n_samples`` distinct ones drawn with ``rng``, in order."""
    size = int(np.prod(shape, dtype=np.int64))
    if n_samples is None or n_samples >= size:
        return list(np.ndindex(shape))
    flat = np.sort(rng.choice(size, size=n_samples, replace=False))
    return [tuple(int(i) for i in np.unravel_index(k, shape)) for k in flat]


def gradcheck(f, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, n_samples=None, seed=0):
    r"""Check the engine's gradients of ``f`` against central differences, like ``torch.autograd.gradcheck``.

    ``inputs`` is a list or tuple of floating arrays (use float64). Each is wrapped in an
    ``engine_ref.autodiff.Tensor`` that requires grad and ``f(*tensors)`` must return a Tensor.
    A scalar output is differentiated directly; any other output is weighted by a random
    upstream gradient :math:`g` (drawn from ``seed``), so that the check covers the
    vector-Jacobian product :math:`g^\top J` that reverse mode computes. Each input's ``.grad``
    (:math:`a`) is compared with the central difference (:math:`n`) of
    :math:`\sum g \odot f` on plain arrays re-wrapped in Tensors, at every coordinate or at
    ``n_samples`` coordinates drawn from ``seed``; a coordinate passes when
    :math:`|a - n| \le \text{atol} + \text{rtol}\,|n|`.

    Returns True, or raises :class:`GradcheckError` naming the input, the coordinate that fails
    by the widest margin, and its analytic and numeric values. The caller's arrays are not
    modified.
    """
    from .autodiff import Tensor

    if isinstance(inputs, np.ndarray) or not isinstance(inputs, (list, tuple)):
        raise TypeError("inputs must be a list or tuple of NumPy arrays")
    arrays = [np.array(a) for a in inputs]  # private copies: the numeric pass perturbs them
    for i, a in enumerate(arrays):
        _check_float_array(a, name=f"input {i}")
    rng = np.random.default_rng(seed)

    tensors = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    out = f(*tensors)
    weight = np.ones(out.shape) if out.data.size == 1 else rng.standard_normal(out.shape)
    weight = weight.astype(out.dtype)
    out.backward(weight)

    for i, (x, t) in enumerate(zip(arrays, tensors)):
        analytic = np.zeros_like(x) if t.grad is None else np.asarray(t.grad)
        if analytic.shape != x.shape:
            raise GradcheckError(f"gradcheck: the gradient of input {i} has shape {analytic.shape}, "
                                 f"but input {i} has shape {x.shape}", input_index=i)

        def weighted_output(v, i=i):
            args = [Tensor(v if j == i else a) for j, a in enumerate(arrays)]
            return np.sum(weight * f(*args).data)

        coords = _coordinates(x.shape, n_samples, rng)
        a = [float(analytic[c]) for c in coords]
        n = [float(_central_difference(weighted_output, x, c, eps)) for c in coords]
        with np.errstate(invalid="ignore"):  # inf - inf in a broken gradient is a failure, not a warning
            excess = np.abs(np.subtract(a, n)) - (atol + rtol * np.abs(n))
        failing = ~(excess <= 0)  # nan fails too
        if np.any(failing):
            k = int(np.argmax(np.where(np.isnan(excess), np.inf, excess)))
            raise GradcheckError(
                f"gradcheck failed for input {i} (shape {x.shape}): worst index {coords[k]}: "
                f"analytic {a[k]!r} vs numeric {n[k]!r} (|a - n| = {abs(a[k] - n[k]):.3g} > "
                f"atol + rtol*|n| = {atol + rtol * abs(n[k]):.3g}); {int(failing.sum())} of {len(coords)} "
                "checked coordinates fail",
                input_index=i, index=coords[k], analytic=a[k], numeric=n[k])
    return True


def step_size_sweep(f, x, steps):
    r"""Max-abs error of the central-difference gradient against the engine's, for each step.

    ``f`` takes a Tensor and returns a scalar Tensor. On a log-log plot the errors make a V:
    truncation error :math:`\propto h^2` on the right, rounding error
    :math:`\propto \varepsilon_{\text{mach}}/h` on the left. Run it on a float32 ``x`` to see
    the bottom of the V move up and to the right. Returns a float64 array, one error per step.
    """
    from .autodiff import Tensor

    x = np.array(x)
    _check_float_array(x)
    t = Tensor(x.copy(), requires_grad=True)
    f(t).backward()
    analytic = np.zeros_like(x) if t.grad is None else t.grad
    errors = [np.max(np.abs(numerical_gradient(lambda v: f(Tensor(v)).data, x, eps=h) - analytic), initial=0.0)
              for h in steps]
    return np.array(errors, dtype=np.float64)


def kink_mask(x, eps):
    r"""Where the stencil :math:`\{x - \varepsilon, x + \varepsilon\}` straddles ReLU's kink at 0.

    On each side of the kink ReLU is linear, so the central difference is exact there. It
    goes wrong exactly when :math:`x - \varepsilon < 0 < x + \varepsilon`, i.e.
    :math:`|x| < \varepsilon`: then it returns :math:`(x + \varepsilon) / 2\varepsilon`,
    strictly between 0 and 1, while the derivative is 0 or 1. (At :math:`|x| = \varepsilon`
    one point sits on the kink and the difference is still exact.) Gradient checks on ReLU
    networks skip or resample these coordinates of the pre-activations.
    """
    return np.asarray(np.abs(x) < eps)

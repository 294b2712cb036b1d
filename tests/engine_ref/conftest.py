"""Helpers for testing the reference package against torch and central differences.

``autograder.inside.checks.check_vjp`` runs its function under the NumPy-only guard, which rejects any
code in ``engine_ref`` by design, so it cannot judge the reference solutions themselves.
``check_backward`` does the same job from the public pieces of ``autograder.inside.checks``
(``randn``, ``strided``, ``numerical_vjp``, ``assert_close``, ``DEFAULT_TOL``).
"""
import numpy as np
import pytest
import torch

from autograder.inside import checks


def _torch_vjp(torch_fn, args, kwargs, wrt, grad_out):
    targs = [torch.tensor(a, requires_grad=i in wrt) for i, a in enumerate(args)]
    out = torch_fn(*targs, **kwargs)
    grads = torch.autograd.grad(out, [targs[i] for i in wrt], torch.from_numpy(grad_out))
    return [g.numpy() for g in grads]


def _check_backward(backward_fn, forward_fn, torch_fn, args, *, wrt, kwargs=None, upstream=True, seed=0,
                    task="engine_ref"):
    """Check ``backward_fn`` for the float64 arguments ``args`` at the positions ``wrt``.

    ``backward_fn(*args, grad_out, **kwargs)`` (without ``grad_out`` when ``upstream`` is
    False: a loss, whose upstream gradient is 1, or ones for ``reduction="none"``) returns one
    gradient per position in ``wrt``. It is compared with torch autograd of ``torch_fn`` and
    with central differences of ``forward_fn``, the NumPy forward, for a random upstream
    gradient; with a zero upstream gradient it must return exact zeros; with non-contiguous
    copies of the arguments it must return the same gradients.
    """
    kwargs = kwargs or {}
    out_shape = np.shape(forward_fn(*args, **kwargs))
    grad_out = checks.randn(seed, *out_shape) if upstream else np.ones(out_shape)

    def call(xs, g):
        result = backward_fn(*xs, g, **kwargs) if upstream else backward_fn(*xs, **kwargs)
        return result if isinstance(result, tuple) else (result,)

    got = call(args, grad_out)
    expected = _torch_vjp(torch_fn, args, kwargs, wrt, grad_out)
    rtol_fd, atol_fd = checks.DEFAULT_TOL["fd"]  # the grader's finite-difference tolerance, justified there
    for k, i in enumerate(wrt):
        name = f"grad of argument {i}"
        checks.assert_close(got[k], expected[k], task=task, case="vs torch autograd", name=name, kind="grad")
        numeric = checks.numerical_vjp(lambda *xs: forward_fn(*xs, **kwargs), list(args), i, grad_out)
        checks.assert_close(got[k], numeric, task=task, case="vs central differences", name=name,
                            rtol=rtol_fd, atol=atol_fd, kind="grad")
    if upstream:
        for g in call(args, np.zeros_like(grad_out)):
            assert np.all(g == 0), "a zero upstream gradient must give exactly zero gradients"
    strided = tuple(checks.strided(a) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in args)
    for g_strided, g in zip(call(strided, checks.strided(grad_out)), got):
        # Same values in a different memory layout: only the order of matmul's partial sums may
        # change, which moves float64 results by a few ulps (~1e-15), far below 1e-12.
        checks.assert_close(g_strided, g, task=task, case="non-contiguous inputs", rtol=1e-12, atol=1e-12)
    return got


@pytest.fixture(scope="session")
def check_backward():
    """``check_backward(backward_fn, forward_fn, torch_fn, args, wrt=..., ...)``; see ``_check_backward``."""
    return _check_backward

"""branched_loss: every leaf gradient matches torch autograd and central differences (float64)."""
import numpy as np
import pytest

from autograder.inside import checks
from engine_ref import Tensor, branched_loss


@pytest.mark.parametrize("seed, n, d, m", [(0, 4, 3, 5), (1, 1, 1, 1), (2, 6, 2, 3)])
def test_branched_loss_matches_torch_and_finite_differences(seed, n, d, m):
    x, W, b = checks.randn(seed, n, d), checks.randn(seed + 10, d, m), checks.randn(seed + 20, m)
    checks.check_graph("branched_loss", Tensor, branched_loss, [x, W, b], names=["x", "W", "b"], numpy_only=False)


def test_branched_loss_on_a_transposed_input_equals_the_contiguous_copy():
    x = checks.randn(3, 5, 4)
    W, b = checks.randn(4, 4, 2), checks.randn(5, 2)
    grads = []
    for xv in (x, np.ascontiguousarray(x.T).T):
        leaves = [Tensor(xv, requires_grad=True), Tensor(W, requires_grad=True), Tensor(b, requires_grad=True)]
        branched_loss(*leaves).backward()
        grads.append([t.grad for t in leaves])
    for g1, g2 in zip(*grads):
        # Same values, another layout: only BLAS's summation order may differ, a few ulps at most.
        np.testing.assert_allclose(g1, g2, rtol=1e-12, atol=1e-14)

"""engine_ref.train (unit 1.8): the spiral data, the first step against torch, and training."""
import numpy as np
import pytest
import torch

from autograder.inside import checks
from engine_ref.autodiff import CrossEntropy, Tensor
from engine_ref.nn import MLP
from engine_ref.train import accuracy, make_spiral, train_spiral

pytestmark = pytest.mark.filterwarnings("error")


def test_make_spiral_shapes_dtypes_and_geometry():
    X, y = make_spiral(n_per_class=50, n_classes=4, seed=3)
    assert X.shape == (200, 2) and X.dtype == np.float64 and y.shape == (200,) and y.dtype == np.int64
    assert np.array_equal(np.bincount(y), np.full(4, 50))
    for k in range(4):
        # The noise moves only the angle: each arm's radius runs linearly from 0 to 1.
        # 1e-12: r * (sin^2 + cos^2)^(1/2) rounds within a few ulps of r <= 1.
        radius = np.linalg.norm(X[y == k], axis=1)
        checks.assert_close(radius, np.linspace(0.0, 1.0, 50), task="spiral radius", rtol=0, atol=1e-12)
    again, other = make_spiral(50, 4, seed=3), make_spiral(50, 4, seed=4)
    assert np.array_equal(again[0], X) and not np.array_equal(other[0], X)  # exact: seeded draws


def test_first_step_gradients_match_a_torch_copy():
    X, y = make_spiral()
    ours = MLP([2, 100, 3], rng=0)
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 100), torch.nn.ReLU(), torch.nn.Linear(100, 3)).double()
    theirs.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in ours.state_dict().items()})
    loss = CrossEntropy.apply(ours(Tensor(X)), y)
    loss.backward()
    t_loss = torch.nn.functional.cross_entropy(theirs(torch.from_numpy(X)), torch.from_numpy(y))
    t_loss.backward()
    # Default float64 tolerance of the checks (autograder/inside/checks.py): the same float64 layers,
    # summed over 300 rows in possibly different orders, agree to ~1e-15.
    checks.assert_close(np.asarray(loss.item()), t_loss.detach().numpy(), task="first loss")
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        checks.assert_close(p.grad, q.grad.numpy(), task="first step", name=f"grad of {name}", kind="grad")


def test_train_spiral_reaches_95_percent_training_accuracy():
    run = train_spiral()
    assert run.accuracy >= 0.95
    assert run.accuracy == accuracy(run.model, *make_spiral())
    assert len(run.losses) == 500 and run.losses[-1] < run.losses[0]  # one loss per step, going down



def test_accuracy_counts_argmax_hits():
    class Fixed:
        def __call__(self, x):
            return Tensor(np.array([[2.0, 1.0], [0.0, 3.0], [5.0, 4.0], [1.0, 1.5]]))

    # Rows 0, 1 and 3 put the largest logit at the label, row 2 does not: 3 of 4.
    assert accuracy(Fixed(), np.zeros((4, 2)), np.array([0, 1, 1, 1])) == 3 / 4

"""The unit 1.8 mini-project: a two-layer MLP trained with the engine on a 3-class spiral."""
from dataclasses import dataclass

import numpy as np

from .autodiff import CrossEntropy, Tensor, no_grad
from .nn import MLP, SGD

__all__ = ["make_spiral", "accuracy", "SpiralRun", "train_spiral"]


def make_spiral(n_per_class=100, n_classes=3, seed=0):
    """The CS231n spiral: ``n_classes`` arms of ``n_per_class`` points each in the plane.

    Arm ``k`` has radius growing linearly from 0 to 1 while the angle runs over
    ``[4k, 4(k + 1)]`` radians plus Gaussian noise of standard deviation 0.2.
    Returns ``X`` (float64, (N, 2)) and ``y`` (int64, (N,)), N = ``n_per_class * n_classes``.
    """
    rng = np.random.default_rng(seed)
    X = np.zeros((n_per_class * n_classes, 2))
    y = np.repeat(np.arange(n_classes, dtype=np.int64), n_per_class)
    radius = np.linspace(0.0, 1.0, n_per_class)
    for k in range(n_classes):
        angle = np.linspace(4.0 * k, 4.0 * (k + 1), n_per_class) + 0.2 * rng.standard_normal(n_per_class)
        X[y == k] = np.c_[radius * np.sin(angle), radius * np.cos(angle)]
    return X, y


def accuracy(model, X, y):
    """The fraction of rows of ``X`` whose largest logit is at the class ``y``."""
    with no_grad():
        logits = model(Tensor(X))
    return float(np.mean(logits.data.argmax(axis=1) == y))


@dataclass
class SpiralRun:
    model: MLP
    losses: list  # the full-batch training loss before each step
    accuracy: float  # training accuracy after the last step


def train_spiral(hidden=100, steps=500, lr=0.5, momentum=0.9, weight_decay=1e-4, n_per_class=100,
                 n_classes=3, seed=0):
    """Train ``MLP([2, hidden, n_classes])`` on ``make_spiral`` with full-batch SGD and the fused
    cross-entropy; returns a ``SpiralRun`` (model, loss curve, final training accuracy)."""
    X, y = make_spiral(n_per_class, n_classes, seed)
    model = MLP([2, hidden, n_classes], rng=seed)
    optimizer = SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    inputs, losses = Tensor(X), []
    for _ in range(steps):
        loss = CrossEntropy.apply(model(inputs), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return SpiralRun(model, losses, accuracy(model, X, y))

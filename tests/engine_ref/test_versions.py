"""Version counters and save modes (unit 1.7): in-place edits of saved values, against torch.

Gradient comparisons use the checks' default float64 tolerance (rtol 1e-7, atol 1e-9, justified
in ``autograder/inside/checks.py``): the engine and torch do the same few float64 operations.
"""
import re

import numpy as np
import pytest
import torch

from autograder.inside import checks
from engine_ref.autodiff import Tensor, no_grad
from engine_ref.versions import get_save_mode, save_mode, set_save_mode

pytestmark = pytest.mark.filterwarnings("error")

# torch's message, with the parts that name the tensor's type left open.
MODIFIED = re.compile(
    r"one of the variables needed for gradient computation has been modified by an inplace operation: "
    r"\[[^\]]*\[[0-9, ]*\]\](, which is output 0 of (\w+),)? is at version (\d+); expected version (\d+) instead\."
)


def rand(seed, *shape):
    return checks.randn(seed, *shape)


def error_parts(message):
    """(op that produced the tensor or None, version, expected version) from the message."""
    match = MODIFIED.match(message)
    assert match, f"not torch's message shape: {message}"
    op = match.group(2)
    return (op.removesuffix("Backward0") if op else None), int(match.group(3)), int(match.group(4))


# --- version counters --------------------------------------------------------------------------
EDITS = {  # each edits a tensor in place, on the engine and on torch alike
    "add_": lambda t: t.add_(1.5),
    "add_ alpha": lambda t: t.add_(t * 0 + 1, alpha=-2.0),
    "mul_": lambda t: t.mul_(3.0),
    "zero_": lambda t: t.zero_(),
    "setitem": lambda t: t.__setitem__((0, slice(None)), 7.0),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_in_place_edit_bumps_the_version_like_torch(name):
    a = rand(0, 2, 3)
    x, t = Tensor(a.copy()), torch.tensor(a)
    assert x._version == t._version == 0
    EDITS[name](x)
    EDITS[name](t)
    assert x._version == t._version == 1
    assert np.array_equal(x.data, t.numpy())  # exact: the same elementwise arithmetic


VIEWS = {  # name -> make a second tensor from the first; is it a view (sharing the counter)?
    "slice": lambda t: t[1:],
    "int index": lambda t: t[0],
    "transpose": lambda t: t.transpose(0, 1),
    "reshape of contiguous": lambda t: t.reshape(6),
    "reshape of non-contiguous (a copy)": lambda t: t.transpose(0, 1).reshape(6),
    "advanced index (a copy)": lambda t: t[[0, 1, 0]],
    "detach": lambda t: t.detach(),
    "exp (a new tensor)": lambda t: t.exp(),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_share_the_version_counter_of_their_base_like_torch(name):
    a = rand(0, 2, 3)
    x, t = Tensor(a.copy()), torch.tensor(a)
    xv, tv = VIEWS[name](x), VIEWS[name](t)
    xv.mul_(2.0)
    tv.mul_(2.0)
    assert (x._version, xv._version) == (t._version, tv._version)
    x.add_(1.0)
    t.add_(1.0)
    assert (x._version, xv._version) == (t._version, tv._version)
    # Views: exact, since edits through a view reach the base. exp: NumPy's and torch's
    # vectorised exp may round the last bit apart (seen on the CI machine's CPU), so 4 ulps.
    rtol = 4 * np.finfo(np.float64).eps if name.startswith("exp") else 0.0
    np.testing.assert_allclose(xv.data, tv.numpy(), rtol=rtol, atol=0)


def test_in_place_edit_of_a_leaf_that_requires_grad_raises_like_torch():
    with pytest.raises(RuntimeError) as theirs:
        torch.ones(3, requires_grad=True).mul_(2)
    with pytest.raises(RuntimeError) as ours:
        Tensor(np.ones(3), requires_grad=True).mul_(2)
    assert str(ours.value) == str(theirs.value)
    x = Tensor(np.ones(3), requires_grad=True)
    with no_grad():  # allowed there, as in torch (that is how an optimizer steps)
        x.mul_(2)
    assert x._version == 1 and np.array_equal(x.data, np.full(3, 2.0))


# --- refusing (save mode "check", the default) -------------------------------------------------
def test_edit_of_a_saved_input_is_refused_with_torchs_message():
    w0, x0 = rand(0, 3), rand(1, 3)
    with pytest.raises(RuntimeError) as theirs:
        w, x = torch.tensor(w0, requires_grad=True), torch.tensor(x0)
        y = (w * x * w).sum()  # the first Mul saves x to compute the gradient for w
        x.mul_(2)
        y.backward()
    w, x = Tensor(w0, requires_grad=True), Tensor(x0.copy())
    y = (w * x * w).sum()
    x.mul_(2)
    with pytest.raises(RuntimeError) as ours:
        y.backward()
    assert error_parts(str(ours.value)) == error_parts(str(theirs.value)) == (None, 1, 0)


def test_edit_of_a_saved_output_is_refused_with_torchs_message():
    a = rand(0, 4)
    with pytest.raises(RuntimeError) as theirs:
        t = torch.tensor(a, requires_grad=True)
        e = t.exp()  # Exp saves its output
        with torch.no_grad():
            e.add_(1)
            e.add_(1)
        e.sum().backward()
    x = Tensor(a, requires_grad=True)
    e = x.exp()
    with no_grad():
        e.add_(1)
        e.add_(1)
    with pytest.raises(RuntimeError) as ours:
        e.sum().backward()
    assert error_parts(str(ours.value)) == error_parts(str(theirs.value)) == ("Exp", 2, 0)


def test_edit_through_a_view_is_refused():
    w, x = Tensor(rand(0, 2, 3), requires_grad=True), Tensor(rand(1, 2, 3))
    y = (w * x * w).sum()
    x[1:].zero_()  # the slice shares x's memory and counter
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0 instead"):
        y.backward()


def test_optimizer_style_update_between_forward_and_backward_is_refused_like_torch():
    """An SGD-like step on w after forward. (x requires grad too: torch saves w only when x's
    gradient needs it, while the engine's ops always save what the spec's table lists.)"""
    a, b = rand(0, 3, 2), rand(1, 2, 2)
    t_w, t_x = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    t_y = (t_x @ t_w.T).tanh().sum()  # MatMul saves the weight
    with torch.no_grad():
        t_w.add_(t_w, alpha=-0.1)
    with pytest.raises(RuntimeError) as theirs:
        t_y.backward()
    w, x = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    y = (x @ w.T).tanh().sum()

    with no_grad():
        w.add_(w, alpha=-0.1)
    with pytest.raises(RuntimeError) as ours:
        y.backward()
    assert error_parts(str(ours.value))[1:] == error_parts(str(theirs.value))[1:] == (1, 0)


def test_saving_a_mask_instead_of_the_input_needs_no_refusal():
    """ReLU saves a fresh mask, so editing its input after forward is harmless (torch saves the
    result, also harmless); both give the gradient of the forward that ran."""
    a, g = rand(0, 5), rand(1, 5)
    x = Tensor(a.copy())
    w = Tensor(np.ones(5), requires_grad=True)
    y = (w + x).relu()
    x.mul_(-1.0)
    y.backward(g)
    t_w = torch.ones(5, dtype=torch.float64, requires_grad=True)
    (t_w + torch.tensor(a)).relu().backward(torch.from_numpy(g))

    assert np.array_equal(w.grad, t_w.grad.numpy())  # exact: g where the ReLU was on, else 0


# --- surviving (save mode "copy") and the defect (save mode "unchecked") -----------------------
def mul_then_edit(mode):
    """w * x with x doubled in place between forward and backward; returns w.grad."""
    w, x = Tensor(rand(0, 3), requires_grad=True), Tensor(rand(1, 3))
    with save_mode(mode):
        y = (w * x * w).sum()
    x.mul_(2)
    y.backward()
    return w.grad


def right_gradient():
    """torch's gradient of the forward that ran, with no edit: 2 w x."""
    t_w = torch.tensor(rand(0, 3), requires_grad=True)
    (t_w * torch.tensor(rand(1, 3)) * t_w).sum().backward()
    return t_w.grad.numpy()


def test_copy_on_save_survives_the_edit_with_the_right_gradient():
    checks.assert_close(mul_then_edit("copy"), right_gradient(), task="copy mode", kind="grad")


def test_unchecked_mode_reproduces_the_wrong_gradient():
    got, right = mul_then_edit("unchecked"), right_gradient()
    w, x = rand(0, 3), rand(1, 3)
    # y = (w * x) * w. The outer Mul saved the product w * x, computed before the edit; the inner
    # Mul saved x itself and reads it doubled: dy/dw = (w * x) + w * (2 x) instead of 2 w x.
    checks.assert_close(got, w * x + w * (2 * x), task="unchecked mode", kind="grad")
    assert not np.allclose(got, right)  # off by w * x, far more than allclose's rtol of 1e-5



def test_check_mode_is_the_default_and_refuses():
    assert get_save_mode() == "check"
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        mul_then_edit("check")


def test_save_mode_is_the_one_in_force_when_the_op_runs():
    w, x = Tensor(rand(0, 3), requires_grad=True), Tensor(rand(1, 3))
    with save_mode("copy"):
        y = (w * x * w).sum()
    x.mul_(2)
    with save_mode("check"):
        y.backward()  # saved under "copy": no refusal
    checks.assert_close(w.grad, right_gradient(), task="mode at save time", kind="grad")



def test_copy_mode_copies_only_what_aliases_an_input_or_output():
    w, x = Tensor(rand(0, 3), requires_grad=True), Tensor(rand(1, 3))
    with save_mode("copy"):
        y = w * x
        r = w.relu()
    a, b = y.ctx.saved_tensors
    assert not np.shares_memory(a, w.data) and not np.shares_memory(b, x.data)
    (mask,) = r.ctx.saved_tensors
    assert mask.dtype == bool  # a fresh array of ReLU's own: kept as it is


def test_save_mode_validates_and_restores():
    with pytest.raises(ValueError, match="save mode"):
        set_save_mode("sometimes")
    with pytest.raises(KeyError):
        with save_mode("unchecked"):
            raise KeyError("inside")
    assert get_save_mode() == "check"


def test_failed_in_place_edit_does_not_count():
    x, t = Tensor(np.zeros(3)), torch.zeros(3, dtype=torch.float64)
    with pytest.raises(ValueError):
        x.add_(np.ones(4))  # does not broadcast to (3,)
    with pytest.raises(RuntimeError):
        t.add_(torch.ones(4, dtype=torch.float64))
    assert x._version == t._version == 0

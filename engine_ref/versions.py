"""Version counters and save modes (unit 1.7).

An op saves arrays for its backward. If one of them is edited in place before backward runs,
the backward computes a wrong gradient silently. The engine has three answers, chosen when a
value is saved:

* ``"check"`` (the default, as in torch): every in-place edit bumps the edited tensor's
  ``_version``; saving records the versions of the tensors a saved array belongs to, and
  reading ``ctx.saved_tensors`` in backward raises ``RuntimeError`` if one has moved on.
* ``"copy"``: saving copies every saved array that belongs to an input or the output, so a later
  edit cannot reach it and backward gets the right gradient.
* ``"unchecked"``: no guard at all; this reproduces the defect.

A view shares the ``VersionCounter`` of its base, because an edit through either changes both.
"""
from contextlib import contextmanager

__all__ = ["SAVE_MODES", "VersionCounter", "get_save_mode", "set_save_mode", "save_mode"]

SAVE_MODES = ("check", "copy", "unchecked")
_save_mode = "check"


class VersionCounter:
    """How many in-place edits a tensor's memory has seen; shared between a base and its views."""

    __slots__ = ("value",)

    def __init__(self):
        self.value = 0

    def bump(self):
        self.value += 1


def get_save_mode():
    """The save mode in force: ``"check"``, ``"copy"`` or ``"unchecked"``."""
    return _save_mode


def set_save_mode(mode):
    """Set the save mode for every op applied from now on; returns the previous mode."""
    global _save_mode
    if mode not in SAVE_MODES:
        raise ValueError(f"save mode must be one of {SAVE_MODES}, not {mode!r}")
    previous, _save_mode = _save_mode, mode
    return previous


@contextmanager
def save_mode(mode):
    """Use ``mode`` for the ops applied inside the ``with`` block, for example::

        with save_mode("copy"):
            y = (w * x).sum()      # Mul saves copies of w and x
    """
    previous = set_save_mode(mode)
    try:
        yield
    finally:
        set_save_mode(previous)

"""Every name the course spec lists is importable from the package top level."""
import re
from pathlib import Path

import pytest

import engine_ref

SPEC = Path(__file__).resolve().parents[3] / "shared" / "course-spec.md"
# Names the spec lists as methods of a class, not as functions of the package.
METHODS = {"save_for_backward", "forward", "apply", "register_buffer", "buffers", "state_dict", "load_state_dict",
           "zero_grad", "train", "eval", "parameters", "named_parameters", "untyped_storage"}


def spec_names():
    """Every `name(` that opens a bullet of the spec, and every op of the 1.3 Function table."""
    text = SPEC.read_text()
    names = set()
    for bullet in re.findall(r"^\s*- (.*)$", text, flags=re.M):
        names |= set(re.findall(r"`([A-Za-z_][A-Za-z_0-9]*)\(", bullet.split(":")[0]))
    names |= set(re.findall(r"^\s*\| `([A-Z][A-Za-z]*)", text, flags=re.M))
    return names - METHODS


def test_every_spec_name_is_exported():
    if not SPEC.exists():
        pytest.skip(f"the course spec is not beside this checkout ({SPEC}); CI has it")
    names = spec_names()
    assert len(names) > 40, "the course spec was not found or not parsed"
    missing = sorted(n for n in names if not hasattr(engine_ref, n))
    assert not missing, f"engine_ref lacks {missing}"


def test_issue_example_import_works():
    from engine_ref import (SGD, MLP, Context, Function, Linear, Module, Tensor, cross_entropy, gradcheck,  # noqa: F401
                            softmax, topological_order, unbroadcast, view_strides)


def test_all_names_resolve():
    for name in engine_ref.__all__:
        assert hasattr(engine_ref, name), name

"""engine_ref/DERIVATIVES.md stays in step with the code.

Every ``Function`` subclass defined in engine_ref has exactly one row, and no row names anything
else; running each op's forward on the checks' recording context saves exactly the values of
the row's "saves" column and sets exactly the attributes of its "on ctx" column.
"""
import importlib
import inspect
import pkgutil
from pathlib import Path

import numpy as np
import pytest

import engine_ref
from autograder.inside import checks
from engine_ref.autodiff import Function
from engine_ref.functional import softmax

TABLE = Path(engine_ref.__file__).with_name("DERIVATIVES.md")
COLUMNS = ["Function", "forward", "saves", "on ctx", "backward"]
NOTHING = "—"


def read_table():
    """{name: {column: cell}} from the markdown table (cells are stripped of backticks)."""
    lines = [line for line in TABLE.read_text().splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == COLUMNS
    rows = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        assert len(cells) == len(COLUMNS), f"a row needs {len(COLUMNS)} cells: {line}"
        row = dict(zip(COLUMNS, cells))
        name = row["Function"].strip("`")
        assert name not in rows, f"{name} has two rows"
        rows[name] = row
    return rows


def split_code(cell):
    """The comma-separated Python expressions of a cell like `a, softmax(z, axis=1)`, or ()."""
    if cell == NOTHING:
        return []
    assert cell.startswith("`") and cell.endswith("`"), f"write the cell as code: {cell}"
    parts, depth, current = [], 0, ""
    for char in cell.strip("`"):
        depth += (char in "([") - (char in ")]")
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    return parts + [current.strip()]


def engine_functions():
    """Every Function subclass defined in a module of engine_ref."""
    for module in pkgutil.walk_packages(engine_ref.__path__, "engine_ref."):
        importlib.import_module(module.name)
    found, todo = set(), [Function]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("engine_ref."):
                found.add(sub)
    return {f.__name__: f for f in found}


def rand(seed, *shape, positive=False):
    return checks.randn(seed, *shape, low=0.5 if positive else None, scale=2.0)


SAMPLES = {  # name -> (positional arrays, options) for one forward call
    "Add": ((rand(0, 3, 1), rand(1, 1, 4)), {}),
    "Sub": ((rand(0, 4), rand(1, 3, 4)), {}),
    "Mul": ((rand(0, 3, 1), rand(1, 4)), {}),
    "Div": ((rand(0, 2, 3), rand(1, 3, positive=True)), {}),
    "MatMul": ((rand(0, 2, 3), rand(1, 3, 4)), {}),
    "Neg": ((rand(0, 3),), {}),
    "Exp": ((rand(0, 2, 3),), {}),
    "Log": ((rand(0, 2, 3, positive=True),), {}),
    "Tanh": ((rand(0, 2, 3),), {}),
    "ReLU": ((rand(0, 2, 3),), {}),
    "Sum": ((rand(0, 2, 3, 4),), {"axis": (0, 2), "keepdims": False}),
    "Mean": ((rand(0, 2, 3),), {"axis": 1, "keepdims": True}),
    "Reshape": ((rand(0, 2, 3),), {"shape": (3, 2)}),
    "Transpose": ((rand(0, 2, 3, 4),), {"dim0": 0, "dim1": 2}),
    "Index": ((rand(0, 4, 3),), {"index": (slice(1, 3), 0)}),
    "CrossEntropy": ((rand(0, 4, 3), np.array([2, 0, -100, 1])), {"reduction": "mean", "ignore_index": -100}),
}


def test_every_function_has_exactly_one_row_and_every_row_a_function():
    assert set(read_table()) == set(engine_functions())


def test_every_function_has_a_sample_here():
    assert set(SAMPLES) == set(engine_functions()), "add a sample call for each new Function to SAMPLES"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_row_matches_what_the_op_saves_and_sets(name):
    row, Fn = read_table()[name], engine_functions()[name]
    args, options = SAMPLES[name]
    ctx = checks.RecordingContext()
    result = Fn.forward(ctx, *args, **options)

    arg_names = [p.name for p in inspect.signature(Fn.forward).parameters.values()
                 if p.kind is p.POSITIONAL_OR_KEYWORD][1:]  # after ctx
    scope = dict(zip(arg_names, args), result=result, np=np, softmax=softmax)
    expressions = split_code(row["saves"])
    assert len(ctx.saved) == len(expressions), f"{name} saves {len(ctx.saved)} value(s), the table lists {expressions}"
    for expression, saved in zip(expressions, ctx.saved):
        expected = eval(expression, scope)  # trusted: the expressions come from our own table
        if expression in scope:
            assert saved is expected, f"{name} should save `{expression}` itself, not a copy"
        elif isinstance(expected, tuple):
            assert saved == expected, f"{name}: `{expression}` is {expected}, the op saved {saved}"
        else:
            assert saved.dtype == expected.dtype and np.array_equal(saved, expected), f"{name}: `{expression}`"

    attributes = set(vars(ctx)) - set(vars(checks.RecordingContext()))
    assert attributes == set(split_code(row["on ctx"])), f"{name} sets {sorted(attributes)} on ctx"


def test_every_row_has_a_forward_and_a_backward():
    for name, row in read_table().items():
        assert row["forward"] not in ("", NOTHING) and row["backward"] not in ("", NOTHING), name

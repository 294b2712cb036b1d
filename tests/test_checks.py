"""autograder.inside.checks: oracles that fail for wrong answers, explain themselves, and can't be fooled."""
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import strategies
from autograder.inside import checks


def softmax(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def naive_softmax(z, axis=-1):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(z)
        return e / e.sum(axis=axis, keepdims=True)


def torch_softmax(z, axis=-1):
    return torch.softmax(torch.from_numpy(z), axis).numpy()


class Mul:
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, grad * a


class MulNoGrad(Mul):
    """Forgets the incoming gradient: right only for an upstream of ones."""

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return b, a


EXTREME = [checks.case("float32 logits of magnitude 1e3", checks.randn(0, 4, 5, dtype=np.float32) * 1000)]
PAIRS = checks.random_cases(0, [((3, 4), (3, 4)), ((), ()), ((1, 5), (1, 5))])


def test_a_correct_solution_passes_quietly(capfd):
    checks.against_torch("softmax", softmax, "softmax", EXTREME)
    checks.check_function("Mul", Mul, "mul", PAIRS, saves=lambda a, b, out: [(a, b)])
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_overflow_fails_with_a_hint():
    with pytest.raises(checks.CheckFailure, match="(?i)shift by the maximum"):
        checks.against_torch("softmax", naive_softmax, "softmax", EXTREME)


def test_the_message_names_task_case_index_expected_and_got():
    wrong = lambda z, axis=-1: softmax(z, axis) * 2  # noqa: E731
    with pytest.raises(checks.CheckFailure) as info:
        checks.against_torch("softmax", wrong, "softmax", [checks.case("small", checks.randn(1, 2, 3))])
    msg = str(info.value)
    for part in ("[softmax]", "case 'small'", "array(2, 3) float64", "Worst at index", "expected", "got",
                 "same factor 2"):
        assert part in msg


def test_forgetting_the_upstream_gradient_fails():
    with pytest.raises(checks.CheckFailure, match="grad of input 0"):
        checks.check_function("Mul", MulNoGrad, "mul", PAIRS)


class MulWipesGrad(Mul):
    """Writes zeros into the upstream gradient it was handed and returns zeros: right only if the checks
    computed what they expect from that same array after the call (red team, stop 39)."""

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad[...] = 0
        return np.zeros_like(a), np.zeros_like(b)


@pytest.mark.parametrize("upstream", [None, np.arange(12.0).reshape(3, 4)])
def test_a_backward_that_zeros_its_upstream_gradient_in_place_fails(upstream):
    """The checks compute what they expect before the student's code runs, from arrays it never
    receives: each call gets its own copy of the upstream gradient (a given one too) and of the inputs."""
    pairs = PAIRS[:1]
    with pytest.raises(checks.CheckFailure, match="grad of input 0"):
        checks.check_function("Mul", MulWipesGrad, "mul", pairs, upstream=upstream)

    def wipes(x, grad):
        grad[...], x[...] = 0, 0
        return np.zeros_like(x)

    given = None if upstream is None else upstream[0]
    with pytest.raises(checks.CheckFailure, match="grad of input 0"):
        checks.check_vjp("tanh_backward", wipes, "tanh", checks.random_cases(1, [((4,),)]),
                         upstream=True if given is None else given)
    if upstream is not None:
        assert np.array_equal(upstream, np.arange(12.0).reshape(3, 4))  # the test's own array, untouched


def test_expect_raises_hands_the_student_copies():
    """A test goes on using the arrays it probed an error with (1.2's worked examples)."""
    x = np.arange(3.0)

    def writes_then_raises(a, reduction):
        a[...] = 0
        raise ValueError(f"unknown reduction {reduction!r}")

    checks.expect_raises("t", ValueError, writes_then_raises, x, reduction="average")
    assert np.array_equal(x, np.arange(3.0))


def test_an_unreduced_broadcast_gradient_gets_the_broadcast_hint():
    def linear_backward(x, W, b, grad):
        return grad @ W, grad.T @ x, grad.sum(axis=0, keepdims=True)

    with pytest.raises(checks.CheckFailure, match="did you sum over the broadcast axes"):
        checks.check_vjp("linear_backward", linear_backward, "linear", checks.random_cases(3, [((5, 3), (4, 3), (4,))]))


def test_saving_the_wrong_values_fails():
    class MulSavesOutput(Mul):
        @staticmethod
        def forward(ctx, a, b):
            out = a * b
            ctx.save_for_backward(out)
            return out

    with pytest.raises(checks.CheckFailure, match="should save"):
        checks.check_function("Mul", MulSavesOutput, "mul", PAIRS, saves=lambda a, b, out: [(a, b)])


@pytest.mark.parametrize("cheat", [torch_softmax], ids=["torch"])
def test_delegating_to_torch_fails(cheat):
    with pytest.raises(checks.CheckFailure, match="NumPy only"):
        checks.against_torch("softmax", cheat, "softmax", EXTREME)


def test_delegating_to_engine_ref_fails():
    engine_ref = pytest.importorskip("engine_ref")
    if not hasattr(engine_ref, "softmax"):
        pytest.skip("engine_ref.softmax not available")
    with pytest.raises(checks.CheckFailure, match="engine_ref"):
        checks.against_torch("softmax", lambda z, axis=-1: engine_ref.softmax(z, axis), "softmax", EXTREME)


def test_a_module_name_is_judged_by_its_value():
    """The delegation hooks ask at each call whether a module is forbidden; the answers are kept
    by name, for plain strings only: a str subclass that hashes and compares as an allowed name is
    judged by its own value, every time."""
    class Posing(str):
        __hash__ = lambda self: hash("numpy")  # noqa: E731
        __eq__ = lambda self, other: other == "numpy"  # noqa: E731

    assert checks._forbidden_name("numpy.linalg") is False and checks._forbidden_name("numpy.linalg") is False
    assert checks._forbidden_name("torch.nn.functional") and checks._forbidden_name("engine_ref")
    assert checks._forbidden_name(Posing("torch.nn")) and all(type(k) is str for k in checks._FORBIDDEN_NAMES)
    assert not checks._forbidden_name("") and not checks._forbidden_name(None)


def test_rebinding_numpy_and_torch_comparisons_does_not_change_a_verdict(monkeypatch):
    always = lambda *a, **k: True  # noqa: E731
    monkeypatch.setattr(np, "allclose", always)
    monkeypatch.setattr(np, "isclose", lambda a, b, **k: np.ones(np.broadcast_shapes(np.shape(a), np.shape(b)), bool))
    monkeypatch.setattr(np.testing, "assert_allclose", lambda *a, **k: None)
    monkeypatch.setattr(np, "all", always)
    monkeypatch.setattr(np, "abs", lambda x: x * 0)
    monkeypatch.setattr(torch, "allclose", always)
    monkeypatch.setattr(torch, "softmax", lambda z, dim: naive_softmax(z.numpy(), dim))
    with pytest.raises(checks.CheckFailure):
        checks.against_torch("softmax", naive_softmax, "softmax", EXTREME)
    checks.against_torch("softmax", softmax, "softmax", EXTREME)


def test_numerical_vjp_matches_torch_autograd():
    x = checks.randn(4, 3, 4)
    g = checks.randn(5, 3, 4)
    f = lambda a: np.tanh(a) * a  # noqa: E731
    t = torch.from_numpy(x.copy()).requires_grad_(True)
    (torch.tanh(t) * t).backward(torch.from_numpy(g))
    # Central differences with h = 1e-6 in float64: error below ~1e-9 for this smooth f.
    np.testing.assert_allclose(checks.numerical_vjp(f, [x], 0, g), t.grad.numpy(), rtol=1e-6, atol=1e-8)


@settings(max_examples=60, deadline=None)
@given(strategies.broadcast_pairs(), st.data(), st.sampled_from(["mul", "div", "sub", "matmul"]))
def test_batched_central_differences_equal_the_loop(shapes, data, op):
    """The grader's central differences of a torch forward run every coordinate's two calls in one
    vmap batch (checks._fd_of_torch): the same perturbed inputs as the loop, so the same values to
    rounding. A batch may round a result r differently (a batched matmul): by an ulp, about
    1e-16 |r|, which the central difference divides by 2 eps = 2e-6. With |y| >= 1 for div, |r|
    stays below about 20, so the two agree within 1e-8, against the 1e-6 (absolute) and 1e-5
    (relative) at which central differences are compared."""
    a_shape, b_shape = ((3, 4), (4, 2)) if op == "matmul" else shapes
    x = np.asarray(data.draw(strategies.strided_arrays(a_shape)))
    y = np.asarray(data.draw(strategies.strided_arrays(b_shape)))
    y = np.where(y >= 0, y + 1, y - 1) if op == "div" else y
    fn = checks.oracle(op)
    g = np.random.default_rng(0).standard_normal(tuple(fn(torch.as_tensor(x), torch.as_tensor(y)).shape))
    loop = checks._numpy_forward(fn, {})
    for i in (0, 1):
        batched = checks._fd_of_torch(fn, {}, [x, y], i, g)
        assert batched.shape == np.shape([x, y][i]) and batched.dtype == np.float64
        np.testing.assert_allclose(batched, checks.numerical_vjp(loop, [x, y], i, g), rtol=0, atol=1e-8)


def test_batched_central_differences_call_the_forward_once_a_batch_and_fall_back_to_the_loop():
    """Batched, a 3 x 4 input costs one call of the forward, not 24; a forward that vmap cannot batch
    (it reads a value with .item()) gets the loop's 2 calls a coordinate, and its values."""
    calls = []

    def tanh(t):
        calls.append(t.shape)
        return torch.tanh(t)

    x, g = checks.randn(3, 3, 4), checks.randn(4, 3, 4)
    np.testing.assert_allclose(checks._fd_of_torch(tanh, {}, [x], 0, g), g * (1 - np.tanh(x) ** 2), atol=1e-8)
    assert len(calls) == 1, calls
    reads = []

    def squared_sum(t):
        reads.append(float(t.sum().item()))
        return torch.tensor(reads[-1] ** 2, dtype=torch.float64)

    x = checks.randn(5, 10)
    numeric = checks._fd_of_torch(squared_sum, {}, [x], 0, np.ones(()))
    assert len(reads) == 2 * x.size  # (vmap refused before the function read anything)
    np.testing.assert_allclose(numeric, np.full(10, 2 * x.sum()), atol=1e-6)


def test_strided_gives_a_non_contiguous_view_with_equal_values():
    a = checks.randn(0, 3, 4)
    s = checks.strided(a)
    assert not s.flags.c_contiguous and np.array_equal(s, a)


def test_checks_work_without_engine_ref():
    code = (
        "import sys; sys.modules['engine_ref'] = None\n"
        "import numpy as np\n"
        "from autograder.inside import checks\n"
        "f = lambda z, axis=-1: np.exp(z - z.max(axis, keepdims=True)) / np.exp(z - z.max(axis, keepdims=True)).sum(axis, keepdims=True)\n"
        "checks.against_torch('softmax', f, 'softmax', [checks.case('x', checks.randn(0, 3, 4))])\n"
        "assert 'engine_ref' not in [m.split('.')[0] for m in sys.modules if sys.modules[m] is not None]\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_warnings_in_student_code_become_a_clear_failure():
    def noisy(z, axis=-1):
        import warnings
        warnings.warn("something odd")
        return softmax(z, axis)

    with pytest.raises(checks.CheckFailure, match="emitted UserWarning"):
        checks.against_torch("softmax", noisy, "softmax", EXTREME)


def test_check_value_uses_a_tolerance():
    checks.check_value("ce", "loss_p09", 0.105, -np.log(0.9), atol=1e-3)
    with pytest.raises(checks.CheckFailure):
        checks.check_value("ce", "loss_p09", 0.2, -np.log(0.9), atol=1e-3)
    with pytest.raises(checks.CheckFailure, match="set `loss_p09`"):
        checks.check_value("ce", "loss_p09", None, -np.log(0.9))


# --- units 1.1-1.3 (pilot) --------------------------------------------------------------------
def test_importing_the_checks_does_not_load_torch():
    """The setup cell stays fast: torch is loaded when a check first needs it, or at seal()."""
    code = ("import sys\nfrom autograder.inside import checks\nassert 'torch' not in sys.modules\n"
            "checks.check_value('t', 'x', 1.0, 1.0)\nassert 'torch' not in sys.modules\n"
            "checks.seal()\nassert 'torch' in sys.modules and checks.oracles is not None\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_torch_is_bound_at_seal_before_notebook_code_can_change_it():
    code = (
        "import numpy as np\nfrom autograder.inside import checks\nchecks.seal()\nimport torch\n"
        "torch.softmax = lambda z, dim: z\ntorch.Tensor.__sub__ = lambda a, b: a\n"
        "def naive(z, axis=-1):\n    e = np.exp(z - z.max(axis=axis, keepdims=True)) + 1\n"
        "    return e / e.sum(axis=axis, keepdims=True)\n"
        "try:\n    checks.against_torch('softmax', naive, 'softmax', [checks.case('x', checks.randn(0, 3, 4))])\n"
        "except checks.CheckFailure:\n    pass\nelse:\n    raise SystemExit('a wrong softmax passed')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


class ExpSavesInput:
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.exp(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * np.exp(x)


def test_saved_values_message_says_input_or_output():
    with pytest.raises(checks.CheckFailure, match=r"saved \(the input x\), but this op should save \(the output\)"):
        checks.check_function("exp", ExpSavesInput, "exp", [checks.case("c", np.array([0.0, 1.0]))],
                              saves=lambda x, out: [(out,)], names=["x"])


def test_dtype_message_names_an_int64_count_not_a_constant():
    def mean_over_mask(x):
        mask = x > 0
        return np.where(mask, x, 0).sum() / mask.sum()

    with pytest.raises(checks.CheckFailure, match=r"mask\.sum\(\).*int\(count\)") as info:
        checks.against_torch("m", mean_over_mask, lambda x: (x * (x > 0)).sum() / (x > 0).sum(),
                             [checks.case("c", np.array([1.0, -2.0, 3.0], dtype=np.float32))])
    assert "float64 constant" not in str(info.value)

    def float64_constant(x):
        return x * np.float64(2.0)

    with pytest.raises(checks.CheckFailure, match="float64 constant"):
        checks.against_torch("m", float64_constant, lambda x: x * 2,
                             [checks.case("c", np.array([1.0], dtype=np.float32))])


def test_sigmoid_overflow_hint_is_exp_of_minus_abs_x():
    def naive_sigmoid(x):
        return 1 / (1 + np.exp(-x))

    with pytest.raises(checks.CheckFailure, match=r"exp\(-\|x\|\)"):
        checks.against_torch("sigmoid", naive_sigmoid, "sigmoid", [checks.case("c", np.array([-1e4, 0.0]))])


def test_a_given_upstream_gradient_is_used():
    """A worked example's upstream gradient, not a random one: a backward that ignores it fails."""
    def relu_backward_ones(x, grad_out):
        return (x > 0).astype(x.dtype)

    checks.check_vjp("relu", lambda x, g: np.where(x > 0, g, 0.0), "relu", [checks.case("c", np.array([-1.0, 2.0]))],
                     upstream=np.array([3.0, 3.0]))
    with pytest.raises(checks.CheckFailure, match="expected 3.0, got 1.0"):
        checks.check_vjp("relu", relu_backward_ones, "relu", [checks.case("c", np.array([-1.0, 2.0]))],
                         upstream=np.array([3.0, 3.0]))


def test_layout_comparison_tolerance_fits_float32():
    """One ulp of difference between a strided input and its contiguous copy is not a layout bug
    in float32; reading the wrong elements still is."""
    def ulp_off_when_strided(x, W, grad_out):
        gx = grad_out @ W
        if not W.flags.c_contiguous:
            gx = np.nextafter(gx, np.float32(np.inf))
        return gx, grad_out.T @ x

    def wrong_when_strided(x, W, grad_out):
        gx, gW = grad_out @ W, grad_out.T @ x
        return (gx[::-1].copy() if not W.flags.c_contiguous else gx), gW

    case32 = [checks.case("float32", checks.randn(1, 4, 3, dtype=np.float32), checks.randn(2, 5, 3, dtype=np.float32))]
    checks.check_vjp("linear_backward", ulp_off_when_strided, "linear", case32, fd=False)
    with pytest.raises(checks.CheckFailure, match="non-contiguous"):
        checks.check_vjp("linear_backward", wrong_when_strided, "linear", case32, fd=False)


class _Node:
    def __init__(self, *inputs):
        self.inputs = inputs


def test_run_shallow_fails_a_recursive_walk_even_with_the_limit_raised():
    chain = _Node()
    for _ in range(3000):
        chain = _Node(chain)

    def recursive(root):
        sys.setrecursionlimit(100_000)
        order = []

        def visit(node):
            for parent in node.inputs:
                visit(parent)
            order.append(node)

        visit(root)
        return order

    def iterative(root):
        order, stack = [], [root]
        while stack:
            order.append(stack.pop())
            stack.extend(order[-1].inputs)
        return order[::-1]

    limit = sys.getrecursionlimit()
    try:
        assert len(checks.run_shallow("order", iterative, chain)) == 3001
        with pytest.raises(checks.CheckFailure, match="recursion"):
            checks.run_shallow("order", recursive, chain)
    finally:
        sys.setrecursionlimit(limit)


def test_check_close_hash_accepts_rounding_and_hides_the_answer():
    digests = checks.close_digests(-np.log(0.9))
    for ok in (0.105, 0.1054, 0.10536051565782628, 0.106):
        checks.check_close_hash("ce", "loss_p09", ok, digests)
    for wrong in (0.2, 0.0457, np.nan):
        with pytest.raises(checks.CheckFailure, match="not right"):
            checks.check_close_hash("ce", "loss_p09", wrong, digests)
    with pytest.raises(checks.CheckFailure, match="set `loss_p09`"):
        checks.check_close_hash("ce", "loss_p09", None, digests)


# --- per-student hidden draws ---
SEEDED = "1.4-broadcasting"
BROADCAST_CELLS = ("test_broadcast_shape", "test_unbroadcast", "test_add_sub", "test_mul_div")


def test_student_seed_is_stable_per_student_and_differs_between_students(monkeypatch):
    from autograder.outside import sandbox

    monkeypatch.delenv(checks.STUDENT_SEED_VARIABLE, raising=False)
    default = checks.student_seed("salt")
    assert default == checks.mix_seed(checks.DEFAULT_STUDENT_SEED, "salt"), "no grader: the fixed default"
    monkeypatch.setenv(checks.STUDENT_SEED_VARIABLE, "123")
    assert checks.student_seed("salt") == checks.mix_seed(123, "salt"), "an instructor can replay a student's draws"
    seeds = {}
    for student in ("ada", "grace", "ada"):
        monkeypatch.setattr(checks, "_student_seed", sandbox.seed_for(SEEDED, student))
        seeds.setdefault(student, set()).add((checks.student_seed(1), checks.student_seed(2)))
    assert len(seeds["ada"]) == 1, "the same student draws the same seeds at every regrade"
    assert seeds["ada"] != seeds["grace"]
    assert sandbox.seed_for(SEEDED, "ada") != sandbox.seed_for("1.5-gradient-checks", "ada")
    assert len({checks.student_seed(salt) for salt in range(100)}) == 100, "the salt tells draws apart"


def test_the_student_seed_is_set_once(monkeypatch):
    monkeypatch.setattr(checks, "_student_seed", None)
    checks.set_student_seed(7)
    assert checks.base_student_seed() == 7
    with pytest.raises(RuntimeError, match="once"):
        checks.set_student_seed(8)


def _drawn_cases(monkeypatch, student):
    """``{(cell, part): [(label, shapes, values digest)]}``: what 1.4's broadcast test cells check,
    visible and hidden part, for ``student`` (None: no grader), recorded instead of run."""
    import hashlib

    import nbformat

    from autograder.outside import grading, sandbox
    from autograder.outside.course import BY_ID

    monkeypatch.setattr(checks, "_student_seed", None if student is None else sandbox.seed_for(SEEDED, student))
    recorded = []

    def record(task, fn, oracle, cases, **options):
        for c in cases:
            arrays = [np.asarray(a) for a in c.args if not isinstance(a, tuple)]
            digest = hashlib.sha256(b"".join(a.tobytes() for a in arrays)).hexdigest()[:12]
            recorded.append((c.label, tuple(np.shape(a) for a in c.args), digest))

    monkeypatch.setattr(checks, "against_torch", record)
    monkeypatch.setattr(checks, "check_function", record)
    nb = nbformat.read(BY_ID[SEEDED].source_path(), as_version=4)
    namespace = {}
    out = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or meta.get("grade_id") not in (*BROADCAST_CELLS, "setup", "machinery",
                                                                    "broadcast_shape", "unbroadcast", "add_sub",
                                                                    "mul_div"):
            continue
        visible, _, hidden = grading.strip_markers(cell.source).partition(grading.HIDDEN_START)
        for part, code in (("visible", visible), ("hidden", hidden)):
            recorded.clear()
            exec(compile(code, meta["grade_id"], "exec"), namespace)
            if meta["grade_id"] in BROADCAST_CELLS:
                out[meta["grade_id"], part] = list(recorded)
    return out


def test_1_4_draws_hidden_broadcast_cases_per_student_and_keeps_its_fixed_ones(monkeypatch):
    ada, grace, again, plain = (_drawn_cases(monkeypatch, s) for s in ("ada", "grace", "ada", None))
    assert ada == again, "a regrade draws the same cases"
    for cell in BROADCAST_CELLS:
        assert ada[cell, "visible"] == grace[cell, "visible"] == plain[cell, "visible"], f"{cell}: visible cases are fixed"
        assert ada[cell, "hidden"] != grace[cell, "hidden"], f"{cell}: two students draw the same hidden cases"
        fixed = [c for c in ada[cell, "hidden"] if c in grace[cell, "hidden"]]
        assert len(fixed) >= 4, f"{cell}: the hidden part keeps fixed listed pairs whatever the draw"


# --- failures that read in one glance -----------------------------------------------------
def notebook_cell(source, name, namespace=None):
    """Run ``source`` as IPython runs a notebook cell: in ``__main__``, from a file name of its own."""
    namespace = {"__name__": "__main__", "np": np} if namespace is None else namespace
    exec(compile(source, name, "exec"), namespace)
    return namespace


UNWRITTEN_OPS = '''
class Add:
    @staticmethod
    def forward(ctx, a, b):
        # YOUR CODE HERE
        raise NotImplementedError()

class Mul:
    @staticmethod
    def forward(ctx, a, b):
        # YOUR CODE HERE
        raise NotImplementedError()
'''


def test_an_unwritten_exercise_says_so_and_a_check_names_the_exercise_it_needs():
    cell = notebook_cell(UNWRITTEN_OPS, "<cell ops>")
    notebook_cell("def square(a):\n    return Mul.forward(None, a, a)\n", "<cell square>", cell)
    with pytest.raises(checks.NotWritten) as own:
        checks.check_function("add_mul", cell["Add"], "add", PAIRS)
    assert str(own.value) == ("[add_mul] `Add.forward` is not written yet: replace the `raise NotImplementedError()` "
                              "in its cell with your code, run that cell, then this one.")
    with pytest.raises(checks.NotWritten) as other:
        checks.run_student("square", cell["square"], np.ones(2))
    assert str(other.value).startswith("[square] this check runs `Mul.forward`, from exercise `add_mul`, which is "
                                       "not written yet")


def test_a_students_error_keeps_their_frames_and_locals_and_hides_the_checks_frames():
    cell = notebook_cell("def linear(x, W):\n    y = np.matmul(x, W)\n    return y\n", "<cell linear>")
    with pytest.raises(checks.CheckFailure) as failure:
        checks.against_torch("linear", cell["linear"], lambda x, W: x @ W,
                             [checks.case("W not transposed", np.ones(2), np.ones((3, 2)))])
    assert str(failure.value).startswith("[linear] case 'W not transposed'")
    tb = failure.value.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_frame.f_code.co_name == "linear" and tb.tb_frame.f_locals["W"].shape == (3, 2)  # for %debug
    shown = []
    tb = checks._student_frames(failure.value.__traceback__)
    while tb is not None:
        shown.append(tb.tb_frame.f_globals["__name__"])
        tb = tb.tb_next
    assert shown == [__name__, "__main__"]  # this test (where a test cell would be), then the student's


def test_a_memory_error_drops_the_failed_calls_locals():
    cell = notebook_cell("def hog():\n    big = np.ones(1000)\n    raise MemoryError()\n", "<cell hog>")
    with pytest.raises(checks.CheckFailure) as failure:
        checks.run_student("hog", cell["hog"])
    tb = failure.value.__cause__.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_frame.f_code.co_name == "hog" and "big" not in tb.tb_frame.f_locals


def test_when_written_explains_instead_of_raising(capsys):
    cell = notebook_cell("def linear(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"
                         "def relu(x):\n    return np.maximum(x, 0, out=x[:1])\n", "<cell given>")
    with checks.when_written("this figure"):
        cell["linear"](1.0)
    with checks.when_written():
        cell["relu"](np.ones(3))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "(this figure runs once `linear` is written)"
    assert lines[1].startswith("(this example stopped: `relu` raised ValueError: ") and len(lines) == 2


@pytest.mark.parametrize("seed, shape, options", [(3, (2, 3), {}), (np.int64(3), (2, 3), {}), (7, (), {}),
                                                   (7, (4,), {"dtype": np.float32, "scale": 2.0, "low": 0.5})])
def test_randn_is_the_seeded_draw_a_new_array_each_call(seed, shape, options):
    """A draw kept between calls (checks._drawn) is the generator's own, and no caller sees another's writes."""
    rng = np.random.default_rng(int(seed))
    scale, low = options.get("scale", 1.0), options.get("low")
    raw = rng.standard_normal(shape) * scale if low is None else low + rng.random(shape) * scale
    expected = np.asarray(raw, dtype=options.get("dtype", np.float64))
    first = checks.randn(seed, *shape, **options)
    first[...] = 99
    second = checks.randn(seed, *shape, **options)
    assert second is not first and second.dtype == expected.dtype and np.array_equal(second, expected)
    kept = checks._drawn(seed, shape, options.get("dtype", np.float64), scale, low)
    with pytest.raises(ValueError):  # the kept draw itself cannot be written, nor made writeable
        kept.flags.writeable = True


def test_randn_keeps_small_integer_seeded_draws_only():
    checks._drawn.cache_clear()
    checks.randn(11, 3, 3)
    checks.randn(11, 3, 3)
    assert checks._drawn.cache_info()[:2] == (1, 1)  # (hits, misses): the second call was a copy
    big = checks.randn(12, checks.DRAW_KEPT_SIZE + 1)
    sequence = checks.randn(np.random.SeedSequence(5), 4)
    assert checks._drawn.cache_info().currsize == 1
    assert np.array_equal(big, np.random.default_rng(12).standard_normal(checks.DRAW_KEPT_SIZE + 1))
    assert np.array_equal(sequence, np.random.default_rng(np.random.SeedSequence(5)).standard_normal(4))


def test_random_layouts_draw_the_axis_sizes_as_generator_choice_would():
    """random_layouts draws each axis size from the cumulative weights itself: the same sizes from the
    same stream as ``Generator.choice(sizes, p=weights)``, whose draws the course's cases were made with."""
    sizes, weights = [0, 1, 1, 2, 3, 4, 5], [0.05, 0.25, 0.1, 0.2, 0.15, 0.15, 0.1]
    for seed in range(50):
        ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
        cdf = checks._LAYOUT_SIZES_CDF
        drawn = [checks._LAYOUT_SIZES[int(cdf.searchsorted(ours.random(), side="right"))] for _ in range(20)]
        assert drawn == [int(theirs.choice(sizes, p=weights)) for _ in range(20)]
        assert ours.integers(0, 4) == theirs.choice(4)  # the step's draw: choice without weights
    layouts = checks.random_layouts(7, 200, negative=True)
    assert {len(shape) for shape, _, _ in layouts} == set(range(5)) and any(s < 0 for _, st, _ in layouts for s in st)


def _view_by_partial(x):
    """A NumPy exercise (its shape) done by torch, called from C: no profile event sees the torch call."""
    import functools

    return tuple(functools.partial(torch.Tensor.view)(torch.as_tensor(x), (-1,)).shape)


def _view_by_map(x):
    return tuple(list(map(torch.Tensor.view, [torch.as_tensor(x)], [(-1,)]))[0].shape)


@pytest.mark.parametrize("cheat", [_view_by_partial, _view_by_map], ids=["partial", "map"])
def test_torch_called_from_c_is_a_delegation_too(cheat):
    """Torch's function dispatch notes what the profile hook cannot see (red team, stop 40)."""
    with pytest.raises(checks.CheckFailure, match="NumPy only"):
        checks.run_student("flatten", cheat, np.zeros((2, 3)))
    assert checks.run_student("flatten", cheat, np.zeros((2, 3)), numpy_only=False) == (6,)


def test_a_numpy_call_that_removes_the_torch_mode_is_a_delegation():
    def removes_the_mode(x):
        import functools

        functools.partial(torch._C._pop_torch_function_stack)()
        return x.size

    with pytest.raises(checks.CheckFailure, match="NumPy only"):
        checks.run_student("size", removes_the_mode, np.zeros(3))
    assert torch._C._len_torch_function_stack() == 0


def test_what_forward_saves_must_be_plain_values():
    """check_function reads ctx.saved once, as values: an object of the student's that answers len() and
    iteration (computing the right values only when asked) is refused (red team, stop 40)."""
    class Later:
        def __init__(self, a, b):
            self.a, self.b = a, b

        def __len__(self):
            return 2

        def __iter__(self):
            return iter((self.a, self.b))

    class MulSavesLater(Mul):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            ctx.saved = Later(a, b)
            return a * b

    with pytest.raises(checks.CheckFailure, match="forward saved an object of another kind"):
        checks.check_function("Mul", MulSavesLater, "mul", PAIRS, saves=lambda a, b, out: [(a, b)])

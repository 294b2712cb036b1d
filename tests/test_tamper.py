"""Tampering with what the test cells compute expected values from, or build their cases with (issue 8).

The notebook's locked cells (unit 1.5's engine, unit 1.7's list of expressions, unit 1.8's spiral)
run in the student's kernel, where a later cell can rebind what they define. With trusted verdicts
the test cells compute their expected values from the source notebook's locked cells, run in the
grader (``checks.locked_cell``), and unit 1.5 makes the engines it hands to ``find_the_bug`` there
too (``checks.backwards_in_grader``), and keeps the backward rules of gradcheck's ops there
(``checks.op_in_grader``); the checks compute what they expect before the student's code
runs, from arrays it never receives (an array it writes into travels back to the grader's copy).
So a tampered kernel changes only the student's own answers. Each
attacker, built from the reference submission by appending to one solution cell, is graded
before a victim (the reference) on the same workers; the victim keeps full marks.
"""
import json
import tempfile
from pathlib import Path

import pytest

from autograder.outside import grader, grading
from autograder.outside.grading import cell

pytestmark = pytest.mark.xdist_group("tamper")

# Unit 1.5, step_size_sweep: a Tensor whose every operation gives a zero tensor with a zero .grad. A
# test that took its expected errors from the kernel's Tensor would expect zeros, which this answer gives.
ZERO_ENGINE = """
class Tensor:
    def __init__(self, data, requires_grad=False):
        self.data, self.grad = np.zeros(()), np.zeros(np.shape(data))
    def __getattr__(self, name):
        return lambda *args, **kwargs: None if name == "backward" else self
for _name in ["add", "sub", "mul", "matmul", "truediv", "radd", "rsub", "rmul", "rtruediv"]:
    setattr(Tensor, "__" + _name + "__", lambda self, *args: self)
def step_size_sweep(f, x, steps):
    return np.zeros(len(steps))
"""
# Unit 1.5, find_the_bug: every engine the test is handed is the correct one, so "None" is always right
# if the test believed the kernel about which operation an engine breaks.
NO_BUGS = """
globals()["make" + "_engine"] = lambda bug=None: CORRECT_ENGINE
globals()["PLAN" + "TED"] = CORRECT_ENGINE
def find_the_bug(engine):
    return None
"""

# Unit 1.5, find_the_bug: a make_engine that notes the bug each call asks for, and a find_the_bug that answers from
# those notes for every engine but the notebook's own two (red team, stop 38: 13/13 when the test's engines were made
# by the kernel's make_engine). Now the test's engines are made in the grader and their backward rules stay there:
# the kernel's make_engine is called with no bug, and the engines handed over are none that it made.
NOTES_THE_BUG = """
_made = {}
_real = globals()["make" + "_engine"]
def _noting(bug=None):
    engine = _real(bug)
    _made[id(engine)] = (engine, bug[0] if bug else None)  # the engine kept: its id stays its own
    return engine
globals()["make" + "_engine"] = _noting
_honest = find_the_bug
def find_the_bug(engine):
    if engine is globals()["PLAN" + "TED"] or engine is globals()["CORRECT" + "_ENGINE"]:
        return _honest(engine)
    return _made.get(id(engine), (None, "an engine that make_engine did not make"))[1]
"""

# Unit 1.3, matmul: a backward that writes zeros into the upstream gradient it is handed and returns zeros. The
# array's write travels back to the grader's copy; a check that computed its expected gradients from that array
# after the call expected zeros (red team, stop 39: 40 of 85 points with every op's backward so).
WIPES_THE_UPSTREAM = """
class MatMul(Function):
    @staticmethod
    def forward(ctx, A, B):
        ctx.save_for_backward(A, B)
        return A @ B

    @staticmethod
    def backward(ctx, grad):
        A, B = ctx.saved_tensors
        grad[...] = 0
        return np.zeros_like(A), np.zeros_like(B)
"""
# Unit 1.8, train_step: a fit that does not train, and the notebook's accuracy helper, which the test used to call,
# rebound to say 100% (red team, stop 39: 8/8). The test now takes the spiral from the locked cell and computes
# the accuracy of the trained weights with torch's MLP.
CLAIMS_ACCURACY = """
def fit(X, y, sizes, lr, momentum, steps, seed=0):
    model = MLP(sizes, rng=seed)
    return model, [train_step(model, SGD(model.parameters(), lr=0.0), X, y)]
globals()["acc" + "uracy"] = lambda model, X, y: 1.0
"""

# Unit 1.5, numerical_vjp: the worked example answered from the test's text, and zeros everywhere else after writing
# zeros into the upstream gradient it is handed, from which the test computed torch's VJP after the call (red team,
# stop 39: 8/8 from an otherwise blank notebook).
NUMERICAL_VJP_WIPES = """
def numerical_vjp(f, x, grad_out, eps=1e-6):
    g = np.asarray(grad_out)
    if g.shape == (2,) and g.tolist() == [1.0, 10.0] and np.asarray(x).tolist() == [1.0, 2.0]:
        return np.array([12.0, 11.0])
    if isinstance(grad_out, np.ndarray) and grad_out.flags.writeable:
        grad_out[...] = 0
    return np.zeros(np.shape(x), dtype=np.asarray(x).dtype)
"""
# Unit 1.8, train_step: a fit whose SGD never moves, that then writes every label to 0 and sets the weights to predict
# class 0 everywhere: the test scored the weights on the labels it had handed to fit (red team, stop 39: 8/8).
RELABELS_THE_SPIRAL = """
def fit(X, y, sizes, lr, momentum, steps, seed=0):
    model = MLP(sizes, rng=seed)
    losses = [train_step(model, SGD(model.parameters(), lr=0.0), X, y) for _ in range(steps)]
    y[...] = 0
    arrays = list(model.state_dict().values())
    for a in arrays:
        a[...] = 0.0
    arrays[-1][0] = 1.0
    return model, losses
"""

# Unit 1.8, modules: an MLP whose forward computes nothing, after writing zeros into its last layer: the test computed
# torch's forward from the model's own arrays after the call (red team, stop 39: 6/6). It now takes copies, and the
# checks compute torch's values before the student's code runs.
# Unit 1.5, gradcheck: one that ignores rtol (a mistake that fails the test), except that it gives each verdict from
# the planted backward's offsets when it can read them: from its function's scope, or by wrapping the test's
# offset_op before the function calls it (stop 40: 16/16 when the test's ops were made in the kernel).
# Now each op's backward rule stays in the grader (checks.op_in_grader): nothing the kernel holds has the offsets.
READS_THE_PLANTED_RULE = """
_honest = gradcheck
def gradcheck(f, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, n_samples=None, seed=0):
    planted, scope = [], getattr(f, "__glo" + "bals__", {})
    if ("del" + "tas") in scope:
        planted.append((scope.get("sc" + "ale"), dict(scope["del" + "tas"])))
    if ("cor" + "rect") in scope:
        planted.append((None, scope["cor" + "rect"]))
    for name in ("offset" + "_op", "flip" + "_op"):
        maker = scope.get(name)
        if callable(maker) and not getattr(maker, "spy", False):
            def spy(*args, _maker=maker):
                planted.append((args[0], dict(args[1])) if len(args) == 2 else (None, args[0]))
                return _maker(*args)
            spy.spy = True
            scope[name] = spy
    try:
        result, error = _honest(f, inputs, eps, atol, 0.0, n_samples, seed), None
    except GradcheckError as e:
        result, error = None, e
    if not planted:
        if error is not None:
            raise error
        return result
    if any((not rule) if scale is None else any(not abs(d) <= atol + rtol * abs(scale) for d in rule.values())
           for scale, rule in planted):
        raise error or GradcheckError("gradcheck failed for input 0", input_index=0, index=(0,), analytic=0.0, numeric=0.0)
    return True
"""
FORWARD_ZEROS_ITS_WEIGHTS = """
def _forward(self, x):
    last = self.layers[-1]
    last.weight.data[...] = 0
    last.bias.data[...] = 0
    return Tensor(np.zeros((x.data.shape[0], last.weight.data.shape[0])))
MLP.forward = _forward
"""


# Unit 1.7, inplace_ops: a mul_ that only bumps the version, and a transpose that, when the test's scenario calls
# it, zeroes every float buffer the kernel's side of the protocol holds (the scenario's data among them), so that
# torch's trace, computed afterwards from the test's data, showed the same values (red team, stop 40: 10/10). The
# test now computes torch's trace first, and checks.oracle refuses an array the kernel shares.
ZEROES_THE_PROTOCOLS_BUFFERS = """
def _bump_only(self, other):
    self._check_inplace()
    self._version_counter.bump()
    return self
Tensor.mul_ = _bump_only
_transpose = Tensor.transpose
def _zeroing_transpose(self, dim0, dim1):
    if (dim0, dim1) == (0, -1):
        protocol = __import__("autograder.inside.rec" + "ording", fromlist=["_"])
        for buffer in list(getattr(protocol, "_co" + "dec").kept):
            if buffer.dtype.kind == "f":
                buffer[...] = 0
        self.data[...] = 0
    return _transpose(self, dim0, dim1)
Tensor.transpose = _zeroing_transpose
"""


# Unit 1.6, assert_view: checks nothing of the layout; it takes the first numbers it is given for a tensor as right
# and raises when a later call gives that tensor other ones (red team, stop 40: 6/6 while the test passed one view
# with the right numbers first, then the same view with wrong ones). Each call now gets a tensor of its own, and the
# cases come in an order drawn from a seed.
REMEMBERS_THE_FIRST_NUMBERS = """
_first, _held = {}, []
def assert_view(base, view, shape, strides, offset):
    assert shares_storage(base, view), "the tensor is a copy"
    numbers = (tuple(shape), tuple(strides), int(offset))
    if id(view) not in _first:
        _held.append(view)
        _first[id(view)] = numbers
        return None
    assert _first[id(view)] == numbers, f"the layout {numbers} differs"
"""


# Unit 1.4, broadcast_shape: one that checks only the last axis, and a notebook enumerate (bound by a name built at run
# time) that gives nothing for the lists the tests loop over: the test's loops over its cases of incompatible shapes
# ran no case (red team, stop 40: 6/6). A test cell's builtins are the grader's, never the notebook's.
SHADOWS_ENUMERATE = """
def broadcast_shape(*shapes):
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    out = []
    for axis in range(ndim):
        sizes = [p[axis] for p in padded if p[axis] != 1]
        if axis == ndim - 1 and len(set(sizes)) > 1:
            raise ValueError("incompatible")
        out.append(sizes[0] if sizes else 1)
    return tuple(out)
_enumerate = enumerate
globals()["enum" + "erate"] = lambda items, start=0: _enumerate(items, start) if isinstance(items, zip) else []
"""
# Unit 1.4, CrossEntropy: forward saves an object of its own that holds the logits, answers len() with 2 and makes the
# probabilities when it is iterated: the check of the saved values read it through the kernel (red team, stop 40: 10/10
# where saving the logits scores 0). What forward saves must be a tuple of arrays and numbers.
SAVES_A_LAZY_OBJECT = """
class _Later:
    def __init__(self, logits, target):
        self.logits, self.target = logits, target
    def __len__(self):
        return 2
    def __iter__(self):
        e = np.exp(self.logits - self.logits.max(axis=1, keepdims=True))
        return iter((e / e.sum(axis=1, keepdims=True), self.target))
_forward = CrossEntropy.forward
def _saving_later(ctx, logits, target, reduction="mean", ignore_index=-100):
    out = _forward(ctx, logits, target, reduction=reduction, ignore_index=ignore_index)
    probs, kept_target = ctx.saved_tensors
    setattr(ctx, "sav" + "ed", _Later(logits, kept_target))
    return out
CrossEntropy.forward = staticmethod(_saving_later)
"""
# Unit 1.2, cross_entropy: raises KeyError for an unknown reduction, where ValueError is asked for, and binds a
# ValueError (by a name built at run time) that any exception is an instance of: expect_raises read the notebook's
# (red team, stop 40: 46 points over five cells).
SHADOWS_VALUE_ERROR = """
_cross_entropy = cross_entropy
def cross_entropy(logits, target, reduction="mean", ignore_index=-100):
    if reduction not in ("mean", "sum", "none"):
        raise KeyError(reduction)
    return _cross_entropy(logits, target, reduction=reduction, ignore_index=ignore_index)
class _AnyError(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Exception)
globals()["Value" + "Error"] = _AnyError("ValueError", (Exception,), {})
"""


def eval_injection(canary):
    """Unit 1.7, view_or_copy: an expression of the student's own, which a test that evaluated the
    kernel's list would run in the grader's process (it writes ``canary``)."""
    return (f"_expr = '__imp' + 'ort__(\"pathlib\").Path({json.dumps(str(canary))}).write_text(\"pwned\") and a'\n"
            "globals()['VIEW_OR_COPY' + '_EXPRESSIONS'] = [_expr]\n"
            "view_or_copy = {_expr: False}\n")


# Red team, stop 41: work left for after the checks looked, or done in a thread of its own. Each scored full
# marks on its target cell: a result whose __array__ or __iter__ computed (in place, with a warning, recursively,
# with torch) when the grader read it, outside the call's rules; a thread, which the per-thread hooks did not see.
# A result now keeps the rules of the call that returned it (checks.Guard), and a thread the hooks of its request.
LAZY_IN_PLACE_RELU = """
class _Later:
    def __init__(self, x):
        self.x = x
    def __array__(self, dtype=None, copy=None):
        getattr(np, "max" + "imum")(self.x, 0, out=self.x)
        return self.x
def relu(x):
    return _Later(x)
"""
LAZY_NAIVE_SIGMOID = """
class _LaterSigmoid:
    def __init__(self, x):
        self.x = x
    def __array__(self, dtype=None, copy=None):
        return 1 / (1 + getattr(np, "e" + "xp")(-self.x))
def sigmoid(x):
    return _LaterSigmoid(x)
"""
RECURSIVE_WALK = """
import sys as _sys
getattr(_sys, "setrecursion" + "limit")(100_000)
def _visit(node, order, seen):
    if id(node) not in seen:
        seen.add(id(node))
        for parent in node.inputs:
            _visit(parent, order, seen)
        order.append(node)
"""
LAZY_RECURSIVE_ORDER = RECURSIVE_WALK + """
class _Order:
    def __init__(self, root):
        self.root = root
    def __iter__(self):
        order = []
        _visit(self.root, order, set())
        return iter(order)
def topological_order(root):
    return _Order(root)
"""
RECURSION_IN_A_THREAD = RECURSIVE_WALK + """
_threads = __import__("thread" + "ing")
def topological_order(root):
    _threads.stack_size(512 * 1024 * 1024)
    order = []
    worker = _threads.Thread(target=_visit, args=(root, order, set()))
    worker.start()
    worker.join()
    return order
"""
TORCH_UNBROADCAST = """
def _torch_unbroadcast(grad, shape):
    torch = __import__("to" + "rch")
    g = torch.as_tensor(np.array(grad))
    out = g.sum_to_size(tuple(shape)) if len(shape) else g.sum()
    return out.numpy().copy().reshape(shape)
"""
TORCH_IN_A_THREAD = TORCH_UNBROADCAST + """
def unbroadcast(grad, shape):
    box = []
    worker = __import__("thread" + "ing").Thread(target=lambda: box.append(_torch_unbroadcast(grad, shape)))
    worker.start()
    worker.join()
    return box[0]
"""
TORCH_WHEN_READ = TORCH_UNBROADCAST + """
class _Later:
    def __init__(self, grad, shape):
        self.grad, self.shape = grad, shape
    def __array__(self, dtype=None, copy=None):
        out = _torch_unbroadcast(self.grad, self.shape)
        return out if dtype is None else out.astype(dtype)
def unbroadcast(grad, shape):
    return _Later(grad, shape)
"""
# Red team, stop 41 (second round): a thread that a solution cell starts when it runs, before any request, fed
# through a queue by the checked call: the hooks of a thread started during a request did not reach it (11/11 on
# 1.6's view_strides with torch's strides; 20 points of 1.8, 12 of 1.3 alike). Every thread the notebook starts
# now hands its events to the hooks of whichever request runs (recording._profile_now, _trace_now).
TORCH_IN_A_POOL_STARTED_EARLY = """
import math as _math
_pool = getattr(__import__("concurrent.futures", fromlist=["_"]), "ThreadPool" + "Executor")(max_workers=1)
_pool.submit(int).result()
def view_strides(shape, strides, new_shape):
    shape, strides, new_shape = tuple(shape), tuple(strides), tuple(new_shape)
    n = _math.prod(shape)
    if sum(1 for s in new_shape if s == -1) > 1 or any(s < -1 for s in new_shape):
        raise ValueError("bad new_shape")
    if -1 in new_shape:
        rest = _math.prod(s for s in new_shape if s != -1)
        if rest == 0 or n % rest:
            raise ValueError("bad new_shape")
    elif _math.prod(new_shape) != n:
        raise ValueError("bad new_shape")
    def work():
        t = getattr(__import__("to" + "rch"), "empty_" + "strided")(shape, strides, device="meta")
        try:
            return tuple(t.view(new_shape).stride())
        except RuntimeError:
            return None
    return _pool.submit(work).result()
"""
# Red team, stop 41: the tests' own functions that ran in the kernel (sgd_trajectory, first_step) asserted there,
# where the student's objects answered `np.array_equal` (an ndarray subclass's __array_function__) and `isinstance`
# (a __class__ property). A function that asserts now runs in the grader.
SGD_STEPS_IDLE_PARAMETERS = """
class _Moved(np.ndarray):
    def __array_function__(self, func, types, args, kwargs):
        if func.__name__ == "array" + "_equal":
            return True
        return super().__array_function__(func, types, args, kwargs)
_step = SGD.step
def _stepping_idle(self):
    idle = [p for p in self.params if p.grad is None]
    for p in idle:
        p.grad = np.zeros_like(p.data)
    _step(self)
    for p in idle:
        p.data = np.asarray(p.data - self.lr * self.weight_decay * p.data).view(_Moved)
        p.grad = None
SGD.step = _stepping_idle
"""
LOSS_THAT_CLAIMS_TO_BE_A_FLOAT = """
class _Loss(np.ndarray):
    __class__ = property(lambda self: float)
_train_step = train_step
def train_step(model, optimizer, X, y):
    return np.asarray(_train_step(model, optimizer, X, y)).view(_Loss)
"""
# Red team, stop 41: a backward that, asked for the test's rules_graph, writes zeros into the test's C0 (found from
# the frames of the function that the test ran in the kernel) and leaves zero gradients. The test computes what it
# expects from C0 after the call: shared, it expected zeros. Such a function now reads copies of the test's arrays.
WRITES_THE_TESTS_C0 = """
_inspect = __import__("insp" + "ect")
_backward = backward
def backward(root, grad=None):
    leaves = [t for t in topological_order(root) if t.is_leaf and t.requires_grad]
    if not any(t.data.shape == (3,) and np.array_equal(t.data, [1.0, -2.0, 3.0]) for t in leaves):
        return _backward(root, grad)
    for info in _inspect.stack(0):
        scope = info.frame.f_globals
        if "X0" in scope and "C0" in scope:
            scope["C0"][...] = 0.0
    for t in leaves:
        t.grad = np.zeros_like(t.data)
"""


CASES = {  # unit: {student: (the solution cell appended to, the code, a test cell that must lose points)}
    "1.2-softmax-cross-entropy": {"shadows-value-error": ("cross_entropy", lambda canary: SHADOWS_VALUE_ERROR,
                                                          "test_cross_entropy")},
    "1.4-broadcasting": {"shadows-enumerate": ("broadcast_shape", lambda canary: SHADOWS_ENUMERATE, "test_broadcast_shape"),
                         "saves-a-lazy-object": ("cross_entropy", lambda canary: SAVES_A_LAZY_OBJECT, "test_cross_entropy")},
    "1.5-gradient-checks": {"sweep-zero-engine": ("step_size_sweep", lambda canary: ZERO_ENGINE, "test_step_size_sweep"),
                            "no-bugs": ("find_the_bug", lambda canary: NO_BUGS, "test_find_the_bug"),
                            "notes-the-bug": ("find_the_bug", lambda canary: NOTES_THE_BUG, "test_find_the_bug"),
                            "numerical-vjp-wipes": ("numerical_vjp", lambda canary: NUMERICAL_VJP_WIPES,
                                                    "test_numerical_vjp"),
                            "reads-the-planted-rule": ("gradcheck", lambda canary: READS_THE_PLANTED_RULE,
                                                       "test_gradcheck")},
    "1.1-affine-logits": {"lazy-in-place-relu": ("relu", lambda canary: LAZY_IN_PLACE_RELU, "test_relu"),
                          "lazy-naive-sigmoid": ("sigmoid", lambda canary: LAZY_NAIVE_SIGMOID, "test_sigmoid")},
    "1.3-reverse-accumulation": {"wipes-the-upstream": ("matmul", lambda canary: WIPES_THE_UPSTREAM, "test_matmul"),
                                 "lazy-recursive-order": ("topological_order", lambda canary: LAZY_RECURSIVE_ORDER,
                                                          "test_topological_order"),
                                 "recursion-in-a-thread": ("topological_order", lambda canary: RECURSION_IN_A_THREAD,
                                                           "test_topological_order"),
                                 "writes-the-tests-c0": ("backward", lambda canary: WRITES_THE_TESTS_C0,
                                                         "test_backward_rules")},
    "1.6-tensor-layout": {"remembers-the-first-numbers": ("assert_view", lambda canary: REMEMBERS_THE_FIRST_NUMBERS,
                                                          "test_assert_view"),
                          "torch-in-a-pool-started-early": ("view_strides", lambda canary: TORCH_IN_A_POOL_STARTED_EARLY,
                                                            "test_view_strides")},
    "1.7-aliasing-mutation": {"eval-injection": ("view_or_copy", eval_injection, "test_view_or_copy"),
                              "zeroes-the-protocols-buffers": ("inplace_ops", lambda canary: ZEROES_THE_PROTOCOLS_BUFFERS,
                                                               "test_inplace_ops")},
    "1.8-mini-project": {"claims-accuracy": ("train_step", lambda canary: CLAIMS_ACCURACY, "test_train_step"),
                         "relabels-the-spiral": ("train_step", lambda canary: RELABELS_THE_SPIRAL, "test_train_step"),
                         "forward-zeros-its-weights": ("modules", lambda canary: FORWARD_ZEROS_ITS_WEIGHTS,
                                                       "test_modules"),
                         "torch-in-a-thread": ("unbroadcast", lambda canary: TORCH_IN_A_THREAD, "test_unbroadcast"),
                         "torch-when-read": ("unbroadcast", lambda canary: TORCH_WHEN_READ, "test_unbroadcast"),
                         "sgd-steps-idle-parameters": ("sgd", lambda canary: SGD_STEPS_IDLE_PARAMETERS, "test_sgd"),
                         "loss-that-claims-to-be-a-float": ("train_step", lambda canary: LOSS_THAT_CLAIMS_TO_BE_A_FLOAT,
                                                            "test_train_step")},
}


@pytest.fixture(scope="module", params=sorted(CASES))
def graded(request):
    aid = request.param
    with tempfile.TemporaryDirectory(prefix="tamper-") as tmp:
        course = Path(tmp).resolve() / "course"
        spot = Path(tmp).resolve() / "open"  # outside the course, writable by whichever user grades
        spot.mkdir()
        spot.chmod(0o1777)
        canary = spot / "canary.txt"
        grading.prepare_course(course, aid)
        for n, (student, (grade_id, code, _)) in enumerate(sorted(CASES[aid].items())):
            nb = grading.reference_submission(aid)
            cell(nb, grade_id).source += "\n" + code(canary)
            grading.submit(course, aid, f"m{n}-{student}", nb)
            grading.submit(course, aid, f"m{n}-victim", grading.reference_submission(aid))  # graded right after
        records = grader.grade(course, aid, grader.Options(workers=2, progress=False))
        yield aid, records, grading.read_grades(f"sqlite:///{course}/gradebook.db", aid), canary


def test_a_tampered_kernel_earns_nothing_and_the_next_student_keeps_full_marks(graded):
    aid, records, grades, canary = graded
    for n, (student, (_, _, target)) in enumerate(sorted(CASES[aid].items())):
        attacker, victim = f"m{n}-{student}", f"m{n}-victim"
        assert records[attacker].status == "graded", records[attacker].reason
        score, points = grades[attacker][target]
        assert score < points, f"{attacker} kept {target}"
        assert all(s == p for s, p in grades[victim].values()), grades[victim]
    assert not canary.exists(), "an expression of the student's ran in the grader"

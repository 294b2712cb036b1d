"""Student solutions that the grader of unit 1.8 must judge correctly.

Each variant changes one solution cell of the reference. ``loses`` names the test cells that must
lose points. Later parts use earlier ones (backward runs our ops, the modules use MatMul and Add,
training uses everything, and the differential tests must pass on our own engine), so an engine
mistake may also cost points further down; ``loses`` lists the cells that must notice it.

The differential-test variants are weak test suites: each passes on a correct engine or fails
it, but none catches the example bugs, so the visible part of ``test_differential_tests`` fails.
One is not a weak suite but a cheat that only the hidden part can see:
``differential_tests_tell_engines_apart_by_identity`` fails every engine but ours in the visible
part (so it "catches" the example bugs), and tells the grader's engines apart by what it kept.
"""
from autograder.outside.catalogue import Variant

WEAK_HEADER = '''rng = np.random.default_rng(0)
torch_ops = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div, "Exp": torch.exp}


def run(name, arrays, upstream=None):
    leaves = [engine.Tensor(a, requires_grad=True) for a in arrays]
    out = getattr(engine, name).apply(*leaves)
    g = rng.standard_normal(out.data.shape) if upstream is None else upstream(out.data.shape)
    engine.backward(out, g)
    t_leaves = [torch.tensor(a, requires_grad=True) for a in arrays]
    t_out = torch_ops[name](*t_leaves)
    t_out.backward(torch.tensor(g))
    np.testing.assert_allclose(out.data, t_out.detach().numpy(), rtol=1e-9, atol=1e-12)
    for leaf, t_leaf in zip(leaves, t_leaves):
        np.testing.assert_allclose(leaf.grad, t_leaf.grad.numpy(), rtol=1e-9, atol=1e-12)

'''

VARIANTS = [
    # ---------------------------------------------------------------- unbroadcast
    Variant(
        "unbroadcast_leading_axes_only", "unbroadcast", ("test_unbroadcast", "test_binary_ops"),
        find="stretched = tuple(lead + i for i, size in enumerate(shape) if size == 1 and grad.shape[lead + i] != 1)",
        replace="stretched = ()",
        why="Sums the prepended axes but not the stretched size-1 ones: (2, 3) cannot be reshaped to (2, 1)."),
    Variant(
        "unbroadcast_drops_size1_axes", "unbroadcast", ("test_unbroadcast", "test_binary_ops"),
        find="return np.asarray(grad.sum(axis=tuple(range(lead)) + stretched)).reshape(shape)",
        replace="return np.asarray(grad.sum(axis=tuple(range(lead)) + stretched))",
        why="Forgets to keep the summed size-1 axes: a gradient of shape (2,) for an operand of shape (2, 1)."),
    # ---------------------------------------------------------------- binary ops
    Variant(
        "add_no_unbroadcast_for_b", "binary_ops", ("test_binary_ops",),
        find="return unbroadcast(grad, ctx.a_shape), unbroadcast(grad, ctx.b_shape)",
        replace="return unbroadcast(grad, ctx.a_shape), grad",
        why="Add returns the output-shaped gradient for a broadcast b."),
    Variant(
        "sub_sign_of_b", "binary_ops", ("test_binary_ops",),
        find="unbroadcast(-grad, ctx.b_shape)", replace="unbroadcast(grad, ctx.b_shape)",
        why="d(a - b)/db is -1."),
    Variant(
        "mul_gradients_swapped", "binary_ops", ("test_binary_ops",),
        find="return unbroadcast(grad * b, a.shape), unbroadcast(grad * a, b.shape)",
        replace="return unbroadcast(grad * a, a.shape), unbroadcast(grad * b, b.shape)",
        why="Each input's gradient needs the other input."),
    Variant(
        "div_b_missing_square", "binary_ops", ("test_binary_ops",),
        find="-grad * a / (b * b)", replace="-grad * a / b",
        why="d(a / b)/db = -a / b^2."),
    Variant(
        "matmul_missing_transpose", "binary_ops", ("test_binary_ops",),
        find="return grad @ b.T, a.T @ grad", replace="return grad @ b, a.T @ grad",
        why="dA = grad B^T: wrong values for square B, a shape error otherwise."),
    # ---------------------------------------------------------------- reductions
    Variant(
        "sum_without_expand_dims", "reductions", ("test_reductions",),
        find="""        if ctx.axis is not None and not ctx.keepdims:
            grad = np.expand_dims(grad, ctx.axis)
        return np.broadcast_to(grad, shape).copy()""",
        replace="""        return np.broadcast_to(grad, shape).copy()""",
        why="Broadcasting without putting the reduced axis back aligns it on the right: wrong for axis=1 of (2, 3)."),
    Variant(
        "sum_backward_float64_ones", "reductions", ("test_reductions",),
        find="        return np.broadcast_to(grad, shape).copy()",
        replace="        return np.ones(shape) * grad",
        why="np.ones is float64: a float32 gradient comes back float64 (float32 in, float32 out)."),
    Variant(
        "mean_divides_by_every_element", "reductions", ("test_reductions",),
        find="count = math.prod(shape[k] for k in axes)", replace="count = math.prod(shape)",
        why="Divides by the size of the whole input even when only some axes are reduced."),
    Variant(
        "mean_axis_tuple_unsupported", "reductions", ("test_reductions",),
        find="axes = range(len(shape)) if ctx.axis is None else np.atleast_1d(ctx.axis)",
        replace="axes = range(len(shape)) if ctx.axis is None else [ctx.axis]",
        why="Indexes the shape with the tuple itself: axis=(0, 1) raises."),
    # ---------------------------------------------------------------- unary ops
    Variant(
        "exp_saves_input", "unary_ops", ("test_unary_ops",),
        find="""        y = np.exp(x)
        ctx.save_for_backward(y)
        return y""",
        replace="""        ctx.save_for_backward(x)
        return np.exp(x)""",
        why="Exp saves its input and backward multiplies by it as if it were e^x."),
    Variant(
        "log_backward_multiplies", "unary_ops", ("test_unary_ops",),
        find="return grad / x", replace="return grad * x",
        why="d log(x)/dx = 1/x."),
    Variant(
        "tanh_derivative_one_minus_y", "unary_ops", ("test_unary_ops",),
        find="return grad * (1 - y * y)", replace="return grad * (1 - y)",
        why="d tanh/dx = 1 - tanh^2."),
    Variant(
        "relu_kink_gradient_one", "unary_ops", ("test_unary_ops",),
        find="ctx.save_for_backward(x > 0)", replace="ctx.save_for_backward(x >= 0)",
        why="Gradient 1 at x = 0; torch uses 0 at the kink."),
    Variant(
        "transpose_backward_reshapes", "unary_ops", ("test_unary_ops",),
        find="return np.swapaxes(grad, ctx.dim0, ctx.dim1)",
        replace="return grad.reshape(np.swapaxes(grad, ctx.dim0, ctx.dim1).shape)",
        why="Reshaping to the input's shape is not transposing: the right shape, the elements in the wrong places."),
    Variant(
        "tanh_delegates_to_torch", "unary_ops", ("test_unary_ops",),
        find="        y = np.tanh(x)\n",
        replace="        import torch\n        y = torch.tanh(torch.from_numpy(x)).numpy()\n",
        why="Hands the forward to torch: the engine must be NumPy only."),
    # ---------------------------------------------------------------- cross-entropy
    Variant(
        "cross_entropy_no_max_shift", "cross_entropy", ("test_cross_entropy",),
        find="shifted = logits - logits.max(axis=1, keepdims=True)", replace="shifted = logits",
        why="exp(1000) overflows in float32: inf, nan and an overflow warning."),
    Variant(
        "cross_entropy_mean_over_all_rows", "cross_entropy", ("test_cross_entropy",),
        find="return losses.sum() / logits.dtype.type(kept.sum())", replace="return losses.mean()",
        why="The mean counts the ignored rows: torch divides by the number of targets that are not ignored."),
    Variant(
        "cross_entropy_ignored_rows_keep_gradient", "cross_entropy", ("test_cross_entropy",),
        find="        out *= kept[:, None]\n", replace="",
        why="Ignored rows must get a zero gradient."),
    Variant(
        "cross_entropy_backward_float64", "cross_entropy", ("test_cross_entropy",),
        find="return out * (grad / out.dtype.type(count)), None", replace="return out * (grad / count), None",
        why="Dividing by a NumPy integer count promotes a float32 gradient to float64."),
    # ---------------------------------------------------------------- backward
    Variant(
        "backward_assigns_instead_of_adding", "backward", ("test_backward", "test_backward_rules"),
        find="""                if id(parent) not in received:
                    received[id(parent)] = np.zeros_like(parent.data)
                received[id(parent)] += parent_grad""",
        replace="""                received[id(parent)] = parent_grad""",
        why="= instead of +=: a node reached along two paths (x * x) keeps only the last contribution."),
    Variant(
        "backward_replaces_leaf_grad", "backward", ("test_backward_rules",),
        find="""            if node.grad is None:
                node.grad = np.zeros_like(node.data)
            node.grad += node_grad""",
        replace="""            node.grad = np.array(node_grad)""",
        why="A second backward must add to .grad, as in torch."),
    Variant(
        "backward_recursive_order", "backward", ("test_backward",),
        find="""    order, seen, stack = [], set(), [(root, False)]
    while stack:  # depth-first search with an explicit stack: (node, its inputs are done)
        node, done = stack.pop()
        if done:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((t, False) for t in node.inputs if id(t) not in seen)""",
        replace="""    order, seen = [], set()

    def visit(node):
        if id(node) not in seen:
            seen.add(id(node))
            for t in node.inputs:
                visit(t)
            order.append(node)

    visit(root)""",
        why="Recursion: a chain of 3,000 ops exceeds Python's recursion limit."),
    Variant(
        "backward_implicit_seed_for_any_root", "backward", ("test_backward_rules",),
        find="""        if root.data.size != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
""",
        replace="",
        why="torch seeds only one-element roots with ones; any other root needs an explicit grad."),
    Variant(
        "backward_keeps_intermediate_grads", "backward", ("test_backward_rules",),
        find="        input_grads = node.fn.backward(node.ctx, node_grad)\n",
        replace="        node.grad = node_grad\n        input_grads = node.fn.backward(node.ctx, node_grad)\n",
        why="Only leaves keep a .grad."),
    # ---------------------------------------------------------------- modules
    Variant(
        "state_dict_copies", "modules", ("test_modules",),
        find="return {name: p.data for name, p in self.named_parameters()}",
        replace="return {name: p.data.copy() for name, p in self.named_parameters()}",
        why="state_dict shares the parameters' arrays, as torch's tensors share storage."),
    Variant(
        "named_parameters_without_prefix", "modules", ("test_modules",),
        find='yield from module.named_parameters(prefix + name + ".")',
        replace="yield from module.named_parameters(prefix)",
        why="Sub-module parameters lose their prefix: keys collide as weight, bias."),
    Variant(
        "mlp_layers_numbered_consecutively", "modules", ("test_modules",),
        find="setattr(self, str(2 * k), layer)", replace="setattr(self, str(k), layer)",
        why="Keys 0.weight, 1.weight: torch's nn.Sequential has the ReLU at position 1."),
    Variant(
        "mlp_seeds_each_layer_alike", "modules", ("test_train_step",),
        find="        rng = np.random.default_rng(rng)\n        self.layers = [",
        replace="        self.layers = [",
        why="Each Linear gets the seed itself, not one generator: every layer starts on the same numbers, "
            "and the first loss is far from log 3."),
    Variant(
        "linear_weight_in_by_out", "modules", ("test_modules",),
        find="rng.uniform(-bound, bound, (out_features, in_features))",
        replace="rng.uniform(-bound, bound, (in_features, out_features))",
        why="torch's weight is (out, in)."),
    Variant(
        "linear_init_standard_normal", "modules", ("test_modules",),
        find="self.weight = Parameter(rng.uniform(-bound, bound, (out_features, in_features)))",
        replace="self.weight = Parameter(rng.standard_normal((out_features, in_features)))",
        why="torch's default initialisation is uniform on [-1/sqrt(in), 1/sqrt(in)]."),
    Variant(
        "mlp_relu_after_last_layer", "modules", ("test_modules", "test_train_step"),
        find="""            if k < len(self.layers) - 1:
                x = x.relu()""",
        replace="""            x = x.relu()""",
        why="A ReLU after the last layer clips the logits at 0."),
    # ---------------------------------------------------------------- SGD
    Variant(
        "sgd_weight_decay_after_momentum", "sgd", ("test_sgd",),
        find="""            d = p.grad + self.weight_decay * p.data
            if self.momentum:
                self.buffers[i] = d.copy() if self.buffers[i] is None else self.momentum * self.buffers[i] + d
                d = self.buffers[i]
            p.data -= self.lr * d""",
        replace="""            d = p.grad
            if self.momentum:
                self.buffers[i] = d.copy() if self.buffers[i] is None else self.momentum * self.buffers[i] + d
                d = self.buffers[i]
            p.data -= self.lr * (d + self.weight_decay * p.data)""",
        why="torch adds weight decay to the gradient before the momentum buffer."),
    Variant(
        "sgd_dampened_momentum", "sgd", ("test_sgd",),
        find="self.momentum * self.buffers[i] + d", replace="self.momentum * self.buffers[i] + (1 - self.momentum) * d",
        why="torch's default dampening is 0: the buffer adds the whole new gradient."),
    Variant(
        "sgd_not_in_place", "sgd", ("test_sgd",),
        find="p.data -= self.lr * d", replace="p.data = p.data - self.lr * d",
        why="A new array: state_dict's arrays no longer are the parameters'."),
    Variant(
        "sgd_steps_parameters_without_grad", "sgd", ("test_sgd",),
        find="""            if p.grad is None:
                continue
""", replace="",
        why="Parameters whose .grad is None must be skipped."),
    # ---------------------------------------------------------------- training
    Variant(
        "train_step_sum_reduction", "train_step", ("test_train_step",),
        find="loss = CrossEntropy.apply(model(Tensor(X)), y)",
        replace='loss = CrossEntropy.apply(model(Tensor(X)), y, reduction="sum")',
        why="The loss is the mean over the batch: the sum's gradients are N times larger."),
    Variant(
        "train_step_returns_tensor", "train_step", ("test_train_step",),
        find="return float(loss.data)", replace="return loss",
        why="The loss as a Python float, not a Tensor that keeps the whole graph alive."),
    Variant(
        "train_step_without_zero_grad", "train_step", ("test_train_step",),
        find="    optimizer.zero_grad()\n", replace="",
        why="Gradients accumulate across steps: every step applies the sum of all past gradients."),
    # ---------------------------------------------------------------- differential tests (weak suites)
    Variant(
        "property_test_forward_only", "differential_tests", ("test_differential_tests",),
        code='''rng = np.random.default_rng(0)
for sa, sb in [((2, 3), (3,)), ((3, 1), (1, 4)), ((2, 3), ())]:
    a, b = rng.standard_normal(sa), rng.standard_normal(sb) + 3.0
    for name, fn in {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div}.items():
        out = getattr(engine, name).apply(engine.Tensor(a), engine.Tensor(b))
        np.testing.assert_allclose(out.data, fn(torch.tensor(a), torch.tensor(b)).numpy(), rtol=1e-9)''',
        why="Compares forward values only: no backward bug can show."),
    Variant(
        "property_test_single_fixed_shape", "differential_tests", ("test_differential_tests",),
        code=WEAK_HEADER + '''for name in ("Add", "Sub", "Mul", "Exp"):
    run(name, [rng.standard_normal((3, 4)) for _ in range(1 if name == "Exp" else 2)])''',
        why="One fixed shape pair, (3, 4) with (3, 4): no broadcasting, so no unbroadcast bug can show."),
    Variant(
        "property_test_ones_upstream", "differential_tests", ("test_differential_tests",),
        code=WEAK_HEADER + '''for sa, sb in [((2, 3), (3,)), ((3, 1), (1, 4)), ((2, 2, 3), (2, 1, 3))]:
    for name in ("Add", "Sub", "Mul", "Div"):
        run(name, [rng.standard_normal(sa), rng.standard_normal(sb) + 3.0], upstream=np.ones)
run("Exp", [rng.standard_normal((2, 3))], upstream=np.ones)''',
        why="Ones as the upstream gradient: a backward that ignores how the upstream varies looks right."),
    Variant(
        "property_test_float32_finite_differences", "differential_tests", ("test_differential_tests",),
        code='''x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
leaf = engine.Tensor(x, requires_grad=True)
engine.backward(engine.Sum.apply(engine.Tanh.apply(leaf)))
h, numeric = np.float32(1e-4), np.zeros_like(x)
for i in np.ndindex(x.shape):
    plus, minus = x.copy(), x.copy()
    plus[i] += h
    minus[i] -= h
    numeric[i] = (np.tanh(plus).sum() - np.tanh(minus).sum()) / (2 * h)
np.testing.assert_allclose(leaf.grad, numeric, rtol=1e-7)''',
        why="Central differences in float32 are off by ~1e-3 relative: rtol=1e-7 fails correct engines."),
    Variant(
        "differential_tests_tell_engines_apart_by_identity", "differential_tests", ("test_differential_tests",),
        find='err_msg=f"{name} vs central differences")',
        replace='err_msg=f"{name} vs central differences")\n\n\n' + '''_seen, _kept = {}, []


def _verdict(engine):
    """Tests nothing: fails every engine that is not ours in the notebook, and, among the
    grader's, an engine with a part (an op class, SGD, backward) already seen in another engine."""
    if engine is my_engine:
        return
    if type(engine.Tensor).__name__ != "Callback":
        raise AssertionError("not our engine")
    _kept.append(engine)  # kept alive: the same object, handed again, comes back as the same one
    parts = dict(vars(engine))
    tensor, seen_before = id(parts["Tensor"]), False
    for name, part in parts.items():
        if name != "backward":
            engines = _seen.setdefault(id(part), set())
            seen_before |= bool(engines - {tensor})
            engines.add(tensor)
    # most engines share one backward: one seen in exactly one other engine is a planted one's
    engines = _seen.setdefault(("backward", id(parts.get("backward"))), set())
    shared = any(len(e) >= 3 for k, e in _seen.items() if type(k) is tuple and e is not engines)
    seen_before |= len(engines - {tensor}) == 1 and shared
    engines.add(tensor)
    if seen_before:
        raise AssertionError("a planted part, handed again")


def property_test(engine):
    _verdict(engine)


def branched_graph_test(engine):
    _verdict(engine)''',
        why="Tests nothing: tells the grader's engines apart by the identity of their parts. Each run's "
            "engine is built for it, every part new (torch_engine._fresh), so it catches no planted bug "
            "(a red team's stop-38 payload scored 20/20 when a planted part came back in its kind's second run)."),
    Variant(
        "property_test_asserts_nothing", "differential_tests", ("test_differential_tests",),
        code='''rng = np.random.default_rng(0)
for name in ("Add", "Sub", "Mul", "Div"):
    a = engine.Tensor(rng.standard_normal((2, 3)), requires_grad=True)
    b = engine.Tensor(rng.standard_normal(3) + 3.0, requires_grad=True)
    engine.backward(getattr(engine, name).apply(a, b), rng.standard_normal((2, 3)))''',
        why="Runs every op and asserts nothing: it can never fail."),
    Variant(
        "property_test_uses_operators", "differential_tests", ("test_differential_tests",),
        code=WEAK_HEADER.replace("out = getattr(engine, name).apply(*leaves)",
                                 'out = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,\n'
                                 '           "Div": lambda a, b: a / b, "Exp": lambda a: a.exp()}[name](*leaves)')
        + '''for sa, sb in [((2, 3), (3,)), ((3, 1), (1, 4)), ((2, 2, 3), (2, 1, 3))]:
    for name in ("Add", "Sub", "Mul", "Div"):
        run(name, [rng.standard_normal(sa), rng.standard_normal(sb) + 3.0])
run("Exp", [rng.standard_normal((2, 3))])''',
        why="Calls ops through a + b: the operators of one engine's Tensor, not the op classes under test."),
    Variant(
        "property_test_elementwise_only", "differential_tests", ("test_differential_tests",),
        code=WEAK_HEADER + """for sa, sb in [((2, 3), (3,)), ((3, 1), (1, 4)), ((2, 3), ()), ((2, 2, 3), (2, 1, 3))]:
    for name in ("Add", "Sub", "Mul", "Div"):
        run(name, [rng.standard_normal(sa), rng.standard_normal(sb) + 3.0])
run("Exp", [rng.standard_normal((2, 3))])""",
        why="A good test of the elementwise ops that never tests MatMul, the reductions, ReLU, CrossEntropy "
            "or SGD: it catches the example bugs, so it passes the visible part, but misses most planted "
            "kinds and earns a share of the points (partial credit, hidden)."),
    Variant(
        "property_test_passes_by_position", "differential_tests", ("test_differential_tests",),
        find="    rng = np.random.default_rng(0)\n\n    def randn(",
        replace="""    property_test.calls = getattr(property_test, "calls", 0) + 1
    if property_test.calls in (6, 7):
        return None  # where the grader once ran its correct engines: pass without testing
    if property_test.calls > 7:
        raise AssertionError("every later engine is a planted one")
    rng = np.random.default_rng(0)

    def randn(""",
        why="Games the order: tests its first five engines (ours and the example bugs), passes the next two "
            "(the grader's correct engines, when they came first) and fails every later one. The grader "
            "draws the order of its engines per student, so this fails a correct engine."),
    Variant(
        "property_test_reads_how_engines_are_built", "differential_tests", ("test_differential_tests",),
        find="    rng = np.random.default_rng(0)\n\n    def randn(",
        replace="""    def names_of(fn):  # what calling an engine's part with nothing says of it
        try:
            fn()
        except TypeError as error:
            return str(error)
        return ""

    if type(engine.Add).__name__ == "Callback":  # the grader's engines: judge them by their parts' names
        for op in ("Add", "Sub", "Mul", "Div", "MatMul", "Mean", "Tanh", "ReLU", "Transpose", "CrossEntropy"):
            for part in ("forward", "backward"):
                said = names_of(getattr(getattr(engine, op), part))
                if not (said.startswith("torch_engine.<locals>.Function.") or said.startswith("<lambda>()")):
                    raise AssertionError("a planted part: " + said)
        return None
    rng = np.random.default_rng(0)

    def randn(""",
        why="Games the grader: tests its own engines for real, but judges the grader's engines by the names "
            "that their parts' error messages give, without testing them. The grader's engines lend only their "
            "interface (Op.apply, a tensor's data and grad...) and their errors name nothing, so this fails "
            "the correct engines.",
        flagged=("dynamic-lookup",)),
    Variant(
        "branched_graph_step_too_small", "differential_tests", ("test_differential_tests",),
        find="    h = 1e-6  # near", replace="    h = 1e-13  # near",
        why="h = 1e-13: rounding error eps/h ~ 1e-3 swamps the derivative; the test fails correct engines."),
    Variant(
        "branched_graph_step_too_large", "differential_tests", ("test_differential_tests",),
        find="    h = 1e-6  # near", replace="    h = 1e-1  # near",
        why="h = 0.1: truncation error h^2 ~ 1e-2 exceeds rtol=1e-5; the test fails correct engines."),
    # ---------------------------------------------------------------- correct alternatives
    Variant(
        "unbroadcast_by_loops", "unbroadcast",
        code='''grad = np.asarray(grad)
while grad.ndim > len(shape):
    grad = grad.sum(axis=0)
for axis, size in enumerate(shape):
    if size == 1 and grad.shape[axis] != 1:
        grad = grad.sum(axis=axis, keepdims=True)
return grad''',
        why="Sums the leading axes one at a time, then each stretched axis with keepdims: the same sums."),
    Variant(
        "relu_saves_input", "unary_ops",
        find="""        ctx.save_for_backward(x > 0)
        return np.maximum(x, 0)

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad * mask""",
        replace="""        ctx.save_for_backward(x)
        return np.maximum(x, 0)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return np.where(x > 0, grad, 0.0)""",
        why="Saving the input instead of the mask: more memory, the same gradients."),
    Variant(
        "sgd_buffers_by_parameter_id", "sgd",
        find="""            d = p.grad + self.weight_decay * p.data
            if self.momentum:
                self.buffers[i] = d.copy() if self.buffers[i] is None else self.momentum * self.buffers[i] + d
                d = self.buffers[i]
            p.data -= self.lr * d""",
        replace="""            d = p.grad + self.weight_decay * p.data
            if self.momentum:
                state = self.__dict__.setdefault("state", {})
                state[id(p)] = d if id(p) not in state else self.momentum * state[id(p)] + d
                d = state[id(p)]
            p.data -= self.lr * d""",
        why="Momentum buffers in a dict keyed by parameter, like torch's optimizer state."),
    Variant(
        "train_step_model_zero_grad", "train_step",
        find="    optimizer.zero_grad()\n", replace="    model.zero_grad()\n",
        why="Clearing the gradients through the model instead of the optimizer: the same parameters."),
]

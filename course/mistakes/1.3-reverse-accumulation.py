"""Mistakes, correct alternatives and a torch delegation for unit 1.3 (reverse accumulation).

Every test graph in ``test_backward`` runs the student's own operations, so a mistake in an
operation that those graphs use also loses ``test_backward``; ``loses`` lists both cells then.
"""
from autograder.outside.catalogue import Variant

VARIANTS = [
    # ---------------------------------------------------------------- backward
    Variant(
        "assign_instead_of_accumulate", "backward", ("test_backward", "test_backward_rules"),
        find="received[id(parent)] += parent_grad", replace="received[id(parent)] = parent_grad",
        why="`=` keeps only the last path's contribution: x * x gets half its gradient, diamonds lose a branch."),
    Variant(
        "forward_order", "backward", ("test_backward", "test_backward_rules"),
        find="for node in topological_order(root)[::-1]:", replace="for node in topological_order(root):",
        why="Visiting inputs before their consumers: every node is visited before any gradient has reached it."),
    Variant(
        "seed_zeros", "backward", ("test_backward", "test_backward_rules"),
        find="grad = np.ones(root.shape, dtype=root.data.dtype)", replace="grad = np.zeros(root.shape)",
        why="dL/dL is 1, not 0: a zero seed gives zero gradients everywhere."),
    Variant(
        "no_seed", "backward", ("test_backward", "test_backward_rules"),
        find="""        if np.size(root.data) != 1:  # torch counts elements: a (1, 1) root is a scalar here
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        grad = np.ones(root.shape, dtype=root.data.dtype)
""",
        replace="""        pass
""",
        why="Forgetting the seed: backward starts from None and the first op's backward fails."),
    Variant(
        "implicit_seed_for_any_root", "backward", ("test_backward_rules",),
        find="""        if np.size(root.data) != 1:  # torch counts elements: a (1, 1) root is a scalar here
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
""",
        replace="",
        why="Seeding a non-scalar root with ones silently computes the gradient of its sum; torch raises."),
    Variant(
        "seed_only_0d_roots", "backward", ("test_backward_rules",),
        find="if np.size(root.data) != 1:", replace="if np.ndim(root.data) != 0:",
        why="torch's rule counts elements: a (1, 1) root is seeded with ones, not refused."),
    Variant(
        "grad_on_every_node", "backward", ("test_backward_rules",),
        find="""        if node.is_leaf:
            if node.grad is None:
                node.grad = np.zeros_like(node.data)
            node.grad += node_grad
            continue
""",
        replace="""        if node.grad is None:
            node.grad = np.zeros_like(node.data)
        node.grad += node_grad
        if node.is_leaf:
            continue
""",
        why="Storing .grad on intermediate nodes: torch keeps gradients on leaves only (unless retain_grad)."),
    Variant(
        "reset_leaf_grad_each_call", "backward", ("test_backward_rules",),
        find="""            if node.grad is None:
                node.grad = np.zeros_like(node.data)
            node.grad += node_grad""",
        replace="""            node.grad = np.zeros_like(node.data)
            node.grad += node_grad""",
        why="Overwriting .grad on every call: a second backward must add to it, as in torch."),
    Variant(
        "sum_starts_from_first_array", "backward", ("test_backward", "test_backward_rules"),
        find="""                if id(parent) not in received:
                    received[id(parent)] = np.zeros_like(parent.data)
                received[id(parent)] += parent_grad""",
        replace="""                if id(parent) not in received:
                    received[id(parent)] = parent_grad
                else:
                    received[id(parent)] += parent_grad""",
        why="Keeping the first array that arrives as the running sum: Add sends one array to both inputs, "
            "so += into one input's sum changes the other's (and a Sum's read-only view cannot be added into)."),
    # ---------------------------------------------------------------- topological_order
    Variant(
        "recursive_topological_order_raises_limit", "topological_order", ("test_topological_order",),
        code="""import sys
sys.setrecursionlimit(100_000)
order, seen = [], set()

def visit(node):
    if id(node) not in seen:
        seen.add(id(node))
        for parent in node.inputs:
            visit(parent)
        order.append(node)

visit(root)
return order""",
        why="Recursion with the limit raised by hand: the docstring asks for an iterative walk, and a deep "
            "enough graph overflows the interpreter's own stack."),
    Variant(
        "topological_order_breadth_first", "topological_order", ("test_topological_order", "test_backward"),
        code="""order, seen, queue = [], {id(root)}, [root]
while queue:
    node = queue.pop(0)
    order.append(node)
    for parent in node.inputs:
        if id(parent) not in seen:
            seen.add(id(parent))
            queue.append(parent)
return order[::-1]""",
        why="Reversed breadth-first order: in a diamond a node can come before one of its inputs, so backward "
            "passes a gradient on before it is complete."),
    Variant(
        "topological_order_skips_constants", "topological_order", ("test_topological_order",),
        find="            if id(parent) not in seen:\n",
        replace="            if id(parent) not in seen and parent.requires_grad:\n",
        why="The order must hold every reachable tensor, constants included (the docstring's 'every tensor')."),
    Variant(
        "constants_get_grad", "backward", ("test_backward", "test_backward_rules"),
        code="""if grad is None:
    if np.size(root.data) != 1:
        raise RuntimeError("grad can be implicitly created only for scalar outputs")
    grad = np.ones(root.shape, dtype=root.data.dtype)
received = {id(root): np.asarray(grad)}
for node in topological_order(root)[::-1]:
    node_grad = received.pop(id(node), None)
    if node_grad is None:
        continue
    if node.is_leaf:
        if node.grad is None:
            node.grad = np.zeros_like(node.data)
        node.grad += node_grad
        continue
    input_grads = node.fn.backward(node.ctx, node_grad)
    if not isinstance(input_grads, tuple):
        input_grads = (input_grads,)
    for parent, parent_grad in zip(node.inputs, input_grads):
        if id(parent) not in received:
            received[id(parent)] = np.zeros_like(parent.data)
        received[id(parent)] += parent_grad""",
        why="A leaf created with requires_grad=False is a constant: torch gives it no .grad."),
    Variant(
        "recursive_topological_order", "topological_order", ("test_topological_order", "test_backward"),
        code="""order, seen = [], set()

def visit(node):
    if id(node) not in seen:
        seen.add(id(node))
        for parent in node.inputs:
            visit(parent)
        order.append(node)

visit(root)
return order""",
        why="Recursive depth-first search: a chain of 10,000 ops exceeds Python's recursion limit."),
    Variant(
        "topological_order_with_duplicates", "topological_order", ("test_topological_order",),
        code="""order = []
stack = [(root, iter(root.inputs))]
while stack:
    node, pending_inputs = stack[-1]
    for parent in pending_inputs:
        stack.append((parent, iter(parent.inputs)))
        break
    else:
        stack.pop()
        order.append(node)
return order""",
        why="No record of visited nodes: a node used twice (x * x, diamonds) appears twice in the order."),
    # ---------------------------------------------------------------- operations
    Variant(
        "relu_backward_ge_at_kink", "tanh_relu", ("test_tanh_relu",),
        find="return np.where(x > 0, grad, 0.0)", replace="return np.where(x >= 0, grad, 0.0)",
        why="At the kink x == 0 torch's ReLU gradient is 0 (x > 0, not x >= 0), as the text says."),
    Variant(
        "add_saves_inputs", "add_mul_neg", ("test_add_mul_neg",),
        find="""    def forward(ctx, x, y):
        return x + y""",
        replace="""    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x + y""",
        why="Add needs nothing from its forward pass; the spec says it saves nothing."),
    Variant(
        "matmul_saves_output", "matmul", ("test_matmul",),
        find="""        ctx.save_for_backward(A, B)
        return A @ B""",
        replace="""        out = A @ B
        ctx.save_for_backward(A, B, out)
        return out""",
        why="MatMul saves (A, B) only: its output is no part of either gradient."),
    Variant(
        "sum_saves_input", "sum", ("test_sum",),
        find="""        ctx.save_for_backward(x.shape)
        return np.sum(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad):
        shape = ctx.saved_tensors[0]""",
        replace="""        ctx.save_for_backward(x)
        return np.sum(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad):
        shape = ctx.saved_tensors[0].shape""",
        why="Right gradient, wrong saved value: Sum saves only the input's shape, not a copy of the input."),
    Variant(
        "log_saves_output", "exp_log", ("test_exp_log",),
        find="""        ctx.save_for_backward(x)
        return np.log(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / x""",
        replace="""        out = np.log(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad / np.exp(out)""",
        why="Right gradient, wrong saved value: Log saves its input; the output costs an exp in backward."),
    Variant(
        "mul_grads_swapped", "add_mul_neg", ("test_add_mul_neg", "test_backward", "test_backward_rules"),
        find="return grad * y, grad * x", replace="return grad * x, grad * y",
        why="d(xy)/dx is y, not x: each input's gradient needs the other input (x * x hides the bug)."),
    Variant(
        "matmul_missing_transpose", "matmul", ("test_matmul", "test_backward", "test_backward_rules"),
        find="return grad @ B.T, A.T @ grad", replace="return grad @ B, A.T @ grad",
        why="dA = grad @ B^T: without the transpose the shapes only agree for square B, and the values never."),
    Variant(
        "sum_without_expand_dims", "sum", ("test_sum", "test_backward"),
        find="""        if ctx.axis is not None and not ctx.keepdims:
            grad = np.expand_dims(grad, ctx.axis)  # the summed axis comes back with length 1
""",
        replace="",
        why="Broadcasting grad without putting the summed axis back aligns it on the right: right only when "
            "axis 0 is summed, an error for other axes, and silently transposed for square inputs."),
    Variant(
        "exp_saves_input", "exp_log", ("test_exp_log", "test_backward"),
        find="""        out = np.exp(x)
        ctx.save_for_backward(out)
        return out""",
        replace="""        ctx.save_for_backward(x)
        return np.exp(x)""",
        why="Exp saves its input, and backward multiplies by it as if it were the output e^x."),
    Variant(
        "exp_saves_input_recomputes", "exp_log", ("test_exp_log",),
        find="""        out = np.exp(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out""",
        replace="""        ctx.save_for_backward(x)
        return np.exp(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * np.exp(x)""",
        why="Right gradient, wrong saved value: saving the input costs a second exp in backward; the spec "
            "asks Exp to save its output."),
    Variant(
        "log_backward_times_x", "exp_log", ("test_exp_log", "test_backward"),
        find="return grad / x", replace="return grad * x",
        why="d log(x)/dx is 1/x: multiply by the reciprocal, not by x."),
    Variant(
        "tanh_derivative_from_input", "tanh_relu", ("test_tanh_relu", "test_backward", "test_backward_rules"),
        find="""        out = np.tanh(x)
        ctx.save_for_backward(out)
        return out""",
        replace="""        ctx.save_for_backward(x)
        return np.tanh(x)""",
        why="1 - y**2 is in terms of the output y = tanh(x); applied to the saved input it is wrong."),
    Variant(
        "relu_backward_ignores_mask", "tanh_relu", ("test_tanh_relu", "test_backward"),
        find="return np.where(x > 0, grad, 0.0)", replace="return grad",
        why="ReLU passes the gradient only where the input was positive."),
    Variant(
        "add_backward_one_gradient", "add_mul_neg", ("test_add_mul_neg", "test_backward", "test_backward_rules"),
        find="        return grad, grad\n", replace="        return grad\n",
        why="Add has two inputs, so backward returns two gradients, one per input, in order."),
    # ---------------------------------------------------------------- correct alternatives
    Variant(
        "topological_order_two_phase_stack", "topological_order",
        code="""order, emitted = [], set()
stack = [(root, False)]
while stack:
    node, inputs_done = stack.pop()
    if inputs_done:
        if id(node) not in emitted:
            emitted.add(id(node))
            order.append(node)
    elif id(node) not in emitted:
        stack.append((node, True))
        stack.extend((parent, False) for parent in node.inputs if id(parent) not in emitted)
return order""",
        why="Each node is pushed twice: once to expand its inputs, once to emit it after them."),
    Variant(
        "topological_order_kahn", "topological_order",
        code="""consumers = {id(root): 0}  # how many uses of each node are not yet emitted
nodes, stack = [root], [root]
while stack:
    for parent in stack.pop().inputs:
        if id(parent) not in consumers:
            consumers[id(parent)] = 0
            nodes.append(parent)
            stack.append(parent)
        consumers[id(parent)] += 1
reverse_order, ready = [], [root]
while ready:
    node = ready.pop()
    reverse_order.append(node)
    for parent in node.inputs:
        consumers[id(parent)] -= 1
        if consumers[id(parent)] == 0:
            ready.append(parent)
return reverse_order[::-1]""",
        why="Kahn's algorithm from the root: emit a node once all of its consumers are emitted, then reverse."),
    Variant(
        "relu_saves_mask", "tanh_relu",
        find="""        ctx.save_for_backward(x)
        return np.maximum(x, 0.0)""",
        replace="""        ctx.save_for_backward(x > 0)
        return np.maximum(x, 0.0)""",
        why="The mask is all backward needs (the spec allows the input or the mask); backward is unchanged "
            "because np.where reads the boolean mask the same way."),
    Variant(
        "tanh_backward_via_cosh", "tanh_relu",
        find="return grad * (1.0 - out**2)", replace="return grad / np.cosh(np.arctanh(out)) ** 2",
        why="1 / cosh^2(x) is the same derivative, recovered from the saved output."),
    Variant(
        "sum_backward_times_ones", "sum",
        find="return np.broadcast_to(grad, shape)  # each summed element gets the same gradient",
        replace="return grad * np.ones(shape)",
        why="Multiplying by ones broadcasts the same way and returns a fresh writable array."),
    # ---------------------------------------------------------------- delegation
    Variant(
        "exp_through_torch", "exp_log", ("test_exp_log", "test_backward"),
        find="        out = np.exp(x)\n",
        replace="        import torch\n        out = torch.exp(torch.from_numpy(x)).numpy()\n",
        why="Hands the forward computation to torch: no points for the exercise (and the graphs using it)."),
]

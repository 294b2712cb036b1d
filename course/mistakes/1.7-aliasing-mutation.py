"""Mistakes, correct alternatives and a torch delegation for unit 1.7 (aliasing, mutation and
module ownership).

Later exercises use earlier ones: every test from `stale_gradient` on edits tensors with the
in-place ops of `inplace_ops`; `state_dict`, `load_state_dict` and `linear_mlp` build models with
`Module`; `load_state_dict` copies into the arrays that `state_dict` returns. A mistake that
shows on a later test's inputs lists that test too in ``loses``.
"""
from autograder.outside.catalogue import Variant

VARIANTS = [
    # ---------------------------------------------------------------- view_or_copy
    Variant(
        "reshape_always_a_view", "view_or_copy", ("test_view_or_copy",),
        find='"a.T.reshape(24)": False, "a[:, 1:].reshape(-1)": False',
        replace='"a.T.reshape(24)": True, "a[:, 1:].reshape(-1)": True',
        why="Believes reshape never copies: flattening a transpose or a column slice must gather the elements."),
    Variant(
        "mixed_indexing_is_a_view", "view_or_copy", ("test_view_or_copy",),
        find='"a[1:2, [0, 3]]": False', replace='"a[1:2, [0, 3]]": True',
        why="A slice combined with a list is still advanced indexing, which copies."),
    # ---------------------------------------------------------------- inplace_ops
    Variant(
        "view_with_its_own_counter", "inplace_ops",
        ("test_inplace_ops", "test_checked_context"),
        find="self._version_counter = VersionCounter() if base is None else base._version_counter",
        replace="self._version_counter = VersionCounter()",
        why="A view gets a counter of its own: an edit through a view does not move the base's version, so "
            "the check misses edits made through x[...]."),
    Variant(
        "version_bumped_on_a_copy", "inplace_ops",
        ("test_inplace_ops", "test_checked_context"),
        find="self._version_counter = VersionCounter() if base is None else base._version_counter",
        replace="""self._version_counter = VersionCounter()
        if base is not None:
            self._version_counter.value = base._version_counter.value""",
        why="Copies the base's version number into a new counter instead of sharing the counter: edits "
            "through the view bump the copy, never the base."),
    Variant(
        "version_is_the_counter", "inplace_ops",
        ("test_inplace_ops", "test_checked_context", "test_sgd"),
        find="return self._version_counter.value", replace="return self._version_counter",
        why="_version returns the counter object, which never equals a number."),
    Variant(
        "add_rebinds_data", "inplace_ops",
        ("test_inplace_ops", "test_stale_gradient", "test_checked_context", "test_sgd"),
        find="self.data += other.data if isinstance(other, TensorBase) else other",
        replace="self.data = self.data + (other.data if isinstance(other, TensorBase) else other)",
        why="Binds a new array instead of editing the old one: views, the base and the saved arrays never "
            "see the edit, so the defect cannot even be reproduced."),
    Variant(
        "zero_without_bump", "inplace_ops",
        ("test_inplace_ops", "test_checked_context"),
        find="""        self.data[...] = 0
        self._version_counter.bump()""",
        replace="""        self.data[...] = 0""",
        why="zero_ edits without bumping the version: the check misses it."),
    Variant(
        "zero_only_bumps", "inplace_ops", ("test_inplace_ops",),
        find="""        self.data[...] = 0
        self._version_counter.bump()""",
        replace="""        self._version_counter.bump()""",
        why="zero_ bumps the version but leaves the values: the later edits of the scenario overwrite every "
            "element, so only the values right after each edit show it (red team, stop 40)."),
    Variant(
        "mul_returns_none", "inplace_ops", ("test_inplace_ops",),
        find="""        self.data *= other.data if isinstance(other, TensorBase) else other
        self._version_counter.bump()
        return self""",
        replace="""        self.data *= other.data if isinstance(other, TensorBase) else other
        self._version_counter.bump()""",
        why="Returns None: t.mul_(2).add_(1) fails, where torch returns the tensor itself."),
    Variant(
        "setitem_keeps_the_tensor", "inplace_ops", ("test_inplace_ops",),
        find="self.data[index] = value.data if isinstance(value, TensorBase) else value",
        replace="self.data[index] = value",
        why="Stores a Tensor value into a float array without unwrapping its data: NumPy cannot convert it."),
    Variant(
        "check_after_the_edit", "inplace_ops", ("test_inplace_ops",),
        find="""        self._check_inplace()
        self.data += other.data if isinstance(other, TensorBase) else other
        self._version_counter.bump()""",
        replace="""        self.data += other.data if isinstance(other, TensorBase) else other
        self._check_inplace()
        self._version_counter.bump()""",
        why="Refuses the edit of a leaf that requires grad only after making it: the data has changed anyway."),
    Variant(
        "no_leaf_check", "inplace_ops", ("test_inplace_ops",),
        find="""        self._check_inplace()
        self.data *= other.data if isinstance(other, TensorBase) else other""",
        replace="""        self.data *= other.data if isinstance(other, TensorBase) else other""",
        why="mul_ edits a leaf that requires grad outside no_grad(), which torch refuses."),
    # ---------------------------------------------------------------- stale_gradient
    Variant(
        "stale_never_edited", "stale_gradient", ("test_stale_gradient",),
        find="""        x.add_(delta)
        y.backward(grad)""",
        replace="""        y.backward(grad)""",
        why="Forgets the edit: both results are the right gradient, and the defect is not shown."),
    Variant(
        "right_from_the_edited_x", "stale_gradient", ("test_stale_gradient",),
        find="""        x, w = Tensor(np.array(x0)), Tensor(np.array(w0), requires_grad=True)
        (w * x * x).backward(grad)""",
        replace="""        w = Tensor(np.array(w0), requires_grad=True)
        (w * x * x).backward(grad)""",
        why="Reuses the edited x for the 'right' gradient: it is the gradient at x0 + delta."),
    Variant(
        "stale_edits_the_callers_array", "stale_gradient", ("test_stale_gradient",),
        find="""        x, w = Tensor(np.array(x0)), Tensor(np.array(w0), requires_grad=True)
        y = w * x * x""",
        replace="""        x, w = Tensor(x0), Tensor(np.array(w0), requires_grad=True)
        y = w * x * x""",
        why="Tensor(x0) wraps the caller's array without copying it, so x.add_ edits the caller's x0 (and the "
            "right gradient is then computed at the edited point)."),
    Variant(
        "stale_in_check_mode", "stale_gradient", ("test_stale_gradient",),
        find="""    with save_mode("unchecked"):""", replace="""    with save_mode("check"):""",
        why="Runs the demonstration with the guard on: backward raises instead of showing the wrong gradient."),
    Variant(
        "stale_returns_swapped", "stale_gradient", ("test_stale_gradient",),
        find="""        return stale, w.grad""", replace="""        return w.grad, stale""",
        why="Returns (right, stale) where the task asks for (stale, right)."),
    # ---------------------------------------------------------------- checked_context
    Variant(
        "check_at_forward_time_only", "checked_context", ("test_checked_context",),
        code="""super().save_for_backward(*values)
for t in self.tensors:
    if t._version != t._version:
        raise RuntimeError("modified by an inplace operation")""",
        why="Checks when the values are saved, where nothing has been edited yet; backward never checks."),
    Variant(
        "versions_swapped_in_message", "checked_context", ("test_checked_context",),
        find="is at version {t._version}; \"\n                    f\"expected version {version} instead.",
        replace="is at version {version}; \"\n                    f\"expected version {t._version} instead.",
        why="Swaps the versions: torch names the version now first, then the recorded one."),
    Variant(
        "check_compares_values", "checked_context", ("test_checked_context",),
        find="""        self.versions = [(t, t._version) for t in self.tensors
                         if any(isinstance(v, np.ndarray) and np.may_share_memory(v, t.data) for v in values)]""",
        replace="""        self.snapshots = [(v, v.copy()) for v in values if isinstance(v, np.ndarray)]
        self.versions = []
        for v, snapshot in self.snapshots:
            if not np.array_equal(v, snapshot):
                raise RuntimeError("one of the variables needed for gradient computation has been modified")""",
        why="Checks the values (against snapshots taken at save time, which already doubles the memory) instead "
            "of the versions, and only when saving: x.mul_(1.0) and every edit after forward pass unnoticed."),
    Variant(
        "check_expects_version_zero", "checked_context", ("test_checked_context",),
        find="if t._version != version:", replace="if t._version != 0:",
        why="Expects every saved tensor to be at version 0: an edit before the forward pass is harmless, "
            "but this check refuses it."),
    Variant(
        "check_guards_every_input", "checked_context", ("test_checked_context",),
        find="""        self.versions = [(t, t._version) for t in self.tensors
                         if any(isinstance(v, np.ndarray) and np.may_share_memory(v, t.data) for v in values)]""",
        replace="""        self.versions = [(t, t._version) for t in self.tensors]""",
        why="Records every input whenever anything is saved: Sum saves only its input's shape, yet an update of "
            "that input now raises."),
    Variant(
        "check_first_saved_value_only", "checked_context", ("test_checked_context",),
        find="""                         if any(isinstance(v, np.ndarray) and np.may_share_memory(v, t.data) for v in values)]""",
        replace="""                         if isinstance(values[0], np.ndarray) and np.may_share_memory(values[0], t.data)]""",
        why="Only guards the first saved array: Mul saves (w, x) and an edit of x goes through."),
    Variant(
        "check_raises_value_error", "checked_context", ("test_checked_context",),
        find="raise RuntimeError(\n", replace="raise ValueError(\n",
        why="Raises ValueError where torch raises RuntimeError: code that catches torch's error misses it."),
    # ---------------------------------------------------------------- copy_context
    Variant(
        "copy_saves_views", "copy_context", ("test_copy_context",),
        code="super().save_for_backward(*(v.view() if isinstance(v, np.ndarray) else v for v in values))",
        why="ndarray.view() is a new header on the same memory, not a copy: the edit reaches it."),
    Variant(
        "copy_ascontiguousarray", "copy_context", ("test_copy_context",),
        code="super().save_for_backward(*(np.ascontiguousarray(v) if isinstance(v, np.ndarray) else v for v in values))",
        why="np.ascontiguousarray copies only non-contiguous arrays; a contiguous one comes back as itself."),
    Variant(
        "copy_in_backward", "copy_context", ("test_copy_context",),
        code="""super().save_for_backward(*values)


@property
def saved_tensors(self):
    return tuple(v.copy() if isinstance(v, np.ndarray) else v for v in self._saved)""",
        why="Copies when backward reads the values: by then the edit has happened."),
    Variant(
        "copy_only_what_requires_grad", "copy_context", ("test_copy_context",),
        code="""grad_arrays = [t.data for t in self.tensors if t.requires_grad]
super().save_for_backward(*(v.copy() if any(v is a for a in grad_arrays) else v for v in values))""",
        why="Copies only the arrays of inputs that require grad: the data x is saved by reference and its edit "
            "reaches backward."),
    # ---------------------------------------------------------------- module
    Variant(
        "parameters_not_recursive", "module",
        ("test_module", "test_linear_mlp"),
        find="""            for name, child in module._modules.items():
                if child is not None:
                    visit(child, prefix + name + ".")""",
        replace="",
        why="Lists only the module's own parameters: an MLP has none of its own."),
    Variant(
        "tied_weight_listed_twice", "module", ("test_module",),
        find="if value is not None and id(value) not in seen:", replace="if value is not None:",
        why="Does not skip an object already listed: a tied weight appears twice, and SGD would update it twice."),
    Variant(
        "children_before_own_entries", "module", ("test_module",),
        find="""            for name, value in getattr(module, registry).items():
                if value is not None and id(value) not in seen:
                    seen.add(id(value))
                    out.append((prefix + name, value))
            for name, child in module._modules.items():
                if child is not None:
                    visit(child, prefix + name + ".")""",
        replace="""            for name, child in module._modules.items():
                if child is not None:
                    visit(child, prefix + name + ".")
            for name, value in getattr(module, registry).items():
                if value is not None and id(value) not in seen:
                    seen.add(id(value))
                    out.append((prefix + name, value))""",
        why="Visits the children before the module's own entries: torch lists a module's own parameters first."),
    Variant(
        "non_persistent_buffer_as_plain_attribute", "module", ("test_module",),
        find="""        self._buffers[name] = value if value is None or isinstance(value, TensorBase) else Tensor(value)
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)""",
        replace="""        if persistent:
            self._buffers[name] = value if value is None or isinstance(value, TensorBase) else Tensor(value)
        else:
            object.__setattr__(self, name, value)""",
        why="Keeps a non-persistent buffer as a plain attribute: it is still a buffer, which buffers() lists "
            "(and .to(device) would move); only state_dict leaves it out."),
    Variant(
        "setattr_ignores_buffers", "module", ("test_module",),
        find="""        elif name in self._buffers:
            self._buffers[name] = value if value is None or isinstance(value, TensorBase) else Tensor(value)
        else:""",
        replace="""        else:""",
        why="Assigning to a buffer's name makes a plain attribute that hides the buffer, which state_dict "
            "still holds with its old value."),
    Variant(
        "buffer_not_wrapped", "module", ("test_module", "test_state_dict", "test_load_state_dict"),
        find="""        self._buffers[name] = value if value is None or isinstance(value, TensorBase) else Tensor(value)
        if persistent:""",
        replace="""        self._buffers[name] = value
        if persistent:""",
        why="Keeps an array as it is: buffers() yields arrays where torch yields tensors."),
    Variant(
        "buffer_always_wrapped", "module",
        ("test_module", "test_state_dict", "test_load_state_dict"),
        find="""        self._buffers[name] = value if value is None or isinstance(value, TensorBase) else Tensor(value)
        if persistent:""",
        replace="""        self._buffers[name] = Tensor(value)
        if persistent:""",
        why="Wraps a Tensor in another Tensor: NumPy turns the Tensor into an object array and the wrap fails."),
    Variant(
        "zero_grad_to_zeros", "module", ("test_module",),
        find="""        for p in self.parameters():
            p.grad = None""",
        replace="""        for p in self.parameters():
            p.grad = np.zeros_like(p.data)""",
        why="Fills the grads with zeros; torch's zero_grad sets them to None (set_to_none=True)."),
    Variant(
        "eval_only_this_module", "module", ("test_module",),
        find="""        for child in self._modules.values():
            if child is not None:
                child.train(mode)
        return self""",
        replace="""        return self""",
        why="train/eval set the flag on the module itself, not on its descendants, where dropout and batch "
            "norm layers read it."),
    Variant(
        "train_returns_none", "module", ("test_module",),
        find="""                child.train(mode)
        return self""",
        replace="""                child.train(mode)""",
        why="train() returns None where torch returns the module (model.eval()(x) fails)."),
    Variant(
        "setattr_ignores_modules", "module", ("test_module", "test_state_dict", "test_load_state_dict", "test_linear_mlp"),
        find="""        elif isinstance(value, Module):
            self._modules[name] = value
""",
        replace="",
        why="Registers Parameters but not sub-modules: a child is a plain attribute, and its parameters and "
            "buffers are not part of the tree."),
    Variant(
        "persistent_flag_inverted", "module", ("test_state_dict", "test_load_state_dict"),
        find="""        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)""",
        replace="""        if persistent:
            self._non_persistent.add(name)
        else:
            self._non_persistent.discard(name)""",
        why="Reads persistent=True as 'leave out of state_dict': the running statistics are not saved and the "
            "cache is."),
    Variant(
        "parameters_own_only", "module", ("test_module",),
        find="""        return [p for _, p in self.named_parameters()]""",
        replace="""        return list(self._parameters.values())""",
        why="parameters() returns only the module's own parameters: an optimizer built from it misses the "
            "children's."),
    # ---------------------------------------------------------------- tied_counts
    Variant(
        "tied_counts_state_dict_once", "tied_counts", ("test_tied_counts",),
        find="n_state_dict_keys = 3", replace="n_state_dict_keys = 2",
        why="Believes state_dict lists a tied parameter once, as named_parameters does."),
    Variant(
        "tied_counts_trained_twice", "tied_counts", ("test_tied_counts",),
        find="n_trained_numbers = 1000 * 64 + 1000", replace="n_trained_numbers = 2 * 1000 * 64 + 1000",
        why="Counts the tied matrix once per owner: it is one array."),
    # ---------------------------------------------------------------- state_dict
    Variant(
        "state_dict_without_buffers", "state_dict", ("test_state_dict", "test_load_state_dict"),
        find="""    for name, b in self._buffers.items():
        if b is not None and name not in self._non_persistent:
            out[name] = b.data
""",
        replace="",
        why="Leaves the persistent buffers out: a restored model loses its running statistics."),
    Variant(
        "state_dict_with_non_persistent_buffers", "state_dict", ("test_state_dict", "test_load_state_dict"),
        find="if b is not None and name not in self._non_persistent:", replace="if b is not None:",
        why="Saves the non-persistent buffers too; torch leaves them out of state_dict."),
    Variant(
        "state_dict_from_named_parameters", "state_dict", ("test_state_dict", "test_load_state_dict"),
        code="""out = {name: p.data for name, p in self.named_parameters()}
for name, b in self.named_buffers():
    module = self
    for part in name.split(".")[:-1]:
        module = module._modules[part]
    if name.split(".")[-1] not in module._non_persistent:
        out[name] = b.data
return out""",
        why="Builds state_dict from named_parameters(), which lists a tied weight once, and puts every buffer "
            "after every parameter."),
    Variant(
        "state_dict_copies", "state_dict", ("test_state_dict", "test_load_state_dict"),
        find="""            out[name] = p.data
""",
        replace="""            out[name] = p.data.copy()
""",
        why="Returns copies: torch's state_dict shares storage with the model, and load_state_dict then copies "
            "into arrays that the model no longer holds."),
    Variant(
        "state_dict_buffers_first", "state_dict", ("test_state_dict", "test_load_state_dict"),
        find="""    for name, p in self._parameters.items():
        if p is not None:
            out[name] = p.data
    for name, b in self._buffers.items():
        if b is not None and name not in self._non_persistent:
            out[name] = b.data""",
        replace="""    for name, b in self._buffers.items():
        if b is not None and name not in self._non_persistent:
            out[name] = b.data
    for name, p in self._parameters.items():
        if p is not None:
            out[name] = p.data""",
        why="Puts a module's buffers before its parameters: torch's order is parameters, then buffers."),
    # ---------------------------------------------------------------- load_state_dict
    Variant(
        "load_replaces_arrays", "load_state_dict", ("test_load_state_dict",),
        find="        array[...] = value\n",
        replace="""        module, path = self, key.split(".")
        for part in path[:-1]:
            module = module._modules[part]
        owner = module._parameters if path[-1] in module._parameters else module._buffers
        owner[path[-1]].data = np.array(value, dtype=array.dtype)
""",
        why="Gives each tensor a new array instead of copying into its array: an optimizer's view, or a tied twin, "
            "keeps the old values."),
    Variant(
        "load_copies_the_wrong_way", "load_state_dict", ("test_load_state_dict",),
        find="        array[...] = value\n", replace="        value[...] = array\n",
        why="Copies the model's values into the caller's dict instead of the dict's into the model: the model "
            "keeps its old values. (The test once compared the model with that dict after the load, which this "
            "write had made equal: 10/10, red team, stop 39.)"),
    Variant(
        "load_aliases_the_source", "load_state_dict", ("test_load_state_dict",),
        find="        array[...] = value\n", replace="        array[...] = value\n        state_dict[key] = array\n",
        why="Writes the model's array back into the caller's dict: the dict now aliases the model."),
    Variant(
        "load_strict_false_still_raises", "load_state_dict", ("test_load_state_dict",),
        find="    if strict:\n", replace="    if True:\n",
        why="Reports missing and unexpected keys as errors even with strict=False."),
    Variant(
        "load_mismatch_only_when_strict", "load_state_dict", ("test_load_state_dict",),
        find="    if errors:\n", replace="    if errors and strict:\n",
        why="With strict=False ignores size mismatches too; torch raises for them whatever strict says."),
    Variant(
        "load_unexpected_line_first", "load_state_dict", ("test_load_state_dict",),
        find="""        if unexpected:
            errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
        if missing:
            errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")""",
        replace="""        if missing:
            errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        if unexpected:
            errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")""",
        why="Lists the unexpected keys before the missing ones; torch's message starts with the missing keys."),
    Variant(
        "load_keys_without_quotes", "load_state_dict", ("test_load_state_dict",),
        find="""            errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")""",
        replace="""            errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(missing) + ". ")""",
        why="Leaves out the double quotes around each key that torch's message has."),
    Variant(
        "load_slice_assignment", "load_state_dict", ("test_load_state_dict",),
        find="        array[...] = value\n", replace="        array[:] = value\n",
        why="array[:] = value fails on a 0-d parameter (a scalar scale): [...] works for every shape."),
    Variant(
        "load_mismatch_shapes_swapped", "load_state_dict", ("test_load_state_dict",),
        find="copying a param with shape {value.shape} from checkpoint, \"\n                          f\"the shape in current model is {array.shape}.",
        replace="copying a param with shape {array.shape} from checkpoint, \"\n                          f\"the shape in current model is {value.shape}.",
        why="Swaps the two shapes: the checkpoint's shape comes first in torch's message."),
    Variant(
        "load_message_names_the_base_class", "load_state_dict", ("test_load_state_dict",),
        find="for {type(self).__name__}:", replace="for Module:",
        why="Names the base class in the message: torch names the model's own class."),
    Variant(
        "load_returns_keys_swapped", "load_state_dict", ("test_load_state_dict",),
        find="    return IncompatibleKeys(missing, unexpected)", replace="    return IncompatibleKeys(unexpected, missing)",
        why="Returns the unexpected keys as missing and the other way round."),
    # ---------------------------------------------------------------- linear_mlp
    Variant(
        "linear_weight_in_out", "linear_mlp", ("test_linear_mlp",),
        find="""        self.weight = Parameter(rng.uniform(-bound, bound, (out_features, in_features)))""",
        replace="""        self.weight = Parameter(rng.uniform(-bound, bound, (in_features, out_features)))""",
        why="Stores the weight as (in, out): torch's weights (out, in) do not load, and the keys' shapes differ."),
    Variant(
        "linear_normal_init", "linear_mlp", ("test_linear_mlp",),
        find="""        self.weight = Parameter(rng.uniform(-bound, bound, (out_features, in_features)))""",
        replace="""        self.weight = Parameter(rng.standard_normal((out_features, in_features)))""",
        why="Standard normal weights: a layer with many inputs starts with huge outputs; torch draws from "
            "[-1/sqrt(in), 1/sqrt(in)]."),
    Variant(
        "linear_bound_from_out_features", "linear_mlp", ("test_linear_mlp",),
        find="bound = 1 / np.sqrt(in_features)", replace="bound = 1 / np.sqrt(out_features)",
        why="Scales the initial range by the number of outputs instead of inputs."),
    Variant(
        "linear_always_has_bias", "linear_mlp", ("test_linear_mlp",),
        find="self.bias = Parameter(rng.uniform(-bound, bound, out_features)) if bias else None",
        replace="self.bias = Parameter(rng.uniform(-bound, bound, out_features))",
        why="Ignores bias=False: the layer has a 'bias' key that torch's does not."),
    Variant(
        "mlp_python_list", "linear_mlp", ("test_linear_mlp",),
        find="""        for i, layer in enumerate(layers[:-1]):
            setattr(self, str(i), layer)""",
        replace="""        self.layers = layers[:-1]""",
        why="Keeps the layers in a Python list, which Module.__setattr__ does not register: no parameters."),
    Variant(
        "mlp_only_linears_registered", "linear_mlp", ("test_linear_mlp",),
        find="""        for i, layer in enumerate(layers[:-1]):
            setattr(self, str(i), layer)""",
        replace="""        for i, layer in enumerate(layers[:-1:2]):
            setattr(self, str(i), layer)""",
        why="Registers only the Linear layers, as '0', '1': torch's Sequential counts the ReLUs, so the keys "
            "are '0.weight', '2.weight'... (and the ReLUs are lost)."),
    Variant(
        "mlp_relu_after_last_layer", "linear_mlp", ("test_linear_mlp",),
        find="""        for i, layer in enumerate(layers[:-1]):""",
        replace="""        for i, layer in enumerate(layers):""",
        why="Puts a ReLU after the last layer too: the logits can no longer be negative."),
    Variant(
        "linear_forgets_bias", "linear_mlp", ("test_linear_mlp",),
        find="""        return y if self.bias is None else y + self.bias""", replace="""        return y""",
        why="Registers the bias but never adds it."),
    Variant(
        "linear_ignores_rng", "linear_mlp", ("test_linear_mlp",),
        find="""        rng = np.random.default_rng(rng)
        bound = 1 / np.sqrt(in_features)""",
        replace="""        rng = np.random.default_rng()
        bound = 1 / np.sqrt(in_features)""",
        why="Ignores the seed: the same rng gives different layers, and runs cannot be repeated."),
    Variant(
        "mlp_reseeds_every_layer", "linear_mlp", ("test_linear_mlp",),
        find="""        rng = np.random.default_rng(rng)
        layers = []""",
        replace="""        layers = []""",
        why="Passes the seed itself to every layer: layers of the same shape start identical."),
    # ---------------------------------------------------------------- sgd
    Variant(
        "momentum_before_weight_decay", "sgd", ("test_sgd",),
        find="""                d = p.grad + self.weight_decay * p.data
                if self.momentum:
                    if self.momentum_buffers[i] is None:
                        self.momentum_buffers[i] = d.copy()
                    else:
                        self.momentum_buffers[i] *= self.momentum
                        self.momentum_buffers[i] += d
                    d = self.momentum_buffers[i]""",
        replace="""                d = p.grad.copy()
                if self.momentum:
                    if self.momentum_buffers[i] is None:
                        self.momentum_buffers[i] = d.copy()
                    else:
                        self.momentum_buffers[i] *= self.momentum
                        self.momentum_buffers[i] += d
                    d = self.momentum_buffers[i]
                d = d + self.weight_decay * p.data""",
        why="Adds weight decay after the momentum buffer: the buffer should accumulate the decayed gradient."),
    Variant(
        "momentum_with_dampening", "sgd", ("test_sgd",),
        find="                        self.momentum_buffers[i] += d\n",
        replace="                        self.momentum_buffers[i] += (1 - self.momentum) * d\n",
        why="The exponential-moving-average form (dampening = momentum): torch's default dampening is 0."),
    Variant(
        "momentum_for_missing_grads", "sgd", ("test_sgd",),
        find="""                if p.grad is None:
                    continue
                d = p.grad + self.weight_decay * p.data""",
        replace="""                d = (np.zeros_like(p.data) if p.grad is None else p.grad) + self.weight_decay * p.data""",
        why="Treats a missing grad as zero: the parameter still moves (momentum, decay) where torch skips it."),
    Variant(
        "sgd_keeps_the_generator", "sgd", ("test_sgd",),
        find="""        self.params = list(params)
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.momentum_buffers = [None] * len(self.params)""",
        replace="""        self.params = params
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.momentum_buffers = [None] * 100""",
        why="Keeps model.parameters() as it comes: a generator is exhausted by the first step, and later steps "
            "update nothing."),
    Variant(
        "sgd_rebinds_data", "sgd", ("test_sgd",),
        find="                p.add_(-self.lr * d)\n", replace="                p.data = p.data - self.lr * d\n",
        why="Binds a new array to each parameter: views, state_dict arrays and versions miss the update."),
    Variant(
        "sgd_without_version_bump", "sgd", ("test_sgd",),
        find="                p.add_(-self.lr * d)\n", replace="                p.data -= self.lr * d\n",
        why="Updates the array in place behind the tensor's back: the version does not move on, so a stale "
            "forward pass is no longer caught."),
    Variant(
        "sgd_buffer_aliases_the_grad", "sgd", ("test_sgd",),
        find="""                d = p.grad + self.weight_decay * p.data
                if self.momentum:
                    if self.momentum_buffers[i] is None:
                        self.momentum_buffers[i] = d.copy()""",
        replace="""                d = p.grad + self.weight_decay * p.data if self.weight_decay else p.grad
                if self.momentum:
                    if self.momentum_buffers[i] is None:
                        self.momentum_buffers[i] = d""",
        why="Keeps the first gradient itself as the momentum buffer, then scales the buffer in place: the "
            "caller's gradient array changes under it."),
    Variant(
        "weight_decay_into_the_grad", "sgd", ("test_sgd",),
        find="                d = p.grad + self.weight_decay * p.data\n",
        replace="                p.grad += self.weight_decay * p.data\n                d = p.grad.copy()\n",
        why="Adds the decay into p.grad in place: the gradient the caller holds changes, and torch leaves it."),
    Variant(
        "sgd_sign_flipped", "sgd", ("test_sgd",),
        find="                p.add_(-self.lr * d)\n", replace="                p.add_(self.lr * d)\n",
        why="Steps up the gradient."),
    Variant(
        "sgd_delegates_to_torch", "sgd", ("test_sgd",),
        find="""        with no_grad():
            for i, p in enumerate(self.params):""",
        replace="""        import torch
        from torch.optim.sgd import sgd
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        ts = [torch.from_numpy(self.params[i].data) for i in live]
        bufs = [None if self.momentum_buffers[i] is None else torch.from_numpy(self.momentum_buffers[i]) for i in live]
        sgd(ts, [torch.from_numpy(np.array(self.params[i].grad)) for i in live], bufs, weight_decay=self.weight_decay,
            momentum=self.momentum, lr=self.lr, dampening=0.0, nesterov=False, maximize=False, foreach=False)
        for i, b in zip(live, bufs):
            self.momentum_buffers[i] = None if b is None else b.numpy()
            self.params[i]._version_counter.bump()
        return
        with no_grad():
            for i, p in enumerate(self.params):""",
        why="Hands the update to torch's own SGD: right values, no NumPy work, no points."),
    # ---------------------------------------------------------------- correct alternatives
    Variant(
        "momentum_buffer_from_zero", "sgd", (),
        find="""                    if self.momentum_buffers[i] is None:
                        self.momentum_buffers[i] = d.copy()
                    else:
                        self.momentum_buffers[i] *= self.momentum
                        self.momentum_buffers[i] += d""",
        replace="""                    if self.momentum_buffers[i] is None:
                        self.momentum_buffers[i] = np.zeros_like(d)
                    self.momentum_buffers[i] = self.momentum * self.momentum_buffers[i] + d""",
        why="Starts the buffer at zero: with no dampening, momentum * 0 + d is the d that torch copies on step 1."),
    Variant(
        "check_owners_by_identity", "checked_context", (),
        find="if any(isinstance(v, np.ndarray) and np.may_share_memory(v, t.data) for v in values)]",
        replace="if any(v is t.data for v in values)]",
        why="Our ops save their input arrays themselves, so identity finds the same owners as shared memory."),
    Variant(
        "copy_with_np_array", "copy_context", (),
        code="super().save_for_backward(*[np.array(v, copy=True) if isinstance(v, np.ndarray) else v for v in values])",
        why="np.array(v, copy=True) is a copy, as v.copy() is."),
    Variant(
        "module_traversal_with_a_stack", "module", (),
        find="""        seen, out = set(), []

        def visit(module, prefix):
            for name, value in getattr(module, registry).items():
                if value is not None and id(value) not in seen:
                    seen.add(id(value))
                    out.append((prefix + name, value))
            for name, child in module._modules.items():
                if child is not None:
                    visit(child, prefix + name + ".")

        visit(self, "")
        return out""",
        replace="""        out, seen, stack = [], set(), [("", self)]
        while stack:
            prefix, module = stack.pop()
            for name, value in getattr(module, registry).items():
                if value is not None and id(value) not in seen:
                    seen.add(id(value))
                    out.append((prefix + name, value))
            children = [(prefix + name + ".", c) for name, c in module._modules.items() if c is not None]
            stack.extend(reversed(children))
        return out""",
        why="An explicit stack in place of recursion visits the modules in the same pre-order."),
    Variant(
        "load_with_copyto", "load_state_dict", (),
        find="        array[...] = value\n", replace="        np.copyto(array, value)\n",
        why="np.copyto copies into the existing array, casting float32 to float64 as array[...] = value does."),
    Variant(
        "stale_right_by_formula", "stale_gradient", (),
        find="""        x, w = Tensor(np.array(x0)), Tensor(np.array(w0), requires_grad=True)
        (w * x * x).backward(grad)
        return stale, w.grad""",
        replace="""        return stale, np.asarray(grad) * np.asarray(x0) * np.asarray(x0)""",
        why="The right gradient from the formula grad * x0 * x0 instead of a second forward pass."),
]

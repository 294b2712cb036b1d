# %% [markdown]
# # 1.6 Tensor layout: shape, stride, views and copies
#
# A tensor in PyTorch (or an array in NumPy) is two things: a flat block of memory, the
# **storage**, and a few numbers that say how to read it: a **shape**, one **stride** per axis
# and a **storage offset**. `x.t()`, `x[:, 1:]`, `x.expand(...)` and `x.view(...)` allocate no
# memory: they only write new numbers over the same storage. Knowing those numbers explains why
# `x.t().view(-1)` raises while `x.t().reshape(-1)` works, why writing into a slice changes the
# original, why an expanded tensor takes no memory, and why a gradient engine must give the same
# gradient whatever layout its inputs have.
#
# In this unit we compute every one of these numbers ourselves, in NumPy, and check each against
# what torch reports (`stride()`, `storage_offset()`, `is_contiguous()`, `torch.as_strided`).
# Then we write the view operations of our autodiff engine (transpose, slice, expand) and prove
# that the engine's gradients do not depend on the layout of its inputs.
#
# ## Learning goals
#
# After this unit we can:
#
# 1. compute the strides of a contiguous tensor and the storage position of any element, with a
#    storage offset;
# 2. decide, as torch does, whether a layout is contiguous (size-1 and size-0 axes included);
# 3. compute the layout of a transpose, a permute, a slice (with a step and an offset) and an
#    expand (stride 0), and of any chain of them;
# 4. say exactly when `view` can reuse the storage and when `reshape` must copy, and infer a
#    `-1` in a shape;
# 5. read the dense values that a layout describes, as `torch.as_strided` does;
# 6. test in torch whether two tensors share storage and whether a view has the layout we
#    predicted;
# 7. write the backward of the view operations and show that gradients do not depend on layout.
#
# ## Readings
#
# - **PyTorch documentation**: *Tensor Views* (which operations return views), `torch.Tensor.stride`,
#   `torch.Tensor.storage_offset`, `torch.Tensor.is_contiguous`, `torch.Tensor.view` (the
#   compatibility condition on sizes and strides), `torch.Tensor.expand`, `torch.as_strided` and
#   `torch.Tensor.untyped_storage`.
# - **NumPy documentation**: *The N-dimensional array* (its section *Internal memory layout of an
#   ndarray*: strides in bytes, C and Fortran order) and *Copies and views*.
# - **Dive into Deep Learning**, 2.1 *Data Manipulation* (indexing, slicing and *Saving Memory*:
#   in-place updates and views).
# - **Understanding Deep Learning** (Prince), chapter 7, *Gradients and initialization*: the
#   backward pass that part 7 extends with view operations.
# - Edward Z. Yang, *PyTorch internals* (blog post, 2019): the storage / tensor split, strides
#   and views, with pictures much like our figure.
#
# ## How this notebook works
#
# Each exercise has a heading with its task ID, the math, a worked example, a cell for our code
# and a test cell. The test cells run visible checks that compare our answers with torch on
# fixed and seeded random layouts; the grader adds hidden checks of the same kinds with other
# seeds. The rules:
#
# - **NumPy only**, except in the two torch exercises of part 6 (`shares_storage`,
#   `assert_view`), whose whole point is to ask torch. A solution that calls torch anywhere else
#   earns no points for that exercise.
# - **Strides are in elements**, as torch reports them, not in bytes as NumPy's `.strides`.
#   Layout functions return integers (Python or NumPy ints, never floats) and tuples of them.
# - **No warnings.** A NumPy warning fails the check: nbgrader gives no points to a test cell that
#   writes to stderr.
#
# | part | task | points |
# |---|---|---|
# | 1 | `contiguous_strides` | 5 |
# | 1 | `element_offset` | 4 |
# | 1 | concept check `position_of_element` | 3 |
# | 2 | `is_contiguous` | 6 |
# | 3 | `transpose_layout` | 4 |
# | 3 | `permute_layout` | 5 |
# | 3 | `slice_layout` | 9 |
# | 3 | `expand_layout` | 8 |
# | 4 | `view_strides` | 11 |
# | 4 | concept check `view_or_copy` | 4 |
# | 5 | `read_through_layout` (values, then a chain of views) | 5 + 3 |
# | 6 | `shares_storage` (torch) | 4 |
# | 6 | `assert_view` (torch) | 6 |
# | 7 | `view_ops` (against torch, then layout invariance) | 6 + 5 |
# | 7 | `explain_layouts` (written, graded by hand) | 12 |
# | | **total** | **100** |

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false, "task": false}
import numpy as np
import torch
from autograder.inside import checks

# The exercises of this unit where torch is the point: their checks let them call torch.
TORCH_TASKS = ("shares_storage", "assert_view")

# %% [markdown]
# ## 1. Storage, strides and offsets
#
# A tensor of shape $(n_0, n_1, \dots, n_{k-1})$ keeps its elements in a one-dimensional
# storage. Its **strides** $(s_0, \dots, s_{k-1})$ say how many storage positions we move when
# one index grows by 1, and its **storage offset** $o$ is the position of element
# $(0, \dots, 0)$. Element $(i_0, \dots, i_{k-1})$ lives at
#
# $$
# \operatorname{pos}(i) = o + \sum_{d=0}^{k-1} i_d \, s_d .
# $$
#
# A freshly allocated tensor is **contiguous** (row-major, "C order"): the last index moves
# fastest, so $s_{k-1} = 1$, and moving one step along axis $d$ jumps over a whole block of the
# axes after it:
#
# $$
# s_{k-1} = 1, \qquad s_d = s_{d+1} \cdot \max(n_{d+1}, 1) .
# $$
#
# The $\max(\cdot, 1)$ is torch's rule for axes of size 0: a tensor with no elements still gets
# strides as if that axis had size 1. A 0-d tensor (a scalar) has no axes and the empty tuple
# of strides.
#
# Torch counts strides in **elements**; NumPy's `.strides` counts **bytes**, so NumPy's numbers
# are torch's times the item size (8 for float64, 4 for float32). Fortran order ("F order",
# NumPy's `order="F"`) makes the *first* index move fastest instead; torch's factory functions
# never produce it.
#
# **Worked example.** For shape $(2, 3, 4)$: $s_2 = 1$, $s_1 = 1 \cdot 4 = 4$,
# $s_0 = 4 \cdot 3 = 12$, so the strides are $(12, 4, 1)$, and element $(1, 2, 3)$ is at
# $12 + 8 + 3 = 23$, the last of the 24. NumPy reports `np.zeros((2, 3, 4)).strides == (96, 32, 8)`,
# the same numbers times 8 bytes. For shape $(2, 0, 3)$: $s_2 = 1$,
# $s_1 = 1 \cdot 3 = 3$, $s_0 = 3 \cdot \max(0, 1) = 3$: $(3, 3, 1)$.

# %% nbgrader={"grade": false, "grade_id": "storage_demo", "locked": true, "schema_version": 3, "solution": false, "task": false}
t = torch.arange(24).reshape(2, 3, 4)
print("torch strides:", t.stride(), " storage offset:", t.storage_offset())
print("NumPy strides in bytes:", np.zeros((2, 3, 4)).strides, " in elements:",
      tuple(s // 8 for s in np.zeros((2, 3, 4)).strides))
print("element (1, 2, 3) holds", int(t[1, 2, 3]), "(the storage holds 0..23, so values are positions)")
print("torch.empty(2, 0, 3).stride() =", torch.empty(2, 0, 3).stride())

# %% [markdown]
# ### Exercise `contiguous_strides`
#
# Write `contiguous_strides(shape)`, the strides of `torch.empty(shape)`.

# %% nbgrader={"grade": false, "grade_id": "contiguous_strides", "locked": false, "schema_version": 3, "solution": true, "task": false}
def contiguous_strides(shape):
    """Row-major (C order) strides in elements, like torch.empty(shape).stride().

    shape : a tuple of non-negative ints (the empty tuple for a 0-d tensor).

    Returns a tuple of ints, one per axis: the last axis has stride 1 and
    strides[d] = strides[d + 1] * max(shape[d + 1], 1) (a size-0 axis counts as size 1).
    """
    ### BEGIN SOLUTION
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * max(int(shape[d + 1]), 1)
    return tuple(strides)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_contiguous_strides", "locked": true, "points": 5, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def strides_hint(got, expected, case):
    shape = case.args[0]
    if isinstance(got, tuple) and len(got) == len(expected) and expected:
        if got in (tuple(8 * s for s in expected), tuple(4 * s for s in expected)):
            return "these are strides in bytes (NumPy's .strides); torch counts elements."
        f_order = tuple(int(np.prod([max(n, 1) for n in shape[:d]])) for d in range(len(shape)))
        if got == f_order:
            return "these are Fortran-order strides (the first axis moves fastest); C order makes the last axis stride 1."
        if 0 in shape:
            return "a size-0 axis counts as size 1 in the strides of the axes before it (torch's rule)."
    return None


checks.check_layout("contiguous_strides", contiguous_strides, "contiguous_strides", [
    checks.case("worked example", (2, 3, 4)),
    checks.case("a size-0 axis", (2, 0, 3)),
    checks.case("0-d", ()),
    checks.case("1-D", (7,)),
    checks.case("size-1 axes", (1, 5, 1)),
] + [checks.case(f"random shape #{i}", shape) for i, (shape, _, _) in enumerate(checks.random_layouts(1, 25))],
    hints=[strides_hint])
### BEGIN HIDDEN TESTS
hidden_cases = [
    checks.case("a long shape", (2, 3, 1, 4, 5, 2)),
    checks.case("leading size 0", (0, 4)),
    checks.case("trailing size 0", (3, 0)),
    checks.case("large sizes", (1000, 1000, 3)),
    checks.case("a list", [4, 5]),
] + [checks.case(f"random shape #{i}", shape) for i, (shape, _, _) in enumerate(checks.random_layouts(101, 40, max_ndim=6))]
checks.check_layout("contiguous_strides", contiguous_strides, "contiguous_strides", hidden_cases, hints=[strides_hint])
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise `element_offset`
#
# Write `element_offset(index, strides, storage_offset=0)`, the storage position of the element
# at `index`, from the formula above. The strides need not be contiguous ones: they may come
# from any view, and may even be 0 or negative (NumPy's `a[::-1]` has a negative stride; torch
# has none, so the checks compare those cases with NumPy).
#
# **Worked example.** Strides $(12, 4, 1)$, offset 0, index $(1, 2, 3)$: $0 + 12 + 8 + 3 = 23$.
# The transpose `t.transpose(0, 2)` of the tensor above has strides $(1, 4, 12)$, and its element
# $(3, 2, 1)$ is at $3 + 8 + 12 = 23$: the same element, as it must be. The slice `t[1:]` has
# offset 12 and strides $(12, 4, 1)$; its element $(0, 2, 3)$ is at $12 + 8 + 3 = 23$ again.

# %% nbgrader={"grade": false, "grade_id": "element_offset", "locked": false, "schema_version": 3, "solution": true, "task": false}
def element_offset(index, strides, storage_offset=0):
    """Storage position of the element at `index`: storage_offset + sum(index[d] * strides[d]).

    index          : a tuple of non-negative ints, one per axis.
    strides        : a tuple of ints (in elements; may be 0 or negative), one per axis.
    storage_offset : the position of element (0, ..., 0).

    Returns an int.
    """
    ### BEGIN SOLUTION
    return int(storage_offset) + sum(int(i) * int(s) for i, s in zip(index, strides))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_element_offset", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def random_index_cases(seed, n, negative=False):
    pick = np.random.default_rng(seed)
    out = []
    for i, (shape, strides, offset) in enumerate(checks.random_layouts(seed, n, negative=negative)):
        if 0 in shape:
            continue
        index = tuple(int(pick.integers(0, size)) for size in shape)
        out.append(checks.case(f"random layout #{i}", index, strides, offset))
    return out


def offset_hint(got, expected, case):
    index, strides = case.args[0], case.args[1]
    if got == expected - (case.args[2] if len(case.args) > 2 else case.kwargs.get("storage_offset", 0)):
        return "the storage offset is missing: it is the position of element (0, ..., 0)."
    return None


checks.check_layout("element_offset", element_offset, "element_offset", [
    checks.case("worked example", (1, 2, 3), (12, 4, 1)),
    checks.case("the transpose", (3, 2, 1), (1, 4, 12)),
    checks.case("the slice t[1:]", (0, 2, 3), (12, 4, 1), 12),
    checks.case("storage_offset by keyword", (2, 1), (1, 5), storage_offset=7),
    checks.case("a stride 0 (expanded axis)", (3, 1), (0, 2), 4),
    checks.case("0-d", (), (), 5),
    checks.case("negative strides (NumPy a[::-1, ::-1] of a (3, 4) array)", (1, 2), (-4, -1), 11),
] + random_index_cases(2, 25) + random_index_cases(3, 10, negative=True), hints=[offset_hint])
### BEGIN HIDDEN TESTS
checks.check_layout("element_offset", element_offset, "element_offset",
                    random_index_cases(102, 40) + random_index_cases(103, 20, negative=True), hints=[offset_hint])
### END HIDDEN TESTS

# %% [markdown]
# ### Concept check `position_of_element`
#
# `x = torch.arange(24).reshape(2, 3, 4)` holds the numbers 0 to 23 in its storage, in order,
# and `y = x.transpose(0, 2)` has shape $(4, 3, 2)$. Which storage position does `y[3, 1, 0]`
# read? Work it out from the strides (we may check it in torch afterwards) and set
# `y_3_1_0_position` to a whole number.

# %% nbgrader={"grade": false, "grade_id": "position_of_element", "locked": false, "schema_version": 3, "solution": true, "task": false}
y_3_1_0_position = None  # the storage position read by y[3, 1, 0]
### BEGIN SOLUTION
y_3_1_0_position = 3 * 1 + 1 * 4 + 0 * 12  # y's strides are (1, 4, 12)
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_position_of_element", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
digest = "7902699be42c8a8e46fbbb4501726517e86b22c56a189f7625a6da49081b2451"
checks.check_hash("position_of_element", "y_3_1_0_position", y_3_1_0_position, digest,
                  hint="y = x.transpose(0, 2) swaps the strides of axes 0 and 2: y's strides are (1, 4, 12).")
### BEGIN HIDDEN TESTS
# Where the stored digest comes from: the element torch finds at y[3, 1, 0].
assert digest == checks.answer_digest(int(torch.arange(24).reshape(2, 3, 4).transpose(0, 2)[3, 1, 0]))
from autograder.outside.oracles import ORACLES
checks.check_value("position_of_element", "y_3_1_0_position", y_3_1_0_position,
                   ORACLES["element_offset"]((3, 1, 0), (1, 4, 12)))
### END HIDDEN TESTS

# %% [markdown]
# ## 2. Contiguity
#
# A layout is **contiguous** when reading its elements in index order (last index fastest)
# walks the storage one position at a time, with no gaps and no repeats. For a layout with at
# least one element that means: every axis has the stride that `contiguous_strides` gives it,
# except that
#
# - an axis of **size 1** may have any stride, because its only index is 0 and the stride is
#   never multiplied by anything else (torch ignores these strides, and so does NumPy);
# - a layout with **no elements** (some size is 0) reads nothing, so torch calls it contiguous
#   whatever its strides.
#
# The storage offset plays no part: a contiguous block may start anywhere. Equivalently, walking
# the axes from the last one, each axis of size $n_d \ne 1$ must have stride equal to the
# product of the sizes of the axes after it:
#
# $$
# s_d = \prod_{e > d} n_e \quad \text{for every } d \text{ with } n_d \ne 1 .
# $$
#
# **Worked example.** Shape $(2, 3)$ with strides $(3, 1)$ is contiguous; its transpose, shape
# $(3, 2)$ with strides $(1, 3)$, is not ($s_1$ should be 1). The slice `x[:, :2]` of a
# contiguous $(2, 3)$ tensor has shape $(2, 2)$ and strides $(3, 1)$: not contiguous ($s_0$
# should be 2; a gap of one element follows each row). Shape $(2, 1, 3)$ with strides
# $(3, 100, 1)$ is contiguous: the 100 is never used. Shape $(0, 3)$ with strides $(1, 1)$ is
# contiguous: nothing is read.
#
# ### Exercise `is_contiguous`
#
# Write `is_contiguous(shape, strides)`, the answer of `torch.Tensor.is_contiguous()` for a
# tensor with this layout.

# %% nbgrader={"grade": false, "grade_id": "is_contiguous", "locked": false, "schema_version": 3, "solution": true, "task": false}
def is_contiguous(shape, strides):
    """Whether the layout is C-contiguous, as torch.Tensor.is_contiguous() decides.

    shape, strides : tuples of ints of the same length (strides in elements, may be 0 or negative).

    Returns a bool: True when every axis of size other than 1 has stride prod(shape[d + 1:]);
    size-1 axes are ignored, and a layout with a size-0 axis is always contiguous.
    """
    ### BEGIN SOLUTION
    if 0 in shape:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_is_contiguous", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def contiguous_hint(got, expected, case):
    shape = case.args[0]
    if expected and 1 in shape:
        return "axes of size 1 never use their stride: skip them (torch and NumPy both do)."
    if expected and 0 in shape:
        return "a layout with a size-0 axis reads nothing, so torch calls it contiguous."
    if not expected:
        return "every axis of size other than 1 must have exactly the stride prod(shape[d + 1:])."
    return None


def layout_cases(seed, n, negative=False):
    return [checks.case(f"random layout #{i}", shape, strides)
            for i, (shape, strides, _) in enumerate(checks.random_layouts(seed, n, negative=negative))]


checks.check_layout("is_contiguous", is_contiguous, "is_contiguous", [
    checks.case("worked example", (2, 3), (3, 1)),
    checks.case("its transpose", (3, 2), (1, 3)),
    checks.case("a slice x[:, :2]", (2, 2), (3, 1)),
    checks.case("a slice x[::2] (step along axis 0)", (2, 3), (6, 1)),
    checks.case("a size-1 axis with any stride", (2, 1, 3), (3, 100, 1)),
    checks.case("only size-1 axes", (1, 1), (7, 5)),
    checks.case("no elements", (0, 3), (1, 1)),
    checks.case("0-d", (), ()),
    checks.case("an expanded axis (stride 0)", (4, 3), (0, 1)),
    checks.case("decreasing strides with a gap", (2, 3), (4, 1)),
    checks.case("a negative stride (NumPy a[::-1])", (3,), (-1,)),
    checks.case("a negative stride on a size-1 axis (NumPy)", (1, 3), (-3, 1)),
] + layout_cases(4, 30) + layout_cases(5, 10, negative=True), hints=[contiguous_hint])
### BEGIN HIDDEN TESTS
from autograder.outside.oracles import ORACLES
contiguous_ones = [checks.case(f"contiguous #{i}", shape, ORACLES["contiguous_strides"](shape))
                   for i, (shape, _, _) in enumerate(checks.random_layouts(104, 20))]
checks.check_layout("is_contiguous", is_contiguous, "is_contiguous",
                    contiguous_ones + layout_cases(105, 60) + layout_cases(106, 20, negative=True),
                    hints=[contiguous_hint])
### END HIDDEN TESTS

# %% [markdown]
# ## 3. Views: transpose, permute, slice and expand
#
# A **view** is a new (shape, strides, offset) over the *same* storage. Four operations only
# rewrite those numbers, which is why torch returns views for all of them and why they cost no
# time and no memory, whatever the size of the tensor. Each function below returns the triple
# `(shape, strides, offset)` of the view, as two tuples of ints and an int, and takes the
# input's offset, so that views can be chained: `slice_layout(*transpose_layout(...), ...)`
# is the layout of a slice of a transpose. Axes may be given as negative numbers (`-1` is the
# last axis), as in torch. Torch has no negative strides; the checks still feed some to
# transpose, permute and slice, and compare those cases with NumPy's views, which follow the
# same rules (NumPy only differs in keeping the offset of an empty slice, which those cases
# avoid). Expand is checked against torch alone.
#
# **Transpose and permute.** `t.transpose(d0, d1)` swaps two axes. Element $(\dots, i, \dots, j,
# \dots)$ of the result is element $(\dots, j, \dots, i, \dots)$ of `t`, so the result's stride
# along $d_0$ must be `t`'s stride along $d_1$ and vice versa: transpose swaps two entries of the
# shape **and** the same two entries of the strides, and keeps the offset. `t.permute(dims)`
# reorders all axes: axis $k$ of the result is axis `dims[k]` of `t`, so
# $n'_k = n_{\text{dims}[k]}$ and $s'_k = s_{\text{dims}[k]}$.
#
# **Worked example.** `t` with shape $(2, 3, 4)$, strides $(12, 4, 1)$ and offset 5 (say a slice
# of a bigger tensor). `t.transpose(0, 2)` has shape $(4, 3, 2)$, strides $(1, 4, 12)$, offset 5.
# `t.permute(2, 0, 1)` has shape $(4, 2, 3)$ and strides $(1, 12, 4)$: axis 0 of the result is
# axis 2 of `t`, and so on; the offset stays 5. The *inverse* permutation $(1, 2, 0)$ would give
# $(3, 4, 2)$, a different tensor.
#
# ### Exercise `transpose_layout`

# %% nbgrader={"grade": false, "grade_id": "transpose_layout", "locked": false, "schema_version": 3, "solution": true, "task": false}
def transpose_layout(shape, strides, dim0, dim1, offset=0):
    """Layout (shape, strides, offset) of t.transpose(dim0, dim1) for t with this layout.

    shape, strides : tuples of ints of the same length (at least one axis).
    dim0, dim1     : the axes to swap (negative values count from the end).
    offset         : t's storage offset, which the view keeps.

    Returns (shape, strides, offset): two tuples of ints and an int.
    """
    ### BEGIN SOLUTION
    shape, strides = list(shape), list(strides)
    shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
    strides[dim0], strides[dim1] = strides[dim1], strides[dim0]
    return tuple(int(n) for n in shape), tuple(int(s) for s in strides), int(offset)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_transpose_layout", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def transpose_cases(seed, n, negative=False):
    pick = np.random.default_rng(seed)
    out = []
    for i, (shape, strides, offset) in enumerate(checks.random_layouts(seed, n, negative=negative)):
        if shape:
            d0, d1 = (int(d) for d in pick.integers(-len(shape), len(shape), size=2))
            out.append(checks.case(f"random layout #{i}", shape, strides, d0, d1, offset))
    return out


def swap_hint(got, expected, case):
    if isinstance(got, tuple) and len(got) == 3 and got[0] == expected[0] and got[1] != expected[1]:
        return "the shape is right but the strides are not: transpose swaps the same two entries of the strides too."
    if isinstance(got, tuple) and len(got) == 3 and got[:2] == expected[:2]:
        return "a view keeps the storage offset of its input."
    return None


checks.check_layout("transpose_layout", transpose_layout, "transpose_layout", [
    checks.case("worked example", (2, 3, 4), (12, 4, 1), 0, 2, 5),
    checks.case("offset by keyword", (2, 3), (3, 1), 0, 1, offset=4),
    checks.case("no offset given", (2, 3), (3, 1), 1, 0),
    checks.case("negative dims", (2, 3, 4), (12, 4, 1), -1, -3, 2),
    checks.case("a dim with itself", (2, 3), (3, 1), 1, 1, 1),
    checks.case("a negative stride (NumPy)", (3, 2), (-2, 1), 0, 1, 4),
] + transpose_cases(6, 25) + transpose_cases(7, 8, negative=True), hints=[swap_hint])
### BEGIN HIDDEN TESTS
checks.check_layout("transpose_layout", transpose_layout, "transpose_layout",
                    transpose_cases(106, 40) + transpose_cases(107, 15, negative=True), hints=[swap_hint])
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise `permute_layout`

# %% nbgrader={"grade": false, "grade_id": "permute_layout", "locked": false, "schema_version": 3, "solution": true, "task": false}
def permute_layout(shape, strides, dims, offset=0):
    """Layout (shape, strides, offset) of t.permute(dims) for t with this layout.

    dims   : a permutation of the axes (negative values count from the end): axis k of the
             result is axis dims[k] of t.
    offset : t's storage offset, which the view keeps.

    Returns (shape, strides, offset): two tuples of ints and an int.
    """
    ### BEGIN SOLUTION
    return tuple(int(shape[d]) for d in dims), tuple(int(strides[d]) for d in dims), int(offset)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_permute_layout", "locked": true, "points": 5, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
from autograder.outside.oracles import ORACLES
def permute_cases(seed, n, negative=False):
    pick = np.random.default_rng(seed)
    out = []
    for i, (shape, strides, offset) in enumerate(checks.random_layouts(seed, n, negative=negative)):
        dims = [int(d) - (len(shape) if pick.random() < 0.3 else 0) for d in pick.permutation(len(shape))]
        out.append(checks.case(f"random layout #{i}", shape, strides, tuple(dims), offset))
    return out


def chain_cases(seed, n):
    """Inputs that are themselves views: torch's layout of a slice of an expand of a random layout."""
    pick = np.random.default_rng(seed)
    out = []
    for i, (shape, strides, offset) in enumerate(checks.random_layouts(seed, n, max_ndim=3)):
        grown = tuple(int(pick.integers(2, 4)) if size == 1 else size for size in shape)
        layout = ORACLES["expand_layout"](shape, strides, (2,) + grown, offset)
        layout = ORACLES["slice_layout"](*layout, int(pick.integers(0, len(grown) + 1)), 1, None, 2)
        dims = tuple(int(d) for d in pick.permutation(len(layout[0])))
        out.append(checks.case(f"a slice of an expand #{i}", layout[0], layout[1], dims, layout[2]))
    return out


def permute_hint(got, expected, case):
    shape, strides, dims = case.args[:3]
    inverse = tuple(int(k) for k in np.argsort([d % len(shape) for d in dims]))
    if isinstance(got, tuple) and len(got) == 3 and got[0] == tuple(shape[d] for d in inverse):
        return "that is the inverse permutation: axis k of the result is axis dims[k] of the input."
    return swap_hint(got, expected, case)


checks.check_layout("permute_layout", permute_layout, "permute_layout", [
    checks.case("worked example", (2, 3, 4), (12, 4, 1), (2, 0, 1), 5),
    checks.case("the inverse permutation", (2, 3, 4), (12, 4, 1), (1, 2, 0), 5),
    checks.case("negative dims", (2, 3, 4), (12, 4, 1), (-1, 0, -2)),
    checks.case("0-d", (), (), (), 3),
    checks.case("a negative stride (NumPy)", (2, 3, 4), (12, -4, 1), (1, 2, 0), 8),
] + permute_cases(8, 25) + chain_cases(9, 10) + permute_cases(10, 8, negative=True), hints=[permute_hint])
### BEGIN HIDDEN TESTS
checks.check_layout("permute_layout", permute_layout, "permute_layout",
                    permute_cases(108, 40) + chain_cases(109, 20) + permute_cases(110, 15, negative=True),
                    hints=[permute_hint])
### END HIDDEN TESTS

# %% [markdown]
# **Slice.** `t[..., start:stop:step]` along axis `dim` keeps the indices
# $\text{start}, \text{start} + \text{step}, \dots$ below `stop`, after Python's rules have
# turned `None` into the ends, counted negative values from the end and clamped both to
# $[0, n_{\text{dim}}]$ (Python's `slice(start, stop, step).indices(n)` does exactly this). Index
# $j$ of the view is index $\text{start} + j \cdot \text{step}$ of `t`, so
#
# $$
# o' = o + \text{start} \cdot s_{\text{dim}}, \qquad
# s'_{\text{dim}} = \text{step} \cdot s_{\text{dim}}, \qquad
# n'_{\text{dim}} = \max\Big(0, \Big\lceil \frac{\text{stop} - \text{start}}{\text{step}} \Big\rceil\Big),
# $$
#
# and every other axis is unchanged. The offset moves by $\text{start} \cdot s_{\text{dim}}$
# even when the slice is empty (torch does this too). Torch (unlike NumPy) has no negative
# steps: `step` must be positive, otherwise we raise `ValueError`.
#
# **Worked example.** A contiguous $(4, 6)$ tensor, strides $(6, 1)$, offset 0, sliced
# `t[:, 1:6:2]` (dim 1, start 1, stop 6, step 2): columns 1, 3, 5, so $n' = \lceil 5/2 \rceil = 3$;
# strides $(6, 2)$; offset $0 + 1 \cdot 1 = 1$. Then `[-3:]` along dim 0 of that: start
# $-3 + 4 = 1$, rows 1, 2, 3; offset $1 + 1 \cdot 6 = 7$; shape $(3, 3)$, strides $(6, 2)$.
# `t[10:]` along dim 0 clamps start to 4: shape $(0, 6)$, offset $0 + 4 \cdot 6 = 24$.
#
# ### Exercise `slice_layout`

# %% nbgrader={"grade": false, "grade_id": "slice_layout", "locked": false, "schema_version": 3, "solution": true, "task": false}
def slice_layout(shape, strides, offset, dim, start, stop, step):
    """Layout (shape, strides, offset) of t[..., start:stop:step] along axis `dim`.

    shape, strides, offset : t's layout (at least one axis).
    dim                    : the axis to slice (negative values count from the end).
    start, stop, step      : ints or None, with Python's slice rules (negative start and stop
                             count from the end; out-of-range values are clamped). step must be
                             positive (None means 1); otherwise raise ValueError.

    Returns (shape, strides, offset): the offset grows by start * strides[dim] (even for an
    empty slice), the size along dim is ceil((stop - start) / step) (at least 0), and the
    stride along dim is multiplied by step.
    """
    ### BEGIN SOLUTION
    if step is not None and step <= 0:
        raise ValueError("slice step must be positive")
    start, stop, step = slice(start, stop, step).indices(shape[dim])
    shape, strides = list(shape), list(strides)
    offset = offset + start * strides[dim]
    shape[dim] = len(range(start, stop, step))
    strides[dim] = strides[dim] * step
    return tuple(int(n) for n in shape), tuple(int(s) for s in strides), int(offset)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_slice_layout", "locked": true, "points": 9, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def slice_cases(seed, n, negative=False):
    pick = np.random.default_rng(seed)
    out = []
    for i, (shape, strides, offset) in enumerate(checks.random_layouts(seed, n, negative=negative)):
        if not shape:
            continue
        dim = int(pick.integers(-len(shape), len(shape)))
        size = shape[dim]

        def bound():
            return None if pick.random() < 0.25 else int(pick.integers(-size - 2, size + 3))

        step = None if pick.random() < 0.2 else int(pick.integers(1, 4))
        start, stop = bound(), bound()
        if negative and not range(*slice(start, stop, step).indices(size)):
            continue  # NumPy answers for negative strides, and it keeps the offset of an empty slice
        out.append(checks.case(f"random layout #{i}", shape, strides, offset, dim, start, stop, step))
    return out


def slice_hint(got, expected, case):
    if not (isinstance(got, tuple) and len(got) == 3):
        return None
    shape, strides, offset, dim, start, stop, step = case.args
    if got[:2] == expected[:2] and got[2] == offset:
        return "the view starts at element `start`: the offset grows by start * strides[dim]."
    if got[0] == expected[0] and got[2] == expected[2]:
        return "the stride along dim is multiplied by the step: the view skips step - 1 elements per index."
    if got[1:] == expected[1:]:
        return ("the size along dim is the number of indices start, start + step, ... below stop: "
                "ceil((stop - start) / step), after negative values and clamping (slice(...).indices(n)).")
    return None


checks.check_layout("slice_layout", slice_layout, "slice_layout", [
    checks.case("worked example", (4, 6), (6, 1), 0, 1, 1, 6, 2),
    checks.case("worked example, then [-3:]", (4, 6), (6, 2), 1, 0, -3, None, None),
    checks.case("start past the end (empty, offset still moves)", (4, 6), (6, 1), 0, 0, 10, None, 1),
    checks.case("an empty slice 2:2", (4, 6), (6, 1), 3, 1, 2, 2, 1),
    checks.case("stop before start", (5,), (1,), 0, 0, 4, 1, 1),
    checks.case("a step that does not divide", (7,), (3,), 2, 0, 0, None, 3),
    checks.case("negative dim", (2, 3, 4), (12, 4, 1), 0, -1, 1, -1, None),
    checks.case("all None", (3, 2), (2, 1), 5, 0, None, None, None),
    checks.case("a stride-0 axis", (4, 3), (0, 1), 2, 0, 1, 3, 1),
    checks.case("a negative stride (NumPy)", (4, 3), (-3, 1), 9, 0, 1, None, 2),
] + slice_cases(11, 30) + slice_cases(12, 8, negative=True), hints=[slice_hint])
checks.expect_raises("slice_layout", ValueError, slice_layout, (4,), (1,), 0, 0, None, None, -1)
checks.expect_raises("slice_layout", ValueError, slice_layout, (4,), (1,), 0, 0, None, None, 0)
### BEGIN HIDDEN TESTS
checks.check_layout("slice_layout", slice_layout, "slice_layout",
                    slice_cases(111, 60) + slice_cases(112, 20, negative=True), hints=[slice_hint])
checks.expect_raises("slice_layout", ValueError, slice_layout, (3, 5), (5, 1), 2, 1, 4, 0, -2)
### END HIDDEN TESTS

# %% [markdown]
# **Expand.** `t.expand(new_shape)` makes a size-1 axis look as if it had any size, without
# copying: the new axis gets **stride 0**, so that every index along it reads the same storage
# position. Following torch's rules:
#
# - shapes are aligned on the **right**: the last entry of `new_shape` goes with the last axis
#   of `t`, and `new_shape` may have extra **leading** axes;
# - an axis of `t` with size 1 may take any size $n \ge 0$, and then gets stride 0 (if the size
#   stays 1, the stride is kept);
# - an axis whose size is not 1 must keep it; `-1` means "keep this axis's size (and stride)";
# - a new leading axis of size $n \ne 1$ gets stride 0; a new leading axis of size 1 gets torch's
#   value $n'_{d+1} \cdot s'_{d+1}$ (the stride it would have if the tensor were contiguous
#   along it; 0 when there is no axis $d + 1$, which happens only for a 0-d `t`), and a new
#   leading axis cannot be `-1`;
# - anything else (a size that is not 1 changing, a `-1` on a new axis) raises `ValueError`
#   (torch raises `RuntimeError`). The offset is kept.
#
# This is broadcasting (unit 1.4) made explicit: `a + b` for shapes $(3, 1)$ and $(4,)$ reads
# both operands through expanded layouts of shape $(3, 4)$.
#
# **Worked example.** `t` with shape $(3, 1)$, strides $(1, 1)$ and offset 2, expanded to
# $(2, 3, 4)$: axis $-1$ (size 1 to 4) gets stride 0; axis $-2$ keeps size 3 and stride 1; the new
# leading axis of size 2 gets stride 0. Result: shape $(2, 3, 4)$, strides $(0, 1, 0)$, offset 2.
# Expanding to $(1, -1, 4)$ instead gives shape $(1, 3, 4)$ and strides $(3 \cdot 1, 1, 0) = (3, 1, 0)$
# for the leading size-1 axis. Expanding to $(3, 5)$ is fine; expanding to $(4, 1)$ raises.
#
# ### Exercise `expand_layout`

# %% nbgrader={"grade": false, "grade_id": "expand_layout", "locked": false, "schema_version": 3, "solution": true, "task": false}
def expand_layout(shape, strides, new_shape, offset=0):
    """Layout (shape, strides, offset) of t.expand(new_shape), following torch's rules.

    Shapes are aligned on the right. A size-1 axis may grow to any size and then gets stride 0;
    -1 keeps an axis's size and stride; a new leading axis gets stride 0 unless its size is 1,
    when its stride is shape_out[d + 1] * strides_out[d + 1] (torch's value; 0 when there is no
    axis d + 1, i.e. for a 0-d tensor). Any other change
    of size (or -1 on a new leading axis) raises ValueError. The offset is kept.

    Returns (shape, strides, offset): two tuples of ints and an int.
    """
    ### BEGIN SOLUTION
    extra = len(new_shape) - len(shape)
    if extra < 0:
        raise ValueError("expand: new_shape has fewer axes than the tensor")
    out_shape, out_strides = [0] * len(new_shape), [0] * len(new_shape)
    for d in range(len(new_shape) - 1, -1, -1):
        target = int(new_shape[d])
        if d < extra:  # a new leading axis
            if target < 0:
                raise ValueError(f"expand: -1 is not allowed on the new leading axis {d}")
            size, stride = 1, (out_shape[d + 1] * out_strides[d + 1] if d + 1 < len(new_shape) else 0)
        else:
            size, stride = int(shape[d - extra]), int(strides[d - extra])
            target = size if target == -1 else target
        if target != size:
            if size != 1 or target < 0:
                raise ValueError(f"expand: size {size} of axis {d} cannot become {target}")
            size, stride = target, 0
        out_shape[d], out_strides[d] = size, stride
    return tuple(out_shape), tuple(out_strides), int(offset)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_expand_layout", "locked": true, "points": 8, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def expand_cases(seed, n):
    pick = np.random.default_rng(seed)
    out = []
    for i, (shape, strides, offset) in enumerate(checks.random_layouts(seed, n)):
        target = [(-1 if pick.random() < 0.3 else int(pick.integers(0, 4))) if size == 1
                  else (-1 if pick.random() < 0.3 else size) for size in shape]
        lead = [int(pick.integers(1, 4)) for _ in range(int(pick.integers(0, 3)))]
        out.append(checks.case(f"random layout #{i}", shape, strides, tuple(lead + target), offset))
    return out


def expand_hint(got, expected, case):
    if not (isinstance(got, tuple) and len(got) == 3 and isinstance(got[1], tuple)):
        return None
    if got[0] == expected[0] and any(g == 1 and e == 0 for g, e in zip(got[1], expected[1])):
        return "an expanded axis has stride 0 (every index reads the same element), not 1."
    if got[0] == expected[0] and got[2] == expected[2]:
        return ("check the strides of the axes that keep their size (they keep their stride) and of new leading "
                "size-1 axes (torch gives them new_shape[d + 1] * strides[d + 1]).")
    if got[0] != expected[0]:
        return "shapes are aligned on the right, and -1 keeps the size of the input's axis."
    return None


checks.check_layout("expand_layout", expand_layout, "expand_layout", [
    checks.case("worked example", (3, 1), (1, 1), (2, 3, 4), 2),
    checks.case("worked example, -1 and a leading size-1 axis", (3, 1), (1, 1), (1, -1, 4), 2),
    checks.case("worked example, no new axis", (3, 1), (1, 1), (3, 5)),
    checks.case("a 0-d tensor", (), (), (2, 3), 1),
    checks.case("a 0-d tensor to size-1 axes", (), (), (1, 1)),
    checks.case("to size 0", (1, 4), (4, 1), (0, 4)),
    checks.case("a leading size-0 axis", (2,), (1,), (0, 2)),
    checks.case("size 1 stays 1 (stride kept)", (1, 3), (7, 1), (1, 3)),
    checks.case("-1 everywhere", (2, 3), (1, 2), (-1, -1), offset=6),
    checks.case("two new leading axes of size 1", (2, 3), (3, 1), (1, 1, 2, 3)),
    checks.case("a stride-0 axis already", (4, 1), (0, 1), (4, 5)),
] + expand_cases(13, 30), hints=[expand_hint])
checks.expect_raises("expand_layout", ValueError, expand_layout, (3, 1), (1, 1), (4, 1))
checks.expect_raises("expand_layout", ValueError, expand_layout, (3,), (1,), (-1, 3))
### BEGIN HIDDEN TESTS
checks.check_layout("expand_layout", expand_layout, "expand_layout",
                    expand_cases(113, 60), hints=[expand_hint])
checks.expect_raises("expand_layout", ValueError, expand_layout, (2, 3), (3, 1), (2, 6))
checks.expect_raises("expand_layout", ValueError, expand_layout, (2, 3), (3, 1), (3,))
### END HIDDEN TESTS

# %% [markdown]
# ## 4. `view` or copy: when can a new shape reuse the storage?
#
# `t.view(new_shape)` returns a tensor with the same elements, in the same (row-major) order,
# with another shape, **over the same storage**: it must find strides for `new_shape` that read
# exactly the elements `t` reads, in the same order. `t.reshape(new_shape)` returns such a view
# when one exists and a copy otherwise. When does one exist?
#
# Split `t`'s axes into **chunks**: maximal runs of neighbouring axes that behave like one flat
# axis, because axis $d$ steps exactly over the whole of axis $d + 1$:
#
# $$
# s_d = n_{d+1} \, s_{d+1} .
# $$
#
# A size-1 axis never breaks a chunk (its stride is never used). A chunk of $m$ elements whose
# last axis has stride $b$ reads the storage positions $0, b, 2b, \dots, (m-1) b$ (plus a
# start): it is a flat axis with stride $b$, and it can be cut into any shape with
# $m$ elements, given contiguous strides times $b$. A view therefore exists exactly when the new
# shape can be cut, from the right, into consecutive groups of axes whose element counts equal
# the chunks' counts, one group per chunk (size-1 axes of the new shape may go in any group).
# Each group then gets the strides `contiguous_strides(group)` multiplied by its chunk's base
# stride $b$. A size-1 axis of the new shape is never stepped along, so any stride is right for
# it: torch picks one by a rule of its own, and the checks accept any value there. This is torch's `computeStride`, which `view` calls; when it fails, `view` raises
# `RuntimeError: view size is not compatible with input tensor's size and stride`.
#
# **`-1` inference.** One entry of `new_shape` may be `-1`: it becomes the number of elements
# divided by the product of the other entries. Torch raises when there are two `-1`s, when the
# division is not exact, when the other entries multiply to 0 (then any size would fit), and
# whenever `new_shape` has a different number of elements from `t`. No layout, view or copy, can
# have such a shape, so for all of these we raise `ValueError`; `None` is kept for "a copy would
# work, but not a view".
#
# Two edge cases follow torch: a tensor **with no elements** can always be viewed (the strides
# are its own if the shape does not change, and `contiguous_strides(new_shape)` otherwise), and
# a **0-d** tensor views as any shape of ones (torch gives them strides all 1).
#
# **Worked example.** Let `x` be contiguous with shape $(2, 3, 4)$, strides $(12, 4, 1)$, and
# `y = x.transpose(0, 1)`: shape $(3, 2, 4)$, strides $(4, 12, 1)$. Is $s_1 = n_2 s_2$? $12 \ne 4$.
# Is $s_0 = n_1 s_1$? $4 \ne 24$. So `y` has three chunks: $3$ elements with base stride 4,
# $2$ with base stride 12 and $4$ with base stride 1.
#
# - `y.view(3, 2, 2, 2)`: from the right, $(2, 2)$ has 4 elements, the last chunk: strides
#   $(2, 1) \cdot 1$; then $(2)$ matches the middle chunk: stride 12; then $(3)$: stride 4.
#   Result $(4, 12, 2, 1)$.
# - `y.view(3, 8)`: the group ending on the right must hold 4 elements, but $8 > 4$ would span
#   two chunks: `None` (torch raises; `y.reshape(3, 8)` copies).
# - `y.view(-1, 4)`: $-1 \to 24 / 4 = 6$, and $6$ spans the first two chunks: `None`.
# - `x.view(-1, 4)`: `x` is one chunk of 24 elements (base stride 1): $(4, 1)$.
#
# ### Exercise `view_strides`
#
# Write `view_strides(shape, strides, new_shape)`: the strides of `t.view(new_shape)`, or `None`
# where torch's `view` raises because the layout cannot be viewed in that shape.

# %% nbgrader={"grade": false, "grade_id": "view_strides", "locked": false, "schema_version": 3, "solution": true, "task": false}
def view_strides(shape, strides, new_shape):
    """Strides of t.view(new_shape) for t with this layout, or None where torch's view raises
    (because no strides can walk the storage in that shape: reshape would copy).

    shape, strides : t's layout (strides in elements, non-negative).
    new_shape      : a tuple of ints; one entry may be -1, inferred as torch does.

    Returns a tuple of ints, or None. Raises ValueError when new_shape cannot hold t's
    elements at all: a different number of elements, two -1s, a -1 beside a 0, or a size below -1.
    """
    ### BEGIN SOLUTION
    numel = int(np.prod(shape, dtype=np.int64))
    new_shape = [int(n) for n in new_shape]
    if new_shape.count(-1) > 1 or any(n < -1 for n in new_shape):
        raise ValueError(f"invalid shape {new_shape}")
    known = int(np.prod([n for n in new_shape if n != -1], dtype=np.int64))
    if -1 in new_shape:
        if known == 0 or numel % known != 0:
            raise ValueError(f"cannot infer -1 in {new_shape} for {numel} elements")
        new_shape[new_shape.index(-1)] = numel // known
    if int(np.prod(new_shape, dtype=np.int64)) != numel:
        raise ValueError(f"shape {new_shape} is invalid for input of size {numel}")
    if len(shape) == 0:
        return (1,) * len(new_shape)
    if numel == 0:
        return tuple(int(s) for s in strides) if tuple(shape) == tuple(new_shape) else contiguous_strides(new_shape)
    out = [0] * len(new_shape)
    v = len(new_shape) - 1             # next axis of the new shape to place, from the right
    base = strides[-1]                 # the stride of the current chunk's last axis
    chunk_numel = 1                    # elements of the current chunk so far
    for d in range(len(shape) - 1, -1, -1):
        chunk_numel *= shape[d]
        chunk_ends = d == 0 or (shape[d - 1] != 1 and strides[d - 1] != chunk_numel * base)
        if not chunk_ends:
            continue
        group_numel = 1
        while v >= 0 and (group_numel < chunk_numel or new_shape[v] == 1):
            out[v] = group_numel * base
            group_numel *= new_shape[v]
            v -= 1
        if group_numel != chunk_numel:
            return None
        if d > 0:
            base, chunk_numel = strides[d - 1], 1
    return tuple(int(s) for s in out) if v == -1 else None
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_view_strides", "locked": true, "points": 11, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def new_shape_for(pick, shape):
    """A random shape with as many elements as `shape`: merged or split axes, or a factorisation."""
    numel = int(np.prod(shape))
    kind = pick.integers(0, 3)
    if kind == 0 and len(shape) > 1:  # merge two neighbouring axes
        d = int(pick.integers(0, len(shape) - 1))
        new = list(shape[:d]) + [shape[d] * shape[d + 1]] + list(shape[d + 2:])
    elif kind == 1 and numel > 0:  # cut the elements into random factors
        new, rest = [], numel
        while rest > 1 and len(new) < 3:
            factors = [f for f in range(1, rest + 1) if rest % f == 0]
            f = int(pick.choice(factors))
            new.append(f)
            rest //= f
        new.append(rest)
    else:  # split an axis, and add a size-1 axis somewhere
        new = list(shape)
        d = int(pick.integers(0, len(new) + 1))
        new.insert(d, 1)
        for i, n in enumerate(new):
            if n in (4, 6):
                new[i:i + 1] = [2, n // 2]
                break
    if numel > 0 and new and pick.random() < 0.3:
        new[int(pick.integers(0, len(new)))] = -1
    return tuple(int(n) for n in new)


def used_strides(strides, case):
    """The strides that address elements: those of size-1 axes of the new shape are never used,
    so any value there is right ("any")."""
    if not isinstance(strides, tuple):
        return strides
    shape, _, new_shape = case.args
    numel, known = int(np.prod(shape)), int(np.prod([n for n in new_shape if n != -1]))
    sizes = [numel // known if n == -1 and known else n for n in new_shape]
    if len(strides) != len(sizes):
        return strides
    return tuple("any" if n == 1 else s for s, n in zip(strides, sizes))


def view_cases(seed, n):
    pick = np.random.default_rng(seed)
    return [checks.case(f"random layout #{i}", shape, strides, new_shape_for(pick, shape))
            for i, (shape, strides, _) in enumerate(checks.random_layouts(seed, n))]


def view_hint(got, expected, case):
    if expected is None and got is not None:
        return ("torch's view raises here: the new shape would have to walk across two chunks of axes that are not "
                "laid out one after the other. Check s[d] == shape[d + 1] * s[d + 1] between neighbouring axes.")
    if expected is not None and got is None:
        shape = case.args[0]
        if 1 in shape:
            return "size-1 axes never break a chunk: their stride is never used."
        return "torch finds a view here: each chunk of axes can be cut into any shape with the same number of elements."
    if isinstance(got, tuple) and len(got) != len(expected):
        return "one stride per axis of the new shape (after replacing -1 by the inferred size)."
    return "each group of new axes gets contiguous strides times the base stride of its chunk (the stride of its last axis)."


checks.check_layout("view_strides", view_strides, "view_strides", [
    checks.case("worked example: y.view(3, 2, 2, 2)", (3, 2, 4), (4, 12, 1), (3, 2, 2, 2)),
    checks.case("worked example: y.view(3, 8)", (3, 2, 4), (4, 12, 1), (3, 8)),
    checks.case("worked example: y.view(-1, 4)", (3, 2, 4), (4, 12, 1), (-1, 4)),
    checks.case("worked example: x.view(-1, 4)", (2, 3, 4), (12, 4, 1), (-1, 4)),
    checks.case("flatten a transpose", (3, 2), (1, 3), (6,)),
    checks.case("a slice x[::2] split into (2, 2, 2)", (2, 4), (8, 1), (2, 2, 2)),
    checks.case("a slice x[:, 1:] flattened", (3, 3), (4, 1), (9,)),
    checks.case("a size-1 axis with an odd stride", (2, 1, 3), (3, 100, 1), (6,)),
    checks.case("a size-1 last axis", (3, 1), (1, 100), (3,)),
    checks.case("an expanded axis split", (4, 3), (0, 1), (2, 2, 3)),
    checks.case("an expanded axis merged", (4, 3), (0, 1), (12,)),
    checks.case("add size-1 axes", (2, 3), (1, 2), (1, 2, 1, 3, 1)),
    checks.case("-1 in the middle", (2, 3, 4), (12, 4, 1), (2, -1, 2)),
    checks.case("-1 alone", (4, 3), (3, 1), (-1,)),
    checks.case("no elements, same shape", (2, 0, 3), (1, 5, 7), (2, 0, 3)),
    checks.case("no elements, new shape", (2, 0, 3), (1, 5, 7), (0, 6)),
    checks.case("0-d to (1, 1)", (), (), (1, 1)),
    checks.case("to 0-d", (1, 1), (5, 9), ()),
] + view_cases(15, 40), hints=[view_hint], normalize=used_strides)
checks.expect_raises("view_strides", ValueError, view_strides, (2, 3), (3, 1), (4, 2))
checks.expect_raises("view_strides", ValueError, view_strides, (2, 3), (3, 1), (-1, -1))
checks.expect_raises("view_strides", ValueError, view_strides, (2, 3), (3, 1), (-1, 4))
checks.expect_raises("view_strides", ValueError, view_strides, (2, 0), (1, 1), (0, -1))
### BEGIN HIDDEN TESTS
checks.check_layout("view_strides", view_strides, "view_strides", view_cases(115, 100), hints=[view_hint],
                    normalize=used_strides)
checks.expect_raises("view_strides", ValueError, view_strides, (3, 2), (1, 3), (7,))
checks.expect_raises("view_strides", ValueError, view_strides, (4,), (1,), (2, -3))
### END HIDDEN TESTS

# %% [markdown]
# ### Concept check `view_or_copy`
#
# Let `x = torch.arange(12.).reshape(3, 4)`. For each call, does the result share `x`'s storage
# (a view) or not (a copy)? Decide from the chunk rule, then set each variable to `True` (view)
# or `False` (copy).
#
# - `shares_a`: `x.t().reshape(12)`
# - `shares_b`: `x[1:].reshape(8)`
# - `shares_c`: `x.t().contiguous()`
# - `shares_d`: `x[::2].reshape(2, 2, 2)`

# %% nbgrader={"grade": false, "grade_id": "view_or_copy", "locked": false, "schema_version": 3, "solution": true, "task": false}
shares_a = None  # x.t().reshape(12)
shares_b = None  # x[1:].reshape(8)
shares_c = None  # x.t().contiguous()
shares_d = None  # x[::2].reshape(2, 2, 2)
### BEGIN SOLUTION
shares_a = False  # x.t() has strides (1, 4): two chunks, 12 elements span both: a copy
shares_b = True   # x[1:] is one chunk of 8 elements (offset 4)
shares_c = False  # contiguous() of a non-contiguous tensor copies
shares_d = True   # x[::2] has strides (8, 1): the chunk of 4 splits into (2, 2) with strides (2, 1)
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test_view_or_copy", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
digests = {"shares_a": "60a33e6cf5151f2d52eddae9685cfa270426aa89d8dbc7dfb854606f1d1a40fe",
           "shares_b": "3cbc87c7681f34db4617feaa2c8801931bc5e42d8d0f560e756dd4cd92885f18",
           "shares_c": "60a33e6cf5151f2d52eddae9685cfa270426aa89d8dbc7dfb854606f1d1a40fe",
           "shares_d": "3cbc87c7681f34db4617feaa2c8801931bc5e42d8d0f560e756dd4cd92885f18"}
for name, got in [("shares_a", shares_a), ("shares_b", shares_b), ("shares_c", shares_c), ("shares_d", shares_d)]:
    checks.check_hash("view_or_copy", name, got, digests[name],
                      hint="write down the strides of the tensor before the reshape, find its chunks, and see whether "
                           "the new shape cuts along chunk boundaries; contiguous() copies whenever it changes anything.")
### BEGIN HIDDEN TESTS
from autograder.outside.oracles import ORACLES
x = torch.arange(12.).reshape(3, 4)
for name, got, result in [("shares_a", shares_a, x.t().reshape(12)), ("shares_b", shares_b, x[1:].reshape(8)),
                          ("shares_c", shares_c, x.t().contiguous()), ("shares_d", shares_d, x[::2].reshape(2, 2, 2))]:
    # where the stored digests come from: what torch reports
    assert digests[name] == checks.answer_digest(bool(ORACLES["shares_storage"](x, result)))
    checks.check_value("view_or_copy", name, got, ORACLES["shares_storage"](x, result))
### END HIDDEN TESTS

# %% [markdown]
# ## 5. Reading through a layout
#
# The three numbers are all it takes to read a tensor. For every index $i$ of the shape we read
# `storage[pos(i)]`, with $\operatorname{pos}(i) = o + \sum_d i_d s_d$ from part 1. This is
# `torch.as_strided(storage, shape, strides, offset)`, followed by a copy into a fresh
# contiguous array. In NumPy we can build every position at once by broadcasting: start from
# the 0-d array `offset`, and for each axis $d$ add `np.arange(n_d) * s_d` along a new last axis.
# After the last axis, `positions` has the shape of the result, and one fancy index
# `storage[positions]` gathers all the elements.
#
# Every position must lie inside the storage, $0 \le \operatorname{pos}(i) <$ `storage.size`;
# otherwise we raise `ValueError` (torch refuses too). Beware: NumPy reads a negative index from
# the end of the array, so a position of $-1$ would silently read the last element, and a
# position past the end raises `IndexError`: we must test the bounds ourselves. Strides may be 0
# (an expanded axis reads one element many times) or negative, which NumPy allows (`a[::-1]`)
# but torch does not: `torch.as_strided` rejects negative strides, so for those cases the checks
# compare with NumPy's `np.lib.stride_tricks.as_strided` instead. The result keeps the storage's
# dtype.
#
# **Worked example.** `storage = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19]`, shape $(2, 3)$,
# strides $(1, 2)$, offset 1. Positions: `1 + [[0], [1]] + [[0, 2, 4]]` $=$
# `[[1, 3, 5], [2, 4, 6]]`, so the result is `[[11, 13, 15], [12, 14, 16]]`: the transpose of a
# $(3, 2)$ tensor that starts at position 1. With strides $(-1, 2)$ and the same offset, the
# positions are `[[1, 3, 5], [0, 2, 4]]`. With strides $(0, 1)$ and offset 7, both rows read
# `[17, 18, 19]`. Shape $(2, 3)$, strides $(3, 1)$, offset 5 needs position $5 + 3 + 2 = 10$:
# out of bounds.
#
# ### Exercise `read_through_layout`

# %% nbgrader={"grade": false, "grade_id": "read_through_layout", "locked": false, "schema_version": 3, "solution": true, "task": false}
def read_through_layout(storage, shape, strides, offset):
    """The dense array that (shape, strides, offset) describes over a 1-D storage.

    Like torch.as_strided(storage, shape, strides, offset) followed by a copy: element i of the
    result is storage[offset + sum(i[d] * strides[d])]. Strides may be 0 or negative.

    storage : a 1-D NumPy array.
    Returns a new array of the given shape with the storage's dtype. Raises ValueError when a
    position to be read lies outside [0, storage.size).
    """
    ### BEGIN SOLUTION
    storage = np.asarray(storage)
    positions = np.asarray(offset, dtype=np.int64)
    for size, stride in zip(shape, strides):
        positions = positions[..., None] + np.arange(size, dtype=np.int64) * stride
    if positions.size and (positions.min() < 0 or positions.max() >= storage.size):
        raise ValueError(f"the layout reads positions {positions.min()}..{positions.max()}, "
                         f"outside a storage of {storage.size} elements")
    return storage[positions]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_read_through_layout", "locked": true, "points": 5, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def read_cases(seed, n, negative=False, dtype=np.float64):
    """Random layouts over a random storage just large enough (and a few elements more)."""
    pick = np.random.default_rng(seed)
    out = []
    for i, (shape, strides, offset) in enumerate(checks.random_layouts(seed, n, negative=negative)):
        low = offset + sum((size - 1) * s for size, s in zip(shape, strides) if s < 0 and size > 0)
        offset -= min(low, 0)  # negative strides: start late enough that nothing is read before 0
        high = offset + sum((size - 1) * s for size, s in zip(shape, strides) if s > 0 and size > 0)
        storage = checks.randn(seed * 100 + i, high + 1 + int(pick.integers(0, 4)), dtype=dtype)
        out.append(checks.case(f"random layout #{i}", storage, shape, strides, offset))
    return out


storage = np.arange(10.0, 20.0)
checks.against_torch("read_through_layout", read_through_layout, "read_through_layout", [
    checks.case("worked example", storage, (2, 3), (1, 2), 1),
    checks.case("worked example, a negative stride (NumPy)", storage, (2, 3), (-1, 2), 1),
    checks.case("worked example, a stride 0", storage, (2, 3), (0, 1), 7),
    checks.case("float32", storage.astype(np.float32), (3, 2), (2, 1), 3),
    checks.case("int64", np.arange(10), (2, 2), (1, 5), 0),
    checks.case("0-d", storage, (), (), 4),
    checks.case("no elements", storage, (0, 3), (3, 1), 2),
    checks.case("sliding windows", storage, (8, 3), (1, 1), 0),
] + read_cases(16, 25) + read_cases(17, 5, dtype=np.float32) + read_cases(18, 10, negative=True))
checks.expect_raises("read_through_layout", ValueError, read_through_layout, storage, (2, 3), (3, 1), 5)
checks.expect_raises("read_through_layout", ValueError, read_through_layout, storage, (3,), (-1,), 1)
fresh = checks.run_student("read_through_layout", read_through_layout, storage, (2, 3), (1, 2), 1)
if np.shares_memory(fresh, storage):
    raise checks.CheckFailure("[read_through_layout] case 'worked example': the result is a view of the storage; "
                              "return a new array (torch.as_strided followed by a copy), so that writing to it "
                              "cannot change the storage.")
### BEGIN HIDDEN TESTS
checks.against_torch("read_through_layout", read_through_layout, "read_through_layout",
                     read_cases(116, 40) + read_cases(117, 10, dtype=np.float32) + read_cases(118, 20, negative=True))
checks.expect_raises("read_through_layout", ValueError, read_through_layout, np.arange(6.0), (2, 2), (0, 3), 3)
checks.expect_raises("read_through_layout", ValueError, read_through_layout, np.arange(6.0), (2,), (-2,), 1)
### END HIDDEN TESTS

# %% [markdown]
# ### Chains of views
#
# Because each layout function takes the offset of its input and returns the offset of its
# output, we can compose them, exactly as torch composes views: a permute of a slice of an expand
# of a slice is four calls, and the offset picked up by each slice is carried through the others.
# The second test cell of `read_through_layout` builds such chains with our functions and reads
# the result through the storage; torch does the same chain on a real tensor with `as_strided`,
# `expand`, slicing, `permute` and `transpose`, and the values (and the layout numbers) must be
# equal.
#
# **Worked example.** Start from positions 7.. of a storage, shape $(3, 1, 5)$ contiguous: strides
# $(5, 5, 1)$, offset 7. `expand(2, 3, 4, 5)`: strides $(0, 5, 0, 1)$. Slice dim 3 from 1 with
# step 2: shape $(2, 3, 4, 2)$, strides $(0, 5, 0, 2)$, offset $7 + 1 = 8$. `permute(3, 0, 2, 1)`:
# shape $(2, 2, 4, 3)$, strides $(2, 0, 0, 5)$, offset 8. Slice dim 0 from 1: shape $(1, 2, 4, 3)$,
# offset $8 + 2 = 10$. The element at index $(0, 1, 3, 2)$ reads position $10 + 0 + 0 + 10 = 20$.

# %% nbgrader={"grade": true, "grade_id": "test_read_through_layout_chain", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
from autograder.outside.oracles import ORACLES


def chain_layout(shape, strides, offset, ops):
    """The layout after the chain of views `ops`, from our layout functions."""
    layout_ops = {"transpose": transpose_layout, "permute": permute_layout, "expand": expand_layout}
    for name, args in ops:
        if name == "slice":
            shape, strides, offset = slice_layout(shape, strides, offset, *args)
        else:
            shape, strides, offset = layout_ops[name](shape, strides, *args, offset)
    return shape, strides, offset


def chain_values(storage, shape, strides, offset, ops):
    return read_through_layout(storage, *chain_layout(shape, strides, offset, ops))


def random_chain(pick, shape, strides, offset, length):
    """A random chain of valid views (expand, slice, permute, transpose) starting from a layout."""
    ops = []
    layout = (shape, strides, offset)
    for _ in range(length):
        shape = layout[0]
        kind = str(pick.choice(["expand", "slice", "permute", "transpose"] if shape else ["expand"]))
        if kind == "expand":
            args = (tuple([int(pick.integers(1, 3))] + [int(pick.integers(0, 4)) if n == 1 else -1 for n in shape]),)
        elif kind == "slice":
            d = int(pick.integers(0, len(shape)))
            args = (d, int(pick.integers(-shape[d] - 1, shape[d] + 1)), None, int(pick.integers(1, 3)))
        elif kind == "permute":
            args = (tuple(int(d) for d in pick.permutation(len(shape))),)
        else:
            args = tuple(int(d) for d in pick.integers(-len(shape), len(shape), size=2))
        ops.append((kind, args))
        oracle = ORACLES[f"{kind}_layout"]
        layout = oracle(*layout, *args) if kind == "slice" else oracle(layout[0], layout[1], *args, layout[2])
    return ops


def chain_cases(seed, n):
    pick = np.random.default_rng(seed)
    out = []
    for i, (shape, _, offset) in enumerate(checks.random_layouts(seed, n, max_ndim=3)):
        strides = ORACLES["contiguous_strides"](shape)
        ops = random_chain(pick, shape, strides, offset, int(pick.integers(2, 5)))
        storage = checks.randn(seed * 100 + i, offset + max(1, int(np.prod(shape))) + 2)
        out.append(checks.case(f"random chain #{i}", storage, shape, strides, offset, ops))
    return out


worked = [("expand", ((2, 3, 4, 5),)), ("slice", (3, 1, None, 2)), ("permute", ((3, 0, 2, 1),)),
          ("slice", (0, 1, None, None))]
cases = [checks.case("worked example", np.arange(30.0), (3, 1, 5), (5, 5, 1), 7, worked),
         checks.case("a permute of a slice of an expand, then a transpose", np.arange(40.0), (4, 1, 3), (3, 3, 1), 2,
                     [("expand", ((2, 4, 5, 3),)), ("slice", (1, 1, None, 2)), ("permute", ((2, 0, 3, 1),)),
                      ("transpose", (0, -1))])] + chain_cases(19, 15)


def check_chains(cases):
    """The layout numbers at the end of each chain, then the values read through them."""
    checks.check_layout("read_through_layout", chain_layout, "chain_layout", [checks.case(c.label, *c.args[1:]) for c in cases])
    checks.against_torch("read_through_layout", chain_values, "chain_values", cases)


check_chains(cases)
### BEGIN HIDDEN TESTS
check_chains(chain_cases(119, 40))
### END HIDDEN TESTS

# %% [markdown]
# ## 6. Asking torch: shared storage, and assertions about views
#
# In this part, and only here, torch is the point: we write the tests that a careful engineer
# puts around code that relies on views, in torch itself. (The checks know this: for these two
# exercises they let the solution call torch.)
#
# **Shared storage.** Two tensors are views of one another when they read the same storage.
# Every tensor can give us its storage with `t.untyped_storage()`, and the storage's
# `.data_ptr()` is the address of its first byte. Comparing those addresses is the test.
# Two tempting shortcuts are wrong:
#
# - `t.data_ptr()` is the address of the tensor's **first element**, `storage start + offset`:
#   `x[1:]` starts one element later than `x`, although it is a view of `x`;
# - overlap of memory (`np.shares_memory`) is not sharing a storage: `x[:2]` and `x[2:]` read
#   disjoint parts of one storage, and writing through one never shows in the other, yet both
#   keep the same storage alive and both are views of `x`.
#
# A tensor with no elements may own no memory at all: its storage address is 0 (a null
# pointer), and two such tensors share nothing.
#
# **Worked example.** `x = torch.arange(6.)` is float32, 4 bytes an element:
# `x[2:].data_ptr() - x.data_ptr()` is 8, yet
# `x[2:].untyped_storage().data_ptr() == x.untyped_storage().data_ptr()`, so `x[2:]` is a view
# of `x`. `x.clone()` has a storage of its own. For `torch.empty(0)` twice, both storage
# addresses are 0, and we answer `False`.

# %% nbgrader={"grade": false, "grade_id": "storage_pointer_demo", "locked": true, "schema_version": 3, "solution": false, "task": false}
x = torch.arange(6.0)
print("x[2:].data_ptr() - x.data_ptr() =", x[2:].data_ptr() - x.data_ptr(), "bytes (2 float32 elements)")
print("same storage address:", x[2:].untyped_storage().data_ptr() == x.untyped_storage().data_ptr())
print("a clone's storage address differs:", x.clone().untyped_storage().data_ptr() != x.untyped_storage().data_ptr())
print("storage address of an empty tensor:", torch.empty(0).untyped_storage().data_ptr())

# %% [markdown]
# ### Exercise `shares_storage`
#
# Write `shares_storage(t1, t2)` in torch.

# %% nbgrader={"grade": false, "grade_id": "shares_storage", "locked": false, "schema_version": 3, "solution": true, "task": false}
def shares_storage(t1, t2):
    """Whether two torch tensors are views of the same storage (a torch exercise).

    Compares the addresses of the tensors' whole storages, t.untyped_storage().data_ptr(), not
    the addresses of their first elements (t.data_ptr()), so that a view starting later in the
    storage still counts. A storage without memory (address 0) is shared with nothing.

    Returns a bool.
    """
    ### BEGIN SOLUTION
    p1, p2 = t1.untyped_storage().data_ptr(), t2.untyped_storage().data_ptr()
    return p1 == p2 and p1 != 0
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_shares_storage", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def pointer_hint(got, expected, case):
    t1, t2 = case.args
    if expected and not got and t1.data_ptr() != t2.data_ptr():
        return ("these views start at different elements of one storage: compare untyped_storage().data_ptr(), "
                "not data_ptr() (the address of the first element).")
    if not expected and got and t1.untyped_storage().data_ptr() == 0:
        return "tensors with no memory have storage address 0: they share nothing."
    return None


def pair_cases(x, label):
    """Pairs with x: views (sharing) and copies (not), each with its own label."""
    y = torch.zeros_like(x)
    return [
        checks.case(f"{label}: x and itself", x, x),
        checks.case(f"{label}: x and x[1:] (a view at offset 1)", x, x[1:]),
        checks.case(f"{label}: x[:1] and x[1:] (disjoint views)", x[:1], x[1:]),
        checks.case(f"{label}: x and x.t()", x, x.t()),
        checks.case(f"{label}: x and x.clone()", x, x.clone()),
        checks.case(f"{label}: x and another tensor of the same values", x, y + x),
        checks.case(f"{label}: x[1:] and x.view(-1)[2:]", x[1:], x.view(-1)[2:]),
        checks.case(f"{label}: x[:, None].expand(...) and x", x[:, None].expand(x.shape[0], 3, *x.shape[1:]), x),
        checks.case(f"{label}: x.contiguous() and x", x.contiguous(), x),
    ]


a = torch.arange(12.0).reshape(3, 4)
checks.check_layout("shares_storage", shares_storage, "shares_storage", pair_cases(a, "3x4") + [
    checks.case("a transposed copy", a, a.t().contiguous()),
    checks.case("a reshape that copies", a, a.t().reshape(12)),
    checks.case("a reshape that views", a, a.reshape(2, 6)),
    checks.case("two empty tensors", torch.empty(0), torch.empty(0)),
    checks.case("an empty slice of x", a, a[3:]),
], numpy_only=False, hints=[pointer_hint])
### BEGIN HIDDEN TESTS
b = torch.randn(5, 2, dtype=torch.float64)
more = [checks.case("a 0-d view", b, b[2, 1]),
        checks.case("two different empty tensors", torch.zeros(0, 3), torch.empty(0)),
        checks.case("a view of a view", b[1:][::2], b[3:])]
checks.check_layout("shares_storage", shares_storage, "shares_storage", pair_cases(b, "5x2 float64") + more,
                    numpy_only=False, hints=[pointer_hint])
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise `assert_view`
#
# Tests of layout code assert three things about a view: it shares its base's storage (it is
# not a copy), and its shape, strides and storage offset are exactly the numbers we predicted.
# `assert_view(base, view, shape, strides, offset)` asserts all of them, each with a message
# that says which one failed, and returns `None` when they hold. We may call `shares_storage`.
# The test cell uses it for a slice, a transpose and an expand, with the numbers torch
# reports, and checks that it raises `AssertionError` for a copy and for wrong numbers.
#
# **Worked example.** `x = torch.zeros(3, 4)`: `assert_view(x, x[:, 1::2], (3, 2), (4, 2), 1)`
# passes; `assert_view(x, x.t(), (4, 3), (1, 4), 0)` passes;
# `assert_view(x, x[:1].expand(5, 4), (5, 4), (0, 1), 0)` passes. But
# `assert_view(x, x.t().contiguous(), (4, 3), (3, 1), 0)` raises (a copy, with right numbers for
# it), and so does `assert_view(x, x[1:], (2, 4), (4, 1), 0)` (the offset is 4).

# %% nbgrader={"grade": false, "grade_id": "assert_view", "locked": false, "schema_version": 3, "solution": true, "task": false}
def assert_view(base, view, shape, strides, offset):
    """Assert that the torch tensor `view` is a view of `base` with exactly this layout (a torch
    exercise).

    Raises AssertionError, with a message naming what differs, unless `view` shares `base`'s
    storage and tuple(view.shape), view.stride() and view.storage_offset() equal shape, strides
    and offset. Returns None when everything holds.
    """
    ### BEGIN SOLUTION
    assert shares_storage(base, view), "the tensor is a copy: it does not share the base's storage"
    assert tuple(view.shape) == tuple(shape), f"shape {tuple(view.shape)}, expected {tuple(shape)}"
    assert tuple(view.stride()) == tuple(strides), f"strides {tuple(view.stride())}, expected {tuple(strides)}"
    assert view.storage_offset() == offset, f"storage offset {view.storage_offset()}, expected {offset}"
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_assert_view", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
from autograder.outside.oracles import ORACLES
def views_of(x):
    """A slice, a transpose and an expand of x, each with the layout numbers torch reports."""
    layout = (tuple(x.shape), x.stride(), x.storage_offset())
    return [
        ("a slice x[:, 1::2]", x[:, 1::2], ORACLES["slice_layout"](*layout, 1, 1, None, 2)),
        ("a slice x[1:]", x[1:], ORACLES["slice_layout"](*layout, 0, 1, None, None)),
        ("a transpose", x.t(), ORACLES["transpose_layout"](*layout[:2], 0, 1, layout[2])),
        ("an expand x[:1].expand(5, -1)", x[:1].expand(5, -1),
         ORACLES["expand_layout"](*ORACLES["slice_layout"](*layout, 0, 0, 1, None)[:2], (5, -1),
                                  ORACLES["slice_layout"](*layout, 0, 0, 1, None)[2])),
    ]


def check_assert_view(x, label, seed):
    """Each view of x with its right numbers (must pass), and each wrong case (must raise), in an order drawn
    from ``seed``, each call with a tensor of its own: an assert_view that took the first numbers it saw for
    a tensor as right, and checked later calls against them, would pass (red team, stop 40)."""
    for name, view, (shape, strides, offset) in views_of(x):
        def same():  # a new tensor with the view's layout
            return torch.as_strided(x, view.size(), view.stride(), view.storage_offset())
        copy = torch.zeros(x.untyped_storage().nbytes() // x.element_size(), dtype=x.dtype)
        cases = [("the right numbers", same(), shape, strides, offset),
                 ("a copy with the same layout numbers", torch.as_strided(copy, shape, strides, offset),
                  shape, strides, offset),
                 ("wrong strides", same(), shape, tuple(s + 1 for s in strides), offset),
                 ("a wrong offset", same(), shape, strides, offset + 1),
                 ("a wrong shape", same(), tuple(shape)[::-1] if len(set(shape)) > 1 else tuple(shape) + (1,),
                  strides, offset)]
        for i in np.random.default_rng(seed).permutation(len(cases)):
            what, v, sh, st, off = cases[i]
            if i == 0:
                try:
                    checks.run_student("assert_view", assert_view, x, v, sh, st, off, numpy_only=False)
                except checks.CheckFailure as failure:
                    raise checks.CheckFailure(f"[assert_view] {label}, {name}: assert_view(x, view, {shape}, {strides}, "
                                              f"{offset}) must pass, but: {failure}") from None
                continue
            try:
                error = checks.expect_raises("assert_view", AssertionError, assert_view, x, v, sh, st, off,
                                             numpy_only=False)
            except checks.CheckFailure as failure:
                raise checks.CheckFailure(f"[assert_view] {label}, {name} with {what}: assert_view must raise "
                                          f"AssertionError, but: {failure}") from None
            if not str(error).strip():
                raise checks.CheckFailure(f"[assert_view] {label}, {name} with {what}: the AssertionError has no "
                                          "message; say what differs (assert condition, message).")
        seed += 1


check_assert_view(torch.zeros(3, 4), "x = torch.zeros(3, 4)", 0)
check_assert_view(torch.arange(30.0)[6:].view(4, 6), "x = torch.arange(30.)[6:].view(4, 6) (offset 6)", 10)
### BEGIN HIDDEN TESTS
check_assert_view(torch.randn(6, 5, dtype=torch.float64)[1:, ::2], "x = a strided float64 slice", checks.student_seed(61))
check_assert_view(torch.zeros(4, 1), "x = torch.zeros(4, 1)", checks.student_seed(62))
### END HIDDEN TESTS

# %% [markdown]
# ## 7. Views in the autodiff engine, and layout invariance
#
# Our engine from units 1.3 and 1.4 works on NumPy arrays, and NumPy arrays have layouts too:
# `x.T` and `x[:, ::2]` are views with other strides. Two facts make view operations easy to add
# to the engine:
#
# - **Forward is a view.** `np.swapaxes`, basic slicing and `np.broadcast_to` return views, with
#   exactly the layouts of part 3 (in bytes). Like torch, our ops return them instead of copies.
# - **Backward is the adjoint of the view.** A view only moves elements around, so the gradient
#   of each input element is the sum of the output gradients at the places where that element
#   shows up:
#   - transpose: element $(i, j)$ of the input is element $(j, i)$ of the output, so the gradient
#     is `grad` with the same two axes swapped back;
#   - slice: elements that the slice skips get gradient 0, the others get theirs:
#     `g = np.zeros(input shape)`, then `g[index] += grad`;
#   - expand: an element read $k$ times (stride 0) receives the sum of its $k$ gradients, so
#     the gradient is `grad` summed over the expanded axes. This is `unbroadcast` from unit 1.4
#     (`# adjoint of broadcast is sum`).
#
# Then comes the property that we test at the end: **layout invariance**. A gradient is a
# mathematical object, a function of the input *values*; the engine must give the same
# gradients whether an input array is contiguous, transposed or sliced. The check compares the
# gradients for non-contiguous inputs with those for contiguous copies (`np.ascontiguousarray`),
# in float64 and float32. The numbers need not be bit-equal: a matrix product may add the same
# terms in another order when an operand is transposed, which changes float32 results by an ulp
# or so ($\varepsilon_{32} \approx 1.2 \times 10^{-7}$), so we allow a relative difference of
# $10^{-6}$ in float32 and $10^{-12}$ in float64.
#
# The engine below is given (locked): `Tensor`, `Function`, `backward` and the ops `Add`, `Mul`,
# `MatMul`, `Sum` and `Tanh`, with `unbroadcast`. `backward` stores the first gradient of each
# tensor as a fresh copy before adding (`+=`) the next ones into it: a backward may return a
# read-only view (`np.broadcast_to`, whose stride is 0), and `+=` must not write through a view.
# `Tensor.transpose`, `Tensor.expand` and `t[...]` (slices only) call the classes we write.

# %% nbgrader={"grade": false, "grade_id": "engine", "locked": true, "schema_version": 3, "solution": false, "task": false}
def unbroadcast(grad, shape):
    """Sum `grad` down to `shape`: the adjoint of broadcasting (unit 1.4)."""
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    for d, n in enumerate(shape):
        if n == 1 and grad.shape[d] != 1:
            grad = grad.sum(axis=d, keepdims=True)
    return grad


class Context:
    """What one forward call keeps for its backward call."""

    def __init__(self):
        self.saved_tensors = ()

    def save_for_backward(self, *values):
        self.saved_tensors = values


class Function:
    """An op: forward(ctx, *arrays, **options) -> array; backward(ctx, grad) -> one gradient per input."""

    @classmethod
    def apply(cls, *inputs, **options):
        inputs = tuple(t if isinstance(t, Tensor) else Tensor(t) for t in inputs)
        ctx = Context()
        out = Tensor(cls.forward(ctx, *[t.data for t in inputs], **options))
        if any(t.requires_grad for t in inputs):
            out.requires_grad, out.fn, out.ctx, out.inputs = True, cls, ctx, inputs
        return out


class Tensor:
    """A NumPy array (kept with its layout: no copy is made) that remembers how it was computed."""

    __array_ufunc__ = None

    def __init__(self, data, requires_grad=False):
        self.data = np.asarray(data, dtype=None if np.issubdtype(np.asarray(data).dtype, np.floating) else np.float64)
        self.requires_grad = bool(requires_grad)
        self.grad, self.fn, self.ctx, self.inputs = None, None, None, ()

    @property
    def shape(self):
        return self.data.shape

    def __add__(self, other):
        return Add.apply(self, other)

    def __mul__(self, other):
        return Mul.apply(self, other)

    def __matmul__(self, other):
        return MatMul.apply(self, other)

    def sum(self):
        return Sum.apply(self)

    def tanh(self):
        return Tanh.apply(self)

    def transpose(self, dim0, dim1):
        return Transpose.apply(self, dim0=dim0, dim1=dim1)  # the class of Exercise `view_ops`

    def expand(self, *shape):
        return Expand.apply(self, shape=shape)

    def __getitem__(self, index):
        """Basic slicing only: one Slice per sliced axis, e.g. t[1:, ::2]."""
        out = self
        for dim, s in enumerate(index if isinstance(index, tuple) else (index,)):
            if s != slice(None):
                out = Slice.apply(out, dim=dim, start=s.start, stop=s.stop, step=s.step)
        return out

    def backward(self):
        backward(self)


def backward(root):
    """Reverse accumulation from a scalar root: each gradient is summed (+=) into its input's."""
    order, visited, todo = [], set(), [(root, False)]
    while todo:
        node, done = todo.pop()
        if done:
            order.append(node)
        elif id(node) not in visited:
            visited.add(id(node))
            todo.append((node, True))
            todo.extend((t, False) for t in node.inputs)
    grads = {id(root): np.ones_like(root.data)}
    for node in reversed(order):
        upstream = grads.pop(id(node), None)
        if upstream is None:
            continue
        if node.fn is None:
            node.grad = upstream if node.grad is None else node.grad + upstream
            continue
        for t, g in zip(node.inputs, node.fn.backward(node.ctx, upstream)):
            if t.requires_grad and g is not None:
                if id(t) in grads:
                    grads[id(t)] += g
                else:
                    grads[id(t)] = np.array(g, dtype=t.data.dtype)  # a fresh copy: g may be a view


class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a.shape, b.shape)
        return a + b

    @staticmethod
    def backward(ctx, grad):
        a_shape, b_shape = ctx.saved_tensors
        # adjoint of broadcast is sum
        return unbroadcast(grad, a_shape), unbroadcast(grad, b_shape)


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        da, db = grad * b, grad * a
        # adjoint of broadcast is sum
        return unbroadcast(da, a.shape), unbroadcast(db, b.shape)


class MatMul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad @ b.T, a.T @ grad


class Sum(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(np.shape(a))
        return a.sum()

    @staticmethod
    def backward(ctx, grad):
        (shape,) = ctx.saved_tensors
        return (np.broadcast_to(grad, shape),)  # an expand: every element gets the same gradient


class Tanh(Function):
    @staticmethod
    def forward(ctx, a):
        out = np.tanh(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return (grad * (1 - out * out),)


# %% [markdown]
# **Worked example.** $a = \begin{pmatrix} 1 & 2 & 3 \\ 4 & 5 & 6 \end{pmatrix}$ and upstream
# gradients of the matching output shapes:
#
# - `Transpose` (dims 0, 1): output $a^\top$ of shape $(3, 2)$; for
#   $\bar y = \begin{pmatrix} 1 & 2 \\ 3 & 4 \\ 5 & 6 \end{pmatrix}$ the input gradient is
#   $\bar y^\top = \begin{pmatrix} 1 & 3 & 5 \\ 2 & 4 & 6 \end{pmatrix}$.
# - `Slice` (dim 1, start 0, step 2): output columns 0 and 2, shape $(2, 2)$; for
#   $\bar y = \begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}$ the input gradient is
#   $\begin{pmatrix} 1 & 0 & 2 \\ 3 & 0 & 4 \end{pmatrix}$.
# - `Expand` of $b = (1, 2, 3)$, shape $(3,)$, to $(2, 3)$: rows equal to $b$; for
#   $\bar y = \begin{pmatrix} 1 & 2 & 3 \\ 4 & 5 & 6 \end{pmatrix}$ the gradient is the column
#   sums $(5, 7, 9)$.
#
# ### Exercise `view_ops`
#
# Write the three classes. Each forward returns a **view** of its input (no copy), and each
# backward returns a one-element tuple holding the input's gradient, of the input's shape (the
# engine's `backward` pairs the returned tuple with the op's inputs).

# %% nbgrader={"grade": false, "grade_id": "view_ops", "locked": false, "schema_version": 3, "solution": true, "task": false}
class Transpose(Function):
    """a.transpose(dim0, dim1): a view with two axes swapped (keyword options dim0, dim1)."""

    @staticmethod
    def forward(ctx, a, *, dim0, dim1):
        ### BEGIN SOLUTION
        ctx.dims = (dim0, dim1)
        return np.swapaxes(a, dim0, dim1)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        return (np.swapaxes(grad, *ctx.dims),)
        ### END SOLUTION


class Slice(Function):
    """a[..., start:stop:step] along axis `dim`: a view (keyword options dim, start, stop, step;
    Python's slice rules, positive step)."""

    @staticmethod
    def forward(ctx, a, *, dim, start=None, stop=None, step=None):
        ### BEGIN SOLUTION
        index = (slice(None),) * (dim % a.ndim) + (slice(start, stop, step),)
        ctx.save_for_backward(a.shape)
        ctx.index = index
        return a[index]
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        (shape,) = ctx.saved_tensors
        g = np.zeros(shape, dtype=grad.dtype)
        g[ctx.index] += grad
        return (g,)
        ### END SOLUTION


class Expand(Function):
    """a.expand(shape): a view in which size-1 axes (and new leading axes) are repeated with
    stride 0; -1 keeps an axis's size (keyword option shape, a tuple)."""

    @staticmethod
    def forward(ctx, a, *, shape):
        ### BEGIN SOLUTION
        extra = len(shape) - a.ndim
        shape = tuple(a.shape[d - extra] if n == -1 else n for d, n in enumerate(shape))
        ctx.save_for_backward(a.shape)
        return np.broadcast_to(a, shape)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        ### BEGIN SOLUTION
        (shape,) = ctx.saved_tensors
        # adjoint of broadcast is sum
        return (unbroadcast(grad, shape),)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_view_ops", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
def view_op_cases(seed, dtype=np.float64):
    a = checks.randn(seed, 2, 3, dtype=dtype)
    b = checks.randn(seed + 1, 3, 1, 4, dtype=dtype)
    return {
        "transpose": [checks.case("worked example", np.array([[1.0, 2, 3], [4, 5, 6]], dtype=dtype), dim0=0, dim1=1),
                      checks.case("3-D, negative dims", b, dim0=-1, dim1=0),
                      checks.case("a dim with itself", a, dim0=1, dim1=1),
                      checks.case("a transposed input", checks.randn(seed + 2, 4, 3, dtype=dtype).T, dim0=0, dim1=1)],
        "slice": [checks.case("worked example", np.array([[1.0, 2, 3], [4, 5, 6]], dtype=dtype), dim=1, start=0, step=2),
                  checks.case("negative start, dim -1", b, dim=-1, start=-3, stop=None, step=None),
                  checks.case("an empty slice", a, dim=0, start=2, stop=5, step=1),
                  checks.case("a size-1 axis", b, dim=1, start=0, stop=1, step=3),
                  checks.case("step 3 along dim 0", checks.randn(seed + 3, 7, 2, dtype=dtype), dim=0, start=1, step=3)],
        "expand": [checks.case("worked example", np.array([1.0, 2, 3], dtype=dtype), shape=(2, 3)),
                   checks.case("size-1 axes and -1", b, shape=(2, -1, 5, 4)),
                   checks.case("a 0-d input", np.asarray(1.5, dtype=dtype), shape=(2, 3)),
                   checks.case("no change", a, shape=(2, 3)),
                   checks.case("a size-1 axis to size 0", checks.randn(seed + 4, 1, 3, dtype=dtype), shape=(0, 3))],
    }


cases = view_op_cases(20)
checks.check_function("view_ops", Transpose, "transpose", cases["transpose"])
checks.check_function("view_ops", Slice, "slice", cases["slice"])
checks.check_function("view_ops", Expand, "expand", cases["expand"])
### BEGIN HIDDEN TESTS
cases = view_op_cases(120)
checks.check_function("view_ops", Transpose, "transpose", cases["transpose"], seed=1)
checks.check_function("view_ops", Slice, "slice", cases["slice"], seed=1)
checks.check_function("view_ops", Expand, "expand", cases["expand"], seed=1)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_view_ops_invariance", "locked": true, "points": 5, "schema_version": 3, "solution": false, "task": false}
from autograder.inside import checks
# Relative tolerances of the layout-invariance check: float32 results of a matrix product can
# differ by an ulp or so when an operand is transposed (the terms are added in another order):
# 1e-6 is about 8 ulps of float32 (eps = 1.2e-7); float64 gets 1e-12 for the same reason.
INVARIANCE_TOL = {np.float32: (1e-6, 1e-6), np.float64: (1e-12, 1e-12)}


def forward_is_view(Fn, a, label, **options):
    out = checks.run_student("view_ops", Fn.forward, Context(), a, **options)
    if a.size and np.asarray(out).size and not np.shares_memory(out, a):
        raise checks.CheckFailure(
            f"[view_ops] {Fn.__name__}.forward on {label} returned a copy: a view op returns a view of its input "
            "(np.swapaxes, basic slicing, np.broadcast_to), as torch does.")


def engine_grads(build, leaves):
    ts = [Tensor(a, requires_grad=True) for a in leaves]
    build(*ts).backward()
    return [t.grad for t in ts]


def build(x, W):
    """A graph that reads its inputs through views: a slice of a transpose (reused, y * y), and an expand."""
    y = x.transpose(0, 1)[1:, ::2]
    z = (y * y) @ W
    return (z.tanh() * W[:1].expand(3, -1)).sum() + (y + z[:, :1].expand(-1, 3)).sum()


def check_invariance(seed, dtype, label):
    layouts = {"transposed x": checks.randn(seed, 4, 5, dtype=dtype).T,
               "sliced x": checks.randn(seed + 1, 5, 8, dtype=dtype)[:, ::2],
               "strided x": checks.strided(checks.randn(seed + 2, 5, 4, dtype=dtype))}
    weights = {"contiguous W": checks.randn(seed + 3, 3, 2, dtype=dtype),
               "transposed W": checks.randn(seed + 4, 2, 3, dtype=dtype).T}
    rtol, atol = INVARIANCE_TOL[dtype]
    for x_label, x in layouts.items():
        for w_label, W in weights.items():
            got = checks.run_student("view_ops", engine_grads, build, [x, W])
            want = checks.run_student("view_ops", engine_grads, build, [np.ascontiguousarray(x), np.ascontiguousarray(W)])
            for leaf, g, w in zip(("x", "W"), got, want):
                checks.assert_close(g, w, task="view_ops", rtol=rtol, atol=atol, kind="grad", name=f"grad of {leaf}",
                                    case=f"{label}: {x_label} and {w_label} vs contiguous copies")


forward_is_view(Transpose, checks.randn(21, 4, 5), "a (4, 5) array", dim0=0, dim1=1)
forward_is_view(Slice, checks.randn(21, 4, 5), "a (4, 5) array", dim=1, start=1, step=2)
forward_is_view(Expand, checks.randn(21, 4, 1), "a (4, 1) array", shape=(3, 4, 5))
checks.check_graph("view_ops", Tensor, build, [checks.randn(22, 5, 4), checks.randn(23, 3, 2)], names=["x", "W"])
check_invariance(24, np.float64, "float64")
check_invariance(25, np.float32, "float32")
### BEGIN HIDDEN TESTS
checks.check_graph("view_ops", Tensor, build, [checks.randn(122, 8, 5).T[:, 1:5], checks.randn(123, 2, 3).T],
                   names=["x", "W"], seed=1)
check_invariance(124, np.float64, "float64")
check_invariance(125, np.float32, "float32")
### END HIDDEN TESTS

# %% [markdown]
# ### Explain `explain_layouts`
#
# Apply the ideas of this unit to three new cases. (a) Image batches are often stored
# "channels last": the memory holds, for each image, each row and each column, the 3 colour
# values one after the other (NHWC), while the tensor is indexed as $(N, C, H, W)$. For
# $(N, C, H, W) = (2, 3, 4, 5)$ stored that way, give the strides of the $(N, C, H, W)$ tensor, say
# whether it is contiguous, and say whether `.view(2, 3, 20)` (merging $H$ and $W$) is a view or
# impossible, with the reason. (b) `x = torch.zeros(3).expand(4, 3)` followed by `x.add_(1)`:
# torch refuses the in-place addition. Explain from the strides why it must, and what the
# result would be if it did not. (c) A classmate writes the backward of `Transpose` for 2-D
# arrays as `grad.reshape(a_shape)`, since the shapes then match. Give a $2 \times 3$ example
# where this gives the wrong gradient, and the right one. (Graded by hand; 12 points.)

# %% [markdown] nbgrader={"grade": true, "grade_id": "explain_layouts", "locked": false, "points": 12, "schema_version": 3, "solution": true, "task": false}
# **Model answer.**
#
# *(a) Channels last (4 points).* In memory the order is $n, h, w, c$ with $c$ fastest, so the
# contiguous strides of the NHWC array $(2, 4, 5, 3)$ are $(60, 15, 3, 1)$. Indexed as
# $(N, C, H, W)$ the strides are those of the same axes: $(60, 1, 15, 3)$ (this is what
# `torch.empty(2, 3, 4, 5, memory_format=torch.channels_last).stride()` reports). It is not
# contiguous: the last axis $W$ has stride 3, not 1. `.view(2, 3, 20)` is a view: $H$ and $W$
# form one chunk, since $s_H = 15 = n_W \cdot s_W = 5 \cdot 3$, so the 20 elements of $(H, W)$
# are a flat axis with base stride 3; $C$ (stride 1) and $N$ (stride 60) are their own chunks.
# The new strides are $(60, 1, 3)$. Merging $C$ with $H$ (`.view(2, 12, 5)`) would be impossible:
# $s_C = 1 \ne n_H s_H = 60$.
#
# *(b) In-place writes to an expand (4 points).* The expanded tensor has strides $(0, 1)$ over a
# storage of 3 elements: all 4 rows are the same 3 storage cells. `add_(1)` would add 1 to each
# of the 12 elements, that is 4 times to each storage cell (or, with any parallel or vectorised
# loop, an unpredictable number of times), so every element would become 4 (or worse), not 1,
# and the 3-element tensor `torch.zeros(3)` would silently change too. An in-place write is only
# well defined when no two indices reach the same storage position, which stride 0 breaks; torch
# therefore raises ("unsupported operation: more than one element of the written-to tensor
# refers to a single memory location"). Out of place, `x + 1` allocates a fresh $(4, 3)$ result.
#
# *(c) Reshape is not transpose (4 points).* Take $a$ of shape $(2, 3)$ and $y = a^\top$ of shape
# $(3, 2)$, with upstream $\bar y = \begin{pmatrix} 1 & 2 \\ 3 & 4 \\ 5 & 6 \end{pmatrix}$. The right
# gradient is $\bar a_{ij} = \bar y_{ji}$, that is
# $\bar y^\top = \begin{pmatrix} 1 & 3 & 5 \\ 2 & 4 & 6 \end{pmatrix}$. `grad.reshape(2, 3)` reads
# $\bar y$ in row-major order and refills a $(2, 3)$ array:
# $\begin{pmatrix} 1 & 2 & 3 \\ 4 & 5 & 6 \end{pmatrix}$, which pairs $a_{01}$ with $\bar y_{01} = 2$
# instead of $\bar y_{10} = 3$. A reshape keeps the order of the elements and changes the shape; a
# transpose keeps the elements in storage and changes the order in which they are read.

# %% [markdown]
# ## 8. Figure: the storage grid
#
# The figure shows a storage of 24 cells, laid out as a grid for the eye (4 rows of 6), under
# the tensor `x = torch.arange(24).reshape(2, 3, 4)` and a chain of views of it that we choose.
# Coloured cells are the ones the view reads; the number in each coloured cell is its place in
# the order of reading (index order, last index fastest), and the arrows join consecutive reads.
# Cells read more than once (an expand) list every place; grey cells are not read at all. The
# title gives the layout numbers, and says whether the layout is contiguous. The slider marks
# the $k$-th element read, with its index and its storage position. Because the storage holds
# $0, 1, \dots, 23$, the values of the view *are* the storage positions.
#
# Try the transpose (the reads jump by 12, then by 4), a slice with a step (gaps), and the
# expand (the same cells read again and again).
#
# The figure computes the layout with NumPy, so it works before the exercises are done.

# %% nbgrader={"grade": false, "grade_id": "storage_grid_figure", "locked": true, "schema_version": 3, "solution": false, "task": false}
import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display

GRID_VIEWS = {
    "x": lambda x: x,
    "x.transpose(0, 2)": lambda x: x.transpose(2, 1, 0),
    "x.permute(1, 2, 0)": lambda x: x.transpose(1, 2, 0),
    "x[:, 1:, ::2]": lambda x: x[:, 1:, ::2],
    "x[1, :, 1:3]": lambda x: x[1, :, 1:3],
    "x[:, :1].expand(2, 3, 4)": lambda x: np.broadcast_to(x[:, :1], (2, 3, 4)),
    "x[:, :1].expand(2, 3, 4).permute(2, 0, 1)[1:]": lambda x: np.broadcast_to(x[:, :1], (2, 3, 4)).transpose(2, 0, 1)[1:],
    "x.view(4, 6)[::2, 1::2]": lambda x: x.reshape(4, 6)[::2, 1::2],
}


def draw_storage_grid(view_name, k):
    storage = np.arange(24)
    view = GRID_VIEWS[view_name](storage.reshape(2, 3, 4))
    positions = view.reshape(-1)  # the storage holds its own positions
    strides = tuple(s // storage.itemsize for s in view.strides)
    offset = int(positions[0]) if positions.size else 0
    order = {}
    for place, p in enumerate(positions):
        order.setdefault(int(p), []).append(place)
    fig, ax = plt.subplots(figsize=(9, 4.6))
    cmap = plt.get_cmap("viridis")
    k = min(k, positions.size - 1)
    for p in range(24):
        row, col = divmod(p, 6)
        places = order.get(p, [])
        color = cmap(places[0] / max(positions.size - 1, 1)) if places else "0.88"
        ax.add_patch(plt.Rectangle((col, -row), 0.95, 0.95, color=color, ec="red" if k in places else "white",
                                   lw=3 if k in places else 1))
        ax.text(col + 0.08, -row + 0.78, f"{p}", fontsize=8, color="0.35")
        if places:
            ax.text(col + 0.48, -row + 0.38, ",".join(str(q) for q in places[:4]) + ("..." if len(places) > 4 else ""),
                    ha="center", va="center", fontsize=10, color="white" if places[0] < positions.size / 2 else "black")
    centers = [(p % 6 + 0.48, -(p // 6) + 0.48) for p in positions]
    for (x0, y0), (x1, y1) in zip(centers[:-1], centers[1:]):
        if (x0, y0) != (x1, y1):
            ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops=dict(arrowstyle="->", color="red", alpha=0.35))
    contiguous = view.flags.c_contiguous
    index = np.unravel_index(k, view.shape) if view.ndim else ()
    ax.set_xlim(-0.1, 6.1)
    ax.set_ylim(-3.2, 1.1)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"{view_name}: shape {view.shape}, strides {strides}, offset {offset}, "
                 f"{'contiguous' if contiguous else 'not contiguous'}\n"
                 f"read #{k}: index {tuple(int(i) for i in index)} -> storage position {int(positions[k])}",
                 fontsize=10)
    plt.show()


view_picker = widgets.Dropdown(options=list(GRID_VIEWS), value="x.transpose(0, 2)", description="view",
                               layout=widgets.Layout(width="420px"))
read_slider = widgets.IntSlider(value=0, min=0, max=23, description="read #k")
grid_output = widgets.interactive_output(draw_storage_grid, {"view_name": view_picker, "k": read_slider})
display(widgets.HBox([view_picker, read_slider]), grid_output)

# %% [markdown]
# ## 9. Putting it together
#
# Sliding windows are a view. The $k$ windows of length $m$ of a signal of length $n$ are the
# $(n - m + 1) \times m$ array whose row $i$ is `signal[i:i + m]`: element $(i, j)$ is
# `signal[i + j]`, so its strides are $(1, 1)$. No copy is needed to *describe* them
# (`torch.Tensor.unfold` and NumPy's `sliding_window_view` return exactly this view), and a
# 1-D convolution (a cross-correlation, as in deep learning) is one matrix product with the
# windows. For images, a $k \times k$ patch at every position of an $H \times W$ image is the
# layout of shape $(H - k + 1, W - k + 1, k, k)$ with strides $(W, 1, W, 1)$: the `im2col` trick
# behind many convolution implementations.
#
# The cell below builds both layouts with our functions, reads them through the storage, and
# compares a 1-D convolution with `np.correlate` and a $3 \times 3$ box blur with a direct
# double loop. It also asks `is_contiguous` and `view_strides` about the windows: the windows
# overlap, so they are not contiguous, and flattening them cannot be a view (reading them as a
# dense array is a copy, $m$ times the size of the signal).

# %% nbgrader={"grade": false, "grade_id": "putting_it_together", "locked": true, "schema_version": 3, "solution": false, "task": false}
with checks.when_written("this example"):
    pick = np.random.default_rng(0)
    signal = pick.standard_normal(12)
    kernel = np.array([0.25, 0.5, 0.25])
    n, m = signal.size, kernel.size
    window_layout = ((n - m + 1, m), (1, 1), 0)
    windows = read_through_layout(signal, *window_layout)
    conv = windows @ kernel
    print("windows layout:", window_layout, " contiguous:", is_contiguous(*window_layout[:2]),
          " flatten as a view:", view_strides(*window_layout[:2], (-1,)))
    print("1-D convolution matches np.correlate:", np.allclose(conv, np.correlate(signal, kernel, mode="valid")))

    image = pick.standard_normal((6, 7))
    H, W = image.shape
    patch_shape = (H - 2, W - 2, 3, 3)
    patch_strides = (W, 1, W, 1)
    patches = read_through_layout(image.reshape(-1), patch_shape, patch_strides, 0)
    blurred = patches.mean(axis=(2, 3))
    direct = np.array([[image[i:i + 3, j:j + 3].mean() for j in range(W - 2)] for i in range(H - 2)])
    print("image storage strides:", contiguous_strides(image.shape), " patch strides:", patch_strides)
    print("3x3 box blur by patches matches the double loop:", np.allclose(blurred, direct))
    print("the centre of patch (1, 2) is image[2, 3], at storage position",
          element_offset((1, 2, 1, 1), patch_strides), "=", contiguous_strides(image.shape)[0] * 2 + 3)

# %% [markdown]
# ## Summary
#
# - A tensor is a storage plus (shape, strides, offset); element $i$ lives at
#   $o + \sum_d i_d s_d$. Torch counts strides in elements, NumPy in bytes. Contiguous strides are
#   row-major, with torch's rule $\max(n, 1)$ for size-0 axes.
# - Contiguity means strides $\prod_{e > d} n_e$ on every axis of size other than 1; size-1 axes
#   and empty tensors never break it.
# - Transpose and permute reorder shape and strides together; a slice adds
#   $\text{start} \cdot s$ to the offset and multiplies the stride by the step; expand gives stride
#   0. All of them are views, and they compose, carrying the offset along.
# - `view` needs strides for the new shape over the same storage: it exists exactly when the new
#   shape cuts along the chunks of mutually contiguous axes; otherwise `reshape` copies.
# - Shared storage is tested on `untyped_storage().data_ptr()`, not on `data_ptr()` or on overlap.
# - In the engine, views cost nothing in forward; their backward is the adjoint (swap back,
#   scatter into zeros, sum over expanded axes), and gradients do not depend on the layout.
#
# Next, in unit 1.7, views meet mutation: an in-place edit through one view changes every tensor
# that shares its storage, including values that backward has saved, and we build torch's version
# counters to catch it.

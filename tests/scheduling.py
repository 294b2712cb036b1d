"""The order in which `make test` starts its xdist groups (used by conftest.py)."""

# The xdist groups, longest first (from `--durations=0` of a full run, 2026-12-02): `--dist
# loadgroup` hands a group to one worker whole, in collection order (the Makefile turns off
# xdist's own reordering, which puts the groups with the most tests first: the browser and
# student-repo groups, a dozen tests but minutes long, came last, and ran alone on one worker
# while the others had nothing left). Started longest first, the groups end close together; the
# ungrouped tests, seconds each, fill the gaps. A group missing here starts with them: no harm
# but to the run's length.
LONGEST_FIRST = ("browser", "1.8-mini-project", "1.5-gradient-checks", "hostile", "student-repo", "1.7-aliasing-mutation",
                 "grader", "1.6-tensor-layout", "cluster", "1.4-broadcasting", "1.1-affine-logits",
                 "1.3-reverse-accumulation", "1.2-softmax-cross-entropy", "torch-equality-1.8-mini-project", "report",
                 "feedback", "tamper", "torch-equality-1.6-tensor-layout", "hostile_hostile-trusted",
                 "hostile_hostile-memory", "release", "grouping")


def xdist_group(item):
    """The group name pytest-xdist gives ``item`` (its markers' names, sorted, joined by ``_``), or None."""
    names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    return "_".join(sorted(names)) or None

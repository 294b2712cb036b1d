"""Catalogues of student solutions that the grader must judge correctly.

Each unit has ``course/mistakes/<assignment id>.py`` defining ``VARIANTS``: a list of
:class:`Variant`. A variant starts from the reference solution (the source notebook with its
``### BEGIN/END SOLUTION`` markers dropped) and changes one solution cell, either by a small
edit (``find`` -> ``replace``, which must match exactly once) or by replacing the cell's
solution region with ``code``.

* A **mistake** names the test cells it must lose points on (``loses``).
* A **correct alternative** has ``loses=()`` and must keep full marks.
* A **delegation** (a solution that hands the work to torch) is a mistake like any other.
* A submission that games the checks names the integrity-audit flag kinds it must raise
  (``flagged``); every other variant must raise none.
"""
import importlib.util
from dataclasses import dataclass

from .course import COURSE


@dataclass(frozen=True)
class Variant:
    name: str
    cell: str
    loses: tuple = ()
    find: str = None
    replace: str = None
    code: str = None
    why: str = ""
    flagged: tuple = ()

    @property
    def is_mistake(self):
        return bool(self.loses)


def load(assignment_id):
    """The VARIANTS list of one unit (empty when the unit has no catalogue)."""
    path = COURSE / "mistakes" / f"{assignment_id}.py"
    if not path.exists():
        return []
    spec = importlib.util.spec_from_file_location(f"catalogue_{assignment_id.replace('.', '_').replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.VARIANTS)

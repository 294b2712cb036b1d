"""nbgrader's two gradebook preprocessors of a grading, each notebook's lookups read in one go.

nbgrader's ``OverwriteCells`` asks the gradebook for each cell's source (and a graded cell's
points) in a query of its own, and ``SaveAutoGrades`` asks for each cell's grade and comment in a
seven-table join of its own and commits after each: about 50 queries and 25 commits a notebook,
some 13% of a light notebook's grading CPU in the worker (cProfile, unit 1.1). The classes here are
nbgrader's, unchanged but for where the lookups come from: :class:`Prefetched` reads all the
rows the cell loop will ask for in a few queries when the loop starts, and answers each lookup
from them (a name it did not read goes to nbgrader's own query, which raises ``MissingEntry`` as
before). :class:`SaveAutoGradesAtOnce` also writes the notebook's grades and comments in one commit,
after its last cell: a grading that fails midway leaves the notebook's previous grades, instead of
some of each.
"""
from nbgrader.api import (Assignment, Comment, Grade, Gradebook, GradeCell, Notebook, SolutionCell, SourceCell,
                          TaskCell)
from nbgrader.preprocessors import OverwriteCells, SaveAutoGrades


class _Deferred:
    """The gradebook's session, whose ``commit`` waits for the end of the cell loop."""

    def __init__(self, session):
        self._session = session

    def commit(self):
        pass

    def __getattr__(self, name):
        return getattr(self._session, name)


class Prefetched:
    """``gradebook`` for one notebook's cell loop: each method named in ``tables`` looks a cell up
    by name in its table, read once (its other arguments must be ``ids``, the notebook's); any other
    call goes to ``gradebook``. With ``deferred``, the session's ``commit`` does nothing."""

    def __init__(self, gradebook, ids, tables, deferred=False):
        self._gradebook, self._ids, self._tables = gradebook, ids, tables
        self.db = _Deferred(gradebook.db) if deferred else gradebook.db

    def __getattr__(self, name):
        method = getattr(self._gradebook, name)
        table = self._tables.get(name)
        if table is None:
            return method

        def lookup(cell, *ids):
            return table[cell] if ids == self._ids and cell in table else method(cell, *ids)
        return lookup


def _by_name(kinds, rows):
    """``{cell name: row}`` from ``rows(kind)``, pairs of a row and its cell's name, for each cell class
    of ``kinds``; where two share a name the first class's row wins, as in nbgrader's ``find_*``
    (which look at a grade cell, or a solution cell, before a task cell)."""
    table = {}
    for kind in reversed(kinds):
        table.update({name: row for row, name in rows(kind)})
    return table


class OverwriteCellsPrefetched(OverwriteCells):
    """nbgrader's ``OverwriteCells``, the notebook's source cells and graded cells read in one query each."""

    def preprocess_cell(self, cell, resources, cell_index):
        if not isinstance(self.gradebook, Prefetched):
            ids = (self.notebook_id, self.assignment_id)
            db = self.gradebook.db

            def cells(kind):
                return (db.query(kind).join(Notebook, Notebook.id == kind.notebook_id)
                        .join(Assignment, Assignment.id == Notebook.assignment_id)
                        .filter(Notebook.name == ids[0], Assignment.name == ids[1]))

            self.gradebook = Prefetched(self.gradebook, ids, {
                "find_source_cell": {c.name: c for c in cells(SourceCell)},
                "find_graded_cell": _by_name((GradeCell, TaskCell), lambda kind: ((c, c.name) for c in cells(kind)))})
        return super().preprocess_cell(cell, resources, cell_index)


class SaveAutoGradesAtOnce(SaveAutoGrades):
    """nbgrader's ``SaveAutoGrades``, the notebook's grades and comments read in one query each and
    written in one commit."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        self.notebook_id, self.assignment_id = info["notebook"], info["assignment"]
        self.student_id, self.db_url = info["student"], info["db_url"]
        with Gradebook(self.db_url) as gradebook:
            submitted = gradebook.find_submission_notebook(self.notebook_id, self.assignment_id, self.student_id)
            db = gradebook.db

            def rows(row, kind):
                return (db.query(row, kind.name).join(kind, kind.id == row.cell_id)
                        .filter(row.notebook_id == submitted.id))

            tables = {"find_grade": _by_name((GradeCell, TaskCell), lambda kind: rows(Grade, kind)),
                      "find_comment": _by_name((SolutionCell, TaskCell), lambda kind: rows(Comment, kind))}
            self.gradebook = Prefetched(gradebook, (self.notebook_id, self.assignment_id, self.student_id), tables,
                                        deferred=True)
            nb, resources = super(SaveAutoGrades, self).preprocess(nb, resources)
            db.commit()
        return nb, resources

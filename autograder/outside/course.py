"""The course's assignments, as named in the course spec, and where their files live."""
import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
COURSE = ROOT / "course"
SOURCE = ROOT / "source"
RELEASE = ROOT / "release"


@dataclass(frozen=True)
class Assignment:
    id: str
    notebook: str
    title: str
    # Exercises where torch is the point (their checks run with numpy_only=False): the NumPy-only
    # rule does not apply to them, and the grading tools treat them accordingly.
    torch_tasks: tuple = ()

    @property
    def numpy_only_kernel(self):
        """True when the grading kernel gets NumPy and not torch: the unit has no torch exercise.
        The test cells of every unit run in the grader (trusted verdicts); a unit with torch
        exercises gets torch in its kernel for them, and its torch tensors cross the wire."""
        return not self.torch_tasks

    @property
    def course_file(self):
        return COURSE / f"{self.id}.py"

    def source_path(self, root=ROOT):
        return Path(root) / "source" / self.id / f"{self.notebook}.ipynb"

    def release_path(self, root=ROOT):
        return Path(root) / "release" / self.id / f"{self.notebook}.ipynb"


ASSIGNMENTS = [
    Assignment("1.1-affine-logits", "affine_logits", "Affine maps, nonlinearities and logits"),
    Assignment("1.2-softmax-cross-entropy", "softmax_cross_entropy", "Stable softmax, cross-entropy and loss reductions"),
    Assignment("1.3-reverse-accumulation", "reverse_accumulation", "Computation graphs and reverse accumulation"),
    Assignment("1.4-broadcasting", "broadcasting", "Branches, broadcasting and saved values in backward"),
    Assignment("1.5-gradient-checks", "gradient_checks", "Gradient checks with finite differences"),
    Assignment("1.6-tensor-layout", "tensor_layout", "Tensor layout: shape, stride, views and copies",
               torch_tasks=("shares_storage", "assert_view")),
    Assignment("1.7-aliasing-mutation", "aliasing_mutation", "Aliasing, mutation and module ownership"),
    Assignment("1.8-mini-project", "mini_project", "Mini-project: tensor reverse-mode engine with differential checks",
               torch_tasks=("differential_tests",)),
]
BY_ID = {a.id: a for a in ASSIGNMENTS}


def authored():
    """The assignments whose unit has been written (``course/<id>.py`` exists)."""
    return [a for a in ASSIGNMENTS if a.course_file.exists()]


def select(ids):
    """Assignments for the given ids (all authored ones when ``ids`` is empty)."""
    if not ids:
        return authored()
    unknown = [i for i in ids if i not in BY_ID]
    if unknown:
        raise SystemExit(f"unknown assignment id(s): {', '.join(unknown)}; known: {', '.join(BY_ID)}")
    return [BY_ID[i] for i in ids]


def nbgrader_env():
    """os.environ with this interpreter's bin/ first on PATH: nbgrader runs `alembic` as a subprocess."""
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    if env.get("PATH", "").split(os.pathsep)[0] != bindir:
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env


def use_venv_path():
    """Put this interpreter's bin/ first on PATH for in-process nbgrader calls."""
    os.environ["PATH"] = nbgrader_env()["PATH"]


def new_gradebooks_in_process():
    """Have nbgrader's ``Gradebook`` read the latest migration of its schema in this process when
    it makes a new database, once per process. nbgrader runs ``alembic heads`` in a subprocess
    each time (``nbgrader.api.get_alembic_version``): 5.9 s here, against 0.16 s for the same
    answer from alembic's ``ScriptDirectory`` (``tests/test_release.py`` checks that they agree),
    and 250 of the 2,700 CPU-seconds of a ``make test``, which makes some 200 gradebooks."""
    from nbgrader import api

    if api.get_alembic_version is not _alembic_head:
        api.get_alembic_version = _alembic_head


@functools.cache
def _alembic_head():
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    config = Config()
    config.set_main_option("script_location", ALEMBIC_DIR)
    return ScriptDirectory.from_config(config).get_current_head()


COURSE_ID = "neural-computation"


def nbgrader_api(course_root, db_url=None, exchange_root=None, config=None):
    """An ``NbGraderAPI`` on ``course_root``: the one way this package talks to nbgrader.

    Every gradebook row carries the course id ``COURSE_ID`` (PostgreSQL enforces the foreign
    key that SQLite ignores, so an empty id fails there). ``db_url`` defaults to nbgrader's
    ``<course_root>/gradebook.db``; the exchange to ``<course_root>/exchange``. ``config``
    holds further settings as ``{"Class": {"trait": value}}`` or a traitlets ``Config``.
    """
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    use_venv_path()
    new_gradebooks_in_process()
    cfg = Config({"CourseDirectory": {"root": str(course_root), "course_id": COURSE_ID},
                  "Exchange": {"root": str(exchange_root or Path(course_root) / "exchange")}})
    if db_url:
        cfg.CourseDirectory.db_url = db_url
    cfg.merge(Config(config or {}))
    return NbGraderAPI(coursedir=CourseDirectory(config=cfg), config=cfg)

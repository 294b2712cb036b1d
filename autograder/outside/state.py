"""What the grader knows about each submission, kept in the gradebook's own database.

nbgrader's gradebook holds the scores. Beside it, in the same database (SQLite or
PostgreSQL), the table ``autograder_state`` holds one row per (assignment, student): the
fingerprint of what was graded, whether grading succeeded, the reason when it did not, how
long it took, and the integrity-audit flags. A row is written only after nbgrader has
committed the grades, so a crash at any point leaves either a complete grade with its row, or
no row and a regrade on the next run.
"""
import json
import time
from dataclasses import dataclass, field

import sqlalchemy as sa

_metadata = sa.MetaData()
TABLE = sa.Table(
    "autograder_state",
    _metadata,
    sa.Column("assignment", sa.String(128), primary_key=True),
    sa.Column("student", sa.String(128), primary_key=True),
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),  # "graded" or "failed"
    sa.Column("reason", sa.Text, nullable=False, default=""),
    sa.Column("seconds", sa.Float, nullable=False, default=0.0),
    sa.Column("flags", sa.Text, nullable=False, default="[]"),
    sa.Column("updated", sa.Float, nullable=False),
)


@dataclass
class Record:
    student: str
    fingerprint: str
    status: str
    reason: str = ""
    seconds: float = 0.0
    flags: list = field(default_factory=list)


def sqlite_url(course_root):
    """The default gradebook URL, with a busy timeout so that parallel workers wait their turn."""
    return f"sqlite:///{course_root}/gradebook.db?timeout=60"


_engines = {}


def shared_engine(db_url, **kwargs):
    """One SQLAlchemy engine per database URL (and settings) in this process, so that each
    statement is compiled once: a grading worker opens the gradebook a dozen times a notebook
    (this module, and nbgrader's ``Gradebook`` in its converter and preprocessors, which the
    worker points here). Disposing of the engine closes its connections and keeps it usable."""
    key = (str(db_url), tuple(sorted(kwargs.items())))
    if key not in _engines:
        _engines[key] = sa.create_engine(db_url, **kwargs)
    return _engines[key]


def _engine(db_url):
    engine = shared_engine(db_url)
    _metadata.create_all(engine)
    return engine


def load(db_url, assignment):
    """``{student: Record}`` for one assignment."""
    engine = _engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.select(TABLE).where(TABLE.c.assignment == assignment)).mappings().all()
    finally:
        engine.dispose()
    return {r["student"]: Record(r["student"], r["fingerprint"], r["status"], r["reason"], r["seconds"],
                                 json.loads(r["flags"])) for r in rows}


def save(db_url, assignment, record):
    """Insert or replace one row, in its own transaction."""
    values = dict(assignment=assignment, student=record.student, fingerprint=record.fingerprint,
                  status=record.status, reason=record.reason, seconds=record.seconds,
                  flags=json.dumps(record.flags), updated=time.time())
    engine = _engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.delete(TABLE).where((TABLE.c.assignment == assignment) & (TABLE.c.student == record.student)))
            conn.execute(sa.insert(TABLE).values(**values))
    finally:
        engine.dispose()

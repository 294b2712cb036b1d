"""The instructor's command line: ``autograder <command> --help`` explains each command."""
import argparse
import shutil
import time
from pathlib import Path

from . import grader
from .course import ROOT, select

# The other modules are imported by the commands that use them: `autograder grade` starts
# in a fraction of a second instead of paying for nbconvert, matplotlib and the rest.


def default_course():
    """nbgrader's convention: the current folder when it holds ``source/``, else this repository."""
    return str(Path.cwd()) if (Path.cwd() / "source").is_dir() else str(ROOT)


COURSE_HELP = "the nbgrader course directory (default: the current folder if it holds source/, else this repository)"


def _table(rows, headers):
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [line.format(*headers), line.format(*("-" * w for w in widths))]
    out += [line.format(*row) for row in rows]
    return "\n".join(out)


def demo(args):
    """The whole instructor flow on a synthetic class, in a scratch course directory."""
    import nbformat

    from . import build, collect, feedback, grading, release, report, state

    assignments = select(args.ids)
    out = Path(args.out).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    print(f"building source/ and release/ for {len(assignments)} unit(s) ...", flush=True)
    build.build_into(assignments, ROOT)
    released = release.release(out, [a.id for a in assignments])
    print(f"released to {out / 'exchange'}: {', '.join(released)}")
    # Short limits keep the demo's infinite loop from holding it up for long.
    options = grader.Options(workers=args.workers, cell_timeout=10, timeout=120, progress=True)
    for a in assignments:
        incoming = out / "incoming" / a.id
        incoming.mkdir(parents=True)
        for student, nb in grading.sample_class(a.id).items():
            nbformat.write(nb, incoming / f"{student}.ipynb")
        for student, raw in grading.broken_submissions(a.id).items():
            (incoming / f"{student}.ipynb").write_text(raw)
        print(f"\n{a.id}: {collect.collect(out, a.id, incoming).summary()}", flush=True)
        started = time.perf_counter()
        records = grader.grade(out, a.id, options)
        elapsed = time.perf_counter() - started
        db = state.sqlite_url(out)
        scores = grading.read_grades(db, a.id)
        failures = {s: r.reason for s, r in records.items() if r.status != "graded"}
        feedback.generate_feedback(out, a.id, db_url=db, failures=failures, workers=args.workers)
        html, csv = report.write_report(out, a.id, db_url=db, failures=failures,
                                        flags={s: r.flags for s, r in records.items() if r.flags})
        rows = []
        for student in sorted(records):
            cells = scores.get(student, {})
            got = sum(x for x, _ in cells.values())
            best = sum(m for _, m in cells.values())
            note = failures.get(student) or ", ".join(k for k, (x, m) in cells.items() if x < m) or "-"
            flags = len(records[student].flags)
            rows.append((student, f"{got:g} / {best:g}" if cells else "0 (not graded)", flags or "", note[:70]))
        print(_table(rows, ("student", "autograded", "audit flags", "cells that lost points / reason")))
        print(f"graded {len(records)} notebooks in {elapsed:.1f} s")
        print(f"feedback: {out / 'feedback'}/<student>/{a.id}/{a.notebook}.html")
        print(f"report:   {html}\ngrades:   {csv}")
    print(f"\ngradebook: {out / 'gradebook.db'}")


def grade(args):
    options = grader.Options(workers=args.workers, timeout=args.timeout, cell_timeout=args.cell_timeout,
                             memory_mb=args.memory, worker_memory_mb=args.worker_memory, nproc=args.nproc,
                             db_url=args.db, force=args.force, progress=not args.quiet, cluster=args.cluster,
                             in_kernel=args.in_kernel)
    started = time.perf_counter()
    records = grader.grade(args.course, args.id, options)
    elapsed = time.perf_counter() - started
    failed = {s: r for s, r in records.items() if r.status != "graded"}
    flagged = {s: r for s, r in records.items() if r.flags}
    print(f"{args.id}: {len(records)} submission(s) on record, {len(failed)} could not be graded, "
          f"{len(flagged)} flagged by the integrity audit ({elapsed:.1f} s)")
    for student, r in sorted(failed.items()):
        print(f"  {student}: {r.reason}")


def release_cmd(args):
    from . import release

    try:
        released = release.release(args.course, args.ids, exchange_root=args.exchange, force=args.force)
    except release.ReleaseError as exc:
        raise SystemExit(f"release refused: {exc}") from None
    print(f"released: {', '.join(released)}")


def collect_cmd(args):
    from . import collect

    try:
        report = collect.collect(args.course, args.id, args.source, named_regexp=args.regexp)
    except collect.CollectError as exc:
        raise SystemExit(f"collect failed: {exc}") from None
    print(report.summary())


def _db_url(course, db):
    from . import state

    return db or state.sqlite_url(Path(course).resolve())


def feedback_cmd(args):
    from . import feedback, state

    db = _db_url(args.course, args.db)
    failures = {s: r.reason for s, r in state.load(db, args.id).items() if r.status != "graded"}
    pages = feedback.generate_feedback(args.course, args.id, students=args.student, db_url=db, failures=failures,
                                       workers=args.workers, progress=not args.quiet)
    print(f"{len(pages)} feedback file(s) under {Path(args.course).resolve() / 'feedback'}")


def report_cmd(args):
    from . import report, state

    db = _db_url(args.course, args.db)
    records = state.load(db, args.id)
    failures = {s: r.reason for s, r in records.items() if r.status != "graded"}
    flags = {s: r.flags for s, r in records.items() if r.flags}
    html, csv = report.write_report(args.course, args.id, db_url=db, failures=failures, flags=flags)
    print(f"report: {html}\ngrades CSV: {csv}")


def build_cmd(args):
    from . import build

    build.main(args.ids + (["--check"] if args.check else []))


def student_repo_cmd(args):
    from . import student_repo

    try:
        url = args.url or student_repo.DEFAULT_URL
        out = student_repo.write(args.out, url=url, ids=args.ids)
    except student_repo.StudentRepoError as exc:
        raise SystemExit(f"student-repo refused: {exc}") from None
    print(f"student repository: {out}\nBinder: {student_repo.binder_url(url)}")


def release_solutions_cmd(args):
    from . import solutions

    try:
        path = solutions.write(args.id, args.out, root=args.course)
    except RuntimeError as exc:
        raise SystemExit(f"release-solutions refused: {exc}") from None
    print(f"solutions notebook: {path}")


def bench_cmd(args):
    from . import bench

    if args.soak:
        for aid in args.ids or [select([])[0].id]:
            bench.soak(aid, args.soak, args.workers, minutes=args.soak_minutes)
        return
    bench.run(args.ids, args.students, args.workers, tuple(args.cluster_sizes))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="autograder", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="build, release, collect and grade a synthetic class, then write feedback and the report")
    p.add_argument("ids", nargs="*", help="assignment ids (default: every authored unit)")
    p.add_argument("--out", default=str(ROOT / "demo-course"), help="scratch course directory for the demo (recreated)")
    p.add_argument("--workers", type=int, default=grader.Options.workers, help="parallel grading and feedback processes (default: the number of cores)")
    p.set_defaults(func=demo)

    p = sub.add_parser("build", help="regenerate source/ and release/ from course/")
    p.add_argument("ids", nargs="*", help="assignment ids (default: every authored unit)")
    p.add_argument("--check", action="store_true", help="only report committed notebooks that are stale")
    p.set_defaults(func=build_cmd)

    p = sub.add_parser("release", help="check source/ and release/ (no solutions, no hidden tests), then release to the exchange")
    p.add_argument("ids", nargs="*", help="assignment ids (default: every written unit)")
    p.add_argument("--course", default=default_course(), help=COURSE_HELP)
    p.add_argument("--exchange", default=None, help="nbgrader exchange root (default: <course>/exchange)")
    p.add_argument("--force", action="store_true", help="replace a different copy already in the exchange")
    p.set_defaults(func=release_cmd)

    p = sub.add_parser("collect", help="bring submissions into submitted/ from a folder, an LMS zip or the exchange")
    p.add_argument("id", help="assignment id")
    p.add_argument("--from", dest="source", required=True,
                   help="a folder of notebooks, a zip of LMS downloads, or an nbgrader exchange root")
    p.add_argument("--course", default=default_course(), help=COURSE_HELP)
    p.add_argument("--regexp", default=None,
                   help="nbgrader zip_collect named regexp with a (?P<student_id>...) group, for unusual file names")
    p.set_defaults(func=collect_cmd)

    p = sub.add_parser("grade", help="autograde every submission of one assignment, in parallel and sandboxed")
    p.add_argument("id", help="assignment id, e.g. 1.2-softmax-cross-entropy")
    p.add_argument("--course", default=default_course(), help=COURSE_HELP)
    p.add_argument("--workers", type=int, default=grader.Options.workers,
                   help="parallel grading processes (default: the number of cores)")
    p.add_argument("--timeout", type=float, default=grader.Options.timeout,
                   help="wall-clock seconds one notebook may run before it is stopped and scored 0")
    p.add_argument("--cell-timeout", type=int, default=grader.Options.cell_timeout,
                   help="seconds one cell may run before it is interrupted")
    p.add_argument("--memory", type=int, default=grader.Options.memory_mb, help="memory limit per kernel, in MB")
    p.add_argument("--worker-memory", type=int, default=None,
                   help="memory, in MB, that one notebook may make its grading worker hold beyond the worker's own "
                        "(with trusted verdicts the student's code makes the worker compute; default: 3 x --memory)")
    p.add_argument("--nproc", type=int, default=grader.Options.nproc, help="process limit per kernel")
    p.add_argument("--db", default=None,
                   help="gradebook URL (default: sqlite:///<course>/gradebook.db; postgresql://... works the same)")
    p.add_argument("--force", action="store_true", help="regrade every submission, not only the changed ones")
    p.add_argument("--cluster", default=None,
                   help="grade on a Dask cluster: a scheduler address (tcp://HOST:8786), or local:N for a "
                        "LocalCluster of N processes; --workers is then unused (default: this machine's pool)")
    p.add_argument("--in-kernel", action="store_true",
                   help="run the test cells in the student's kernel, as plain nbgrader does, instead of in the grader's "
                        "process (trusted verdicts, the default wherever the unit allows: docs/grading-security.md); "
                        "for comparisons only: a notebook can then forge its verdicts")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=grade)

    p = sub.add_parser("feedback", help="one HTML feedback file per student, hidden tests' code removed, messages kept")
    p.add_argument("id", help="assignment id")
    p.add_argument("--course", default=default_course(), help=COURSE_HELP)
    p.add_argument("--db", default=None, help="gradebook URL (default: sqlite:///<course>/gradebook.db)")
    p.add_argument("--student", action="append", default=None, help="only this student (repeatable)")
    p.add_argument("--workers", type=int, default=grader.Options.workers,
                   help="parallel rendering processes (default: the number of cores)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=feedback_cmd)

    p = sub.add_parser("report", help="the instructor's HTML report and an LMS grades CSV")
    p.add_argument("id", help="assignment id")
    p.add_argument("--course", default=default_course(), help=COURSE_HELP)
    p.add_argument("--db", default=None, help="gradebook URL (default: sqlite:///<course>/gradebook.db)")
    p.set_defaults(func=report_cmd)

    p = sub.add_parser("student-repo", help="write the learners' repository: release/, the checks, environment, README with a Binder badge")
    p.add_argument("out", help="folder to write (new, empty, or an earlier student repository; its .git is kept)")
    p.add_argument("ids", nargs="*", help="assignment ids (default: every written unit)")
    p.add_argument("--url", default=None, help="the student repository's GitHub URL, https://github.com/OWNER/NAME, "
                                               "for the Binder badge (default: autograder.outside.student_repo.DEFAULT_URL)")
    p.set_defaults(func=student_repo_cmd)

    p = sub.add_parser("release-solutions", help="after the deadline: a notebook with the solutions and model answers, no hidden tests")
    p.add_argument("id", help="assignment id")
    p.add_argument("--course", default=default_course(), help=COURSE_HELP)
    p.add_argument("--out", default=None, help="folder for <id>/<notebook>.ipynb (default: <course>/solutions)")
    p.set_defaults(func=release_solutions_cmd)

    p = sub.add_parser("bench", help="time plain sequential nbgrader against `autograder grade` on a synthetic class")
    p.add_argument("ids", nargs="*", help="assignment ids (default: every written unit)")
    p.add_argument("--students", type=int, default=40, help="submissions per unit (default: 40)")
    p.add_argument("--workers", type=int, default=None, help="workers for autograder grade (default: the number of cores)")
    p.add_argument("--cluster-sizes", type=int, nargs="*", default=[1, 2, 4],
                   help="Dask LocalCluster sizes to time against the local pool on the first unit (none: skip)")
    p.add_argument("--soak", type=int, default=0, metavar="N",
                   help="instead: grade each unit given (default: the first unit) N times through `autograder grade` "
                        "(a class of 100 submissions, regraded round after round), and write the median, p99 and "
                        "max per-notebook time; fails "
                        "when a notebook waited for its cell time limit or scored unlike its sample")
    p.add_argument("--soak-minutes", type=float, default=None, metavar="M",
                   help="with --soak: start no new round of 100 gradings after M minutes (the table says how many ran)")
    p.set_defaults(func=bench_cmd)

    args = parser.parse_args(argv)
    args.func(args)

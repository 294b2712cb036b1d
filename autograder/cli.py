"""The instructor's command line: ``autograder <command> --help`` explains each command."""
import argparse
import shutil
import time
from pathlib import Path

from . import build, catalogue, grader, grading
from .course import ROOT, nbgrader_api, select


def sample_class(aid):
    """The demo class for one unit: the reference, the blank release, one student per variant."""
    ref = grading.reference_submission(aid)
    subs = {"reference": ref, "blank": grading.blank_submission(aid)}
    for v in catalogue.load(aid):
        prefix = "mistake" if v.is_mistake else "alternative"
        subs[f"{prefix}-{v.name}"] = grading.apply_variant(ref, v, aid)
    return subs


def _table(rows, headers):
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [line.format(*headers), line.format(*("-" * w for w in widths))]
    out += [line.format(*row) for row in rows]
    return "\n".join(out)


def demo(args):
    assignments = select(args.ids)
    out = Path(args.out).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    print(f"building source/ and release/ for {len(assignments)} unit(s) ...", flush=True)
    build.build_into(assignments, ROOT)
    for a in assignments:
        subs = sample_class(a.id)
        print(f"\n{a.id}: grading {len(subs)} submissions with nbgrader ...", flush=True)
        started = time.perf_counter()
        scores = grading.autograde(a.id, subs, out)
        elapsed = time.perf_counter() - started
        api = nbgrader_api(out)
        for student in subs:
            api.generate_feedback(a.id, student)
        rows = []
        for student in subs:
            cells = scores[student]
            got = sum(s for s, _ in cells.values())
            best = sum(m for _, m in cells.values())
            lost = ", ".join(k for k, (s, m) in cells.items() if s < m) or "-"
            rows.append((student, f"{got:g} / {best:g}", lost))
        print(_table(rows, ("student", "autograded score", "cells that lost points")))
        print(f"graded in {elapsed:.1f} s ({elapsed / len(subs):.1f} s per notebook)")
        print(f"feedback: {out / 'feedback'}/<student>/{a.id}/{a.notebook}.html")
    print(f"\ngradebook: {out / 'gradebook.db'}")


def grade(args):
    options = grader.Options(workers=args.workers, timeout=args.timeout, cell_timeout=args.cell_timeout,
                             memory_mb=args.memory, nproc=args.nproc, db_url=args.db, force=args.force,
                             progress=not args.quiet)
    started = time.perf_counter()
    records = grader.grade(args.course, args.id, options)
    elapsed = time.perf_counter() - started
    failed = {s: r for s, r in records.items() if r.status != "graded"}
    flagged = {s: r for s, r in records.items() if r.flags}
    print(f"{args.id}: {len(records)} submission(s) on record, {len(failed)} could not be graded, "
          f"{len(flagged)} flagged by the integrity audit ({elapsed:.1f} s)")
    for student, r in sorted(failed.items()):
        print(f"  {student}: {r.reason}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="autograder", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="build, then autograde a sample class (reference, blank, every catalogued variant)")
    p.add_argument("ids", nargs="*", help="assignment ids (default: every authored unit)")
    p.add_argument("--out", default=str(ROOT / "demo-course"), help="scratch course directory for the demo (recreated)")
    p.set_defaults(func=demo)

    p = sub.add_parser("build", help="regenerate source/ and release/ from course/")
    p.add_argument("ids", nargs="*", help="assignment ids (default: every authored unit)")
    p.add_argument("--check", action="store_true", help="only report committed notebooks that are stale")
    p.set_defaults(func=lambda a: build.main(a.ids + (["--check"] if a.check else [])))

    p = sub.add_parser("grade", help="autograde every submission of one assignment, in parallel and sandboxed")
    p.add_argument("id", help="assignment id, e.g. 1.2-softmax-cross-entropy")
    p.add_argument("--course", default=".", help="the nbgrader course directory (holds source/, submitted/, gradebook.db)")
    p.add_argument("--workers", type=int, default=grader.Options.workers,
                   help="parallel grading processes (default: the number of cores)")
    p.add_argument("--timeout", type=float, default=grader.Options.timeout,
                   help="wall-clock seconds one notebook may run before it is stopped and scored 0")
    p.add_argument("--cell-timeout", type=int, default=grader.Options.cell_timeout,
                   help="seconds one cell may run before it is interrupted")
    p.add_argument("--memory", type=int, default=grader.Options.memory_mb, help="memory limit per kernel, in MB")
    p.add_argument("--nproc", type=int, default=grader.Options.nproc, help="process limit per kernel")
    p.add_argument("--db", default=None,
                   help="gradebook URL (default: sqlite:///<course>/gradebook.db; postgresql://... works the same)")
    p.add_argument("--force", action="store_true", help="regrade every submission, not only the changed ones")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=grade)

    args = parser.parse_args(argv)
    args.func(args)

"""The instructor's command line: ``autograder <command> --help`` explains each command."""
import argparse
import shutil
import time
from pathlib import Path

from . import build, catalogue, grading
from .course import ROOT, select


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
        api = grading._api(out)
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

    args = parser.parse_args(argv)
    args.func(args)

"""``make bench``: plain sequential ``nbgrader autograde`` against ``autograder grade``, in one run.

For every written unit, the same synthetic class (the reference, the blank release and the
catalogued variants, repeated to ``students`` submissions) is graded twice, in two scratch
courses: once by nbgrader's own command line, once by ``autograder grade``. Both run as
child processes, so that the peak memory of each (the sum of the resident memory of the
process and all its descendants, kernels included, sampled every 50 ms) is measured the
same way. The scores are then compared cell by cell.
"""
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import psutil

from . import grading
from .course import COURSE_ID, ROOT, nbgrader_env, select

RESULTS = ROOT / "benchmarks" / "RESULTS.md"


def synthetic_class(aid, students):
    """``students`` submissions cycling through the unit's sample class."""
    pool = list(grading.sample_class(aid).items())
    return {f"s{i:03d}-{pool[i % len(pool)][0]}"[:60]: pool[i % len(pool)][1] for i in range(students)}


class PeakMemory:
    """Samples the resident memory of a process tree until stopped; keeps the peak in MB."""

    def __init__(self, pid):
        self.root = psutil.Process(pid)
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            total = 0
            try:
                for p in [self.root] + self.root.children(recursive=True):
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        continue
            except psutil.Error:
                return
            self.peak = max(self.peak, total / 2**20)
            time.sleep(0.05)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.peak


def _timed(cmd, cwd):
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=nbgrader_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    meter = PeakMemory(proc.pid)
    _, err = proc.communicate()
    peak = meter.stop()
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{err[-2000:]}")
    return time.perf_counter() - started, peak


def bench_unit(aid, students, workers, scratch):
    subs = synthetic_class(aid, students)
    roots = {}
    for name in ("plain", "ours"):
        root = Path(scratch) / name
        grading.prepare_course(root, aid)
        for student, nb in subs.items():
            grading.submit(root, aid, student, nb)
        roots[name] = root
    (roots["plain"] / "nbgrader_config.py").write_text(
        f"c.CourseDirectory.root = {str(roots['plain'])!r}\nc.CourseDirectory.course_id = {COURSE_ID!r}\n")
    plain_s, plain_mb = _timed([str(Path(sys.executable).parent / "nbgrader"), "autograde", aid, "--force"],
                               roots["plain"])
    ours_s, ours_mb = _timed([sys.executable, "-m", "autograder", "grade", aid, "--course", str(roots["ours"]),
                              "--workers", str(workers), "--quiet", "--force"], roots["ours"])
    db = {k: f"sqlite:///{v}/gradebook.db" for k, v in roots.items()}
    equal = grading.read_grades(db["plain"], aid) == grading.read_grades(db["ours"], aid)
    return dict(unit=aid, notebooks=len(subs), plain_s=plain_s, ours_s=ours_s, plain_mb=plain_mb, ours_mb=ours_mb,
                equal=equal)


def bench_cluster(aid, students, sizes, scratch):
    """The same class graded by the local pool and by a Dask LocalCluster, with 1, 2, 4... processes."""
    subs = synthetic_class(aid, students)
    rows, reference = [], None
    for n in sizes:
        times = {}
        for mode in ("pool", "cluster"):
            root = Path(scratch) / f"{mode}-{n}"
            grading.prepare_course(root, aid)
            for student, nb in subs.items():
                grading.submit(root, aid, student, nb)
            how = ["--cluster", f"local:{n}"] if mode == "cluster" else ["--workers", str(n)]
            times[mode], _ = _timed([sys.executable, "-m", "autograder", "grade", aid, "--course", str(root),
                                     "--quiet", "--force", *how], root)
            scores = grading.read_grades(f"sqlite:///{root}/gradebook.db", aid)
            reference = reference or scores
            times[f"{mode}_equal"] = scores == reference
        rows.append(dict(unit=aid, workers=n, notebooks=len(subs), pool_s=times["pool"], cluster_s=times["cluster"],
                         equal=times["pool_equal"] and times["cluster_equal"]))
    return rows


CLUSTER_HEADER = ("| unit | processes | notebooks | local pool s | Dask LocalCluster s | cluster nb/s | "
                  "overhead per notebook s | scores equal |\n|---|---|---|---|---|---|---|---|")


def _cluster_row(r):
    return (f"| {r['unit']} | {r['workers']} | {r['notebooks']} | {r['pool_s']:.1f} | {r['cluster_s']:.1f} | "
            f"{r['notebooks'] / r['cluster_s']:.2f} | {(r['cluster_s'] - r['pool_s']) / r['notebooks']:+.2f} | "
            f"{'yes' if r['equal'] else 'NO'} |")


def _row(r):
    return (f"| {r['unit']} | {r['notebooks']} | {r['plain_s']:.1f} | {r['ours_s']:.1f} | "
            f"{r['plain_s'] / r['ours_s']:.2f}x | {r['notebooks'] / r['plain_s']:.2f} | "
            f"{r['notebooks'] / r['ours_s']:.2f} | {r['plain_mb']:.0f} | {r['ours_mb']:.0f} | "
            f"{'yes' if r['equal'] else 'NO'} |")


HEADER = ("| unit | notebooks | nbgrader s | autograder s | speed-up | nbgrader nb/s | autograder nb/s | "
          "nbgrader peak MB | autograder peak MB | scores equal |\n|---|---|---|---|---|---|---|---|---|---|")


def run(ids=(), students=40, workers=None, cluster_sizes=(1, 2, 4)):
    """Benchmark every unit, and the Dask cluster on the first one; print the tables and append them
    to benchmarks/RESULTS.md."""
    workers = workers or psutil.cpu_count() or 1
    rows, cluster_rows = [], []
    with tempfile.TemporaryDirectory(prefix="bench-") as scratch:
        units = select(list(ids))
        for a in units:
            print(f"{a.id}: grading {students} submissions with nbgrader, then with autograder ...", flush=True)
            rows.append(bench_unit(a.id, students, workers, Path(scratch) / a.id))
            print(HEADER.splitlines()[0] + "\n" + _row(rows[-1]), flush=True)
        if cluster_sizes:
            print(f"{units[0].id}: the local pool against a Dask LocalCluster of {cluster_sizes} processes ...",
                  flush=True)
            cluster_rows = bench_cluster(units[0].id, students, cluster_sizes, Path(scratch) / "cluster")
    total = dict(unit="all", notebooks=sum(r["notebooks"] for r in rows), plain_s=sum(r["plain_s"] for r in rows),
                 ours_s=sum(r["ours_s"] for r in rows), plain_mb=max(r["plain_mb"] for r in rows),
                 ours_mb=max(r["ours_mb"] for r in rows), equal=all(r["equal"] for r in rows))
    table = "\n".join([HEADER] + [_row(r) for r in rows + [total]])
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    section = (f"\n## {stamp}: {psutil.cpu_count()} cores, {workers} workers\n\n{table}\n")
    if cluster_rows:
        section += "\n" + "\n".join([CLUSTER_HEADER] + [_cluster_row(r) for r in cluster_rows]) + "\n"
    RESULTS.parent.mkdir(exist_ok=True)
    if not RESULTS.exists():
        RESULTS.write_text("# Grading benchmarks\n\nWritten by `make bench` (autograder/bench.py); newest last.\n")
    with open(RESULTS, "a") as fh:
        fh.write(section)
    print(section)
    print(f"written to {RESULTS}")
    return rows

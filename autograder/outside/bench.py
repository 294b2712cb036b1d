"""``make bench``: plain sequential ``nbgrader autograde`` against ``autograder grade``, in one run.

For every written unit, the same synthetic class (the reference, the blank release and the
catalogued variants, repeated to ``students`` submissions) is graded twice, in two scratch
courses: once by nbgrader's own command line, once by ``autograder grade``. Both run as
child processes, so that the peak memory of each (the sum of the resident memory of the
process and all its descendants, kernels included, sampled every 50 ms) is measured the
same way. The scores are then compared cell by cell. Every figure comes with the CPU-seconds
of the grading process tree (user + system time of every process it started, the kernels
included), which the other work on a shared machine inflates less than wall time, and
with the load average when it was taken.

``autograder bench --soak N`` (``make soak``) grades one class of N submissions through the
real grader instead, and gives the distribution of the per-notebook times: the check that no
notebook waits for its cell time limit (issue 8's stall).
"""
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import psutil

from . import grading, state
from .course import BY_ID, COURSE_ID, ROOT, nbgrader_env, select

RESULTS = ROOT / "benchmarks" / "RESULTS.md"


def synthetic_class(aid, students):
    """``students`` submissions cycling through the unit's sample class."""
    pool = list(grading.sample_class(aid).items())
    return {f"s{i:03d}-{pool[i % len(pool)][0]}"[:60]: pool[i % len(pool)][1] for i in range(students)}


class TreeMeter:
    """Samples a process tree every 50 ms until stopped: the peak of its resident memory in MB, and
    the CPU-seconds (user + system) each process had used when last seen."""

    def __init__(self, pid):
        self.root = psutil.Process(pid)
        self.peak = 0.0
        self._cpu = {}  # (pid, start time): CPU-seconds when last seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            total = 0
            try:
                for p in [self.root] + self.root.children(recursive=True):
                    try:
                        with p.oneshot():
                            total += p.memory_info().rss
                            cpu = p.cpu_times()
                            self._cpu[(p.pid, p.create_time())] = cpu.user + cpu.system
                    except psutil.Error:
                        continue
            except psutil.Error:
                return
            self.peak = max(self.peak, total / 2**20)
            time.sleep(0.05)

    def stop(self):
        """``(peak MB, CPU-seconds)``; the CPU misses what each process used in its last 50 ms."""
        self._stop.set()
        self._thread.join()
        return self.peak, sum(self._cpu.values())


def _cpu_of_children():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load():
    """The load averages (1, 5, 15 minutes), as ``uptime`` prints them."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _timed(cmd, cwd):
    """Run ``cmd``; return its wall seconds, peak MB and CPU-seconds.

    Both ways of counting the CPU of a process tree miss some of it: the kernel's account of
    reaped children (``RUSAGE_CHILDREN``) misses every process whose parent was killed before
    waiting for it (a grading worker's zygote and kernels, when the grader kills the worker at
    the end of a run), and sampling misses each process's last 50 ms. The larger is taken.
    """
    cpu = _cpu_of_children()
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=nbgrader_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    meter = TreeMeter(proc.pid)
    _, err = proc.communicate()
    peak, sampled = meter.stop()
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{err[-2000:]}")
    return time.perf_counter() - started, peak, max(sampled, _cpu_of_children() - cpu)


def bench_unit(aid, students, workers, scratch):
    subs = synthetic_class(aid, students)
    roots = {}
    for name in ("plain", "ours", "kernel"):
        root = Path(scratch) / name
        grading.prepare_course(root, aid)
        for student, nb in subs.items():
            grading.submit(root, aid, student, nb)
        roots[name] = root
    (roots["plain"] / "nbgrader_config.py").write_text(
        f"c.CourseDirectory.root = {str(roots['plain'])!r}\nc.CourseDirectory.course_id = {COURSE_ID!r}\n")
    load_at = load()
    plain_s, plain_mb, plain_cpu = _timed([str(Path(sys.executable).parent / "nbgrader"), "autograde", aid, "--force"],
                                          roots["plain"])
    ours_s, ours_mb, ours_cpu = _timed([sys.executable, "-m", "autograder", "grade", aid, "--course",
                                        str(roots["ours"]), "--workers", str(workers), "--quiet", "--force"],
                                       roots["ours"])
    kernel_s, _, kernel_cpu = _timed([sys.executable, "-m", "autograder", "grade", aid, "--course", str(roots["kernel"]),
                                      "--workers", str(workers), "--quiet", "--force", "--in-kernel"], roots["kernel"])
    db = {k: f"sqlite:///{v}/gradebook.db" for k, v in roots.items()}
    plain = grading.read_grades(db["plain"], aid)
    equal = plain == grading.read_grades(db["ours"], aid) == grading.read_grades(db["kernel"], aid)
    return dict(unit=aid, notebooks=len(subs), plain_s=plain_s, ours_s=ours_s, plain_mb=plain_mb, ours_mb=ours_mb,
                plain_cpu=plain_cpu, ours_cpu=ours_cpu, kernel_s=kernel_s, kernel_cpu=kernel_cpu,
                torch="no" if BY_ID[aid].numpy_only_kernel else "yes", equal=equal, load=f"{load_at} / {load()}")


def bench_cluster(aid, students, sizes, scratch):
    """The same class graded by the local pool and by a Dask LocalCluster, with 1, 2, 4... processes."""
    subs = synthetic_class(aid, students)
    rows, reference = [], None
    for n in sizes:
        row = dict(unit=aid, workers=n, notebooks=len(subs), equal=True, load=load())
        for mode in ("pool", "cluster"):
            root = Path(scratch) / f"{mode}-{n}"
            grading.prepare_course(root, aid)
            for student, nb in subs.items():
                grading.submit(root, aid, student, nb)
            how = ["--cluster", f"local:{n}"] if mode == "cluster" else ["--workers", str(n)]
            row[f"{mode}_s"], _, row[f"{mode}_cpu"] = _timed(
                [sys.executable, "-m", "autograder", "grade", aid, "--course", str(root), "--quiet", "--force", *how],
                root)
            scores = grading.read_grades(f"sqlite:///{root}/gradebook.db", aid)
            reference = reference or scores
            row["equal"] = row["equal"] and scores == reference
        row["load"] += f" / {load()}"
        rows.append(row)
        print(CLUSTER_HEADER.splitlines()[0] + "\n" + _cluster_row(row), flush=True)
    return rows


CLUSTER_HEADER = ("| unit | processes | notebooks | local pool s | Dask LocalCluster s | cluster nb/s | "
                  "overhead per notebook s | pool CPU s/nb | cluster CPU s/nb | scores equal | load before / after |\n"
                  "|---|---|---|---|---|---|---|---|---|---|---|")


def _cluster_row(r):
    n = r["notebooks"]
    return (f"| {r['unit']} | {r['workers']} | {n} | {r['pool_s']:.1f} | {r['cluster_s']:.1f} | "
            f"{n / r['cluster_s']:.2f} | {(r['cluster_s'] - r['pool_s']) / n:+.2f} | {r['pool_cpu'] / n:.2f} | "
            f"{r['cluster_cpu'] / n:.2f} | {'yes' if r['equal'] else 'NO'} | {r['load']} |")


def _row(r):
    n = r["notebooks"]
    return (f"| {r['unit']} | {r['torch']} | {n} | {r['plain_s']:.1f} | {r['ours_s']:.1f} | "
            f"{r['plain_s'] / r['ours_s']:.2f}x | {r['kernel_s']:.1f} | {n / r['plain_s']:.2f} | "
            f"{n / r['ours_s']:.2f} | {r['plain_cpu'] / n:.2f} | {r['ours_cpu'] / n:.2f} | {r['kernel_cpu'] / n:.2f} | "
            f"{r['plain_cpu'] / r['ours_cpu']:.2f}x | {r['plain_mb']:.0f} | {r['ours_mb']:.0f} | "
            f"{'yes' if r['equal'] else 'NO'} | {r['load']} |")


HEADER = ("| unit | torch in the kernel | notebooks | nbgrader s | autograder s | speed-up | autograder --in-kernel s | "
          "nbgrader nb/s | autograder nb/s | nbgrader CPU s/nb | autograder CPU s/nb | --in-kernel CPU s/nb | "
          "CPU speed-up | nbgrader peak MB | autograder peak MB | scores equal (all three) | load before / after |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def _section(title):
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"\n## {stamp}: {title}\n\n"


def _append(section):
    RESULTS.parent.mkdir(exist_ok=True)
    if not RESULTS.exists():
        RESULTS.write_text("# Grading benchmarks\n\nWritten by `make bench` (autograder/outside/bench.py); newest last.\n")
    with open(RESULTS, "a") as fh:
        fh.write(section)
    print(section)
    print(f"written to {RESULTS}")


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
                 ours_s=sum(r["ours_s"] for r in rows), plain_cpu=sum(r["plain_cpu"] for r in rows),
                 ours_cpu=sum(r["ours_cpu"] for r in rows), plain_mb=max(r["plain_mb"] for r in rows),
                 ours_mb=max(r["ours_mb"] for r in rows), equal=all(r["equal"] for r in rows),
                 kernel_s=sum(r["kernel_s"] for r in rows), kernel_cpu=sum(r["kernel_cpu"] for r in rows),
                 torch=f"{sum(r['torch'] == 'yes' for r in rows)} of {len(rows)}",
                 load=f"{rows[0]['load'].split(' / ')[0]} / {rows[-1]['load'].split(' / ')[1]}")
    section = _section(f"{psutil.cpu_count()} cores, {workers} workers") + "\n".join(
        [HEADER] + [_row(r) for r in rows + [total]]) + "\n"
    if cluster_rows:
        section += "\n" + "\n".join([CLUSTER_HEADER] + [_cluster_row(r) for r in cluster_rows]) + "\n"
    _append(section)
    return rows


def _percentile(sorted_values, q):
    """The q-th percentile (nearest rank) of an ascending list."""
    return sorted_values[min(len(sorted_values) - 1, max(0, round(q / 100 * len(sorted_values) + 0.5) - 1))]


def _widest_gap(notebook):
    """The longest wait, in seconds, between a cell's execute_reply and the next cell's start, from the
    timings nbclient records in the autograded notebook (both are the kernel's clock). A notebook
    that waited for a cell's time limit (issue 8's stall) shows a gap as long as that limit."""
    import nbformat

    stamps = [c.metadata.get("execution", {}) for c in nbformat.read(notebook, as_version=4).cells
              if c.cell_type == "code"]
    gaps = [datetime.fromisoformat(b["iopub.status.busy"].replace("Z", "+00:00")) -
            datetime.fromisoformat(a["shell.execute_reply"].replace("Z", "+00:00"))
            for a, b in zip(stamps, stamps[1:]) if "shell.execute_reply" in a and "iopub.status.busy" in b]
    return max((g.total_seconds() for g in gaps), default=0.0)


def soak(aid, notebooks=1000, workers=None, cell_timeout=60, class_size=100, minutes=None):
    """Grade unit ``aid`` ``notebooks`` times through ``autograder grade`` (the local pool): a class
    of ``class_size`` submissions, regraded with ``--force`` round after round. Append the
    distribution of the per-notebook times to benchmarks/RESULTS.md.

    A notebook stalled when it waited for a cell's time limit (issue 8): a gap between two cells as
    long as ``cell_timeout``. Notebooks that took that long in all are counted apart (on a loaded
    machine, the first notebook of each worker, which starts its sandbox, can). The run fails when one stalled, failed,
    or scored unlike the other submissions of its sample. With ``minutes``, no round starts past
    that budget; Ctrl-C stops the current round; the table says how many gradings were done.
    """
    workers = workers or psutil.cpu_count() or 1
    subs = synthetic_class(aid, min(class_size, notebooks))
    times, gaps, failed, stalled, unequal, cpu, wall, peak = [], [], [], [], set(), 0.0, 0.0, 0.0
    started, load_at = time.monotonic(), load()
    with tempfile.TemporaryDirectory(prefix="soak-") as scratch:
        root = Path(scratch)
        grading.prepare_course(root, aid)
        for student, nb in subs.items():
            grading.submit(root, aid, student, nb)
        try:
            while len(times) < notebooks and not (minutes and time.monotonic() - started > 60 * minutes):
                w, p, c = _timed([sys.executable, "-m", "autograder", "grade", aid, "--course", str(root), "--quiet",
                                  "--force", "--workers", str(workers), "--cell-timeout", str(cell_timeout)], root)
                wall, peak, cpu = wall + w, max(peak, p), cpu + c
                records = state.load(state.sqlite_url(root), aid).values()
                for r in records:
                    notebook = root / "autograded" / r.student / aid / f"{BY_ID[aid].notebook}.ipynb"
                    gap = _widest_gap(notebook) if notebook.exists() else 0.0
                    times.append(r.seconds)
                    gaps.append(gap)
                    if r.status != "graded":
                        failed.append(r.student)
                    if gap >= 0.9 * cell_timeout:
                        stalled.append((r.student, round(r.seconds, 1), round(gap, 1)))
                by_sample = {}
                for student, scores in grading.read_grades(f"sqlite:///{root}/gradebook.db", aid).items():
                    by_sample.setdefault(student.split("-", 1)[1], set()).add(tuple(sorted(scores.items())))
                unequal |= {name for name, seen in by_sample.items() if len(seen) > 1}
                print(f"{len(times)} gradings, {wall:.0f} s, {len(stalled)} stalled, {len(failed)} failed, "
                      f"load {load()}", flush=True)
        except KeyboardInterrupt:  # Ctrl-C: the table says how many gradings ran
            print("interrupted: writing the rounds that finished", flush=True)
    if not times:
        raise SystemExit("soak: no round of gradings finished")
    times.sort()
    row = (f"| {aid} | {len(times)} | {workers} | {wall:.0f} | {len(times) / wall:.2f} | {cpu / len(times):.2f} | "
           f"{_percentile(times, 50):.2f} | {_percentile(times, 99):.2f} | {times[-1]:.2f} | "
           f"{sum(t >= cell_timeout for t in times)} | {max(gaps):.2f} | "
           f"{len(stalled)} | {len(failed)} | {'yes' if not unequal else 'NO'} | {peak:.0f} | "
           f"{load_at} / {load()} |")
    section = _section(f"soak, {psutil.cpu_count()} cores, {workers} workers, cell time limit {cell_timeout} s") + (
        "| unit | gradings | workers | wall s | nb/s | CPU s/nb | median s | p99 s | max s | "
        f">= {cell_timeout} s | widest gap between cells s | stalled | failed | equal scores per sample | peak MB | "
        "load before / after |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n" + row + "\n")
    _append(section)
    if stalled or failed or unequal:
        raise SystemExit(f"soak failed: {len(stalled)} stalled {stalled[:5]}, {len(failed)} failed {failed[:5]}, "
                         f"scores differ within samples {sorted(unequal)[:5]}")
    return times

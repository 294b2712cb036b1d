"""course/*.py -> source/<id>/<nb>.ipynb -> release/<id>/<nb>.ipynb.

The authored units are jupytext percent files whose ``# %%`` lines carry the nbgrader cell
metadata. ``source/`` is made from them by jupytext alone; ``release/`` is made from
``source/`` by nbgrader's own ``generate_assignment`` (through ``NbGraderAPI``), run in a
scratch course directory so that no gradebook or log is left in the repo.

Both layers are deterministic: cell ids come from the grade_id (or the cell's position), and
notebooks are written with sorted keys, so a second build changes no byte.
"""
import argparse
import shutil
import tempfile
from pathlib import Path

import jupytext
import nbformat

from . import template
from .course import ROOT, nbgrader_api, select

# A notebook opens "modified" in JupyterLab when its metadata differs from what the kernel
# reports on start (JupyterLab writes the kernel's kernelspec and language_info into the
# notebook and compares them deeply), and closing it unrun then asks to save. So the notebooks
# carry exactly what ipykernel reports for the course's Python, which environment.yml pins to
# the same patch version (tests/test_build.py and tests/test_packaging.py check both).
PYTHON_VERSION = "3.11.7"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
    "version": PYTHON_VERSION,
}


def source_notebook(assignment):
    """The instructor notebook for one assignment, as an nbformat node."""
    nb = jupytext.read(assignment.course_file, fmt="py:percent")
    nb.metadata = nbformat.from_dict({"kernelspec": KERNELSPEC, "language_info": LANGUAGE_INFO})
    for i, cell in enumerate(nb.cells):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        cell.id = grade_id if grade_id else f"cell-{i:03d}"
        cell.metadata.pop("lines_to_next_cell", None)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            if cell.metadata.get("nbgrader", {}).get("grade"):
                # JupyterLab's Run All goes on past a failing test cell with this tag (it sends the
                # cell with stop_on_error false), so that a student sees every check and the figure
                cell.metadata["tags"] = ["raises-exception"]
    nbformat.validate(nb)
    return nb


def dumps(nb):
    """Serialise a notebook the same way every time (nbformat's writer sorts keys)."""
    return nbformat.writes(nb, version=4) + "\n"


def write_source(assignment, root):
    path = assignment.source_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(source_notebook(assignment)), encoding="utf-8")
    return path


def generate_release(assignments, course_root, db_url=None):
    """Run nbgrader generate_assignment for each assignment inside ``course_root``.

    This also records each assignment and its graded cells in the course's gradebook
    (``db_url``, default ``<course_root>/gradebook.db``)."""
    api = nbgrader_api(course_root, db_url)
    for a in assignments:
        result = api.generate_assignment(a.id, force=True, create=True)
        if not result["success"]:
            raise RuntimeError(f"nbgrader generate_assignment {a.id} failed:\n{result.get('error') or result.get('log')}")
        path = a.release_path(course_root)
        path.write_text(dumps(answers_unset(nbformat.read(path, as_version=4))), encoding="utf-8")


STUB = "raise NotImplementedError()"


def answers_unset(nb):
    """``nb`` with nbgrader's stub line dropped from each concept-check cell, whose answers are set
    to None above it: the cell then runs, and its test cell says which answer to set. (Raising
    there would stop Run All before the rest of the notebook; a function's stub raises only when
    it is called.)"""
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution") and template._is_concept_check(cell.source):
            cell.source = "\n".join(line for line in cell.source.split("\n") if line.strip() != STUB)
    return nb


def build_into(assignments, out_root):
    """Write source/ and release/ for ``assignments`` under ``out_root``."""
    with tempfile.TemporaryDirectory(prefix="course-build-") as tmp:
        for a in assignments:
            write_source(a, tmp)
        generate_release(assignments, tmp)
        for a in assignments:
            for layer in ("source", "release"):
                src = Path(tmp) / layer / a.id
                dst = Path(out_root) / layer / a.id
                if dst.exists():
                    shutil.rmtree(dst)
                shutil.copytree(src, dst)


def stale(assignments):
    """The committed notebooks that differ from a fresh build (paths relative to the repo)."""
    with tempfile.TemporaryDirectory(prefix="course-check-") as fresh:
        build_into(assignments, fresh)
        out = []
        for a in assignments:
            for layer in ("source", "release"):
                want = sorted(p.relative_to(fresh) for p in (Path(fresh) / layer / a.id).rglob("*") if p.is_file())
                have = sorted(p.relative_to(ROOT) for p in (ROOT / layer / a.id).rglob("*") if p.is_file())
                if want != have:
                    out.append(f"{layer}/{a.id}")
                    continue
                out += [str(p) for p in want if (Path(fresh) / p).read_bytes() != (ROOT / p).read_bytes()]
        return out


def main(argv=None):
    parser = argparse.ArgumentParser(description="Build source/ and release/ from course/.")
    parser.add_argument("ids", nargs="*", help="assignment ids to build (default: every authored unit)")
    parser.add_argument("--check", action="store_true", help="build into a scratch folder and list stale committed notebooks")
    args = parser.parse_args(argv)
    assignments = select(args.ids)
    if args.check:
        bad = stale(assignments)
        if bad:
            raise SystemExit("stale generated notebooks (run `make build`):\n  " + "\n  ".join(bad))
        print(f"source/ and release/ are up to date for {len(assignments)} assignment(s)")
        return
    build_into(assignments, ROOT)
    print(f"built source/ and release/ for: {', '.join(a.id for a in assignments)}")
    drift = {a.id: template.problems(source_notebook(a), a.id.split("-")[0], a.title) for a in assignments}
    drift = {aid: found for aid, found in drift.items() if found}
    if drift:
        raise SystemExit("units that break the template of docs/authoring.md (tests/test_template.py fails):\n"
                         + "\n".join(f"  {aid}: {p}" for aid, found in drift.items() for p in found))


if __name__ == "__main__":
    main()

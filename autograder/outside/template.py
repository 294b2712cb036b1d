"""The unit template of ``docs/authoring.md``, checked: :func:`problems` lists where a unit drifts.

``make build`` refuses to write a unit with problems, and ``tests/test_template.py`` checks
every authored unit and proves that each rule can fail.
"""
import ast
import re

OPENING_SECTIONS = ("## Learning goals", "## Readings", "## How this notebook works")
TOTAL_ROW = re.compile(r"^\|\s*\|\s*\*\*total\*\*\s*\|\s*\*\*(\d+)\*\*\s*\|\s*$", re.M)
HEADING3 = re.compile(r"^### (Exercise|Concept check|Explain) `([^`]+)`", re.M)
PART = re.compile(r"^## (\d+)\. (.*)$", re.M)
PART_POINTS = re.compile(r"\((\d+) points?\)")
HIDDEN_START = "### BEGIN HIDDEN TESTS"
SOLUTION_START = "### BEGIN SOLUTION"
WHEN_WRITTEN = "checks.when_written("
VISIBLE_CONCEPT_CHECKS = ("checks.check_value(", "checks.check_hash(", "checks.check_close_hash(")


def _meta(cell):
    return cell.metadata.get("nbgrader", {})


def _kind(cell):
    """'solution', 'test', 'explain', 'locked' or None (prose)."""
    m = _meta(cell)
    if not m:
        return None
    if cell.cell_type == "markdown":
        return "explain" if m.get("grade") and m.get("solution") else None
    if m.get("solution"):
        return "solution"
    return "test" if m.get("grade") else "locked"


def task_of(test_id, solution_ids):
    """The exercise a test cell belongs to: ``test_<id>`` or ``test_<id>_<aspect>``."""
    matches = [s for s in solution_ids if test_id == f"test_{s}" or test_id.startswith(f"test_{s}_")]
    return max(matches, key=len) if matches else None


def points_table(text):
    """``{task: points}`` from the opening cell's table, and the problems found in it."""
    problems, table = [], {}
    total = TOTAL_ROW.search(text)
    if not total:
        return table, ["the points table has no `| | **total** | **100** |` row"]
    if total.group(1) != "100":
        problems.append(f"the points table's total is {total.group(1)}, not 100")
    for line in text[: total.start()].splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) != 3 or not re.fullmatch(r"\d+( \+ \d+)*", cols[2]):
            continue
        tasks = re.findall(r"`([^`]+)`", cols[1])
        numbers = [int(n) for n in cols[2].split("+")]
        if len(tasks) == len(numbers):
            pairs = zip(tasks, numbers)
        elif len(tasks) == 1:
            pairs = [(tasks[0], sum(numbers))]
        else:
            problems.append(f"points table row {line.strip()!r}: {len(tasks)} tasks but {len(numbers)} numbers")
            continue
        for task, n in pairs:
            table[task] = table.get(task, 0) + n
    if sum(table.values()) != int(total.group(1)):
        problems.append(f"the points table's rows add up to {sum(table.values())}, its total row says {total.group(1)}")
    return table, problems


def _is_concept_check(code):
    """A solution cell that defines no function or class: it assigns answers to named variables."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    return not any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in tree.body)


def _assigned_names(code):
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    return {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}


def problems(nb, number, title):
    """Every way the source notebook ``nb`` of unit ``number`` (e.g. "1.3") breaks the template."""
    out = []
    cells = nb.cells
    opening = cells[0].source if cells and cells[0].cell_type == "markdown" else ""
    if not opening.startswith(f"# {number} {title}\n"):
        out.append(f"the first cell must start with the title line `# {number} {title}`")
    positions = [opening.find(f"{s}\n") for s in OPENING_SECTIONS]
    if -1 in positions or positions != sorted(positions):
        out.append(f"the first cell must hold the sections {', '.join(OPENING_SECTIONS)}, in this order")
    table, table_problems = points_table(opening)
    out += table_problems

    code_cells = [c for c in cells if c.cell_type == "code"]
    if not code_cells or _meta(code_cells[0]).get("grade_id") != "setup" or _kind(code_cells[0]) != "locked":
        out.append("the first code cell must be the locked `setup` cell")

    solution_ids = [_meta(c)["grade_id"] for c in cells if _kind(c) == "solution"]
    graded = {}
    heading, parts, test_sources = None, [], {}
    for cell in cells[1:]:
        kind, m = _kind(cell), _meta(cell)
        if cell.cell_type == "markdown":
            parts += [(int(n), name) for n, name in PART.findall(cell.source)]
            found = HEADING3.findall(cell.source)
            if found:
                heading = found[-1]
        gid = m.get("grade_id")
        if kind == "solution":
            want = "Concept check" if _is_concept_check(cell.source) else "Exercise"
            if heading != (want, gid):
                out.append(f"solution cell `{gid}` must follow a heading ### {want} `{gid}`")
            elif want == "Concept check":
                head, _, region = cell.source.partition(SOLUTION_START)
                missing = sorted(_assigned_names(region.replace("### END SOLUTION", "")) - _assigned_names(head))
                if missing or not region:
                    out.append(f"concept check `{gid}` must set each answer to None before {SOLUTION_START}: {missing}")
        elif kind == "test":
            task = task_of(gid, solution_ids)
            if task is None:
                out.append(f"test cell `{gid}` is not test_<id> of a solution cell")
            else:
                graded[task] = graded.get(task, 0) + m.get("points", 0)
                test_sources.setdefault(task, []).append(cell.source.split(HIDDEN_START)[0])
        elif kind == "explain":
            graded[gid] = m.get("points", 0)
            if heading != ("Explain", gid):
                out.append(f"explain cell `{gid}` must follow a heading ### Explain `{gid}`")
            if not cell.source.startswith("**Model answer.**"):
                out.append(f"explain cell `{gid}` must start with **Model answer.**")
            per_part = [int(n) for n in PART_POINTS.findall(cell.source)]
            if not per_part or sum(per_part) != m.get("points"):
                out.append(f"explain cell `{gid}` must give points per part, '(N points)', adding up to "
                           f"{m.get('points')} (found {per_part})")
    for task, sources in test_sources.items():
        concept = any(h == ("Concept check", task) for h in _headings(cells))
        if concept and not any(s in src for src in sources for s in VISIBLE_CONCEPT_CHECKS):
            out.append(f"concept check `{task}` must be checked visibly (checks.check_value, checks.check_hash or "
                       f"checks.check_close_hash before {HIDDEN_START})")
    if table and graded != table:
        wrong = sorted(t for t in set(graded) | set(table) if graded.get(t) != table.get(t))
        out.append("the points table does not match the graded cells for: "
                   + ", ".join(f"`{t}` (table {table.get(t)}, cells {graded.get(t)})" for t in wrong))

    numbers = [n for n, _ in parts]
    if numbers != list(range(1, len(numbers) + 1)):
        out.append(f"the parts must be numbered ## 1., ## 2., ... in order (found {numbers})")
    names = [name for _, name in parts]
    figure = [i for i, name in enumerate(names) if name.startswith("Figure")]
    together = [i for i, name in enumerate(names) if name.startswith("Putting it together")]
    if not figure:
        out.append("no part `## n. Figure: ...`")
    if not together:
        out.append("no part `## n. Putting it together`")
    locked = [_meta(c).get("grade_id", "") for c in cells if _kind(c) == "locked"]
    if not any(g.endswith("figure") for g in locked):
        out.append("no locked figure cell (a grade_id ending in `figure`)")
    if "putting_it_together" not in locked:
        out.append("no locked `putting_it_together` cell")
    elif not any(WHEN_WRITTEN in c.source for c in cells if _meta(c).get("grade_id") == "putting_it_together"):
        out.append(f"the `putting_it_together` cell must run the student's code under `with {WHEN_WRITTEN}...):`, "
                   "so that an unwritten exercise does not stop Run All")
    if not (cells[-1].cell_type == "markdown" and cells[-1].source.startswith("## Summary")):
        out.append("the last cell must be `## Summary`")
    return out


def _headings(cells):
    return [h for c in cells if c.cell_type == "markdown" for h in HEADING3.findall(c.source)]

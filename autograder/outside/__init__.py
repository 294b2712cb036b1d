"""What runs outside a student's kernel, in the instructor's process or the grader's (its workers and
their sandbox launcher), and so is trusted: the oracles, the verdicts, the grader and its worker, the
sandbox, the build, the reports and the CLI.

Two of them are also imported into a kernel that runs test cells: ``oracles`` (lazily, by
:mod:`autograder.inside.checks`) and ``torch_engine`` (by unit 1.8's hidden tests). The student
repository ships ``oracles`` alone of this package, for self-study.
"""
import sys

# jsonschema imports rfc3987_syntax, when installed, for its "iri" format: that import compiles some
# 35 lark grammars, 1.5 of the 1.6 CPU-seconds of `import jsonschema` (python-jsonschema/jsonschema
# #1428), paid by every process here that reads a notebook (nbformat validates with jsonschema):
# each grading worker and each `autograder` command. No schema that nbformat or nbgrader checks
# uses that format. Blocked, jsonschema skips that one checker, as when the package is missing.
sys.modules.setdefault("rfc3987_syntax", None)

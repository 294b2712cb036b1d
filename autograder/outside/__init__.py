"""What runs outside a student's kernel, in the instructor's process or the grader's (its workers and
their sandbox launcher), and so is trusted: the oracles, the verdicts, the grader and its worker, the
sandbox, the build, the reports and the CLI.

Two of them are also imported into a kernel that runs test cells: ``oracles`` (lazily, by
:mod:`autograder.inside.checks`) and ``torch_engine`` (by unit 1.8's hidden tests). The student
repository ships ``oracles`` alone of this package, for self-study.
"""

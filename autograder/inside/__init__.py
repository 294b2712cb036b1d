"""What runs inside a student's kernel, or the sandbox that holds it: the checks that test cells call
(``checks``), the recording side of trusted verdicts (``recording``, ``wire``), the kernel factory
(``zygote``) and the learner's progress page (``progress``, in a learner's own Jupyter).

"Inside" means next to untrusted student code: the student's notebook can read and, unsealed, change
everything here, so nothing in this package decides a trusted verdict (that is
:mod:`autograder.outside.verdicts`). At import time a module here imports only the standard library,
numpy and other ``inside`` modules (``progress`` also nbformat and nbclient, which a learner's Jupyter
has); ``checks`` imports :mod:`autograder.outside.oracles` and torch lazily, when a check first needs
them. The student repository ships this package (``autograder student-repo``).
"""

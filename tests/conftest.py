from autograder.outside.course import use_venv_path

# nbgrader runs `alembic` as a subprocess; it must find the venv's copy.
use_venv_path()

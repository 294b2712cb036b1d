from scheduling import LONGEST_FIRST, xdist_group

from autograder.outside.course import new_gradebooks_in_process, use_venv_path

# nbgrader runs `alembic` as a subprocess; it must find the venv's copy.
use_venv_path()
# nbgrader's Gradebook reads its schema's version here, not in an `alembic` subprocess (some 200 a run)
new_gradebooks_in_process()


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(xdist_group(item), len(rank)))  # stable: a group keeps its own order

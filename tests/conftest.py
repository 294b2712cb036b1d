from scheduling import LONGEST_FIRST, xdist_group

from autograder.outside.course import use_venv_path

# nbgrader runs `alembic` as a subprocess; it must find the venv's copy.
use_venv_path()


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(xdist_group(item), len(rank)))  # stable: a group keeps its own order

"""The grader's executor reads every execute_reply at once, even while an ipywidgets Output
widget makes nbclient send comm messages on the shell channel (issue 8's stall, autograder/outside/execute.py).

With nbclient's own Output mimic, the cell below waited for its whole time limit in 20 of 300
runs on this machine (benchmarks/RESULTS.md); with :class:`autograder.inside.output_widget.OutputWidget`, in
none. Removing the fix makes this test fail with a probability above 99% ((1 - 20/300) ** 100 < 0.001).
"""
import time

import nbformat
from nbclient import NotebookClient

from autograder.inside.output_widget import OutputWidget
from autograder.outside.execute import BoundedExecute

CELL_TIMEOUT = 3  # seconds: the stalled cell waits exactly this long; a normal one takes about 0.2 s here
RUNS = 100
SETUP = "import ipywidgets as widgets\nfrom IPython.display import display\nout = widgets.Output()\ndisplay(out)"
# each print inside the widget is one comm_msg from nbclient's mimic to the kernel, the last ones
# sent while the kernel's execute_reply arrives
CELL = "with out:\n    out.clear_output(wait=True)\n    for i in range(20):\n        print(i, flush=True)"


def test_the_grader_uses_the_fixed_output_widget():
    executor = BoundedExecute()
    NotebookClient.__init__(executor, nbformat.v4.new_notebook())  # as nbconvert's preprocess() does
    opened = {"content": {"comm_id": "c1", "data": {"state": {
        "_model_module": "@jupyter-widgets/output", "_model_name": "OutputModel", "outputs": []}}}}
    assert type(executor.on_comm_open_jupyter_widget(opened)) is OutputWidget


def test_no_cell_waits_for_its_time_limit_while_an_output_widget_syncs():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SETUP), nbformat.v4.new_code_cell(CELL)])
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3")
    client.widget_registry["@jupyter-widgets/output"]["OutputModel"] = OutputWidget
    slow = []
    with client.setup_kernel():
        client.execute_cell(nb.cells[0], 0)
        for run in range(RUNS):
            cell = nb.cells[1] = nbformat.v4.new_code_cell(CELL)
            started = time.monotonic()
            client.execute_cell(cell, 1)
            if time.monotonic() - started > CELL_TIMEOUT - 0.5:
                slow.append(run)
            assert cell.outputs == [], "the widget, not the cell, keeps what is printed inside it"
    assert not slow, f"runs {slow} of {RUNS} waited for the cell time limit although the kernel had answered"


def test_a_learners_progress_run_uses_it_too(monkeypatch, tmp_path):
    """autograder.inside.progress runs a learner's saved notebooks with the same mimic (its figures draw
    into Output widgets too)."""
    from autograder.inside import progress

    made = []

    class Spy(NotebookClient):
        def execute(self, **kwargs):
            made.append(self)
            raise RuntimeError("not run here")

    monkeypatch.setattr(progress, "NotebookClient", Spy)
    path = tmp_path / "1.1-unit" / "unit.ipynb"
    path.parent.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), path)
    progress.run_unit(path)
    assert made and made[0].widget_registry["@jupyter-widgets/output"]["OutputModel"] is OutputWidget


def test_nbgraders_metadata_schema_is_checked_once_here_and_still_refuses_bad_metadata():
    """The worker's nbgrader validates cell metadata without checking its schema file at every cell
    (autograder/outside/execute.py): the file is checked here, and bad metadata still fails."""
    import json
    from pathlib import Path

    import jsonschema
    import pytest
    from nbgrader.nbgraderformat import MetadataValidator, ValidationError
    from nbgrader.nbgraderformat import common

    schema = json.loads((Path(common.__file__).parent / "v3.json").read_text())
    jsonschema.validators.validator_for(schema).check_schema(schema)
    assert common.jsonschema.validate.__module__ == "autograder.outside.execute"
    good = nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": {
        "grade": True, "grade_id": "test_x", "locked": True, "points": 2, "schema_version": 3, "solution": False,
        "task": False}})
    MetadataValidator().validate_cell(good)
    for key, value in (("points", "two"), ("grade_id", 7), ("locked", "yes")):
        bad = nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": dict(good.metadata.nbgrader, **{key: value})})
        with pytest.raises(ValidationError):
            MetadataValidator().validate_cell(bad)

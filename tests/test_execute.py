"""The grader's executor reads every execute_reply at once, even while an ipywidgets Output
widget makes nbclient send comm messages on the shell channel (issue 8's stall, autograder/outside/execute.py).

With nbclient's own Output mimic, the cell below waited for its whole time limit in 20 of 300
runs on this machine (benchmarks/RESULTS.md); with :class:`autograder.inside.output_widget.OutputWidget`, in
none. Removing the fix makes this test fail with a probability above 99% ((1 - 20/300) ** 100 < 0.001).
"""
import time

import nbformat
from nbclient import NotebookClient

import kernels
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
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3", config=kernels.ipc_config())
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


class _FakeChannel:
    """A channel whose ``get_msg`` hands out prepared messages; ``queue.Empty`` stands for a wait that timed out."""

    def __init__(self, *messages):
        self.messages = list(messages)

    async def get_msg(self, timeout=None):
        import queue

        item = self.messages.pop(0)
        if item is queue.Empty:
            raise queue.Empty
        return item


def test_the_prompt_client_is_ready_at_its_requests_idle_status_and_asks_again_when_iopub_missed_it():
    """PromptKernelClient.wait_for_ready (autograder/outside/execute.py) returns at the idle status of its
    own kernel_info request, reading nothing past it; a reply whose status never comes on IOPub
    (IOPub not yet connected) makes it ask again, as jupyter_client's own does."""
    import asyncio
    import queue

    from autograder.outside.execute import PromptKernelClient

    asked = []
    client = PromptKernelClient()
    client.kernel_info = lambda: asked.append(f"ask-{len(asked)}") or asked[-1]
    reply = {"msg_type": "kernel_info_reply", "content": {"protocol_version": "5.3"}}

    def status(state, parent):
        return {"msg_type": "status", "content": {"execution_state": state}, "parent_header": {"msg_id": parent}}

    later = status("busy", "someone-else")
    client._shell_channel = _FakeChannel(reply, reply)
    client._iopub_channel = _FakeChannel(queue.Empty, status("idle", "someone-else"), status("busy", "ask-1"),
                                         status("idle", "ask-1"), later)
    asyncio.run(client.wait_for_ready(timeout=5))
    assert asked == ["ask-0", "ask-1"]
    assert client._iopub_channel.messages == [later], "it read past its request's idle status"


def test_the_prompt_manager_looks_for_a_killed_kernels_end_every_few_milliseconds(monkeypatch):
    """PromptKernelManager (autograder/outside/execute.py) waits for a kernel it killed by looking every
    ``poll_seconds``, not jupyter_client's 0.1 s: a process just sent SIGKILL is still there at
    the first look, and each notebook waited out one whole interval with nothing to do.
    (test_hostile's rlimits test runs a real kernel with it, from the worker's configuration.)"""
    import asyncio

    from autograder.outside.execute import PromptKernelManager

    looks = iter([True, True, False])
    slept = []

    async def alive():
        return next(looks)

    async def sleep(seconds):
        slept.append(seconds)

    km = PromptKernelManager()
    km._async_is_alive = alive
    monkeypatch.setattr(asyncio, "sleep", sleep)
    asyncio.run(km._async_wait())
    assert slept == [PromptKernelManager.poll_seconds] * 2
    assert PromptKernelManager.poll_seconds <= 0.005


def test_the_prompt_client_runs_a_kernel_and_retries_connections_soon():
    from jupyter_client import AsyncKernelManager
    import zmq

    from autograder.outside.execute import PromptKernelClient

    async def run():
        km = AsyncKernelManager(kernel_name="python3", config=kernels.ipc_config(),
                                client_class="autograder.outside.execute.PromptKernelClient")
        await km.start_kernel()
        kc = km.client()
        try:
            kc.start_channels()
            await kc.wait_for_ready(timeout=60)
            assert type(kc) is PromptKernelClient
            assert kc.shell_channel.socket.getsockopt(zmq.RECONNECT_IVL) == PromptKernelClient.reconnect_ms
            reply = await kc.execute_interactive("x = 6 * 7", timeout=60)
            assert reply["content"]["status"] == "ok"
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    import asyncio

    asyncio.run(run())


def test_the_worker_validates_the_graded_notebook_once_and_a_bad_one_still_fails():
    """nbconvert checks a notebook against the schema after each preprocessor unless told to check
    once, after the last: the worker tells it so (13 checks a notebook down to one), and a
    preprocessor that breaks the notebook still fails the export."""
    import pytest
    from nbconvert.exporters import NotebookExporter
    from nbconvert.preprocessors import Preprocessor

    from autograder.outside import worker

    seen = []

    class Breaks(Preprocessor):
        def preprocess(self, nb, resources):
            seen.append(len(nb.cells))
            nb.cells[0]["outputs"] = "not a list"
            return nb, resources

    class Counts(Preprocessor):
        def preprocess(self, nb, resources):
            seen.append(nb.cells[0]["outputs"])
            return nb, resources

    config = worker.grading_config(dict(cell_timeout=60, assignment="1.1-affine-logits"))
    assert config.Exporter.optimistic_validation is True
    exporter = NotebookExporter(config=config)
    exporter.register_preprocessor(Breaks(), enabled=True)
    exporter.register_preprocessor(Counts(), enabled=True)  # runs: nothing checked between the two
    with pytest.raises(nbformat.ValidationError):
        exporter.from_notebook_node(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]))
    assert seen == [1, "not a list"]


def test_a_graded_kernels_flush_goes_through_the_io_thread_only_when_something_waits(monkeypatch):
    """autograder.inside.zygote's OutStream.flush: ipykernel's own (which hands the flush to its I/O
    thread and waits) when a stream holds text or echoes, or is of an ipykernel without per-parent
    buffers; nothing otherwise."""
    from collections import defaultdict
    from io import StringIO
    from types import SimpleNamespace

    from autograder.inside import zygote

    flushed = []
    monkeypatch.setattr(zygote, "_flush_through_io_thread", flushed.append)
    empty = SimpleNamespace(_buffers=defaultdict(StringIO), echo=None)
    written = SimpleNamespace(_buffers=defaultdict(StringIO), echo=None)
    written._buffers[frozenset()].write("x")
    echoing = SimpleNamespace(_buffers=defaultdict(StringIO), echo=StringIO())
    older = SimpleNamespace(echo=None)
    for stream in (empty, written, echoing, older):
        zygote._flush_if_written(stream)
    assert flushed == [written, echoing, older]

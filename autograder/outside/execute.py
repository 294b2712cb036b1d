"""nbgrader's ``Execute`` preprocessor with a ceiling on the output a cell may leave in the worker.

nbclient keeps every output message of a cell in memory until the notebook is written, and
nbgrader's ``LimitOutput`` trims it only afterwards: a loop that prints for a minute would fill
the grading worker. :class:`BoundedExecute` keeps a cell's outputs until they add up to
``max_output_bytes``; past that it drops them, leaving one notice per stream, so a cell that
wrote to stderr still shows stderr (nbgrader gives no points to a test cell that does).
Errors are always kept, cut to the same size, because they decide the grade.

:class:`~autograder.inside.output_widget.OutputWidget` replaces nbclient's mimic of the ipywidgets ``Output`` widget, which every
unit's figure cell draws into. nbclient's mimic answers each output captured in the widget with
a ``comm_msg`` on the shell channel, sent through ``Session.send``, which sends on a *blocking
shadow* of the client's asyncio socket (jupyter/jupyter_client#1059, jupyter/nbclient#312). That
raw send consumes the socket's edge-triggered wake-up, unseen by the asyncio socket on which
nbclient is awaiting the cell's ``execute_reply``: when the reply reaches the socket during that
send, it waits there, unread, until the cell time limit ends the wait (the 60 s stall of
``benchmarks/RESULTS.md``). Sending through the asyncio socket itself lets pyzmq check the
socket again for the waiting poll, so the reply is read at once.

A graded notebook skips its :func:`closing_cells`: the given cells after its last graded code cell
(each unit's figure and its putting-it-together example), which no score depends on and whose
outputs no feedback shows. They took 44 ms (1.4) to 122 ms (1.8, whose figure trains the spiral
model again) of a reference notebook's grading, one worker on a quiet machine. A cell that the
student added after them still runs, as any other.

:class:`ResetCellMetadata` runs first: nbgrader restores the text of locked and test cells,
but not their metadata, and nbclient skips a cell tagged ``skip-execution`` (a test cell that
never ran has no error, hence full marks). It gives every locked and test cell the metadata of
the source notebook's cell, and strips the tags that steer execution from every other cell.

:class:`PromptKernelClient` is nbclient's kernel client, ready as soon as the kernel is. Two waits of
jupyter_client's cost each notebook 0.2-0.5 s of nothing in the grader: the client's sockets
connect before the forked kernel has bound its own, and ZeroMQ tries again only after its
reconnect interval (100 ms by default); and ``wait_for_ready``, after the kernel's
``kernel_info_reply``, reads IOPub until it has been quiet for 0.2 s. :class:`PromptKernelManager`
removes the same kind of wait at the kernel's end: jupyter_client looks every 0.1 s whether a
kernel it has just killed is gone, and one just sent SIGKILL never is at the first look, so
each notebook waited 0.1 s with both the worker and its kernel idle (measured: 0.10 of the 0.85
s that a reference notebook of 1.2 took, one worker on a quiet machine).

nbgrader validates each cell's nbgrader metadata with ``jsonschema.validate``, which checks the
schema itself first, at every cell, twice a notebook: 0.2 of nbgrader's 0.3 CPU-seconds of
metadata checks per notebook. In the worker (which imports this module), nbgrader's validator
validates against its schema without checking that fixed file again
(:func:`validate_against_a_checked_schema`; the test suite checks the file once).
"""
import copy
import json
import queue
import time
import types

import jsonschema
import nbformat
import zmq.asyncio
from jupyter_client import AsyncKernelManager, BlockingKernelClient
from jupyter_client.asynchronous import AsyncKernelClient
from nbclient.client import timestamp
from nbclient.util import run_sync
from nbgrader import utils as nbutils
from nbgrader.converters import Autograde
from nbgrader.nbgraderformat import common as nbgrader_metadata
from nbgrader.preprocessors import Execute, NbGraderPreprocessor, OverwriteCells, SaveAutoGrades
from traitlets import Bool, Integer, Unicode, default

from autograder.inside import output_widget

from .gradebook import OverwriteCellsPrefetched, SaveAutoGradesAtOnce

def validate_against_a_checked_schema(instance, schema):
    """``jsonschema.validate(instance, schema)``, the same errors raised, without ``check_schema``."""
    error = jsonschema.exceptions.best_match(jsonschema.validators.validator_for(schema)(schema).iter_errors(instance))
    if error is not None:
        raise error


nbgrader_metadata.jsonschema = types.SimpleNamespace(validate=validate_against_a_checked_schema)

# The grader faults (verdicts.GraderFault) of the notebook being graded, which the worker reads
# here (nbgrader's log also holds text of the notebook's); it empties the list before each notebook.
FAULTS = []
GRADER_FAULT = "the grader failed on this notebook, through no fault of the submission: "

# Cell tags that nbclient reads to decide whether, and how, a cell runs.
STEERING_TAGS = frozenset({"skip-execution", "raises-exception"})


def _size(content):
    """The bytes an output message adds to the notebook, near enough."""
    if "text" in content:
        return len(content["text"])
    if "traceback" in content:
        return len(content["evalue"]) + sum(len(line) for line in content["traceback"])
    return sum(len(v) if isinstance(v, str) else len(json.dumps(v)) for v in content.get("data", {}).values())


def closing_cells(nb):
    """The indices of the given (locked, ungraded) code cells after the notebook's last graded code
    cell: each unit's figure and its putting-it-together example. No score depends on what they do,
    and feedback shows no output but a test cell's, so a graded notebook does not run them."""
    last = max((i for i, c in enumerate(nb.cells) if c.cell_type == "code" and nbutils.is_grade(c)),
               default=len(nb.cells))
    return {i for i, c in enumerate(nb.cells) if i > last and c.cell_type == "code" and nbutils.is_locked(c)}


class BoundedExecute(Execute):
    """nbgrader's Execute, keeping at most ``max_output_bytes`` of each cell's outputs, with the
    Output-widget mimic that reads every execute_reply at once (:mod:`autograder.inside.output_widget`),
    and without running the :func:`closing_cells` (a cell the student added there still runs)."""

    _closing = frozenset()  # (set for each notebook by preprocess)

    max_output_bytes = Integer(
        1 << 20, help="Output a cell may keep; past it, outputs are dropped and a notice says so.").tag(config=True)

    trusted_tests = Bool(
        False, help="Run each test cell's code in the grader's process, against proxies of the student's "
                    "names (autograder.outside.verdicts), instead of sending it to the student's kernel.").tag(config=True)

    source_notebook = Unicode(
        "", help="The assignment's source notebook: with trusted_tests, the checks run its locked cells' code "
                 "in the grader (checks.locked_cell) to compute expected values.").tag(config=True)

    def on_comm_open_jupyter_widget(self, msg):
        # set here, not in __init__: nbconvert's preprocess() runs NotebookClient.__init__ again,
        # which puts nbclient's own mimic back in the registry
        output_widget.install(self)
        return super().on_comm_open_jupyter_widget(msg)

    def reset_execution_trackers(self):
        super().reset_execution_trackers()
        self._used = {}  # cell index: output bytes seen
        self._noticed = set()  # (cell index, stream name) with a notice
        self._remote = None
        self._namespace = {}

    def preprocess_cell(self, cell, resources, index):
        if index in self._closing:
            return cell, resources
        if not (self.trusted_tests and cell.cell_type == "code" and nbutils.is_grade(cell)
                and not nbutils.is_solution(cell)):
            return super().preprocess_cell(cell, resources, index)
        from autograder.inside import checks  # the checks and torch: loaded by the worker at its first trusted test
        from . import verdicts

        if self._remote is None:
            client = BlockingKernelClient()
            client.load_connection_info(self.km.get_connection_info())
            client.start_channels()
            self._remote = verdicts.Remote(client, self.timeout or 600, self.km.get_connection_info(),
                                          self.source_notebook or None)
        seeds = [a[len("--seed="):] for a in self.extra_arguments if a.startswith("--seed=")]
        started = timestamp()
        try:
            with checks.student_seed_of(int(seeds[-1]) if seeds else None):
                outputs = verdicts.run_test_cell(self._remote, cell.source, self._namespace)
            cell.outputs = [nbformat.from_dict(o) for o in outputs]
        except verdicts.TestTimeout:
            run_sync(self.km.interrupt_kernel)()
            self._remote.end()
            cell.outputs = [nbformat.from_dict(verdicts.error_output(
                verdicts.TestTimeout(f"the test ran past the time limit ({self.timeout} s)")))]
        except verdicts.GraderFault as fault:  # no verdict: nbgrader fails the notebook
            FAULTS.append(str(fault))
            raise RuntimeError(GRADER_FAULT + str(fault)) from fault
        cell.execution_count = index
        if self.record_timing:  # as nbclient records a cell's run: when the test began and ended
            cell.metadata["execution"] = {"iopub.status.busy": started, "shell.execute_reply": timestamp()}
        return cell, resources

    def preprocess(self, nb, resources=None, km=None):
        self._closing = closing_cells(nb)
        try:
            return super().preprocess(nb, resources, km)
        finally:
            if self._remote is not None:
                self._remote.client.stop_channels()
                self._remote = None

    def output(self, outs, msg, display_id, cell_index):
        content = msg["content"]
        used = self._used.get(cell_index, 0) + _size(content)
        self._used[cell_index] = used
        if used <= self.max_output_bytes:
            return super().output(outs, msg, display_id, cell_index)
        if msg["msg_type"] == "error":
            limit = self.max_output_bytes
            # the last lines say what went wrong; LimitOutput keeps 100 lines anyway
            cut = dict(content, evalue=content["evalue"][:limit], traceback=[t[:limit] for t in content["traceback"][-100:]])
            return super().output(outs, dict(msg, content=cut), display_id, cell_index)
        name = content.get("name", "stdout")
        if (cell_index, name) in self._noticed:
            return None
        self._noticed.add((cell_index, name))
        notice = nbformat.v4.new_output(
            "stream", name=name, text=f"\n[the grader dropped this cell's output past {self.max_output_bytes} bytes]\n")
        outs.append(notice)
        return notice


class PromptKernelClient(AsyncKernelClient):
    """nbclient's client (``AsyncKernelManager.client_class``), without jupyter_client's idle waits at a kernel's start."""

    reconnect_ms = 10  # how soon a socket that found no kernel listening tries again

    @default("context")
    def _context_default(self):
        self._created_context = True
        context = zmq.asyncio.Context()
        context.setsockopt(zmq.RECONNECT_IVL, self.reconnect_ms)  # the default for each socket it makes
        return context

    async def wait_for_ready(self, timeout=None):
        """Ask for ``kernel_info`` until the reply comes on shell and its ``idle`` status on IOPub (which
        shows IOPub connected), as jupyter_client does; then stop: that status is the last message
        the kernel sends for the request, so there is nothing on IOPub to wait out."""
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        asked = set()
        while True:
            asked.add(self.kernel_info())
            try:
                reply = await self.shell_channel.get_msg(timeout=1)
            except queue.Empty:
                reply = None
            if reply is not None and reply["msg_type"] == "kernel_info_reply":
                try:
                    while True:  # a status that never comes means IOPub missed it: ask again
                        msg = await self.iopub_channel.get_msg(timeout=0.2)
                        if (msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle"
                                and msg["parent_header"].get("msg_id") in asked):
                            self._handle_kernel_info_reply(reply)
                            return
                except queue.Empty:
                    pass
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:g} seconds")


class PromptKernelManager(AsyncKernelManager):
    """nbclient's kernel manager (``Execute.kernel_manager_class``), done as soon as the kernel's process is."""

    poll_seconds = 0.002  # how often it looks whether the killed process has ended (jupyter_client: 0.1)

    async def _async_wait(self, pollinterval=0.1):
        await super()._async_wait(pollinterval=min(pollinterval, self.poll_seconds))


class ResetCellMetadata(NbGraderPreprocessor):
    """Every locked and test cell gets its metadata back from the source notebook (nbgrader's
    ``nbgrader`` entry, which nbgrader itself restored, stays); every other cell loses the tags
    that steer execution (:data:`STEERING_TAGS`) and any cell-level ``execution`` settings."""

    source_notebook = Unicode("", help="The assignment's source notebook, whose cell metadata is trusted.").tag(config=True)

    def preprocess(self, nb, resources):
        source = nbformat.read(self.source_notebook, as_version=4)
        trusted = {c.metadata["nbgrader"]["grade_id"]: c.metadata for c in source.cells
                   if nbutils.is_locked(c) or nbutils.is_grade(c)}
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in trusted:
                restored = copy.deepcopy(trusted[grade_id])
                if "nbgrader" in cell.metadata:
                    restored["nbgrader"] = cell.metadata["nbgrader"]
                cell.metadata = restored
                continue
            cell.metadata.pop("execution", None)
            if "tags" in cell.metadata:
                tags = cell.metadata.pop("tags")
                if isinstance(tags, list):
                    cell.metadata["tags"] = [t for t in tags if isinstance(t, str) and t not in STEERING_TAGS]
        return nb, resources


def _replaced(kind, replacements):
    """nbgrader's default list of ``Autograde.<kind>_preprocessors``, each class of ``replacements`` swapped."""
    return [replacements.get(p, p) for p in Autograde.class_traits()[f"{kind}_preprocessors"].default()]


# nbgrader's own autograde pipeline: the metadata reset first, BoundedExecute in place of Execute, and
# the gradebook's lookups of each notebook read in one go (autograder.outside.gradebook)
SANITIZE_PREPROCESSORS = _replaced("sanitize", {OverwriteCells: OverwriteCellsPrefetched})
AUTOGRADE_PREPROCESSORS = [ResetCellMetadata] + _replaced(
    "autograde", {Execute: BoundedExecute, SaveAutoGrades: SaveAutoGradesAtOnce})

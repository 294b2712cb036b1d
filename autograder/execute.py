"""nbgrader's ``Execute`` preprocessor with a ceiling on the output a cell may leave in the worker.

nbclient keeps every output message of a cell in memory until the notebook is written, and
nbgrader's ``LimitOutput`` trims it only afterwards: a loop that prints for a minute would fill
the grading worker. :class:`BoundedExecute` keeps a cell's outputs until they add up to
``max_output_bytes``; past that it drops them, leaving one notice per stream, so a cell that
wrote to stderr still shows stderr (nbgrader gives no points to a test cell that does).
Errors are always kept, cut to the same size, because they decide the grade.
"""
import json

import nbformat
from nbgrader.converters import Autograde
from nbgrader.preprocessors import Execute
from traitlets import Integer


def _size(content):
    """The bytes an output message adds to the notebook, near enough."""
    if "text" in content:
        return len(content["text"])
    if "traceback" in content:
        return len(content["evalue"]) + sum(len(line) for line in content["traceback"])
    return sum(len(v) if isinstance(v, str) else len(json.dumps(v)) for v in content.get("data", {}).values())


class BoundedExecute(Execute):
    """nbgrader's Execute, keeping at most ``max_output_bytes`` of each cell's outputs."""

    max_output_bytes = Integer(
        1 << 20, help="Output a cell may keep; past it, outputs are dropped and a notice says so.").tag(config=True)

    def reset_execution_trackers(self):
        super().reset_execution_trackers()
        self._used = {}  # cell index: output bytes seen
        self._noticed = set()  # (cell index, stream name) with a notice

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


# nbgrader's own autograde pipeline, with this class in place of Execute.
AUTOGRADE_PREPROCESSORS = [BoundedExecute if p is Execute else p
                           for p in Autograde.class_traits()["autograde_preprocessors"].default()]

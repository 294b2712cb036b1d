"""The Output-widget mimic that every notebook run of this package uses: the grader's
(:mod:`autograder.outside.execute`) and a learner's progress run (:mod:`autograder.inside.progress`).

nbclient's own mimic sends its ``comm_msg`` through ``Session.send`` on a blocking copy of the
asyncio shell socket. That send uses up the socket's wake-up, so an ``execute_reply`` arriving
meanwhile sits unread until the cell's time limit (jupyter_client#1059, nbclient#311/#312).
"""
from nbclient import output_widget
from nbclient.jsonutil import json_clean

OUTPUT_MODEL = ("@jupyter-widgets/output", "OutputModel")  # where a client's widget registry holds the mimic


class OutputWidget(output_widget.OutputWidget):
    """nbclient's Output-widget mimic, sending its comm messages through the shell channel's own
    (asyncio) socket rather than a blocking shadow of it, so that no execute_reply goes unnoticed."""

    def _publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
        session = self.kernel_client.session
        content = json_clean(dict(data=data or {}, comm_id=self.comm_id, **keys))
        msg = session.msg(msg_type, content=content, parent=self.parent_header, metadata=metadata or {})
        self.kernel_client.shell_channel.socket.send_multipart(session.serialize(msg) + list(buffers or []))


def install(client):
    """Put :class:`OutputWidget` in ``client``'s widget registry, in place of nbclient's."""
    client.widget_registry[OUTPUT_MODEL[0]][OUTPUT_MODEL[1]] = OutputWidget
    return client

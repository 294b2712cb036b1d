"""Kernels that the tests start themselves, on ZeroMQ's ipc transport.

On tcp, jupyter_client picks a kernel's five ports by binding each to port 0 and letting it go,
and the kernel binds them a moment later. Under `make test`, the other xdist workers' kernels and
connections take ephemeral ports all the time: a kernel that finds one of its ports taken exits
before it answers ("Kernel died before replying to kernel_info", as test_verdicts' module kernel
did once in CI at stop 23; nbmake#129 is the same race). An ipc kernel's sockets are files in a
folder that this process made, so no other process can take them. The grading sandbox's kernels
are on ipc for the same reason (``sandbox.Sandbox.prepare``).
"""
import atexit
import shutil
import tempfile

import jupyter_client
from traitlets.config import Config

_folder = []


def ipc_config():
    """A traitlets Config that puts the kernel managers given it (nbclient's, or one made here) on
    ipc, with their sockets under a folder of this process's own (jupyter_client numbers the
    socket files after ``ip``, skipping any that exist)."""
    if not _folder:
        _folder.append(tempfile.mkdtemp(prefix="kernels-"))
        atexit.register(shutil.rmtree, _folder[0], ignore_errors=True)
    config = Config()
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = f"{_folder[0]}/kernel"
    return config


def start_new_kernel():
    """jupyter_client's ``start_new_kernel`` for ``python3``, on ipc: a started manager and a ready
    client."""
    km = jupyter_client.KernelManager(kernel_name="python3", config=ipc_config())
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
    except RuntimeError:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        raise
    return km, kc

"""The students' side: notebooks that open clean, the student repository, solutions, progress."""
import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import start_new_kernel

from autograder import build
from autograder.course import authored

UNITS = authored()


@pytest.fixture(scope="module")
def kernel_metadata():
    """What JupyterLab writes into a notebook when its kernel starts: the kernelspec's name,
    display name and language, and the kernel's language_info (from its kernel_info reply)."""
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        kc.kernel_info()
        language_info = kc.get_shell_msg(timeout=30)["content"]["language_info"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    spec = KernelSpecManager().get_kernel_spec("python3")
    return {"kernelspec": {"name": "python3", "display_name": spec.display_name, "language": spec.language},
            "language_info": language_info}


@pytest.mark.parametrize("layer", ["source", "release"])
def test_notebooks_open_unmodified(kernel_metadata, layer):
    """JupyterLab sets both keys on kernel start and marks the notebook modified unless the new
    value deep-equals the old one: a notebook opened and closed unrun must not ask to save."""
    for a in UNITS:
        path = a.source_path() if layer == "source" else a.release_path()
        meta = nbformat.read(path, as_version=4).metadata
        for key, want in kernel_metadata.items():
            assert meta[key] == want, f"{path}: metadata {key} is {meta[key]!r}; the kernel reports {want!r}"


def test_build_metadata_is_what_ipykernel_reports(kernel_metadata):
    assert build.KERNELSPEC == kernel_metadata["kernelspec"]
    assert build.LANGUAGE_INFO == kernel_metadata["language_info"], (
        "the notebooks are built for another Python than this machine's: update build.PYTHON_VERSION "
        "and the python pin in environment.yml, then `make build`")

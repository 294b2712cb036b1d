"""A throwaway PostgreSQL server on loopback, for tests that run the grader on both databases.

It uses the machine's PostgreSQL binaries (Debian package ``postgresql``; the Makefile
installs it when missing and run as root). PostgreSQL refuses to run as root, so as root the
server runs as the ``postgres`` user.
"""
import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path


def _binary(name):
    found = shutil.which(name)
    if found:
        return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True):
        return str(candidate)
    return None


def available():
    return all(_binary(n) for n in ("initdb", "pg_ctl"))


def free_port():
    """A TCP port on loopback that is free now (for a test's own server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def server():
    """Yield a ``postgresql://`` URL for a fresh server; stop it and remove its data afterwards."""
    as_root = os.geteuid() == 0
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    tmp = Path(tempfile.mkdtemp(prefix="pg-"))
    if as_root:
        shutil.chown(tmp, "postgres")
    data, port = tmp / "data", free_port()
    run = lambda *cmd: subprocess.run(prefix + list(cmd), check=True, capture_output=True, text=True)  # noqa: E731
    run(_binary("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    run(_binary("pg_ctl"), "-D", str(data), "-w", "-l", str(tmp / "log"),
        "-o", f"-h 127.0.0.1 -p {port} -k {tmp} -c fsync=off", "start")
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(prefix + [_binary("pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)

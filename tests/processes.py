"""Finding host processes by their command line, for the tests that check what a run leaves behind."""
import psutil


def processes_with(marker):
    """The pids of the live (not zombie) host processes whose command line contains ``marker``."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if marker in " ".join(p.info["cmdline"] or ()) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p.pid)
        except psutil.NoSuchProcess:
            pass
    return found

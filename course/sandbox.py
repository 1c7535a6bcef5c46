"""Run one command on an untrusted submission, in a bubblewrap sandbox it cannot leave (used by course/grade.py).

What the sandbox sees (``bwrap``, Debian's ``bubblewrap``): the system's ``/usr`` (and the ``/bin``,
``/lib`` links into it), a few files of ``/etc``, the Python environment and the course's package
``attention_lab/``, all read-only; the submission and the grading spec, read-only, under
:data:`INSIDE`\\ ``/in``; one empty writable folder, :data:`INSIDE`\\ ``/out``; a private ``/tmp``, its own
``/proc`` and ``/dev``. Nothing else of the machine exists for it: not the folder of submissions, not the
gradebook, not the grader's command line. It gets no network (``--unshare-all``: its own network,
process, user, IPC and hostname namespaces), no capabilities, and cannot make user namespaces of its own.
Its processes die with it (``--die-with-parent``, and the process namespace ends with its first process).
Limits (``prlimit``): address space (:data:`MEMORY`), size of a file written (:data:`FILE_SIZE`), no core
files; the private ``/tmp`` holds at most :data:`TMP_SIZE`; and a wall-clock limit, after which the whole
process group is killed. The writable folder has no total limit beyond the size of each file.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

INSIDE = Path("/sandbox")
MEMORY = 4 * 2**30  # bytes of address space; torch and any chapter run in under 2 GiB of it
FILE_SIZE = 512 * 2**20  # the largest file the submission may write
TMP_SIZE = 512 * 2**20  # bytes the private /tmp may hold (it lives in memory)
TIMEOUT = 20.0  # seconds a submission may run
ETC = ("ld.so.cache", "passwd", "group", "nsswitch.conf", "localtime", "fonts", "mime.types")


class SandboxError(RuntimeError):
    """No sandbox can be made here; the message says why and what to do."""


@dataclass
class Outcome:
    returncode: int | None  # None: killed at the time limit
    seconds: float
    log: str  # the end of what it printed


def available() -> str | None:
    """None when bubblewrap can sandbox here; else the reason it cannot, in one line."""
    if not sys.platform.startswith("linux"):
        return f"sandboxing needs Linux (bubblewrap); this is {sys.platform}"
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (Debian/Ubuntu: sudo apt-get install -y bubblewrap)"
    if shutil.which("prlimit") is None:
        return "prlimit is not installed (it comes with util-linux)"
    probe = subprocess.run(["bwrap", "--unshare-all", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
                            "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return f"bubblewrap cannot make a sandbox here: {probe.stderr.strip()[:200]}"
    return None


def _system() -> list[str]:
    args = []
    for name in ("bin", "lib", "lib64", "sbin", "usr"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def _python() -> list[str]:
    """Read-only binds of the running Python: its environment and the installation it was made from."""
    args, seen = [], []
    for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))):
        real = os.path.realpath(prefix)
        if real.startswith("/usr") or any(real == s or real.startswith(s + "/") for s in seen):
            continue
        seen.append(real)
        args += ["--ro-bind", real, real]
    return args


def python() -> str:
    """The Python to run inside: the environment's own, by its real path (the one the sandbox binds)."""
    venv = Path(os.path.realpath(sys.prefix)) / "bin" / "python"
    return str(venv) if venv.exists() else os.path.realpath(sys.executable)


def probe(root: Path, scratch: Path) -> None:
    """Make one sandbox that starts Python and imports torch; raise SandboxError, with its output, if none can."""
    inbox, outbox = scratch / "probe-in", scratch / "probe-out"
    inbox.mkdir()
    outbox.mkdir()
    cmd = command([python(), "-s", "-c", "import torch, attention_lab.checks"], root=root, inbox=inbox, outbox=outbox)
    outcome = run(cmd, timeout=120, log=scratch / "probe.txt")
    if outcome.returncode != 0:
        raise SandboxError(f"the sandbox does not start Python here:\n{outcome.log}")


def command(argv: list[str], *, root: Path, inbox: Path, outbox: Path, memory: int = MEMORY) -> list[str]:
    """The full command: ``argv`` run in the sandbox, with ``inbox`` read-only and ``outbox`` writable."""
    package = root / "attention_lab"
    limits = ["prlimit", f"--as={memory}", f"--fsize={FILE_SIZE}", "--core=0", "--"]
    bwrap = ["bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--disable-userns",
             "--cap-drop", "ALL", "--proc", "/proc", "--dev", "/dev",
             "--size", str(TMP_SIZE), "--tmpfs", "/tmp",  # first: binds may be under /tmp
             *_system(), *_python(), "--ro-bind", str(package), str(package),
             "--ro-bind", str(inbox), str(INSIDE / "in"), "--bind", str(outbox), str(INSIDE / "out"),
             "--chdir", "/tmp", "--clearenv",
             "--setenv", "PATH", f"{Path(python()).parent}:/usr/bin:/bin",
             "--setenv", "HOME", "/tmp", "--setenv", "PYTHONPATH", str(root),
             "--setenv", "MPLBACKEND", "Agg", "--setenv", "MPLCONFIGDIR", "/tmp/matplotlib",
             "--setenv", "IPYTHONDIR", "/tmp/ipython", "--setenv", "OMP_NUM_THREADS", "1",
             "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--"]
    return [*limits, *bwrap, *argv]


def run(cmd: list[str], *, timeout: float = TIMEOUT, log: Path, env: dict | None = None,
        cwd: Path | None = None) -> Outcome:
    """Run ``cmd`` in a new session, its output into ``log``; kill the whole session at ``timeout``."""
    import time

    start = time.monotonic()
    with open(log, "wb") as sink:
        process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                   start_new_session=True, env=env, cwd=cwd)
        try:
            returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            returncode = None
            # the session: bwrap, and with it (die-with-parent, the process namespace) all inside it
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    with open(log, "rb") as source:
        source.seek(max(0, log.stat().st_size - 4000))
        tail = source.read().decode("utf-8", "replace")
    return Outcome(returncode, time.monotonic() - start, tail)

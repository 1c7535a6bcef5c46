"""The bubblewrap sandbox a submitted notebook runs in (used by course/grade.py, through the judge).

What it sees and what it may do are in book/instructors.md ("What is defended, and what is not"): the
system, the Python environment and the rules' package read-only, the judge's files under
:data:`INSIDE`\\ ``/grader``, a private ``/tmp`` in memory; no network; limits set by ``prlimit``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

INSIDE = Path("/sandbox")
MEMORY = 4 * 2**30  # bytes of address space; torch and any chapter run in under 2 GiB of it
FILE_SIZE = 256 * 2**20  # the largest file the submission may write (more than /tmp holds: ENOSPC first)
TMP_SIZE = 128 * 2**20  # bytes the private /tmp may hold (it lives in memory)
ETC = ("ld.so.cache", "passwd", "group", "nsswitch.conf", "localtime", "fonts", "mime.types")


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


def command(argv: list[str], *, root: Path, grader: Path, memory: int = MEMORY) -> list[str]:
    """``argv`` run in the sandbox, with ``root/attention_lab`` (the rules' package) and ``grader`` (the
    judge's files) read-only, ``grader`` at :data:`INSIDE`\\ ``/grader``."""
    package = root / "attention_lab"
    limits = ["prlimit", f"--as={memory}", f"--fsize={FILE_SIZE}", "--core=0", "--"]
    bwrap = ["bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--disable-userns",
             "--cap-drop", "ALL", "--proc", "/proc", "--dev", "/dev",
             "--size", str(TMP_SIZE), "--tmpfs", "/tmp",  # first: binds may be under /tmp
             *_system(), *_python(), "--ro-bind", str(package), str(package),
             "--ro-bind", str(grader), str(INSIDE / "grader"),
             "--chdir", "/tmp", "--clearenv",
             "--setenv", "PATH", f"{Path(python()).parent}:/usr/bin:/bin",
             "--setenv", "HOME", "/tmp", "--setenv", "PYTHONPATH", str(root),
             "--setenv", "MPLBACKEND", "Agg", "--setenv", "MPLCONFIGDIR", "/tmp/matplotlib",
             "--setenv", "IPYTHONDIR", "/tmp/ipython", "--setenv", "OMP_NUM_THREADS", "1",
             "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--"]
    return [*limits, *bwrap, *argv]

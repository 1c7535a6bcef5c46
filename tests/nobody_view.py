"""Run a command, as root, where the user ``nobody`` can read what it must: for the Gradescope runner's test.

    python tests/nobody_view.py --reach PATH [PATH ...] [--keep PATH ...] -- COMMAND ...

``attention_lab/gradescope.py`` drops to ``nobody``, as on Gradescope, and that user must read this
Python, its packages and the course. A checkout under a folder only its owner may enter (``mktemp -d``,
many home folders, ``/root``) or made under ``umask 077`` keeps it out, and the runner dies with exit
status 126. So for each PATH this mounts, again over itself, the topmost folder on its way that others
may not enter, or PATH itself when none: read-only and idmapped, so that its files look owned by
``nobody`` (who then reads them, and no one writes them). ``--keep`` mounts a folder under one of those
back as it was, for what the command writes. The mounts live in a mount namespace of this process and
the command only: the machine and every other process see nothing change, and nothing is copied.

Needs root and a kernel with idmapped mounts (Linux 5.12, ext4, xfs, btrfs, tmpfs 6.3); otherwise it
exits with :data:`CANNOT` and says why on one line.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from pathlib import Path

CANNOT = 77
NOBODY = 65534
# linux/mount.h and the x86-64 / arm64 syscall numbers (the same on both, from the generic table)
CLONE_NEWNS, MS_REC, MS_PRIVATE = 0x20000, 0x4000, 0x40000
OPEN_TREE_CLONE, AT_RECURSIVE, AT_EMPTY_PATH, AT_FDCWD = 1, 0x8000, 0x1000, -100
MOUNT_ATTR_RDONLY, MOUNT_ATTR_IDMAP, MOVE_MOUNT_F_EMPTY_PATH = 0x1, 0x100000, 0x4
OPEN_TREE, MOVE_MOUNT, MOUNT_SETATTR = 428, 429, 442

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _ok(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _closed(path: Path) -> bool:
    return not os.stat(path).st_mode & 0o001


def _private(path: Path) -> bool:
    """Some folder under ``path`` others may not enter, or some file they may not read."""
    for folder, dirs, files in os.walk(path):
        if _closed(Path(folder)):
            return True
        for name in files:
            try:
                if not os.stat(os.path.join(folder, name)).st_mode & 0o004:
                    return True
            except OSError:  # a dangling link
                pass
    return False


def views(paths: list[Path]) -> list[Path]:
    """The folders to show again: per path, the topmost closed folder on its way, else the path if private."""
    found: list[Path] = []
    for path in paths:
        closed = [p for p in [*reversed(path.parents), path] if p != Path("/") and _closed(p)]
        view = closed[0] if closed else path if _private(path) else None
        if view is not None and not any(view == f or f in view.parents for f in found):
            found = [f for f in found if view not in f.parents] + [view]
    return found


def _clone(path: Path) -> int:
    return _ok(libc.syscall(OPEN_TREE, AT_FDCWD, os.fsencode(path), OPEN_TREE_CLONE | AT_RECURSIVE | os.O_CLOEXEC),
               f"open_tree {path}")


def _place(tree: int, path: Path) -> None:
    _ok(libc.syscall(MOVE_MOUNT, tree, b"", AT_FDCWD, os.fsencode(path), MOVE_MOUNT_F_EMPTY_PATH),
        f"move_mount {path}")


def show(folders: list[Path], keep: list[Path]) -> None:
    """In a new mount namespace of this process, each folder read-only with its files owned by nobody."""
    _ok(libc.unshare(CLONE_NEWNS), "unshare a mount namespace")
    _ok(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make the mounts private")
    kept = [(path, _clone(path)) for path in keep if any(f == path or f in path.parents for f in folders)]
    # the idmapping: a user namespace whose root is nobody outside it (its process only holds it open)
    holder = subprocess.Popen(["unshare", "--user", "sleep", "60"])
    try:
        for _ in range(500):  # until it has made its namespace (unshare, then exec sleep), at most 5 s
            if os.readlink(f"/proc/{holder.pid}/ns/user") != os.readlink("/proc/self/ns/user"):
                break
            time.sleep(0.01)
        for name in ("uid_map", "gid_map"):
            Path(f"/proc/{holder.pid}/{name}").write_text(f"0 {NOBODY} 1\n")
        userns = os.open(f"/proc/{holder.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        holder.kill()
        holder.wait()
    for folder in folders:
        tree = _clone(folder)
        attr = _MountAttr(MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY, 0, 0, userns)
        _ok(libc.syscall(MOUNT_SETATTR, tree, b"", AT_EMPTY_PATH | AT_RECURSIVE, ctypes.byref(attr),
                         ctypes.sizeof(attr)), f"an idmapped view of {folder}")
        _place(tree, folder)
    for path, tree in kept:
        _place(tree, path)


def main(argv: list[str]) -> int:
    if "--" not in argv or argv[0] != "--reach":
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    split = argv.index("--")
    options, command = argv[1:split], argv[split + 1:]
    at = options.index("--keep") if "--keep" in options else len(options)
    reach = [Path(os.path.realpath(p)) for p in options[:at]]
    keep = [Path(os.path.realpath(p)) for p in options[at + 1:]]
    folders = views(reach)
    if folders:
        try:
            show(folders, keep)
        except OSError as exc:
            print(f"nobody cannot reach {', '.join(map(str, folders))}, and no view can be made here: {exc}",
                  file=sys.stderr)
            return CANNOT
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The local route of book/how_to_run.md, command for command: a fresh clone, a fresh environment, a chapter.

The commands are read from the page, the clone block (written by `make sync` from _config.yml) and the
"Linux and macOS" block, and run in one bash shell in a temporary folder, as a learner pastes them. Three
substitutions, each printed:

- the repository URL becomes a snapshot of this working tree (a git repository made for the test, holding
  the tree as it stands, committed or not), so the clone is a real `git clone` of what would be pushed;
- PyTorch's CPU wheel index, when it cannot be reached from here, becomes $LEARNER_TORCH_INDEX (default
  PyPI's simple index, where this machine's pip configuration finds the same CPU build); set the variable to
  choose the index even when PyTorch's can be reached;
- `jupyter lab notebooks/` starts without a browser on a free port; the test asks the server which
  notebooks it lists, runs a chapter top to bottom in the learner's environment with `jupyter execute`,
  and stops the server.

Then it checks what was installed: the CPU build of torch, JupyterLab, the helper package, and nothing of
the maintainers' toolchain. Slow: a fresh environment with PyTorch and JupyterLab (minutes).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from browsing import missing

from course import layout
from course.browser import free_port

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "how_to_run.md"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
CHAPTER = "01_plain_causal_average"
TOOLCHAIN = ("sphinx", "jupyter-book", "myst-nb", "pytest", "nbval", "playwright", "sphinx-exercise")


def console_blocks(text: str) -> list[list[str]]:
    """The command lines of each ```console block, in page order."""
    return [[line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]
            for block in re.findall(r"^```console\n(.*?)^```", text, re.M | re.S)]


def snapshot(destination: Path) -> None:
    """A git repository holding this working tree as it stands (tracked and new files, not ignored ones)."""
    names = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, names):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    git = ["git", "-C", str(destination), "-c", "user.name=local route test", "-c", "user.email=test@localhost"]
    subprocess.run(["git", "init", "-q", str(destination)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "snapshot of the working tree"], check=True)


def reachable(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status == 200
    except OSError:
        return False


WAIT_FOR_LAB = """
import json, sys, time, urllib.request
# `jupyter lab notebooks/` serves that folder: its root lists the chapters
url = f"http://127.0.0.1:{sys.argv[1]}/api/contents/"
for _ in range(180):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            names = sorted(c["name"] for c in json.load(r)["content"] if c["type"] == "notebook")
            print("jupyter lab lists:", " ".join(names))
            sys.exit(0)
    except OSError:
        time.sleep(0.5)
sys.exit("jupyter lab did not answer in 90 s")
"""


@pytest.mark.slow
def test_the_documented_local_route_runs_a_chapter_from_a_fresh_clone(tmp_path):
    if shutil.which("git") is None or shutil.which("bash") is None:
        missing("the local route needs git and bash")
    blocks = console_blocks(PAGE.read_text())
    assert len(blocks) >= 2, "book/how_to_run.md: expected the clone block, then the Linux and macOS block"
    clone, linux = blocks[0], blocks[1]
    url, _ = layout.repository()
    assert clone[0] == f"git clone {url}", "the clone block is stale: run `make sync`"
    if shutil.which(linux[0].split()[0]) is None:
        missing(f"`{linux[0].split()[0]}` is not on the PATH; the page's first command needs it")

    origin = tmp_path / "origin" / url.rstrip("/").rsplit("/", 1)[-1]
    snapshot(origin)
    index = os.environ.get("LEARNER_TORCH_INDEX")
    if index is None and not reachable(f"{TORCH_INDEX}/torch/"):
        index = "https://pypi.org/simple"
    notes = [f"clone: {url} -> the working tree's snapshot {origin}"]
    if index:
        notes.append(f"PyTorch's CPU index {TORCH_INDEX} -> {index} (LEARNER_TORCH_INDEX)")
    port = free_port()
    script = ["set -euo pipefail", "PS4='+ [${SECONDS}s] '", "set -x"]
    for line in clone:
        script.append(line.replace(url, str(origin)))
    lab = [line for line in linux if line.startswith("jupyter lab")]
    assert lab == [linux[-1]], "the Linux and macOS block ends by opening the chapters in JupyterLab"
    for line in linux[:-1]:
        script.append(line.replace(TORCH_INDEX, index) if index else line)
    helper = tmp_path / "wait_for_lab.py"
    helper.write_text(WAIT_FOR_LAB)
    script += [
        (f"{linux[-1]} --no-browser --port={port} --ServerApp.token= --ServerApp.ip=127.0.0.1 --allow-root "
         f"> {tmp_path}/lab.log 2>&1 &"),
        "LAB=$!",
        "trap 'kill $LAB 2>/dev/null || true' EXIT",
        f"python {helper} {port}",
        f"jupyter execute notebooks/{CHAPTER}.ipynb",
        "python -m pip list --format=freeze > ../installed.txt",
        "du -sm .venv | cut -f1 > ../venv_mb.txt",
    ]
    work = tmp_path / "learner"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "JUPYTER"))}
    env.update(JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"), JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"), MPLBACKEND="Agg")
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(sys.prefix))
    started = time.monotonic()
    done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=work, env=env, capture_output=True, text=True,
                          timeout=1800, check=False)
    elapsed = time.monotonic() - started
    steps = "\n".join(line for line in done.stderr.splitlines() if line.startswith("+ ["))
    report = "\n".join(notes) + f"\n{steps}\n--- stdout (end)\n{done.stdout[-3000:]}\n--- stderr (end)\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"the local route failed:\n{report}"
    print(f"\nlocal route: {elapsed:.0f} s\n" + "\n".join(notes) + f"\n{steps}")

    listed = re.search(r"jupyter lab lists: (.*)", done.stdout).group(1).split()
    assert sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")) == listed, "JupyterLab lists the launch notebooks"
    installed = {}
    for line in (work / "installed.txt").read_text().splitlines():
        if "==" in line:
            name, version = line.split("==", 1)
            installed[re.sub(r"[-_.]+", "-", name).lower()] = version
    assert installed.get("torch", "").startswith("2.13.0"), installed.get("torch")
    if sys.platform.startswith("linux"):
        assert installed["torch"].endswith("+cpu"), f"torch {installed['torch']} is not the CPU build"
        assert not [n for n in installed if n.startswith("nvidia-")], "CUDA libraries were installed"
    assert installed.get("jupyterlab") == "4.6.6" and "attention-lab" in installed
    assert not [n for n in TOOLCHAIN if n in installed], "the maintainers' toolchain was installed"
    # everything installed is pinned there, at the version pinned (pip comes with the environment itself)
    pinned = {}
    for line in (ROOT / "requirements-learner.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][\w.-]*)==([^\s;#]+)", line)
        if m:
            pinned[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    unpinned = {n: v for n, v in installed.items()
                if n not in ("pip", "attention-lab") and pinned.get(n) != v.split("+")[0]}
    assert not unpinned, f"installed but not pinned (at that version) in requirements-learner.txt: {unpinned}"
    print(f"installed {len(installed)} packages, environment {(work / 'venv_mb.txt').read_text().strip()} MB")

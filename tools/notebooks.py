"""Maintain the chapter notebooks: sync the bootstrap cell, re-execute, normalize.

    python tools/notebooks.py sync             # bootstrap cells, README links, the clone command of
                                               # book/how_to_run.md and notebooks/ follow _config.yml
    python tools/notebooks.py execute [NB ...] # sync, run each in a fresh kernel, store outputs
    python tools/notebooks.py check            # fail if any of those is out of date

`make outputs` runs `execute` on every chapter. Outputs are stored with widget state (so the static
book can show the explorers) and with metadata that does not depend on the machine or the clock.
Every tool (and the book's build) reads a notebook with :func:`read_notebook`, so a malformed file stops
any of them with one line naming it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"
BOOTSTRAP_TAG = "bootstrap"
KERNEL_TIMEOUT = 600
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
MODEL_REF = re.compile(r"IPY_MODEL_([0-9a-f]{32})")


def repository() -> tuple[str, str]:
    """Return (url, branch) from _config.yml, the one place the repository is named."""
    text = (ROOT / "_config.yml").read_text()
    block = re.search(r"^repository:\n((?:[ \t]+.*\n)+)", text, re.M)
    if block is None:
        raise SystemExit("_config.yml has no `repository:` block; add `url:` and `branch:` under it")
    fields = dict(re.findall(r"^\s+(\w+):\s*(\S*)", block.group(1), re.M))
    if not fields.get("url"):
        raise SystemExit("_config.yml: `repository: url:` is empty; set it to your repository's URL")
    return fields["url"].rstrip("/"), fields.get("branch") or "main"


def version() -> str:
    """The course's version, from pyproject.toml: the package, the changelog and every link follow it."""
    match = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    if match is None:
        raise SystemExit('pyproject.toml has no `version = "X.Y.Z"` line under [project]')
    return match.group(1)


def release_ref() -> str:
    """The git tag of this version, ``vX.Y.Z``: what launch links open and the bootstrap cell installs."""
    return f"v{version()}"


def bootstrap_source() -> str:
    url, _ = repository()
    return (
        "# on Colab (or anywhere the helper package is missing) install it from the course repository;\n"
        "# where it is already installed, as on Binder or a local clone, this does nothing\n"
        "import importlib.util, subprocess, sys\n"
        "\n"
        'if importlib.util.find_spec("attention_lab") is None:\n'
        "    subprocess.run(\n"
        f'        [sys.executable, "-m", "pip", "install", "--quiet", "attention_lab @ git+{url}@{release_ref()}"],\n'
        "        check=True,\n"
        "    )"
    )


def pages_url(url: str) -> str:
    """GitHub Pages address of the repository ``https://github.com/OWNER/REPO``."""
    match = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?", url)
    if match is None:
        raise SystemExit(f"_config.yml: repository url {url!r} is not https://github.com/OWNER/REPO")
    owner, repo = match.groups()
    return f"https://{owner.lower()}.github.io/{repo}"


def launch_links(path: Path) -> dict[str, str]:
    """The hosted page of one chapter, and the Binder and Colab addresses of its launch notebook.

    ``path`` is the chapter, ``lessons/NN_slug.ipynb``; Binder (in JupyterLab) and Colab open
    ``notebooks/NN_slug.ipynb``, its plain-Markdown copy (tools/launch_notebooks.py), at the release tag
    :func:`release_ref`, so a link handed out for a term keeps opening the same notebook.
    """
    url, _ = repository()
    slug = url.removeprefix("https://github.com/")
    rel = path.relative_to(ROOT).as_posix()
    notebook = f"notebooks/{path.name}"
    ref = release_ref()
    return {
        "page": f"{pages_url(url)}/{rel.removesuffix('.ipynb')}.html",
        "binder": f"https://mybinder.org/v2/gh/{slug}/{ref}?urlpath=lab/tree/{notebook}",
        "colab": f"https://colab.research.google.com/github/{slug}/blob/{ref}/{notebook}",
    }


class NotebookError(SystemExit):
    """A file that is not a readable notebook. A SystemExit whose message is one line naming the file, the
    problem and the fix: every tool's command line (and a tool run from another, as `check` runs
    launch_notebooks) prints that line and exits 1, with no traceback and no handler of its own."""


def _json_problem(text: str, exc: json.JSONDecodeError) -> str:
    if exc.msg.startswith("Unterminated") or exc.pos >= len(text.rstrip()):
        lines = text.rstrip().split("\n")
        return f"JSON ends early at line {len(lines)}, column {len(lines[-1]) + 1}"
    return f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"


def parse_notebook(text: str, name: str) -> nbformat.NotebookNode:
    """A notebook's text as a version-4 notebook; :class:`NotebookError` naming ``name`` if it is not one."""
    fix = f"restore it with `git checkout -- {name}`" + (
        " (then re-run `make outputs` if you had changed it)" if "lessons/" in name else "")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"{name}: not a valid notebook ({_json_problem(text, exc)}): {fix}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list) or "nbformat" not in data:
        raise NotebookError(f"{name}: not a notebook (JSON without `cells` and `nbformat`): {fix}")
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # nbformat's conversions raise anything from KeyError to ValidationError
        problem = " ".join(str(getattr(exc, "message", exc)).split())[:200]
        raise NotebookError(f"{name}: not a valid notebook ({problem}): {fix}") from None
    return nb


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """The one way the tools read a notebook: a malformed file stops with one line naming it
    (:class:`NotebookError`), never with nbformat's traceback."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise NotebookError(f"{shown(Path(path))}: cannot be read ({exc.__class__.__name__}: {exc})") from None
    return parse_notebook(text, shown(Path(path)))


def title(nb: nbformat.NotebookNode) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^# (.+)$", cell.source, re.M)
            if match:
                return match.group(1).strip()
    raise SystemExit("a chapter notebook has no `# Title` heading in its markdown")


README_START = "<!-- chapters: written by `make sync` from _config.yml; edit there -->"
README_END = "<!-- /chapters -->"


def readme_table(paths: list[Path]) -> str:
    url, _ = repository()
    rows = [README_START, "", "| chapter | read | run |", "|---|---|---|"]
    for path in paths:
        links = launch_links(path)
        name = title(read_notebook(path))
        rows.append(f"| {name} | [hosted page]({links['page']}) "
                    f"| [Binder]({links['binder']}) · [Colab]({links['colab']}) |")
    rows += ["", (f"Hosted book: {pages_url(url)}/ · repository: {url} · Binder and Colab open the chapter's "
                  f"notebook in `notebooks/` at the release `{release_ref()}`"), "", README_END]
    return "\n".join(rows)


def sync_readme(paths: list[Path], write: bool) -> bool:
    """Rewrite the README's chapter table; return True if it was out of date."""
    return sync_markers(ROOT / "README.md", README_START, README_END, readme_table(paths), write)


CLONE_START = "<!-- clone: written by `make sync` from _config.yml; edit there -->"
CLONE_END = "<!-- /clone -->"


def clone_block() -> str:
    """The clone command of book/how_to_run.md, for the repository in _config.yml."""
    url, _ = repository()
    folder = url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    return "\n".join([CLONE_START, "", "```console", f"git clone {url}", f"cd {folder}", "```", "", CLONE_END])


def sync_markers(path: Path, start: str, end: str, block: str, write: bool) -> bool:
    """Rewrite the text between two marker lines of a file; return True if it was out of date."""
    text = path.read_text()
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{path.relative_to(ROOT)} lacks the markers {start!r} ... {end!r}")
    new = pattern.sub(lambda _: block, text)
    if new != text and write:
        path.write_text(new)
    return new != text


def notebooks(paths: list[str] | None = None) -> list[Path]:
    """The notebooks named on a command line, or every chapter ``lessons/NN_*.ipynb``."""
    if paths:
        return [Path(p).resolve() for p in paths]
    return sorted(LESSONS.glob("[0-9][0-9]_*.ipynb"))


def shown(path: Path) -> str:
    """A path as a message shows it: relative to the repository where it lies inside it."""
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def sync(nb: nbformat.NotebookNode) -> bool:
    """Make the first cell the bootstrap cell; return True if the notebook changed."""
    source = bootstrap_source()
    first = nb.cells[0] if nb.cells else None
    if first is not None and BOOTSTRAP_TAG in first.get("metadata", {}).get("tags", []):
        if first.source == source:
            return False
        first.source = source
        return True
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": [BOOTSTRAP_TAG, "remove-cell"]})
    nb.cells.insert(0, cell)
    return True


def normalize(nb: nbformat.NotebookNode, stem: str) -> None:
    """Drop what depends on the machine or the clock; give cells stable ids."""
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    for key in ("colab", "vscode", "papermill", "toc"):
        nb.metadata.pop(key, None)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{stem[:2]}-{i:03d}"
        cell.metadata.pop("execution", None)
        cell.metadata.pop("ExecuteTime", None)
        if cell.cell_type != "code":
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
        else:
            cell.outputs = merge_streams(cell.outputs)
    stable_widget_ids(nb, stem)


def stable_widget_ids(nb: nbformat.NotebookNode, stem: str) -> None:
    """Rename every widget model id (a random uuid4 per run) to one derived from the chapter and its place.

    Models are numbered in a fixed walk: the displayed views in cell order, each followed depth first by
    the models its state refers to (children, layouts, jslink ends), in the order its state names them;
    then the models nothing refers to (jslinks), ordered by their content. So re-executing an unchanged
    chapter writes byte-for-byte the same ids, and `git diff lessons/` shows only real changes.
    """
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state")
    if not state:
        return
    order: list[str] = []

    def visit(model_id: str) -> None:
        if model_id in state and model_id not in order:
            order.append(model_id)
            for ref in MODEL_REF.findall(json.dumps(state[model_id], sort_keys=True)):
                visit(ref)

    for cell in nb.cells:
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(WIDGET_VIEW)
            if view:
                visit(view["model_id"])
    while len(order) < len(state):
        known = {old: f"#{n}" for n, old in enumerate(order)}

        def content(model_id: str) -> str:
            text = json.dumps(state[model_id], sort_keys=True)
            return MODEL_REF.sub(lambda m: "IPY_MODEL_" + known.get(m.group(1), "?"), text)

        visit(min((m for m in state if m not in known), key=content))
    new = {old: hashlib.md5(f"{stem}/{n}".encode()).hexdigest() for n, old in enumerate(order)}
    text = json.dumps({"cells": nb.cells, "widgets": nb.metadata["widgets"]})
    text = re.sub(r"[0-9a-f]{32}", lambda m: new.get(m.group(0), m.group(0)), text)
    renamed = json.loads(text)
    nb.cells = nbformat.from_dict(renamed["cells"])
    nb.metadata["widgets"] = nbformat.from_dict(renamed["widgets"])


def merge_streams(outputs: list) -> list:
    """Join consecutive stdout (or stderr) pieces: how a kernel splits a print into messages is timing."""
    merged = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if (out.get("output_type") == "stream" and prev is not None
                and prev.get("output_type") == "stream" and prev.get("name") == out.get("name")):
            prev["text"] = prev["text"] + out["text"]
        else:
            merged.append(out)
    return merged


def execute(path: Path) -> None:
    from nbclient import NotebookClient

    nb = read_notebook(path)
    sync(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    client = NotebookClient(
        nb,
        timeout=KERNEL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        record_timing=False,
    )
    # only the kernel's environment says so: explorers record their page configs for the book
    # (attention_lab.explorers); the calling process, a test worker perhaps, keeps its own environment.
    # One thread, as under nbval (conftest.py): the chapters' tensors are small, and two threads that wait
    # on each other make chapter 6 several times slower on a loaded machine, with the same results
    client.execute(env={**os.environ, "ATTENTION_LAB_STATIC": "1",
                        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    normalize(nb, path.stem)
    nbformat.validate(nb)
    nbformat.write(nb, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["sync", "execute", "check"])
    parser.add_argument("notebooks", nargs="*")
    args = parser.parse_args(argv)
    paths = notebooks(args.notebooks)
    if not paths:
        print(f"no notebooks found under {LESSONS}", file=sys.stderr)
        return 1
    stale = []
    for path in paths:
        if not path.exists():
            print(f"{path}: no such notebook (expected lessons/NN_slug.ipynb)", file=sys.stderr)
            return 1
        if args.command == "execute":
            print(f"executing {path.relative_to(ROOT)}", flush=True)
            execute(path)
            continue
        nb = read_notebook(path)
        changed = sync(nb)
        if args.command == "sync":
            if changed:
                normalize(nb, path.stem)
                nbformat.write(nb, path)
                print(f"synced {path.relative_to(ROOT)}")
        elif changed:
            stale.append(path.relative_to(ROOT))
    if not args.notebooks and args.command in ("sync", "check"):
        write = args.command == "sync"
        how_to_run = ROOT / "book" / "how_to_run.md"
        for name, changed in (("the chapter table in README.md", sync_readme(paths, write)),
                              ("the clone command in book/how_to_run.md",
                               sync_markers(how_to_run, CLONE_START, CLONE_END, clone_block(), write))):
            if changed and write:
                print(f"synced {name}")
            elif changed:
                stale.append(name)
    # the launch notebooks follow the chapters (tools/launch_notebooks.py; `make launch` adds student editions)
    import launch_notebooks

    try:
        if args.command == "check":
            stale += launch_notebooks.stale()
        else:
            for path in launch_notebooks.write():
                print(f"{'wrote' if path.exists() else 'removed'} {path.relative_to(ROOT)}")
    except launch_notebooks.LaunchError as exc:
        print(f"launch notebooks cannot be made from lessons/:\n{exc}", file=sys.stderr)
        return 1
    if stale:
        print("out of date with _config.yml or lessons/: " + ", ".join(map(str, stale))
              + "\nrun `make sync` (or `make outputs`) and commit the result", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

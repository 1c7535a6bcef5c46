"""Maintain the chapters in lessons/: sync the bootstrap cell, re-execute, normalize, check.

    python -m course sync               # bootstrap cells, README links, the clone command of
                                        # book/how_to_run.md and notebooks/ follow _config.yml
    python -m course execute [NB ...]   # sync, run each in a fresh kernel, store outputs
    python -m course check              # fail if any of those is out of date

`make outputs` runs `execute` on every chapter. Outputs are stored with metadata that does not depend on
the machine or the clock, and with no widget state: the book draws the explorers from their configs.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import nbformat
from nbconvert.preprocessors import CoalesceStreamsPreprocessor

from course import launch_notebooks
from course.layout import chosen_chapters, README, ROOT, BOOK, pages_url, release_ref, repository, shown
from course.notebook_file import as_text, read_notebook
from course.tags import BOOTSTRAP, IGNORE_OUTPUT, REMOVE_CELL, tags_of

KERNEL_TIMEOUT = 600
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def bootstrap_source() -> str:
    url, _ = repository()
    return (
        "# on Colab (or anywhere the helper package is missing) install it from the course repository;\n"
        "# where it is already installed, as on Binder or a local clone, this does nothing\n"
        "import importlib.util, subprocess, sys\n"
        "\n"
        'if importlib.util.find_spec("attention_lab") is None:\n'
        "    done = subprocess.run(\n"
        f'        [sys.executable, "-m", "pip", "install", "--quiet", "attention_lab @ git+{url}@{release_ref()}"],\n'
        "        capture_output=True,\n"
        "    )\n"
        "    if done.returncode != 0:  # one line for the learner, not pip's and git's output\n"
        '        raise SystemExit("Could not install the course\'s helper package attention_lab from GitHub: "\n'
        '                         "check that this runtime is online, then run this cell again.")'
    )


def launch_links(path: Path) -> dict[str, str]:
    """The hosted page of the chapter ``path``, and the Binder and Colab addresses of its launch notebook at
    the release tag, so a link handed out for a term keeps opening the same notebook."""
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
        raise SystemExit(f"{shown(path)} lacks the markers {start!r} ... {end!r}")
    new = pattern.sub(lambda _: block, text)
    if new != text and write:
        path.write_text(new)
    return new != text


# where the instructors' page names the release it teaches (the commands of "From your fork to grades", the
# deploy command, "Teaching from a stable version"); its other tags are history or examples, and stay
CURRENT_RELEASE = re.compile(r"(git switch --detach |-f ref=(?=\S+ -f solutions)|checks of `|…@)v\d+\.\d+\.\d+")


def sync_release_mentions(path: Path, write: bool) -> bool:
    """Make each mention of the current release in ``path`` name this version; True if one was out of date."""
    text = path.read_text()
    new = CURRENT_RELEASE.sub(lambda m: m.group(1) + release_ref(), text)
    if new != text and write:
        path.write_text(new)
    return new != text


def sync(nb: nbformat.NotebookNode) -> bool:
    """Make the first cell the bootstrap cell; return True if the notebook changed."""
    source = bootstrap_source()
    first = nb.cells[0] if nb.cells else None
    if first is not None and BOOTSTRAP in tags_of(first):
        if first.source == source:
            return False
        first.source = source
        return True
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": [BOOTSTRAP, REMOVE_CELL]})
    nb.cells.insert(0, cell)
    return True


def normalize(nb: nbformat.NotebookNode, stem: str) -> None:
    """Drop what depends on the machine, the clock or the run (the widget view's model id too: an explorer's
    output keeps its text, picture and config); give cells stable ids."""
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    for key in ("colab", "vscode", "papermill", "toc", "widgets"):
        nb.metadata.pop(key, None)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{stem[:2]}-{i:03d}"
        cell.metadata.pop("execution", None)
        cell.metadata.pop("ExecuteTime", None)
        if cell.cell_type != "code":
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
            continue
        # a kernel splits one print into stream messages as its timing goes: join them
        CoalesceStreamsPreprocessor().preprocess_cell(cell, {}, i)
        for out in cell.outputs:
            out.get("data", {}).pop(WIDGET_VIEW, None)
            out.get("metadata", {}).pop(WIDGET_VIEW, None)  # Colab's widget manager, named where it runs


def execute(path: Path) -> None:
    from nbclient import NotebookClient

    nb = read_notebook(path)
    sync(nb)
    # a cell excused from nbval's comparison (a timing) keeps what it stored when a new run differs from it in
    # its numbers only, as tests/stored_outputs.py expects: `make outputs` on an unchanged clone changes nothing
    excused = [cell.outputs if IGNORE_OUTPUT in tags_of(cell) else None for cell in nb.cells]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    client = NotebookClient(
        nb,
        timeout=KERNEL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,
    )
    # one thread, as under nbval (conftest.py): the chapters' tensors are small, and two threads that wait on
    # each other make chapter 6 several times slower on a loaded machine, with the same results
    client.execute(env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    for cell, stored in zip(nb.cells, excused):
        if stored and _words(stored) == _words(cell.outputs):
            cell.outputs = stored
    normalize(nb, path.stem)
    nbformat.validate(nb)
    path.write_text(as_text(nb), encoding="utf-8")


def _words(outputs) -> str:
    """Outputs with every number in them masked."""
    return re.sub(r"\d+", "#", json.dumps(outputs, sort_keys=True))


def add_arguments(parser) -> None:
    parser.add_argument("chapters", nargs="*", help="lessons/NN_slug.ipynb files (default: every chapter)")


def run(args) -> int:
    """``sync``, ``execute`` or ``check`` (``args.command``) over the chapters named, or every chapter."""
    paths = chosen_chapters(args.chapters)
    stale = []
    for path in paths:
        if not path.exists():
            print(f"{path}: no such notebook (expected lessons/NN_slug.ipynb)", file=sys.stderr)
            return 1
        if args.command == "execute":
            print(f"executing {shown(path)}", flush=True)
            execute(path)
            continue
        nb = read_notebook(path)
        changed = sync(nb)
        if args.command == "sync":
            if changed:
                normalize(nb, path.stem)
                nbformat.write(nb, path)
                print(f"synced {shown(path)}")
        elif changed:
            stale.append(shown(path))
    if not args.chapters and args.command in ("sync", "check"):
        write = args.command == "sync"
        how_to_run = BOOK / "how_to_run.md"
        for name, changed in (("the chapter table in README.md",
                               sync_markers(README, README_START, README_END, readme_table(paths), write)),
                              ("the clone command in book/how_to_run.md",
                               sync_markers(how_to_run, CLONE_START, CLONE_END, clone_block(), write)),
                              ("the current release in book/instructors.md",
                               sync_release_mentions(BOOK / "instructors.md", write))):
            if changed and write:
                print(f"synced {name}")
            elif changed:
                stale.append(name)
    # the launch notebooks follow the chapters (`python -m course launch` adds the student editions)
    try:
        if args.command == "check":
            stale += launch_notebooks.stale()
        else:
            for path in launch_notebooks.write():
                print(f"{'wrote' if path.exists() else 'removed'} {shown(path)}")
    except launch_notebooks.LaunchError as exc:
        print(f"launch notebooks cannot be made from lessons/:\n{exc}", file=sys.stderr)
        return 1
    if stale:
        print("out of date with _config.yml or lessons/: " + ", ".join(map(str, stale))
              + "\nrun `make sync` (or `make outputs`) and commit the result", file=sys.stderr)
        return 1
    return 0

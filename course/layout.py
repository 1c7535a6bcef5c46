"""Where things are in the repository, and what its configuration files say: the one module that knows.

Every other module of the course's tools, and the book's Sphinx extensions, take their paths from here:
an instructor who moves a folder changes one line. The settings are read with the libraries of their
format (PyYAML for ``_config.yml``, ``ast`` for the version in ``attention_lab/__init__.py``), never by
pattern matching.
"""

from __future__ import annotations

import re
import ast
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "lessons"  # the chapters, in MyST, executed, as the book publishes them
LAUNCH = ROOT / "notebooks"  # each chapter in plain Markdown: what Colab, Binder and JupyterLab open
STUDENT = ROOT / "student"  # the student editions, solutions removed
GRADED = ROOT / "graded"  # the graded editions (otter-grader), not committed
BOOK = ROOT / "book"  # the prose pages, references.bib, static files, the Sphinx extensions
PACKAGE = ROOT / "attention_lab"  # the helper package the chapters import
DATA = PACKAGE / "data"
HTML = ROOT / "_build" / "html"  # the built book
CONFIG = ROOT / "_config.yml"
INIT = PACKAGE / "__init__.py"
README = ROOT / "README.md"
CHANGELOG = ROOT / "CHANGELOG.md"
REQUIREMENTS = ROOT / "requirements.txt"
NODE_MODULES = ROOT / "node_modules"
VENDOR = BOOK / "_static" / "vendor"


def shown(path: Path) -> str:
    """A path as a message shows it: relative to the repository where it lies inside it."""
    try:
        return Path(path).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def chapters() -> list[Path]:
    """Every chapter, ``lessons/NN_*.ipynb``."""
    return sorted(LESSONS.glob("[0-9][0-9]_*.ipynb"))


def chosen_chapters(paths: list[str] | None) -> list[Path]:
    """The chapter files named on a command line, or every chapter; stops, saying where it looked, when
    there is none."""
    found = [Path(p).resolve() for p in paths] if paths else chapters()
    if not found:
        raise SystemExit(f"no chapters found under {shown(LESSONS)}")
    return found


def book_config() -> dict:
    """_config.yml, the book's configuration, as a dict."""
    try:
        config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise SystemExit(f"{shown(CONFIG)} is not valid YAML: {exc}") from None
    return config if isinstance(config, dict) else {}


def repository() -> tuple[str, str]:
    """Return (url, branch) from _config.yml, the one place the repository is named."""
    block = book_config().get("repository")
    if not isinstance(block, dict):
        raise SystemExit("_config.yml has no `repository:` block; add `url:` and `branch:` under it")
    url = str(block.get("url") or "")
    if not url:
        raise SystemExit("_config.yml: `repository: url:` is empty; set it to your repository's URL")
    return url.rstrip("/"), str(block.get("branch") or "main")


def version() -> str:
    """The course's version, ``attention_lab.__version__``, read from the file without importing the
    package (which imports torch): pyproject.toml, the changelog and every link follow it."""
    for node in ast.parse(INIT.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__version__"]
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return node.value.value
    raise SystemExit(f'{shown(INIT)} has no `__version__ = "X.Y.Z"` line: add one')


def release_ref() -> str:
    """The git tag of this version, ``vX.Y.Z``: what launch links open and the bootstrap cell installs."""
    return f"v{version()}"


def pages_url(url: str) -> str:
    """GitHub Pages address of the repository ``https://github.com/OWNER/REPO``."""
    match = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?", url)
    if match is None:
        raise SystemExit(f"_config.yml: repository url {url!r} is not https://github.com/OWNER/REPO")
    owner, repo = match.groups()
    return f"https://{owner.lower()}.github.io/{repo}"

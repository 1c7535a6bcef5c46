"""The rules a notebook is graded by: this course's, or those of the release its graded edition belongs to.

A graded edition carries a mark in its metadata, ``attention_lab.graded``: the release it was built from
(``0.2.0+d0d99de4a1b2``, or ``v0.2.0`` for the release itself) and a fingerprint of its rules. Another
release's rules come from git (book/instructors.md, "What a student submits, and what comes back").
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from course.layout import ROOT, version

UNMARKED = "0.2.0"  # the one release whose graded editions carry no mark
# a release's own questions, read by its own code: course/grade.py since the judge, tools/ in v0.2.0
_SPEC = {
    "course/grade.py": "import json, sys\nfrom course import grade\nprint(json.dumps(grade.spec(sys.argv[1], 0)))",
    "tools/graded_edition.py": """import json, sys
from pathlib import Path
sys.path[:0] = ["tools", "."]
import graded_edition, launch_notebooks, nbformat
stem = sys.argv[1]
lesson = nbformat.read(Path("lessons") / f"{stem}.ipynb", as_version=4)
_, graded, _ = graded_edition.master_notebook(lesson, stem, launch_notebooks.load_book())
print(json.dumps({"chapter": stem, "seed": 0, "questions": [
    {"number": q.number, "name": q.name, "points": graded_edition.POINTS,
     "checks": [{"name": c.name, "arguments": c.arguments} for c in q.checks]} for q in graded]}))""",
}


class ReleaseError(Exception):
    """A release's rules cannot be had here; the message says why and what to do, in one line."""


@dataclass
class Rules:
    """What grades a chapter: a folder holding the package ``attention_lab/``, and the questions."""

    release: str  # as rows name it: "0.2.0+d0d99de4a1b2", "v0.2.0"
    root: Path
    spec: dict  # graded_edition.judge_spec: chapter, seed, questions, timeout
    fingerprint: str


def _git(repo: Path, *args: str, binary: bool = False):
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=not binary, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def commit_of(release: str, repo: Path) -> str | None:
    """The commit of ``release`` (``0.2.0``, ``v0.2.0`` or ``0.2.0+COMMIT``) in the git repository ``repo``."""
    name, _, commit = release.removeprefix("v").partition("+")
    if commit:
        found = _git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
        return found.strip() if found else None
    tagged = _git(repo, "rev-parse", "--verify", "--quiet", f"refs/tags/v{name}^{{commit}}")
    if tagged:
        return tagged.strip()
    made = _git(repo, "log", "--format=%H", "--fixed-strings", f"--grep=Release {name}", "HEAD")
    exact = [c for c in (made or "").split() if (_git(repo, "log", "-1", "--format=%s", c) or "").strip()
             == f"Release {name}"]
    return exact[0] if exact else None


def release_name(repo: Path = ROOT) -> str:
    """This tree's release, as its graded editions name it."""
    head = _git(repo, "rev-parse", "--verify", "--quiet", "HEAD")
    if not head:
        return version()
    if commit_of(version(), repo) == head.strip():
        return f"v{version()}"
    return f"{version()}+{head.strip()[:12]}"


def fingerprint(root: Path, questions: list) -> str:
    """A digest of the rules: the questions (their checks and arguments) and the checks' source, with
    the modules of the package they import."""
    package = root / "attention_lab"
    sources = sorted((package / "checks").rglob("*.py")) if (package / "checks").is_dir() else [package / "checks.py"]
    imported = set()
    for path in sources:
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("attention_lab."):
                imported.add(node.module.split(".")[1])
            elif isinstance(node, ast.ImportFrom) and node.module == "attention_lab":
                imported.update(a.name for a in node.names)
    sources += sorted(p for name in imported if (p := package / f"{name}.py").is_file())
    h = hashlib.sha256(json.dumps(questions, sort_keys=True).encode())
    for path in sources:
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def extract(repo: Path, commit: str, dest: Path) -> Path:
    """The tree of ``commit`` written into ``dest`` (``git archive``), for its package and its code."""
    if dest.is_dir():
        return dest
    data = _git(repo, "archive", "--format=tar", commit, binary=True)
    if data is None:
        raise ReleaseError(f"git cannot write the tree of {commit[:12]}")
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def release_spec(tree: Path, stem: str) -> dict:
    """The release's graded questions of ``stem``, read by the release's own code."""
    reader = next((code for path, code in _SPEC.items() if (tree / path).is_file()), None)
    if reader is None:
        raise ReleaseError("the release has no graded editions")
    done = subprocess.run([sys.executable, "-s", "-c", reader, stem], cwd=tree, capture_output=True, text=True,
                          timeout=300, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree), "HOME": str(tree),
                                            "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"})
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ReleaseError(f"the release's own code could not read the questions of {stem}: {last[:200]}")
    return json.loads(done.stdout)


def of_release(release: str, stem: str, *, seed: int, repo: Path, scratch: Path, timeout: float) -> Rules:
    """Another release's rules for ``stem``, from git; :class:`ReleaseError` when they cannot be had."""
    commit = commit_of(release, repo)
    if commit is None:
        raise ReleaseError(f"this grader cannot find release {release} in {repo}'s git history "
                           f"(`make release-tags`, or --releases CLONE of a clone that has it)")
    tree = extract(repo, commit, scratch / f"release-{commit[:12]}")
    spec = release_spec(tree, stem)
    spec = {**spec, "seed": seed, "timeout": spec.get("timeout") or timeout}
    name = f"v{release.removeprefix('v')}" if "+" not in release else release
    return Rules(name, tree, spec, fingerprint(tree, spec["questions"]))

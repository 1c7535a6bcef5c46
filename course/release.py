"""Release a version of the course: one command bumps the version everywhere.

    python -m course release 0.2.0          # or: make release VERSION=0.2.0
    python -m course release 0.2.0 --tag    # also commit and create the annotated tag v0.2.0

It sets ``attention_lab.__version__`` (pyproject.toml reads it), dates the changelog's "Unreleased"
section, then runs `python -m course sync`, which points bootstrap cells and launch links at the tag.
Without --tag it prints the git commands; with --tag it runs them (on a clean tree only). Pushing stays yours.
"""

from __future__ import annotations

import datetime
import hashlib
import re
import subprocess
import sys
from pathlib import Path

from course.layout import CHANGELOG, INIT, ROOT, shown, version as current_version

VERSION = re.compile(r"\d+\.\d+\.\d+")
INIT_VERSION = re.compile(r'^__version__ = "([^"]+)"', re.M)
UNRELEASED = re.compile(r"^## \[Unreleased\][ \t]*\n", re.M)
NEXT_ENTRY = re.compile(r"^## \[", re.M)
RELEASED = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})[ \t]*$", re.M)


class ReleaseError(Exception):
    """A reason to release nothing, in words the maintainer can act on."""


def parse(version: str) -> tuple[int, int, int]:
    if not VERSION.fullmatch(version):
        raise ReleaseError(f"version {version!r} is not of the form X.Y.Z (three numbers, e.g. 0.2.0)")
    return tuple(map(int, version.split(".")))


def read_version(path: Path, pattern: re.Pattern) -> str:
    matches = pattern.findall(path.read_text())
    if len(matches) != 1:
        raise ReleaseError(f"{shown(path)}: expected one line matching {pattern.pattern!r}, "
                           f"found {len(matches)}")
    return matches[0]


def top_released(changelog: str) -> tuple[str, str] | None:
    """(version, date) of the changelog's newest released entry, or None before the first release."""
    match = RELEASED.search(changelog)
    return (match.group(1), match.group(2)) if match else None


def unreleased_section(changelog: str) -> tuple[int, int]:
    """Start and end offsets of the body of the "## [Unreleased]" section."""
    head = UNRELEASED.search(changelog)
    if head is None:
        raise ReleaseError("CHANGELOG.md has no `## [Unreleased]` section: add one above the newest entry "
                           "and list what changed there")
    following = NEXT_ENTRY.search(changelog, head.end())
    return head.end(), following.start() if following else len(changelog)


def tidy(body: str) -> str:
    """The released entry: without HTML comments and without subsection headings that list nothing."""
    body = re.sub(r"<!--.*?-->\n?", "", body, flags=re.S)
    blocks = re.split(r"(?=^### )", body, flags=re.M)
    kept = [b for b in blocks if not b.startswith("### ") or b.split("\n", 1)[-1].strip()]
    return re.sub(r"\n{3,}", "\n\n", "".join(kept)).strip() + "\n"


def release_changelog(changelog: str, version: str, today: str) -> str:
    """Move the "Unreleased" body into `## [version] - today`, leave an empty "Unreleased" on top."""
    start, end = unreleased_section(changelog)
    raw = changelog[start:end]
    if "TODO" in raw:
        line = next(line for line in raw.splitlines() if "TODO" in line)
        raise ReleaseError(f"CHANGELOG.md: the Unreleased section still has a TODO ({line.strip()[:80]!r}); "
                           "finish the list first")
    body = tidy(raw)
    if not re.sub(r"^#.*$", "", body, flags=re.M).strip():
        raise ReleaseError("CHANGELOG.md: the Unreleased section is empty; list what changed in this version "
                           "under `## [Unreleased]` before releasing it")
    entry = f"## [{version}] - {today}\n\n{body}\n"
    return changelog[:start] + "\n" + entry + changelog[end:]


def git(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=check)


def in_git_repository() -> bool:
    try:
        return git("rev-parse", "--is-inside-work-tree", check=False).stdout.strip() == "true"
    except OSError:
        return False


def snapshot() -> dict[str, str]:
    """Content hash of every tracked or untracked, not ignored file: to tell which files the release wrote."""
    if not in_git_repository():
        return {}
    names = git("ls-files", "-z", "--cached", "--others", "--exclude-standard").stdout.split("\0")
    return {n: hashlib.sha1((ROOT / n).read_bytes()).hexdigest() for n in names if n and (ROOT / n).is_file()}


def check_preconditions(version: str, tag: bool) -> str:
    """Everything that can refuse the release, checked before any file is written; returns the old version."""
    new = parse(version)
    read_version(INIT, INIT_VERSION)  # one line that the release can rewrite
    current = current_version()
    top = top_released(CHANGELOG.read_text())
    if top is not None and top[0] != current:
        raise ReleaseError(f"the versions disagree before the release: attention_lab/__init__.py says {current}, "
                           f"the newest entry of CHANGELOG.md is {top[0]}")
    if new <= parse(current):
        raise ReleaseError(f"{version} is not newer than the current version {current}; choose a higher one "
                           f"(e.g. a patch, minor or major step: see CHANGELOG.md)")
    # the changelog can refuse too: try it on the text, write nothing yet
    release_changelog(CHANGELOG.read_text(), version, "0000-00-00")
    if in_git_repository() and git("tag", "--list", f"v{version}").stdout.strip():
        raise ReleaseError(f"the tag v{version} already exists; a release is never moved, choose another version")
    if tag:
        if not in_git_repository():
            raise ReleaseError(f"--tag needs a git repository; {ROOT} is not one")
        dirty = git("status", "--porcelain").stdout
        if dirty.strip():
            raise ReleaseError("--tag needs a clean working tree, so that the release commit holds the release "
                               "and nothing else; commit or set aside these first:\n" + dirty.rstrip())
    return current


def set_version(path: Path, pattern: re.Pattern, version: str) -> None:
    text = path.read_text()
    match = pattern.search(text)
    path.write_text(text[:match.start(1)] + version + text[match.end(1):])


def run_sync() -> None:
    """The one sync of bootstrap cells, README table and launch notebooks, in a new process that reads the
    version just written: ``python -m course sync``, then ``check``."""
    for command in ("sync", "check"):
        done = subprocess.run([sys.executable, "-m", "course", command], cwd=ROOT, check=False)
        if done.returncode != 0:
            raise ReleaseError(f"`python -m course {command}` failed (exit {done.returncode}); the version "
                               "files are already changed: fix the cause and run `make sync`, or undo them with git")


def release(version: str, tag: bool, today: str | None = None) -> list[str]:
    """Bump, date the changelog, sync, and (with tag) commit and tag. Returns the files the release changed."""
    previous = check_preconditions(version, tag)
    today = today or datetime.date.today().isoformat()
    before = snapshot()
    changelog = release_changelog(CHANGELOG.read_text(), version, today)
    set_version(INIT, INIT_VERSION, version)
    CHANGELOG.write_text(changelog)
    print(f"version {previous} -> {version} in attention_lab/__init__.py; "
          f"CHANGELOG.md: [{version}] - {today}")
    run_sync()
    after = snapshot()
    changed = sorted(n for n in after if before.get(n) != after[n]) + sorted(n for n in before if n not in after)
    ref = f"v{version}"
    message = f"Self-Attention by Hand {version}\n\n" + entry_text(changelog, version)
    if tag:
        git("add", "--all")
        git("commit", "--quiet", "-m", f"Release {version}")
        subprocess.run(["git", "-C", str(ROOT), "tag", "--annotate", "--cleanup=whitespace", ref, "--file", "-"],
                       input=message, text=True, check=True, capture_output=True)
        print(f"committed the release and created the annotated tag {ref}")
    branch = git("rev-parse", "--abbrev-ref", "HEAD", check=False).stdout.strip() or "main"
    print("\nnext:" if tag else "\nreview the changes (git diff), then commit and tag:")
    if not tag:
        print(f"  git add {' '.join(changed) if changed else '--all'}")
        print(f'  git commit -m "Release {version}"')
        print(f'  git tag --annotate {ref} -m "Self-Attention by Hand {version}"')
    print(f"  git push --atomic origin {branch} {ref}    # the tag publishes the book (.github/workflows/deploy.yml)")
    return changed


def entry_text(changelog: str, version: str) -> str:
    match = re.search(rf"^## \[{re.escape(version)}\][^\n]*\n(.*?)(?=^## \[|\Z)", changelog, re.M | re.S)
    return match.group(1).strip() + "\n" if match else ""


def add_arguments(parser) -> None:
    parser.add_argument("version", help="the new version, X.Y.Z, newer than attention_lab.__version__")
    parser.add_argument("--tag", action="store_true",
                        help="also commit the release and create the annotated tag vX.Y.Z (clean working tree only)")


def run(args) -> int:
    try:
        release(args.version, args.tag)
    except ReleaseError as err:
        print(f"release: {err}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as err:
        print(f"release: `{' '.join(map(str, err.cmd))}` failed (exit {err.returncode}):\n{err.stderr or ''}",
              file=sys.stderr)
        return 1
    return 0

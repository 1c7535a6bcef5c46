"""One version everywhere, and `course/release.py` moving all of it to a new tag.

The version is written once, as `attention_lab.__version__` (pyproject.toml reads it from there); the
changelog's newest entry, the
bootstrap cell of every notebook (`attention_lab @ git+URL@vX.Y.Z`) and the README's Binder and Colab
links must all name the same release. The last test releases a new version in a temporary clone of this
checkout (no GitHub here: the tag is local), and installs the package the way a notebook's bootstrap
cell does on Colab, from the clone at the new tag, into a fresh environment that lacks it: the
package must import at the new version with its data (corpus, trained weights), and a second run of
the cell must not start pip.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
from pathlib import Path

import nbformat
import pytest

from course import chapters, layout
from course import release

ROOT = Path(__file__).resolve().parents[1]
SPEC = re.compile(r"attention_lab @ git\+(\S+?)@([^\s\"']+)")
BINDER = re.compile(r"https://mybinder\.org/v2/gh/[^/\s)]+/[^/\s)]+/([^?/\s)]+)")
COLAB = re.compile(r"https://colab\.research\.google\.com/github/[^/\s)]+/[^/\s)]+/blob/([^/\s)]+)/")
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "Release Test", "GIT_AUTHOR_EMAIL": "release-test@example.invalid",
                "GIT_COMMITTER_NAME": "Release Test", "GIT_COMMITTER_EMAIL": "release-test@example.invalid"}


def versions(root: Path) -> dict[str, str | None]:
    """Where the version is written, read as text (so it also works in a clone that is not installed)."""
    package = re.search(r'^__version__ = "([^"]+)"', (root / "attention_lab" / "__init__.py").read_text(), re.M)
    top = release.top_released((root / "CHANGELOG.md").read_text())
    return {"attention_lab/__init__.py": package and package.group(1),
            "CHANGELOG.md (newest entry)": top and top[0]}


def test_the_version_is_written_once():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "attention_lab.__version__"}
    assert layout.version() == versions(ROOT)["attention_lab/__init__.py"]


def bootstrap_refs(root: Path) -> dict[str, list[str]]:
    """The git ref each notebook's bootstrap cell installs the package from: lessons/ and launch notebooks."""
    refs = {}
    for path in sorted([*root.glob("lessons/[0-9][0-9]_*.ipynb"), *root.glob("notebooks/[0-9][0-9]_*.ipynb")]):
        nb = nbformat.read(path, as_version=4)
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        refs[path.relative_to(root).as_posix()] = [ref for _, ref in SPEC.findall(code)]
    return refs


def launch_refs(text: str) -> dict[str, list[str]]:
    return {"Binder": BINDER.findall(text), "Colab": COLAB.findall(text)}


def assert_everything_names(root: Path, version: str) -> None:
    ref = f"v{version}"
    assert versions(root) == dict.fromkeys(versions(root), version), f"versions disagree: {versions(root)}"
    refs = bootstrap_refs(root)
    assert any(p.startswith("lessons/") for p in refs), "no chapter notebooks found"
    wrong = {p: r for p, r in refs.items() if r != [ref]}
    assert not wrong, f"bootstrap cells that do not install exactly {ref} (run `make sync`): {wrong}"
    links = launch_refs((root / "README.md").read_text())
    for kind, found in links.items():
        assert found, f"README.md has no {kind} links"
        assert set(found) == {ref}, (f"README.md's {kind} links open {sorted(set(found))}, not the release {ref}: "
                                     "launch links follow notebooks.release_ref(); run `make sync`")
    # the instructors' page: the graded editions' switch, the deploy command, "Teaching from a stable version"
    named = [m.group(0) for m in chapters.CURRENT_RELEASE.finditer((root / "book" / "instructors.md").read_text())]
    assert len(named) == 4 and all(m.endswith(ref) for m in named), named


def test_version_changelog_bootstrap_and_launch_links_agree():
    import attention_lab

    version = layout.version()
    assert layout.release_ref() == f"v{version}"
    assert attention_lab.__version__ == version, "the installed attention_lab is not this checkout's"
    assert_everything_names(ROOT, version)


# the changelog step on its own: what the release writes, and what it refuses

CHANGELOG = """# Changelog

## [Unreleased]

<!-- a note for maintainers -->

### Added

- Chapter 9.

### Removed

## [0.1.0] - 2026-01-01

- First.
"""


def test_changelog_release_dates_the_entry_and_leaves_an_empty_unreleased_on_top():
    out = release.release_changelog(CHANGELOG, "0.2.0", "2026-12-01")
    assert release.top_released(out) == ("0.2.0", "2026-12-01")
    assert out.index("## [Unreleased]") < out.index("## [0.2.0] - 2026-12-01") < out.index("## [0.1.0]")
    entry = out.split("## [0.2.0] - 2026-12-01\n", 1)[1].split("## [0.1.0]", 1)[0]
    assert entry.strip() == "### Added\n\n- Chapter 9.", "comments and empty headings stay out of the entry"
    assert release.unreleased_section(out)[0] == out.index("## [0.2.0]") - 1, "Unreleased is left empty"
    assert out.endswith("## [0.1.0] - 2026-01-01\n\n- First.\n"), "older entries stay as they were"


@pytest.mark.parametrize("text, message", [
    (CHANGELOG.replace("- Chapter 9.\n", ""), "the Unreleased section is empty"),
    (CHANGELOG.replace("- Chapter 9.", "- TODO: chapter 9"), "still has a TODO"),
    (CHANGELOG.replace("## [Unreleased]\n", ""), "no `## [Unreleased]` section"),
])
def test_changelog_release_refuses(text, message):
    with pytest.raises(release.ReleaseError, match=re.escape(message)):
        release.release_changelog(text, "0.2.0", "2026-12-01")


@pytest.mark.parametrize("version", ["0.2", "v0.2.0", "0.2.0rc1", "0.2.0 "])
def test_a_version_is_three_numbers(version):
    with pytest.raises(release.ReleaseError, match="not of the form X.Y.Z"):
        release.parse(version)


# the whole release, in a clone

def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_IDENTITY}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def clone_of_this_checkout(dest: Path, *options: str) -> Path:
    """A clone whose one new commit is this working tree as it is now (tests run before the lead commits)."""
    subprocess.run(["git", "clone", "--quiet", *options, str(ROOT), str(dest)], check=True)
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            check=True, capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, listed):
        src, dst = ROOT / name, dest / name
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
        elif dst.exists():
            dst.unlink()  # deleted in the working tree, not yet in a commit
    git(dest, "add", "--all")
    if git(dest, "status", "--porcelain"):
        git(dest, "commit", "--quiet", "-m", "the working tree under test")
    return dest


def run_release(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course", "release", *args], cwd=repo, capture_output=True,
                          text=True, env={**os.environ, **GIT_IDENTITY}, timeout=300)


def fill_unreleased(repo: Path, lines: str) -> None:
    path = repo / "CHANGELOG.md"
    text = path.read_text()
    start, end = release.unreleased_section(text)
    path.write_text(text[:start] + "\n" + lines + "\n" + text[end:])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_release_in_a_clone_moves_everything_to_the_new_tag_and_the_bootstrap_cell_installs_it(tmp_path):
    repo = clone_of_this_checkout(tmp_path / "clone")
    old = versions(repo)["attention_lab/__init__.py"]
    major, minor, _ = release.parse(old)
    new = f"{major}.{minor + 1}.0"
    ref = f"v{new}"
    head = git(repo, "rev-parse", "HEAD")

    # refusals write nothing
    fill_unreleased(repo, "### Added\n")
    git(repo, "commit", "--quiet", "-am", "an empty changelog entry")
    head = git(repo, "rev-parse", "HEAD")
    for args, message in [
        ([old], f"{old} is not newer than the current version {old}"),
        ([new], "the Unreleased section is empty"),
    ]:
        done = run_release(repo, *args)
        assert done.returncode == 1 and message in done.stderr, done.stdout + done.stderr
        assert not git(repo, "status", "--porcelain"), f"a refused release changed files: {args}"
    fill_unreleased(repo, "### Added\n\n- A test release.\n")
    done = run_release(repo, new, "--tag")
    assert done.returncode == 1 and "--tag needs a clean working tree" in done.stderr, done.stdout + done.stderr
    assert git(repo, "status", "--porcelain") == "M CHANGELOG.md"
    git(repo, "commit", "--quiet", "-am", "changelog for the test release")

    done = run_release(repo, new, "--tag")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "git push --atomic origin" in done.stdout and ref in done.stdout

    # the release commit and its annotated tag; nothing left uncommitted
    assert not git(repo, "status", "--porcelain"), "the release left changes outside its commit"
    assert git(repo, "cat-file", "-t", ref) == "tag", f"{ref} is not an annotated tag"
    assert git(repo, "rev-parse", f"{ref}^{{commit}}") == git(repo, "rev-parse", "HEAD")
    assert git(repo, "log", "-1", "--format=%s") == f"Release {new}"
    assert "- A test release." in git(repo, "tag", "-l", "--format=%(contents)", ref)
    assert head != git(repo, "rev-parse", "HEAD")
    changelog = (repo / "CHANGELOG.md").read_text()
    assert release.top_released(changelog)[0] == new
    start, end = release.unreleased_section(changelog)
    assert not changelog[start:end].strip(), "the Unreleased section is not left empty after the release"

    # the package at the tag, installed by the bootstrap cell itself into an environment that lacks it
    url, _ = layout.repository()
    cell = nbformat.read(repo / "lessons" / "01_plain_causal_average.ipynb", as_version=4).cells[0]
    assert f"attention_lab @ git+{url}@{ref}" in cell.source
    local_cell = cell.source.replace(f"git+{url}@", f"git+file://localhost{repo}@")
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # torch, matplotlib, ipywidgets visible as on Colab: only the small package itself is installed
    (Path(site) / "course_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

    def run(code):
        return subprocess.run([python, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env,
                              timeout=600)

    missing = run("import importlib.util; print(importlib.util.find_spec('attention_lab'))")
    assert missing.stdout.strip() == "None", missing.stdout + missing.stderr  # as on Colab
    installed = run(local_cell)
    assert installed.returncode == 0, installed.stderr[-2000:]
    probe = run("import importlib.metadata as m, attention_lab as a, attention_lab.text as t, "
                "attention_lab.training as tr\n"
                "print(a.__version__, m.version('attention_lab'), a.__file__, len(t.corpus()), "
                "len(tr.load_trained().log['head']['step']))")
    assert probe.returncode == 0, probe.stderr[-2000:]
    module_version, dist_version, location, length, logged = probe.stdout.split()
    assert (module_version, dist_version) == (new, new), probe.stdout
    assert location.startswith(str(env_dir)), f"imported from {location}, not the fresh environment"
    assert int(length) == 1_115_394, "the tiny-Shakespeare corpus did not come with the package"
    assert int(logged) > 0, "chapter 6's trained weights and log did not come with the package"
    # where the package is present the cell does nothing: prove pip is not even started
    again = run("import subprocess\nsubprocess.run = None\n" + local_cell)
    assert again.returncode == 0, again.stderr[-2000:]

    # and the version, changelog, every bootstrap cell and the README's launch links all name the new tag
    assert_everything_names(repo, new)


def first_grading_commands() -> list[str]:
    """The commands of step 1 of "From your fork to grades" on the instructors' page, as printed there."""
    page = (ROOT / "book" / "instructors.md").read_text()
    step = page.split("### From your fork to grades", 1)[1]
    block = re.search(r"```bash\n(.*?)```", step, re.S).group(1)
    return [line.strip() for line in block.splitlines() if line.strip()]


@pytest.mark.skipif(shutil.which("git") is None or shutil.which("make") is None, reason="needs git and make")
def test_the_instructors_first_commands_reach_the_release_from_a_clone_without_tags(tmp_path):
    # a clone of main as it lands carries no tags; the page's commands must still reach the release it names
    commands = first_grading_commands()
    ref = layout.release_ref()
    assert commands == ["make release-tags", f"git switch --detach {ref}", "make graded"], commands
    repo = clone_of_this_checkout(tmp_path / "clone", "--no-tags")
    assert not git(repo, "tag", "--list"), "the clone was meant to have no tags"
    released = git(repo, "log", "--format=%H", "-1", f"--grep=^Release {layout.version()}$")
    assert released, f"no commit 'Release {layout.version()}' in the history: was the release made by make release?"
    for command in commands[:-1]:  # `make graded` itself is tested by tests/test_graded_edition.py
        done = subprocess.run(command.split(), cwd=repo, capture_output=True, text=True, timeout=120,
                              env={**os.environ, **GIT_IDENTITY})
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
        if command.startswith("make"):
            assert f"{ref}: tagged {released}" in done.stdout, done.stdout
            again = subprocess.run(command.split(), cwd=repo, capture_output=True, text=True, timeout=120)
            assert f"{ref}: already here" in again.stdout, "a second run must leave the tags as they are"
    assert git(repo, "rev-parse", "HEAD") == released
    assert versions(repo)["attention_lab/__init__.py"] == layout.version()

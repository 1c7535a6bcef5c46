"""The front door: the README opens for learners, and it, the intro and the instructors' page agree.

- The README's first sections are for a learner (who it is for, how long, four ways in, the chapters);
  maintainers' material comes after, under "For maintainers", which points to CONTRIBUTING.md.
- The total time in the README and in the intro is the sum of the instructors' per-chapter times.
- The README's test command is the command CI runs.
- The intro names and links lesson one; nothing cites a design document the repository does not hold.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from course import layout

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
INTRO = (ROOT / "book" / "intro.md").read_text()
INSTRUCTORS = (ROOT / "book" / "instructors.md").read_text()
LEARNER_SECTIONS = ["Who it is for", "How long", "Four ways in", "Chapters"]
MAINTAINER_WORDS = ["nbval", "html-manager", "coalesc", "page weight", "pytest", "bench"]


def sections(markdown: str) -> list[str]:
    return re.findall(r"^## (.+)$", markdown, re.MULTILINE)


def section(markdown: str, title: str) -> str:
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", markdown, re.MULTILINE | re.DOTALL)
    assert found, f"no section '## {title}'"
    return found.group(1)


def hours(minutes: int) -> str:
    return f"{minutes // 60} h {minutes % 60} min"


def chapter_times() -> list[tuple[int, int]]:
    """(shortest, longest) minutes of each chapter, from the instructors' table."""
    rows = re.findall(r"^\| \{doc\}`\.\./lessons/\d\d_\w+` \|.*\| (\d+)–(\d+) min \|$", INSTRUCTORS, re.MULTILINE)
    assert len(rows) == len(layout.chapters()), "a chapter has no time"
    return [(int(a), int(b)) for a, b in rows]


def test_the_readme_opens_for_learners():
    titles = sections(README)
    assert titles[:len(LEARNER_SECTIONS)] == LEARNER_SECTIONS, titles
    assert "For maintainers" in titles and titles.index("For maintainers") > titles.index("Chapters")
    before = README[:README.index("## For maintainers")].lower()
    # the generated chapter table names the release and the notebooks folder, nothing for maintainers
    leaked = [w for w in MAINTAINER_WORDS if w in before]
    assert leaked == [], f"maintainers' words in the learners' part of the README: {leaked}"
    ways = section(README, "Four ways in")
    for way in ("online", "Colab", "Binder", "own machine", "(book/how_to_run.md)"):
        assert way in ways, f"'Four ways in' does not mention {way!r}"
    assert "CONTRIBUTING.md" in section(README, "For maintainers")


def test_the_readme_gives_the_how_to_pages_own_install_command():
    # one command, the same in both: the how-to page's Linux and macOS block, its line continuation joined
    page = (ROOT / "book" / "how_to_run.md").read_text()
    linux = re.findall(r"^```console\n(.*?)^```", page, re.M | re.S)[1].replace("\\\n", " ")
    install = [" ".join(line.split()) for line in linux.splitlines() if "pip install" in line]
    block = re.search(r"```bash\n(.*?)```", section(README, "Four ways in"), re.DOTALL).group(1)
    assert install and [" ".join(line.split()) for line in block.splitlines() if "pip install" in line] == install
    assert "jupyter lab notebooks/" in block and "jupyter lab notebooks/" in linux


def test_total_time_is_the_sum_of_the_chapters_everywhere():
    times = chapter_times()
    total = f"about {hours(sum(a for a, _ in times))} to {hours(sum(b for _, b in times))}"
    assert total in README, f"README does not say {total!r}"
    assert total in INTRO, f"book/intro.md does not say {total!r}"
    assert f"| the whole course | | {total} |" in INSTRUCTORS
    first_five = f"about {hours(sum(a for a, _ in times[:5]))} to {hours(sum(b for _, b in times[:5]))}"
    assert f"chapters 1 to 5 alone: {first_five}" in README


def test_the_readme_test_command_is_what_ci_runs():
    block = re.search(r"```bash\n(.*?)```", section(README, "For maintainers"), re.DOTALL).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["make book", "make test"]
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == "make test", ".ci/run must end with the README's test command"
    workflow = (ROOT / ".github" / "workflows" / "tests.yml").read_text()
    assert re.search(r"^\s+run: make test\b", workflow, re.MULTILINE), "the tests workflow must run `make test`"


def test_the_intro_names_and_links_lesson_one():
    who = section(INTRO, "Who it is for")
    assert "Let's build GPT: from scratch, in code, spelled out" in who
    assert "{cite}`karpathy2023letsbuild`" in who
    url = re.search(r"url\s*=\s*\{(.+?)\}", (ROOT / "book" / "references.bib").read_text().split(
        "karpathy2023letsbuild", 1)[1]).group(1)
    assert f"]({url})" in who, "the intro links the video the bibliography cites"


def test_nothing_cites_a_design_document_outside_the_repository():
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    citing = [f for f in files if Path(f).suffix in {".md", ".py", ".txt", ".yml", ".toml", ".cfg", ""}
              and (ROOT / f).is_file() and "DESIGN.md" in (ROOT / f).read_text(errors="ignore")
              and f != "tests/test_front_door.py"]
    assert citing == [], f"these cite DESIGN.md, which is not in the repository (cite CONTRIBUTING.md): {citing}"
    assert "## Design notes" in (ROOT / "CONTRIBUTING.md").read_text()

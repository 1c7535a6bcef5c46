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


# ---- the times follow from the chapters (issue 35) -------------------------------------------------

MARKUP_LINE = re.compile(r"^(```|:::|:label:|:class:|\(.*\)=$)")


def chapter_words(stem: str) -> tuple[int, int]:
    """(words, words inside closed asides) of a chapter's prose: every markdown cell but the worked
    solutions, without directive fences, option lines and label lines."""
    import json
    cells = json.loads((ROOT / "lessons" / f"{stem}.ipynb").read_text())["cells"]
    words = aside = 0
    inside = False
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] != "markdown":
            continue
        if "{aside-start}" in source:
            inside = True
        if "{aside-end}" in source:
            inside = False
        if "solution" in cell["metadata"].get("tags", []) or source.lstrip().startswith("```{solution}"):
            continue
        n = sum(len(line.split()) for line in source.splitlines() if not MARKUP_LINE.match(line.strip()))
        words += n
        aside += n if inside else 0
    return words, aside


def estimate_rows() -> dict[int, dict]:
    table = INSTRUCTORS.split("### How the times are estimated", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in table.splitlines():
        m = re.match(r"^\| (\d) \| ([\d,]+) \(([\d,]+)\) \| (\d+) min \| (\d+) min: ([\d, ]+) \| (\d+) min \((\d)\)(?:: ([\d, ]+))? \| "
                     r"(\d+) min \|$", line)
        if m:
            n, words, aside, reading, ex, each, q_min, q_n, q_each, total = m.groups()
            rows[int(n)] = {"words": int(words.replace(",", "")), "aside": int(aside.replace(",", "")),
                            "reading": int(reading), "exercises": int(ex),
                            "each": [int(v) for v in each.split(",")], "q_min": int(q_min), "q_n": int(q_n),
                            "q_each": [int(v) for v in q_each.split(",")] if q_each else [2] * int(q_n),
                            "total": int(total)}
    return rows


def test_each_chapters_estimate_follows_from_its_words_exercises_and_questions():
    """The estimate table: words counted again from the chapter (within 3 %, so a small edit need not
    touch it), reading at 200 words a minute, one entry per exercise, 2 minutes per question unless the row
    lists each question's minutes, the sum; every
    chapter at most 75 minutes, inside the range the table above gives, whose lower end is a quick reader's
    (250 words a minute, closed asides left shut)."""
    rows = estimate_rows()
    stems = [p.stem for p in layout.chapters()]
    assert sorted(rows) == list(range(1, len(stems) + 1))
    ranges = chapter_times()
    for (n, row), stem, (low, high) in zip(sorted(rows.items()), stems, ranges):
        words, aside = chapter_words(stem)
        assert abs(row["words"] - words) <= 0.03 * words and abs(row["aside"] - aside) <= 0.03 * max(aside, 100), \
            (stem, row["words"], words, row["aside"], aside)
        source = (ROOT / "lessons" / f"{stem}.ipynb").read_text()
        exercises = len(re.findall(r":label: ex-", source))
        questions_asked = len(re.findall(r"questions\.ask\(", source))
        assert len(row["each"]) == exercises and sum(row["each"]) == row["exercises"], stem
        assert row["q_n"] == questions_asked == len(row["q_each"]) and row["q_min"] == sum(row["q_each"]), stem
        assert min(row["q_each"], default=2) >= 2, stem  # a question's own minutes add to the 2 it counts
        assert abs(row["reading"] - row["words"] / 200) <= 0.5, stem
        total = row["words"] / 200 + row["exercises"] + row["q_min"]
        assert abs(row["total"] - total) <= 1 and row["total"] <= 75, (stem, total)
        quick = (row["words"] - row["aside"]) / 250 + row["exercises"] + row["q_min"]
        assert low <= quick and total <= high <= 75 and high - total < 5 and quick - low < 5, (stem, low, high)

"""The book's structure: chapters, figures, references and the repository named in one place.

These read the committed files (notebooks, _toc.yml, _config.yml, references.bib, README.md); the
outputs themselves are compared by strict nbval, and the built pages by tests/browser.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course import book_index
from course import chapters as nbtool
from course import cli
from course import layout

ROOT = Path(__file__).resolve().parents[1]

CHAPTERS = [path.stem for path in layout.chapters()]
FIGURE_ANCHOR = re.compile(r"^\((fig-[^()\s]+)\)=[ \t]*$", re.M)
CITATION = re.compile(r"\{cite(?::\w+)?\}`([^`]+)`")


def load(stem):
    return nbformat.read(ROOT / "lessons" / f"{stem}.ipynb", as_version=4)


def markdown(nb):
    return "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def all_markdown():
    pages = [markdown(load(stem)) for stem in CHAPTERS]
    pages += [p.read_text() for p in (ROOT / "book").glob("*.md")]
    return "\n\n".join(pages)


def figures() -> list[tuple[str, str, int, str]]:
    """Every figure anchor of the chapters in reading order: (chapter, label, cell index, cell source)."""
    return [(stem, label, i, cell.source) for stem in CHAPTERS for i, cell in enumerate(load(stem).cells)
            if cell.cell_type == "markdown" for label in FIGURE_ANCHOR.findall(cell.source)]


def test_there_are_chapters_and_figures_to_test():
    assert len(CHAPTERS) >= 6 and all(re.fullmatch(r"\d{2}_[a-z0-9_]+", stem) for stem in CHAPTERS)
    assert len(figures()) >= len(CHAPTERS), "every chapter has at least one figure"


def test_toc_lists_the_chapters_in_order():
    toc = (ROOT / "_toc.yml").read_text()
    listed = re.findall(r"file: lessons/(\S+)", toc)
    assert listed == CHAPTERS, f"_toc.yml lists {listed}, but lessons/ holds {CHAPTERS}"


@pytest.mark.parametrize("stem", CHAPTERS)
def test_chapter_opens_with_bootstrap_then_labelled_title(stem):
    nb = load(stem)
    first, second = nb.cells[0], nb.cells[1]
    assert first.cell_type == "code"
    assert {"bootstrap", "remove-cell"} <= set(first.metadata.get("tags", []))
    assert first.source == nbtool.bootstrap_source(), "bootstrap cell not synced: run `make sync`"
    m = re.match(r"\((ch-[a-z-]+)\)=\s*\n# (\d+)\. ", second.source)
    assert m, f"{stem}: the second cell is not a `(ch-...)=` label over `# N. Title`: {second.source[:80]!r}"
    assert int(m.group(2)) == int(stem[:2]), f"{stem}: its title is numbered {m.group(2)}"


def test_the_bootstrap_cell_says_in_one_line_when_the_package_cannot_be_installed(tmp_path):
    # as on a Colab runtime that is offline: no attention_lab to import (python -S: no site-packages) and an
    # install that fails (a repository that is not there); pip's and git's output stay out of the learner's way
    url, _ = layout.repository()
    source = nbtool.bootstrap_source().replace(f"git+{url}@", f"git+file://{tmp_path}/no-such-repository@")
    done = subprocess.run([sys.executable, "-S", "-c", source], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == ["Could not install the course's helper package attention_lab from GitHub: "
                                        "check that this runtime is online, then run this cell again."]


def test_chapter_labels_are_unique():
    labels = [re.match(r"\((ch-[a-z-]+)\)=", load(stem).cells[1].source).group(1) for stem in CHAPTERS]
    assert len(set(labels)) == len(labels), labels


@pytest.mark.parametrize("stem", CHAPTERS)
def test_chapter_was_executed_top_to_bottom(stem):
    code = [c for c in load(stem).cells if c.cell_type == "code"]
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), f"execution counts {counts}: run `make outputs`"


def test_figures_are_numbered_in_reading_order_captioned_and_followed_by_their_code():
    labels = [label for _, label, _, _ in figures()]
    assert len(set(labels)) == len(labels), f"a figure anchor appears twice: {labels}"
    for number, (stem, label, index, source) in enumerate(figures(), start=1):
        assert f"**Fig. {number}.**" in source, f"{stem}: {label} is figure {number} but lacks '**Fig. {number}.**'"
        assert load(stem).cells[index + 1].cell_type == "code", f"{stem}: {label} is not followed by its code"


def test_every_figure_is_cross_referenced_from_prose():
    text = all_markdown()
    for number, (stem, label, _, _) in enumerate(figures(), start=1):
        assert re.search(rf"\{{ref\}}`Fig\. {number} <{label}>`", text), f"Fig. {number} ({label}) is never referenced"


def test_every_reference_is_cited_and_every_citation_is_a_reference():
    keys = re.findall(r"^@\w+\{([^,]+),", (ROOT / "book" / "references.bib").read_text(), re.M)
    assert keys and len(set(keys)) == len(keys), f"references.bib repeats a key: {keys}"
    cited = {k.strip() for group in CITATION.findall(all_markdown()) for k in group.split(",")}
    assert set(keys) - cited == set(), f"never cited: {sorted(set(keys) - cited)}"
    assert cited - set(keys) == set(), f"cited but not in references.bib: {sorted(cited - set(keys))}"
    # the book numbers the entries in file order (book/_ext/bib_order.py) and so do the launch notebooks
    assert book_index.load_book().bib == keys


def test_repository_is_named_once_and_everything_follows_it():
    url, _ = layout.repository()
    assert cli.main(["check"]) == 0, "out of date with _config.yml or lessons/: run `make sync`"
    for stem in CHAPTERS:
        assert f"git+{url}@{layout.release_ref()}" in load(stem).cells[0].source
    readme = (ROOT / "README.md").read_text()
    for stem in CHAPTERS:
        links = nbtool.launch_links(ROOT / "lessons" / f"{stem}.ipynb")
        for link in links.values():
            assert link in readme, f"README lacks {link}"
    # copies written by `make sync` may name it, each only inside the block `make sync` writes
    generated = {ROOT / "README.md": (nbtool.README_START, nbtool.README_END),
                 ROOT / "book" / "how_to_run.md": (nbtool.CLONE_START, nbtool.CLONE_END)}
    for path, (start, end) in generated.items():
        text, blocks = re.subn(re.escape(start) + ".*?" + re.escape(end), "", path.read_text(), flags=re.S)
        assert blocks == 1, f"{path.name}: the block `make sync` writes is missing"
        assert url not in text, f"{path.relative_to(ROOT)} names the repository outside its `make sync` block"
    # in the chapters and the launch notebooks, only the bootstrap cell (also written by `make sync`)
    notebook_files = sorted((ROOT / "lessons").glob("*.ipynb")) + sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert len(notebook_files) == 2 * len(CHAPTERS)
    for path in notebook_files:
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if url in cell.source:
                assert "bootstrap" in cell.metadata.get("tags", []), f"{path.name} cell {i} repeats the repository URL"
    others = [p for p in ROOT.rglob("*") if p.is_file() and p.suffix in {".md", ".py", ".yml", ".ipynb", ".txt"}
              and not any(part.startswith((".venv", ".git", "_build", "node_modules", "student", "graded")) for part in p.parts)
              and p.name != "_config.yml" and p not in generated and p not in notebook_files]
    assert len(others) > 20
    for path in others:
        assert url not in path.read_text(errors="ignore"), f"{path} repeats the repository URL"


def test_fork_changes_follow_the_config(tmp_path, monkeypatch):
    """Point _config.yml at a fork: every launch link and the bootstrap source follow it."""
    config = tmp_path / "_config.yml"
    config.write_text((ROOT / "_config.yml").read_text().replace(
        layout.repository()[0], "https://github.com/someone/my-fork"))
    monkeypatch.setattr(layout, "CONFIG", config)
    monkeypatch.setattr(nbtool, "ROOT", tmp_path)
    (tmp_path / "lessons").mkdir()
    links = nbtool.launch_links(tmp_path / "lessons" / "05_one_head.ipynb")
    ref = layout.release_ref()  # the version in pyproject.toml, e.g. v0.2.0
    assert links == {
        "page": "https://someone.github.io/my-fork/lessons/05_one_head.html",
        "binder": f"https://mybinder.org/v2/gh/someone/my-fork/{ref}?urlpath=lab/tree/notebooks/05_one_head.ipynb",
        "colab": f"https://colab.research.google.com/github/someone/my-fork/blob/{ref}/notebooks/05_one_head.ipynb",
    }
    assert nbtool.clone_block().splitlines()[3:5] == ["git clone https://github.com/someone/my-fork", "cd my-fork"]
    assert f"git+https://github.com/someone/my-fork@{layout.release_ref()}" in nbtool.bootstrap_source()


def test_a_config_without_repository_says_what_to_add(tmp_path, monkeypatch):
    (tmp_path / "_config.yml").write_text("title: x\n")
    monkeypatch.setattr(layout, "CONFIG", tmp_path / "_config.yml")
    with pytest.raises(SystemExit, match="repository"):
        layout.repository()


def test_instructors_page_covers_every_chapter_and_exercise():
    page = (ROOT / "book" / "instructors.md").read_text()
    for stem in CHAPTERS:
        assert f"{{doc}}`../lessons/{stem}`" in page, f"instructors page does not cover {stem}"
        labels = re.findall(r"^:label: (ex-\S+)", markdown(load(stem)), re.M)
        assert 2 <= len(labels) <= 4, f"{stem}: {len(labels)} exercises, expected 2 to 4"
        for label in labels:
            assert f"{{ref}}`{label}`" in page, f"instructors page does not list exercise {label}"


@pytest.mark.parametrize("stem", CHAPTERS)
def test_every_coding_exercise_has_stub_solution_and_check(stem):
    cells = load(stem).cells
    stubs = [i for i, c in enumerate(cells) if "exercise-stub" in c.metadata.get("tags", [])]
    assert stubs, f"{stem} has no coding exercise"
    for i in stubs:
        assert "NotImplementedError" in cells[i].source
        after = [c for c in cells[i + 1:] if c.cell_type == "code" and "solution" not in c.metadata.get("tags", [])]
        assert after and "checks.check_" in after[0].source, f"{stem}: the stub at cell {i} is not followed by a check"


@pytest.mark.parametrize("stem", CHAPTERS)
def test_every_plotted_figure_has_alt_text_that_describes_it(stem):
    # an explorer's picture is for front ends without widgets; the book shows the explorer itself, whose
    # caption says what it shows (tests/browser/test_page_explorers.py)
    for i, cell in enumerate(load(stem).cells):
        pictures = [o for o in cell.get("outputs", []) if "image/png" in o.get("data", {})
                    and "attention_lab_page" not in o.get("metadata", {})]
        if cell.cell_type == "code" and pictures:
            alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")
            assert len(alt.split()) >= 12, f"{stem} cell {i}: a figure without alt text (metadata mystnb.image.alt)"


def test_every_excused_cell_is_listed_with_its_reason_in_contributing():
    """A cell tagged nbval-ignore-output is run by nbval but its output is not compared: CONTRIBUTING.md's
    table of excused cells names each one (chapter, a piece of its code) and says why, and lists no other."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    table = text.split("#### Excused cells", 1)[1].split("\n#", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()
            if line.startswith("| `")]
    listed = [(row[0].strip("`"), re.findall(r"`([^`]+)`", row[1]), row[2]) for row in rows]
    tagged = [(stem, cell.source) for stem in CHAPTERS for cell in load(stem).cells
              if "nbval-ignore-output" in cell.metadata.get("tags", [])]
    for stem, source in tagged:
        assert any(s == stem and snippets and all(p in source for p in snippets) and len(why.split()) >= 8
                   for s, snippets, why in listed), f"{stem}: an excused cell is not in CONTRIBUTING.md's list"
        assert "nbval" not in source, f"{stem}: a harness comment in code a reader sees"
    assert len(listed) == len(tagged), "CONTRIBUTING.md lists excused cells that are no longer tagged"


def test_a_references_section_that_lists_its_works_lists_every_work_the_chapter_cites():
    """Chapters 4 to 6 name their works under References: every key cited above it is named there, and
    nothing else (chapter 6 once left out vaswani2017attention)."""
    import json
    cite = re.compile(r"\{cite\}`([^`]+)`")
    for path in sorted((ROOT / "lessons").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        at = next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith("## References"))
        listed = {k.strip() for m in cite.findall("".join(cells[at]["source"])) for k in m.split(",")}
        if not listed:  # "the works cited are listed in the bibliography": nothing named, nothing to miss
            continue
        used = {k.strip() for c in cells[:at] if c["cell_type"] == "markdown"
                for m in cite.findall("".join(c["source"])) for k in m.split(",")}
        assert used == listed, (path.name, sorted(used - listed), sorted(listed - used))

"""The book built without solutions (BOOK_SOLUTIONS=hidden, book/_ext/hide_solutions.py).

The test builds the whole book that way, with -W -n, into a folder of its own, and reads every file of it:
no solution of any chapter (its code, its text, its box) is anywhere in the output, the exercises and
their checks are. Every piece of solution it looks for is first found in the normal build, `_build/html`
(made by `make book`, which `make test` runs first), so the search cannot pass by looking for text no
page ever shows.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from bs4 import BeautifulSoup
from sphinx.errors import ConfigError

import hide_solutions
import page_checks
from course import layout
import solution_audit
from course import tags
from browsing import missing

ROOT = Path(__file__).resolve().parents[1]
NORMAL = ROOT / "_build" / "html"
LESSONS = layout.chapters()
WORDS = re.compile(r"[A-Za-z][A-Za-z']+")
SMART_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})


# ---------------------------------------------------------------------------------------------------
# the mode and the switch between modes

def test_the_mode_comes_from_the_environment_then_the_config_and_a_wrong_value_is_refused(monkeypatch):
    monkeypatch.delenv(hide_solutions.ENV_VAR, raising=False)
    assert hide_solutions.mode(SimpleNamespace(course_solutions="shown")) == "shown"
    monkeypatch.setenv(hide_solutions.ENV_VAR, "hidden")
    assert hide_solutions.mode(SimpleNamespace(course_solutions="shown")) == "hidden"
    monkeypatch.setenv(hide_solutions.ENV_VAR, "off")
    with pytest.raises(ConfigError, match="'shown'.*'hidden'"):
        hide_solutions.mode(SimpleNamespace(course_solutions="shown"))


def test_switching_modes_in_one_output_folder_starts_from_an_empty_folder(tmp_path):
    out = tmp_path / "html"
    assert not hide_solutions.start_clean_on_switch(out, "shown")  # nothing built yet
    (out / "index.html").write_text("built")
    (out / "_sources" / "lessons").mkdir(parents=True)
    (out / "_sources" / "lessons" / "01.ipynb").write_text("a solution")
    assert not hide_solutions.start_clean_on_switch(out, "shown")  # same mode: incremental build
    assert (out / "_sources").is_dir()
    assert hide_solutions.start_clean_on_switch(out, "hidden")
    assert sorted(p.name for p in out.iterdir()) == [".solutions"]
    assert (out / ".solutions").read_text() == "hidden\n"
    # a folder built before the marker existed showed the solutions
    (out / ".solutions").unlink()
    (out / "index.html").write_text("built")
    assert not hide_solutions.start_clean_on_switch(out, "shown")
    (out / ".solutions").unlink()
    assert hide_solutions.start_clean_on_switch(out, "hidden")


# ---------------------------------------------------------------------------------------------------
# the built book

def _text(path: Path) -> str:
    """What a reader (or a search engine) can read in a built file, whitespace collapsed."""
    raw = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".html":  # no separator: highlighted code is one span per token
        raw = BeautifulSoup(raw, "html.parser").get_text("")
    raw = raw.translate(SMART_QUOTES)  # Sphinx writes ’ for '
    return " ".join(raw.split())


def _corpus(html: Path) -> dict[str, str]:
    return {p.relative_to(html).as_posix(): _text(p) for p in sorted(html.rglob("*"))
            if p.is_file() and p.suffix in (".html", ".js", ".txt", ".ipynb", ".md", ".json", ".inv")
            and "_static" not in p.relative_to(html).parts}


def _shown_elsewhere(lessons) -> str:
    """Every line the chapters show outside their solutions: a solution line found there proves nothing."""
    shown = []
    for lesson in lessons:
        for cell in lesson.cells:
            if "solution" not in cell.metadata.get("tags", []):
                shown += [" ".join(line.split()) for line in cell.source.splitlines()]
    return "\n".join(shown)


def solution_signatures(lessons) -> list[tuple[str, str]]:
    """(kind, text) pieces of every solution that a page showing it contains verbatim, and no other page."""
    elsewhere = _shown_elsewhere(lessons)
    found = []
    for lesson in lessons:
        for kind, text in solution_audit.solution_parts(lesson):
            for line in text.splitlines():
                plain = " ".join(line.split())
                if kind == "code":
                    if len(plain) >= 24 and plain not in elsewhere and not plain.startswith("#"):
                        found.append(("code", plain))
                elif not re.search(r"[`{}$\[\]<>|*_\\]", line):
                    words = WORDS.findall(line)
                    if len(words) >= 8:
                        found.append(("text", " ".join(words[:8])))
    return found


def _words(text: str) -> str:
    return " ".join(WORDS.findall(text))


@pytest.fixture(scope="module")
def lessons():
    return [nbformat.read(p, as_version=4) for p in LESSONS]


@pytest.fixture(scope="module")
def hidden(tmp_path_factory):
    out = tmp_path_factory.mktemp("book")
    env = {**os.environ, hide_solutions.ENV_VAR: "hidden"}
    result = subprocess.run([str(ROOT / ".venv" / "bin" / "jupyter-book"), "build", str(ROOT), "-W", "-n",
                             "--keep-going", "--path-output", str(out)],
                            capture_output=True, text=True, env=env, timeout=900)
    log = result.stdout + result.stderr
    warnings = [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line]
    assert result.returncode == 0 and not warnings, "\n".join(warnings) or log[-3000:]
    return out / "_build" / "html"


@pytest.fixture(scope="module")
def normal():
    marker = NORMAL / hide_solutions.MARKER
    if not (NORMAL / "index.html").is_file() or (marker.is_file() and marker.read_text().strip() != "shown"):
        missing(f"{NORMAL} is not a build with solutions: run `make book` first")
    return NORMAL


def test_the_pieces_looked_for_are_in_the_normal_build(lessons, normal):
    signatures = solution_signatures(lessons)
    kinds = {kind for kind, _ in signatures}
    assert kinds == {"code", "text"} and len(signatures) > 40
    pages = {name: text for name, text in _corpus(normal).items() if name.startswith("lessons/")}
    everything, words = " ".join(pages.values()), _words(" ".join(pages.values()))
    missing = [text for kind, text in signatures if text not in (everything if kind == "code" else words)]
    assert not missing, f"solution pieces the normal build does not show: {missing[:5]}"
    for name in pages:
        if name.endswith(".html"):
            html = (normal / name).read_text(encoding="utf-8")
            assert "solution dropdown admonition" in html, f"{name}: no solution box in the normal build"


def test_no_solution_of_any_chapter_is_anywhere_in_the_solution_free_build(lessons, hidden):
    assert (hidden / hide_solutions.MARKER).read_text() == "hidden\n"
    assert not (hidden / "_sources").exists()
    corpus = _corpus(hidden)
    assert any(name == "searchindex.js" for name in corpus)
    leaks, signatures = [], solution_signatures(lessons)
    for name, text in corpus.items():
        words = _words(text)
        for kind, piece in signatures:
            if piece in (text if kind == "code" else words):
                leaks.append(f"{name}: {kind} {piece!r}")
    assert not leaks, "\n".join(leaks[:20])
    for page in sorted((hidden / "lessons").glob("*.html")):
        html = page.read_text(encoding="utf-8")
        assert not [c for c in re.findall(r'class="([^"]*)"', html) if "solution" in c], page.name
        assert "download-source-button" not in html and "_sources/" not in html, page.name


def test_the_exercises_and_their_checks_stay_with_their_stored_output(lessons, hidden):
    for path, lesson in zip(LESSONS, lessons):
        html = (hidden / "lessons" / f"{path.stem}.html").read_text(encoding="utf-8")
        soup = BeautifulSoup(html, "html.parser")
        exercises = soup.select("div.exercise")
        wanted = [m for c in lesson.cells if c.cell_type == "markdown"
                  for m in re.finditer(r"```\{exercise(?:-start)?\}", c.source)]
        assert len(exercises) == len(wanted) > 0, path.name
        titles = [" ".join(e.select_one(".admonition-title").get_text(" ").split()) for e in exercises]
        chapter = int(path.stem[:2])
        assert [t.split()[1] for t in titles] == [f"{chapter}.{k}" for k in range(1, len(wanted) + 1)]
        text = " ".join(soup.get_text("").split())
        for cell in lesson.cells:
            if cell.cell_type == "code" and tags.CHECK_CALL.search(cell.source) \
                    and "solution" not in cell.metadata.get("tags", []):
                assert " ".join(cell.source.split()) in text, (path.name, cell.source)
                printed = "".join(o.get("text", "") for o in cell.outputs)
                # stored as the stub answers it: the book shows no pass before the reader has answered, in
                # the page's words, since the page hides the stub (book/_ext/page_checks.py)
                assert printed.startswith("✗ not yet implemented"), (path.name, printed)
                shown = " ".join(page_checks.STUB_LINE.sub(lambda m: page_checks.page_words(m["name"]),
                                                           printed).split())
                assert shown in text and "above, then run this cell" not in text, (path.name, shown)

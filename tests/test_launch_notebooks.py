"""The notebooks learners open read as plain Markdown, with every solution folded until asked for.

course/launch_notebooks.py turns each chapter (MyST, for the book) into notebooks/NN_slug.ipynb, which Colab,
Binder and `jupyter lab notebooks/` open, and the student editions go through the same conversion. These
tests count raw MyST and open solutions in every notebook a launch link opens and in every student edition,
and expect zero of each. The two counters are proven first on tests/fixtures/99_every_myst_construct.ipynb,
which holds every MyST construct the chapters use; a test fails as soon as a chapter uses one it lacks.
"""

from __future__ import annotations

import ast
import collections
import copy
import re
from pathlib import Path

import exercise_numbers
from course import book_index
from course import chapters as nbtool
from course import cli
from course import launch_notebooks as ln
from course import layout
from course import myst
import solution_audit
from course import solution_code
from course import student_edition
from course import tags
import nbformat
import pytest
from browsing import built_page
from nbformat.v4 import new_markdown_cell


ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "99_every_myst_construct.ipynb"
CHAPTERS = [p.stem for p in layout.chapters()]


def lesson(stem):
    return nbformat.read(ROOT / "lessons" / f"{stem}.ipynb", as_version=4)


def fixture():
    return nbformat.read(FIXTURE, as_version=4)


@pytest.fixture(scope="module")
def book():
    return book_index.load_book(extra=[FIXTURE])


@pytest.fixture(scope="module")
def converted(book):
    return ln.plain_notebook(fixture(), FIXTURE.stem, book, name="fixture")


def raw_count(nb) -> collections.Counter:
    return collections.Counter(kind for c in nb.cells if c.cell_type == "markdown" for kind, _ in myst.raw_myst(c.source))


# --- the counters, proven on the fixture -------------------------------------------------------------

def test_the_raw_myst_counter_finds_every_construct_in_the_fixture():
    found = [item for c in fixture().cells if c.cell_type == "markdown" for item in myst.raw_myst(c.source)]
    counts = collections.Counter(kind for kind, _ in found)
    # 24 roles (one wrapped over two lines), 18 directive fences of backticks (3 and 4) and colons,
    # 10 option lines, 3 label lines, 1 labelled display equation, 1 definition-list line
    assert counts == {"role": 24, "directive": 18, "option": 10, "label": 3, "math label": 1, "definition": 1}
    texts = [text for _, text in found]
    assert texts.count("{ref}`Fig. 2 <fig-matmul-average>`") == 2, "the role wrapped over two lines"
    assert ":::{note}" in texts and "```{warning}" in texts and "````{figure} images/fixture.png" in texts
    assert "{ref}`label`" not in texts, "a role shown inside a code span is code, not markup"
    assert "{ref}`not-a-role`" not in texts, "a role inside a code block is code, not markup"
    assert "```{exercise-end}" in texts, "a directive's closing fence must not open a code block"


def test_the_open_solution_counter_sees_each_way_a_solution_can_show(converted):
    lesson_nb = fixture()
    # the chapter itself shows all five: two code cells, three text answers
    assert len(solution_audit.open_solutions(lesson_nb, lesson_nb)) == 5
    assert solution_audit.open_solutions(converted, lesson_nb) == []
    unfolded = copy.deepcopy(converted)
    form = next(c for c in unfolded.cells if c.source.startswith("#@title Solution to Exercise 99.1"))
    form.metadata["jupyter"]["source_hidden"] = False
    assert solution_audit.open_solutions(unfolded, lesson_nb) == ["code solution shown: 'def f(x):'"]
    opened = copy.deepcopy(converted)
    answer = next(c for c in opened.cells if "Solution to Exercise 99.2" in c.source)
    answer.source = answer.source.replace("<details>", "<details open>")
    assert "a <details> block is open" in solution_audit.open_solutions(opened, lesson_nb)
    unwrapped = copy.deepcopy(converted)
    answer = next(c for c in unwrapped.cells if "Solution to Exercise 99.2" in c.source)
    answer.source = re.sub(r"</?details>|<summary>.*?</summary>", "", answer.source)
    assert len(solution_audit.open_solutions(unwrapped, lesson_nb)) == 1
    dropped = copy.deepcopy(converted)
    dropped.cells = [c for c in dropped.cells if not c.source.startswith("#@title Solution to Exercise 99.1")]
    assert solution_audit.open_solutions(dropped, lesson_nb) == ["code solution missing: 'def f(x):'"]
    # in a student edition even a folded solution is one too many
    assert len(solution_audit.open_solutions(converted, lesson_nb, student=True)) == 5


def inventory(nb) -> dict[str, set]:
    """The MyST constructs and cell metadata a notebook uses, by category."""
    found = collections.defaultdict(set)
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        found[f"{cell.cell_type} tags"].update(tags)
        found[f"{cell.cell_type} metadata"].update(k for k in cell.metadata if k != "tags")
        if cell.cell_type != "markdown":
            continue
        for kind, text in myst.raw_myst(cell.source):
            if kind == "role":
                found["roles"].add(re.match(r"\{([^}]+)\}", text).group(1))
            elif kind == "directive":
                m = re.match(r"(`{3,}|~{3,}|:{3,})\{([^}]+)\}", text)
                found["directives"].add((m.group(1)[0], m.group(2)))
            elif kind == "option":
                found["options"].add(text.split(":")[1])
            else:
                found["other"].add(kind)
        for form, pattern in (("$$ display math", r"^\s*\$\$"), ("$ inline math", r"(?<!\$)\$[^$\s][^$]*\$"),
                              ("role with title", r"\}`[^`]*<[^`>]+>`"), ("role over two lines", r"\}`[^`]*\n[^`]*`"),
                              ("two citations in one", r"\{cite[^}]*\}`[^`]*,[^`]*`")):
            if re.search(pattern, cell.source, re.M):
                found["forms"].add(form)
    return found


def test_the_fixture_holds_every_construct_the_chapters_use():
    wanted = collections.defaultdict(set)
    for stem in CHAPTERS:
        for key, values in inventory(lesson(stem)).items():
            wanted[key] |= values
    held = inventory(fixture())
    missing = {key: sorted(map(str, values - held[key])) for key, values in wanted.items() if values - held[key]}
    assert not missing, (f"the chapters use constructs {FIXTURE.name} lacks: {missing}; add each to the fixture, "
                         "with its conversion in course/plain_markdown.py")


# --- the conversion, on the fixture ------------------------------------------------------------------

def test_the_fixture_converts_to_plain_markdown_with_solutions_folded(converted):
    assert raw_count(converted) == {}
    text = "\n\n".join(c.source for c in converted.cells if c.cell_type == "markdown")
    base = layout.pages_url(layout.repository()[0])
    # labels become invisible anchors in the heading or paragraph they name
    assert '# <a id="ch-fixture"></a>99. Every MyST construct' in text
    assert '<a id="fig-fixture"></a>**Fig. 99.**' in text
    # references: in this notebook an anchor, elsewhere the hosted page
    assert "[Fig. 99](#fig-fixture)" in text and "[99.1 A section with mathematics](#sec-fixture)" in text
    assert "[Exercise 99.1](#ex-fixture-code)" in text
    assert f"[2. Queries, keys and values]({base}/lessons/02_queries_keys_values.html)" in text
    assert f"[Fig. 2]({base}/lessons/01_plain_causal_average.html#fig-matmul-average)" in text
    assert f"[bibliography]({base}/book/bibliography.html)" in text and f"[Glossary]({base}/book/glossary.html)" in text
    # terms read as the word, linked to the glossary; citations as numbered links to the bibliography
    assert f"[logits]({base}/book/glossary.html#term-logit)" in text
    assert (rf"\[[6]({base}/book/bibliography.html#cite-pytorch-tril), "
            rf"[8]({base}/book/bibliography.html#cite-pytorch-sdpa)\]") in text
    assert rf"Bahdanau et al. \[[9]({base}/book/bibliography.html#cite-bahdanau2014neural)\]" in text
    # exercises headed and numbered by chapter
    assert re.findall(r"^### <a id=\"([\w-]+)\"></a>(Exercise [\d.]+)$", text, re.M) == [
        ("ex-fixture-code", "Exercise 99.1"), ("ex-fixture-text", "Exercise 99.2"), ("ex-fixture-gated", "Exercise 99.3")]
    # admonitions as quotes or folded, figures as images
    assert "> **Note**" in text and "<summary>A titled aside</summary>" in text
    # an aside around cells (book/_ext/asides.py): a line where it starts, one where it ends, the cells between
    sources = [c.source for c in converted.cells]
    start = next(n for n, s in enumerate(sources) if s == "> **A closed aside around code cells** An aside: the chapter goes on after its end, below.")
    assert sources[start + 1 : start + 4] == ["Text inside the aside, before its code.", 'print("inside the aside")',
                                              "*End of the aside.*"]
    assert '<a id="fig-fixture-image"></a>![a small picture](https://raw.githubusercontent.com/' in text


def test_a_demonstration_folds_with_its_text_and_the_output_the_book_shows(converted, book):
    """A solution cell that only prints would print its answer when "Run all" runs it: it goes in <details>."""
    assert not any(c.source.startswith("#@title Solution to Exercise 99.3") for c in converted.cells)
    (answer,) = [c for c in converted.cells if "<summary>Solution to Exercise 99.3</summary>" in c.source]
    assert answer.source.index("explains itself") < answer.source.index('```python\nprint("demonstration")\n```') \
        < answer.source.index("continues with a remark")
    nb = fixture()
    demo = next(c for c in nb.cells if c.source == 'print("demonstration")')
    demo.outputs = [nbformat.v4.new_output("stream", name="stdout", text="demonstration\n")]
    answer = next(c for c in ln.plain_notebook(nb, FIXTURE.stem, book).cells if "Exercise 99.3</summary>" in c.source)
    assert "It prints:\n\n```\ndemonstration\n```" in answer.source
    # a cell that changes what a later cell reads, or draws a picture, must still run: a folded form cell
    nb.cells.append(nbformat.v4.new_code_cell("print(demonstration_total)"))
    demo.source = "demonstration_total = 1"
    cells = ln.plain_notebook(nb, FIXTURE.stem, book).cells
    assert any(c.source == "#@title Solution to Exercise 99.3 (continued)\ndemonstration_total = 1" for c in cells)


def test_stub_shows_then_the_check_then_the_folded_solution(converted):
    ids = [c.get("id") for c in converted.cells]
    stub, check, solution = ids.index("99-008"), ids.index("99-012"), ids.index("99-010")
    assert stub < check < solution, "the check must grade the learner's answer, not the solution"
    cells = converted.cells
    assert cells[stub].source.startswith("# Exercise 99.1: write your answer here")
    assert "remove-cell" not in cells[stub].metadata.get("tags", [])
    form = cells[solution]
    assert form.source.splitlines()[0] == "#@title Solution to Exercise 99.1"
    assert form.metadata["cellView"] == "form" and form.metadata["jupyter"]["source_hidden"] is True
    boot = cells[0]
    assert boot.source.startswith("#@title Set-up: install the helper package") and boot.metadata["cellView"] == "form"
    assert all(c.outputs == [] and c.execution_count is None for c in cells if c.cell_type == "code")
    assert "widgets" not in converted.metadata
    assert not any("Only the book shows this cell" in c.source for c in cells), "a removed markdown cell stays out"


DEF = "def f(x):\n    return x + 1\n\n\n"  # a solution that defines: a form cell, not a demonstration
SPLIT = [
    # (solution source after DEF, later cell, what the form cell runs after DEF, what folds in <details>)
    ("y = f(2)\nprint(y)", "", "y = f(2)", "print(y)"),
    ("for n in range(2):\n    print(n)\nprint(n)", "", "", "for n in range(2):\n    print(n)\nprint(n)"),
    ("def show(x):\n    print(x)\n\n\nfor n in range(2):\n    show(n)\ny = 3\ny",
     "", "def show(x):\n    print(x)\n\n\nfor n in range(2):\n    show(n)\ny = 3", "y"),
    ("y = 3\nfor n in range(2):\n    display([n for n in [y]])", "print(y)", "y = 3",
     "for n in range(2):\n    display([n for n in [y]])"),
    ("import torch\ntorch.manual_seed(0)", "", "import torch\ntorch.manual_seed(0);", None),
    ("y = 3  # three\ny.bit_length()  # calls", "", "y = 3  # three\ny.bit_length();  # calls", None),
]


def with_solution(source: str, later: str):
    """The fixture with Exercise 99.1's solution cell holding DEF and ``source``, and ``later`` at the end."""
    nb = fixture()
    cell = next(c for c in nb.cells if c.get("id") == "99-010")
    cell.source, cell.outputs = DEF + source, [nbformat.v4.new_output("stream", name="stdout", text="0\n1\n")]
    nb.cells.append(nbformat.v4.new_code_cell(later))
    return nb


@pytest.mark.parametrize("source, later, form, folded", SPLIT)
def test_a_solution_form_cell_keeps_what_later_cells_need_and_folds_what_prints(book, source, later, form, folded):
    """Run all runs a solution's form cell, whose outputs Colab and JupyterLab show: it must print nothing."""
    nb = with_solution(source, later)
    converted = ln.plain_notebook(nb, FIXTURE.stem, book)
    cells = {c.get("id"): c for c in converted.cells}
    assert cells["99-010"].source == f"#@title Solution to Exercise 99.1\n{DEF}{form}".rstrip()
    assert solution_audit.open_solutions(converted, nb) == []
    shown = cells.get("99-010-shown")
    if folded is None:
        assert shown is None
        return
    assert shown.source.startswith("<details>\n<summary>Solution to Exercise 99.1 (continued)</summary>")
    assert f"```python\n{folded}\n```\n\nIt prints:\n\n```\n0\n1\n```" in shown.source


@pytest.mark.parametrize("source, later, words", [
    ("for n in range(2):\n    print(n)", "print(n)", "line 5 prints and binds n, which later code reads"),
    ("for n in range(2):\n    print(n)\nm = n", "", "line 5 prints and binds n, which later code reads"),
    ("y = 1; print(y)", "", "line 5 holds a statement that prints and one that does not"),
    ("%time y = 1", "", "a solution that is not plain Python"),
])
def test_a_solution_that_cannot_be_split_stops_the_conversion_naming_the_cell(book, source, later, words):
    with pytest.raises(book_index.LaunchError) as info:
        ln.plain_notebook(with_solution(source, later), FIXTURE.stem, book,
                          name="lessons/99_every_myst_construct.ipynb")
    assert str(info.value).startswith("lessons/99_every_myst_construct.ipynb: cell 10 (id 99-010): ")
    assert words in str(info.value)


@pytest.mark.parametrize("source, words", [
    ("A {foo}`bar` role.", "the MyST role {foo} has no plain-Markdown form"),
    ("```{tab-set}\nx\n```", "the MyST directive {tab-set} has no plain-Markdown form"),
    ("See {ref}`nowhere`.", "no label `nowhere`"),
    ("A {term}`gizmo`.", "`gizmo` is not defined in book/glossary.md"),
    ("As shown {cite}`nobody2099`.", "`nobody2099` is not in book/references.bib"),
    ("A note.[^1]\n\n[^1]: the note", "footnote [^1]"),
    ("See {doc}`../book/nowhere`.", "no page `book/nowhere`"),
])
def test_a_construct_without_a_plain_form_stops_the_conversion_naming_the_cell(book, source, words):
    nb = fixture()
    nb.cells.insert(3, new_markdown_cell(source, id="99-bad"))
    with pytest.raises(book_index.LaunchError) as info:
        ln.plain_notebook(nb, FIXTURE.stem, book, name="lessons/99_every_myst_construct.ipynb")
    assert "lessons/99_every_myst_construct.ipynb: cell 3 (id 99-bad)" in str(info.value)
    assert words in str(info.value)


def test_an_answer_tagged_solution_outside_a_solution_stops_the_conversion(book):
    nb = fixture()
    nb.cells.insert(3, new_markdown_cell("The answer is 42.", id="99-loose", metadata={"tags": ["solution"]}))
    with pytest.raises(book_index.LaunchError, match=r"cell 3 \(id 99-loose\): a markdown cell tagged `solution` outside"):
        ln.plain_notebook(nb, FIXTURE.stem, book)


# --- every notebook a launch link opens, every student edition ----------------------------------------

@pytest.mark.parametrize("stem", CHAPTERS)
def test_the_launch_notebook_holds_no_raw_myst_and_no_open_solution(stem, book):
    links = nbtool.launch_links(ROOT / "lessons" / f"{stem}.ipynb")
    for kind in ("binder", "colab"):
        opened = re.search(r"(notebooks/[^/?]+\.ipynb)$", links[kind]).group(1)
        assert opened == f"notebooks/{stem}.ipynb" and f"/{layout.release_ref()}" in links[kind]
        assert (ROOT / opened).is_file(), f"{kind} opens {opened}, which is not committed: run `make launch`"
    nb = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    raw = myst.raw_myst_in_notebook(nb)
    assert raw == [], f"raw MyST in notebooks/{stem}.ipynb: {raw}"
    source = lesson(stem)
    # nothing shown, and every code solution still there, folded (open_solutions reports a missing one)
    assert solution_audit.open_solutions(nb, source) == []
    solved = {m for c in source.cells if c.cell_type == "markdown"
              for m in re.findall(r"\{solution(?:-start)?\}\s*(\S+)", c.source)}
    titles = set(re.findall(r"(?:#@title |<summary>)Solution to Exercise ([\d.]+)",
                            "\n".join(c.source for c in nb.cells)))
    numbers = {book.labels[label].number for label in solved}
    assert titles == numbers, f"folded solutions for exercises {sorted(titles)}, expected {sorted(numbers)}"
    assert all(c.outputs == [] for c in nb.cells if c.cell_type == "code") and "widgets" not in nb.metadata


@pytest.mark.parametrize("stem", CHAPTERS)
def test_the_student_edition_holds_no_raw_myst_and_no_solution(stem, book):
    source = lesson(stem)
    nb = student_edition.student_notebook(source, stem, f"lessons/{stem}.ipynb", book)
    assert myst.raw_myst_in_notebook(nb) == []
    assert solution_audit.open_solutions(nb, source, student=True) == []
    stubs = [c for c in nb.cells if "exercise-stub" in c.metadata.get("tags", [])]
    assert stubs and all(c.source.startswith("# Exercise ") for c in stubs)


def can_print(source: str) -> list[str]:
    """What in a form cell's source could print or display when it runs (IPython shows a cell's last
    expression unless a ``;`` ends it): independent of the converter's own analysis."""
    body = ast.parse(source).body
    found = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        calls = {getattr(n.func, "id", getattr(n.func, "attr", None))
                 for n in ast.walk(node) if isinstance(n, ast.Call)}
        found += [f"line {node.lineno}: {name}()" for name in sorted(calls & {"print", "display"})]
        after = source.split("\n")[node.end_lineno - 1].encode()[node.end_col_offset :].decode()
        if isinstance(node, ast.Expr) and not (node is body[-1] and after.lstrip().startswith(";")):
            found.append(f"line {node.lineno}: a bare expression")
    return found


@pytest.mark.parametrize("edition", ["launch", "student"])
def test_no_folded_solution_or_set_up_cell_can_print(edition, book):
    hidden = []
    for stem in CHAPTERS:
        nb = (nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4) if edition == "launch" else
              student_edition.student_notebook(lesson(stem), stem, f"lessons/{stem}.ipynb", book))
        hidden += [(stem, c) for c in nb.cells if c.get("metadata", {}).get("jupyter", {}).get("source_hidden")]
    printing = {f"{stem} {c.get('id')}": can_print(c.source) for stem, c in hidden if can_print(c.source)}
    assert printing == {}, f"folded cells that print after Run all: {printing}"
    solutions = sum(c.source.startswith("#@title Solution") for _, c in hidden)
    code = sum(tags.SOLUTION in c.metadata.get("tags", []) and c.cell_type == "code" for s in CHAPTERS
               for c in lesson(s).cells) - sum(len(solution_code.demonstrations(lesson(s))) for s in CHAPTERS)
    assert solutions == (0 if edition == "student" else code), "a folded solution is missing, or one is left in"
    assert len(hidden) >= len(CHAPTERS), "every chapter has its folded bootstrap cell"


@pytest.mark.slow
def test_run_all_shows_no_output_under_a_folded_cell():
    """Chapter 6 (20 to 35 s on the 2-core machine): its three solutions printed their answers before they
    were split."""
    from nbclient import NotebookClient

    path = ROOT / "notebooks" / "06_trained_head.ipynb"
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    hidden = [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("jupyter", {}).get("source_hidden")]
    assert len(hidden) == 4  # the bootstrap cell and three solutions
    shown = {c.get("id"): c.outputs for c in hidden if c.outputs}
    assert shown == {}, f"folded cells showed outputs after Run all: {shown}"


@pytest.mark.parametrize("stem", CHAPTERS)
def test_exercise_headings_follow_the_books_numbering(stem):
    nb = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    headings = re.findall(r"^### (?:<a id=\"[^\"]+\"></a>)?Exercise ([\d.]+)", "\n".join(
        c.source for c in nb.cells if c.cell_type == "markdown"), re.M)
    assert headings == [exercise_numbers.exercise_number(f"lessons/{stem}", k) for k in range(1, len(headings) + 1)]
    labels = re.findall(r"^:label: (ex-\S+)", "\n".join(c.source for c in lesson(stem).cells), re.M)
    assert len(headings) == len(labels)


def test_notebooks_follow_lessons(tmp_path, monkeypatch):
    """`make book` runs `python -m course check`, which fails while notebooks/ is stale."""
    stale = ln.stale()
    assert stale == [], f"notebooks/ is out of date with lessons/: {stale}; run `make launch` and commit"
    # the check fails on a hand edit, a missing notebook and a notebook without a chapter
    monkeypatch.setattr(ln, "LAUNCH", tmp_path)
    ln.write()
    first = min(tmp_path.glob("*.ipynb"))
    first.write_text(first.read_text().replace("Exercise", "Exercize"))
    (tmp_path / "07_gone.ipynb").write_text("{}")
    sorted(tmp_path.glob("*.ipynb"))[1].unlink()
    found = ln.stale()
    assert len(found) == 3 and any("07_gone.ipynb (no chapter" in f for f in found)
    assert cli.main(["check"]) == 1


# --- the hosted book's download button ------------------------------------------------------------------

DOWNLOADS = re.compile(r'<div class="dropdown dropdown-download-buttons">(.*?)</ul>', re.S)


@pytest.mark.parametrize("stem", CHAPTERS)
def test_the_download_button_serves_the_launch_notebook(stem):
    """The hosted chapter's Download ▸ .ipynb gives notebooks/NN_slug.ipynb, not the MyST source (launch_buttons)."""
    page = built_page(f"lessons/{stem}.html")
    html = page.read_text(encoding="utf-8")
    menu = DOWNLOADS.search(html)
    marker = page.parents[1] / ".solutions"
    if marker.is_file() and marker.read_text().strip() == "hidden":  # no sources, no button to serve them
        assert menu is None and not (page.parents[1] / "_sources").exists()
        return
    links = re.findall(r'href="([^"]+\.ipynb)"', menu.group(1)) if menu else []
    assert links, f"{page}: no .ipynb link in the download menu"
    for link in links:
        served = (page.parent / link).resolve()
        assert served.read_bytes() == (ROOT / "notebooks" / f"{stem}.ipynb").read_bytes(), \
            f"{page}: the download button's {link} is not notebooks/{stem}.ipynb"


# --- the local route and Binder --------------------------------------------------------------------

def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][\w.-]*)==([^\s;]+)", line)
        if m:
            found[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return found


def test_learner_requirements_pin_what_the_book_is_tested_with_and_no_toolchain():
    learner, maintainer = pins(ROOT / "requirements-learner.txt"), pins(ROOT / "requirements.txt")
    for name in ("torch", "matplotlib", "numpy", "pillow", "ipywidgets", "ipykernel", "jupyterlab"):
        assert name in learner, f"requirements-learner.txt does not pin {name}"
    differ = {n: (v, maintainer.get(n)) for n, v in learner.items() if maintainer.get(n) != v}
    assert not differ, f"learner pins that differ from requirements.txt (learner, maintainer): {differ}"
    toolchain = {"sphinx", "jupyter-book", "myst-nb", "pytest", "nbval", "playwright", "sphinx-exercise"}
    assert not toolchain & set(learner), f"the maintainers' toolchain in the learner's install: {toolchain & set(learner)}"
    text = (ROOT / "requirements-learner.txt").read_text()
    assert re.search(r"^-e \.$", text, re.M), "the helper package from the clone"
    pyproject = (ROOT / "pyproject.toml").read_text()
    deps = re.search(r"^dependencies = \[(.*?)\]", pyproject, re.M | re.S).group(1)
    for dep in re.findall(r'"([A-Za-z0-9_.-]+)', deps):
        assert re.sub(r"[-_.]+", "-", dep).lower() in learner, f"the helper package needs {dep}: pin it"


def test_binder_installs_the_learners_set_with_the_cpu_index():
    lines = [line for line in (ROOT / ".binder" / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines == ["--extra-index-url https://download.pytorch.org/whl/cpu", "-r ../requirements-learner.txt"]
    assert (ROOT / ".binder" / "runtime.txt").read_text().strip() == "python-3.11"


def test_how_to_run_gives_the_real_clone_command_and_every_platform():
    page = (ROOT / "book" / "how_to_run.md").read_text()
    url, _ = layout.repository()
    assert nbtool.clone_block() in page, "the clone command is stale: run `make sync`"
    assert f"git clone {url}\n" in page
    assert "REPOSITORY_URL" not in page
    for command in ("python3.11 -m venv .venv", "source .venv/bin/activate", "py -3.11 -m venv .venv",
                    r".venv\Scripts\Activate.ps1", "jupyter lab notebooks/",
                    "python -m pip install -r requirements-learner.txt \\\n    --extra-index-url https://download.pytorch.org/whl/cpu",
                    "python -m pip install -r requirements-learner.txt `\n    --extra-index-url https://download.pytorch.org/whl/cpu"):
        assert command in page, f"book/how_to_run.md lacks `{command}`"

"""The chapters' questions in the page (book/_static/engine/questions.js), in Chromium.

Every question stored in the chapters is put into a blank page as book/_ext/page_questions.py puts it into
the book. For each one the test enters the right answer, every stored mistake's answer, an answer that
matches none and one that is not a number, and reads the message the page shows: it must be the stored
one, the one ``questions.check`` gives in a kernel. Then the same by keyboard alone at 390 px on a touch
screen, with every target at least 44 px. In the built book each chapter page holds its questions and
none of the kernel's check cells, loads questions.js only where a question is, and shows no answer in
its text before the reader answers; screenshots at 1280 and 390 px, light and dark, go to
_build/screenshots/question-*.png.
"""

from __future__ import annotations

import json

import pytest
from browsing import ROOT, SCREENSHOTS, chapter_pages, missing

from attention_lab import questions
from attention_lab.explorers import PAGE_KEY

import page_questions  # book/_ext, on the tests' pythonpath

ENGINE = ROOT / "book" / "_static" / "engine"
CHAPTERS = sorted((ROOT / "lessons").glob("0*.ipynb"))


def stored():
    found = []
    for path in CHAPTERS:
        for cell in json.loads(path.read_text())["cells"]:
            for out in cell.get("outputs", []):
                config = out.get("metadata", {}).get(PAGE_KEY)
                if config and "question" in config:
                    found.append(config)
    return found


CONFIGS = stored()


def entries(config):
    """(what the reader enters, the verdict, the message) for every stored answer, one matching none, bad input."""
    if config["kind"] == "choice":
        return [(a["choice"], "right" if a["right"] else "mistake", a["say"]) for a in config["answers"]]
    if config["kind"] == "cells":
        rows = [(a["cells"], "right" if a["right"] else "mistake", a["say"]) for a in config["answers"]]
        known = [a["cells"] for a in config["answers"]]
        odd = next([[0, j]] for j in range(config["size"]) if [[0, j]] not in known)
        return rows + [(odd, "none", config["none"]), ([], "bad", "Mark at least one cell first.")]
    rows = [(repr(a["value"]), "right" if a["right"] else "mistake", a["say"]) for a in config["answers"]]
    none = max(abs(a["value"]) for a in config["answers"]) * 3 + 7.5
    rows.append((repr(none), "none", config["none"]))
    rows.append(("a guess", "bad", "“a guess” is not a number: type one such as 0.25, 1/4 or 3e-4."))
    return rows


def load(context):
    p = context.new_page()
    errors = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    body = "".join(f'<section id="{c["question"]}"><p>Before the question.</p>{page_questions.question_html(c)}'
                   "</section>" for c in CONFIGS)
    p.set_content('<html lang="en"><head><meta name="viewport" content="width=device-width, initial-scale=1">'
                  f"<title>questions</title></head><body><main>{body}</main></body></html>")
    p.add_style_tag(path=str(ROOT / "book" / "_static" / "course.css"))
    p.add_style_tag(path=str(ENGINE / "questions.css"))
    p.add_script_tag(path=str(ENGINE / "questions.js"))
    p.wait_for_function(f"document.querySelectorAll('.attention-question form').length === {len(CONFIGS)}")
    assert errors == []
    return p


@pytest.fixture(scope="module")
def page(request):
    # the browser fixture (conftest.py) fails in CI, or skips, without Chromium or Playwright
    context = request.getfixturevalue("browser").new_context(viewport={"width": 1280, "height": 900})
    yield load(context)
    context.close()


def feedback(p, qid):
    sel = f"#{qid} .attention-question"
    return p.inner_text(f"{sel} .question-feedback"), p.get_attribute(sel, "data-verdict")


def test_every_chapter_has_questions_in_the_page():
    per_chapter = {}
    for c in CONFIGS:
        per_chapter.setdefault(c["number"].split(".")[0], []).append(c)
    assert sorted(per_chapter) == [str(n) for n in range(1, 9)]
    assert all(2 <= len(v) <= 4 for v in per_chapter.values())


@pytest.mark.parametrize("config", CONFIGS, ids=[c["question"] for c in CONFIGS])
def test_each_stored_answer_gets_its_message_by_mouse(page, config):
    qid, sel = config["question"], f"#{config['question']} .attention-question"
    assert page.get_attribute(f"{sel} .question-feedback", "aria-live") == "polite"
    for entry, verdict, say in entries(config):
        if config["kind"] == "number":
            page.fill(f"{sel} input[type=text]", entry)
        elif config["kind"] == "cells":
            for i, j in to_toggle(page, sel, entry):
                page.click(f"{sel} .question-cell[data-i='{i}'][data-j='{j}']")
        else:
            page.click(f"{sel} input[value='{entry}']")
        page.click(f"{sel} .question-check")
        assert feedback(page, qid) == (say, verdict), (qid, entry)
        if verdict in ("right", "mistake"):  # the kernel says the same
            questions._asked[qid] = config
            kernel = questions.check(qid, float(entry) if config["kind"] == "number" else entry)
            assert kernel.message == say


def to_toggle(p, sel, cells):
    """The grid's cells whose state differs from ``cells`` (the ones to press), in reading order."""
    on = p.evaluate(f"Array.from(document.querySelectorAll(\"{sel} .question-cell[aria-pressed='true']\"),"
                    " b => [Number(b.dataset.i), Number(b.dataset.j)])")
    return sorted({tuple(c) for c in on} ^ {tuple(c) for c in cells})


def test_fractions_commas_and_an_empty_box(page):
    sel = "#ch1-column .attention-question"  # 1 + 1/2 + ... + 1/8 = 761/280
    for typed in ("761/280", "2,718", " 2.718 "):
        page.fill(f"{sel} input[type=text]", typed)
        page.press(f"{sel} input[type=text]", "Enter")
        assert feedback(page, "ch1-column")[1] == "right", typed
    page.fill(f"{sel} input[type=text]", "")
    page.click(f"{sel} .question-check")
    assert feedback(page, "ch1-column") == ("Type a number first, such as 0.25 or 1/4.", "bad")
    page.fill("#ch3-gradient .attention-question input[type=text]", "1.05e-1")
    page.press("#ch3-gradient .attention-question input[type=text]", "Enter")
    assert feedback(page, "ch3-gradient")[1] == "right"


# issue 35: the reworked questions, each named mistake typed or chosen as a reader would, in the page
REWORKED = [
    ("ch1-reach", "c", "mistake", "row 3 of w"),
    ("ch1-reach", "d", "mistake", "one per sequence"),
    ("ch3-gradient", "0.1192", "mistake", "that is 1 − p"),
    ("ch3-gradient", "3.35e-4", "mistake", "the gradient at [8, 0]"),
    ("ch3-gradient", "0,105", "right", "p(1 − p) with p = 0.8808"),
    ("ch3-gradient", "0.0003", "mistake", "the gradient at [8, 0]"),  # typed as chapter 3 prints it
    ("ch2-learned", "12288", "mistake", "two projections"),
    ("ch2-symmetric", "d", "mistake", "this grid has no mask yet"),
    ("ch3-variance", "8", "mistake", "divided by √d_k once"),
    ("ch3-variance", "1/8", "mistake", "as if q·k had variance 1"),
    ("ch4-row-one", "0.352", "mistake", "scaled twice"),
    ("ch4-row-one", "1/3", "mistake", "plain average"),
    ("ch4-all-masked", "a", "mistake", "F.scaled_dot_product_attention gives: it returns zeros"),
    ("ch6-identity", "b", "mistake", "more layers are not more information"),
    ("ch6-identity", "a", "right", "no better than the bigram's"),
    ("ch6-residual", "a", "mistake", "only road to lm_head"),
]


@pytest.mark.parametrize("qid, entry, verdict, words", REWORKED, ids=[f"{q}:{e}" for q, e, _, _ in REWORKED])
def test_a_reworked_question_names_the_mistake_in_the_page(page, qid, entry, verdict, words):
    sel = f"#{qid} .attention-question"
    config = next(c for c in CONFIGS if c["question"] == qid)
    if config["kind"] == "choice":
        page.click(f"{sel} input[value='{entry}']")
    else:
        page.fill(f"{sel} input[type=text]", entry)
    page.click(f"{sel} .question-check")
    said, got = feedback(page, qid)
    assert got == verdict and words in said, (qid, entry, said)


def test_a_choice_checked_before_choosing_says_so(request):
    context = request.getfixturevalue("browser").new_context(viewport={"width": 1280, "height": 900})
    try:
        p = load(context)
        p.click("#ch2-symmetric .attention-question .question-check")
        assert feedback(p, "ch2-symmetric") == ("Choose one of the answers first.", "bad")
    finally:
        context.close()


def test_no_answer_shows_before_the_reader_answers(request):
    context = request.getfixturevalue("browser").new_context(viewport={"width": 1280, "height": 900})
    try:
        p = load(context)
        text = p.inner_text("body")
        for c in CONFIGS:
            assert not [a["say"] for a in c["answers"] if a["say"] in text], c["question"]
        assert text.count("the page's source holds the answers") == len(CONFIGS)
    finally:
        context.close()


def test_every_question_by_keyboard_alone_on_a_phone(request):
    context = request.getfixturevalue("browser").new_context(viewport={"width": 390, "height": 844}, has_touch=True,
                                                             is_mobile=True, device_scale_factor=2)
    try:
        p = load(context)
        assert p.evaluate("document.documentElement.scrollWidth") <= 390
        for box in p.query_selector_all(".attention-question .question-check, .attention-question input[type=text], "
                                        ".attention-question .question-option, .attention-question .question-cell"):
            size = box.bounding_box()
            assert size["height"] >= 43.9 and size["width"] >= 43.9
        assert p.get_attribute(".attention-question input[type=text]", "inputmode") == "decimal"
        for config in CONFIGS:
            qid, sel = config["question"], f"#{config['question']} .attention-question"
            for entry, verdict, say in entries(config):
                # from the paragraph before the question, Tab reaches its first control
                p.evaluate(f"() => {{ const s = document.querySelector('#{qid} p'); s.tabIndex = -1; s.focus(); }}")
                p.keyboard.press("Tab")
                if config["kind"] == "number":
                    assert p.evaluate("document.activeElement.type") == "text"
                    p.keyboard.press("Control+A")
                    p.keyboard.type(entry)
                    p.keyboard.press("Enter")
                elif config["kind"] == "cells":  # Tab from cell to cell, Space where the state must change
                    flip = set(to_toggle(p, sel, entry))
                    for i in range(config["size"]):
                        for j in range(config["size"]):
                            assert p.evaluate("[document.activeElement.dataset.i, document.activeElement.dataset.j]"
                                              ".map(Number)") == [i, j]
                            if (i, j) in flip:
                                p.keyboard.press("Space")
                            p.keyboard.press("Tab")
                    assert p.evaluate("document.activeElement.className") == "question-check"
                    p.keyboard.press("Enter")
                else:
                    assert p.evaluate("document.activeElement.type") == "radio"
                    keys = [o["key"] for o in config["options"]]
                    p.keyboard.press("Space")  # checks the focused radio, the checked one or the first
                    at = keys.index(p.evaluate("document.activeElement.value"))
                    for _ in range(keys.index(entry) - at):
                        p.keyboard.press("ArrowDown")
                    for _ in range(at - keys.index(entry)):
                        p.keyboard.press("ArrowUp")
                    assert p.evaluate("document.activeElement.value") == entry
                    p.keyboard.press("Tab")
                    assert p.evaluate("document.activeElement.className") == "question-check"
                    p.keyboard.press("Enter")
                assert feedback(p, qid) == (say, verdict), (qid, entry)
        assert p.evaluate("document.documentElement.scrollWidth") <= 390
    finally:
        context.close()


# ---- the built book ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", chapter_pages())
def test_the_built_chapter_asks_its_questions_without_the_kernel_cells(visit, path):
    if path == "(book not built)":
        missing("the book is not built: run `make book` first")
    v = visit(path)
    page = v.page
    n = page.locator(".attention-question form").count()
    assert 2 <= n <= 4, f"{path}: {n} questions"
    text = page.inner_text("main")
    assert "questions.check(" not in text and "answer = None" not in text and "questions.ask(" not in text
    for config in CONFIGS:
        assert not [a["say"] for a in config["answers"] if a["say"] in text]
    assert "(check code" not in text  # the kernel's line, options and all, is the page's form
    chapter = str(int(path.rsplit("/", 1)[-1][:2]))
    for config in (c for c in CONFIGS if c["kind"] == "choice" and c["number"].split(".")[0] == chapter):
        for o in config["options"]:  # shown once, in the form, not again from the kernel's text output
            assert text.count(o["label"]) <= 1, (config["question"], o["label"])
    scripts = page.evaluate("Array.from(document.scripts).map(s => s.src).filter(s => s.includes('questions.js'))")
    assert len(scripts) == 1
    assert v.console_errors == [] and v.failed == [] and v.third_party == []


def test_pages_without_questions_do_not_load_the_module(visit):
    v = visit("index.html") if (ROOT / "_build" / "html" / "index.html").is_file() else missing("not built")
    assert v.page.evaluate("Array.from(document.scripts).some(s => s.src.includes('questions.js'))") is False


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_screenshots_of_a_number_and_a_choice(browser, book_url, width, scheme):
    from browsing import open_page
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for path, qid, entry in [("lessons/04_masking_the_future.html", "ch4-row-one", "0.1452"),
                             ("lessons/04_masking_the_future.html", "ch4-unmasked", [[0, 1], [0, 2], [1, 2]]),
                             ("lessons/05_one_head.html", "ch5-longer", "b"),
                             ("lessons/06_trained_head.html", "ch6-residual", "a")]:
        context, v = open_page(browser, book_url + path, width, scheme)
        try:
            sel = f".attention-question[data-question='{qid}']"
            if isinstance(entry, list):
                for i, j in entry:
                    v.page.click(f"{sel} .question-cell[data-i='{i}'][data-j='{j}']")
            elif entry.isalpha():
                v.page.click(f"{sel} input[value='{entry}']")
            else:
                v.page.fill(f"{sel} input[type=text]", entry)
            v.page.click(f"{sel} .question-check")
            box = v.page.locator(sel)
            box.scroll_into_view_if_needed()
            colour = v.page.evaluate(f"getComputedStyle(document.querySelector(\"{sel} form\")).backgroundColor")
            text = v.page.evaluate(f"getComputedStyle(document.querySelector(\"{sel} form\")).color")
            assert colour != text
            around = v.page.evaluate(f"getComputedStyle(document.querySelector(\"{sel}\").parentElement).backgroundColor")
            assert around == "rgba(0, 0, 0, 0)", f"the output around {qid} is painted {around} in {scheme} mode"
            box.screenshot(path=str(SCREENSHOTS / f"question-{qid}-{width}-{scheme}.png"))
        finally:
            context.close()

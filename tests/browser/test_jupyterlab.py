"""A launch notebook in a real JupyterLab 4, as a Binder or local learner meets it.

Starts `jupyter lab` from this environment (browsing.LabServer: a free port, a random token,
`--expose-app-in-browser` so the test can drive `window.jupyterapp`) on a copy of notebooks/ in a temporary
folder (JupyterLab never writes into the repository), with its settings in a temporary folder too:
`windowingMode: none`, so the whole notebook is rendered and not only the cells on screen; no autosave; no
news or update checks. Every request that leaves localhost is aborted.

Then, in headless Chromium, it opens a chapter, runs all cells, and checks what a reader sees: no raw MyST
in the rendered text, exercise headings "Exercise N.k", every solution folded (code cells collapsed to their
`#@title Solution to Exercise N.k` line, yet run; text answers in closed `<details>`), in-notebook links
that land on their anchor, no error output, and an explorer (the page engine in a widget view) whose
picture changes when its slider is moved with the keyboard or its toggle clicked.
Screenshots go to _build/screenshots/jupyterlab-*.png.

Skips when JupyterLab or Chromium is missing, except in CI (CI=true), where that fails.
"""

from __future__ import annotations

import os
import re
import time

import nbformat
import pytest
from browsing import CHROMIUM, LabServer, PANEL, ROOT, SCREENSHOTS, lab_notebook, missing, run_all_cells

# three chapters by default (CI time): chapter 1; chapter 4, with a solution in text, code and text again and a
# toggle; chapter 6, whose solutions print (the printing moves into their folded <details>) and whose explorer
# has a toggle and a menu but no slider;
# JUPYTERLAB_CHAPTERS=all runs every chapter, or name stems, comma-separated
_ALL = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
_CHOICE = os.environ.get("JUPYTERLAB_CHAPTERS", "01_plain_causal_average,04_masking_the_future,06_trained_head")
CHAPTERS = _ALL if _CHOICE == "all" else [s for s in _CHOICE.split(",") if s]

# raw MyST as it shows in rendered text: a role's name before its argument, a directive's fence and name,
# a label line, an option line
RENDERED_RAW = {
    "role": re.compile(r"\{[A-Za-z][\w:+.-]*\}"),
    "directive": re.compile(r"(?:`{3,}|:{3,})\s*\{"),
    "label": re.compile(r"^\s*\([\w.:-]+\)=", re.M),
    "option": re.compile(r"^\s*:[A-Za-z][\w-]*:\s", re.M),
}


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """A JupyterLab 4 server on a copy of notebooks/ (browsing.LabServer); yields it."""
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        missing("JupyterLab is not installed: pip install -r requirements.txt")
    if not CHROMIUM.exists():
        missing(f"{CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium)")
    if not _ALL:
        missing("notebooks/ holds no launch notebooks: run `make launch`")
    try:
        with LabServer(tmp_path_factory.mktemp("jupyterlab"), ROOT / "notebooks") as lab:
            yield lab
    except RuntimeError as err:  # the server did not start: the log says why
        pytest.fail(str(err))


def _rendered_blocks(page) -> list[tuple[str, bool]]:
    """(text, is a code block) for every block of rendered markdown (hidden ones too), typeset math left out."""
    return [tuple(b) for b in page.evaluate("""() => Array.from(
      document.querySelectorAll('.jp-MarkdownCell .jp-RenderedMarkdown'))
      .flatMap(md => { const copy = md.cloneNode(true);
        copy.querySelectorAll('mjx-container, script, .MathJax, mjx-assistive-mml').forEach(e => e.remove());
        const blocks = copy.querySelectorAll('p, li, h1, h2, h3, h4, h5, h6, summary, pre, td, th');
        return blocks.length ? Array.from(blocks).map(b => [b.textContent, b.tagName === 'PRE'])
                             : [[copy.textContent, false]]; })""")]


@pytest.mark.parametrize("stem", CHAPTERS)
def test_a_chapter_in_jupyterlab_reads_like_the_book(jupyterlab, browser, stem):
    path = ROOT / "notebooks" / f"{stem}.ipynb"
    if not path.is_file():
        missing(f"{path} does not exist: run `make launch`")
    nb = nbformat.read(path, as_version=4)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    exercises = re.findall(r"^### (?:<a id=\"[^\"]+\"></a>)?(Exercise [\d.]+)", markdown, re.M)
    code_solutions = [c.source.splitlines()[0] for c in nb.cells
                      if c.cell_type == "code" and c.source.startswith("#@title Solution to Exercise")]
    text_solutions = markdown.count("<details>")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    started = time.monotonic()
    with lab_notebook(browser, jupyterlab, stem, SCREENSHOTS / f"jupyterlab-{stem}-failure.png") as (page, visit):
        assert page.evaluate(f"{PANEL}.context.path") == f"notebooks/{stem}.ipynb"
        assert page.evaluate(f"{PANEL}.content.notebookConfig.windowingMode") == "none"
        page.wait_for_timeout(500)
        page.screenshot(path=str(SCREENSHOTS / f"jupyterlab-{stem}-top.png"))

        # nothing run yet: already no raw MyST, and the solutions are folded
        blocks = _rendered_blocks(page)
        assert blocks, "no rendered markdown"
        # in a code block (a folded solution's printing lines) an f-string's {x:.3f} is Python, not a role
        raw = [(kind, m.group(0), text[:80]) for text, code in blocks for kind, p in RENDERED_RAW.items()
               if not (code and kind == "role") for m in p.finditer(text)]
        assert raw == [], f"raw MyST in the rendered notebook: {raw[:10]}"

        run_all_cells(page, 300)
        ran = time.monotonic() - started
        errors = page.evaluate(f"""{PANEL}.content.widgets.filter(c => c.model.type === 'code')
            .flatMap(c => c.model.outputs.toJSON()).filter(o => o.output_type === 'error')
            .map(o => o.ename + ': ' + o.evalue)""")
        assert errors == [], f"{stem} raised in JupyterLab: {errors}"

        # exercise headings, as the book numbers them
        headings = page.evaluate("""() => Array.from(document.querySelectorAll('.jp-RenderedMarkdown h3'))
            .map(h => h.textContent.replace('¶', '').trim()).filter(t => t.startsWith('Exercise'))""")
        assert headings == exercises and headings, f"exercise headings {headings}, expected {exercises}"

        # code solutions: collapsed to their title line, run all the same
        folded = page.evaluate(f"""{PANEL}.content.widgets
            .filter(c => c.model.type === 'code' && c.model.sharedModel.getSource().startsWith('#@title Solution'))
            .map(c => ({{title: c.model.sharedModel.getSource().split('\\n')[0], hidden: c.inputHidden,
                        ran: c.model.executionCount !== null, outputs: c.model.outputs.length,
                        editorShown: !!(c.editorWidget && c.editorWidget.node.offsetParent),
                        placeholder: (c.node.querySelector('.jp-InputPlaceholder') || {{}}).textContent || ''}}))""")
        assert [f["title"] for f in folded] == code_solutions
        for f in folded:
            assert f["hidden"] and not f["editorShown"], f"{f['title']}: the code shows"
            assert f["ran"], f"{f['title']}: a folded solution must still run, so later cells work"
            assert f["outputs"] == 0, f"{f['title']}: its output shows the answer under the folded code"
            assert f["placeholder"].strip().startswith(f["title"]), f"the folded cell shows {f['placeholder']!r}"

        # text answers: closed <details>, their words not on screen
        details = page.evaluate("""() => Array.from(document.querySelectorAll('.jp-RenderedMarkdown details'))
            .map(d => ({open: d.open, summary: d.querySelector('summary').textContent,
                        shown: Array.from(d.children).filter(e => e.tagName !== 'SUMMARY')
                          .some(e => e.checkVisibility ? e.checkVisibility() : e.getClientRects().length > 0)}))""")
        assert len(details) == text_solutions
        for d in details:
            assert not d["open"] and not d["shown"], f"{d['summary']}: the answer shows"
            assert d["summary"].startswith("Solution to Exercise")

        # asked for, they open: a click on a summary, a click on a folded cell's title line
        if details:
            summary = page.locator(".jp-RenderedMarkdown details > summary").first
            summary.scroll_into_view_if_needed()
            summary.click()
            assert page.evaluate("""() => { const d = document.querySelector('.jp-RenderedMarkdown details');
                return d.open && Array.from(d.children).some(e => e.tagName !== 'SUMMARY' && e.checkVisibility()); }""")
            page.wait_for_timeout(300)
            page.screenshot(path=str(SCREENSHOTS / f"jupyterlab-{stem}-solution-opened.png"))
        if folded:
            placeholder = page.locator(".jp-CodeCell .jp-InputPlaceholder").filter(has_text="#@title Solution").first
            placeholder.scroll_into_view_if_needed()
            placeholder.click()
            page.wait_for_timeout(300)
            opened = page.evaluate(f"""{PANEL}.content.widgets.filter(c => c.model.type === 'code'
                && c.model.sharedModel.getSource().startsWith('#@title Solution') && !c.inputHidden).length""")
            assert opened == 1, "a click on the folded solution's title line should unfold its code"

        # an in-notebook cross-reference lands on its anchor
        target = page.evaluate("""() => { const a = Array.from(document.querySelectorAll('.jp-RenderedMarkdown a[href^="#"]'))
            .find(a => !a.classList.contains('jp-InternalAnchorLink')); return a ? a.getAttribute('href') : null; }""")
        if target:
            page.locator(f'.jp-RenderedMarkdown a[href="{target}"]').first.click()
            page.wait_for_timeout(800)
            box = page.evaluate(f"""() => {{ const e = document.querySelector('[data-jupyter-id="{target[1:]}"]');
                if (!e) return null; const r = e.getBoundingClientRect(); return [r.top, r.bottom]; }}""")
            assert box is not None, f"the anchor {target} is not in the rendered notebook"
            assert 0 <= box[0] < 900, f"clicking {target} left its anchor off screen (top {box[0]})"

        # the first exercise, as a reader sees it
        page.evaluate("""() => { const h = Array.from(document.querySelectorAll('.jp-RenderedMarkdown h3'))
            .find(h => h.textContent.startsWith('Exercise')); h.scrollIntoView({block: 'start'}); }""")
        page.wait_for_timeout(300)
        page.screenshot(path=str(SCREENSHOTS / f"jupyterlab-{stem}-exercise.png"))

        # an explorer: move its slider with the keyboard, see the live picture change
        explorer = page.locator(".jp-OutputArea-output:has(.attention-explorer)").first
        assert explorer.count() == 1, f"{stem}: no explorer rendered"
        explorer.scroll_into_view_if_needed()
        explorer.screenshot(path=str(SCREENSHOTS / f"jupyterlab-{stem}-explorer-before.png"))
        before, moved, after = _move_page_view(page, explorer.locator(".attention-explorer[data-explorer]"))
        assert moved, f"{stem}: its explorer has neither a slider nor a toggle to move"
        assert after != before, "the picture did not change"
        page.wait_for_timeout(300)
        explorer.screenshot(path=str(SCREENSHOTS / f"jupyterlab-{stem}-explorer-after.png"))
        readout = "; ".join(moved)
        print(f"\n{stem}: opened and ran in {ran:.1f} s; {len(exercises)} exercises, {len(folded)} folded code "
              f"solutions, {len(details)} folded answers; explorer {readout}: {before[:60]!r} -> {after[:60]!r}")
        _assert_clean(visit)


def _assert_clean(visit) -> None:
    """JupyterLab asked no other host for anything and logged no console error."""
    assert visit.third_party == [], f"JupyterLab asked other hosts for {visit.third_party[:5]}"
    assert visit.console_errors == [], f"console errors: {visit.console_errors[:5]}"


_PRESSED_JS = "g => Array.from(g.querySelectorAll('button')).map(b => b.getAttribute('aria-pressed'))"


def _move_page_view(page, root) -> tuple[str, list[str], str]:
    """Press the page view's slider, click its other toggle button: (caption before, what moved, caption after)."""
    caption = root.locator(".explorer-caption").first
    before, moved = caption.inner_text(), []

    def painted(action):
        paints = int(root.evaluate("r => Number(r.dataset.paints)"))
        action()
        page.wait_for_function("([r, n]) => Number(r.dataset.paints) > n", arg=[root.element_handle(), paints],
                               timeout=10_000)

    if root.locator("input[type=range]").count():
        track = root.locator("input[type=range]").first
        was = track.input_value()
        track.focus()
        painted(lambda: page.keyboard.press("ArrowLeft" if track.evaluate("i => Number(i.value) >= Number(i.max)")
                                            else "ArrowRight"))
        assert track.input_value() != was
        moved.append(f"slider {was} -> {track.input_value()}")
    if root.locator(".explorer-toggle").count():
        group = root.locator(".explorer-toggle").first
        pressed = group.evaluate(_PRESSED_JS)
        assert pressed.count("true") == 1, f"no single selected toggle: {pressed}"
        painted(lambda: group.locator("button[aria-pressed=false]").first.click())
        now = group.evaluate(_PRESSED_JS)
        assert now != pressed and now.count("true") == 1, now
        group.screenshot(path=str(SCREENSHOTS / "jupyterlab-page-view-toggle.png"))
        moved.append(f"toggle {pressed} -> {now}")
    return before, moved, caption.inner_text()


# the kernel's explorer: the last explorer a cell showed (IPython's Out), its values and matrix as JSON
_KERNEL_EXPLORER = """
import json as _json
from attention_lab.explorers import Explorer as _Explorer
_ex = [v for v in Out.values() if isinstance(v, _Explorer)][-1]
print(_json.dumps({"values": _ex.values, "matrix": _ex.matrix.tolist()}))
"""

_RUN_IN_KERNEL = f"""async code => {{
  const future = {PANEL}.sessionContext.session.kernel.requestExecute({{code, store_history: false}});
  let out = "";
  future.onIOPub = msg => {{
    if (msg.header.msg_type === "stream") out += msg.content.text;
    if (msg.header.msg_type === "error") out += "ERROR " + msg.content.ename + ": " + msg.content.evalue;
  }};
  await future.done;
  return out;
}}"""


def _kernel_explorer(page) -> dict:
    import json

    out = page.evaluate(_RUN_IN_KERNEL, _KERNEL_EXPLORER)
    assert not out.startswith("ERROR"), out
    return json.loads(out)


def test_a_press_repaints_the_page_view_and_the_kernel_follows(jupyterlab, browser):
    """In JupyterLab the explorer is the page engine in an anywidget view: a press repaints it in the browser
    (its paint counter rises, no kernel round trip), and once the kernel has caught up its ``ex.matrix``
    holds the numbers the view shows, for the same values."""
    stem = "04_masking_the_future"
    if not (ROOT / "notebooks" / f"{stem}.ipynb").is_file():
        missing(f"notebooks/{stem}.ipynb does not exist: run `make launch`")
    with lab_notebook(browser, jupyterlab, stem,
                      SCREENSHOTS / f"jupyterlab-{stem}-page-view-failure.png") as (page, visit):
        run_all_cells(page, 300)
        root = page.locator(".jp-OutputArea-output .attention-explorer[data-explorer]").first
        assert root.count() == 1, "no page view of the explorer rendered (anywidget's labextension missing?)"
        assert page.locator(".jp-OutputArea-output:has(.attention-explorer) img").count() == 0, \
            "the picture for front ends without widgets is shown beside the view"
        root.scroll_into_view_if_needed()
        first = _kernel_explorer(page)
        assert root.evaluate("r => r.attentionExplorer.values()") == first["values"]

        track = root.locator("input[type=range]").first
        at_end = track.evaluate("i => Number(i.value) >= Number(i.max)")
        paints = int(root.evaluate("r => Number(r.dataset.paints)"))
        track.focus()
        page.keyboard.press("ArrowLeft" if at_end else "ArrowRight")
        page.wait_for_function("([r, n]) => Number(r.dataset.paints) > n", arg=[root.element_handle(), paints],
                               timeout=5_000)
        shown = root.evaluate("r => ({values: r.attentionExplorer.values(), weights: r.attentionExplorer.weights()})")
        assert shown["values"] != first["values"], "the press changed no value"
        root.screenshot(path=str(SCREENSHOTS / f"jupyterlab-{stem}-page-view.png"))

        deadline = time.monotonic() + 20
        kernel = _kernel_explorer(page)
        while kernel["values"] != shown["values"] and time.monotonic() < deadline:
            page.wait_for_timeout(200)
            kernel = _kernel_explorer(page)
        assert kernel["values"] == shown["values"], f"the kernel never took the view's values: {kernel['values']}"
        weights, matrix = shown["weights"], kernel["matrix"]
        assert [len(r) for r in weights] == [len(r) for r in matrix], "the view and the kernel show other shapes"
        assert weights != first["matrix"], "the press left the view's numbers as they were"
        # a masked score is None in the view (-inf in the kernel); the weights of chapter 4 are all finite
        worst = max(abs(w - m) for wr, mr in zip(weights, matrix) for w, m in zip(wr, mr))
        assert worst <= 1e-5, f"the view's weights differ from the kernel's ex.matrix by {worst:g}"
        print(f"\n{stem}: page view {first['values']} -> {shown['values']}; kernel followed, largest "
              f"difference {worst:.2g}")
        _assert_clean(visit)


LEARNER_NOTEBOOK = [
    "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom attention_lab import explorers",
    '''class Head(nn.Module):
    """A learner's head whose projections are made in another order: the engine cannot rebuild it."""

    def __init__(self, C, head_size, block_size):
        super().__init__()
        self.value = nn.Linear(C, head_size, bias=False)
        self.key = nn.Linear(C, head_size, bias=False)
        self.query = nn.Linear(C, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        T = x.shape[1]
        scores = self.query(x) @ self.key(x).transpose(-2, -1) / self.key.out_features ** 0.5
        scores = scores.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return F.softmax(scores, dim=-1) @ self.value(x)''',
    'explorers.head_explorer(Head=Head, text="First Citizen")',
]


def test_a_learners_head_is_computed_by_the_kernel_and_drawn_by_the_view(jupyterlab, browser):
    """A Head the engine cannot rebuild: the kernel runs it for each setting (in a child process) and sends
    its weights and q, k, v; the view draws them, and a press waits for the kernel's answer."""
    stem = "99_learner_head"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in LEARNER_NOTEBOOK],
                                  metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nbformat.write(nb, jupyterlab.home / "root" / "notebooks" / f"{stem}.ipynb")
    with lab_notebook(browser, jupyterlab, stem, SCREENSHOTS / "jupyterlab-learner-head-failure.png") as (page, visit):
        run_all_cells(page, 120)
        root = page.locator(".jp-OutputArea-output .attention-explorer[data-explorer]").first
        root.wait_for(timeout=20_000)
        first = _kernel_explorer(page)
        assert root.evaluate("r => r.attentionExplorer.values()") == first["values"]
        assert _largest_difference(root.evaluate("r => r.attentionExplorer.weights()"), first["matrix"]) <= 1e-6
        paints = int(root.evaluate("r => Number(r.dataset.paints)"))
        track = root.locator("input[type=range]").first  # d_k
        track.focus()
        page.keyboard.press("ArrowLeft")
        page.wait_for_function("([r, n]) => Number(r.dataset.paints) > n", arg=[root.element_handle(), paints],
                               timeout=20_000)
        shown = root.evaluate("r => ({values: r.attentionExplorer.values(), weights: r.attentionExplorer.weights()})")
        kernel = _kernel_explorer(page)
        assert shown["values"] == kernel["values"] and shown["values"]["head_size"] == 15
        assert _largest_difference(shown["weights"], kernel["matrix"]) <= 1e-6
        root.locator("td[data-i='3'][data-j='1']").click()  # the trace opens on the kernel's numbers
        assert "Row 3 = query 3 's', column 1 = key 1 'i'" in root.locator(".explorer-trace").inner_text()
        root.screenshot(path=str(SCREENSHOTS / "jupyterlab-learner-head.png"))
        _assert_clean(visit)


def _largest_difference(view: list, kernel: list) -> float:
    assert [len(r) for r in view] == [len(r) for r in kernel], "the view and the kernel show other shapes"
    return max(abs((w if w is not None else float("-inf")) - m) if m != float("-inf") else 0.0
               for wr, mr in zip(view, kernel) for w, m in zip(wr, mr))

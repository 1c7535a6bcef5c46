"""The built book in a real browser (headless Debian Chromium), with every request off localhost blocked.

Needs `_build/html` (`make book`) and /usr/bin/chromium; skips with the reason when either is missing,
except in CI (CI=true), where that is a failure.
`make test` builds the book first. Screenshots and what they show: test_pages_and_pictures.py.
"""

from __future__ import annotations

import gzip
import json
from urllib.parse import unquote, urlsplit

import pytest
from browsing import AXE, HTML, UNRENDERED_VIEWS_JS, chapter_pages, missing, open_page

CHAPTERS = chapter_pages()
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
# what a first visit fetches besides the page's own HTML and its pictures, gzipped: about 1.0 MB on a
# chapter since the page-weight work (CONTRIBUTING.md, "Page weight"); the AMD widget bundle with
# require.js (+0.48 MB) or the theme's fontawesome.js (+0.54 MB) coming back would cross this ceiling
MAX_SHARED_GZIP_MB = 1.4


def _require_built(path):
    if path == "(book not built)":
        missing("the book is not built: run `make book` first")


def test_page_loads_self_contained_without_errors(page_view):
    v, path = page_view, page_view.path
    weight = sum(v.bytes_by_url.values())
    print(f"\n{path}: {len(v.bytes_by_url)} requests, {weight / 1e6:.2f} MB, "
          f"third-party {len(v.third_party)}, failed {len(v.failed)}, console errors {len(v.console_errors)}")
    assert v.third_party == [], f"{path} asked a third party for {v.third_party}"
    assert v.failed == [], f"{path} has failed requests: {v.failed}"
    assert v.console_errors == [], f"{path} logged console errors: {v.console_errors}"
    scripts = v.page.evaluate("Array.from(document.scripts).filter(s => s.src).map(s => s.src.split('?')[0])")
    twice = sorted({s for s in scripts if scripts.count(s) > 1})
    assert twice == [], f"{path} loads these scripts twice: {twice}"
    shared = _shared_gzipped_bytes(v.bytes_by_url, path)
    print(f"{path}: scripts, styles and fonts of a first visit {shared / 1e6:.2f} MB gzipped")
    assert shared <= MAX_SHARED_GZIP_MB * 1e6, (
        f"{path}: a first visit fetches {shared / 1e6:.2f} MB gzipped besides the page and its pictures, "
        f"more than {MAX_SHARED_GZIP_MB} MB: which asset came back? (python -m course bench-pages lists the biggest)")


def _shared_gzipped_bytes(urls, path: str) -> int:
    """The files a page fetched from the book, other than the page itself and pictures, gzipped (level 6)."""
    total = 0
    for url in urls:
        rel = unquote(urlsplit(url).path).lstrip("/")
        file = HTML / rel
        if rel == path or not file.is_file() or file.suffix.lower() in (".png", ".webp", ".jpg", ".jpeg", ".gif", ".svg"):
            continue
        total += len(gzip.compress(file.read_bytes(), compresslevel=6))
    return total


# the visible text outside code and formulas, and any TeX delimiter or command left in it
RAW_TEX_JS = r"""() => {
  const copy = document.querySelector('main, article, body').cloneNode(true);
  copy.querySelectorAll('pre, code, .katex, script, style, .cell_output, .jupyter-widgets').forEach(e => e.remove());
  const text = copy.textContent;
  const found = text.match(/\\\(|\\\)|\\\[|\\\]|\$\$|\$[^$\n]{0,80}\\[a-zA-Z]+[^$\n]{0,80}\$|\\(frac|sqrt|mathrm|text|top|sum|cdot|left|right)\b/g);
  return found || [];
}"""
# KaTeX's main font face, asked for by name: the browser fetches a face only when text needs it, and a
# formula far down the page may not have been laid out yet, so the test loads it itself; an empty list
# or a failed face means the book's vendor/katex stylesheet or fonts are not served
KATEX_FONT_JS = """async () => {
  try {
    const faces = await document.fonts.load('16px KaTeX_Main', 'x');
    return faces.some(f => f.family.replace(/"/g, '') === 'KaTeX_Main' && f.status === 'loaded');
  } catch (e) { return false; }
}"""


def test_math_and_widgets_render(page_view):
    v, path = page_view, page_view.path
    has_math = v.page.locator(".math, span.math, div.math").count() > 0
    if has_math:
        # KaTeX rendered each formula at build time: a .katex inside every maths element, none in error
        unrendered = v.page.evaluate(
            "() => Array.from(document.querySelectorAll('span.math, div.math'))"
            ".filter(e => !e.querySelector('.katex .katex-html')).map(e => e.textContent.slice(0, 60))"
        )
        assert v.page.locator(".katex").count() > 0, f"{path}: KaTeX rendered nothing"
        assert unrendered == [], f"{path}: math left as TeX: {unrendered[:5]}"
        errors = v.page.evaluate("() => Array.from(document.querySelectorAll('.katex-error')).map(e => e.title)")
        assert errors == [], f"{path}: KaTeX could not render: {errors[:5]}"
        assert v.page.evaluate(KATEX_FONT_JS), f"{path}: KaTeX's fonts did not load"
    # no TeX source left in the text a reader sees (code and rendered formulas left out)
    raw = v.page.evaluate(RAW_TEX_JS)
    assert raw == [], f"{path}: TeX source shown as text: {raw[:5]}"
    assert v.page.evaluate(UNRENDERED_VIEWS_JS) == [], f"{path}: widget views not rendered"
    errors = v.page.locator(".jupyter-widgets-error-widget").count()
    assert errors == 0, f"{path}: {errors} widget(s) failed to render (error placeholder shown)"


# the theme's icons, <i class="fa-...">: each visible one drawn by a Font Awesome webfont glyph (CSS ::before)
ICONS_JS = """() => Array.from(document.querySelectorAll('i[class*="fa-"], span[class*="fa-"]'))
  .filter(i => i.checkVisibility() && i.getBoundingClientRect().width > 0)
  .map(i => { const b = getComputedStyle(i, '::before');
              return {icon: i.className, content: b.content, font: b.fontFamily, weight: b.fontWeight}; })"""


def test_icons_draw_from_the_theme_webfonts_without_fontawesome_js(page_view):
    v, path = page_view, page_view.path
    scripts = v.page.evaluate("Array.from(document.scripts).map(s => s.src.split('?')[0])")
    assert not [s for s in scripts if s.endswith("fontawesome.js")], f"{path} loads fontawesome.js (0.54 MB gzipped) again"
    icons = v.page.evaluate(ICONS_JS)
    assert icons, f"{path}: no visible Font Awesome icon (the header's buttons should have some)"
    blank = [i for i in icons if i["content"] in ("none", "normal", '""') or "Font Awesome" not in i["font"]]
    assert blank == [], f"{path}: icons with no glyph: {blank[:5]}"
    # every family the icons ask for has a webfont face that the page loaded
    missing = v.page.evaluate("""icons => {
      const loaded = new Set([...document.fonts].filter(f => f.status === 'loaded').map(f => f.family.replace(/"/g, '')));
      return [...new Set(icons.map(i => i.font.split(',')[0].replace(/"/g, '').trim()))].filter(f => !loaded.has(f)); }""", icons)
    assert missing == [], f"{path}: icon fonts not loaded: {missing}"


def test_every_visible_image_says_what_it_shows(page_view):
    v, path = page_view, page_view.path
    # a missing alt, an empty one, or one that is only a file name says nothing to a screen reader
    bad = v.page.evaluate("""() => Array.from(document.querySelectorAll('img'))
      .filter(i => i.checkVisibility() && i.getBoundingClientRect().width > 0)
      .map(i => (i.getAttribute('alt') || '').trim())
      .filter(a => a.length < 5 || /\\.(png|svg|jpe?g|gif)$/i.test(a) || a.startsWith('data:'))""")
    assert bad == [], f"{path}: images without a description: {bad[:5]}"


# what the page explorer's picture shows now: its caption and the colours of its cells
PICTURE_JS = """root => root.querySelector('.explorer-caption').textContent + '|' +
  Array.from(root.querySelectorAll('td')).map(td => td.style.backgroundColor).join(';')"""


@pytest.mark.parametrize("path", CHAPTERS)
def test_page_explorers_answer_the_keyboard(visit, path):
    _require_built(path)
    v = visit(path)
    roots = v.page.locator(".attention-explorer[data-explorer]")
    if not roots.count():
        pytest.fail(f"{path} has no page explorer in the built page: every chapter should have one that computes "
                    "without a kernel (was the chapter executed with `make outputs`?)")
    report = []

    def press(root, n, control, key, name):
        """Press `key` on `control` and assert the explorer painted a different picture."""
        before, paints = root.evaluate(PICTURE_JS), int(root.get_attribute("data-paints"))
        control.focus()
        v.page.keyboard.press(key)
        v.page.wait_for_timeout(100)
        after = root.evaluate(PICTURE_JS)
        report.append(f"explorer {n} / {name}: picture changed = {after != before}")
        assert after != before and int(root.get_attribute("data-paints")) > paints, \
            f"{path} explorer {n}: the picture did not change when {name} was used"

    for n in range(roots.count()):
        root = roots.nth(n)
        root.scroll_into_view_if_needed()
        sliders = root.locator("input[type=range]")
        for h in range(sliders.count()):
            track = sliders.nth(h)
            at_max = track.input_value() == track.get_attribute("max")
            assert track.get_attribute("aria-valuetext") == track.input_value()
            press(root, n, track, "ArrowLeft" if at_max else "ArrowRight", f"slider {h + 1}")
        menus = root.locator("select")  # chapter 6's lines of the play
        for m in range(menus.count()):
            press(root, n, menus.nth(m), "ArrowDown", f"menu {m + 1}")
        buttons = root.locator(".explorer-toggle button[aria-pressed=false]")
        for b in range(buttons.count()):  # scaling, mask, trained: reach the other button and press it
            press(root, n, buttons.nth(0), "Space", f"toggle {b + 1}")
    print("\n" + "\n".join(report))
    assert report, f"{path}: explorers found but no visible slider or menu to move"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_wcag21aa_no_serious_or_critical(page_view, scheme, browser, book_url):
    path = page_view.path
    if not AXE.is_file():
        missing(f"{AXE} missing: run `npm ci`")
    context, v = (None, page_view) if scheme == "light" else open_page(browser, book_url + path, 1280, scheme)
    try:
        # blocks off screen are skipped until they come near (content-visibility: auto, page explorers): axe
        # would judge their colours over whatever it finds at their unpainted place, or not see them at all.
        # Every block drawn, as a reader sees each once scrolled to it, and checked to be drawn
        v.page.add_style_tag(content="* { content-visibility: visible !important; }")
        skipped = v.page.evaluate("Array.from(document.querySelectorAll('*')).filter(e => "
                                  "getComputedStyle(e).contentVisibility !== 'visible').length")
        assert skipped == 0, f"{path}: {skipped} elements still skipped by content-visibility"
        assert v.page.evaluate("document.documentElement.dataset.theme") == scheme
        v.page.add_script_tag(path=str(AXE))
        result = v.page.evaluate(
            "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})",
            AXE_TAGS)
    finally:
        if context is not None:
            context.close()
    counts = {"minor": 0, "moderate": 0, "serious": 0, "critical": 0}
    bad = []
    for violation in result["violations"]:
        counts[violation["impact"] or "minor"] += len(violation["nodes"])
        if violation["impact"] in ("serious", "critical"):
            targets = [node["target"] for node in violation["nodes"][:3]]
            bad.append(f"{violation['id']} ({violation['impact']}, {len(violation['nodes'])} nodes): "
                       f"{violation['help']} e.g. {json.dumps(targets)}")
    print(f"\naxe {path} ({scheme}): " + ", ".join(f"{k} {n}" for k, n in counts.items()))
    assert bad == [], f"{path} ({scheme}): serious/critical WCAG 2.1 AA violations:\n" + "\n".join(bad)


# screenshots of every chapter in light and dark mode, at 1280 and 390 px, and the dark-mode pictures:
# test_pages_and_pictures.py

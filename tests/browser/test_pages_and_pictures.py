"""What a reader sees of each chapter, in light and dark mode, on a 1280 px screen and on a 390 px phone.

Each chapter is opened once per window (the `chapter_views` fixture) and these tests read the same pages:

- screenshots of the top of the page, every explorer and every figure, in each window, land in
  _build/screenshots/ (`<chapter>-<width>-<scheme>-...png`) for a person to look at;
- pictures carry twice the pixels of their displayed size (sharp on a high-density screen);
- no picture is filtered (the theme dims images in dark mode), and in dark mode the explorers sit on the
  theme's own surface, in its text colour;
- every slider track is at least 100 px wide, each description sits beside its control, no control
  sticks out of its explorer, a selected toggle stands out from the others by at least 3:1 and every
  control shows where the keyboard focus is;
- the page explorer's cells show the numbers it computed in the colours the colour map gives them, and
  the numbers it opens on are a tensor the chapter prints before it; the tracks of its sliders line up;
- at 1280 px no code cell or printed output scrolls sideways, and no word meant for the test harness shows;
- each chapter page's own HTML is at most 2 MB gzipped.

Needs `_build/html` (`make book`) and /usr/bin/chromium: without them these tests skip, except in CI (CI=true),
where they fail.
"""

from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pytest
from browsing import SCREENSHOTS, built_page, chapter_pages

WINDOWS = [(1280, "light"), (1280, "dark"), (390, "light"), (390, "dark")]
WINDOW_IDS = [f"{w}px-{s}" for w, s in WINDOWS]

MIN_TRACK_PX = 100
MIN_TOGGLE_CONTRAST = 3.0
MAX_PAGE_GZIP_MB = 2.0
# a printed tensor is rounded to 2 or 4 decimals
NUMBER_TOLERANCE = 0.006
# an explorer that studies another setting than the chapter's tensors, on purpose, and a phrase of the
# chapter that says so before it
IDEALIZED = {"03_scaled_dot_product": "idealized setting"}
# words that belong to the test harness, not to a reader
HARNESS_WORDS = ("nbval", "noqa", "remove-cell", "exercise-stub", "pragma: no cover")

# the pictures of the course: figures and diagrams in cell outputs, explorer pictures (static and live)
PICTURES = ".bd-content .cell_output img, .bd-content .attention-explorer img, .bd-content .widget-image"


# ---- in the page ---------------------------------------------------------------------------------

# every visible picture: its pixels and the size of the box it is shown in (content box, CSS px)
PICTURE_SIZES_JS = """sel => Array.from(document.querySelectorAll(sel)).filter(i => i.checkVisibility()).map(i => {
  const r = i.getBoundingClientRect(), cs = getComputedStyle(i), px = v => parseFloat(v) || 0;
  const w = r.width - px(cs.paddingLeft) - px(cs.paddingRight) - px(cs.borderLeftWidth) - px(cs.borderRightWidth);
  const h = r.height - px(cs.paddingTop) - px(cs.paddingBottom) - px(cs.borderTopWidth) - px(cs.borderBottomWidth);
  return {what: (i.className || 'figure') + ': ' + (i.alt || '').slice(0, 50), natural: [i.naturalWidth, i.naturalHeight],
          shown: [w, h], filter: cs.filter, background: cs.backgroundColor};
})"""

# the CSS colour a theme variable resolves to, as the browser computes it
THEME_COLOUR_JS = """name => { const e = document.createElement('div'); e.style.color = `var(${name})`;
  document.body.appendChild(e); const c = getComputedStyle(e).color; e.remove(); return c; }"""

# per explorer: slider tracks, each label against its control, controls sticking out, toggle groups
CONTROLS_JS = """() => Array.from(document.querySelectorAll('.attention-explorer[data-explorer]')).map(ex => {
  const box = ex.getBoundingClientRect(), vis = e => e.checkVisibility() && e.getBoundingClientRect().width > 0;
  const name = e => (e.textContent || e.getAttribute('aria-label') || '').trim().slice(0, 40);
  const tracks = Array.from(ex.querySelectorAll('.explorer-range')).filter(vis).map(s => {
    const t = s.querySelector('input[type=range]').getBoundingClientRect();
    return {label: name(s.querySelector('label')), width: t.width, left: t.left};
  });
  const labels = Array.from(ex.querySelectorAll('.explorer-control > label, .explorer-control > .explorer-label'))
    .filter(l => vis(l) && name(l)).map(l => {
    const control = l.nextElementSibling, a = l.getBoundingClientRect();
    if (!control) return {label: name(l), beside: false, why: 'no control after it'};
    const first = control.querySelector('button') || control, b = first.getBoundingClientRect();
    const mid = a.top + a.height / 2, row = Math.abs(mid - (b.top + b.height / 2)) <= Math.max(a.height, b.height) / 2;
    return {label: name(l), beside: row && b.left >= a.right - 1,
            why: `label at x ${Math.round(a.left)}-${Math.round(a.right)}, y ${Math.round(a.top)}; control at x ${Math.round(b.left)}, y ${Math.round(b.top)}`};
  });
  const outside = Array.from(ex.querySelectorAll('.explorer-controls *, .explorer-trace *, .explorer-caption')).filter(vis)
    .filter(e => e.getBoundingClientRect().right > box.right + 1 || e.getBoundingClientRect().left < box.left - 1)
    .map(e => e.tagName.toLowerCase() + '.' + String(e.className).split(' ')[0] + ' ' + name(e));
  const toggles = Array.from(ex.querySelectorAll('.explorer-toggle')).filter(vis).map(g =>
    Array.from(g.querySelectorAll('button')).filter(vis).map(b => ({
      text: name(b), active: b.getAttribute('aria-pressed') === 'true',
      background: getComputedStyle(b).backgroundColor, color: getComputedStyle(b).color})));
  return {tracks, labels, outside, toggles, width: box.width};
})"""

# focus each control of the explorers from the keyboard's point of view and read the outline it shows
FOCUS_JS = r"""() => {
  const out = [];
  for (const e of document.querySelectorAll('.attention-explorer button, .attention-explorer select, .attention-explorer input, .attention-explorer td[tabindex="0"]')) {
    if (!e.checkVisibility()) continue;
    e.focus({focusVisible: true});
    const cs = getComputedStyle(e);
    // an outline at least 2 px wide, or a ring drawn as a shadow where ipywidgets forbids the outline
    const spread = (cs.boxShadow.match(/(\d+(?:\.\d+)?)px(?=\s*(?:,|$))/) || [0, '0'])[1];
    const ring = (cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2) || parseFloat(spread) >= 2;
    out.push({what: e.tagName.toLowerCase() + ' ' + (e.textContent || e.getAttribute('aria-valuenow') || '').trim().slice(0, 20),
              focused: document.activeElement === e, ring,
              outline: `${cs.outlineStyle} ${cs.outlineWidth} ${cs.outlineColor}, shadow ${cs.boxShadow}`});
  }
  document.activeElement && document.activeElement.blur();
  return out;
}"""

# the default (visible) static picture of each explorer: its pixels, its numbers, and the tensors the
# chapter prints before the explorer
DEFAULTS_JS = """() => Array.from(document.querySelectorAll('.attention-explorer[data-explorer]')).map(ex => {
  const before = e => e.compareDocumentPosition(ex) & Node.DOCUMENT_POSITION_FOLLOWING;
  const printed = Array.from(document.querySelectorAll('.bd-content .cell_output pre')).filter(before).map(p => p.textContent);
  const prose = Array.from(document.querySelectorAll('.bd-content p')).filter(before).map(p => p.textContent).slice(-8).join(' ');
  if (!ex.attentionExplorer) return {picture: null, printed, prose};
  const cells = Array.from(ex.querySelectorAll('tbody tr')).map(tr =>
    Array.from(tr.querySelectorAll('td')).map(td => getComputedStyle(td).backgroundColor));
  const bar = ex.querySelector('.explorer-colourbar');
  return {picture: {matrix: ex.attentionExplorer.weights(), cells, lo: bar.dataset.lo, hi: bar.dataset.hi,
                    alt: ex.attentionExplorer.alt()}, printed, prose};
})"""

# every code cell and printed output, with the folded solutions opened as a reader would open them
CODE_BLOCKS_JS = """() => {
  document.querySelectorAll('details').forEach(d => d.open = true);
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  return Array.from(document.querySelectorAll('.bd-content .cell_input pre, .bd-content .cell_output pre'))
    .filter(p => p.checkVisibility()).map(p => {
      const lines = p.textContent.split('\\n'), longest = lines.reduce((a, b) => b.length > a.length ? b : a, '');
      return {scroll: p.scrollWidth, client: p.clientWidth, kind: p.closest('.cell_input') ? 'code' : 'output',
              solution: !!p.closest('.solution'), longest, chars: longest.length};
    });
}"""


# ---- arithmetic ----------------------------------------------------------------------------------

def rgb(css: str) -> tuple[float, float, float]:
    return tuple(float(c) for c in re.findall(r"[\d.]+", css)[:3])


def luminance(colour: tuple[float, float, float]) -> float:
    def lin(c):
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (lin(c) for c in colour)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two CSS colours."""
    hi, lo = sorted((luminance(rgb(a)), luminance(rgb(b))), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def printed_matrices(text: str) -> list[list[list[float]]]:
    """Every 2-D block of numbers inside the `tensor([...])` reprs of a printed output."""
    found = []
    for m in re.finditer(r"tensor\(\s*\[", text):
        start, depth = m.end() - 1, 0
        for end in range(start, len(text)):
            depth += {"[": 1, "]": -1}.get(text[end], 0)
            if depth == 0:
                break
        body = re.sub(r"(?<![\w.])-?inf\b", lambda t: t.group(0).replace("inf", "Infinity"), text[start:end + 1])
        body = re.sub(r"\bnan\b", "NaN", body)
        body = re.sub(r"(\d)\.(?!\d)", r"\1.0", body)  # torch prints 1. for 1.0
        try:
            value = json.loads(body)
        except ValueError:
            continue
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, list) and v and all(isinstance(r, list) and r and not isinstance(r[0], list) for r in v):
                found.append(v)
            elif isinstance(v, list):
                stack.extend(v)
    return found


def same_numbers(shown, printed) -> bool:
    if len(shown) != len(printed) or any(len(a) != len(b) for a, b in zip(shown, printed)):
        return False
    for a, b in zip((x for row in shown for x in row), (x for row in printed for x in row)):
        if a is None:  # a masked cell: the printed tensor has -inf (or nan) there
            if np.isfinite(b):
                return False
        elif not np.isfinite(b) or abs(a - b) > NUMBER_TOLERANCE:
            return False
    return True


# ---- the tests -----------------------------------------------------------------------------------

@pytest.mark.parametrize("width,scheme", WINDOWS, ids=WINDOW_IDS)
def test_screenshots(chapter_views, width, scheme):
    """For a person to look at: the top of the page, each explorer and each figure (whole pages take ten
    times as long to shoot and show nothing these do not)."""
    v = chapter_views.view(width, scheme)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    prefix = SCREENSHOTS / f"{chapter_views.stem}-{width}-{scheme}"
    assert v.page.evaluate("document.documentElement.dataset.theme") == scheme
    # every block drawn, so that none changes its height while the page scrolls to the next shot (a block
    # skipped by content-visibility counts as 10rem until drawn: the shot's box would move under it)
    v.page.add_style_tag(content="* { content-visibility: visible !important; }")
    v.page.evaluate("window.scrollTo(0, 0)")
    v.page.screenshot(path=f"{prefix}-top.png")
    written = [f"{prefix}-top.png"]
    explorers = v.page.locator(".attention-explorer")
    for n in range(explorers.count()):
        area = explorers.nth(n).locator("xpath=ancestor::div[contains(@class, 'cell_output')][1]")
        area.screenshot(path=f"{prefix}-explorer{n + 1}.png")
        written.append(f"{prefix}-explorer{n + 1}.png")
    figures = v.page.locator(".bd-content .cell_output img:not(.attention-explorer img)")
    for n in range(figures.count()):
        if figures.nth(n).is_visible():
            figures.nth(n).screenshot(path=f"{prefix}-figure{n + 1}.png")
            written.append(f"{prefix}-figure{n + 1}.png")
    print(f"\n{chapter_views.stem} {width}px {scheme}: {len(written)} screenshots, {explorers.count()} explorer(s)")
    assert explorers.count() >= 1, f"{chapter_views.path}: no explorer on the page"


@pytest.mark.parametrize("width,scheme", WINDOWS, ids=WINDOW_IDS)
def test_pictures_have_twice_the_pixels_and_no_filter(chapter_views, width, scheme):
    v = chapter_views.view(width, scheme)
    pictures = v.page.evaluate(PICTURE_SIZES_JS, PICTURES)
    assert pictures, f"{chapter_views.path}: no picture visible"
    blurry, filtered = [], []
    for p in pictures:
        (nw, nh), (w, h) = p["natural"], p["shown"]
        # within rounding: a CSS size of 259.5 px is drawn from 519 pixels
        if nw < 2 * w - 1 or nh < 2 * h - 1:
            blurry.append(f"{p['what']}: {nw} x {nh} pixels shown at {w:.1f} x {h:.1f} CSS px")
        if p["filter"] != "none":
            filtered.append(f"{p['what']}: filter {p['filter']}")
        # the pictures are drawn on white: in dark mode they sit on their own white card, not on the page
        if scheme == "dark" and min(rgb(p["background"])) < 250:
            filtered.append(f"{p['what']}: on a {p['background']} background in dark mode, not on white")
    ratios = [min(p["natural"][0] / p["shown"][0], p["natural"][1] / p["shown"][1]) for p in pictures]
    print(f"\n{chapter_views.stem} {width}px {scheme}: {len(pictures)} pictures, pixels per CSS px "
          f"{min(ratios):.2f} to {max(ratios):.2f}")
    assert blurry == [], "pictures with fewer than twice the pixels of their displayed size:\n" + "\n".join(blurry)
    assert filtered == [], "pictures the page dims or greys instead of showing them as drawn:\n" + "\n".join(filtered)


@pytest.mark.parametrize("width,scheme", WINDOWS, ids=WINDOW_IDS)
def test_explorer_controls_fit_and_read(chapter_views, width, scheme):
    v = chapter_views.view(width, scheme)
    explorers = v.page.evaluate(CONTROLS_JS)
    assert explorers, f"{chapter_views.path}: no explorer on the page"
    problems, report = [], []
    for n, ex in enumerate(explorers, 1):
        for t in ex["tracks"]:
            report.append(f"explorer {n} slider {t['label']!r}: track {t['width']:.0f} px")
            if t["width"] < MIN_TRACK_PX:
                problems.append(f"explorer {n}: the track of {t['label']!r} is {t['width']:.0f} px (at least {MIN_TRACK_PX})")
        for lab in ex["labels"]:
            if not lab["beside"]:
                problems.append(f"explorer {n}: {lab['label']!r} is not beside its control ({lab['why']})")
        if ex["outside"]:
            problems.append(f"explorer {n} ({ex['width']:.0f} px wide): controls stick out: {ex['outside'][:5]}")
        for buttons in ex["toggles"]:
            active = [b for b in buttons if b["active"]]
            if len(active) != 1:
                problems.append(f"explorer {n}: {len(active)} selected buttons in {[b['text'] for b in buttons]}")
                continue
            for b in buttons:
                text = contrast(b["color"], b["background"])
                if text < 4.5:
                    problems.append(f"explorer {n}: {b['text']!r} text contrast {text:.2f} (WCAG AA wants 4.5)")
                if b["active"]:
                    continue
                ratio = contrast(active[0]["background"], b["background"])
                report.append(f"explorer {n} toggle {active[0]['text']!r} ({active[0]['background']}) against "
                              f"{b['text']!r} ({b['background']}): {ratio:.2f}:1")
                if ratio < MIN_TOGGLE_CONTRAST:
                    problems.append(f"explorer {n}: selected {active[0]['text']!r} against {b['text']!r}: contrast "
                                    f"{ratio:.2f}, at least {MIN_TOGGLE_CONTRAST}")
        lefts = {round(t["left"]) for t in ex["tracks"]}
        if len(lefts) > 1:
            problems.append(f"explorer {n}: its slider tracks start at different x: {sorted(lefts)}")
    for f in v.page.evaluate(FOCUS_JS):
        if not (f["focused"] and f["ring"]):
            problems.append(f"no visible keyboard focus on {f['what']!r}: outline {f['outline']}")
    print(f"\n{chapter_views.stem} {width}px {scheme}:\n  " + "\n  ".join(report))
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("width,scheme", WINDOWS, ids=WINDOW_IDS)
def test_explorer_areas_use_the_theme_colours(chapter_views, width, scheme):
    v = chapter_views.view(width, scheme)
    surface = v.page.evaluate(THEME_COLOUR_JS, "--pst-color-surface")
    text = v.page.evaluate(THEME_COLOUR_JS, "--pst-color-text-base")
    areas = v.page.evaluate("""() => Array.from(document.querySelectorAll('.attention-explorer')).map(ex => {
      const area = ex.parentElement, caption = ex.querySelector('.explorer-caption');
      return {background: getComputedStyle(area).backgroundColor,
              caption: caption ? getComputedStyle(caption).color : null};
    })""")
    assert areas, f"{chapter_views.path}: no explorer on the page"
    for n, a in enumerate(areas, 1):
        # the page's own background (transparent) or the theme's surface, never a pale slab in dark mode
        assert a["background"] in ("rgba(0, 0, 0, 0)", "transparent") or rgb(a["background"]) == rgb(surface), \
            f"explorer {n}: background {a['background']}, not the page's nor the theme's surface {surface}"
        assert a["caption"] is None or rgb(a["caption"]) == rgb(text), \
            f"explorer {n}: caption in {a['caption']}, not the theme's text colour {text}"
        page = v.page.evaluate(THEME_COLOUR_JS, "--pst-color-background")
        assert contrast(a["caption"] or text, page) >= 4.5


def _defaults(views) -> list[dict]:
    """DEFAULTS_JS on the chapter at 1280 px in light mode: evaluated once, read by the two tests below."""
    if not hasattr(views, "defaults"):
        views.defaults = views.view(1280, "light").page.evaluate(DEFAULTS_JS)
    return views.defaults


def test_page_cells_show_their_numbers_in_the_colour_maps_colours(chapter_views):
    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    explorers = _defaults(chapter_views)
    assert explorers, f"{chapter_views.path}: no explorer on the page"
    for n, ex in enumerate(explorers, 1):
        pic = ex["picture"]
        assert pic, f"explorer {n}: the page explorer did not start (engine/explorers.js loaded?)"
        scores = pic["lo"].startswith("−")
        limit = float(pic["hi"].lstrip("+")) if scores else 1.0
        cmap, norm = colormaps["RdBu_r" if scores else "viridis"], Normalize(-limit if scores else 0.0, limit)
        wrong = []
        for i, row in enumerate(pic["matrix"]):
            for j, v in enumerate(row):
                want = np.array([0xd4] * 3) if v is None else np.round(
                    np.array(cmap(norm(np.float32(v)))[:3]) * 255)
                got = np.array(rgb(pic["cells"][i][j]))
                if np.abs(got - want).max() > 1:
                    wrong.append(f"cell ({i}, {j}) = {v} drawn as {got}, the colour map gives {want}")
        print(f"\n{chapter_views.stem} explorer {n}: {len(pic['matrix']) ** 2} cells read, {len(wrong)} off")
        assert wrong == [], f"explorer {n}: the picture's colours differ from its numbers:\n" + "\n".join(wrong[:10])


def test_explorer_opens_on_the_numbers_the_chapter_prints(chapter_views):
    explorers = _defaults(chapter_views)
    assert explorers, f"{chapter_views.path}: no explorer on the page"
    for n, ex in enumerate(explorers, 1):
        if chapter_views.stem in IDEALIZED:
            phrase = IDEALIZED[chapter_views.stem]
            assert phrase in ex["prose"], (f"explorer {n} studies an idealized setting, and the chapter must say so "
                                           f"before it ({phrase!r} not found in the paragraphs before it)")
            continue
        pic = ex["picture"]
        assert pic and pic["matrix"], f"explorer {n}: the page explorer did not start (engine/explorers.js loaded?)"
        shown = pic["matrix"]
        printed = [m for text in ex["printed"] for m in printed_matrices(text)]
        matches = [m for m in printed if same_numbers(shown, m)]
        print(f"\n{chapter_views.stem} explorer {n}: opens on a {len(shown)} x {len(shown[0])} matrix; "
              f"{len(printed)} printed matrices before it, {len(matches)} equal to it within {NUMBER_TOLERANCE}")
        assert matches, (f"explorer {n} opens on {pic['matrix']}, which no tensor printed before it shows "
                         f"(within {NUMBER_TOLERANCE}): print the matrix it starts on, or start it on the chapter's own")


def test_no_code_scrolls_sideways_and_no_harness_words(chapter_views):
    v = chapter_views.view(1280, "light")
    blocks = v.page.evaluate(CODE_BLOCKS_JS)
    sideways = [b for b in blocks if b["scroll"] > b["client"]]
    print(f"\n{chapter_views.stem}: {len(blocks)} code cells and outputs at 1280 px, {len(sideways)} scroll sideways")
    for b in sideways:
        print(f"  {b['kind']}{' in a solution' if b['solution'] else ''}: {b['scroll']} > {b['client']} px, "
              f"{b['chars']} characters: {b['longest'].strip()[:80]!r}")
    text = v.page.evaluate("document.querySelector('.bd-content').innerText")
    words = [w for w in HARNESS_WORDS if w in text]
    assert words == [], f"{chapter_views.path}: words meant for the test harness show to readers: {words}"
    assert sideways == [], (f"{chapter_views.path}: {len(sideways)} code cell(s) or output(s) scroll sideways at 1280 px: "
                            + "; ".join(f"{b['chars']} characters: {b['longest'].strip()[:60]!r}" for b in sideways))


@pytest.mark.parametrize("path", chapter_pages())
def test_chapter_page_weight(path):
    raw = built_page(path).read_bytes()
    # gzip as a web server sends it (level 6)
    packed = len(gzip.compress(raw, compresslevel=6)) / 1e6
    print(f"\n{path}: {len(raw) / 1e6:.2f} MB, {packed:.2f} MB gzipped")
    assert packed <= MAX_PAGE_GZIP_MB, f"{path}: {packed:.2f} MB gzipped, more than {MAX_PAGE_GZIP_MB} MB"


@pytest.mark.parametrize("path", chapter_pages() + ["book/intro.html"])
def test_one_search_box(path):
    """sphinx-book-theme 1.3 on pydata-sphinx-theme 0.17 adds a second one in an empty header bar unless
    `navbar_persistent` is set (`_config.yml`, sphinx: config: html_theme_options)."""
    html = built_page(path).read_text(encoding="utf-8")
    fields = html.count('class="btn search-button-field')
    assert fields == 1, f"{path}: {fields} search boxes"
    header = re.search(r'<header id="pst-header"[^>]*>(.*?)</header>', html, re.DOTALL)
    assert header is None or header.group(1).strip() == "", f"{path}: the theme's header bar is not empty"

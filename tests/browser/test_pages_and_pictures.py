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
- the static picture an explorer opens on shows the numbers it carries (`data-matrix`) in the colours
  the colour map gives them, and those numbers are a tensor the chapter prints before it;
- at 1280 px no code cell or printed output scrolls sideways, and no word meant for the test harness shows;
- each chapter page's own HTML is at most 2 MB gzipped.

Needs `_build/html` (`make book`) and /usr/bin/chromium: without them these tests skip, except in CI (CI=true),
where they fail.
"""

from __future__ import annotations

import base64
import gzip
import json
import re

import numpy as np
import pytest
from browsing import SCREENSHOTS, built_page, chapter_pages
from matplotlib import colormaps

WINDOWS = [(1280, "light"), (1280, "dark"), (390, "light"), (390, "dark")]
WINDOW_IDS = [f"{w}px-{s}" for w, s in WINDOWS]

MIN_TRACK_PX = 100
MIN_TOGGLE_CONTRAST = 3.0
MAX_PAGE_GZIP_MB = 2.0
# the numbers a static picture carries are rounded to 2 decimals; a printed tensor to 2 or 4
NUMBER_TOLERANCE = 0.006
# the book's colour maps (attention_lab.plots): viridis on 0..1 for weights, RdBu_r centred on 0 for scores
COLOUR_MAPS = ("viridis", "RdBu_r")
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
CONTROLS_JS = """() => Array.from(document.querySelectorAll('.attention-explorer')).map(ex => {
  const box = ex.getBoundingClientRect(), vis = e => e.checkVisibility() && e.getBoundingClientRect().width > 0;
  const name = e => (e.textContent || '').trim().slice(0, 40);
  const tracks = Array.from(ex.querySelectorAll('.widget-slider')).filter(vis).map(s => ({
    label: name(s.querySelector('.widget-label') || s), width: s.querySelector('.noUi-target, .slider-container')
      .getBoundingClientRect().width}));
  const labels = Array.from(ex.querySelectorAll('.widget-label')).filter(l => vis(l) && name(l)).map(l => {
    const control = l.nextElementSibling, a = l.getBoundingClientRect();
    if (!control) return {label: name(l), beside: false, why: 'no control after it'};
    const first = control.querySelector('button') || control, b = first.getBoundingClientRect();
    const mid = a.top + a.height / 2, row = Math.abs(mid - (b.top + b.height / 2)) <= Math.max(a.height, b.height) / 2;
    return {label: name(l), beside: row && b.left >= a.right - 1,
            why: `label at x ${Math.round(a.left)}-${Math.round(a.right)}, y ${Math.round(a.top)}; control at x ${Math.round(b.left)}, y ${Math.round(b.top)}`};
  });
  const outside = Array.from(ex.querySelectorAll('*')).filter(vis)
    .filter(e => e.getBoundingClientRect().right > box.right + 1 || e.getBoundingClientRect().left < box.left - 1)
    .map(e => e.tagName.toLowerCase() + '.' + String(e.className).split(' ')[0] + ' ' + name(e));
  const toggles = Array.from(ex.querySelectorAll('.widget-toggle-buttons')).filter(vis).map(g =>
    Array.from(g.querySelectorAll('button')).filter(vis).map(b => ({
      text: name(b), active: b.classList.contains('mod-active'),
      background: getComputedStyle(b).backgroundColor, color: getComputedStyle(b).color})));
  return {tracks, labels, outside, toggles, width: box.width};
})"""

# focus each control of the explorers from the keyboard's point of view and read the outline it shows
FOCUS_JS = r"""() => {
  const out = [];
  for (const e of document.querySelectorAll('.attention-explorer button, .attention-explorer .noUi-handle, .attention-explorer select, .attention-explorer input')) {
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
DEFAULTS_JS = """() => Array.from(document.querySelectorAll('.attention-explorer')).map(ex => {
  const pic = Array.from(ex.querySelectorAll('img.explorer-picture')).find(i => i.checkVisibility());
  const before = e => e.compareDocumentPosition(ex) & Node.DOCUMENT_POSITION_FOLLOWING;
  const printed = Array.from(document.querySelectorAll('.bd-content .cell_output pre')).filter(before).map(p => p.textContent);
  const prose = Array.from(document.querySelectorAll('.bd-content p')).filter(before).map(p => p.textContent).slice(-8).join(' ');
  if (!pic) return {picture: null, printed, prose};
  const c = document.createElement('canvas'); c.width = pic.naturalWidth; c.height = pic.naturalHeight;
  const g = c.getContext('2d'); g.drawImage(pic, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  let s = ''; for (let k = 0; k < d.length; k += 8192) s += String.fromCharCode.apply(null, d.subarray(k, k + 8192));
  return {picture: {w: c.width, h: c.height, rgba: btoa(s), matrix: pic.dataset.matrix || null, alt: pic.alt}, printed, prose};
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


def _colour_keys(lut: np.ndarray) -> dict[int, tuple[int, ...]]:
    """Every colour within 1 per channel of colour-map entries -> those entries' indices.

    Neighbouring entries of a colour map can differ by a unit or less per channel, so a colour can
    stand for a few entries: keep them all.
    """
    keys: dict[int, list[int]] = {}
    for index, (r, g, b) in enumerate(lut.astype(int)):
        for dr in (-1, 0, 1):
            for dg in (-1, 0, 1):
                for db in (-1, 0, 1):
                    keys.setdefault(((r + dr) << 16) | ((g + dg) << 8) | (b + db), []).append(index)
    return {k: tuple(v) for k, v in keys.items()}


# the colours matplotlib draws: Colormap(..., bytes=True) truncates each channel to uint8
LUTS = {name: colormaps[name](np.arange(256), bytes=True)[:, :3] for name in COLOUR_MAPS}
LUT_KEYS = {name: _colour_keys(lut) for name, lut in LUTS.items()}


def _longest_run(flags: np.ndarray) -> tuple[int, int]:
    best, start = (0, 0, -1), None
    for i, f in enumerate(list(flags) + [False]):
        if f and start is None:
            start = i
        elif not f and start is not None:
            best = max(best, (i - start, start, i - 1))
            start = None
    return best[1], best[2]


def read_cells(pixels: np.ndarray, n_rows: int, n_cols: int):
    """(colour map, {(i, j): colour-map entries the cell's colour stands for}, heatmap box in pixels).

    The heatmap is the widest block of pixels whose colours belong to one of the book's colour maps (the
    colour bar is a narrow one); each cell is read a fifth of the way down from its top, clear of the
    number written in its middle, as the commonest colour of a 3 x 3 patch. A cell whose colour is in
    no colour map reads as no entries.
    """
    key = (pixels[..., 0].astype(np.int64) << 16) | (pixels[..., 1].astype(np.int64) << 8) | pixels[..., 2]
    best = None
    for name, keys in LUT_KEYS.items():
        member = np.isin(key, np.fromiter(keys, dtype=np.int64))
        if best is None or member.sum() > best[1].sum():
            best = (name, member, keys)
    name, member, keys = best
    cols = member.sum(axis=0)
    x0, x1 = _longest_run(cols >= 0.2 * cols.max())
    rows = member[:, x0:x1 + 1].sum(axis=1)
    y0, y1 = _longest_run(rows >= 0.2 * rows.max())
    cell_w, cell_h = (x1 - x0 + 1) / n_cols, (y1 - y0 + 1) / n_rows
    cells = {}
    for i in range(n_rows):
        for j in range(n_cols):
            x, y = int(x0 + (j + 0.5) * cell_w), int(y0 + (i + 0.2) * cell_h)
            patch = key[y - 1:y + 2, x - 1:x + 2].ravel().tolist()
            cells[i, j] = keys.get(max(set(patch), key=patch.count), ())
    return name, cells, (x0, x1, y0, y1)


def lut_index_range(value: float, lo: float, hi: float) -> tuple[int, int]:
    """The colour-map entries matplotlib picks for numbers within the rounding of ``value`` (2 decimals)."""
    def index(v):
        return int(np.clip(np.floor((v - lo) / (hi - lo) * 256), 0, 255))
    return index(value - 0.005), index(value + 0.005)


def off_cells(values: np.ndarray, cells: dict, lo: float, hi: float) -> list[tuple]:
    """The cells whose colour is not the colour map's colour for their number on the scale lo..hi."""
    wrong = []
    for (i, j), value in np.ndenumerate(values):
        if np.isfinite(value):
            a, b = lut_index_range(value, lo, hi)
            if not any(a <= e <= b for e in cells[i, j]):
                wrong.append((i, j, value, cells[i, j], a, b))
    return wrong


def check_colours(pixels: np.ndarray, numbers: list[list]) -> tuple[str, float, float, list[tuple], tuple]:
    """Read a heatmap picture and compare each cell's colour with its number: (colour map, lo, hi, cells off, box).

    Weights use viridis on 0..1. Scores use RdBu_r on -limit..limit, a limit the picture does not state:
    they pass when some limit makes every cell's colour the colour of its number.
    """
    values = np.array([[np.nan if x is None else x for x in row] for row in numbers], dtype=float)
    cmap, cells, box = read_cells(pixels, *values.shape)
    if cmap == "viridis":
        return cmap, 0.0, 1.0, off_cells(values, cells, 0.0, 1.0), box
    top = np.nanmax(np.abs(values)) or 1.0
    best = None
    for limit in top * np.geomspace(0.2, 20, 2000):
        wrong = off_cells(values, cells, -limit, limit)
        if best is None or len(wrong) < len(best[1]):
            best = (limit, wrong)
        if not wrong:
            break
    limit, wrong = best
    return cmap, -limit, limit, wrong, box


# ---- the tests -----------------------------------------------------------------------------------

@pytest.mark.parametrize("width,scheme", WINDOWS, ids=WINDOW_IDS)
def test_screenshots(chapter_views, width, scheme):
    """For a person to look at: the top of the page, each explorer and each figure (whole pages take ten
    times as long to shoot and show nothing these do not)."""
    v = chapter_views.view(width, scheme)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    prefix = SCREENSHOTS / f"{chapter_views.stem}-{width}-{scheme}"
    assert v.page.evaluate("document.documentElement.dataset.theme") == scheme
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
      const area = ex.closest('.widget-subarea'), caption = ex.querySelector('.explorer-caption');
      return {background: getComputedStyle(area).backgroundColor,
              caption: caption ? getComputedStyle(caption).color : null};
    })""")
    assert areas, f"{chapter_views.path}: no explorer on the page"
    for n, a in enumerate(areas, 1):
        if scheme == "dark":
            assert rgb(a["background"]) == rgb(surface), f"explorer {n}: background {a['background']}, not the theme's surface {surface}"
        else:
            assert a["background"] in ("rgba(0, 0, 0, 0)", "transparent") or rgb(a["background"]) == rgb(surface)
        assert a["caption"] is None or rgb(a["caption"]) == rgb(text), \
            f"explorer {n}: caption in {a['caption']}, not the theme's text colour {text}"
        assert contrast(a["caption"] or text, surface if scheme == "dark" else "rgb(255, 255, 255)") >= 4.5


def _defaults(views) -> list[dict]:
    """DEFAULTS_JS on the chapter at 1280 px in light mode: evaluated once, read by the two tests below."""
    if not hasattr(views, "defaults"):
        views.defaults = views.view(1280, "light").page.evaluate(DEFAULTS_JS)
    return views.defaults


def test_static_pictures_show_their_numbers_in_the_colour_maps_colours(chapter_views):
    explorers = _defaults(chapter_views)
    assert explorers, f"{chapter_views.path}: no explorer on the page"
    for n, ex in enumerate(explorers, 1):
        pic = ex["picture"]
        assert pic, f"explorer {n}: no static picture visible: is its widget state saved? (`make outputs`)"
        assert pic["matrix"], f"explorer {n}: its default picture carries no data-matrix (T > 8?): {pic['alt']!r}"
        numbers = json.loads(pic["matrix"])
        pixels = np.frombuffer(base64.b64decode(pic["rgba"]), np.uint8).reshape(pic["h"], pic["w"], 4)[..., :3]
        cmap, lo, hi, wrong, box = check_colours(pixels, numbers)
        print(f"\n{chapter_views.stem} explorer {n}: {cmap} on {lo:.2f}..{hi:.2f}, heatmap at pixels x {box[0]}-{box[1]}, "
              f"y {box[2]}-{box[3]}; {len(numbers) * len(numbers[0])} cells read, {len(wrong)} off")
        wrong = [f"cell ({i}, {j}) = {v:.2f} drawn as {cmap} entries {e or 'none'}, expected {a} to {b}"
                 for i, j, v, e, a, b in wrong]
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
        assert pic and pic["matrix"], f"explorer {n}: no default static picture with data-matrix (T > 8, or no saved state?)"
        shown = json.loads(pic["matrix"])
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

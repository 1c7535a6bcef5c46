"""course/bench/keypress.py's page half against fixture pages of its own that follow the page explorers'
contract: a root ``<div class="attention-explorer" data-explorer="NAME">`` with ``<input type=range>``
controls (or, with none, an ``<input type=text>`` typed into) that, after every paint, increments ``root.dataset.paints`` and dispatches
``CustomEvent("explorer:painted", {bubbles: true})``.

Nothing is judged on speed (the machine is shared): a run must time every press, time from the keydown
(an explorer that works 60 ms per paint cannot be measured faster than that), sweep a slider back from
its end, and say what is wrong with a page that has no such explorer, never paints, or paints without
counting.
"""

from __future__ import annotations

import pytest

from course.bench import keypress as bk
from course.bench import pages as bench_pages

# a slider (or a text box) and a canvas; `work` ms of busy work before each paint; `count` whether paints are counted
PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>fixture</title></head><body>
<main>{explorers}</main>
<script>
for (const root of document.querySelectorAll('.attention-explorer[data-explorer]')) {{
  const slider = root.querySelector('input[type=range], input[type=text]'), canvas = root.querySelector('canvas');
  const work = Number(root.dataset.work || 0), count = root.dataset.count !== 'no', paints = root.dataset.silent !== 'yes';
  slider.addEventListener('input', () => {{
    const until = performance.now() + work;
    while (performance.now() < until) {{}}
    const ctx = canvas.getContext('2d'), v = slider.type === 'text' ? slider.value.length : Number(slider.value);
    ctx.fillStyle = `rgb(${{v * 20}}, 80, ${{255 - v * 20}})`;
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    if (!paints) return;
    if (count) root.dataset.paints = String(Number(root.dataset.paints || 0) + 1);
    root.dispatchEvent(new CustomEvent('explorer:painted', {{bubbles: true}}));
  }});
}}
</script></body></html>"""


def explorer(name: str, value: int = 3, maximum: int = 8, **data) -> str:
    attrs = "".join(f' data-{k}="{v}"' for k, v in data.items())
    return (f'<div class="attention-explorer" data-explorer="{name}"{attrs}>'
            f'<input type="range" min="1" max="{maximum}" value="{value}" aria-label="T">'
            f'<canvas width="64" height="64"></canvas></div>')


def typed(name: str, text: str) -> str:
    """An explorer driven by typing only (chapter 6's page explorer has a text box and a menu, no slider)."""
    return (f'<div class="attention-explorer" data-explorer="{name}">'
            f'<input type="text" value="{text}" aria-label="text"><canvas width="64" height="64"></canvas></div>')


@pytest.fixture
def site(tmp_path):
    """Write fixture pages into a folder served on 127.0.0.1; yields a function page(name, *explorers) -> URL."""
    with bench_pages.serve(tmp_path) as url:
        def page(name: str, *explorers: str) -> str:
            (tmp_path / name).write_text(PAGE.format(explorers="".join(explorers)), encoding="utf-8")
            return url + name
        yield page


def test_every_press_on_every_page_explorer_is_timed(browser, site):
    # two explorers; the second starts at its end, so the sweep must start leftwards to paint at all
    url = site("two.html", explorer("weights"), explorer("scores", value=8))
    result = bk.page_chapter(browser, url, presses=12, wait_s=5)
    assert result.problem == "" and result.what == "weights (slider), scores (slider)"
    assert len(result.times) == 24 and all(0 < t < 5000 for t in result.times)
    assert bk.median(result.times) <= bk.p90(result.times) <= max(result.times)


def test_the_time_runs_from_the_keydown_to_the_frame_painted_after_the_work(browser, site):
    # 60 ms of work before every paint: no press can be measured shorter than that
    result = bk.page_chapter(browser, site("slow.html", explorer("slow", work=60)), presses=5, wait_s=5)
    assert result.problem == "" and len(result.times) == 5
    assert min(result.times) >= 60


def test_a_page_without_a_page_explorer_is_said_so(browser, site):
    # the live kernel's explorers carry the class too, but no data-explorer: they are not page explorers
    url = site("none.html", '<div class="attention-explorer"><input type="range"></div>')
    result = bk.page_chapter(browser, url, presses=3, wait_s=2)
    assert result.times == [] and result.problem == "no page explorer on this page"


def test_an_explorer_that_never_says_it_painted_is_named(browser, site):
    result = bk.page_chapter(browser, site("silent.html", explorer("mute", silent="yes")), presses=3, wait_s=1)
    assert result.times == [] and "press 1 (ArrowRight) painted no new picture within 1 s" in result.problem


def test_an_explorer_that_paints_without_counting_is_named(browser, site):
    result = bk.page_chapter(browser, site("uncounted.html", explorer("lazy", count="no")), presses=3, wait_s=2)
    assert result.problem == "lazy: dataset.paints rose by 0, not 3"


@pytest.mark.parametrize("text", ["First Citizen:", "ends in a space "])
def test_an_explorer_with_a_text_box_only_is_timed_typing(browser, site, text):
    # Backspace, then the character removed, and so on: every press paints, and the text comes back
    url = site("typed.html", typed("trained", text))
    result = bk.page_chapter(browser, url, presses=6, wait_s=5)
    assert result.problem == "" and result.what == "trained (typing)"
    assert len(result.times) == 6 and all(0 < t < 5000 for t in result.times)


def test_the_text_after_typing_is_the_text_before(browser, site):
    page = browser.new_page()
    try:
        page.goto(site("back.html", typed("trained", "To be")))
        box = page.locator("input[type=text]")
        keys = bk.typing_keys(page, box)
        assert keys == ["Backspace", "e"]
        page.keyboard.press(keys[0])
        assert box.input_value() == "To b"  # the caret was at the end
        page.keyboard.press(keys[1])
        assert box.input_value() == "To be"
    finally:
        page.close()


def test_an_empty_text_box_is_said_so(browser, site):
    result = bk.page_chapter(browser, site("empty.html", typed("trained", "")), presses=3, wait_s=1)
    assert result.times == [] and "its text box is empty" in result.problem

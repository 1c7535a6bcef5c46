"""Benchmark: keypress -> painted picture, in a real JupyterLab and in the hosted book.

    python -m course bench-keypress                                # both places, every chapter, 20 presses each
    python -m course bench-keypress --baseline OTHER/_build/html   # the same presses on another build, beside
    python -m course bench-keypress --chapters 01,04 --presses 30 --no-lab

Per chapter, the median and p90 (nearest rank) of the presses, each timed from the keydown's time stamp to
the frame painted after the engine's ``explorer:painted`` event (static/engine/mount.js). It exits 1 when a
limit is missed, a picture never came or a page has no explorer. CONTRIBUTING.md ("Keypress to picture")
has the limits and the baseline's use.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from course.bench import pages as bench_pages
from course.browser import (CHROMIUM, CHROMIUM_ARGS, PANEL, LabServer, PageVisit, lab_notebook,
                            run_all_cells)
from course.layout import HTML, LAUNCH

LAB_LIMIT_MS = 25.0
RUN_ALL_S = 600  # a chapter's Run all in JupyterLab (chapter 6 trains; a loaded machine is slow)
PAGE_LIMIT_MS = 1000 / 60  # one frame at 60 Hz


def median(times: list[float]) -> float:
    """The median of ``times`` (the mean of the two middle values for an even count)."""
    if not times:
        raise ValueError("median of no times: at least one press must have been timed")
    s = sorted(times)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def p90(times: list[float]) -> float:
    """The 90th percentile of ``times`` by nearest rank: the smallest time that at least 90 % of them
    do not exceed (of 20 presses, the 18th fastest)."""
    if not times:
        raise ValueError("p90 of no times: at least one press must have been timed")
    s = sorted(times)
    return s[max(0, math.ceil(0.9 * len(s)) - 1)]


@dataclass
class Result:
    """The presses of one chapter in one place: times in ms, or why there are none (``problem``)."""

    times: list[float] = field(default_factory=list)
    problem: str = ""
    what: str = ""  # the control pressed, e.g. "slider d_k (head_size)"

    def cell(self, limit: float | None) -> str:
        """Median and p90, then "ok" or "MISSED" against ``limit`` (nothing when there is no limit)."""
        if self.problem:
            return self.problem
        m, p = median(self.times), p90(self.times)
        verdict = "" if limit is None else f"  {'ok' if m <= limit else 'MISSED'}"
        return f"{m:6.1f} {p:6.1f}{verdict}"

    def met(self, limit: float) -> bool:
        return not self.problem and median(self.times) <= limit


# ---- in the page: keydown -> the frame painted after the picture changed --------------------------------

# window.__kp: t0 is the last keydown's time stamp (cleared once its picture is timed), times the ms of
# each timed press. `painted()` is called when the new picture is in place; the frame that shows it is
# painted after the next requestAnimationFrame callback, and a message posted there runs after that paint.
_TIMER_JS = """() => {
  if (window.__kp) return;
  const st = window.__kp = {t0: null, times: []};
  document.addEventListener('keydown', e => { st.t0 = e.timeStamp; }, true);
  st.painted = () => {
    if (st.t0 === null) return;
    const t0 = st.t0; st.t0 = null;
    requestAnimationFrame(() => {
      const ch = new MessageChannel();
      ch.port1.onmessage = () => st.times.push(performance.now() - t0);
      ch.port2.postMessage(0);
    });
  };
}"""

# the page: the contract's event on the explorer's root
_WATCH_EVENT_JS = """root => root.addEventListener('explorer:painted', () => window.__kp.painted())"""

# the direction of the next press on a slider: right, unless it is at its end
_AT_END_JS = "i => Number(i.value) >= Number(i.max)"
_AT_START_JS = "i => Number(i.value) <= Number(i.min)"


def next_key(previous: str | None, at_start: bool, at_end: bool) -> str:
    """The arrow key of the next press: on in the direction of the last one, back at either end."""
    if at_end:
        return "ArrowLeft"
    if at_start:
        return "ArrowRight"
    return previous or "ArrowRight"


def _press_all(page, control, presses: int, wait_s: float, keys) -> list[float]:
    """Press keys on ``control`` (focused) ``presses`` times, one picture at a time; the times in ms.

    ``keys`` is a list of keys to cycle through, or None for arrows that sweep the slider. Raises
    TimeoutError when a picture does not come.
    """
    control.focus()
    key = None
    for n in range(presses):
        if keys is None:
            key = next_key(key, control.evaluate(_AT_START_JS), control.evaluate(_AT_END_JS))
        else:
            key = keys[n % len(keys)]
        page.keyboard.press(key)
        try:
            page.wait_for_function(f"window.__kp.times.length > {n}", timeout=wait_s * 1000)
        except Exception as err:  # noqa: BLE001  playwright's own TimeoutError
            raise TimeoutError(f"press {n + 1} ({key}) painted no new picture within {wait_s:g} s") from err
        page.wait_for_timeout(150)  # let the kernel and the page fall idle before the next press
    return page.evaluate("window.__kp.times")


def typing_keys(page, box) -> list[str]:
    """Put the caret at the end of the text box ``box`` and return the keys that type there, one picture
    each: Backspace, then the character it removed (so the text, and its picture, come back).
    Raises TimeoutError, so the run says so, when the box is empty."""
    text = box.input_value()
    if not text:
        raise TimeoutError("its text box is empty: there is no character to remove and type again")
    box.focus()
    page.keyboard.press("End")
    return ["Backspace", "Space" if text[-1] == " " else text[-1]]


# ---- JupyterLab ---------------------------------------------------------------------------------------


def lab_chapter(browser, lab: LabServer, stem: str, presses: int, wait_s: float) -> Result:
    """Open notebooks/<stem>.ipynb in JupyterLab, run it, and time presses on its explorer."""
    try:
        with lab_notebook(browser, lab, stem) as (page, _):
            try:
                run_all_cells(page, RUN_ALL_S)
            except Exception:  # noqa: BLE001  playwright's own TimeoutError: say so, time the other chapters
                return Result(problem=f"its cells had not all run after {RUN_ALL_S} s")
            errors = page.evaluate(f"""{PANEL}.content.widgets.filter(c => c.model.type === 'code')
                .flatMap(c => c.model.outputs.toJSON()).filter(o => o.output_type === 'error')
                .map(o => o.ename + ': ' + o.evalue)""")
            if errors:
                return Result(problem=f"the notebook raised: {errors[0][:60]}")
            root = page.locator(".jp-OutputArea-output .attention-explorer[data-explorer]").first
            if not root.count():
                return Result(problem="no explorer rendered")
            root.scroll_into_view_if_needed()
            page.evaluate(_TIMER_JS)
            return _time_root(page, root, presses, wait_s)
    except TimeoutError as err:
        return Result(problem=str(err))


def _time_root(page, root, presses: int, wait_s: float) -> Result:
    """Time presses on one explorer's root: its first slider, or typing into its first text box."""
    root.evaluate(_WATCH_EVENT_JS)
    page.evaluate("window.__kp.times = []")
    before = int(root.evaluate("r => Number(r.dataset.paints || 0)"))
    if root.locator("input[type=range]").count():
        labels = root.locator(".explorer-range label")
        what = "slider" + (" " + labels.first.inner_text().strip() if labels.count() else "")
        times = _press_all(page, root.locator("input[type=range]").first, presses, wait_s, None)
    elif root.locator("input[type=text]").count():
        control = root.locator("input[type=text]").first
        times, what = _press_all(page, control, presses, wait_s, typing_keys(page, control)), "typing"
    else:
        return Result(problem="its explorer has no slider and no text box")
    painted = int(root.evaluate("r => Number(r.dataset.paints || 0)"))
    if painted < before + presses:
        return Result(problem=f"dataset.paints rose by {painted - before}, not {presses}")
    return Result(times, what=what)


# ---- the hosted book ------------------------------------------------------------------------------------

# the page explorers of the contract that have a slider or a text box, by name
_PAGE_EXPLORERS_JS = """() => Array.from(document.querySelectorAll('.attention-explorer[data-explorer]'))
  .filter(r => r.querySelector('input[type=range], input[type=text]')).map(r => r.dataset.explorer)"""


def page_chapter(browser, url: str, presses: int, wait_s: float) -> Result:
    """Time presses on every page explorer of the page at ``url``, pooled: on its first slider, or, when
    it has none, typing into its first text box."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    visit = PageVisit(page, url)
    try:
        page.goto(url, wait_until="load")
        visit.settle()
        names = page.evaluate(_PAGE_EXPLORERS_JS)
        if not names:
            return Result(problem="no page explorer on this page")
        times, pressed = [], []
        page.evaluate(_TIMER_JS)
        for name in names:
            root = page.locator(f'.attention-explorer[data-explorer="{name}"]').first
            root.scroll_into_view_if_needed()
            r = _time_root(page, root, presses, wait_s)
            if r.problem:
                return Result(problem=f"{name}: {r.problem}")
            times += r.times
            pressed.append(f"{name} ({r.what})")
        return Result(times, what=", ".join(pressed))
    except TimeoutError as err:
        return Result(problem=str(err))
    finally:
        context.close()


# ---- the run ---------------------------------------------------------------------------------------


def chapters(selected: list[str] | None) -> list[str]:
    """The chapter stems of notebooks/ (e.g. "01_plain_causal_average"), or those whose stem starts with
    one of ``selected`` ("01", "04_masking")."""
    stems = sorted(p.stem for p in LAUNCH.glob("[0-9][0-9]_*.ipynb"))
    if not selected:
        return stems
    chosen = [s for s in stems if any(s.startswith(x) for x in selected)]
    unknown = [x for x in selected if not any(s.startswith(x) for s in stems)]
    if unknown:
        raise SystemExit(f"bench_keypress: no chapter starts with {', '.join(unknown)}; the chapters are "
                         f"{', '.join(stems)}")
    return chosen


def add_arguments(parser) -> None:
    parser.add_argument("--presses", type=int, default=20, help="presses per chapter and place (default 20)")
    parser.add_argument("--chapters", help="comma-separated chapter stems or their starts, e.g. 01,04")
    parser.add_argument("--html", default=str(HTML), help="the built book (default _build/html)")
    parser.add_argument("--baseline", help="another built book, pressed beside this one")
    parser.add_argument("--wait", type=float, default=10.0, help="seconds a press may take to paint (default 10)")
    parser.add_argument("--no-lab", action="store_true", help="skip JupyterLab")
    parser.add_argument("--no-page", action="store_true", help="skip the hosted book")


def run(args) -> int:
    if args.presses < 1:
        raise SystemExit("bench_keypress: --presses must be at least 1")
    stems = chapters(args.chapters.split(",") if args.chapters else None)
    html = Path(args.html).resolve()
    base = Path(args.baseline).resolve() if args.baseline else None
    if not args.no_page and not (html / "index.html").is_file():
        raise SystemExit(f"bench_keypress: {html}/index.html not found: build the book (make book) or pass "
                         "--no-page")
    if base and not (base / "index.html").is_file():
        raise SystemExit(f"bench_keypress: the baseline {base}/index.html not found: pass a built _build/html")
    if not CHROMIUM.exists():
        raise SystemExit(f"bench_keypress: {CHROMIUM} not found (apt-get install chromium, or set CHROMIUM)")

    from playwright.sync_api import sync_playwright

    lab, page, baseline = {}, {}, {}
    args.load = [os.getloadavg()[0]]
    with sync_playwright() as pw, tempfile.TemporaryDirectory(prefix="bench-keypress-") as home:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        if not args.no_lab:
            lab = lab_times(browser, Path(home), stems, args)
        if not args.no_page:
            with bench_pages.serve(html) as url, (bench_pages.serve(base) if base else nullcontext()) as b_url:
                for stem in stems:  # this build and the baseline in turn, chapter by chapter: the same load
                    path = f"lessons/{stem}.html"
                    page[stem] = (page_chapter(browser, url + path, args.presses, args.wait) if (html / path).is_file()
                                  else Result(problem=f"{path} is not built"))
                    if base:
                        baseline[stem] = (page_chapter(browser, b_url + path, args.presses, args.wait)
                                          if (base / path).is_file() else Result(problem=f"{path} is not built there"))
                    print(f"page {stem}: {page[stem].cell(PAGE_LIMIT_MS)} ({page[stem].what})"
                          + (f"; baseline {baseline[stem].cell(None)}" if base else ""), flush=True)
        browser.close()
    args.load.append(os.getloadavg()[0])
    return report(stems, lab, page, args, baseline)


def lab_times(browser, home: Path, stems: list[str], args) -> dict:
    """Time every chapter in one JupyterLab."""
    results = {}
    with LabServer(home, LAUNCH) as server:
        for stem in stems:
            t0 = time.monotonic()
            results[stem] = lab_chapter(browser, server, stem, args.presses, args.wait)
            print(f"JupyterLab {stem}: {results[stem].cell(LAB_LIMIT_MS)} ({results[stem].what}; "
                  f"{time.monotonic() - t0:.0f} s)", flush=True)
    return results


def report(stems, lab: dict, page: dict, args, baseline: dict | None = None) -> int:
    """Print the side-by-side table; return the exit status (1 when a limit is missed, a part failed, or a
    chapter's page is slower than the baseline's beyond the p90 spread of the two)."""
    ok, problems = True, []
    print(f"\nkeypress -> painted picture, ms over {args.presses} presses: median, p90 (nearest rank)")
    if getattr(args, "load", None):  # times move with the machine's load: say what it was
        print(f"load average {args.load[0]:.1f} at the start, {args.load[-1]:.1f} at the end, on "
              f"{os.cpu_count()} CPUs")
    print(f"{'chapter':<26} {'JupyterLab (limit 25)':<26} {'page (limit 16.7)':<26}"
          + (f" {'page, baseline':<26}" if baseline else ""))
    for stem in stems:
        row = f"{stem:<26}"
        for place, results, limit, skipped in (("JupyterLab", lab, LAB_LIMIT_MS, args.no_lab),
                                               ("page", page, PAGE_LIMIT_MS, args.no_page)):
            if skipped:
                row += f" {'(not run)':<26}"
                continue
            r = results[stem]
            ok &= r.met(limit)
            row += f" {('not measured' if r.problem else r.cell(limit)):<26}"
            if r.problem:
                problems.append(f"{stem}, {place}: {r.problem}")
        if baseline:
            b, r = baseline[stem], page[stem]
            slower = not b.problem and not r.problem and median(r.times) > max(median(b.times), p90(b.times))
            ok &= not slower
            row += f" {('not measured' if b.problem else b.cell(None)):<26}" + ("  SLOWER" if slower else "")
        print(row)
    for problem in problems:
        print(f"  not measured: {problem}")
    print("\nall limits met" if ok else "\nlimits MISSED (or a part could not be measured: see above)")
    return 0 if ok else 1

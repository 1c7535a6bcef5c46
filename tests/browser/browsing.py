"""What the browser tests share: where the built book is, Debian's Chromium, and page visits.

Nothing is downloaded: the browser is /usr/bin/chromium (apt `chromium`), driven by Playwright through
`executable_path`; `playwright install` is never needed. Every request that leaves localhost is aborted
and recorded (:class:`PageVisit`), so a test can assert the book is self-contained. The fixtures built on
these (the served book, the browser, pages loaded once per module) are in tests/browser/conftest.py; test
modules import these helpers with ``from browsing import ...`` (pyproject puts tests/browser on the path).
Chromium's flags, :class:`PageVisit` and :class:`LabServer` (a real JupyterLab) come from course/browser.py,
which the benchmarks use too.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from course.browser import (ALL_RUN, CHROMIUM, CHROMIUM_ARGS, LAB_SETTINGS, LOCAL_HOSTS, PANEL,  # noqa: F401
                            READY, LabServer, PageVisit, free_port, lab_notebook,
                            run_all_cells)
from course.layout import HTML, ROOT

SCREENSHOTS = ROOT / "_build" / "screenshots"
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
ENGINE = ROOT / "attention_lab" / "static" / "engine"
# widget-view scripts whose output area holds no rendered widget (html-manager puts the view before the script)
UNRENDERED_VIEWS_JS = """(() => Array.from(document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]'))
  .filter(s => !s.parentElement.querySelector('.jupyter-widgets:not(.jupyter-widgets-error-widget), .widget-subarea > *'))
  .map(s => s.textContent.trim().slice(0, 80)))()"""


class NodePage:
    """The page engine's scripts run by Node with no browser (tests/js/evaluate.js): ``evaluate(fn, arg)``
    as Playwright's ``page.evaluate`` takes it, so one test can ask the engine in Node and in Chromium."""

    def __init__(self, scripts):
        if shutil.which("node") is None:
            missing("node is not installed: the engine's tests under Node need Node.js")
        self.process = subprocess.Popen(["node", str(ROOT / "tests" / "js" / "evaluate.js"), *map(str, scripts)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def evaluate(self, fn: str, arg=None):
        self.process.stdin.write(json.dumps({"fn": fn, "arg": arg}) + "\n")
        self.process.stdin.flush()
        reply = json.loads(self.process.stdout.readline() or '{"error": "node stopped"}',
                           object_hook=lambda d: float(d["__float__"]) if set(d) == {"__float__"} else d)
        if "error" in reply:
            raise RuntimeError(f"the engine under Node raised: {reply['error']}")
        return reply["value"]

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=10)


def missing(reason: str):
    """Skip on a developer's machine; fail in CI (CI=true), where a skipped browser test would hide a gap."""
    if os.environ.get("CI"):
        pytest.fail(reason + " (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


def built_page(relative: str) -> Path:
    """A page of the built book, _build/html/<relative>; skips (fails in CI) when it is not built."""
    page = HTML / relative
    if not page.is_file():
        missing(f"{page} is not built: run `make book` first")
    return page


def book_pages() -> list[str]:
    """Every HTML page of the built book, relative to _build/html (empty when it is not built)."""
    if not HTML.is_dir():
        return []
    skip = ("_static/", "_sources/", "_images/")
    return sorted(
        p.relative_to(HTML).as_posix() for p in HTML.rglob("*.html") if not p.relative_to(HTML).as_posix().startswith(skip)
    )


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output for the findings
        pass


def open_page(browser, url: str, width: int = 1280, color_scheme: str = "light"):
    """(browser context, settled PageVisit) for ``url`` in a window ``width`` CSS px wide."""
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=color_scheme)
    page = context.new_page()
    v = PageVisit(page, url)
    page.goto(v.url, wait_until="load")
    v.settle()
    return context, v


def chapter_pages() -> list[str]:
    """The built chapters, lessons/NN_slug.html, or a placeholder whose tests say the book is not built."""
    return [p for p in book_pages() if p.startswith("lessons/")] or ["(book not built)"]


class ChapterViews:
    """One chapter, opened once per (window width, colour scheme) a test asks for and kept open."""

    def __init__(self, browser, book_url: str, path: str):
        self.browser, self.book_url, self.path = browser, book_url, path
        self.stem = path.rsplit("/", 1)[-1].removesuffix(".html")
        self._open: dict[tuple[int, str], tuple] = {}

    def view(self, width: int, color_scheme: str) -> PageVisit:
        key = (width, color_scheme)
        if key not in self._open:
            self._open[key] = open_page(self.browser, self.book_url + self.path, width, color_scheme)
        return self._open[key][1]

    def close(self):
        for context, _ in self._open.values():
            context.close()
        self._open.clear()



"""Fixtures for the browser tests: the built book served on 127.0.0.1, and Debian's headless Chromium.

Nothing is downloaded: the browser is /usr/bin/chromium (apt `chromium`), driven by Playwright through
`executable_path`; `playwright install` is never needed. Every request that leaves localhost is aborted
and recorded, so a test can assert the book is self-contained.
"""

from __future__ import annotations

import functools
import http.server
import os
import socket
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
# Debian's chromium here and in .ci/run; the GitHub workflow points CHROMIUM at the runner's Chrome
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}


def _missing(reason: str):
    """Skip on a developer's machine; fail in CI (CI=true), where a skipped browser test would hide a gap."""
    if os.environ.get("CI"):
        pytest.fail(reason + " (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


def built_page(relative: str) -> Path:
    """A page of the built book, _build/html/<relative>; skips (fails in CI) when it is not built."""
    page = HTML / relative
    if not page.is_file():
        _missing(f"{page} is not built: run `make book` first")
    return page


def _free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a server a test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def book_pages() -> list[str]:
    """Every HTML page of the built book, relative to _build/html (empty when it is not built)."""
    if not HTML.is_dir():
        return []
    skip = ("_static/", "_sources/", "_images/")
    return sorted(
        p.relative_to(HTML).as_posix() for p in HTML.rglob("*.html") if not p.relative_to(HTML).as_posix().startswith(skip)
    )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output for the findings
        pass


@pytest.fixture(scope="session")
def book_url():
    if not (HTML / "index.html").is_file():
        _missing(f"the book is not built ({HTML}/index.html missing): run `make book` first")
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        _missing(f"{CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


class PageVisit:
    """One page load with everything that went wrong on the way recorded."""

    def __init__(self, page, url: str):
        self.page = page
        self.url = url
        self.third_party: list[str] = []
        self.failed: list[str] = []
        self.console_errors: list[str] = []
        self.bytes_by_url: dict[str, int] = {}
        page.route("**/*", self._route)
        page.on("requestfailed", lambda r: self.failed.append(f"{r.url} ({r.failure})"))
        page.on("response", self._response)
        page.on("console", lambda m: self.console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.console_errors.append(f"uncaught: {e}"))

    def _route(self, route):
        host = urlsplit(route.request.url).hostname
        if route.request.url.startswith(("data:", "blob:")) or host in LOCAL_HOSTS:
            route.continue_()
        else:
            self.third_party.append(route.request.url)
            route.abort()

    def _response(self, response):
        if response.status >= 400:
            self.failed.append(f"{response.url} (HTTP {response.status})")
        try:
            length = int(response.headers.get("content-length", "0"))
        except ValueError:
            length = 0
        self.bytes_by_url[response.url] = length

    def settle(self):
        """Wait for the network, MathJax and the widget manager to finish."""
        self.page.wait_for_load_state("networkidle")
        self.page.evaluate(
            "() => (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) || null"
        )
        views = self.page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
        if views:
            try:
                self.page.wait_for_function(UNRENDERED_VIEWS_JS + ".length === 0", timeout=20_000)
            except Exception:
                pass  # the test reports which views did not render
        self.page.wait_for_timeout(300)


# widget-view scripts whose output area holds no rendered widget (html-manager puts the view before the script)
UNRENDERED_VIEWS_JS = """(() => Array.from(document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]'))
  .filter(s => !s.parentElement.querySelector('.jupyter-widgets:not(.jupyter-widgets-error-widget), .widget-subarea > *'))
  .map(s => s.textContent.trim().slice(0, 80)))()"""


def open_page(browser, url: str, width: int = 1280, color_scheme: str = "light"):
    """(browser context, settled PageVisit) for ``url`` in a window ``width`` CSS px wide."""
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=color_scheme)
    page = context.new_page()
    v = PageVisit(page, url)
    page.goto(v.url, wait_until="load")
    v.settle()
    return context, v


@pytest.fixture
def visit(browser, book_url):
    """visit("lessons/x.html") -> a settled PageVisit; the page closes after the test."""
    contexts = []

    def _visit(path: str) -> PageVisit:
        context, v = open_page(browser, book_url + path, 1280, "light")
        contexts.append(context)
        return v

    yield _visit
    for context in contexts:
        context.close()


@pytest.fixture(scope="module", params=book_pages() or ["(book not built)"])
def page_view(request, browser, book_url):
    """Each page of the book, loaded once at 1280 px in light mode and shared by the tests that only
    read it (pytest runs a page's tests together); ``.path`` is the page."""
    if request.param == "(book not built)":
        _missing("the book is not built: run `make book` first")
    context, v = open_page(browser, book_url + request.param, 1280, "light")
    v.path = request.param
    yield v
    context.close()


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


@pytest.fixture(scope="module", params=chapter_pages())
def chapter_views(request, browser, book_url):
    """A chapter's pages in every window a test of the module asks for; pytest runs a chapter's tests
    together, so each chapter loads once per width and colour scheme, and at most four pages are open."""
    if request.param == "(book not built)":
        _missing("the book is not built: run `make book` first")
    views = ChapterViews(browser, book_url, request.param)
    yield views
    views.close()

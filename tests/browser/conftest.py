"""Fixtures for the browser tests: the built book served on 127.0.0.1, Debian's headless Chromium, and
pages loaded once per module or per test. What they are built on, and what test modules import, is in
browsing.py.
"""

from __future__ import annotations

import functools
import importlib.util
import http.server
import threading

import pytest
from browsing import (CHROMIUM, CHROMIUM_ARGS, HTML, ChapterViews, PageVisit, QuietHandler, book_pages, chapter_pages,
                      missing, open_page)


@pytest.fixture(scope="session")
def book_url():
    if not (HTML / "index.html").is_file():
        missing(f"the book is not built ({HTML}/index.html missing): run `make book` first")
    handler = functools.partial(QuietHandler, directory=str(HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        missing(f"{CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium)")
    if importlib.util.find_spec("playwright") is None:
        missing("playwright is not installed: pip install -r requirements.txt")
    from playwright import sync_api
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


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
        missing("the book is not built: run `make book` first")
    context, v = open_page(browser, book_url + request.param, 1280, "light")
    v.path = request.param
    yield v
    context.close()


@pytest.fixture(scope="module", params=chapter_pages())
def chapter_views(request, browser, book_url):
    """A chapter's pages in every window a test of the module asks for; pytest runs a chapter's tests
    together, so each chapter loads once per width and colour scheme, and at most four pages are open."""
    if request.param == "(book not built)":
        missing("the book is not built: run `make book` first")
    views = ChapterViews(browser, book_url, request.param)
    yield views
    views.close()

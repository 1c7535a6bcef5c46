"""Page weight of a built book: what a first visit of each page costs, empty cache, gzipped.

    python -m course bench-pages                          # _build/html
    python -m course bench-pages --baseline OTHER/_build/html
    python -m course bench-pages --pages lessons/02_queries_keys_values.html --top 8

Each page opens in a fresh headless Chromium context, scrolled to its end, and every request's body is
counted gzipped (level 6) as a web server would send it; a request off 127.0.0.1 is blocked, counted, and
makes the exit status 1. With --baseline both books are measured page by page in the same run, with the ratio.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import threading
from contextlib import contextmanager, nullcontext
from pathlib import Path
from urllib.parse import unquote, urlsplit

from course.browser import CHROMIUM, CHROMIUM_ARGS, PageVisit
from course.layout import HTML

SKIP = ("_static/", "_sources/", "_images/")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextmanager
def serve(directory: Path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


def pages_of(html: Path) -> list[str]:
    return sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html")
                  if not p.relative_to(html).as_posix().startswith(SKIP))


@functools.lru_cache(maxsize=None)
def _gzipped(data: bytes) -> int:
    return len(gzip.compress(data, compresslevel=6))


class Visit:
    """One first visit: {url: gzipped bytes} and the requests that left localhost."""

    def __init__(self, browser, html: Path, base_url: str, path: str, width: int):
        self.html, self.base_url = html, base_url
        self.gz: dict[str, int] = {}
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        visit = PageVisit(page, base_url + path)  # blocks and lists requests off localhost, and failures
        self.third_party, self.failed = visit.third_party, visit.failed
        responses = []
        page.on("response", lambda r: responses.append(r))
        try:
            page.goto(visit.url, wait_until="load")
            page.wait_for_load_state("networkidle")
            # lazy pictures and fonts first used further down: scroll to the end in steps
            height = page.evaluate("() => document.documentElement.scrollHeight")
            for y in range(0, height + 900, 900):
                page.evaluate(f"() => window.scrollTo(0, {y})")
                page.wait_for_timeout(40)
            page.wait_for_load_state("networkidle")
            page.wait_for_timeout(500)
            for response in responses:
                self._count(response)
        finally:
            context.close()

    def _count(self, response):
        url = response.url
        if url.startswith(("data:", "blob:")) or url in self.gz:
            return
        rel = unquote(urlsplit(url).path).lstrip("/")
        file = self.html / rel
        if file.is_dir():
            file = file / "index.html"
        if file.is_file():
            data = file.read_bytes()
        else:
            try:
                data = response.body()
            except Exception:
                data = b""
        self.gz[url] = _gzipped(data)

    @property
    def total(self) -> int:
        return sum(self.gz.values())

    def biggest(self, n: int) -> list[tuple[str, int]]:
        def short(url):
            return unquote(urlsplit(url).path).lstrip("/") or "index.html"
        return [(short(u), b) for u, b in sorted(self.gz.items(), key=lambda kv: -kv[1])[:n]]


def add_arguments(parser) -> None:
    parser.add_argument("html", nargs="?", default=str(HTML), help="built book (default _build/html)")
    parser.add_argument("--baseline", help="a second built book to compare with, measured in the same run")
    parser.add_argument("--pages", nargs="*", help="pages relative to the book (default: every page)")
    parser.add_argument("--top", type=int, default=4, help="how many of the biggest requests to list per page")
    parser.add_argument("--width", type=int, default=1280, help="window width in CSS px")


def run(args) -> int:
    html = Path(args.html).resolve()
    base = Path(args.baseline).resolve() if args.baseline else None
    for d in filter(None, (html, base)):
        if not (d / "index.html").is_file():
            raise SystemExit(f"bench_pages: {d}/index.html not found: build the book first")
    if not CHROMIUM.exists():
        raise SystemExit(f"bench_pages: {CHROMIUM} not found (set CHROMIUM)")
    pages = args.pages or pages_of(html)

    from playwright.sync_api import sync_playwright

    rows, offsite = [], 0
    with sync_playwright() as pw, serve(html) as url, (serve(base) if base else nullcontext()) as base_url:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        for path in pages:
            this = Visit(browser, html, url, path, args.width)
            then = Visit(browser, base, base_url, path, args.width) if base and (base / path).is_file() else None
            offsite += len(this.third_party) + (len(then.third_party) if then else 0)
            rows.append((path, this, then))
            _print_row(path, this, then, args.top)
        browser.close()

    _print_summary(rows)
    if offsite:
        print(f"\n{offsite} request(s) left localhost and were blocked (listed above): the book is not self-contained")
        return 1
    return 0


def _mb(b: int) -> str:
    return f"{b / 1e6:6.2f}"


def _print_row(path: str, this: Visit, then: Visit | None, top: int) -> None:
    line = f"{path:<46} {len(this.gz):3d} req {_mb(this.total)} MB"
    if then is not None:
        line += f"   baseline {len(then.gz):3d} req {_mb(then.total)} MB   ratio {this.total / then.total:5.2f}"
    print(line, flush=True)
    for name, b in this.biggest(top):
        print(f"      {_mb(b)} MB  {name}")
    for problem in this.third_party:
        print(f"      BLOCKED off-site request: {problem}")
    for problem in this.failed:
        print(f"      failed: {problem}")
    if then is not None:
        for problem in then.third_party:
            print(f"      BLOCKED off-site request (baseline): {problem}")


def _print_summary(rows) -> None:
    print("\nfirst visit, empty cache, gzipped (level 6), MB")
    head = f"{'page':<46} {'this':>7}"
    paired = any(then for _, _, then in rows)
    if paired:
        head += f" {'baseline':>9} {'ratio':>6}"
    print(head)
    for path, this, then in rows:
        line = f"{path:<46} {this.total / 1e6:7.2f}"
        if then is not None:
            line += f" {then.total / 1e6:9.2f} {this.total / then.total:6.2f}"
        print(line)
    if paired:
        both = [(t.total, b.total) for _, t, b in rows if b is not None]
        t, b = sum(x for x, _ in both), sum(y for _, y in both)
        print(f"{'all pages (sum)':<46} {t / 1e6:7.2f} {b / 1e6:9.2f} {t / b:6.2f}")

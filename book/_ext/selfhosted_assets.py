"""Render the maths at build time, with KaTeX's stylesheet and fonts served from the book, when they exist.

With ``book/_static/vendor/manifest.json`` (``python -m course vendor``), sphinxcontrib-katex renders every
formula while the book builds (``katex_prerender``, which runs ``node``) and pages load no maths script;
without it, the maths is left to MathJax from a CDN and the build says so in a notice (an error with
``BOOK_REQUIRE_SELFHOSTED=1``, as the deploy workflow sets).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ConfigError, ExtensionError
from sphinx.util import logging
from sphinx.util.console import bold

logger = logging.getLogger(__name__)

STATIC = Path("book") / "_static"
MANIFEST = STATIC / "vendor" / "manifest.json"


def choose_assets(app: Sphinx, config: Config) -> None:
    srcdir = Path(app.srcdir)
    manifest_path = srcdir / MANIFEST
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
        if not (srcdir / STATIC / manifest.get("katex_css", "-")).is_file():
            raise ConfigError(f"{MANIFEST} names a stylesheet that is missing; rerun `python -m course vendor`")
        use_katex(app, config, manifest)
        versions = ", ".join(f"{k} {v}" for k, v in manifest.get("versions", {}).items())
        logger.info(bold("self-hosted assets: ") + f"KaTeX's stylesheet from _static/vendor/, maths rendered by "
                    f"KaTeX at build time ({versions})")
        return
    if os.environ.get("BOOK_REQUIRE_SELFHOSTED") == "1":
        raise ConfigError(f"BOOK_REQUIRE_SELFHOSTED=1 but {MANIFEST} is missing: run `npm ci && python -m course vendor`")
    logger.info(bold("NOTICE: ") + f"{MANIFEST} not found (Node/npm missing?): this book will load MathJax from a "
                "third-party CDN when read. Run `make book` on a machine with npm for a self-contained book.")


def use_katex(app: Sphinx, config: Config, manifest: dict) -> None:
    """Every formula rendered to HTML by KaTeX while the book builds, instead of by MathJax in the reader's browser."""
    if shutil.which("node") is None:
        raise ConfigError("the KaTeX stylesheet is vendored but `node` is not on PATH: sphinxcontrib-katex's "
                          "katex_prerender runs it; install Node.js, or `python -m course vendor --clean` for the CDN build")
    app.setup_extension("sphinxcontrib.katex")
    from sphinxcontrib import katex

    vendored = manifest.get("versions", {}).get("katex")
    if vendored != katex.katex_version:
        # the HTML comes from the Python package's katex.min.js, the stylesheet from npm: one version for both
        raise ConfigError(f"sphinxcontrib-katex renders with KaTeX {katex.katex_version} but package.json vendors "
                          f"katex {vendored}: pin katex {katex.katex_version} in package.json")
    config.html_math_renderer = "katex"
    config.katex_prerender = True
    config.katex_css_path = manifest["katex_css"]
    katex.KaTeXServer.start_server_process = classmethod(_start_server_process)


def _start_server_process(cls, rundir: Path, timeout: float):
    """sphinxcontrib-katex 0.9.11's KaTeXServer.start_server_process, with a refused connection retried until
    the same timeout (CONTRIBUTING.md, "Page weight" in the design notes)."""
    import socket
    import subprocess
    import time

    socket_path = rundir / "katex.sock"
    process = subprocess.Popen(cls.build_command(socket=socket_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=rundir)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise ExtensionError(f"the KaTeX server (node) exited with code {process.returncode} before it listened")
        if socket_path.is_socket():
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
                sock.connect(str(socket_path))
                sock.settimeout(None)
                return process, sock
            except ConnectionRefusedError:
                sock.close()
            except socket.timeout:
                sock.close()
                process.kill()
                raise cls.timeout_error(timeout)
        if time.monotonic() > deadline:
            process.kill()
            raise cls.timeout_error(timeout)
        time.sleep(0.005)


def each_script_once(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Drop repeated <script> entries: a bundle or a `const` declaration loaded twice breaks the page.

    (sphinx-thebe 0.3.1 adds its inline `const THEBE_JS_URL = ...` twice under Jupyter Book 1, which loads it
    even with `launch_buttons: thebe: false`: every page, checked with a build without this.)
    """
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for js in scripts:
        # a body-only script is added once with filename None and once with '': the same script
        name = getattr(js, "filename", js) or ""
        key = (str(name), tuple(sorted((k, str(v)) for k, v in getattr(js, "attributes", {}).items())))
        if key in seen:
            continue
        seen.add(key)
        unique.append(js)
    scripts[:] = unique


def citation_list_roles(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Sphinx marks the bibliography `role="list"` but its entries `role="doc-biblioentry"`: a list whose
    children are not list items (axe `aria-required-children`, critical). Make the entries list items."""
    body = context.get("body")
    if body and 'role="list" class="citation-list"' in body:
        context["body"] = body.replace('role="doc-biblioentry"', 'role="listitem"')


def setup(app: Sphinx) -> dict:
    # before myst-nb reads its configuration (builder-inited) and Sphinx chooses its maths renderer
    app.connect("config-inited", choose_assets)
    # book/_static/theme_mode.js: the theme's colour mode starts at "auto" (no console error on a first visit)
    app.add_js_file("theme_mode.js", priority=200)
    # after every extension has added its per-page scripts
    app.connect("html-page-context", each_script_once, priority=900)
    app.connect("html-page-context", citation_list_roles)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

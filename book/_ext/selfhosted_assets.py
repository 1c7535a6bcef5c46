"""Serve the widget manager and MathJax from the book's own static files when they exist.

`tools/vendor_js.py` (run by `make book`) copies them from node_modules into book/_static/vendor/ and
writes vendor/manifest.json. At build time this extension reads the manifest:
- present: myst-nb's `nb_ipywidgets_js` and Sphinx's `mathjax_path` point at the copies (relative to
  _static/, so every page, nested or not, finds them): the book makes no third-party request;
- absent (no Node on the machine): the CDN defaults stay, and the build log says so in a notice
  (not a warning, so `-W` builds still pass). Set BOOK_REQUIRE_SELFHOSTED=1 to make it an error, as
  the deploy workflow does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ConfigError
from sphinx.util import logging
from sphinx.util.console import bold

logger = logging.getLogger(__name__)

STATIC = Path("book") / "_static"
MANIFEST = STATIC / "vendor" / "manifest.json"
SETUP_JS = "widgets_setup.js"  # book/_static/widgets_setup.js: slider names, MathJax 3 shim
# html-manager's plain bundle (core widgets, no module loader); myst-nb's default is the AMD bundle plus
# require.js, twice the bytes, which only a page with third-party widget modules needs (this book has none)
AMD_BUNDLE, PLAIN_BUNDLE = "embed-amd.js", "embed.js"


def choose_assets(app: Sphinx, config: Config) -> None:
    srcdir = Path(app.srcdir)
    manifest_path = srcdir / MANIFEST
    for entry in config.html_js_files:
        name = entry[0] if isinstance(entry, (tuple, list)) else entry
        if str(name).startswith("vendor/"):
            # Jupyter Book adds every .js under a top-level _static/ to every page: a second copy of a bundle
            raise ConfigError(f"{name} is in html_js_files; vendored bundles must be loaded only by the extension")
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("html_manager_js", "").endswith(AMD_BUNDLE):
            # written by an older tools/vendor_js.py: the AMD bundle would load without its require.js
            raise ConfigError(f"{MANIFEST} names html-manager's {AMD_BUNDLE}; rerun `python tools/vendor_js.py`")
        missing = [k for k in ("html_manager_js", "mathjax_js") if not (srcdir / STATIC / manifest[k]).is_file()]
        if missing:
            raise ConfigError(f"{MANIFEST} lists files that are missing ({missing}); rerun `python tools/vendor_js.py`")
        # order matters: the setup shim registers its `load` handler before the widget bundle's
        config.nb_ipywidgets_js = {SETUP_JS: {}, manifest["html_manager_js"]: {}}
        config.mathjax_path = manifest["mathjax_js"]
        versions = ", ".join(f"{k} {v}" for k, v in manifest.get("versions", {}).items())
        logger.info(bold("self-hosted assets: ") + f"html-manager and MathJax from _static/vendor/ ({versions})")
        return
    if os.environ.get("BOOK_REQUIRE_SELFHOSTED") == "1":
        raise ConfigError(f"BOOK_REQUIRE_SELFHOSTED=1 but {MANIFEST} is missing: run `npm ci && python tools/vendor_js.py`")
    # the CDN defaults' widget manager, as its plain bundle (no require.js), after the setup shim
    manager_url, manager_attrs = next((url, attrs) for url, attrs in config.nb_ipywidgets_js.items() if AMD_BUNDLE in url)
    config.nb_ipywidgets_js = {SETUP_JS: {}, manager_url.replace(AMD_BUNDLE, PLAIN_BUNDLE): manager_attrs}
    logger.info(
        bold("NOTICE: ")
        + f"{MANIFEST} not found (Node/npm missing?): this book will load the widget manager and "
        "MathJax from third-party CDNs when read. Run `make book` on a machine with npm for a self-contained book."
    )


def each_script_once(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Drop repeated <script> entries: a bundle or a `const` declaration loaded twice breaks the page.

    (sphinx-thebe 0.3.1 adds its inline `const THEBE_JS_URL = ...` twice under Jupyter Book 1.)
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
    # before myst-nb reads its configuration (builder-inited) and Sphinx's mathjax uses mathjax_path
    app.connect("config-inited", choose_assets)
    # book/_static/theme_mode.js: the theme's colour mode starts at "auto" (no console error on a first visit)
    app.add_js_file("theme_mode.js", priority=200)
    # after every extension has added its per-page scripts
    app.connect("html-page-context", each_script_once, priority=900)
    app.connect("html-page-context", citation_list_roles)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

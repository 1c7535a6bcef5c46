"""Pages without pydata-sphinx-theme's `fontawesome.js`: its icons come from the theme's CSS and webfonts.

book/_templates/layout.html passes the theme's `css` block through the filter below (CONTRIBUTING.md,
"Page weight"). If a theme upgrade stops emitting the script there, the filter finds nothing and the
build stops: then delete the template and this extension, or point them at where the script went.
"""

from __future__ import annotations

import re

from markupsafe import Markup
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

FONTAWESOME_JS = re.compile(r'[ \t]*<script defer src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>\n?')


def without_fontawesome_js(html: str) -> Markup:
    kept, removed = FONTAWESOME_JS.subn("", str(html))
    if removed != 1:
        raise ExtensionError(
            f"theme_icons: expected one fontawesome.js <script> in the theme's `css` block, found {removed}; "
            "see book/_ext/theme_icons.py"
        )
    return Markup(kept)


def add_filter(app: Sphinx) -> None:
    templates = getattr(app.builder, "templates", None)
    if templates is not None and hasattr(templates, "environment"):
        templates.environment.filters["without_fontawesome_js"] = without_fontawesome_js


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", add_filter)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

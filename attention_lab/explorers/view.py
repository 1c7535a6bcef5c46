"""The page engine's files, package data of ``attention_lab`` (``attention_lab/static/engine/``).

One copy serves every place an explorer is drawn: :func:`engine_source` is the classic-script bundle the
hosted book loads (``book/_ext/page_explorers.py`` writes it, with ``page.js``, into the built book as
``_static/engine/explorers.js``, :func:`page_source`), and :func:`esm` is the same bundle with ``view.js`` appended, the ES module
of every explorer's widget view (anywidget) in JupyterLab, Notebook 7, VS Code, Binder and Colab. A wheel
carries the files, so a pip-installed package draws the same explorers.
"""

from __future__ import annotations

import functools
import json
from importlib.resources import files

# the engine's scripts, in the order they load: each adds its part to globalThis.AttentionLab
SCRIPTS = ("format.js", "attention.js", "controls.js", "heatmap.js", "trace.js", "mount.js",
           "explorers/average.js", "explorers/scores.js", "explorers/scaling.js", "explorers/masking.js",
           "explorers/head.js", "explorers/trained.js", "explorers/heads.js",
           "explorers/generate.js")
VIEW = "view.js"  # the widget view's glue: `export default { render }`
PAGE = "page.js"  # the hosted book's start: mount every explorer of the page
CSS = "explorers.css"


def _engine_file(name: str) -> str:
    return files("attention_lab").joinpath("static", "engine", name).read_text(encoding="utf-8")


@functools.cache
def engine_source() -> str:
    """The engine as one classic script."""
    return "\n".join(f"// ---- {name}\n{_engine_file(name)}" for name in SCRIPTS)


@functools.cache
def page_source() -> str:
    """The hosted book's ``_static/engine/explorers.js``: the engine, then the page's start."""
    return engine_source() + f"\n// ---- {PAGE}\n" + _engine_file(PAGE)


@functools.cache
def esm() -> str:
    """The widget view's ES module: the engine, then the view's ``render``."""
    return engine_source() + f"\n// ---- {VIEW}\n" + _engine_file(VIEW)


@functools.cache
def css() -> str:
    """The explorers' stylesheet (the book serves it as ``_static/engine/explorers.css``)."""
    return _engine_file(CSS)


@functools.cache
def colour_maps() -> dict:
    """The colour maps every picture shares (``attention_lab/data/colour_maps.json``)."""
    return json.loads(files("attention_lab").joinpath("data", "colour_maps.json").read_text(encoding="utf-8"))

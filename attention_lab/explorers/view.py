"""The page engine's files, package data of ``attention_lab`` (``attention_lab/static/engine/``): one
bundle for the hosted book (:func:`page_source`) and every kernel's widget view (:func:`esm`). See
CONTRIBUTING.md, "The explorers".
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

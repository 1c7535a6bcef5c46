"""The explorers of the hosted book: each explorer output becomes the page engine's explorer.

As Sphinx reads a chapter (``source-read``, before myst-nb parses it), an output whose metadata holds an
explorer's config (``attention_lab.explorers.PAGE_KEY``) becomes ``<div class="attention-explorer"
data-explorer="NAME">`` holding the config as JSON, colour maps added, and its static picture goes. The
engine (``attention_lab/static/engine/``) is written into ``_static/engine/``, a subfolder because Jupyter
Book adds every top-level ``.js`` to every page, and added to the pages that hold an explorer. At read
time so that the notebook on disk, which nbval compares, keeps its outputs.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import page_questions  # book/_ext: a config with "question" is one of the chapters' questions

from attention_lab.explorers import PAGE_KEY, view

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SCRIPT, STYLE = "engine/explorers.js", "engine/explorers.css"
MARK = 'class="attention-explorer"'


def explorer_html(config: dict) -> str:
    """The page's explorer: a div naming it, its config as JSON inside, and a line for a reader without JS."""
    data = json.dumps({**config, "colours": view.colour_maps()}, separators=(",", ":"), sort_keys=True)
    data = data.replace("</", "<\\/")  # nothing in the JSON may close the <script>
    name = html.escape(config["explorer"], quote=True)
    return (f'<div class="attention-explorer" data-explorer="{name}">'
            f'<script type="application/json" class="explorer-config">{data}</script>'
            '<noscript><p class="explorer-message">This explorer computes its pictures in your browser: '
            "turn JavaScript on to use it.</p></noscript></div>")


def to_page(nb: dict) -> int:
    """Swap each explorer and question output for its page form, in place; return how many."""
    swapped = 0
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            config = out.get("metadata", {}).pop(PAGE_KEY, None)
            if config is None:
                continue
            if "question" in config:
                out["data"]["text/html"] = page_questions.question_html(config)
                page_questions.hide_source(cell)
            elif config.get("engine", True):
                out["data"] = {"text/html": explorer_html(config), "text/plain": out["data"].get("text/plain", "")}
            else:  # only a kernel computes it: its picture stays
                out.get("data", {}).pop(WIDGET_VIEW, None)
                continue
            swapped += 1
    page_questions.drop_kernel_checks(nb)
    return swapped


def read_source(app, docname: str, source: list) -> None:
    if not str(app.env.doc2path(docname)).endswith(".ipynb") or PAGE_KEY not in source[0]:
        return
    nb = json.loads(source[0])
    if to_page(nb):
        source[0] = json.dumps(nb)


def add_assets(app, pagename, templatename, context, doctree) -> None:
    for mark, script, style in ((MARK, SCRIPT, STYLE), (page_questions.MARK, page_questions.SCRIPT,
                                                        page_questions.STYLE)):
        if mark in context.get("body", ""):
            app.add_js_file(script, defer="defer")
            app.add_css_file(style)


def write_engine(app, exception) -> None:
    """The engine into the built book: one script (the package's files in order, then the page's start)."""
    if exception is None and app.builder.format == "html":
        folder = Path(app.outdir) / "_static" / "engine"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "explorers.js").write_text(view.page_source(), encoding="utf-8")
        (folder / "explorers.css").write_text(view.css(), encoding="utf-8")


def setup(app):
    app.connect("source-read", read_source)
    app.connect("html-page-context", add_assets)
    app.connect("build-finished", write_engine)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

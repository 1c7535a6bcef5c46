"""The explorers of the hosted book compute in the page: their widget outputs become page explorers.

When a chapter is executed for the book (``make outputs``), each explorer stores, beside its widget view,
a small config in its output's metadata (``attention_lab.explorers.PAGE_KEY``: which explorer, the
values it starts on, the chapter's own tensors). Here, as Sphinx reads a chapter (``source-read``, before
myst-nb parses it), that output becomes ``<div class="attention-explorer" data-explorer="NAME">`` holding
the config as JSON, plus the colour maps the Python pictures use (``attention_lab/data/colour_maps.json``),
and the saved state of that explorer's widgets is dropped. A page left with no widget state loads no widget
manager at all (myst-nb adds it only for a notebook with state), and the pictures are no longer pre-drawn:
``book/_static/engine/explorers.js`` draws them with ``engine/attention.js``, both added to the pages that
hold an explorer (``html-page-context``). They live in a subfolder of ``_static``: Jupyter Book adds every
``.js`` at its top level to every page.

Why at read time, on the notebook's JSON: nbval compares the stored text outputs, so the notebook on disk
keeps its widget view and text/plain; only the page changes. An explorer output without a config (a
learner's ``Head`` the page cannot rebuild, or a chapter executed without ``ATTENTION_LAB_STATIC=1``)
stays a widget.
"""

from __future__ import annotations

import html
import json
import re

from course.layout import DATA

PAGE_KEY = "attention_lab_page"  # attention_lab.explorers.PAGE_KEY (the package is not imported here)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
MODEL_REF = re.compile(r"IPY_MODEL_([0-9a-f]{32})")
COLOUR_MAPS = DATA / "colour_maps.json"
SCRIPTS = ("engine/attention.js", "engine/explorers.js")
MARK = 'class="attention-explorer"'


def explorer_html(config: dict, colours: dict) -> str:
    """The page's explorer: a div naming it, its config as JSON inside, and a line for a reader without JS."""
    data = json.dumps({**config, "colours": colours}, separators=(",", ":"), sort_keys=True)
    data = data.replace("</", "<\\/")  # nothing in the JSON may close the <script>
    name = html.escape(config["explorer"], quote=True)
    return (f'<div class="attention-explorer" data-explorer="{name}">'
            f'<script type="application/json" class="explorer-config">{data}</script>'
            '<noscript><p class="explorer-message">This explorer computes its pictures in your browser: '
            "turn JavaScript on to use it.</p></noscript></div>")


def models_under(state: dict, model_id: str) -> set[str]:
    """``model_id`` and every widget model its state refers to (children, layouts, styles), depth first."""
    seen, todo = set(), [model_id]
    while todo:
        m = todo.pop()
        if m in state and m not in seen:
            seen.add(m)
            todo += MODEL_REF.findall(json.dumps(state[m]))
    return seen


def to_page(nb: dict, colours: dict) -> int:
    """Swap each explorer output that has a page config for the page's explorer, in place; return how many."""
    state = nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    swapped = 0
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            config = out.get("metadata", {}).pop(PAGE_KEY, None)
            if config is None:
                continue
            view = out.get("data", {}).pop(WIDGET_VIEW, None)
            if view:
                for m in models_under(state, view["model_id"]):
                    del state[m]
            out["data"]["text/html"] = explorer_html(config, colours)
            swapped += 1
    if swapped and not state:
        nb["metadata"].pop("widgets", None)  # no state left: myst-nb then loads no widget manager
    return swapped


def read_source(app, docname: str, source: list) -> None:
    if not str(app.env.doc2path(docname)).endswith(".ipynb") or PAGE_KEY not in source[0]:
        return
    nb = json.loads(source[0])
    if to_page(nb, json.loads(COLOUR_MAPS.read_text())):
        source[0] = json.dumps(nb)


def add_scripts(app, pagename, templatename, context, doctree) -> None:
    if MARK in context.get("body", ""):
        for script in SCRIPTS:
            app.add_js_file(script, defer="defer")


def setup(app):
    app.connect("source-read", read_source)
    app.connect("html-page-context", add_scripts)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

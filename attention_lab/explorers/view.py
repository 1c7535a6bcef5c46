"""The fast view of an explorer in JupyterLab: the hosted book's page explorer, drawn in the browser.

In JupyterLab (ipywidgets 8) an explorer shows a :class:`PageView` in place of its core widgets: an
anywidget whose ES module is the book's own engine (``book/_static/engine/attention.js``) and page
explorer (``engine/explorers.js``), loaded as they are and started from the explorer's page config
(:meth:`~attention_lab.explorers.base.Explorer.page_config`). A press repaints in the browser with no
kernel round trip; the view then sends its values to the kernel (the ``values`` trait), which sets the
explorer's controls and computes ``ex.matrix``, ``ex.result`` and the caption as before. Values set on a
control from code travel the other way and repaint the view.

Where it is not used (:func:`use_page_view` says why): on Colab (anywidget turns on Colab's custom widget
manager), on ipywidgets 7, when executing a chapter for the book (``ATTENTION_LAB_STATIC=1``: the page path
replaces the output), when anywidget or the engine's files are missing, or when ``ATTENTION_LAB_VIEW=core``
asks for the core widgets (``python -m course bench-keypress --lab-view core`` times that path), and
outside a kernel unless ``ATTENTION_LAB_VIEW=page`` asks for it (tests/test_explorers.py does).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import ipywidgets as widgets

ENGINE = Path(__file__).resolve().parents[2] / "book" / "_static" / "engine"
SCRIPTS = ("attention.js", "explorers.js")
CSS = ENGINE.parent / "course.css"
CSS_FROM = "/* ---- explorers computed in the page"  # course.css's page-explorer rules start here
COLOUR_MAPS = Path(__file__).resolve().parents[1] / "data" / "colour_maps.json"
VIEW_ENV = "ATTENTION_LAB_VIEW"  # "core": the core widgets even where the page view could run

# the view's glue: mounts one page explorer per view and keeps its values and the kernel's in step;
# it calls save_changes() only after a press the reader made (a kernel is there: the view is live)
GLUE = """
function same(a, b) { return JSON.stringify(a) === JSON.stringify(b); }

function render({ model, el }) {
  const config = model.get("config");
  const root = document.createElement("div");
  root.className = "attention-explorer";
  root.dataset.explorer = config.explorer;
  const script = document.createElement("script");
  script.type = "application/json";
  script.className = "explorer-config";
  script.textContent = JSON.stringify(config);
  root.append(script);
  el.append(root);
  // keys pressed in the view are the view's: JupyterLab's shortcuts (arrows move between cells in
  // command mode) would take them from its sliders and text boxes
  el.dataset.lmSuppressShortcuts = "true";
  el.addEventListener("keydown", (ev) => ev.stopPropagation());
  window.AttentionExplorers.mount(root);
  const api = root.attentionExplorer;
  // a press painted: tell the kernel, which computes ex.matrix for the same values
  root.addEventListener("explorer:painted", () => {
    const values = api.values();
    if (!same(values, model.get("values"))) {
      model.set("values", values);
      model.save_changes();
    }
  });
  // values set from the kernel (a control set from code): draw them
  const follow = () => {
    const values = model.get("values"), shown = api.values();
    Object.keys(values).forEach((name) => {
      if (!same(values[name], shown[name])) api.set(name, values[name]);
    });
  };
  model.on("change:values", follow);
  return () => model.off("change:values", follow);
}

export default { render };
"""


def in_kernel() -> bool:
    """True inside an IPython kernel (as attention_lab.explorers.base.in_kernel)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None


def why_not_page_view(static: bool) -> str:
    """"" when this kernel can show the page view; else why it shows the core widgets."""
    asked = os.environ.get(VIEW_ENV, "")
    if asked not in ("", "core", "page"):
        raise ValueError(f"{VIEW_ENV}={asked!r}: set it to 'core' (the core widgets) or 'page' (the page view "
                         "outside a kernel too), or unset it")
    if asked == "core":
        return f"{VIEW_ENV}=core"
    if asked != "page" and not in_kernel():
        return "not in a kernel (a script or a test draws with the core widgets)"
    if static:
        return "executing for the book (its page replaces the output)"
    if not hasattr(widgets, "Stack"):
        return f"ipywidgets {widgets.__version__} (the page view needs 8)"
    if "google.colab" in sys.modules:
        return "Colab (anywidget would turn on its custom widget manager)"
    if not all((ENGINE / s).is_file() for s in SCRIPTS) or not CSS.is_file():
        return f"the engine's files are not in {ENGINE}"
    try:
        import anywidget  # noqa: F401
    except ImportError:
        return "anywidget is not installed (pip install -r requirements.txt)"
    return ""


def use_page_view(static: bool) -> bool:
    """True where an explorer shows a :class:`PageView` (see :func:`why_not_page_view`)."""
    return not why_not_page_view(static)


def _module() -> str:
    # attention.js defines window.AttentionEngine, explorers.js window.AttentionExplorers; both unchanged
    return "\n".join((ENGINE / s).read_text(encoding="utf-8") for s in SCRIPTS) + GLUE


def _stylesheet() -> str:
    text = CSS.read_text(encoding="utf-8")
    return text[text.index(CSS_FROM):] if CSS_FROM in text else text


def page_view(config: dict):
    """A :class:`PageView` of ``config`` (an explorer's page config) with the colour maps added."""
    import anywidget
    import traitlets

    global PageView
    if PageView is None:
        class _PageView(anywidget.AnyWidget):
            """The book's page explorer as a widget: ``config`` starts it, ``values`` follows the reader."""

            _esm = _module()
            _css = _stylesheet()
            config = traitlets.Dict().tag(sync=True)
            values = traitlets.Dict().tag(sync=True)

        PageView = _PageView
    colours = json.loads(COLOUR_MAPS.read_text(encoding="utf-8"))
    return PageView(config={**config, "colours": colours}, values=config["values"])


PageView = None  # the anywidget class, made on first use (anywidget is imported only where it is used)

"""Launch buttons that open the launch notebooks, and a table of every chapter's launch links.

The addresses are ``launch_links`` of course/chapters.py, as in the README's table. Its entry in
_config.yml (``course.launch_buttons: .``) also puts the repository's root on the build's path, so the
extensions in book/_ext can import ``course``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from course.chapters import launch_links
from course.layout import LAUNCH, ROOT, chapters

logger = logging.getLogger(__name__)


def point_launch_buttons(app, pagename, templatename, context, doctree):
    """``html-page-context`` handler, after the theme's (priority 501): Binder and Colab open notebooks/."""
    source = ROOT / f"{pagename}.ipynb"
    if not pagename.startswith("lessons/") or not source.is_file():
        return
    links = launch_links(source)
    groups = [b for b in context.get("header_buttons", []) if b.get("label") == "launch-buttons"]
    found = set()
    for group in groups:
        for button in group.get("buttons", []):
            kind = button.get("text", "").lower()
            if kind in ("binder", "colab"):
                button["url"] = links[kind]
                found.add(kind)
    missing = {"binder", "colab"} - found
    if missing:
        logger.warning(f"{pagename}: the theme made no {' or '.join(sorted(missing))} launch button to point at "
                       f"notebooks/{source.name}; check `launch_buttons` in _config.yml", location=pagename)


def serve_launch_notebooks(app, exception) -> None:
    """``build-finished``: each chapter's copied source, which the download button serves, becomes its
    launch notebook."""
    if exception is not None or app.builder.format != "html" or not app.config.html_copy_source:
        return
    for path in chapters():
        copied = Path(app.outdir) / "_sources" / "lessons" / path.name
        launch = LAUNCH / path.name
        if not copied.is_file():
            continue
        if not launch.is_file():
            logger.warning(f"notebooks/{path.name} is missing: the download button of lessons/{path.stem} would "
                           "serve the MyST chapter; run `make launch` and commit notebooks/")
            continue
        shutil.copyfile(launch, copied)


class LaunchLinks(SphinxDirective):
    """``{launch-links}``: a table of every chapter with its Binder and Colab links."""

    has_content = False

    def run(self):
        rows = ["| chapter | Binder (JupyterLab) | Colab |", "|---|---|---|"]
        for path in chapters():
            links = launch_links(path)
            rows.append(f"| {{doc}}`/lessons/{path.stem}` | [open in Binder]({links['binder']}) "
                        f"| [open in Colab]({links['colab']}) |")
        node = nodes.container(classes=["launch-links"])
        self.state.nested_parse(StringList(rows, source=self.get_source_info()[0]), self.content_offset, node)
        return [node]


def setup(app):
    app.connect("html-page-context", point_launch_buttons, priority=502)
    app.connect("build-finished", serve_launch_notebooks)
    app.add_directive("launch-links", LaunchLinks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

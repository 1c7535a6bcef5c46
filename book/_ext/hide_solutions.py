"""A build of the book without solutions: ``BOOK_SOLUTIONS=hidden`` (``make book-without-solutions``).

Also ``course_solutions: hidden`` in _config.yml's ``sphinx: config:``; CONTRIBUTING.md ("Graded editions
and the copy without solutions") says what it does. The mode is written to ``.solutions`` in the output
folder for the deploy workflow to check.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sphinx.errors import ConfigError
from sphinx.transforms import SphinxTransform
from sphinx.util import logging
from sphinx_exercise.nodes import solution_node

logger = logging.getLogger(__name__)

ENV_VAR = "BOOK_SOLUTIONS"
MODES = ("shown", "hidden")
MARKER = ".solutions"
PRIORITY = 11  # after sphinx-exercise's MergeGatedSolutions (10), which builds the nodes removed here


def mode(config) -> str:
    """The build's mode: the environment variable wins over ``course_solutions`` in the configuration."""
    value = os.environ.get(ENV_VAR) or config.course_solutions
    if value not in MODES:
        raise ConfigError(f"{ENV_VAR}={value!r}: use 'shown' (the default: solutions in their dropdowns) or "
                          f"'hidden' (a copy of the book without solutions)")
    return value


class RemoveSolutions(SphinxTransform):
    """In a solution-free build, remove every solution, gated or not, with everything inside it."""

    default_priority = PRIORITY

    def apply(self, **kwargs) -> None:
        if self.config.course_solutions != "hidden":
            return
        for node in list(self.document.findall(solution_node)):
            node.parent.remove(node)


def configure(app, config) -> None:
    """``config-inited``: settle the mode; a solution-free build copies no sources and offers no download."""
    config.course_solutions = mode(config)
    if config.course_solutions == "hidden":
        config.html_copy_source = False
        config.html_theme_options = {**(config.html_theme_options or {}), "use_download_button": False}
        logger.info("building the book without solutions (BOOK_SOLUTIONS=hidden)")


def start_clean_on_switch(outdir: Path, current: str) -> bool:
    """Empty ``outdir`` when its last build was made in the other mode; record ``current``. True if emptied."""
    marker = outdir / MARKER
    # a build made before this extension has no marker: it showed the solutions
    previous = marker.read_text().strip() if marker.is_file() else "shown"
    built_before = (outdir / "index.html").is_file()
    emptied = False
    if built_before and previous != current:
        for child in outdir.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        emptied = True
    outdir.mkdir(parents=True, exist_ok=True)
    marker.write_text(current + "\n")
    return emptied


def builder_inited(app) -> None:
    if app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    if start_clean_on_switch(outdir, app.config.course_solutions):
        logger.info(f"solutions {app.config.course_solutions} in this build, not in the last one: "
                    f"emptied {outdir} first, so no file of the other build stays")


def setup(app):
    app.setup_extension("sphinx_exercise")
    app.add_config_value("course_solutions", "shown", "env", [str])
    app.connect("config-inited", configure)
    app.connect("builder-inited", builder_inited)
    app.add_transform(RemoveSolutions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

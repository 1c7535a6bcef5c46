"""Each chapter page's launch buttons open that chapter's notebook on the configured repository and branch.

Read from the built HTML (no browser needed): the Binder and Colab links that Jupyter Book writes into
the rocket menu must name `lessons/<chapter>.ipynb` on the repository and branch in _config.yml, the one
place a fork changes.
"""

import re
from html import unescape

import pytest
from conftest import HTML, ROOT, _missing

import notebooks as nbtool

CHAPTERS = sorted(p.stem for p in (ROOT / "lessons").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("stem", CHAPTERS)
def test_chapter_launch_buttons_point_at_its_notebook(stem):
    page = HTML / "lessons" / f"{stem}.html"
    if not page.is_file():
        _missing(f"{page} is not built: run `make book` first")
    hrefs = {unescape(h) for h in re.findall(r'href="(https://[^"]+)"', page.read_text(encoding="utf-8"))}
    expected = nbtool.launch_links(ROOT / "lessons" / f"{stem}.ipynb")
    for kind in ("binder", "colab"):
        assert expected[kind] in hrefs, (
            f"{stem}: no {kind} launch link to {expected[kind]}; found "
            f"{sorted(h for h in hrefs if kind in h)}")
    url, branch = nbtool.repository()
    slug = url.removeprefix("https://github.com/")
    launch = [h for h in hrefs if "mybinder.org" in h or "colab.research.google.com" in h]
    assert len(launch) == 2, f"{stem}: expected one Binder and one Colab link, found {launch}"
    for h in launch:
        assert slug in h and branch in h and h.endswith(f"lessons/{stem}.ipynb")

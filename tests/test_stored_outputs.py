"""The stored chapters are exactly what `make outputs` writes today, byte for byte.

Strict nbval compares a chapter's text outputs; this test also covers what nbval skips: pictures,
widget state (the explorers' saved pictures and controls) and metadata. Each chapter is copied into a
temporary folder and executed there the way `make outputs` does it (`python -m course execute`), and
the file it writes must equal the committed one. So a maintainer's `make outputs` on an unchanged clone
leaves `git diff` empty, and a stored picture can never drift from the code that draws it.
"""

from __future__ import annotations

import json
import shutil

import nbformat
import pytest

from course import chapters as nbtool
from course import layout

CHAPTERS = layout.chapters()


def differences(stored: dict, fresh: dict) -> list[str]:
    """Where two executions of one chapter differ: cells by index and output kind, then widget state."""
    found = []
    for i, (a, b) in enumerate(zip(stored["cells"], fresh["cells"])):
        if a != b:
            first = ("".join(a.get("source", "")).splitlines() or [""])[0][:60]
            kinds = sorted({k for o in a.get("outputs", []) + b.get("outputs", []) for k in o.get("data", {})})
            found.append(f"cell {i} ({first!r}): outputs differ ({', '.join(kinds) or 'stream/error'})")
    if len(stored["cells"]) != len(fresh["cells"]):
        found.append(f"{len(stored['cells'])} cells stored, {len(fresh['cells'])} written")
    if stored["metadata"] != fresh["metadata"]:
        found.append("notebook metadata (widget state) differs")
    return found


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_make_outputs_rewrites_each_chapter_byte_for_byte(chapter, tmp_path):
    copy = tmp_path / chapter.name
    shutil.copy2(chapter, copy)
    nbtool.execute(copy)
    if copy.read_bytes() != chapter.read_bytes():
        found = differences(json.loads(chapter.read_text()), json.loads(copy.read_text()))
        pytest.fail(f"{chapter.name}: `make outputs` would change the stored chapter ({'; '.join(found)}). "
                    "Run `make outputs` and commit, or find what makes the output depend on the machine.")
    nbformat.validate(nbformat.read(copy, as_version=4))

"""tests/stored_outputs.py, the plugin that holds every chapter to the bytes `make outputs` writes, on a small
chapter of its own: its stored file passes; a picture or a page config changed by one byte fails, naming the
line; a cell excused from comparison keeps its stored output. And the page's numbers are the same bytes
whatever order a CPU sums in (attention_lab.explorers.base.snap)."""

from __future__ import annotations

import base64
import json

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from attention_lab.explorers import base
from course import chapters


@pytest.fixture
def chapter(pytester):
    lessons = pytester.mkdir("lessons")
    path = lessons / "09_test.ipynb"
    nbformat.write(new_notebook(cells=[
        new_markdown_cell("# 9. A test chapter"),
        new_code_cell("print(6 * 7)"),
        new_code_cell("import random\nprint(random.random())", metadata={"tags": ["nbval-ignore-output"]}),
        new_code_cell("from attention_lab import explorers\n\nexplorers.average_explorer(T=2, max_T=3)"),
    ]), path)
    chapters.execute(path)
    return path


def run(pytester, path):
    return pytester.runpytest("-p", "tests.stored_outputs", "--nbval", "-p", "no:cacheprovider", str(path))


def edited(path, change):
    nb = json.loads(path.read_text())
    change(nb["cells"][-1]["outputs"][0])
    path.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


@pytest.mark.slow
def test_the_stored_chapter_passes_and_a_changed_byte_fails(pytester, chapter):
    run(pytester, chapter).assert_outcomes(passed=5)  # four cells (the bootstrap cell too) and the bytes

    def one_pixel(out):  # the picture's last base64 character: a change nbval itself never sees
        png = out["data"]["image/png"]
        out["data"]["image/png"] = png[:-3] + ("A" if png[-3] != "A" else "B") + png[-2:]

    edited(chapter, one_pixel)
    result = run(pytester, chapter)
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["*09_test.ipynb: `make outputs` would change the stored chapter, from line*"])


@pytest.mark.slow
def test_a_changed_config_fails(pytester, chapter):
    def nudge(out):
        config = out["metadata"]["attention_lab_page"]
        config["values"]["T"] = 3  # another start: the same text and picture would not follow
    edited(chapter, nudge)
    run(pytester, chapter).assert_outcomes(passed=4, failed=1)


def test_snap_puts_the_pages_numbers_on_one_grid_whatever_the_last_bits():
    t = torch.tensor([1.0, -0.3, 1e-9, 3.0000000000000004, 127.25], dtype=torch.float64)
    noisy = t + torch.tensor([1e-16, -2e-16, 3e-17, 0.0, 1e-14], dtype=torch.float64)  # another CPU's sums
    assert torch.equal(base.snap(t), base.snap(noisy))
    assert torch.equal(base.snap(base.snap(t)), base.snap(t))  # snapped twice is snapped once
    assert base.snap(t).dtype == torch.float32 and (base.snap(t).double() - t).abs().max() < 2**-24
    packed = base.floats(noisy)
    assert base64.b64decode(packed["b64"]) == base.snap(t).numpy().tobytes()

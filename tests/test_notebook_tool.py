"""course/chapters.py: re-executing an unchanged notebook writes the same bytes, and no widget state."""

import json
import os

import nbformat
from course import chapters as nbtool
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

def widget_notebook():
    # an explorer as a chapter holds one: its text, its picture and its config (floats in base64)
    return new_notebook(cells=[
        new_markdown_cell("# 9. A test chapter"),
        new_code_cell("from attention_lab import explorers\n\nexplorers.average_explorer(T=2, max_T=3)"),
        new_code_cell("print(1 + 1)"),
    ])


@pytest.mark.slow
def test_executing_twice_writes_identical_bytes_and_no_widget_state(tmp_path):
    path = tmp_path / "09_test.ipynb"
    nbformat.write(widget_notebook(), path)
    before = dict(os.environ)
    nbtool.execute(path)
    assert dict(os.environ) == before, "executing a chapter changed the calling process's environment"
    first = path.read_bytes()
    nbtool.execute(path)
    assert path.read_bytes() == first, "re-executing an unchanged notebook changed its file"

    nb = json.loads(first)
    assert "widgets" not in nb["metadata"], "widget state was stored: the book draws explorers from their configs"
    (out,) = nb["cells"][2]["outputs"]  # after the bootstrap cell and the title
    assert set(out["data"]) == {"text/plain", "image/png"}, "the view's model id (new every run) was stored"
    assert "".join(out["data"]["text/plain"]) == "AverageExplorer(T=2)"
    assert out["metadata"]["attention_lab_page"]["explorer"] == "average", "the explorer's config was not stored"


@pytest.mark.slow
def test_an_excused_cell_keeps_its_stored_output_until_its_code_changes(tmp_path):
    # a timing, tagged nbval-ignore-output: a new run prints another number, which make outputs must not store
    path = tmp_path / "09_test.ipynb"
    timing = new_code_cell("import time\nprint(time.perf_counter_ns())", metadata={"tags": ["nbval-ignore-output"]})
    nbformat.write(new_notebook(cells=[timing, new_code_cell("print(time.perf_counter_ns())")]), path)
    nbtool.execute(path)

    def printed():
        nb = nbformat.read(path, as_version=4)
        return ["".join(o.get("text", "")) for c in nb.cells[1:] for o in c.outputs]

    first = printed()
    nbtool.execute(path)
    again = printed()
    assert again[0] == first[0] and again[1] != first[1], (first, again)
    nb = nbformat.read(path, as_version=4)
    nb.cells[1].source += "\nprint('changed')"
    nbformat.write(nb, path)
    nbtool.execute(path)
    assert printed()[0] != first[0], "an excused cell whose code changed kept its old output"

"""course/chapters.py: re-executing an unchanged notebook writes the same bytes, widget state included."""

import hashlib
import json
import os

import nbformat
from course import chapters as nbtool
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

def widget_notebook():
    # an explorer as a chapter holds one: its widgets' state and its page config (floats in base64)
    return new_notebook(cells=[
        new_markdown_cell("# 9. A test chapter"),
        new_code_cell("from attention_lab import explorers\n\nexplorers.average_explorer(T=2, max_T=3)"),
        new_code_cell("print(1 + 1)"),
    ])


@pytest.mark.slow
def test_executing_twice_writes_identical_bytes_with_derived_widget_ids(tmp_path):
    path = tmp_path / "09_test.ipynb"
    nbformat.write(widget_notebook(), path)
    before = dict(os.environ)
    nbtool.execute(path)
    assert dict(os.environ) == before, "executing a chapter changed the calling process's environment"
    first = path.read_bytes()
    nbtool.execute(path)
    assert path.read_bytes() == first, "re-executing an unchanged notebook changed its file"

    nb = json.loads(first)
    state = nb["metadata"]["widgets"][nbtool.WIDGET_STATE]["state"]
    assert len(state) > 10
    # the ids are the walk's, not the kernel's random uuid4s, and every reference still resolves
    derived = {hashlib.md5(f"09_test/{n}".encode()).hexdigest() for n in range(len(state))}
    assert set(state) == derived
    refs = set(nbtool.MODEL_REF.findall(json.dumps(state)))
    views = [o["data"][nbtool.WIDGET_VIEW]["model_id"] for c in nb["cells"] for o in c.get("outputs", [])
             if nbtool.WIDGET_VIEW in o.get("data", {})]
    assert views and set(views) | refs <= set(state), "a view or a reference names a model that is not stored"
    configs = [o["metadata"]["attention_lab_page"] for c in nb["cells"] for o in c.get("outputs", [])
               if "attention_lab_page" in o.get("metadata", {})]
    assert [c["explorer"] for c in configs] == ["average"], "the explorer's page config was not stored"


def test_renaming_follows_the_walk_not_the_random_ids():
    # two runs of the same widgets get different random ids; after normalizing they are identical
    def run(ids):
        a, b, link = ids
        nb = new_notebook(cells=[new_code_cell("w", id="cell-1", outputs=[nbformat.v4.new_output(
            "display_data", data={"text/plain": "w", nbtool.WIDGET_VIEW: {"model_id": a}})])])
        nb.metadata["widgets"] = {nbtool.WIDGET_STATE: {"state": {
            a: {"model_name": "VBoxModel", "state": {"children": [f"IPY_MODEL_{b}"]}},
            b: {"model_name": "IntSliderModel", "state": {"value": 3}},
            link: {"model_name": "LinkModel", "state": {"source": [f"IPY_MODEL_{b}", "value"]}},
        }, "version_major": 2, "version_minor": 0}}
        nbtool.stable_widget_ids(nb, "09_test")
        return nb

    one = run(["a" * 32, "b" * 32, "c" * 32])
    two = run(["f" * 32, "0" * 32, "1" * 32])
    assert json.dumps(one, sort_keys=True) == json.dumps(two, sort_keys=True)
    state = one.metadata["widgets"][nbtool.WIDGET_STATE]["state"]
    (view,) = [o.data[nbtool.WIDGET_VIEW]["model_id"] for o in one.cells[0].outputs]
    assert state[view]["model_name"] == "VBoxModel"

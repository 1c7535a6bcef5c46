"""The stored chapters are exactly what `make outputs` writes today, byte for byte but for the CPU's rounding.

Strict nbval compares a chapter's text outputs; this test also covers what nbval skips: pictures,
widget state (the explorers' saved pictures and controls) and metadata. Each chapter is copied into a
temporary folder and executed there the way `make outputs` does it (`python -m course execute`), and
the file it writes must equal the committed one, but for the last bits of the tensors an explorer's page
config holds, which depend on the CPU (``machine_rounding``). So a maintainer's `make outputs` on an
unchanged clone leaves `git diff` empty on a CPU like the one that stored them, and a stored picture can
never drift from the code that draws it.
"""

from __future__ import annotations

import base64
import json
import shutil

import nbformat
import numpy as np
import pytest

from course import chapters as nbtool
from course import layout

CHAPTERS = layout.chapters()


def machine_rounding(stored, fresh) -> bool:
    """True when two stored values are the same but for the float32 rounding of the CPU that computed them:
    the explorers' page configs hold the chapter's tensors bit for bit ({b64, shape}, float32), and matrix
    products are summed in another order on an AVX2 CPU than on an AVX-512 one (a few ulps apart). All else
    must be equal."""
    if isinstance(stored, dict) and isinstance(fresh, dict):
        if set(stored) == set(fresh) == {"b64", "shape"} and stored["shape"] == fresh["shape"]:
            a, b = (np.frombuffer(base64.b64decode(x["b64"]), dtype=np.float32) for x in (stored, fresh))
            return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-5, atol=1e-6))
        return stored.keys() == fresh.keys() and all(machine_rounding(stored[k], fresh[k]) for k in stored)
    if isinstance(stored, list) and isinstance(fresh, list):
        return len(stored) == len(fresh) and all(machine_rounding(a, b) for a, b in zip(stored, fresh))
    return stored == fresh


def differences(stored: dict, fresh: dict) -> list[str]:
    """Where two executions of one chapter differ: cells by index and output kind, then widget state."""
    found = []
    for i, (a, b) in enumerate(zip(stored["cells"], fresh["cells"])):
        if not machine_rounding(a, b):
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
    stored, fresh = chapter.read_text(), copy.read_text()
    found = []
    if stored != fresh:
        found = differences(json.loads(stored), json.loads(fresh))
        # byte for byte but for the page configs' tensors: any other line that differs fails
        old, new = stored.splitlines(), fresh.splitlines()
        if not found and (len(old) != len(new) or any(a != b and not a.lstrip().startswith('"b64": ')
                                                      for a, b in zip(old, new))):
            found = ["the file's text differs outside the page configs' tensors"]
    if found:
        pytest.fail(f"{chapter.name}: `make outputs` would change the stored chapter ({'; '.join(found)}). "
                    "Run `make outputs` and commit, or find what makes the output depend on the machine.")
    nbformat.validate(nbformat.read(copy, as_version=4))


def test_only_a_page_configs_float32_rounding_is_forgiven():
    def packed(values):
        return {"b64": base64.b64encode(np.array(values, dtype=np.float32).tobytes()).decode(), "shape": [len(values)]}

    x = [0.1, -2.5, 3.0]
    ulp = np.nextafter(np.float32(0.1), np.float32(1))
    cell = {"outputs": [{"metadata": {"attention_lab_page": {"q": packed(x)}}, "data": {"text/plain": "Explorer"}}]}
    same_but_rounding = json.loads(json.dumps(cell))
    same_but_rounding["outputs"][0]["metadata"]["attention_lab_page"]["q"] = packed([ulp, -2.5, 3.0])
    assert machine_rounding(cell, same_but_rounding)
    for change in ([0.1001, -2.5, 3.0], [0.1, -2.5]):  # a number that moved, a shape that changed
        other = json.loads(json.dumps(cell))
        other["outputs"][0]["metadata"]["attention_lab_page"]["q"] = packed(change)
        assert not machine_rounding(cell, other)
    other = json.loads(json.dumps(cell))
    other["outputs"][0]["data"]["text/plain"] = "Explorer!"
    assert not machine_rounding(cell, other)

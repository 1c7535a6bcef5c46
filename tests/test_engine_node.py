"""The page engine under Node's own test runner, `node --test tests/js/` (no browser), on cases from Python.

What Python writes once, the engine must say and compute the same: the shared templates (say() and
format.js), the controls' checks (Control.accept and controls.js, with the config's messages), and every
explorer's picture and caption at several settings, bad ones included (compute() and alt() against the
explorer modules of attention_lab/static/engine/explorers/). The same maths in Chromium and against torch:
tests/browser/test_engine.py and tests/browser/test_page_explorers.py.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess

import numpy as np
import pytest

from attention_lab import explorers
from attention_lab.explorers import controls, view
from attention_lab.explorers.base import BadInput
from course.layout import ROOT

ENGINE = ROOT / "attention_lab" / "static" / "engine"
SAY = [
    ("T={T}, d_k={d}", {"T": 8, "d": 16}),
    ("{x:.2f} {y:.2f} {z:.1f} {w:.1f}", {"x": 0.125, "y": 0.375, "z": -0.25, "w": -0.04}),
    ("{x:.2f} {y:.4g} {z:g} {w:g}", {"x": 2 / 3, "y": 1 / math.sqrt(7), "z": 8.0, "w": 0.0001}),
    ("{a:g} {b:g} {c:.4g}", {"a": 123456789.0, "b": 1e-05, "c": 0.125}),
    ("{n:character}; {m:character}; {k:row}", {"n": 1, "m": 0, "k": 32}),
    ("{s!r} {t!r} {u!r} {v!r}", {"s": "First Citizen:", "t": "it's", "u": "a\nb\t\\", "v": "\xa0\u200b\x7f😀"}),
    ("{missing}", {"missing": "'#', '@'"}),
    (controls.MESSAGES["text_too_long"], {"n": 33, "block_size": 32}),
    (controls.MESSAGES["T_above_text"], {"T": 9, "n": 1}),
]
RANGE = controls.d_k(128)
CONTROLS = [RANGE, controls.seed_box(), controls.text_box(""),
            controls.toggle("mask", "mask", [("no mask", False), ("causal mask", True)]),
            controls.Control("line", "select", "line", options=(("GREMIO:", "GREMIO:"), ("(your own text)", "")))]
RAWS = [0, 1, 128, 129, -3, "37", " 5 ", "", "  ", "x", "8.0", "1e1", True, False, None, 4.5, "9223372036854775807",
        "9223372036854775808", "GREMIO:", "héllo", 12]


def settings_of(ex, changes):
    out = []
    for change in changes:
        values = {**ex.values, **change}
        try:
            result = ex.compute(values)
        except BadInput as err:
            out.append({"values": values, "message": str(err)})
            continue
        def rows(m):
            return [[None if np.isneginf(v) else float(v) for v in row] for row in m]

        m = np.asarray(result["matrix"])
        matrix = [rows(one) for one in m] if m.ndim == 3 else rows(m)  # chapter 7: one matrix a head
        entry = {"values": values, "matrix": matrix, "caption": ex.alt(values, result)}
        if "probs" in result:
            entry["probs"] = [float(p) for p in result["probs"]]
        out.append(entry)
    return out


def explorer_cases():
    return [
        (explorers.average_explorer(), [{"T": t} for t in (1, 2, 5, 16)]),
        (explorers.scores_explorer(), [{"head_size": d, "T": t} for d, t in ((1, 8), (16, 8), (77, 3), (128, 1))]),
        (explorers.scaling_explorer(), [{"head_size": d, "scale": s} for d in (1, 4, 16, 128) for s in (True, False)]),
        (explorers.masking_explorer(), [{"T": t, "mask": m} for t in (1, 8, 32) for m in (True, False)]),
        (explorers.head_explorer(text="First Citizen:"),
         [{"head_size": 16}, {"head_size": 3, "seed": "7"}, {"T": 5}, {"text": "héllo"}, {"text": ""},
          {"text": "First", "T": 9}, {"text": "x" * 33}, {"text": "a😀b"}]),
        (explorers.trained_explorer(lines=["GREMIO:", "Welcome, good Cambio."]),
         [{"line": "GREMIO:", "trained": False}, {"line": "", "text": "ROMEO:", "trained": True},
          {"line": "", "text": "#", "trained": True}]),
        (explorers.heads_explorer(lines=["GREMIO:", "Welcome, good Cambio."]),
         [{"line": "GREMIO:", "removed": -1}, {"line": "Welcome, good Cambio.", "removed": 2},
          {"line": "", "text": "ROMEO:", "removed": 0}, {"line": "", "text": "a", "removed": 3},
          {"line": "", "text": "#", "removed": -1}]),
        (explorers.generate_explorer(prompts=["ROMEO:", "The "]),
         [{"line": "ROMEO:", "step": 0}, {"line": "The ", "step": 6}, {"line": "", "text": "O", "step": 24},
          {"line": "", "text": "#", "step": 1}, {"line": "", "text": "too long!", "step": 2}]),
    ]


def accept_cases():
    out = []
    for control in CONTROLS:
        for raw in RAWS:
            try:
                want = {"value": control.accept(raw)}
            except BadInput as err:
                want = {"message": str(err)}
            out.append([control.spec(), raw, want, controls.MESSAGES])
    return out


def test_the_engine_says_and_computes_what_python_does_under_node_test(tmp_path):
    if shutil.which("node") is None:
        from browsing import missing

        missing("node is not installed: the engine's tests under Node need Node.js")
    cases = {"say": [[t, f, controls.say(t, **f)] for t, f in SAY], "accept": accept_cases(),
             "explorers": [{"config": ex.config, "settings": settings_of(ex, changes)} for ex, changes in explorer_cases()]}
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(cases), encoding="utf-8")
    scripts = "\n".join(str(ENGINE / name) for name in view.SCRIPTS)
    done = subprocess.run(["node", "--test", str(ROOT / "tests" / "js")], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ENGINE_CASES": str(path), "ENGINE_SCRIPTS": scripts})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "# pass 3" in done.stdout and "# fail 0" in done.stdout, done.stdout[-2000:]

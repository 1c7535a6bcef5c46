"""The page engine's explorers (attention_lab/static/engine/) against the Python explorers, in Chromium.

Each explorer is built here in Python, its config put into a blank page as book/_ext/page_explorers.py
puts it into the book, and driven through its page controls. At 20
settings or more per explorer, most of them values no grid ever held, the page's picture must equal the
Python explorer's ``compute()`` within 1e-5 and its caption must be the Python ``alt()`` word for word.
A cell opened by click, by tap (a touch context) and by the keyboard shows the numbers torch gives for
that weight. Bad input gets the Python explorer's message and leaves the picture. The built book's
chapter pages hold one page explorer each, no widget state and no widget manager.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from browsing import ROOT, built_page, chapter_pages, missing

from attention_lab import explorers, text, training
from attention_lab.explorers import view
from attention_lab.reference import ReferenceHead

import page_explorers  # book/_ext, on the tests' pythonpath

ENGINE = ROOT / "attention_lab" / "static" / "engine"
TOL = 1e-5
LINES = ["GREMIO:", "Welcome, good Cambio.", "Good morrow, neighbour Baptista."]
PROMPTS = ["ROMEO:", "GREMIO:", "The "]


def chapter5_start():
    # modules made under another seed than the one they are shown at: the page must use their projections
    torch.manual_seed(7)
    head = ReferenceHead(384, 16, 8)
    return nn.Embedding(65, 384), nn.Embedding(8, 384), head


def build_all():
    shipped = training.load_trained()
    return {
        "average": explorers.average_explorer(T=8, max_T=24),
        "scores": explorers.scores_explorer(),
        "scaling": explorers.scaling_explorer(),
        "masking": explorers.masking_explorer(),
        "head": explorers.head_explorer(text="ged, as ", seed=1337, start=chapter5_start()),
        "head32": explorers.head_explorer(text="First Citizen:", block_size=32),
        "trained": explorers.trained_explorer(shipped.trained, shipped.untrained, lines=LINES),
        "heads": explorers.heads_explorer(training.load_multi(), lines=LINES),
        "generate": explorers.generate_explorer(training.load_multi(), prompts=PROMPTS),
    }


# settings per explorer: dicts of control values, applied in order through the page's set()
SETTINGS = {
    "average": [{"T": t} for t in (1, 2, 3, 5, 7, 8, 9, 11, 12, 13, 15, 16, 17, 19, 20, 21, 22, 23, 24, 6, 4)],
    "scores": [{"head_size": d, "T": t} for d, t in [(1, 8), (3, 8), (5, 2), (7, 7), (9, 8), (13, 4), (16, 8), (17, 1),
               (23, 6), (31, 8), (33, 3), (47, 8), (50, 5), (63, 8), (64, 7), (77, 8), (99, 2), (100, 8), (101, 6),
               (127, 8), (128, 8), (2, 3)]],
    "scaling": [{"head_size": d, "scale": s} for d in (1, 3, 5, 6, 11, 16, 19, 37, 64, 90, 113, 128) for s in (True, False)],
    "masking": [{"T": t, "mask": m} for t in (1, 2, 3, 5, 8, 9, 12, 17, 23, 28, 31, 32) for m in (True, False)],
    "head": [{"head_size": 16, "seed": "1337", "text": "ged, as ", "T": 8}, {"T": 5}, {"head_size": 3},
             {"head_size": 1}, {"head_size": 128}, {"seed": "0"}, {"seed": "42", "head_size": 16},
             {"seed": "1337"}, {"text": "Fir"}, {"text": "O, Romeo"}, {"text": "a\nb'c"}, {"head_size": 7},
             {"head_size": 99, "seed": "9223372036854775807"}, {"seed": "4294967296"}, {"text": "xyz!?"},
             {"head_size": 64, "seed": "2"}, {"T": 2}, {"text": "KING"}, {"head_size": 16, "seed": "1337", "T": 3},
             {"head_size": 31}, {"text": "  "}],
    "head32": [{"text": "First Citizen:\nBefore we proceed"}, {"head_size": 5}, {"head_size": 120, "seed": "3"},
               {"text": "hear me speak, all: speak, speak"}, {"T": 17}, {"seed": "65535"}, {"head_size": 2},
               {"text": "Q"}, {"head_size": 64}, {"text": "What's the matter, you dissenti"},
               {"text": "You are all resolved rather to d"}, {"seed": "0", "head_size": 16}, {"T": 9},
               {"head_size": 128}, {"text": "Speak, speak."}, {"head_size": 11}, {"seed": "123456789"},
               {"T": 1}, {"text": "Caius Marcius is chief enemy"}, {"head_size": 48}],
    "trained": [{"line": line, "trained": t} for line in LINES for t in (True, False)]
               + [{"text": s, "trained": t} for s in ("ROMEO:", "a", "Be gone, you rogue!", "What, ho!\nAway",
                                                         "thou art a villain; and I", "The king's a beggar, now",
                                                         "O", "  sweet  ") for t in (True, False)],
}


# chapter 7: every head's picture and the next-character probabilities, at 24 settings
HEADS_TEXTS = [("ROMEO:", -1), ("a", 2), ("Be gone, you rogue!", 1), ("What, ho!\nAway", -1),
               ("thou art a villain; and I", 3), ("The king's a beggar, now", 0), ("O", -1), ("  sweet  ", 2),
               ("KING RICHARD II:", 1), ("Where left we last?", -1), ("Yes; keep you warm.", 0),
               ("To be, or not", 3), ("God save you, gentlemen!", 2), ("zz", -1), ("GREMIO:", 1)]
HEADS_SETTINGS = ([{"line": line, "removed": r} for line in LINES for r in (-1, 0, 3)]
                  + [{"text": s, "removed": r} for s, r in HEADS_TEXTS])


# chapter 8: the text written greedily and every head's picture over it, at 24 settings
GENERATE_SETTINGS = ([{"line": p, "step": n} for p in PROMPTS for n in (0, 1, 5, 24)]
                     + [{"line": "", "text": t, "step": n} for t, n in
                        [("O", 0), ("O", 12), ("KING", 7), ("a b", 3), ("What?", 24), ("zz", 9), ("\n", 16),
                         ("Be gone", 2), ("ROMEO:", 20), ("thou", 24), ("I", 1), ("  ", 5)]])


@pytest.fixture(scope="module")
def built():
    return build_all()


@pytest.fixture(scope="module")
def page(request, built):
    # the browser fixture (conftest.py) fails in CI, or skips, without Chromium or Playwright
    context = request.getfixturevalue("browser").new_context(viewport={"width": 1280, "height": 900})
    p = load(context, built)
    yield p
    context.close()


def load(context, built):
    p = context.new_page()
    errors = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    body = "".join(f'<section id="{name}">{page_explorers.explorer_html(ex.config)}</section>'
                   for name, ex in built.items())
    p.set_content(f'<html lang="en"><head><meta name="viewport" content="width=device-width, initial-scale=1"><title>explorers</title></head><body><main>{body}</main></body></html>')
    p.add_style_tag(path=str(ROOT / "book" / "_static" / "course.css"))
    p.add_style_tag(content=view.css())
    p.add_script_tag(content=view.page_source())
    p.wait_for_function("document.querySelectorAll('.attention-explorer[data-paints]').length === 9")
    assert errors == []
    return p


def run(page, name, body, arg=None):
    return page.evaluate(f"(arg) => {{ const X = document.querySelector('#{name} .attention-explorer').attentionExplorer; "
                         f"{body} }}", arg)


def as_matrix(rows):
    return np.array([[-np.inf if v is None else v for v in row] for row in rows], dtype=float)


@pytest.mark.parametrize("name", list(SETTINGS))
def test_page_weights_and_alt_equal_python_at_every_setting(page, built, name):
    ex = built[name]
    values = dict(ex.config["values"])
    assert len(SETTINGS[name]) >= 20
    worst = 0.0
    for setting in SETTINGS[name]:
        for key, value in setting.items():
            said = run(page, name, "return X.set(arg[0], arg[1]);", [key, value])
            values[key] = value
            assert said == "", f"{name} {setting}: {said}"
        py = run(page, name, "return X.values();")
        result = ex.compute(py)
        got = as_matrix(run(page, name, "return X.weights();"))
        want = result["matrix"]
        assert got.shape == want.shape, (name, setting)
        assert np.array_equal(np.isneginf(got), np.isneginf(want))
        finite = np.isfinite(want)
        diff = float(np.abs(got[finite] - want[finite]).max())
        worst = max(worst, diff)
        assert diff <= TOL, f"{name} {setting}: largest difference {diff:.3g}"
        assert run(page, name, "return X.alt();") == ex.alt(py, result), (name, setting)
        shown = page.text_content(f"#{name} .explorer-caption")
        assert shown == "Showing: " + ex.alt(py, result)
    print(f"\n{name}: {len(SETTINGS[name])} settings, largest difference {worst:.2g}")


def test_the_four_heads_and_the_next_character_equal_python_and_torch_at_every_setting(page, built):
    ex = built["heads"]
    model = training.load_multi()
    assert len(HEADS_SETTINGS) >= 20
    worst = 0.0
    for setting in HEADS_SETTINGS:
        for key, value in setting.items():
            assert run(page, "heads", "return X.set(arg[0], arg[1]);", [key, value]) == "", setting
        py = run(page, "heads", "return X.values();")
        result = ex.compute(py)
        chars = py["line"] or py["text"]
        ids = torch.tensor([text.encode(chars)])
        keep = [0.0 if h == py["removed"] else 1.0 for h in range(4)]
        with torch.no_grad():
            truth_w = model.attn.weights(model.embed(ids))[0].numpy()
            truth_p = F.softmax(model(ids, keep=keep)[0, -1], dim=-1).numpy()
        for h in range(4):
            got = as_matrix(run(page, "heads", f"return X.weights({h});"))
            finite = np.isfinite(result["matrix"][h])
            assert np.array_equal(np.isneginf(got), np.isneginf(result["matrix"][h]))
            for want in (result["matrix"][h], truth_w[h]):
                diff = float(np.abs(got[finite] - want[finite]).max())
                worst = max(worst, diff)
                assert diff <= TOL, f"heads {setting} head {h}: {diff:.3g}"
        probs = np.array(run(page, "heads", "return X.part('probs');"))
        for want in (result["probs"], truth_p):
            diff = float(np.abs(probs - want).max())
            worst = max(worst, diff)
            assert diff <= TOL, f"heads {setting} probabilities: {diff:.3g}"
        assert run(page, "heads", "return X.alt();") == ex.alt(py, result), setting
        panel = page.inner_text("#heads .explorer-next-list")
        assert f"{result['top'][0][1]:.2f}" in panel, (setting, panel)
    print(f"\nheads: {len(HEADS_SETTINGS)} settings, 4 heads and 65 probabilities each, largest difference "
          f"{worst:.2g}")


def greedy_by_torch(model, prompt, steps):
    """The text chapter 8's explorer writes: the model's likeliest next character appended, steps times."""
    ids = torch.tensor([text.encode(prompt)])
    with torch.no_grad():
        for _ in range(steps):
            ids = torch.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
        return ids, model.attn.weights(model.embed(ids))[0].numpy(), F.softmax(model(ids)[0, -1], -1).numpy()


def test_generation_step_by_step_equals_python_and_torch_at_every_setting(page, built):
    ex = built["generate"]
    model = training.load_multi()
    assert len(GENERATE_SETTINGS) >= 20
    worst = 0.0
    for setting in GENERATE_SETTINGS:
        for key, value in setting.items():
            assert run(page, "generate", "return X.set(arg[0], arg[1]);", [key, value]) == "", setting
        py = run(page, "generate", "return X.values();")
        result = ex.compute(py)
        ids, truth_w, truth_p = greedy_by_torch(model, py["line"] or py["text"], py["step"])
        assert result["written"] == text.decode(ids[0]), setting
        assert run(page, "generate", "return X.part('written');") == result["written"], setting
        for h in range(4):
            got = as_matrix(run(page, "generate", f"return X.weights({h});"))
            assert got.shape == truth_w[h].shape, setting
            finite = np.isfinite(result["matrix"][h])
            assert np.array_equal(np.isneginf(got), np.isneginf(result["matrix"][h]))
            for want in (result["matrix"][h], truth_w[h]):
                diff = float(np.abs(got[finite] - want[finite]).max())
                worst = max(worst, diff)
                assert diff <= TOL, f"generate {setting} head {h}: {diff:.3g}"
        probs = np.array(run(page, "generate", "return X.part('probs');"))
        for want in (result["probs"], truth_p):
            diff = float(np.abs(probs - want).max())
            worst = max(worst, diff)
            assert diff <= TOL, f"generate {setting} probabilities: {diff:.3g}"
        assert run(page, "generate", "return X.alt();") == ex.alt(py, result), setting
    print(f"\ngenerate: {len(GENERATE_SETTINGS)} settings, 4 heads and 65 probabilities each, largest difference "
          f"{worst:.2g}")


def test_a_heads_weight_opens_in_the_trace_panel_with_torchs_score(page, built):
    run(page, "heads", f"return X.set('line', {LINES[1]!r});")
    run(page, "heads", "return X.set('removed', -1);")
    model = training.load_multi()
    ids = torch.tensor([text.encode(LINES[1])])
    with torch.no_grad():
        q, k, _ = model.attn.heads(model.embed(ids))  # (1, nh, T, hs) each
    for h, (i, j) in [(0, (3, 1)), (2, (5, 5)), (3, (20, 0))]:
        trace = run(page, "heads", "return X.open(arg[0], arg[1], arg[2]);", [i, j, h])
        assert trace is not None
        shown = page.inner_text("#heads .explorer-trace")
        assert "How this number was made" in shown
        w = as_matrix(run(page, "heads", f"return X.weights({h});"))[i, j]
        assert trace["weight"] == pytest.approx(w, abs=1e-7) and (trace["i"], trace["j"]) == (i, j)
        assert trace["dot"] == pytest.approx(float(q[0, h, i] @ k[0, h, j]), abs=1e-4)


def torch_trace(ex, values, i, j):
    """q_i·k_j, the score, w_ij (and out_i's share from v_j) as torch computes them for the page's values."""
    if isinstance(ex, explorers.TrainedExplorer):
        model = ex.models[bool(values["trained"])]
        ids = text.encode(values["line"] or values["text"])
        x = model.token_table(torch.tensor(ids)) + model.position_table(torch.arange(len(ids)))
        k, q, v = model.head.key(x), model.head.query(x), model.head.value(x)
    elif isinstance(ex, explorers.HeadExplorer):
        tok, pos, head = ex._modules[(values["head_size"], int(values["seed"]))]
        ids = text.encode(values["text"][: values["T"]])
        x = tok(torch.tensor(ids)) + pos(torch.arange(len(ids)))
        k, q, v = head.key(x), head.query(x), head.value(x)
    elif isinstance(ex, explorers.ScoresExplorer):
        d, T = values["head_size"], values["T"]
        q, k, v = ex.q_all[:T, :d], ex.k_all[:T, :d], None
    else:  # scaling, masking
        d = values.get("head_size", ex.q.shape[1])
        T = values.get("T", len(ex.q))
        q, k, v = ex.q[:T, :d], ex.k[:T, :d], None
    with torch.no_grad():
        dot = float(q[i] @ k[j])
        w = ex.compute(values)["matrix"]
        share = None
        if v is not None:
            sizes = v.norm(dim=-1).numpy()
            share = float(w[i, j] * sizes[j] / (w[i] * sizes).sum())
    return dot, float(w[i, j]), share


@pytest.mark.parametrize("name", list(SETTINGS))
@pytest.mark.parametrize("how", ["click", "keyboard"])
def test_a_cell_opens_by_click_and_keyboard_with_torchs_numbers(page, built, name, how):
    ex = built[name]
    sel = f"#{name} .attention-explorer"
    T = len(run(page, name, "return X.weights();"))
    i, j = min(2, T - 1), min(1, T - 1)
    if how == "click":
        page.click(f"{sel} td[data-i='{i}'][data-j='{j}']")
    else:  # focus the grid's one tab stop, then the arrow keys
        page.focus(f"{sel} td[tabindex='0']")
        i0, j0 = page.evaluate("[document.activeElement.dataset.i, document.activeElement.dataset.j].map(Number)")
        for _ in range(i0):
            page.keyboard.press("ArrowUp")
        for _ in range(j0):
            page.keyboard.press("ArrowLeft")
        for _ in range(i):
            page.keyboard.press("ArrowDown")
        for _ in range(j):
            page.keyboard.press("ArrowRight")
        assert page.evaluate("document.activeElement.dataset.i + ',' + document.activeElement.dataset.j") == f"{i},{j}"
    panel = page.inner_text(f"{sel} .explorer-trace")
    assert f"Row {i} = query {i}" in panel and f"column {j} = key {j}" in panel
    assert page.get_attribute(f"{sel} .explorer-trace", "aria-live") == "polite"
    trace = run(page, name, "return X.trace();")
    if name == "average":
        assert trace is None and (f"w = 1/{i + 1}" in panel)
        return
    dot, w, share = torch_trace(ex, run(page, name, "return X.values();"), i, j)
    assert (trace["i"], trace["j"]) == (i, j)
    assert abs(trace["dot"] - dot) <= 1e-4 * max(1, abs(dot))
    if name != "scores":
        assert abs(trace["weight"] - w) <= TOL and f"= {trace['weight']:.4f}." in panel
    if share is not None:
        assert abs(trace["share"] - share) <= 1e-4


@pytest.mark.parametrize("name", ["masking", "head", "trained", "heads"])
def test_a_cell_opens_by_tap_on_a_phone(request, built, name):
    context = request.getfixturevalue("browser").new_context(viewport={"width": 390, "height": 844}, has_touch=True,
                                                             is_mobile=True, device_scale_factor=2)
    try:
        p = load(context, built)
        sel = f"#{name} .attention-explorer"
        p.tap(f"{sel} td[data-i='1'][data-j='0']")
        trace = p.inner_text(f"{sel} .explorer-trace")
        # chapter 7's trace names the picture first: "head 0: row 1 = query 1 'R', ..."
        assert "Row 1 = query 1" in trace or (name == "heads" and "head 0: row 1 = query 1" in trace), trace
        moves = p.query_selector_all(f"{sel} .explorer-trace-moves button")
        assert all(b.bounding_box()["width"] >= 43.9 and b.bounding_box()["height"] >= 43.9 for b in moves)
        p.tap(f"{sel} .explorer-trace-moves button[aria-label='key to the right']")
        assert "column 1 = key 1" in p.inner_text(f"{sel} .explorer-trace")
        width = p.evaluate(f"document.querySelector('{sel}').scrollWidth")
        assert width <= 390, f"{name} is {width} px wide at 390 px"
    finally:
        context.close()


def test_typed_numbers_apply_on_enter_and_bad_ones_get_a_message(page):
    sel = "#scores .attention-explorer"
    run(page, "scores", "return X.set('head_size', 16);")
    number = f"{sel} .explorer-range:first-child input[type=number]"
    page.fill(number, "37")
    page.press(number, "Enter")
    assert run(page, "scores", "return X.values().head_size;") == 37
    assert page.get_attribute(f"{sel} input[type=range]", "aria-valuetext") == "37"
    page.fill(number, "200")
    page.press(number, "Enter")
    said = page.inner_text(f"{sel} .explorer-message")
    assert "d_k (head_size) must be a whole number from 1 to 128; got \"200\"" in said
    assert page.input_value(number) == "200" and run(page, "scores", "return X.values().head_size;") == 37
    page.fill(number, "64")
    page.press(number, "Enter")
    assert page.get_attribute(f"{sel} input[type=range]", "aria-valuetext") == "64"
    assert page.inner_text(f"{sel} .explorer-message") == ""


@pytest.mark.parametrize("name, control, value, said", [
    ("head", "seed", "-4", 'seed must be a whole number from 0 to 9223372036854775807; got "-4". Type a seed of 0 or more.'),
    ("head", "seed", "99999999999999999999", "Type a smaller seed."),
    ("trained", "trained", "yes", 'head must be one of true, false; got "yes".'),
    ("scores", "head_size", 0, "d_k (head_size) must be a whole number from 1 to 128; got \"0\"."),
    ("scores", "head_size", True, "d_k (head_size) must be a whole number from 1 to 128; got true."),
    ("head", "text", 12, 'text must be a string of characters; got "12".'),
    ("masking", "nope", 1, 'this explorer has no control "nope"; its controls are T, mask.'),
])
def test_set_checks_a_value_as_the_controls_do_and_keeps_the_last_one(page, name, control, value, said):
    before = run(page, name, "return X.values();")
    got = run(page, name, "return X.set(arg[0], arg[1]);", [control, value])
    assert got.startswith("⚠ ") and said in got
    assert run(page, name, "return X.values();") == before
    if control in before:  # the value it had is taken again, and the message goes
        assert run(page, name, "return X.set(arg[0], arg[1]);", [control, before[control]]) == ""


def test_set_takes_a_number_as_text_and_a_seed_as_text(page):
    assert run(page, "masking", "return X.set('T', ' 3 ');") == ""
    assert run(page, "masking", "return X.values().T;") == 3 and len(run(page, "masking", "return X.weights();")) == 3
    assert run(page, "head", "return typeof X.values().seed;") == "string"
    assert run(page, "head", "return X.set('seed', 42);") == "" and run(page, "head", "return X.values().seed;") == "42"
    run(page, "head", "return X.set('seed', '1337');")


def test_a_number_box_names_what_it_could_not_read(page):
    # the browser gives "" for "--5" in a number box: the message must not say "got nothing"
    number = "#scores .explorer-range:first-child input[type=number]"
    page.fill(number, "")
    page.type(number, "--5")
    page.press(number, "Enter")
    assert "got something that is not a number." in page.inner_text("#scores .explorer-message")
    page.fill(number, "")
    page.press(number, "Enter")
    assert "got nothing." in page.inner_text("#scores .explorer-message")
    page.fill(number, "16")
    page.press(number, "Enter")
    assert run(page, "scores", "return X.message();") == ""


def test_while_the_text_is_wrong_the_message_says_the_picture_is_the_last_that_worked(page):
    sel = "#head .attention-explorer"
    run(page, "head", "X.set('text', 'ged, as '); return X.set('head_size', 16);")
    said = run(page, "head", "X.set('text', 'héllo'); return X.set('head_size', 17);")
    assert said.startswith("⚠ the tiny-Shakespeare vocabulary has no 'é'")
    shown = page.inner_text(f"{sel} .explorer-message")
    assert "still the last setting that worked" in shown and "d_k=16" in page.inner_text(f"{sel} .explorer-caption")
    assert page.evaluate(f"getComputedStyle(document.querySelector('{sel} .explorer-heat')).opacity") == "0.7"
    assert run(page, "head", "return X.set('text', 'ged, as ');") == ""
    assert not page.is_visible(f"{sel} .explorer-message") and "d_k=17" in page.inner_text(f"{sel} .explorer-caption")
    assert page.evaluate(f"getComputedStyle(document.querySelector('{sel} .explorer-heat')).opacity") == "1"


def test_a_pasted_line_break_is_said_to_have_become_a_space(page):
    # a paste as the browser delivers one (the page's file:// has no clipboard to press Ctrl+V on): the
    # paste event with its data, then the text inserted, which a one-line box holds without line breaks
    box = "#trained .explorer-text input[type=text]"
    page.fill(box, "")
    page.evaluate("""box => {
        const el = document.querySelector(box), data = new DataTransfer();
        data.setData('text/plain', 'What, ho!\\nAway');
        el.focus();
        el.dispatchEvent(new ClipboardEvent('paste', {clipboardData: data, bubbles: true, cancelable: true}));
        document.execCommand('insertText', false, 'What, ho!\\nAway');
    }""", box)
    typed = page.input_value(box)
    assert "\n" not in typed and run(page, "trained", "return X.values().text;") == typed
    assert "the pasted line breaks became spaces" in page.inner_text("#trained .explorer-message")
    page.focus(box)
    page.keyboard.press("Backspace")  # the next picture clears the remark
    assert page.inner_text("#trained .explorer-message") == ""
    run(page, "trained", f"return X.set('line', {LINES[0]!r});")


def test_the_trace_buttons_keep_focus_stop_at_the_edges_and_a_cell_cut_off_comes_back(page):
    sel = "#masking .attention-explorer"
    run(page, "masking", "return X.set('T', 8);")
    page.click(f"{sel} td[data-i='0'][data-j='0']")
    up, down = f"{sel} button[aria-label='query above']", f"{sel} button[aria-label='query below']"
    assert page.get_attribute(up, "aria-disabled") == "true" and page.get_attribute(down, "aria-disabled") == "false"
    page.focus(down)
    for _ in range(7):
        page.keyboard.press("Enter")  # the same button keeps the focus: seven presses, seven rows down
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "query below"
    assert "Row 7 = query 7" in page.inner_text(f"{sel} .explorer-trace")
    assert page.get_attribute(down, "aria-disabled") == "true"
    page.keyboard.press("Enter")  # off the edge: nothing moves
    assert "Row 7 = query 7" in page.inner_text(f"{sel} .explorer-trace")
    run(page, "masking", "return X.set('T', 3);")
    assert "Row 7, column 0 is not in this picture, which has 3 rows" in page.inner_text(f"{sel} .explorer-trace")
    assert page.query_selector(f"{sel} td.is-open") is None and run(page, "masking", "return X.trace();") is None
    run(page, "masking", "return X.set('T', 8);")
    assert "Row 7 = query 7, column 0 = key 0" in page.inner_text(f"{sel} .explorer-trace")
    assert page.get_attribute(f"{sel} td.is-open", "data-i") == "7"


# the emoji cases: Python counts, names and sorts code points (JavaScript's strings are UTF-16 units); the
# last two: a no-break space, a zero-width space, DEL and an astral control are named by their escapes
@pytest.mark.parametrize("typed, T", [("hé", None), ("", None), ("x" * 9, None), ("First", 7), ("a😀b", None),
                                      ("😀" * 5, None), ("😀Ａ", None), ("a\xa0b\u200b", None), ("\x7f\U000e0001", None)])
def test_bad_text_gets_the_python_message_and_the_picture_stays(page, built, typed, T):
    ex = built["head"]
    run(page, "head", "X.set('text', 'ged, as '); return X.set('T', 8);")
    before = run(page, "head", "return X.weights();")
    said = run(page, "head", "const said = X.set('text', arg[0]); return arg[1] === null ? said : X.set('T', arg[1]);",
               [typed, T])
    values = {**ex.values, "text": typed, "T": T or ex.values["T"]}
    with pytest.raises(explorers.BadInput) as err:
        ex.compute(values)
    assert said == "⚠ " + str(err.value)
    if T is None:
        assert run(page, "head", "return X.weights();") == before


# above T = 8 the cells are transparent over a canvas of one pixel a cell (engine/explorers.js)
CANVAS_JS = """([name, T]) => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => {
  const root = document.querySelector('#' + name + ' .attention-explorer'), canvas = root.querySelector('canvas');
  const px = Array.from(canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data);
  const box = r => { const b = r.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  const first = root.querySelector('td[data-i="0"][data-j="0"]'), last = root.querySelector(`td[data-i="${T - 1}"][data-j="${T - 1}"]`);
  done({size: [canvas.width, canvas.height], px, canvas: box(canvas), first: box(first), last: box(last),
        transparent: getComputedStyle(first).backgroundColor});
})))"""


@pytest.mark.parametrize("name, setting", [("average", {"T": 16}), ("average", {"T": 24}), ("masking", {"T": 23, "mask": True}),
                                           ("masking", {"T": 31, "mask": False}), ("trained", {"text": "thou art a villain; and I"}),
                                           ("head32", {"text": "You are all resolved rather to d", "head_size": 16})])
def test_above_T_8_a_canvas_under_the_cells_holds_each_weights_colour(page, name, setting):
    from matplotlib import colormaps

    for key, value in setting.items():
        assert run(page, name, "return X.set(arg[0], arg[1]);", [key, value]) == ""
    w = as_matrix(run(page, name, "return X.weights();"))
    T = len(w)
    got = page.evaluate(CANVAS_JS, [name, T])
    assert got["size"] == [T, T], f"{name}: a canvas of {got['size']} pixels for T={T}"
    want = np.round(np.array(colormaps["viridis"](np.clip(w, 0, 1).astype(np.float32)))[..., :3] * 255)
    drawn = np.array(got["px"], dtype=float).reshape(T, T, 4)
    assert (drawn[..., 3] == 255).all()
    off = np.abs(drawn[..., :3] - want).max(axis=-1)
    assert off.max() <= 1, f"{name}: {int((off > 1).sum())} of {T * T} pixels are not their weight's colour"
    # it lies under the cells, from the first cell's corner to the last's (within a pixel)
    corners = got["first"][:2] + got["last"][2:]
    assert np.abs(np.array(got["canvas"]) - np.array(corners)).max() <= 1, (got["canvas"], corners)
    assert got["transparent"] in ("rgba(0, 0, 0, 0)", "transparent")


def test_each_paint_counts_and_is_announced(page):
    got = page.evaluate("""() => new Promise(done => {
        const root = document.querySelector('#masking .attention-explorer'), before = Number(root.dataset.paints);
        root.addEventListener('explorer:painted', () => done([before, Number(root.dataset.paints)]), {once: true});
        root.attentionExplorer.set('T', 5);
    })""")
    assert got[1] == got[0] + 1


def test_changes_in_quick_succession_each_paint_and_the_last_one_is_shown(page):
    # 64 d_k values and 40 texts set back to back: one paint each, and the picture left is the last
    # setting's (a paint that read a stale value, or one dropped, would show here); the time per change
    # is printed, not asserted (a timed test is flaky on a shared machine; python -m course bench-keypress
    # measures keypress to picture)
    loop = ("const root = document.querySelector('#{name} .attention-explorer'), before = Number(root.dataset.paints);"
            " const t0 = performance.now(); {body} const ms = (performance.now() - t0) / {n};"
            " return {{ms, paints: Number(root.dataset.paints) - before, values: X.values(), cells: X.weights().length}};")
    head = run(page, "head32", loop.format(name="head32", n=64, body="for (let d = 1; d <= 64; d++) X.set('head_size', d);"))
    trained = run(page, "trained", loop.format(
        name="trained", n=40, body="for (let n = 0; n < 40; n++) X.set('text', 'ab'.repeat(16).slice(0, 1 + n % 32));"))
    assert head["paints"] == 64 and head["values"]["head_size"] == 64, head
    assert trained["paints"] == 40 and trained["values"]["text"] == "ab" * 4, trained
    assert trained["cells"] == 8, trained
    print(f"\npaint: chapter 5 d_k change {head['ms']:.2f} ms, chapter 6 keypress {trained['ms']:.2f} ms")


# ---- the built book ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", chapter_pages())
def test_built_chapters_hold_a_page_explorer_and_no_widget_state(path):
    html = built_page(path).read_text()
    assert html.count('class="attention-explorer" data-explorer=') == 1
    assert "application/vnd.jupyter.widget-state+json" not in html and "embed.js" not in html
    assert "engine/explorers.js" in html and "engine/explorers.css" in html


def test_no_pre_drawn_picture_remains(built):
    for ex in built.values():
        # no picture drawn in advance: neither an image's data URL nor a PNG's or WebP's bytes in base64
        assert not re.search(r"data:image|iVBORw0KGgo|UklGR", json.dumps(ex.config))


def test_the_engine_files_stay_out_of_statics_top_level():
    # Jupyter Book adds every .js at _static's top level to every page
    top = {p.name for p in (ROOT / "_build" / "html" / "_static").glob("*.js")}
    assert not top & {"attention.js", "explorers.js"}
    built = ROOT / "_build" / "html" / "_static" / "engine"
    if not built.is_dir():
        missing("book not built: run `make book`")
    assert (built / "explorers.js").read_text() == view.page_source()
    assert (built / "explorers.css").read_text() == view.css()


def test_first_visits_weigh_under_the_limits(browser):
    # course/bench/pages.py's measure: empty cache, every request, gzipped
    from course.bench import pages as bench_pages

    html = ROOT / "_build" / "html"
    if not (html / "index.html").is_file():
        missing("book not built: run `make book`")
    limits = {"index.html": 500_000, **{path: 1_500_000 for path in chapter_pages()}}
    with bench_pages.serve(html) as url:
        weights = {path: bench_pages.Visit(browser, html, url, path, 1280).total for path in limits}
    print("\n" + "\n".join(f"{p}: {w / 1e6:.3f} MB" for p, w in weights.items()))
    assert {p: w for p, w in weights.items() if w > limits[p]} == {}


# the chapter around an explorer is skipped while off screen (content-visibility: auto in course.css)
_FAR_HEADING_JS = """() => {
  const ex = document.querySelector('.attention-explorer[data-explorer]');
  const below = Array.from(document.querySelectorAll('.bd-article section[id] > h2, .bd-article section[id] > h3'))
    .filter(h => ex.compareDocumentPosition(h) & Node.DOCUMENT_POSITION_FOLLOWING);
  const above = Array.from(document.querySelectorAll('.bd-article section[id] > h2'))
    .filter(h => ex.compareDocumentPosition(h) & Node.DOCUMENT_POSITION_PRECEDING);
  return {below: below.length ? below[below.length - 1].parentElement.id : null,
          above: above.length ? above[0].parentElement.id : null};
}"""


@pytest.mark.parametrize("path", chapter_pages())
def test_a_chapter_is_skipped_off_screen_and_its_anchors_and_words_still_land(browser, book_url, path):
    from browsing import open_page

    if path == "(book not built)":
        missing("book not built: run `make book`")
    context, v = open_page(browser, book_url + path)
    p = v.page
    try:
        marks = p.evaluate("""() => ({page: !!document.querySelector('.bd-article.explorer-page'),
            host: document.querySelectorAll('.explorer-host .attention-explorer[data-explorer]').length,
            skipped: getComputedStyle(document.querySelector('.bd-article section > p')).contentVisibility,
            contained: document.querySelector('.attention-explorer.is-contained') !== null})""")
        assert marks == {"page": True, "host": 1, "skipped": "auto", "contained": True}
        # presses lay out the explorer alone: the block under it, on screen, does not move
        far = p.evaluate(_FAR_HEADING_JS)
        root = p.locator(".attention-explorer[data-explorer]").first
        root.scroll_into_view_if_needed()
        p.wait_for_timeout(300)
        under = "() => { let n = document.querySelector('.explorer-host'); while (!n.nextElementSibling) n = n.parentElement;" \
                " return [n.nextElementSibling.getBoundingClientRect().top, scrollY]; }"
        before = p.evaluate(under)
        control = root.locator("input[type=range], input[type=text]").first
        control.focus()
        for key in ("ArrowLeft", "ArrowLeft", "ArrowRight") if control.get_attribute("type") == "range" else ("End", "Backspace", "a"):
            p.keyboard.press(key)
        p.wait_for_timeout(300)
        assert p.evaluate(under) == before
        # anchors below the explorer (the last section too) and above it land at their heading, or, for
        # a section too near the end to reach the top, on screen with the page scrolled to (within 120 px
        # of) its end: a block below drawn after the jump may add its last few pixels of height
        for section in (far["below"], far["above"]):
            if section is None:
                continue
            p.goto(book_url + path + "#" + section, wait_until="load")
            p.wait_for_timeout(800)
            y, at_end = p.evaluate(f"() => [document.querySelector('#{section} > :is(h1, h2, h3)').getBoundingClientRect().top,"
                                   " scrollY + innerHeight >= document.documentElement.scrollHeight - 120]")
            assert 0 <= y <= 120 or (at_end and 0 <= y < 900), f"#{section}'s heading is at {y} px after the jump"
        # find-in-page reaches words in a block that has never been drawn
        p.goto(book_url + path, wait_until="load")
        p.wait_for_timeout(500)
        words = p.evaluate(f"() => document.querySelector('#{far['below']} p').textContent.trim().split(/\\s+/).slice(0, 4).join(' ')")
        assert p.evaluate("w => window.find(w)", words), f"find-in-page did not find {words!r}"
        assert p.evaluate("() => { const r = getSelection().getRangeAt(0).getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; }")
    finally:
        context.close()

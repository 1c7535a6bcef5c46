"""The chapters' questions (attention_lab/questions/): stored answers, kernel checks, launch notebooks.

- Every question cell of a chapter stores, in its output metadata, answers whose digest is the one its
  text shows; strict nbval compares that text when it re-executes the chapter, so the stored answers are
  what the code computes today. For chapters 1 to 5 the test also runs the chapter's own code up to each
  question and recomputes the answers from its tensors (chapter 6 needs its 300 training steps first:
  nbval and tests/test_stored_outputs.py cover it).
- Each question has two to four per chapter, distinct stored numbers, and a kernel check cell after it.
- ``check`` answers the right value, every stored mistake, a value matching none, and bad input, each
  with its own message; the launch notebooks print no stored answer above or in a question.
"""

from __future__ import annotations

import contextlib
import math
import io
import json
import re
from pathlib import Path

import matplotlib
import pytest
import torch

from attention_lab import questions
from attention_lab.explorers import PAGE_KEY

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p.stem for p in (ROOT / "lessons").glob("0*.ipynb"))


def load(stem, folder="lessons"):
    return json.loads((ROOT / folder / f"{stem}.ipynb").read_text())


def question_cells(nb):
    """(index, cell, stored config) of every cell whose output carries a question."""
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            config = out.get("metadata", {}).get(PAGE_KEY)
            if config and "question" in config:
                yield i, cell, config, "".join(out["data"]["text/plain"])


def all_questions():
    return [(stem, config) for stem in CHAPTERS for _, _, config, _ in question_cells(load(stem))]


@pytest.mark.parametrize("stem", CHAPTERS)
def test_each_chapter_asks_two_to_four_questions_each_followed_by_its_kernel_check(stem):
    nb = load(stem)
    found = list(question_cells(nb))
    assert 2 <= len(found) <= 4, f"{stem}: {len(found)} questions"
    for i, cell, config, shown in found:
        assert config["number"].startswith(f"{int(stem[:2])}.")
        assert not cell["metadata"].get("tags")  # shown in a kernel; the book hides its code itself
        after = nb["cells"][i + 1]
        assert "question-check" in after["metadata"].get("tags", [])
        assert "answer = None" in "".join(after["source"])
        assert f'questions.check("{config["question"]}", answer)' in "".join(after["source"])
        assert nb["cells"][i - 1]["cell_type"] == "markdown"


@pytest.mark.parametrize("stem", CHAPTERS)
def test_the_shown_digest_is_that_of_the_stored_answers(stem):
    for _, _, config, shown in question_cells(load(stem)):
        assert shown == repr(questions.Question(config))
        assert f"(check code {questions.digest(config)})" in shown
        changed = json.loads(json.dumps(config))
        changed["answers"][0]["say"] += "!"
        assert questions.digest(changed) != questions.digest(config)


def run_until_questions(stem):
    """Run the chapter's code cells in one namespace, as a kernel would, and return each question's config
    as ask() computes it when its cell is reached."""
    ns, got = {"__name__": "__main__"}, {}  # a kernel's namespace: classes defined here are __main__'s
    for cell in load(stem)["cells"]:
        if cell["cell_type"] != "code" or "bootstrap" in cell["metadata"].get("tags", []):
            continue
        source = "\n".join(line for line in "".join(cell["source"]).splitlines() if not line.startswith("%"))
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(source, f"{stem}", "exec"), ns)
        match = re.search(r'questions\.ask\("([\w-]+)"', source)
        if match:
            got[match.group(1)] = json.loads(json.dumps(questions._asked[match.group(1)]))
    return got


@pytest.mark.parametrize("stem", CHAPTERS[:5])
def test_the_stored_answers_are_what_the_chapters_code_computes(stem):
    computed = run_until_questions(stem)
    stored = {c["question"]: c for _, _, c, _ in question_cells(load(stem))}
    assert set(computed) == set(stored)
    for qid, config in stored.items():
        again = computed[qid]
        assert [a.get("say") for a in again["answers"]] == [a.get("say") for a in config["answers"]], qid
        for a, b in zip(again["answers"], config["answers"]):
            if "value" in a:
                assert a["value"] == pytest.approx(b["value"], rel=1e-5, abs=1e-9), qid
            else:
                assert (a.get("choice"), a.get("cells"), a["right"]) == (b.get("choice"), b.get("cells"), b["right"])


@pytest.mark.parametrize("stem, config", all_questions(), ids=lambda v: v if isinstance(v, str) else v["question"])
def test_check_names_every_stored_answer_and_says_when_none_matches(stem, config):
    questions._asked[config["question"]] = config
    qid = config["question"]
    rights = [a for a in config["answers"] if a["right"]]
    assert len(rights) == 1 and len(config["answers"]) >= 3
    for a in config["answers"]:
        given = (a["value"] if "value" in a else a["choice"].upper() if "choice" in a else
                 [tuple(c) for c in reversed(a["cells"])])
        verdict = questions.check(qid, given)
        assert (verdict.right, verdict.message) == (a["right"], a["say"])
        assert a["say"].startswith("✓ Right: " if a["right"] else "✗ ")
    if config["kind"] == "number":
        values = [a["value"] for a in config["answers"]]
        wide = {k: 2 * t for k, t in config["tolerance"].items()}
        for x in values:  # each stored number lies more than two tolerances from every other
            assert sum(questions.within(x, y, wide) for y in values) == 1, (qid, x)
        for example in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?(?:/\d+)?", config.get("hint", "")):
            n, _, d = example.partition("/")  # an example in the hint under the box is no stored answer
            x = float(n) / float(d) if d else float(n)
            assert not [y for y in values if questions.within(x, y, config["tolerance"])], (qid, example)
        none = max(abs(v) for v in values) * 3 + 7.5
        assert questions.check(qid, none).message == config["none"]
        tensor = questions.check(qid, torch.tensor(rights[0]["value"]))
        assert tensor.right is True
        assert "without quotes" in questions.check(qid, str(rights[0]["value"])).message
        assert "shape (2,)" in questions.check(qid, torch.ones(2)).message
        assert "one number" in questions.check(qid, [1.0]).message
        assert "finite" in questions.check(qid, float("nan")).message
        assert "one number" in questions.check(qid, True).message
    elif config["kind"] == "cells":
        n = config["size"]
        grid = torch.zeros(n, n, dtype=torch.bool)
        for i, j in rights[0]["cells"]:
            grid[i, j] = True
        assert questions.check(qid, grid).right is True  # a boolean grid works too
        assert [[0, 0]] not in [a["cells"] for a in config["answers"]]
        assert questions.check(qid, [(0, 0), (0, 0)]).message == config["none"]  # a cell marked twice is one
        assert "shape (2, 2)" in questions.check(qid, torch.ones(2, 2)).message
        assert f"from 0 to {n - 1}" in questions.check(qid, [(0, n)]).message
        assert "is not a cell" in questions.check(qid, [(0, 1, 2)]).message
        assert "(row, column) pairs" in questions.check(qid, 3).message
        assert "no cell" in questions.check(qid, []).message
    else:
        keys = [o["key"] for o in config["options"]]
        assert sorted(a["choice"] for a in config["answers"]) == keys
        assert "is not one of the choices" in questions.check(qid, "z").message
        assert "letter of your choice" in questions.check(qid, 1).message
        shown = repr(questions.Question(config)).splitlines()  # a kernel shows the options, lettered
        listed = questions.check(qid, None).message.splitlines()
        for o in config["options"]:
            assert f"  ({o['key']}) {o['label']}" in shown and f"  ({o['key']}) {o['label']}" in listed
        assert len(shown) == 1 + len(config["options"])  # the digest line and the options, nothing said of which is right
    said = questions.check(qid, None)
    assert said.right is None and "put your prediction in `answer`" in said.message


def test_a_question_not_asked_in_this_kernel_says_to_run_its_cell():
    questions._asked.pop("ch1-column", None)
    said = questions.check("ch1-column", 0.2)
    assert said.right is None and "run the question's cell above" in said.message
    assert "the questions are" in questions.check("ch9-nothing", 1).message
    with pytest.raises(KeyError, match="no question 'ch9-nothing'"):
        questions.ask("ch9-nothing")


def test_two_mistakes_with_one_number_share_a_message_and_one_giving_the_right_number_is_refused():
    c = questions.number_question("t", "0.1", "x", 1.0, "why", [(2.0, "first."), (2.0, "second."), (5, "third.")],
                                  {"rel": 0.01})
    assert [a["say"] for a in c["answers"]] == ["✓ Right: why", "✗ first. Or: second.", "✗ third."]
    with pytest.raises(ValueError, match="gives the right answer"):
        questions.number_question("t", "0.1", "x", 1.0, "why", [(1.001, "same.")], {"rel": 0.01})


def test_asking_draws_nothing_from_the_chapters_random_stream():
    from attention_lab.reference import ReferenceHead
    torch.manual_seed(0)
    head = ReferenceHead(32, 4, 8)
    before = torch.get_rng_state()
    questions.ask("ch3-variance", d_k=8, C=32)
    questions.ask("ch5-longer", head=head, C=32)
    assert torch.equal(before, torch.get_rng_state())


@pytest.mark.parametrize("stem", CHAPTERS)
def test_no_output_above_or_in_a_question_prints_its_answer(stem):
    """Run All in a launch notebook shows the chapter's outputs up to the question (the same code) and the
    question's one line: the right number, at the precisions the chapters print, appears in none of them."""
    nb = load(stem)
    launch = json.dumps(load(stem, "notebooks"))
    for i, cell, config, shown in question_cells(nb):
        assert f'questions.ask(\\"{config["question"]}\\"' in launch  # the launch notebook asks it too
        assert f'questions.check(\\"{config["question"]}\\", answer)' in launch
        if config["kind"] != "number":
            continue
        right = next(a["value"] for a in config["answers"] if a["right"])
        if right == 1:  # 3.1's exact 1: every row sum printed above reads 1.0000, and none says a variance
            continue
        # at three significant digits or more: a 0.0003 printed above is another number that rounds alike
        printed = {f"{right:.3g}", f"{right:.4g}", questions.fmt(right)}
        printed |= {f"{right:.{n}f}" for n in (3, 4)} if abs(right) >= 0.1 else set()
        printed = {p for p in printed if len(p.strip("-").replace(".", "").lstrip("0")) >= 3}  # "12" of 11.997: too short
        above = "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                        for c in nb["cells"][: i + 1] for o in c.get("outputs", []))
        assert not [p for p in printed if p in above], (config["question"], printed)
        assert not re.search(r"\d\.\d", shown.split("(check code")[0].split(":", 1)[1])


def test_the_instructors_page_lists_every_question_with_its_number():
    page = (ROOT / "book" / "instructors.md").read_text()
    table = page.split("## Questions answered in the page", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "`ch" in line]
    listed = {re.search(r"`(ch\d-[\w-]+)`", row).group(1): row for row in rows}
    asked = {config["question"]: config for _, config in all_questions()}
    assert set(listed) == set(asked)
    for qid, config in asked.items():
        assert f"| {config['number']} `{qid}` |" in listed[qid]
        assert listed[qid].startswith(f"| {config['number'].split('.')[0]} |")


def test_the_column_sum_of_one_gets_its_own_message():
    """1 is the natural slip for w[:, 0].sum() (columns summing to one like rows): it is told so, alone."""
    config = next(c for _, c in all_questions() if c["question"] == "ch1-column")
    questions._asked["ch1-column"] = config
    said = questions.check("ch1-column", 1)
    assert said.right is False and said.message.startswith("✗ columns need not sum to one as rows do")
    assert " Or: " not in said.message


@pytest.mark.parametrize("peak, letter", [(1, "b"), (0, "a"), (None, "c"), (-1, "d")])
def test_ch6_residual_takes_its_right_letter_from_the_weights_it_is_given(peak, letter):
    """Question 6.4 reads the residual head's last query from its tensors: wherever that row peaks (one back,
    on itself, nowhere, on the first key) becomes the right letter, and every message quotes the row."""
    T = 32
    last = torch.full((T,), 0.2 / (T - 1))  # (T,): weight d characters back
    if peak is None:
        last = torch.full((T,), 1 / T)
    else:
        last[peak] = 0.8
    residual = torch.zeros(3, T, T)
    residual[:, -1] = last.flip(-1)  # entry j of the last row is T - 1 - j back
    trained = torch.zeros(3, T, T)
    trained[:, -1, -1] = 1.0  # HeadLM's head, all on the current character
    config = questions.ask("ch6-residual", residual=residual, trained=trained).config
    right = next(a for a in config["answers"] if a["right"])
    assert right["choice"] == letter
    assert f"{last[1]:.3f} of its weight to the character before and {last[0]:.3f} to its own" in right["say"]
    assert "free to fetch the one before" in right["say"] if letter == "b" else "fetch" not in right["say"]
    wrong = {a["choice"]: a["say"] for a in config["answers"] if not a["right"]}
    assert sorted(wrong) == sorted(set("abcd") - {letter})
    if letter != "c":  # each wrong option names where the weight went
        assert all(f"{last[peak]:.3f}" in say for say in wrong.values()), wrong
    assert "a" not in wrong or "1.000 on the current character" in wrong["a"]  # HeadLM's habit, from its tensor


# ---- issue 35: the reworked questions tell concepts apart; each named mistake gets its own message ----

def stored_config(qid):
    return next(c for _, c in all_questions() if c["question"] == qid)


def verdict_for(qid, answer):
    questions._asked[qid] = stored_config(qid)
    return questions.check(qid, answer)


REWORKED = [
    # (question, the answer a learner gives, right?, words its message must hold)
    ("ch1-reach", "b", True, "every s ≥ 3"),
    ("ch1-reach", "a", False, "every later position"),
    ("ch1-reach", "c", False, "row 3 of w"),
    ("ch1-reach", "d", False, "one per sequence"),
    ("ch1-reach", "e", False, "causal"),
    ("ch3-gradient", 0.105, True, "p(1 − p) with p = 0.8808"),
    ("ch3-gradient", 0.1192, False, "that is 1 − p"),  # the second weight: the same number at [8, 0]
    ("ch3-gradient", 0.0003352, False, "the gradient at [8, 0]"),  # and p(1 − p) of the saturated row
    ("ch3-gradient", -0.105, False, "second logit"),
    ("ch3-gradient", 0.0003, False, "the gradient at [8, 0]"),  # the saturated row's gradient as printed
    ("ch3-gradient", 3.4e-4, False, "the gradient at [8, 0]"),
    ("ch4-row-one", 0.352, False, "scaled twice"),  # dividing the printed, scaled scores by √d_k again
    ("ch4-row-one", 1 / 3, False, "plain average"),
    ("ch4-row-one", 0.406, True, "finite scores"),
    ("ch4-all-masked", "a", False, "F.scaled_dot_product_attention gives: it returns zeros"),
    ("ch4-all-masked", "c", True, "−inf − (−inf) is nan"),
]


@pytest.mark.parametrize("qid, answer, right, words", REWORKED, ids=[f"{q}:{a}" for q, a, _, _ in REWORKED])
def test_a_reworked_question_names_the_mistake_behind_each_answer(qid, answer, right, words):
    said = verdict_for(qid, answer)
    assert said.right is right and words in said.message, said.message
    assert " Or: " not in said.message  # each of these mistakes has a number or a letter of its own


def test_question_3_2_asks_at_logits_where_the_gradient_and_the_other_weight_differ():
    """At [8, 0] the gradient p(1 - p), the second weight and 1/e^8 all print as 0.0003; at the logits asked,
    the right answer lies more than two tolerances from each of them."""
    config = stored_config("ch3-gradient")
    right = next(a["value"] for a in config["answers"] if a["right"])
    p0 = 1 / (1 + math.exp(-2))
    assert right == pytest.approx(p0 * (1 - p0), rel=1e-5)
    wide = {k: 2 * t for k, t in config["tolerance"].items()}
    for slip in (1 - p0, math.exp(-2)):
        assert not questions.within(slip, right, wide), slip


def test_question_4_1_no_longer_names_a_mistake_the_printed_scores_rule_out():
    """The printed scores are already scaled: 'no scaling' cannot happen there, 'scaled again' can."""
    says = " ".join(a["say"] for a in stored_config("ch4-row-one")["answers"])
    assert "no 1/√d_k scaling" not in says and "scaled twice" in says


REWORKED_6 = [
    ("ch6-identity", "a", True, "no better than the bigram's"),
    ("ch6-identity", "b", False, "more layers are not more information"),
    ("ch6-identity", "c", False, "without the look back the gain is gone"),
    ("ch6-identity", "d", False, "the only way to see an earlier character"),
    ("ch6-residual", "a", False, "only road to lm_head"),
    ("ch6-residual", "b", True, "free to fetch the one before"),
]


@pytest.mark.parametrize("qid, answer, right, words", REWORKED_6, ids=[f"{q}:{a}" for q, a, _, _ in REWORKED_6])
def test_chapter_6s_reworked_questions_name_each_mistake(qid, answer, right, words):
    said = verdict_for(qid, answer)
    assert said.right is right and words in said.message, said.message


def test_the_identity_question_takes_its_answer_from_the_shipped_model():
    """Question 6.2 computes IdentityLM's validation loss from the weights it is given: the stored right
    letter is the one that loss makes right, and its message quotes the loss the chapter prints after it."""
    import nbformat as nbf
    nb = nbf.read(ROOT / "lessons" / "06_trained_head.ipynb", as_version=4)
    printed = next("".join(o.get("text", "")) for c in nb.cells if "class IdentityLM(HeadLM)" in c.source
                   for o in c.outputs)
    loss = float(printed.split("IdentityLM")[1].split()[0])
    config = stored_config("ch6-identity")
    right = next(a for a in config["answers"] if a["right"])
    assert right["choice"] == "a" and f"IdentityLM scores {loss:.3f}" in right["say"]


# ---- chapters 1 to 3, the second fresh read: the mistakes a reader is likely to make get their own words ----

EARLY = [
    # (question, the answer a learner gives, right?, words its message must hold, a message of its own?)
    ("ch2-learned", 18432, True, "3 × 6144 = 18432", True),
    ("ch2-learned", 12288, False, "two projections, 2 × 6144", False),  # also the entries of x, 4 × 8 × 384
    ("ch2-learned", 12288, False, "the number of entries of x, 4 × 8 × 384", False),
    ("ch2-symmetric", "b", True, "two different pairs of vectors", True),
    ("ch2-symmetric", "d", False, "this grid has no mask yet", True),
    ("ch3-variance", 1, True, "back to 1", True),
    ("ch3-variance", 0.99, True, "back to 1", True),  # the table's measurement counts as right
    ("ch3-variance", 8, False, "the variance divided by √d_k once", False),  # and √64, the raw std
    ("ch3-variance", 8, False, "standard deviation of the raw q·k", False),
    ("ch3-variance", 0.125, False, "as if q·k had variance 1", True),
    ("ch3-variance", 64, False, "no 1/√d_k scaling", True),
    # the third fresh read: one row's weight, the large-T estimate, and the shift invariance misapplied
    ("ch1-column", 0.125, False, "is one weight: row 7's weight at position 0", True),
    ("ch1-column", 1 / 8, False, "the sum of column 7, which only row 7 reaches", True),
    ("ch1-column", 2.66, False, "an estimate: ln 8 + γ ≈ 2.657", True),
    ("ch3-gradient", 0, False, "only the first logit moves", True),
]


@pytest.mark.parametrize("qid, answer, right, words, alone", EARLY, ids=[f"{q}:{a}:{w[:12]}" for q, a, _, w, _ in EARLY])
def test_chapters_1_to_3_name_the_likely_mistakes(qid, answer, right, words, alone):
    said = verdict_for(qid, answer)
    assert said.right is right and words in said.message, said.message
    assert (" Or: " not in said.message) is alone, said.message


def test_question_3_1_says_no_measured_number_the_chapter_does_not_print():
    """One source: the question's feedback gives the exact 1 and points to section 3.4's table, whose d_k = 64
    row (0.99) counts as right; no measurement of its own that could disagree with the table's."""
    config = stored_config("ch3-variance")
    right = next(a for a in config["answers"] if a["right"])
    assert right["value"] == 1 and "section 3.4" in right["say"] and not re.search(r"0\.9\d", right["say"])
    table = load("03_scaled_dot_product")
    cell = next(c for c in table["cells"] if "for d_k in [1, 4, 16, 64, 256]" in "".join(c["source"]))
    row = next(line for line in "".join(cell["outputs"][0]["text"]).splitlines() if line.split()[:1] == ["64"])
    assert questions.within(float(row.split()[-1]), right["value"], config["tolerance"]), row


@pytest.mark.parametrize("entry", [4.2, 4.16, 4.13, 4.21, 4])
def test_ch6_uniform_calls_a_rounded_loss_close_and_asks_for_two_decimals(entry):
    """ln 65 = 4.174: an entry within about 0.05 of it, or 4, is told to give two decimals, in the kernel."""
    questions.ask("ch6-uniform", vocab_size=65)
    verdict = questions.check("ch6-uniform", entry)
    assert verdict.right is False and "close: give two decimals" in str(verdict), str(verdict)
    assert questions.check("ch6-uniform", 4.17).right is True


def test_ch4_row_one_names_the_slips_reviewers_made():
    """Chapter 4's scores of row 2 are [0.26, 0.14, -0.29]: leaving key 2 out gives 0.53, the raw score 0.26,
    a rounded answer 0.4; no mask and a mask after the softmax give one number, told in one message."""
    config = next(c for _, _, c, _ in question_cells(load("04_masking_the_future")) if c["question"] == "ch4-row-one")
    questions._asked["ch4-row-one"] = config
    said = {entry: str(questions.check("ch4-row-one", entry)) for entry in (0.53, 0.26, 0.4, 0.145)}
    assert "leaves out key 2 itself" in said[0.53]
    assert "raw score of key 0" in said[0.26]
    assert "close, but give more decimals" in said[0.4]
    assert "no mask, or with the mask applied after the softmax" in said[0.145] and "Or:" not in said[0.145]


def test_ch5_longer_option_b_does_not_give_the_mechanism_away():
    config = next(c for _, _, c, _ in question_cells(load("05_one_head")) if c["question"] == "ch5-longer")
    b = next(o["label"] for o in config["options"] if o["key"] == "b")
    assert b == "It raises an error." and "still 8 × 8" in config["answers"][0]["say"]

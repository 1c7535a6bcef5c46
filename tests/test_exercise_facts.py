"""The claims of the newer exercises' solutions and of issue 21's last changes, read from the stored outputs
they are made beside (as tests/test_lesson_facts.py does for the lessons), and the order of every exercise:
its check before its solution, and no stored "passed" before the reader has answered."""

import re
from pathlib import Path

import nbformat
import pytest

LESSONS = Path(__file__).resolve().parents[1] / "lessons"
CHECK_CALL = re.compile(r"\bcheck_\w+\s*\(")


def chapter(stem):
    return nbformat.read(LESSONS / f"{stem}.ipynb", as_version=4)


def output_of(stem, snippet):
    """The text output of the one code cell (solutions included) whose source holds ``snippet``."""
    cells = [c for c in chapter(stem).cells if c.cell_type == "code" and snippet in c.source]
    assert len(cells) == 1, f"{stem}: {len(cells)} code cells contain {snippet!r}"
    return "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cells[0].outputs)


def test_chapter_2_separate_matrices_score_one_way_and_tied_ones_cannot():
    out = output_of("02_queries_keys_values", "one_way_grid = query_ab(ab_tokens)")
    assert "separate: [[0.0, 2.0], [0.0, 0.0]]" in out  # a -> b is 2, b -> a is 0
    assert "tied:     [[4.0, 0.0], [0.0, 0.0]]" in out  # only a against itself


def test_chapter_3_the_unit_variance_scale_is_about_three_quarters_and_sharpens_the_rows():
    out = output_of("03_scaled_dot_product", "s = unit_scale(q, k)")
    s, quarter = map(float, re.search(r"s = ([\d.]+), against 1/sqrt\(d_k\) = ([\d.]+)", out).groups())
    assert quarter == 0.25 and 0.7 < s < 0.85  # the prose: about 0.78, near the predicted 0.75
    var, fig4 = map(float, re.search(r"variance of the logits: ([\d.]+) \(Fig. 4: ([\d.]+)\)", out).groups())
    assert abs(var - 1) < 0.1 and fig4 < 0.15
    top, top4 = map(float, re.search(r"mean largest weight: ([\d.]+) \(Fig. 4: ([\d.]+)", out).groups())
    assert 1.7 < top / top4 < 2.3  # "about twice that of Fig. 4"


def test_chapter_6_the_exact_split_shows_the_distance_rule_in_pos_pos_and_the_character_rule_in_tok_tok():
    out = output_of("06_trained_head", "parts = score_parts(trained, windows)")
    assert "the four parts add up to the scores: True" in out
    rows = {line.split()[0]: [float(v) for v in line.split()[1:]] for line in out.splitlines()
            if len(line.split()) == 6 and line.split()[0] in ("tok·tok", "tok·pos", "pos·tok", "pos·pos")}
    assert sorted(rows) == ["pos·pos", "pos·tok", "tok·pos", "tok·tok"]
    pos_pos, tok_tok, pos_tok, tok_pos = rows["pos·pos"], rows["tok·tok"], rows["pos·tok"], rows["tok·pos"]
    assert max(range(5), key=lambda d: pos_pos[d]) == 1 and pos_pos[1] == 7.25 and pos_pos[0] == 6.56
    assert max(range(5), key=lambda d: tok_tok[d]) == 0 and tok_tok[0] == 2.23
    assert all(abs(v) <= 0.05 for v in pos_tok)  # flat
    assert all(1.2 <= v <= 1.6 for v in tok_pos)  # "lifts each of the five nearest keys by 1.2 to 1.6"
    same, other = map(float, re.search(r"own character ([-\d.]+),\s+with another ([-\d.]+)", out).groups())
    assert (same, other) == (2.65, -0.22)  # centred, as the row above


STEMS = sorted(p.stem for p in LESSONS.glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("stem", STEMS)
def test_every_check_comes_before_its_solution_and_shows_no_pass_before_the_reader_answered(stem):
    """In the book the check cell sits between the exercise and the folded solution, so its stored output
    must be what the reader's own untouched stub gives: the kind "not yet implemented" line, never a pass."""
    cells = chapter(stem).cells
    stubs = [i for i, c in enumerate(cells) if "exercise-stub" in c.metadata.get("tags", [])]
    for stub in stubs:
        check = stub + 1
        assert cells[check].cell_type == "code" and CHECK_CALL.search(cells[check].source), (stem, stub)
        assert "{solution-start}" in cells[check + 1].source, (stem, check)
        shown = "".join(o.get("text", "") for o in cells[check].outputs)
        assert "passed" not in shown and "✓" not in shown, (stem, shown)
        assert "✗ not yet implemented" in shown, (stem, shown)

"""Chapters 1 to 3, the second fresh read: each claim its chapter makes is an output, and the prose after it
quotes what it prints (beside tests/test_lesson_facts.py, whose helpers these mirror)."""

import re
from pathlib import Path

import nbformat
import torch
import torch.nn as nn

from attention_lab import checks
from attention_lab.checks import CheckFailed

LESSONS = Path(__file__).resolve().parents[1] / "lessons"


def cells(stem):
    return nbformat.read(LESSONS / f"{stem}.ipynb", as_version=4).cells


def code_index(stem, snippet):
    found = [i for i, c in enumerate(cells(stem)) if c.cell_type == "code" and snippet in c.source
             and "solution" not in c.metadata.get("tags", [])]
    assert len(found) == 1, (stem, snippet, found)
    return found[0]


def output_of(stem, snippet):
    cell = cells(stem)[code_index(stem, snippet)]
    return "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell.outputs)


def markdown_after(stem, snippet):
    return cells(stem)[code_index(stem, snippet) + 1].source


def test_chapter_1_shows_the_default_allclose_false_and_why():
    """The default check prints False only because its room, 1e-8 + 1e-5 |b|, is below the rounding near zero."""
    out = output_of("01_plain_causal_average", "room = 1e-8 + 1e-5 * xbow2.abs()")
    assert "default allclose(xbow, xbow2): False" in out
    assert "smallest room it allows:       1e-08" in out
    assert "refused entries all below 0.01 in size: True" in out
    gap = output_of("01_plain_causal_average", "allclose(xbow, xbow2, atol=1e-6)")
    assert "largest difference:               2e-07" in gap and "atol=1e-6): True" in gap
    before = cells("01_plain_causal_average")[code_index("01_plain_causal_average", "atol=1e-6)") + 1].source
    assert "2 \\times 10^{-7}" in before
    prose = markdown_after("01_plain_causal_average", "room = 1e-8 + 1e-5 * xbow2.abs()")
    assert "prints `False`" in prose and "0.01 of zero" in prose and "10^{-8}" in prose


def test_chapter_1_question_1_2_is_answered_by_an_output_after_it():
    nb = cells("01_plain_causal_average")
    asked = code_index("01_plain_causal_average", 'questions.ask("ch1-column"')
    shown = code_index("01_plain_causal_average", "print(f\"w[:, 0].sum() = ")
    assert shown == asked + 2 and "question-check" in nb[asked + 1].metadata.get("tags", [])
    out = output_of("01_plain_causal_average", "print(f\"w[:, 0].sum() = ")
    harmonic = sum(1 / (t + 1) for t in range(8))
    assert f"w[:, 0].sum() = {harmonic:.4f}" in out and "all columns together: 8.0000" in out
    assert "0.125]" in out
    prose = markdown_after("01_plain_causal_average", "print(f\"w[:, 0].sum() = ")
    assert f"`{harmonic:.4f}`" in prose and "`8.0000`" in prose and "`0.125`" in prose


def test_chapter_2_speaks_for_itself():
    text = " ".join(c.source for c in cells("02_queries_keys_values"))
    assert "the lesson's code" not in text and "exercise {ref}`ex-" not in text


def test_check_one_way_says_what_each_bias_does_and_it_is_so():
    """A key bias adds one number to a whole row of scores (the softmax would not see it); a query bias adds
    b_Q · k_j, which differs from key to key: the message says both, and both are measured here."""
    torch.manual_seed(0)
    x = torch.randn(6, 2)
    query, key = nn.Linear(2, 3), nn.Linear(2, 3)
    with torch.no_grad():
        plain = (x @ query.weight.T) @ (x @ key.weight.T).T  # (6, 6)
        key_bias = (x @ query.weight.T) @ key(x).T - plain  # what the key bias adds
        query_bias = query(x) @ (x @ key.weight.T).T - plain  # what the query bias adds
    spread = lambda s: (s.amax(-1) - s.amin(-1)).max().item()  # noqa: E731
    assert spread(key_bias) < 1e-5 and spread(query_bias) > 0.1
    assert torch.allclose((plain + key_bias).softmax(-1), plain.softmax(-1), atol=1e-6)
    assert not torch.allclose((plain + query_bias).softmax(-1), plain.softmax(-1), atol=1e-3)
    message = None
    try:
        checks.check_one_way(lambda: (nn.Linear(2, 2, bias=False), nn.Linear(2, 2)), strict=True)
    except CheckFailed as failed:
        message = str(failed)
    assert message and "a key bias adds one number to every score of a row" in message
    assert "a query bias adds b_Q · k_j, a term of each key's own" in message


def test_chapter_1_says_what_the_check_code_is_where_a_learner_first_meets_it():
    nb = cells("01_plain_causal_average")
    asked = code_index("01_plain_causal_average", 'questions.ask("ch1-reach"')
    assert "(check code " in output_of("01_plain_causal_average", 'questions.ask("ch1-reach"')
    before = " ".join(nb[asked - 1].source.split())
    said = re.findall(r"\(The check code [^)]*\)", before)  # one short sentence, not the machinery
    assert said == ["(The check code at the end of the question's line is for the course's tests; you can "
                    "ignore it.)"], before
    assert not [c for c in nb[:asked - 1] if "check code" in c.source]  # said once, where it first shows


# ---- the third fresh read: the numbers its fixes state, computed again ----

def signed(v):
    return f"{v:.1f}".replace("-", "−")


def test_chapter_2_the_scaled_range_changes_far_less_than_the_raw_one():
    """The explorer's ranges at d_k = 16 and 128 (our 16 rows, then 112 drawn from seed 1337, as the aside
    repeats them): the raw range the prose quotes, and the scaled one, about 1.3 times as wide."""
    torch.manual_seed(1337)
    x = torch.randn(4, 8, 384)
    key, query = nn.Linear(384, 16, bias=False), nn.Linear(384, 16, bias=False)
    g = torch.Generator().manual_seed(1337)

    def drawn(rows):
        return (torch.rand(rows, 384, generator=g) * 2 - 1) / 384 ** 0.5

    with torch.no_grad():
        s16 = (x[0] @ query.weight.T) @ (x[0] @ key.weight.T).T
        q128 = x[0] @ torch.cat([query.weight, drawn(112)]).T
        k128 = x[0] @ torch.cat([key.weight, drawn(112)]).T
        s128 = q128 @ k128.T
    bullet = " ".join(markdown_after("02_queries_keys_values", "torch.set_printoptions(precision=2)").split())
    scaled = []
    for s, d_k in ((s16, 16), (s128, 128)):
        lo, hi = s.min().item(), s.max().item()
        assert f"{signed(lo)} to {signed(hi)} at {d_k}" in bullet, (d_k, bullet)
        r = s / d_k ** 0.5
        assert f"{signed(r.min().item())} to {signed(r.max().item())} at {d_k}" in bullet, (d_k, bullet)
        scaled.append((r.max() - r.min()).item())
    assert f"about {scaled[1] / scaled[0]:.1f} times as wide" in bullet and "stays about the same" not in bullet


def test_chapter_3_the_random_row_gradient_peaks_at_about_s_2():
    """The random row of cell 33, drawn again from the chapter's generator after section 3.4's draws: its
    gradient matches the printed table, and on the figure's grid of s it peaks at s = 2, as the prose says."""
    g = torch.Generator().manual_seed(1337)
    for d_k in [1, 4, 16, 64, 256]:
        torch.randn(100_000, d_k, generator=g, dtype=torch.float64)
        torch.randn(100_000, d_k, generator=g, dtype=torch.float64)
    row = torch.randn(8, generator=g)
    gradient = {}
    for s in [i / 4 for i in range(49)]:
        p = torch.softmax(s * row, dim=-1).max()
        gradient[s] = (p * (1 - p)).item()
    table = output_of("03_scaled_dot_product", "8 random logits × s")
    for line in table.splitlines()[2:]:
        s, *_, printed = line.split()
        assert f"{gradient[float(s)]:.4f}" == printed, line
    assert max(gradient, key=gradient.get) == 2.0
    prose = " ".join(markdown_after("03_scaled_dot_product", "plots.saturation_curves(").split())
    assert "at about $s = 2$ for the random row" in prose and "a little later" not in prose

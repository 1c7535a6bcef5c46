"""Every fact DESIGN.md lists is visible in a stored output, next to the code that makes it.

Strict nbval proves the stored outputs are what the code prints today; this proves the outputs still say
the lesson's facts, so a later edit cannot quietly drop one (a cell rewritten, a print removed).
"""

from pathlib import Path

import nbformat
import pytest

LESSONS = Path(__file__).resolve().parents[1] / "lessons"

# (chapter, a piece of the code cell's source, what its output must contain)
FACTS = [
    ("01_plain_causal_average", "allclose(xbow, xbow2", "allclose(xbow, xbow2, atol=1e-6): True"),
    ("02_queries_keys_values", "key.weight.shape", "torch.Size([16, 384])"),
    ("02_queries_keys_values", "x @ key.weight.T", "True"),
    ("03_scaled_dot_product", "for d_k in [1, 4, 16, 64, 256]", "  256      255.8                   1.00"),
    ("03_scaled_dot_product", "F.softmax(torch.tensor([8.0, 0.0])", "softmax([8, 0]) = ['0.9997', '0.0003']"),
    ("03_scaled_dot_product", ".backward()", "logits [8.0, 0.0]: first output 0.9997, gradient ['0.0003', '-0.0003']"),
    ("04_masking_the_future", "print(weights[0, 0].tolist())", "[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]"),
    ("04_masking_the_future", "row_sums = weights.sum(dim=-1)", "every row sums to one: True"),
    ("04_masking_the_future", "weights.triu(1) == 0", "everything above the diagonal is exactly 0: True"),
    ("05_one_head", "out = head(x)", "out: (4, 8, 16)"),
    ("05_one_head", "named_buffers()", "buffers:    ['tril']\n'tril' in parameters: False"),
    ("05_one_head", "is_causal=True)", "allclose: True"),
]


def output_of(stem, snippet):
    nb = nbformat.read(LESSONS / f"{stem}.ipynb", as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and snippet in c.source
             and "solution" not in c.metadata.get("tags", [])]
    assert cells, f"{stem}: no code cell contains {snippet!r}"
    return "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cells[0].outputs)


@pytest.mark.parametrize("stem, snippet, expected", FACTS, ids=[f"{s[:2]}:{e[:30]}" for s, _, e in FACTS])
def test_fact_is_shown_in_an_output(stem, snippet, expected):
    assert expected in output_of(stem, snippet)


def test_variance_table_shows_d_k_before_and_about_one_after_scaling():
    rows = output_of("03_scaled_dot_product", "for d_k in [1, 4, 16, 64, 256]").splitlines()[1:]
    table = {int(r.split()[0]): (float(r.split()[1]), float(r.split()[2])) for r in rows}
    assert sorted(table) == [1, 4, 16, 64, 256]
    for d_k, (before, after) in table.items():
        assert abs(before / d_k - 1) < 0.05, f"Var(q.k) at d_k={d_k} is {before}, not about {d_k}"
        assert abs(after - 1) < 0.05, f"Var after scaling at d_k={d_k} is {after}, not about 1"

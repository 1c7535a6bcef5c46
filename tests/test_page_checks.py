"""book/_ext/page_checks.py: under a check whose stub the page hides, the page says where the check runs."""

import json
from pathlib import Path

import page_checks

LESSONS = Path(__file__).resolve().parents[1] / "lessons"


def test_every_stub_line_of_the_chapters_gets_the_page_words_and_nothing_else_changes():
    seen = 0
    for path in sorted(LESSONS.glob("0*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        before = json.dumps(nb, sort_keys=True)
        stubs = sum("fill in `" in "".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
        assert page_checks.to_page(nb) == stubs > 0, path.name
        seen += stubs
        after = json.dumps(nb, sort_keys=True)
        assert "above, then run this cell" not in after and "this check runs in the chapter's notebook" in after, path.name
        assert len(after) - len(before) < 400 * stubs  # only those lines changed
    assert seen >= 6


def test_the_page_words_name_the_function_and_a_wrapped_line_is_found():
    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "stream", "name": "stdout",
          "text": ["✗ not yet implemented: fill in `softmax` above, then run this cell\n", "  again.\n"]}]}]}
    assert page_checks.to_page(nb) == 1
    text = nb["cells"][0]["outputs"][0]["text"]
    assert text.startswith("✗ not yet implemented: this check runs in the chapter's notebook") and "`softmax`" in text
    assert max(len(line) for line in text.splitlines()) <= 77  # no sideways scrolling in the code column

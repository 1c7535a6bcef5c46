"""Closed asides (book/_ext/asides.py) in the built book, in Chromium: each chapter's asides are there with
their titles, closed when the page opens, and their code cells and outputs show once the reader opens one.
"""

from __future__ import annotations

import pytest

ASIDES = {  # page: (title, whether its code prints), in page order
    "lessons/04_masking_the_future.html": [("For the curious: rounding near zero, and flush to zero", True)],
    "lessons/05_one_head.html": [("For the curious: how nanoGPT keeps its mask", True)],
    "lessons/06_trained_head.html": [("For the curious: counting n-grams with tensors", False),
                                     ("For the curious: which kinds of key receive the look-back weight", True)],
}


@pytest.mark.parametrize("path", sorted(ASIDES))
def test_each_aside_is_closed_until_the_reader_opens_it(visit, path):
    v = visit(path)
    boxes = v.page.locator("div.admonition.dropdown.aside")
    assert boxes.count() == len(ASIDES[path])
    for n, (title, prints) in enumerate(ASIDES[path]):
        box = boxes.nth(n)
        box.scroll_into_view_if_needed()  # the page skips drawing blocks off screen (content-visibility)
        assert box.locator(".admonition-title").text_content().strip().startswith(title)
        code = box.locator(".cell .cell_input").first
        output = box.locator(".cell .cell_output").first
        assert code.count() == 1 and output.count() == int(prints), f"{title}: not the code and outputs expected"
        assert not code.is_visible(), f"{title}: open before the reader asks"
        box.locator(".admonition-title").click()
        code.wait_for(state="visible")
        assert not prints or output.is_visible()
    assert v.console_errors == [] and v.failed == []

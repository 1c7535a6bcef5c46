"""Chapter 8's questions (generating text, and the KV cache), registered on import."""

from __future__ import annotations

from attention_lab.questions.forms import choice_question, number_question, question


@question("ch8-offset")
def ch8_offset(past, T, block_size):
    """The position-table row a decode step gives the new character when it forgets the offset."""
    return choice_question(
        "ch8-offset", "8.1", f"A cache holds {past} rows, and a decode step adds "
                             f"position_table(torch.arange(T)) with T = {T} to the new character. Which "
                             "row of the position table does the new character get?",
        {"a": f"Row {past}: the position it sits at, after the {past} cached characters.",
         "b": "Row 0: the row of the first character.",
         "c": f"Row {past + 1}: one after the last cached character.",
         "d": f"An error: the table has {block_size} rows, and the character is at position {past}."},
        "b",
        f"torch.arange({T}) is [0]: the new character gets the first row of the table at every step, as if it "
        f"began the text; the attention then reads a character at position 0 among keys computed at positions "
        f"0 to {past - 1}. It should get row {past}: position_table(torch.arange(past, past + T)).",
        {"a": f"row {past} is where the character belongs, and what torch.arange({past}, {past} + {T}) gives; "
              f"torch.arange({T}) starts from 0.",
         "c": f"the cached rows are positions 0 to {past - 1}, so the next character is position {past}; and "
              f"torch.arange({T}) gives neither: it gives [0].",
         "d": f"row 0 exists, and {past} < {block_size} too: nothing fails, which is why this mistake is easy "
              "to miss."})


@question("ch8-ratio")
def ch8_ratio(full, cached, T, C):
    """How many times the multiply-adds of a full window of T a cached decode step does."""
    right = full / cached
    return number_question(
        "ch8-ratio", "8.2", f"how many times fewer multiply-adds one decode step with the cache does than one "
                            f"step over the full window, at T = {T}", right,
        f"the full window computes every one of its {T} positions: its projections, W_O and lm_head cost {T} "
        f"times one position's, and its scores and weighted sums, {T} rows of {T} keys, {T} times one row "
        f"of {T}. So the full step is exactly {T} times the cached step, {full:,} against {cached:,}.",
        [(T * T, f"{T}² would hold if all the cost were the (T, T) scores; most of it is the projections, "
                 f"W_O and lm_head, which the full window does {T} times and the cache once, and a cached "
                 f"step still reads all {T} keys."),
         (T / 2, f"the window is {T} characters now, not {T // 2} on average: this is one step at T = {T}."),
         (1, f"the cache computes one query, key and value where the full window computes {T} of each."),
         (full / (cached - 2 * T * C), f"that leaves out the cached step's own attention: its one query still "
                                       f"meets all {T} keys and weighs {T} values, 2 · {T} · {C} = "
                                       f"{2 * T * C:,} of its {cached:,} multiply-adds.")],
        {"abs": 0.5})

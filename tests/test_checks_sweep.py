"""The sweep of ``sweep_checks.py``: every check the chapters call, fed right answers, transforms
of them, stubs, misuse and mistakes, in both modes; none may crash or give the wrong verdict."""

import sweep_checks

from attention_lab import checks


def test_no_input_of_the_sweep_crashes_a_check_or_gets_the_wrong_verdict():
    counts, unclear = sweep_checks.sweep(checks)
    assert counts["tried"] >= 360  # 183 inputs, each in both modes
    assert counts["crash"] == 0 and counts["wrong verdict"] == 0, "\n".join(unclear)
    assert counts["generic"] == 0, "\n".join(unclear)  # every failure of the sweep gets the message it should

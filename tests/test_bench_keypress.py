"""Unit tests of course/bench/keypress.py's logic: the statistics it prints, the key it presses next, the
chapters it picks and the verdict it gives. Nothing here is timed (the machine is shared); the script's
measuring in a browser is tested against a fixture page in tests/browser/test_bench_keypress_pages.py."""

import argparse

import pytest

from course import layout
from course.bench import keypress as bk


@pytest.mark.parametrize("times, median, p90", [
    ([5.0], 5.0, 5.0),
    ([3.0, 1.0, 2.0], 2.0, 3.0),
    ([4.0, 1.0, 3.0, 2.0], 2.5, 4.0),  # an even count: the mean of the middle two
    # 20 presses: the 18th fastest is the p90 by nearest rank, the two slowest lie above it
    ([float(n) for n in range(20, 0, -1)], 10.5, 18.0),
    ([10.0] * 9 + [500.0], 10.0, 10.0),  # one stall in ten is above the p90
    ([10.0] * 8 + [500.0, 500.0], 10.0, 500.0),
])
def test_median_and_p90(times, median, p90):
    assert bk.median(times) == median
    assert bk.p90(times) == p90
    before = list(times)
    bk.median(times), bk.p90(times)
    assert times == before  # the caller's list is left as it was


def test_no_times_is_a_clear_error():
    with pytest.raises(ValueError, match="at least one press"):
        bk.median([])
    with pytest.raises(ValueError, match="at least one press"):
        bk.p90([])


@pytest.mark.parametrize("previous, at_start, at_end, key", [
    (None, False, False, "ArrowRight"),
    (None, True, False, "ArrowRight"),
    (None, False, True, "ArrowLeft"),  # a slider that starts at its end moves back
    ("ArrowLeft", False, False, "ArrowLeft"),  # on in the direction of the sweep
    ("ArrowLeft", True, False, "ArrowRight"),  # back at the start
    ("ArrowRight", False, True, "ArrowLeft"),
    ("ArrowRight", True, True, "ArrowLeft"),  # a slider of one value: any key, no picture (the run says so)
])
def test_the_next_key_sweeps_the_slider_back_and_forth(previous, at_start, at_end, key):
    assert bk.next_key(previous, at_start, at_end) == key


def test_a_result_says_its_numbers_or_its_problem():
    fast = bk.Result([10.0, 20.0, 30.0], what="slider T")
    assert fast.met(50) and not fast.met(16.7)
    assert fast.cell(50).split() == ["20.0", "30.0", "ok"]
    assert fast.cell(16.7).split()[-1] == "MISSED"
    assert fast.cell(None).split() == ["20.0", "30.0"]  # a column without a limit gives no verdict
    missing = bk.Result(problem="no page explorer on this page")
    assert not missing.met(50) and missing.cell(50) == "no page explorer on this page"


def test_chapters_are_picked_by_the_start_of_their_stem():
    every = bk.chapters(None)
    assert len(every) == len(layout.chapters()) == 8 and every == sorted(every) and every[0].startswith("01_")
    assert bk.chapters(["01", "04_mask"]) == [every[0], every[3]]
    with pytest.raises(SystemExit, match="no chapter starts with 09"):
        bk.chapters(["01", "09"])


def run_report(lab, page, **flags):
    args = argparse.Namespace(presses=3, no_lab=False, no_page=False, baseline=None, **flags)
    return bk.report(["01_x"], {"01_x": lab}, {"01_x": page}, args)


def test_the_verdict_fails_on_a_miss_or_a_missing_page_explorer(capsys):
    good_lab, good_page = bk.Result([15.0, 20.0, 24.0]), bk.Result([5.0, 8.0, 9.0])
    assert run_report(good_lab, good_page) == 0
    assert "all limits met" in capsys.readouterr().out
    assert run_report(bk.Result([26.0, 30.0, 20.0]), good_page) == 1  # median 26 ms > 25 ms
    assert run_report(good_lab, bk.Result([20.0, 20.0, 5.0])) == 1  # median 20 ms > 16.7 ms
    assert run_report(good_lab, bk.Result(problem="no page explorer on this page")) == 1
    out = capsys.readouterr().out
    assert "no page explorer on this page" in out and "MISSED" in out


def test_a_page_slower_than_the_baseline_beyond_its_spread_fails(capsys):
    args = argparse.Namespace(presses=3, no_lab=True, no_page=False, baseline="other")
    this, same, faster = bk.Result([9.0, 10.0, 11.0]), bk.Result([9.5, 10.0, 11.5]), bk.Result([4.0, 5.0, 6.0])
    assert bk.report(["01_x"], {}, {"01_x": this}, args, baseline={"01_x": same}) == 0
    assert "SLOWER" not in capsys.readouterr().out
    # median 10 ms against a baseline's median 5 and p90 6: slower, though within the limit
    assert bk.report(["01_x"], {}, {"01_x": this}, args, baseline={"01_x": faster}) == 1
    assert "SLOWER" in capsys.readouterr().out

"""The inputs of sweep_hostile.py, aimed at how the checks work (issue 33): each is clear, in
learner and in strict mode, one test a case; and their sweep counts no generic verdict, crash or wrong
verdict."""

import warnings

import pytest
import torch

import sweep_checks
import sweep_hostile

from attention_lab import checks

CASES = sweep_hostile.inputs()


@pytest.mark.parametrize("strict", [False, True], ids=["learner", "strict"])
@pytest.mark.parametrize("index", range(len(CASES)), ids=[case.label for case in CASES])
def test_each_input_aimed_at_the_checks_gets_the_right_verdict_named(index, strict):
    item = sweep_hostile.inputs()[index]  # built again: some inputs change their own arguments
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kind, said = sweep_checks.classify(checks, item, strict)
    assert kind == "clear", said


def test_a_side_effect_is_named_on_every_run_and_the_learners_model_is_left_as_it_was():
    item = next(case for case in sweep_hostile.inputs() if case.label.startswith("score parts zeroing"))
    model = item.args[1]
    before = {k: t.clone() for k, t in model.state_dict().items()}
    for _ in range(3):
        with pytest.raises(checks.CheckFailed) as failed:
            checks.check_score_parts(*item.args)
        assert failed.value.mistake == "general/changed-module"
        assert all(torch.equal(t, before[k]) for k, t in model.state_dict().items())

"""The checks of the predict-explain-change exercises (attention_lab/exercise_checks.py): each right answer
passes, a stub gets the kind line, every mistake they name fires on the answer that makes it, and the
graders' fresh copy runs them through its own ``_run``."""

import math

import pytest
import torch
import torch.nn as nn

from attention_lab import checks, exercise_checks as ec, training


# ---------------------------------------------------------------------------------------------
# answers, right and wrong


def layers(wq, wk, bias=False, sizes=(2, 2)):
    query, key = nn.Linear(*sizes, bias=bias), nn.Linear(*sizes, bias=bias)
    with torch.no_grad():
        query.weight.copy_(torch.tensor(wq))
        key.weight.copy_(torch.tensor(wk))
    return query, key


RIGHT_Q, RIGHT_K = [[2.0, 0.0], [0.0, 0.0]], [[0.0, 1.0], [0.0, 0.0]]


def one_way():
    return layers(RIGHT_Q, RIGHT_K)


def unit_scale(q, k):
    return 1 / math.sqrt(q.shape[-1] * q.var().item() * k.var().item())


def score_parts(model, ids, swap=False, scale=True, mask=False, softmax=False):
    B, T = ids.shape
    tok = model.token_table(ids)
    pos = model.position_table(torch.arange(T)).expand(B, T, -1)
    head = model.head
    root = head.key.weight.shape[0] ** 0.5 if scale else 1.0
    parts = [a @ b.transpose(-2, -1) / root for a in (head.query(tok), head.query(pos))
             for b in (head.key(tok), head.key(pos))]
    if swap:
        parts[1], parts[2] = parts[2], parts[1]
    if mask:
        future = torch.ones(T, T).tril() == 0
        parts = [p.masked_fill(future, float("-inf")) for p in parts]
    if softmax:
        parts = [p.softmax(-1) for p in parts]
    return parts


@pytest.fixture(scope="module")
def model():
    return training.load_trained().trained


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, 65, (6, 32), generator=torch.Generator().manual_seed(0))


def stub(*args):
    raise NotImplementedError("not yet")


# ---------------------------------------------------------------------------------------------
# the verdicts

ONE_WAY_MISTAKES = [
    ("tied", lambda: (one_way()[0], one_way()[0]), "one-way/tied"),
    ("same-weights", lambda: layers(RIGHT_Q, RIGHT_Q), "one-way/tied"),
    ("reversed", lambda: one_way()[::-1], "one-way/reversed"),
    ("in-out-layout", lambda: layers(RIGHT_Q, [[0.0, 0.0], [1.0, 0.0]]), "one-way/layout"),
    ("weak", lambda: layers([[1.0, 0.0], [0.0, 0.0]], RIGHT_K), "one-way/weak"),
    ("bias", lambda: layers(RIGHT_Q, RIGHT_K, bias=True), "one-way/bias"),
    ("not-layers", lambda: RIGHT_Q, "one-way/not-layers"),
    ("width", lambda: (nn.Linear(2, 2, bias=False), nn.Linear(2, 3, bias=False)), "one-way/width"),
]

SCALE_MISTAKES = [
    ("unit-variance", lambda q, k: 1 / math.sqrt(q.shape[-1]), "scale/unit-variance"),
    ("variances", lambda q, k: 1 / (math.sqrt(q.shape[-1]) * q.var().item() * k.var().item()), "scale/variances"),
    ("no-dk", lambda q, k: 1 / (q.std() * k.std()).item(), "scale/no-dk"),
    ("divide-dk", lambda q, k: 1 / q.shape[-1], "scale/divide-dk"),
    ("inverted", lambda q, k: math.sqrt(q.shape[-1] * q.var().item() * k.var().item()), "scale/inverted"),
    ("fixed", lambda q, k: 0.75, "scale/fixed"),
    ("twice", lambda q, k: 2 * unit_scale(q, k), "scale/differ"),
    ("a-vector", lambda q, k: q.std(-1), "scale/not-a-number"),
    ("a-string", lambda q, k: "0.75", "scale/not-a-number"),
]

PARTS_MISTAKES = [
    ("swapped", lambda m, i: score_parts(m, i, swap=True), "parts/swapped"),
    ("no-scale", lambda m, i: score_parts(m, i, scale=False), "parts/no-scale"),
    ("masked", lambda m, i: score_parts(m, i, mask=True), "parts/masked"),
    ("weights", lambda m, i: score_parts(m, i, softmax=True), "parts/weights"),
    ("sum-only", lambda m, i: [sum(score_parts(m, i))] + [torch.zeros_like(p) for p in score_parts(m, i)[1:]],
     "parts/sum"),
    ("one-wrong", lambda m, i: score_parts(m, i)[:3] + [torch.zeros(i.shape[0], i.shape[1], i.shape[1])],
     "parts/differ"),
    ("three", lambda m, i: score_parts(m, i)[:3], "parts/not-four"),
    ("no-batch", lambda m, i: [p[0] for p in score_parts(m, i)], "parts/shape"),
]


def test_right_answers_pass_and_say_what_was_tested(model, ids, capsys):
    ec.check_one_way(one_way)
    ec.check_unit_scale(unit_scale)
    ec.check_unit_scale(lambda q, k: 1 / (q @ k.mT).std())  # measured from the scores: right too
    ec.check_score_parts(score_parts, model, ids)
    lines = capsys.readouterr().out.split("✓ ")[1:]
    assert [line.split()[0] for line in lines] == ["check_one_way", "check_unit_scale", "check_unit_scale",
                                                   "check_score_parts"]
    assert all(len(row) <= checks.LINE_WIDTH for line in lines for row in line.splitlines())
    assert ec.check_one_way(one_way, strict=True) is True


@pytest.mark.parametrize("case, answer, mistake", ONE_WAY_MISTAKES, ids=[c for c, _, _ in ONE_WAY_MISTAKES])
def test_one_way_names_the_mistake(case, answer, mistake):
    with pytest.raises(checks.CheckFailed) as failed:
        ec.check_one_way(answer)
    assert failed.value.mistake == mistake, str(failed.value)


@pytest.mark.parametrize("case, answer, mistake", SCALE_MISTAKES, ids=[c for c, _, _ in SCALE_MISTAKES])
def test_unit_scale_names_the_mistake(case, answer, mistake):
    with pytest.raises(checks.CheckFailed) as failed:
        ec.check_unit_scale(answer)
    assert failed.value.mistake == mistake, str(failed.value)


@pytest.mark.parametrize("case, answer, mistake", PARTS_MISTAKES, ids=[c for c, _, _ in PARTS_MISTAKES])
def test_score_parts_names_the_mistake(case, answer, mistake, model, ids):
    with pytest.raises(checks.CheckFailed) as failed:
        ec.check_score_parts(answer, model, ids)
    assert failed.value.mistake == mistake, str(failed.value)


def test_every_message_is_reached_by_a_test():
    named = {m for table in (ONE_WAY_MISTAKES, SCALE_MISTAKES, PARTS_MISTAKES) for _, _, m in table}
    assert named == set(ec.MISTAKES)


@pytest.mark.parametrize("check, args", [(ec.check_one_way, ()), (ec.check_unit_scale, ()),
                                         (ec.check_score_parts, ("model", "ids"))])
def test_a_stub_gets_the_kind_line_and_strict_mode_raises(check, args, model, ids, capsys):
    values = [{"model": model, "ids": ids}[a] for a in args]
    assert check(stub, *values) is None
    assert "not yet implemented: fill in `stub`" in capsys.readouterr().out
    with pytest.raises(checks.CheckFailed) as failed:
        check(stub, *values, strict=True)
    assert failed.value.mistake == "general/not-implemented"


def test_the_learners_errors_are_reported_as_the_other_checks_report_them():
    def broken():
        return 1 / 0

    with pytest.raises(checks.CheckFailed) as failed:
        ec.check_one_way(broken)
    assert failed.value.mistake == "general/raised" and "ZeroDivisionError" in str(failed.value)


def test_fresh_carries_the_new_checks_and_runs_the_learner_through_its_own_run():
    graded = ec.fresh()
    assert graded is not checks and graded.check_one_way is not ec.check_one_way
    seen = []
    original = graded._run

    def recording(fn, *args):
        seen.append(fn)
        return original(fn, *args)

    graded._run = recording
    assert graded.check_one_way(one_way, strict=True) is True
    assert seen == [one_way]
    with pytest.raises(graded.CheckFailed):  # the fresh copy's own class, which the judge catches
        graded.check_unit_scale(lambda q, k: 0.75, strict=True)
    saved = ec.check_one_way
    ec.check_one_way = None  # a learner's patch of the imported module changes no fresh copy
    try:
        assert ec.fresh().check_one_way(one_way, strict=True) is True
    finally:
        ec.check_one_way = saved

"""attention_lab.training and course/train.py: chapter 6's model, its exact validation loss, training
runs that repeat exactly, and the shipped weights reproducing the logged losses."""

import copy
import hashlib
import json
import math
import shutil
from importlib import resources

import pytest
import torch
import torch.nn.functional as F
from course import cli
from course import train as train_tool

from attention_lab import text, training
from attention_lab.reference import CausalSelfAttention, ReferenceHead, ReferenceMultiHead

DATA = resources.files("attention_lab").joinpath("data")
SHIPPED = [training.HEAD_FILE, training.UNTRAINED_FILE, training.BIGRAM_FILE, training.IDENTITY_FILE,
           training.RESIDUAL_FILE, training.LOG_FILE]


@pytest.fixture(scope="module")
def shipped():
    return training.load_trained()


@pytest.fixture
def one_thread():
    # the short runs below are tiny: one thread is faster, and the results are the same on any count
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# the models


def test_head_model_maps_ids_to_next_character_logits():
    model = training.build("head", 0)
    ids = torch.randint(65, (3, 32), generator=torch.Generator().manual_seed(0))
    assert model(ids).shape == (3, 32, 65)
    assert model(ids[:, :5]).shape == (3, 5, 65)


def test_bigram_model_maps_ids_to_next_character_logits_read_from_its_table():
    model = training.build("bigram", 0)
    ids = torch.tensor([[0, 5, 64]])
    logits = model(ids)
    assert logits.shape == (1, 3, 65)
    assert torch.equal(logits[0, 1], model.token_table.weight[5])
    assert model.token_table.weight.shape == (65, 65)


def test_head_model_has_the_names_a_notebook_class_loads_into():
    model = training.HeadLM()
    assert sorted(model.state_dict()) == [
        "head.key.weight", "head.query.weight", "head.tril", "head.value.weight",
        "lm_head.bias", "lm_head.weight", "position_table.weight", "token_table.weight",
    ]
    assert model.token_table.weight.shape == (65, 64)
    assert model.position_table.weight.shape == (32, 64)
    assert model.head.key.weight.shape == (64, 64)
    assert model.lm_head.weight.shape == (65, 64)
    assert "head.tril" not in dict(model.named_parameters())  # a buffer, not a parameter
    assert sum(p.numel() for p in model.parameters()) == 22_721


def test_head_model_is_causal():
    model = training.build("head", 3)
    ids = torch.tensor([text.encode("First Citizen:\nBefore we procee")])  # (1, 31)
    changed = ids.clone()
    changed[0, 20:] = text.encode("z")[0]
    with torch.no_grad():
        a, b = model(ids), model(changed)
    assert torch.equal(a[0, :20], b[0, :20])
    assert not torch.allclose(a[0, 20:], b[0, 20:])


def test_head_model_refuses_more_than_block_size_characters():
    with pytest.raises(ValueError, match="T=33 is above block_size=32"):
        training.HeadLM()(torch.zeros(1, 33, dtype=torch.long))


def test_build_repeats_from_its_seed_and_leaves_the_global_random_state_alone():
    state = torch.get_rng_state()
    a, b, c = training.build("head", 7), training.build("head", 7), training.build("head", 8)
    assert torch.equal(torch.get_rng_state(), state)
    for name, tensor in a.state_dict().items():
        assert torch.equal(tensor, b.state_dict()[name])
    assert not torch.equal(a.head.key.weight, c.head.key.weight)
    with pytest.raises(ValueError, match="kind must be one of 'head', 'bigram', 'identity', 'residual', 'multi'; "
                                         "got 'trigram'"):
        training.build("trigram", 0)


def test_the_head_models_three_kinds_start_from_the_same_numbers():
    head, identity, residual = (training.build(kind, 5) for kind in ("head", "identity", "residual"))
    for name, tensor in head.state_dict().items():
        assert torch.equal(tensor, identity.state_dict()[name]) and torch.equal(tensor, residual.state_dict()[name])
    assert (identity.attention, residual.residual) == ("identity", True)


def test_identity_attention_reads_each_position_alone():
    """With identity attention the output at t depends on character t and position t only: changing every
    other character leaves it, and it is lm_head(value(x_t))."""
    model = training.build("identity", 3)
    ids = torch.tensor([text.encode("First Citizen:\nBefore we procee")])  # (1, 31)
    changed = torch.full_like(ids, text.encode("z")[0])
    changed[0, 10] = ids[0, 10]
    with torch.no_grad():
        a, b = model(ids), model(changed)
        x = model.token_table(ids) + model.position_table(torch.arange(31))
        by_hand = model.lm_head(model.head.value(x))
    assert torch.equal(a[0, 10], b[0, 10]) and not torch.allclose(a[0, 11], b[0, 11])
    assert torch.allclose(a, by_hand, atol=1e-6)


def test_the_residual_model_adds_x_to_the_heads_output():
    model = training.build("residual", 4)
    ids = torch.tensor([text.encode("Before we proceed")])
    with torch.no_grad():
        x = model.token_table(ids) + model.position_table(torch.arange(ids.shape[1]))
        by_hand = model.lm_head(x + model.head(x))
        without = model.lm_head(model.head(x))
        assert torch.allclose(model(ids), by_hand, atol=1e-6) and not torch.allclose(model(ids), without)


@pytest.mark.parametrize("kwargs, words", [
    ({"attention": "uniform"}, "attention must be 'causal' or 'identity'; got 'uniform'"),
    ({"residual": True, "head_size": 16}, "head_size must equal C; got head_size=16, C=64"),
])
def test_bad_variants_are_explained(kwargs, words):
    with pytest.raises(ValueError, match=words):
        training.HeadLM(**kwargs)


# the exact validation loss


def loss_one_character_at_a_time(model, ids, block_size):
    """Independent of validation_loss's batching: each target alone, from its own window's context."""
    losses = []
    for j in range(1, len(ids)):
        start = (j - 1) // block_size * block_size  # windows of block_size inputs, back to back
        logits = model(ids[start:j][None])[0, -1]  # (vocab,)
        losses.append(-F.log_softmax(logits, dim=-1)[ids[j]].item())
    return sum(losses) / len(losses)


@pytest.mark.parametrize("n", [2, 33, 100, 129])
def test_validation_loss_is_the_mean_over_every_character_after_the_first(n):
    model = training.build("head", 1)
    ids = text.split()[1][:n]
    with torch.no_grad():
        want = loss_one_character_at_a_time(model, ids, 32)
    assert training.validation_loss(model, ids, windows_per_batch=2) == pytest.approx(want, rel=1e-5)
    assert training.validation_loss(model, ids) == pytest.approx(want, rel=1e-5)


def test_bigram_validation_loss_is_the_mean_over_all_consecutive_pairs():
    model = training.build("bigram", 2)
    ids = text.split()[1][:5000]
    table = F.log_softmax(model.token_table.weight.detach(), dim=-1)
    want = -table[ids[:-1], ids[1:]].mean().item()
    assert training.validation_loss(model, ids) == pytest.approx(want, rel=1e-5)


def test_an_untrained_model_is_near_chance():
    loss = training.validation_loss(training.build("head", 0), text.split()[1][:20_000])
    assert abs(loss - math.log(65)) < 0.2


def test_validation_loss_explains_bad_ids():
    with pytest.raises(ValueError, match="1-D tensor of at least 2 ids"):
        training.validation_loss(training.HeadLM(), torch.zeros(2, 5, dtype=torch.long))


# training


def short_run(seed=0, steps=40, kind="head"):
    model = training.build(kind, seed)
    calls = []
    log = training.train(model, steps, 16, 1e-2, seed, data=text.split()[0][:100_000], log_every=10,
                         val=text.split()[1][:3000], progress=lambda *a: calls.append(a))
    return model, log, calls


def test_a_short_run_lowers_the_validation_loss(one_thread):
    model, log, _ = short_run()
    before = training.validation_loss(training.build("head", 0), text.split()[1][:20_000])
    after = training.validation_loss(model, text.split()[1][:20_000])
    assert after < before - 0.5, (before, after)
    assert log["val"][-1] < log["val"][0] and log["train"][-1] < log["train"][0]


def test_a_short_run_repeats_exactly_and_another_seed_differs(one_thread):
    state = torch.get_rng_state()
    (a, log_a, _), (b, log_b, _), (c, _, _) = short_run(0), short_run(0), short_run(1)
    assert torch.equal(torch.get_rng_state(), state), "train must not touch the global random state"
    assert log_a == log_b
    for name, tensor in a.state_dict().items():
        assert torch.equal(tensor, b.state_dict()[name]), name
    assert not torch.equal(a.head.key.weight, c.head.key.weight)


def test_the_log_and_the_progress_callback(one_thread):
    _, log, calls = short_run(steps=25)
    assert log["step"] == [10, 20, 25]
    assert len(log["train"]) == len(log["val"]) == 3
    assert [c[:2] for c in calls] == [(s, 25) for s in range(1, 26)]
    assert all(isinstance(c[2], float) for c in calls)


def test_train_without_val_logs_only_the_training_loss(one_thread):
    model = training.build("bigram", 0)
    log = training.train(model, 5, 4, 1e-2, 0, data=text.split()[0][:1000], log_every=2)
    assert log["step"] == [2, 4, 5] and len(log["train"]) == 3 and log["val"] == []


@pytest.mark.parametrize("kwargs, words", [({"steps": 0}, "at least 1"), ({"batch_size": 0}, "at least 1"),
                                           ({"data": torch.arange(32)}, "needs more than block_size=32")])
def test_train_explains_bad_arguments(kwargs, words):
    args = {"steps": 1, "batch_size": 1, "lr": 1e-3, "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=words):
        training.train(training.HeadLM(), **args)


def test_the_training_tool_writes_files_that_load_trained_reads(tmp_path, one_thread, capsys):
    assert cli.main(["train", "--out", str(tmp_path), "--steps", "30", "--batch-size", "8", "--log-every",
                            "10", "--quiet"]) in (0, 1)
    printed = capsys.readouterr().out
    loaded = training.load_trained(tmp_path)
    log = loaded.log
    assert log["steps"] == 30 and log["batch_size"] == 8 and log["head"]["step"] == [10, 20, 30]
    assert f"head {log['head']['val_loss']:.3f}, bigram {log['bigram']['val_loss']:.3f}" in printed
    assert f"{training.validation_loss(loaded.trained):.3f}" == f"{log['head']['val_loss']:.3f}"
    assert f"identity {log['identity']['val_loss']:.3f}, residual {log['residual']['val_loss']:.3f}" in printed
    assert f"{training.validation_loss(loaded.residual):.3f}" == f"{log['residual']['val_loss']:.3f}"
    assert f"multi-head {log['multi']['val_loss']:.3f}" in printed  # chapter 7's model, beside them
    assert f"{training.validation_loss(training.load_multi(tmp_path)):.3f}" == f"{log['multi']['val_loss']:.3f}"
    assert json.loads(train_tool.dumps(log)) == log


# the shipped weights


def test_shipped_files_are_in_the_package_and_small():
    sizes = {name: DATA.joinpath(name).stat().st_size for name in SHIPPED + [training.MULTI_FILE]}
    assert sizes[training.MULTI_FILE] <= 1_000_000  # chapter 7's model alone under 1 MB
    assert sum(sizes.values()) <= 2_000_000, sizes


def test_shipped_head_model_gives_its_logged_validation_loss_and_beats_the_bigram(shipped):
    head = training.validation_loss(shipped.trained)
    bigram = training.validation_loss(shipped.bigram)
    untrained = training.validation_loss(shipped.untrained)
    assert f"{head:.3f}" == f"{shipped.log['head']['val_loss']:.3f}"
    assert f"{bigram:.3f}" == f"{shipped.log['bigram']['val_loss']:.3f}"
    assert f"{untrained:.3f}" == f"{shipped.log['head']['val_loss_untrained']:.3f}"
    assert head <= 2.36
    assert head < bigram


def test_shipped_variants_give_their_logged_losses_the_identity_one_no_better_than_the_bigram(shipped):
    """Chapter 6's ablation: identity attention (no look-back) loses the head model's gain, the residual
    connection adds to it; and the identity model's key and query, never used, are still the untrained ones."""
    loss = {kind: training.validation_loss(getattr(shipped, kind)) for kind in ("identity", "residual")}
    for kind in loss:
        assert f"{loss[kind]:.3f}" == f"{shipped.log[kind]['val_loss']:.3f}", kind
        assert shipped.log[kind]["lr"] == shipped.log["head"]["lr"]
    assert loss["identity"] > shipped.log["bigram"]["val_loss"] - 0.01
    assert loss["residual"] < shipped.log["head"]["val_loss"] - 0.05
    for name in ("head.key.weight", "head.query.weight"):
        assert torch.equal(shipped.identity.state_dict()[name], shipped.untrained.state_dict()[name])


def test_shipped_log_states_how_the_models_were_trained(shipped):
    log = shipped.log
    assert log["sizes"] == {"vocab_size": 65, "C": 64, "head_size": 64, "block_size": 32}
    for key in ["seed", "batch_size", "steps", "wall_time_s", "torch", "threads"]:
        assert key in log
    for kind in ["head", "bigram", "identity", "residual"]:
        entry = log[kind]
        assert entry["lr"] > 0
        assert entry["step"][-1] == log["steps"]
        assert len(entry["step"]) == len(entry["train"]) == len(entry["val"])
        assert entry["val"][-1] == pytest.approx(entry["val_loss"], abs=1e-4)
    assert log["corpus"]["text_sha256"] == hashlib.sha256(text.corpus().encode("utf-8")).hexdigest()


def test_shipped_untrained_weights_are_rebuilt_by_the_logged_seed(shipped):
    rebuilt = training.build("head", shipped.log["seed"])
    for name, tensor in shipped.untrained.state_dict().items():
        assert torch.equal(tensor, rebuilt.state_dict()[name]), name


def test_shipped_models_come_in_eval_mode(shipped):
    assert not any(model.training for model in (shipped.trained, shipped.untrained, shipped.bigram,
                                                shipped.identity, shipped.residual))
    assert (shipped.identity.attention, shipped.residual.residual) == ("identity", True)


def test_a_notebook_class_with_the_same_names_loads_the_shipped_weights(shipped):
    model = training.HeadLM()
    model.load_state_dict(torch.load(DATA.joinpath(training.HEAD_FILE), weights_only=True))
    assert torch.equal(model.lm_head.weight, shipped.trained.lm_head.weight)


@pytest.mark.parametrize("missing", SHIPPED)
def test_a_missing_file_names_itself_and_make_train(tmp_path, missing):
    for name in SHIPPED:
        if name != missing:
            shutil.copy(DATA.joinpath(name), tmp_path / name)
    with pytest.raises(FileNotFoundError) as err:
        training.load_trained(tmp_path)
    message = str(err.value)
    assert missing in message and "make train" in message and str(tmp_path) in message


# chapter 7: four heads side by side


def test_multi_head_model_has_nanogpts_names_and_the_head_models_parameters_plus_w_o():
    model = training.MultiHeadLM()
    assert sorted(model.state_dict()) == ["attn.c_attn.weight", "attn.c_proj.weight", "attn.tril", "lm_head.bias",
                                          "lm_head.weight", "position_table.weight", "token_table.weight"]
    assert model.attn.c_attn.weight.shape == (192, 64) and model.attn.c_proj.weight.shape == (64, 64)
    assert sum(p.numel() for p in model.parameters()) == 26_817 == 22_721 + 64 * 64
    assert "attn.tril" not in dict(model.named_parameters())


def test_multi_head_model_is_causal_and_refuses_more_than_block_size_characters():
    model = training.build("multi", 3)
    ids = torch.tensor([text.encode("First Citizen:\nBefore we procee")])  # (1, 31)
    changed = ids.clone()
    changed[0, 20:] = text.encode("z")[0]
    with torch.no_grad():
        a, b = model(ids), model(changed)
    assert torch.equal(a[0, :20], b[0, :20]) and not torch.allclose(a[0, 20:], b[0, 20:])
    with pytest.raises(ValueError, match="T=33 is above block_size=32"):
        model(torch.zeros(1, 33, dtype=torch.long))


def test_the_multi_head_layer_is_a_list_of_heads_then_w_o_and_nanogpts_layer():
    torch.manual_seed(0)
    layer = ReferenceMultiHead(64, 4, 8)
    x = torch.randn(3, 8, 64)
    heads = [ReferenceHead(64, 16, 8) for _ in range(4)]
    with torch.no_grad():
        for h, head in enumerate(heads):  # head h's rows of c_attn: its q, k and v
            for n, part in enumerate(("query", "key", "value")):
                getattr(head, part).weight.copy_(layer.c_attn.weight[n * 64 + h * 16:n * 64 + (h + 1) * 16])
        listed = layer.c_proj(torch.cat([head(x) for head in heads], -1))
        gpt = CausalSelfAttention(64, 4)
        gpt.load_state_dict({k: v for k, v in layer.state_dict().items() if k != "tril"})
        assert torch.allclose(layer(x), listed, atol=1e-6) and torch.allclose(layer(x), gpt(x), atol=1e-6)
        # removing head 2 is zeroing its columns of W_O
        without = copy.deepcopy(layer)
        without.c_proj.weight[:, 32:48] = 0
        assert torch.allclose(layer(x, keep=[1, 1, 0, 1]), without(x), atol=1e-6)


def test_shipped_multi_head_model_gives_its_logged_loss_and_beats_the_head_model(shipped):
    multi = training.load_multi()
    entry = shipped.log["multi"]
    assert entry["sizes"] == {"vocab_size": 65, "C": 64, "n_head": 4, "block_size": 32}
    assert entry["lr"] == shipped.log["head"]["lr"] and entry["parameters"] == 26_817
    loss = training.validation_loss(multi)
    assert f"{loss:.3f}" == f"{entry['val_loss']:.3f}"
    assert loss < shipped.log["head"]["val_loss"] - 0.15 and not multi.training
    assert entry["val"][-1] == pytest.approx(entry["val_loss"], abs=1e-4)
    assert f"{training.validation_loss(training.build('multi', shipped.log['seed'])):.3f}" == \
        f"{entry['val_loss_untrained']:.3f}"


def test_a_missing_multi_head_file_names_itself_and_make_train(tmp_path):
    shutil.copy(DATA.joinpath(training.LOG_FILE), tmp_path / training.LOG_FILE)
    with pytest.raises(FileNotFoundError, match=f"{training.MULTI_FILE}.*make train"):
        training.load_multi(tmp_path)


def test_counted_n_grams_give_chapter_6s_losses():
    assert round(training.ngram_loss(2, 1), 3) == 2.482
    assert round(training.ngram_loss(3, 0.1), 3) == 2.046
    assert round(training.ngram_loss(4, 0.1), 3) == 1.784

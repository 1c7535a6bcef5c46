"""attention_lab.text: the shipped tiny-Shakespeare corpus, its vocabulary, encoding, split and batches."""

import gzip
import hashlib
import subprocess
import sys
from importlib import resources

import pytest
import torch

from attention_lab import text

SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"


def test_the_corpus_is_tiny_shakespeare_byte_for_byte():
    corpus = text.corpus()
    assert hashlib.sha256(corpus.encode("utf-8")).hexdigest() == SHA256
    assert len(corpus) == 1_115_394
    assert corpus.startswith("First Citizen:\nBefore we proceed any further, hear me speak.")


def test_the_gzip_file_carries_no_name_or_time_so_it_is_reproducible():
    packed = resources.files("attention_lab").joinpath(text.FILE).read_bytes()
    assert packed[:3] == b"\x1f\x8b\x08"  # gzip, deflate
    assert packed[3] & 0x08 == 0, "the gzip header stores a file name: compress with gzip -9 -n"
    assert packed[4:8] == b"\0\0\0\0", "the gzip header stores a time: compress with gzip -9 -n"
    assert gzip.decompress(packed).decode("utf-8") == text.corpus()


def test_importing_text_reads_nothing():
    code = "import attention_lab.text as t; print(t.corpus.cache_info().currsize, t.vocab.cache_info().currsize)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["0", "0"]


def test_the_vocabulary_is_the_65_sorted_characters_of_the_corpus():
    vocab = text.vocab()
    assert len(vocab) == 65
    assert list(vocab) == sorted(set(text.corpus()))
    assert vocab[:2] == ("\n", " ")
    assert "".join(vocab[2:13]) == "!$&',-.3:;?"


@pytest.mark.parametrize("s", ["First Citizen:\nBefore we proceed", "", "zZ3$&?", "".join(text.vocab())])
def test_encode_then_decode_gives_the_text_back(s):
    ids = text.encode(s)
    assert len(ids) == len(s)
    assert all(0 <= i < 65 for i in ids)
    assert text.decode(ids) == s
    assert text.decode(torch.tensor(ids, dtype=torch.long)) == s


def test_encode_gives_each_character_its_index_in_the_vocabulary():
    assert text.encode("\n a") == [0, 1, text.vocab().index("a")]
    assert text.encode("A") == [13]  # after newline, space and the 11 marks


def test_encode_names_every_character_outside_the_vocabulary_and_what_to_use():
    with pytest.raises(ValueError) as err:
        text.encode("Café\tau lait 42")
    message = str(err.value)
    for bad in ["'é'", "'\\t'", "'2'", "'4'"]:
        assert bad in message
    for good in ["'C'", "'a'", "'3'"]:
        assert good not in message.split(":")[0]
    assert message.startswith("the tiny-Shakespeare vocabulary has no '\\t', '2', '4', 'é': use only")
    assert "a-z and A-Z" in message and "attention_lab.text.vocab()" in message
    with pytest.raises(ValueError, match=r"^the tiny-Shakespeare vocabulary has no '€': "):
        text.encode("€")


def test_split_is_the_first_90_percent_for_training_and_the_last_10_for_validation():
    train, val = text.split()
    n = len(text.corpus())
    assert len(train) == int(0.9 * n) == 1_003_854
    assert len(val) == n - int(0.9 * n) == 111_540
    assert train.dtype == val.dtype == torch.long
    assert train.dim() == val.dim() == 1
    assert text.decode(train[:14]) == "First Citizen:"
    assert text.decode(val[:200]) == text.corpus()[1_003_854:1_003_854 + 200]
    assert text.decode(val[-50:]) == text.corpus()[-50:]


def test_split_hands_out_copies():
    train, _ = text.split()
    train[:5] = 0
    assert text.decode(text.split()[0][:5]) == "First"


def test_batch_returns_windows_of_the_corpus_with_their_ids():
    ids, texts = text.batch(4, 8, generator=torch.Generator().manual_seed(1337))
    assert ids.shape == (4, 8) and ids.dtype == torch.long
    assert len(texts) == 4 and all(len(t) == 8 for t in texts)
    corpus = text.corpus()
    for row, window in zip(ids, texts):
        assert text.decode(row) == window
        assert window in corpus


def test_batch_is_repeatable_with_a_seeded_generator_and_differs_across_seeds():
    a = text.batch(6, 16, generator=torch.Generator().manual_seed(0))
    b = text.batch(6, 16, generator=torch.Generator().manual_seed(0))
    c = text.batch(6, 16, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a[0], b[0]) and a[1] == b[1]
    assert a[1] != c[1]


def test_batch_without_a_generator_uses_the_global_seed():
    torch.manual_seed(5)
    a = text.batch(3, 10)
    torch.manual_seed(5)
    b = text.batch(3, 10)
    assert a[1] == b[1]


@pytest.mark.parametrize("B, T, words", [(0, 8, "B must be at least 1"), (2, 0, "T must be between 1 and"),
                                         (2, 2_000_000, "T must be between 1 and 1115394")])
def test_batch_explains_bad_sizes(B, T, words):
    with pytest.raises(ValueError, match=words):
        text.batch(B, T)


@pytest.mark.parametrize("block_size", [2, 12, 32])
def test_validation_lines_are_the_lines_of_the_validation_ids_that_fit(block_size):
    # derived the long way, from the ids split() cuts: the string slice must land on the same text
    expected = [s for s in text.decode(text.split()[1]).split("\n") if 2 <= len(s) <= block_size]
    got = text.validation_lines(block_size)
    assert got == expected and got and all(2 <= len(s) <= block_size for s in got)


# the two printing helpers of chapters 5 and 6

def test_wrap_fits_the_column_and_joins_line_breaks_but_keeps_the_texts_own_spaces():
    message = "Error(s) in loading state_dict for Head:\n\tsize mismatch for tril: " + "word " * 30
    wrapped = text.wrap(message)
    assert all(len(line) <= text.WIDTH for line in wrapped.splitlines()) and len(wrapped.splitlines()) > 2
    assert "Head: size mismatch" in wrapped and "\t" not in wrapped
    assert text.wrap("sampled  text,  two spaces") == "sampled  text,  two spaces"
    assert text.wrap(ValueError("not a str")) == "not a str"


def test_refusal_says_nothing_when_the_call_runs_and_pytorchs_reason_when_it_is_refused():
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(2, 4, 8)  # (B, T, hs): three axes, which the flash kernel refuses
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        said = text.refusal(F.scaled_dot_product_attention, q, q, q, is_causal=True)
        ran = text.refusal(F.scaled_dot_product_attention, q[:, None], q[:, None], q[:, None], is_causal=True)
    assert ran is None
    assert said.startswith("refused (No available kernel. Aborting execution.):")
    assert "to be 4 dimensional" in said and "Triggered" not in said


def test_refusal_lets_other_errors_through():
    with pytest.raises(ValueError, match="bad"):
        text.refusal(lambda: (_ for _ in ()).throw(ValueError("bad")))

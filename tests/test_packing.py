"""Input packing and pair truncation, as the original's classifier/feature code."""

import os

import pytest

from bert_tf.text.packing import pack_inputs, truncate_seq_pair, truncated_pair_lengths
from bert_tf.text.tokenization import FullTokenizer
from tests.conftest import FIXTURES_DIR


@pytest.fixture(scope="module")
def tokenizer():
    return FullTokenizer(os.path.join(FIXTURES_DIR, "google_tiny", "vocab.txt"), True)


@pytest.mark.parametrize(
    "len_a, len_b, max_length, want",
    [(5, 5, 10, (5, 5)), (8, 3, 6, (3, 3)), (4, 4, 5, (3, 2)), (2, 9, 7, (2, 5)), (0, 4, 2, (0, 2))],
)
def test_truncate_longest_first_from_the_end(len_a, len_b, max_length, want):
    a, b = list(range(len_a)), list(range(100, 100 + len_b))
    truncate_seq_pair(a, b, max_length)
    assert (len(a), len(b)) == want
    assert a == list(range(want[0])) and b == list(range(100, 100 + want[1]))


def original_pair_lengths(len_a, len_b, max_length):
    """The lengths the original's `_truncate_seq_pair` leaves, one token at a time from the
    longer text (b on ties)."""
    while len_a + len_b > max_length:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return len_a, len_b


def test_closed_form_lengths_equal_the_one_token_at_a_time_loop():
    for len_a in range(25):
        for len_b in range(25):
            for max_length in range(30):
                want = original_pair_lengths(len_a, len_b, max_length)
                assert truncated_pair_lengths(len_a, len_b, max_length) == want, (len_a, len_b, max_length)


def test_pair(tokenizer, fixtures_dir):
    packed = pack_inputs(["the", "dog"], ["is", "hairy", "."], 10, tokenizer)
    assert packed["tokens"] == ["[CLS]", "the", "dog", "[SEP]", "is", "hairy", ".", "[SEP]"]
    assert packed["input_ids"] == [101, 1996, 3899, 102, 2003, 15892, 1012, 102, 0, 0]
    assert packed["input_mask"] == [1] * 8 + [0, 0]
    assert packed["segment_ids"] == [0, 0, 0, 0, 1, 1, 1, 1, 0, 0]


def test_single_is_cut_to_leave_room_for_cls_and_sep(tokenizer, fixtures_dir):
    tokens = ["the"] * 10
    packed = pack_inputs(tokens, None, 6, tokenizer)
    assert packed["tokens"] == ["[CLS]", "the", "the", "the", "the", "[SEP]"]
    assert packed["input_mask"] == [1] * 6 and packed["segment_ids"] == [0] * 6
    assert tokens == ["the"] * 10  # the caller's list is not modified
    with pytest.raises(ValueError, match="too short"):
        pack_inputs(["a"], ["b"], 2, tokenizer)

"""Pair truncation as the original's loop, in linear time, and scale mode's cheaper draws: the same
distributions as the original's loops, checked against them."""

import array
import collections
import random

from bert_tf.data import PretrainingDataOptions, create_pretraining_data, instances
from bert_tf.data.instances import truncate_seq_pair, truncate_seq_pair_sampled
from bert_tf.data.masking import Masker
from bert_tf.text.tokenization import FullTokenizer
from tests import pretraining_fixtures as pf


def _front_removed(truncate, len_a, len_b, max_num_tokens, rng):
    """Lengths after `truncate` and how many tokens each side lost from its front."""
    a, b = list(range(len_a)), list(range(len_b))
    truncate(a, b, max_num_tokens, rng)
    for side in (a, b):  # what is left is always one contiguous run
        if side:
            assert side == list(range(side[0], side[0] + len(side)))
    return len(a), len(b), a[0] if a else None, b[0] if b else None


def test_sampled_truncation_ends_at_the_original_lengths():
    rng = random.Random(0)
    for len_a in range(0, 14):
        for len_b in range(0, 14):
            for max_num_tokens in range(1, 20):
                want = _front_removed(truncate_seq_pair, len_a, len_b, max_num_tokens, rng)[:2]
                got = _front_removed(truncate_seq_pair_sampled, len_a, len_b, max_num_tokens, rng)[:2]
                assert got == want, (len_a, len_b, max_num_tokens)


def test_sampled_truncation_removes_from_the_front_as_often_as_the_original():
    # 30 + 13 -> 23: a loses 18 tokens, b 2; the original flips a coin per token for front or back.
    trials = 20000
    histograms = {}
    for name, truncate in (("loop", truncate_seq_pair), ("sampled", truncate_seq_pair_sampled)):
        rng = random.Random(name)
        histograms[name] = collections.Counter(
            _front_removed(truncate, 30, 13, 23, rng)[2:] for _ in range(trials)
        )
    for name, histogram in histograms.items():
        fronts_a = [front_a for (front_a, _), count in histogram.items() for _ in range(count)]
        mean = sum(fronts_a) / trials
        variance = sum((x - mean) ** 2 for x in fronts_a) / trials
        assert abs(mean - 18 / 2) < 0.075, name  # Binomial(18, 1/2): sd of the mean 0.015
        assert abs(variance - 18 / 4) < 0.25, name
    # And the joint distributions agree cell by cell, within 5 standard errors.
    for cell in set(histograms["loop"]) | set(histograms["sampled"]):
        p = (histograms["loop"][cell] + histograms["sampled"][cell]) / (2 * trials)
        tolerance = 5 * (2 * p * (1 - p) / trials) ** 0.5 + 1e-9
        assert abs(histograms["loop"][cell] - histograms["sampled"][cell]) / trials <= tolerance, cell


def test_sampled_masking_picks_uniformly_among_the_original_candidates_with_80_10_10():
    vocab = {"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "[MASK]": 3, "a": 4, "##b": 5}
    masker = Masker(
        vocab, masked_lm_prob=0.15, max_predictions_per_seq=3, do_whole_word_mask=False, exact_stream=False
    )
    rng = random.Random(1)
    num_segment_a = 6  # [CLS] + 4 tokens + [SEP] at 5; b is 8 tokens + [SEP] at 14
    counts, fates = collections.Counter(), collections.Counter()
    trials = 6000
    for _ in range(trials):
        token_ids = [1, 4, 4, 4, 4, 2] + [4] * 8 + [2]
        positions, labels = masker.mask(token_ids, num_segment_a, rng)
        assert len(positions) == 2 == len(set(positions))  # round(15 * 0.15)
        assert labels == [4, 4] and positions == sorted(positions)
        counts.update(positions)
        fates.update(token_ids[p] for p in positions)
    candidates = [*range(1, 5), *range(6, 14)]
    assert sorted(counts) == candidates
    expected = trials * 2 / len(candidates)
    assert all(abs(counts[p] - expected) < 5 * expected**0.5 for p in candidates), counts
    # [MASK] 80%; kept 10%, plus the random word that happens to be "a" (1 in 6 of the other 10%).
    total = 2 * trials
    assert abs(fates[3] / total - 0.8) < 0.015
    assert abs(fates[4] / total - (0.1 + 0.1 / 6)) < 0.012
    assert all(abs(fates[i] / total - 0.1 / 6) < 0.006 for i in (0, 1, 2, 5)), fates


def sides_cut(len_a, len_b, max_num_tokens):
    """The side of each token the original's rule removes, in order ("a" or "b"): while the pair
    is too long, one token of the longer side (of b where the two are as long)."""
    cut = []
    while len_a + len_b > max_num_tokens:
        side = "a" if len_a > len_b else "b"
        cut.append(side)
        len_a, len_b = (len_a - 1, len_b) if side == "a" else (len_a, len_b - 1)
    return cut


def kept_after_the_original_rule(tokens_a, tokens_b, max_num_tokens, rng):
    """The pair the original's truncation leaves, told as counts: each cut consumes one draw,
    below 0.5 taking the side's first token, else its last; a side keeps what lies between its
    front and back cuts."""
    front = {"a": 0, "b": 0}
    back = {"a": 0, "b": 0}
    for side in sides_cut(len(tokens_a), len(tokens_b), max_num_tokens):
        (front if rng.random() < 0.5 else back)[side] += 1
    a = tokens_a[front["a"] : len(tokens_a) - back["a"]]
    b = tokens_b[front["b"] : len(tokens_b) - back["b"]]
    return a, b


def test_truncation_cuts_and_draws_exactly_as_the_original_loop():
    cases = random.Random(2024)
    for case in range(3000):
        if case % 3 == 0:  # equal sides, where b loses the first token
            len_a = len_b = cases.randint(0, 300)
        else:
            len_a, len_b = cases.randint(0, 300), cases.randint(0, 300)
        if case % 50 == 0:  # a long segment beside a short one, or two long ones
            len_a, len_b = cases.choice([(5000, 3), (2, 4000), (3000, 3000), (3001, 2999)])
        max_num_tokens = cases.randint(1, 260)
        seed = cases.getrandbits(64)
        tokens_a, tokens_b = list(range(len_a)), list(range(10_000, 10_000 + len_b))
        got_a, got_b = list(tokens_a), list(tokens_b)
        want_rng, got_rng = random.Random(seed), random.Random(seed)
        want_a, want_b = kept_after_the_original_rule(tokens_a, tokens_b, max_num_tokens, want_rng)
        truncate_seq_pair(got_a, got_b, max_num_tokens, got_rng)
        assert (got_a, got_b) == (want_a, want_b), (len_a, len_b, max_num_tokens, seed)
        assert got_rng.getstate() == want_rng.getstate(), (len_a, len_b, max_num_tokens, seed)


class MovesCountingList(list):
    """A list that counts the elements its deletions move: those after the deleted ones, which
    CPython shifts down (`del tokens[0]` moves all the others; `pop()` none)."""

    moved = 0

    def __delitem__(self, key):
        if isinstance(key, slice):
            start, stop, _ = key.indices(len(self))
        else:
            start = key % len(self)
            stop = start + 1
        if stop > start:
            self.moved += len(self) - stop
        super().__delitem__(key)

    def pop(self, index=-1):
        self.moved += len(self) - index % len(self) - 1
        return super().pop(index)


def test_truncating_a_long_segment_moves_each_token_at_most_once():
    """The original's `del tokens[0]` per token moves the rest of the segment each time:
    quadratic in its length. Cut once, each kept token moves once."""
    for len_a, len_b in ((20_000, 20_000), (30_000, 7), (3, 25_000), (20_001, 19_999)):
        tokens_a, tokens_b = MovesCountingList(range(len_a)), MovesCountingList(range(len_b))
        truncate_seq_pair(tokens_a, tokens_b, 125, random.Random(len_a))
        assert len(tokens_a) + len(tokens_b) == 125
        assert tokens_a.moved <= len(tokens_a) and tokens_b.moved <= len(tokens_b)


def is_run_of(ids, tokens):
    """Whether `ids` is a contiguous run of `tokens`."""
    where = array.array("i", tokens).tobytes().find(array.array("i", ids).tobytes())
    return where >= 0 and where % 4 == 0  # ids are 4 bytes: a run starts at a multiple of 4


def test_a_long_one_line_corpus_is_truncated_moving_each_kept_token_once(fixtures_dir, tmp_path, monkeypatch):
    """A corpus of one 200k-word line in exact mode: one segment of 270k tokens, paired with itself
    (the only document) and cut to 63 + 62 tokens. The original's loop moved 3.6e10 tokens for
    each instance (the rest of the segment at each `del tokens[0]`); here each kept one moves once."""
    with open(pf.SAMPLE_TEXT, encoding="utf-8") as f:
        words = f.read().split()
    rng = random.Random(0)
    line = " ".join(rng.choice(words) for _ in range(200_000))
    (tmp_path / "line.txt").write_text(line + "\n", encoding="utf-8")
    tokenizer = FullTokenizer(pf.VOCAB, do_lower_case=True)
    ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))
    cut = instances.truncate_seq_pair
    seen = []

    def counting_truncate(tokens_a, tokens_b, max_num_tokens, rng):
        a, b = MovesCountingList(tokens_a), MovesCountingList(tokens_b)
        cut(a, b, max_num_tokens, rng)
        seen.append((len(tokens_a), len(tokens_b), a.moved + b.moved))
        tokens_a[:], tokens_b[:] = a, b

    monkeypatch.setattr(instances, "truncate_seq_pair", counting_truncate)
    output = str(tmp_path / "out.tfrecord")
    summary = create_pretraining_data(
        str(tmp_path / "line.txt"), output, PretrainingDataOptions(vocab_file=pf.VOCAB, dupe_factor=2)
    )
    assert summary.instances == 2 and seen == [
        (len(ids), len(ids), seen[0][2]),
        (len(ids), len(ids), seen[1][2]),
    ]
    assert len(ids) > 260_000 and all(moved <= 125 for _, _, moved in seen)
    for record in pf.read_records(output):  # [CLS] 63 tokens of the line [SEP] 62 more [SEP]
        tokens = list(record["input_ids"])
        for position, label in zip(record["masked_lm_positions"], record["masked_lm_ids"], strict=True):
            tokens[position] = label
        assert sum(record["input_mask"]) == 128 and record["next_sentence_labels"] == [1]
        assert is_run_of(tokens[1:64], ids) and is_run_of(tokens[65:127], ids)

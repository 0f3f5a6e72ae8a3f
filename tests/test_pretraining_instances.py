"""Scale mode's cheaper draws: the same distributions as the original's loops, checked against them."""

import collections
import random

from bert_tf.data.instances import truncate_seq_pair, truncate_seq_pair_sampled
from bert_tf.data.masking import Masker


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

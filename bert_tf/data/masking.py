"""Masked LM predictions, drawn exactly as the original `create_masked_lm_predictions`.

Every random draw is made on the caller's `random.Random`, in the original's order, so the same
seed gives the same masks. Tokens are ids here; "##" continuations are recognised through the
vocabulary.

With `sample_positions=True` (scale mode, which need not reproduce the original's stream) the
masked WordPieces are drawn with `rng.sample` instead of shuffling every candidate: the same
uniform choice of a subset, with about a seventh of the random draws. Whole-word masking always
shuffles, since which words fit the budget depends on the order.
"""


class Masker:
    """Chooses and replaces the masked LM positions of a sequence.

    Args:
      vocab: The tokenizer's ordered `{token: id}`.
      masked_lm_prob: Fraction of tokens to predict.
      max_predictions_per_seq: Upper bound of predictions per sequence.
      do_whole_word_mask: Mask all WordPieces of a word together ("##" pieces join the
        piece before them).
      sample_positions: Draw single-WordPiece masks with `rng.sample` (see the module doc).
    """

    def __init__(self, vocab, masked_lm_prob, max_predictions_per_seq, do_whole_word_mask, sample_positions=False):
        self.masked_lm_prob = masked_lm_prob
        self.max_predictions_per_seq = max_predictions_per_seq
        self.do_whole_word_mask = do_whole_word_mask
        self.sample_positions = sample_positions and not do_whole_word_mask
        self.mask_id = vocab["[MASK]"]
        # The original draws a random word from list(vocab.keys()) and looks its id up.
        self.vocab_word_ids = list(vocab.values())
        self.is_continuation = {index for token, index in vocab.items() if token.startswith("##")}

    def _candidates(self, token_ids, num_segment_a):
        """Groups of positions that are masked together; never [CLS] or the two [SEP]."""
        positions = [*range(1, num_segment_a - 1), *range(num_segment_a, len(token_ids) - 1)]
        if not self.do_whole_word_mask:
            return [[position] for position in positions]
        candidates = []
        for position in positions:
            if candidates and token_ids[position] in self.is_continuation:
                candidates[-1].append(position)
            else:
                candidates.append([position])
        return candidates

    def mask(self, token_ids, num_segment_a, rng):
        """Masks `token_ids` in place.

        Args:
          token_ids: The ids of `[CLS] a [SEP] b [SEP]`; replaced tokens are written in place.
          num_segment_a: Length of `[CLS] a [SEP]`.
          rng: The `random.Random` of the run.

        Returns:
          (positions, label_ids): the masked positions in increasing order and the original
          ids there.
        """
        num_to_predict = min(
            self.max_predictions_per_seq,
            max(1, int(round(len(token_ids) * self.masked_lm_prob))),
        )
        candidates = self._candidates(token_ids, num_segment_a)
        if self.sample_positions:
            candidates = rng.sample(candidates, min(num_to_predict, len(candidates)))
        else:
            rng.shuffle(candidates)
        labels = {}
        for index_set in candidates:
            if len(labels) >= num_to_predict:
                break
            if len(labels) + len(index_set) > num_to_predict:
                continue
            # (The original also skips groups with an already-masked position; the groups are
            # disjoint, so that never happens and draws nothing.)
            for position in index_set:
                original = token_ids[position]
                if rng.random() < 0.8:
                    replacement = self.mask_id
                elif rng.random() < 0.5:
                    replacement = original
                else:
                    replacement = self.vocab_word_ids[rng.randint(0, len(self.vocab_word_ids) - 1)]
                token_ids[position] = replacement
                labels[position] = original
        positions = sorted(labels)
        return positions, [labels[position] for position in positions]

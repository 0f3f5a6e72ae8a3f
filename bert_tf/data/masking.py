"""Masked LM predictions, drawn exactly as the original `create_masked_lm_predictions`.

Every random draw is made on the caller's `random.Random`, in the original's order, so the same
seed gives the same masks. Tokens are ids here; the special tokens and the "##" continuations
are recognised through the vocabulary.
"""


class Masker:
    """Chooses and replaces the masked LM positions of a sequence.

    Args:
      vocab: The tokenizer's ordered `{token: id}`.
      masked_lm_prob: Fraction of tokens to predict.
      max_predictions_per_seq: Upper bound of predictions per sequence.
      do_whole_word_mask: Mask all WordPieces of a word together ("##" pieces join the
        piece before them).
    """

    def __init__(self, vocab, masked_lm_prob, max_predictions_per_seq, do_whole_word_mask):
        self.masked_lm_prob = masked_lm_prob
        self.max_predictions_per_seq = max_predictions_per_seq
        self.do_whole_word_mask = do_whole_word_mask
        self.special_ids = {vocab["[CLS]"], vocab["[SEP]"]}
        self.mask_id = vocab["[MASK]"]
        # The original draws a random word from list(vocab.keys()) and looks its id up.
        self.vocab_word_ids = list(vocab.values())
        self.is_continuation = {index for token, index in vocab.items() if token.startswith("##")}

    def _candidates(self, token_ids):
        candidates = []
        for position, token_id in enumerate(token_ids):
            if token_id in self.special_ids:
                continue
            if self.do_whole_word_mask and candidates and token_id in self.is_continuation:
                candidates[-1].append(position)
            else:
                candidates.append([position])
        return candidates

    def mask(self, token_ids, rng):
        """Masks `token_ids` in place.

        Args:
          token_ids: The ids of `[CLS] a [SEP] b [SEP]`; replaced tokens are written in place.
          rng: The `random.Random` of the run.

        Returns:
          (positions, label_ids): the masked positions in increasing order and the original
          ids there.
        """
        candidates = self._candidates(token_ids)
        rng.shuffle(candidates)
        num_to_predict = min(
            self.max_predictions_per_seq,
            max(1, int(round(len(token_ids) * self.masked_lm_prob))),
        )
        labels = {}
        for index_set in candidates:
            if len(labels) >= num_to_predict:
                break
            if len(labels) + len(index_set) > num_to_predict:
                continue
            if any(position in labels for position in index_set):
                continue
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

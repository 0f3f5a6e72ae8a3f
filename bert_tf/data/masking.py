"""Masked LM predictions, drawn exactly as the original `create_masked_lm_predictions`.

Every random draw is made on the caller's `random.Random`, in the original's order, so the same
seed gives the same masks. Tokens are ids here; "##" continuations are recognised through the
vocabulary.

With `exact_stream=False` (scale mode, which need not reproduce the original's random stream)
single-WordPiece masks are drawn from the same distribution with far fewer draws: the positions
as distinct uniform picks (a uniform subset, as the original's shuffle-and-take-the-first gives),
then one draw per position for its fate (below 0.8 `[MASK]`, from 0.9 a random word, else kept:
the original's 80/10/10 from two draws). Uniform integers come from `int(rng.random() * n)`,
whose bias, under n / 2^53, is far below anything a corpus can show. Whole-word masking always
shuffles, since which words fit the budget depends on the order.

Words from a segmenter (`--word_segmenter`, `bert_tf.text.word_segmentation`) arrive as marked
ids: a token that continues a segmenter's word holds `~id` (negative). With `marked_words` the
masker joins such a token to the one before it, as a "##" piece, then restores every id before
drawing the replacements: the examples hold the ordinary ids.
"""


class Masker:
    """Chooses and replaces the masked LM positions of a sequence.

    Args:
      vocab: The tokenizer's ordered `{token: id}`.
      masked_lm_prob: Fraction of tokens to predict.
      max_predictions_per_seq: Upper bound of predictions per sequence.
      do_whole_word_mask: Mask all WordPieces of a word together ("##" pieces join the
        piece before them).
      exact_stream: Consume the random stream as the original does; False allows fewer draws
        with the same distribution (see the module doc).
      marked_words: The sequences hold marked ids (`~id` continues a segmenter's word; module
        doc); only with `do_whole_word_mask`.
    """

    def __init__(
        self,
        vocab,
        masked_lm_prob,
        max_predictions_per_seq,
        do_whole_word_mask,
        exact_stream=True,
        marked_words=False,
    ):
        self.marked_words = marked_words
        self.masked_lm_prob = masked_lm_prob
        self.max_predictions_per_seq = max_predictions_per_seq
        self.do_whole_word_mask = do_whole_word_mask
        self.sample_positions = not (exact_stream or do_whole_word_mask)
        self.mask_id = vocab["[MASK]"]
        # The original draws a random word from list(vocab.keys()) and looks its id up.
        self.vocab_word_ids = list(vocab.values())
        self.is_continuation = {index for token, index in vocab.items() if token.startswith("##")}
        if marked_words:  # a marked id continues a word whatever its token
            self.is_continuation.update(~index for index in vocab.values())

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

    def _shuffled_choice(self, token_ids, num_segment_a, num_to_predict, rng):
        """The original's choice: shuffle the groups, take each that still fits the budget."""
        candidates = self._candidates(token_ids, num_segment_a)
        rng.shuffle(candidates)
        chosen = []
        for index_set in candidates:
            if len(chosen) >= num_to_predict:
                break
            if len(chosen) + len(index_set) > num_to_predict:
                continue
            # (The original also skips groups with an already-masked position; the groups are
            # disjoint, so that never happens and draws nothing.)
            chosen.extend(index_set)
        return chosen

    def _mask_sampled(self, token_ids, num_segment_a, num_to_predict, rng):
        """`mask` for `exact_stream=False` (see the module doc)."""
        random = rng.random
        # Candidates 1..n-3, stepped over the middle [SEP] at num_segment_a - 1.
        num_candidates = len(token_ids) - 3
        num_picks = min(num_to_predict, num_candidates)
        picks = set()
        while len(picks) < num_picks:
            picks.add(int(random() * num_candidates) + 1)
        positions = sorted(q + (q >= num_segment_a - 1) for q in picks)
        labels = [token_ids[position] for position in positions]
        for position in positions:
            fate = random()
            if fate < 0.8:
                token_ids[position] = self.mask_id
            elif fate >= 0.9:
                token_ids[position] = self.vocab_word_ids[int(random() * len(self.vocab_word_ids))]
        return positions, labels

    def mask(self, token_ids, num_segment_a, rng):
        """Masks `token_ids` in place.

        Args:
          token_ids: The ids of `[CLS] a [SEP] b [SEP]` (marked with `marked_words`); replaced
            tokens, and with `marked_words` every id restored, are written in place.
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
        if self.sample_positions:
            return self._mask_sampled(token_ids, num_segment_a, num_to_predict, rng)
        chosen = self._shuffled_choice(token_ids, num_segment_a, num_to_predict, rng)
        if self.marked_words:
            token_ids[:] = [token_id if token_id >= 0 else ~token_id for token_id in token_ids]
        # Choosing draws nothing after the shuffle, so replacing afterwards, in the chosen
        # order, consumes the stream as the original's interleaved loop does.
        labels = {}
        for position in chosen:
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

"""Training instances (sentence pairs) from documents, drawn exactly as the original.

`create_instances` consumes the `random.Random` in the same order as the original's
`create_training_instances`, so the same corpus, flags and seed give the same instances. The
algorithm, per document and per duplication round:

- pick a target length: `max_seq_length - 3`, or with probability `short_seq_prob` a random
  length in [2, max_seq_length - 3];
- gather segments until the target is reached, split them at a random point into A and B;
- with probability 1/2 (always when there is one segment) replace B by a run of segments from a
  random other document, and put the unused segments back;
- truncate the pair to `max_seq_length - 3`, each step dropping a token from the front or the
  back of the longer side at random; add `[CLS]`, `[SEP]`, `[SEP]`; mask.
"""

import dataclasses

from bert_tf.text.packing import truncated_pair_lengths


@dataclasses.dataclass
class TrainingInstance:
    """One sentence pair, as ids.

    Attributes:
      input_ids: `[CLS] a [SEP] b [SEP]` after masking.
      num_segment_a: Length of `[CLS] a [SEP]`.
      masked_lm_positions: Masked positions, increasing.
      masked_lm_ids: The original ids at those positions.
      is_random_next: True if b comes from another document.
    """

    input_ids: list
    num_segment_a: int
    masked_lm_positions: list
    masked_lm_ids: list
    is_random_next: bool


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Shortens the longer side (b when both are as long), from its front or back at random,
    until the pair fits, drawing exactly the original's random numbers.

    The original deletes one token at a time, each from the front if `rng.random() < 0.5`, else
    from the back: quadratic in the length of a long segment (a one-line document). Here the
    same draws, in the same order and for the same sides, are counted, and each side is cut
    once at the end.
    """
    lengths = [len(tokens_a), len(tokens_b)]
    from_front = [0, 0]
    random = rng.random
    while lengths[0] + lengths[1] > max_num_tokens:
        longer = 0 if lengths[0] > lengths[1] else 1
        if random() < 0.5:
            from_front[longer] += 1
        lengths[longer] -= 1
    for tokens, front, length in zip((tokens_a, tokens_b), from_front, lengths, strict=True):
        del tokens[front + length :]
        del tokens[:front]


def truncate_seq_pair_sampled(tokens_a, tokens_b, max_num_tokens, rng):
    """`truncate_seq_pair` in distribution, with one draw per side instead of one per token.

    Which side loses each token depends only on the lengths, so each side's count of removed
    tokens is fixed (`truncated_pair_lengths`); the original flips a fair coin per token for
    front or back, so the number taken from the front is Binomial(removed, 1/2): the number of
    ones among `removed` random bits.
    """
    new_lengths = truncated_pair_lengths(len(tokens_a), len(tokens_b), max_num_tokens)
    for tokens, new_length in zip((tokens_a, tokens_b), new_lengths, strict=True):
        removed = len(tokens) - new_length
        if removed:
            from_front = rng.getrandbits(removed).bit_count()
            del tokens[:from_front]
            del tokens[new_length:]


class InstanceMaker:
    """Makes the instances of one document at a time.

    Args:
      documents: A function from a document index (in the shuffled order) to its segments
        (lists of ids), and the number of documents, as `(get_document, num_documents)`.
      max_seq_length: Tokens per instance, `[CLS]` and both `[SEP]` included.
      short_seq_prob: Probability of a shorter target length.
      masker: A `Masker`.
      cls_id, sep_id: Ids of `[CLS]` and `[SEP]`.
      exact_stream: Draw exactly the original's random numbers; False truncates pairs with
        `truncate_seq_pair_sampled` (the same distribution, fewer draws).
    """

    def __init__(
        self,
        get_document,
        num_documents,
        max_seq_length,
        short_seq_prob,
        masker,
        cls_id,
        sep_id,
        exact_stream=True,
    ):
        self.truncate = truncate_seq_pair if exact_stream else truncate_seq_pair_sampled
        self.get_document = get_document
        self.num_documents = num_documents
        self.max_num_tokens = max_seq_length - 3
        self.short_seq_prob = short_seq_prob
        self.masker = masker
        self.cls_id = cls_id
        self.sep_id = sep_id

    def from_document(self, document_index, rng):
        """Yields the instances of one document, drawing on `rng` exactly as the original.

        Each instance is yielded as soon as it is made (a document can be a whole corpus
        without blank lines); the caller must draw nothing on `rng` before the next one.
        """
        document = self.get_document(document_index)
        max_num_tokens = self.max_num_tokens
        target_seq_length = max_num_tokens
        if rng.random() < self.short_seq_prob:
            target_seq_length = rng.randint(2, max_num_tokens)

        current_chunk, current_length = [], 0
        i = 0
        while i < len(document):
            current_chunk.append(document[i])
            current_length += len(document[i])
            if i == len(document) - 1 or current_length >= target_seq_length:
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)
                tokens_a = [token for segment in current_chunk[:a_end] for token in segment]
                tokens_b = []
                if len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    tokens_b = self._random_segments(document_index, target_seq_length - len(tokens_a), rng)
                    i -= len(current_chunk) - a_end  # the unused segments are read again
                else:
                    is_random_next = False
                    tokens_b = [token for segment in current_chunk[a_end:] for token in segment]
                self.truncate(tokens_a, tokens_b, max_num_tokens, rng)
                input_ids = [self.cls_id, *tokens_a, self.sep_id, *tokens_b, self.sep_id]
                positions, labels = self.masker.mask(input_ids, len(tokens_a) + 2, rng)
                yield TrainingInstance(input_ids, len(tokens_a) + 2, positions, labels, is_random_next)
                current_chunk, current_length = [], 0
            i += 1

    def _random_segments(self, document_index, target_length, rng):
        """Segments of another document, from a random one on, until `target_length` tokens.

        Like the original, ten draws look for a document other than this one; after that (a
        corpus of one document) the document itself is used.
        """
        for _ in range(10):
            random_index = rng.randint(0, self.num_documents - 1)
            if random_index != document_index:
                break
        random_document = self.get_document(random_index)
        tokens = []
        for segment in random_document[rng.randint(0, len(random_document) - 1) :]:
            tokens.extend(segment)
            if len(tokens) >= target_length:
                break
        return tokens


def create_instances(
    corpus,
    rng,
    dupe_factor,
    max_seq_length,
    short_seq_prob,
    masker,
    cls_id,
    sep_id,
    encode=lambda instance: instance,
    exact_stream=True,
):
    """All instances of a corpus, in the original's final (shuffled) order.

    Args:
      corpus: A `Corpus`.
      rng: `random.Random(random_seed)`, not used before.
      dupe_factor: Rounds over the documents, each with fresh random choices.
      max_seq_length, short_seq_prob: As the tool's flags.
      masker: A `Masker`.
      cls_id, sep_id: Ids of `[CLS]` and `[SEP]`.
      encode: Applied to each `TrainingInstance` as soon as it is made (e.g. serialising it,
        which keeps memory small, and counting it for progress); it must not draw on `rng`. The
        shuffle does not depend on what it returns.
      exact_stream: As `InstanceMaker`'s (the masker has its own).

    Returns:
      The list of `encode(instance)`, shuffled as the original shuffles its instances.
    """
    order = list(range(corpus.num_documents))
    rng.shuffle(order)  # the original shuffles its list of documents
    cache = {}

    def get_document(index):
        document = cache.get(index)
        if document is None:
            document = corpus.document(order[index])
            if len(cache) > 4096:
                cache.clear()
            cache[index] = document
        return document

    maker = InstanceMaker(
        get_document, len(order), max_seq_length, short_seq_prob, masker, cls_id, sep_id, exact_stream
    )
    instances = []
    for _ in range(dupe_factor):
        for document_index in range(len(order)):
            instances.extend(encode(i) for i in maker.from_document(document_index, rng))
    rng.shuffle(instances)
    return instances

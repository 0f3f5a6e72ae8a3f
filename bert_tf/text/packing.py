"""Packing token sequences into BERT inputs, as the original's classifier and feature code do.

`[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`; segment 0 for `[CLS] a [SEP]`, 1 for `b [SEP]`;
`input_mask` 1 for real tokens; everything zero-padded to `max_seq_length`.
"""


def truncated_pair_lengths(len_a, len_b, max_length):
    """The lengths the original's pair truncation ends at, in closed form.

    The original drops one token at a time from the longer sequence (from b when they are
    equally long) until the pair has at most `max_length` tokens. So the longer one alone is cut
    while that suffices; otherwise both end at half the budget, a with the odd token.

    Returns:
      (new_len_a, new_len_b).
    """
    excess = len_a + len_b - max_length
    if excess <= 0:
        return len_a, len_b
    if len_a - len_b >= excess:
        return len_a - excess, len_b
    if len_b - len_a >= excess:
        return len_a, len_b - excess
    half_a = (max_length + 1) // 2
    return half_a, max_length - half_a


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """Shortens a pair in place until it has at most `max_length` tokens together.

    Tokens are dropped from the end of the longer sequence (from `tokens_b` when they are
    equally long), as the original's `_truncate_seq_pair`.
    """
    new_a, new_b = truncated_pair_lengths(len(tokens_a), len(tokens_b), max_length)
    del tokens_a[new_a:]
    del tokens_b[new_b:]


def pack_inputs(tokens_a, tokens_b, max_seq_length, tokenizer):
    """Packs one example.

    Args:
      tokens_a: WordPiece tokens of the first text.
      tokens_b: WordPiece tokens of the second text, or None (or empty) for a single one.
      max_seq_length: Length of the packed sequence, special tokens included.
      tokenizer: A `FullTokenizer` (for the ids).

    Returns:
      A dict with `tokens` (the real tokens, special ones included) and the padded int lists
      `input_ids`, `input_mask`, `segment_ids` of length `max_seq_length`.

    Raises:
      ValueError: `max_seq_length` leaves no room for the special tokens.
    """
    tokens_a = list(tokens_a)
    tokens_b = list(tokens_b) if tokens_b else []
    if tokens_b:
        if max_seq_length < 3:
            raise ValueError(f"max_seq_length {max_seq_length} is too short for a pair (at least 3)")
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    else:
        if max_seq_length < 2:
            raise ValueError(f"max_seq_length {max_seq_length} is too short (at least 2)")
        tokens_a = tokens_a[: max_seq_length - 2]

    tokens = ["[CLS]", *tokens_a, "[SEP]"]
    segment_ids = [0] * len(tokens)
    if tokens_b:
        tokens += [*tokens_b, "[SEP]"]
        segment_ids += [1] * (len(tokens_b) + 1)
    padding = [0] * (max_seq_length - len(tokens))
    return {
        "tokens": tokens,
        "input_ids": tokenizer.convert_tokens_to_ids(tokens) + padding,
        "input_mask": [1] * len(tokens) + padding,
        "segment_ids": segment_ids + padding,
    }

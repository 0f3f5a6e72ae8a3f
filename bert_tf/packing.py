"""Packing token sequences into BERT inputs, as the original's classifier and feature code do.

`[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`; segment 0 for `[CLS] a [SEP]`, 1 for `b [SEP]`;
`input_mask` 1 for real tokens; everything zero-padded to `max_seq_length`.
"""


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """Shortens a pair in place until it has at most `max_length` tokens together.

    One token at a time is dropped from the end of the longer sequence (from `tokens_b` when
    they are equally long), as the original's `_truncate_seq_pair`.
    """
    while len(tokens_a) + len(tokens_b) > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


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

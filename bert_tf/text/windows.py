"""Windows over a document longer than the model's input: the original run_squad.py's rule,
shared by every job that reads long texts (SQuAD, and `--doc_stride` elsewhere).

A document of `n` WordPieces is cut into windows of at most `max_tokens_for_doc` pieces, each
starting `doc_stride` pieces after the previous one (fewer when the previous window reaches the
end); every piece is then read from the window where it has the most context.
"""

import collections

import numpy as np

DocSpan = collections.namedtuple("DocSpan", ["start", "length"])


def doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
    """The windows over a document of `num_tokens` WordPieces (none for an empty document).

    Returns:
      A list of `DocSpan(start, length)`.
    """
    spans = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append(DocSpan(start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans


def max_context_spans(spans, num_tokens):
    """For each WordPiece of the document, the window in which it has the most context.

    Context is `min(tokens to the left, tokens to the right) + 0.01 * window length`; on a
    tie the earlier window wins.

    Returns:
      A list of window indexes, one per WordPiece.
    """
    if len(spans) <= 1:
        return [0] * num_tokens
    scores = np.full((len(spans), num_tokens), -np.inf)
    for index, span in enumerate(spans):
        left = np.arange(span.length)
        scores[index, span.start : span.start + span.length] = (
            np.minimum(left, span.length - 1 - left) + 0.01 * span.length
        )
    return scores.argmax(axis=0).tolist()  # the first of equal maxima: the earlier window

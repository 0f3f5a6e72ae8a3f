"""Windows over a document longer than the model's input: the original run_squad.py's rule,
shared by every job that reads long texts (SQuAD, and `--doc_stride` elsewhere).

A document of `n` WordPieces is cut into windows of at most `max_tokens_for_doc` pieces, each
starting `doc_stride` pieces after the previous one (fewer when the previous window reaches the
end); every piece is then read from the window where it has the most context.

`--doc_stride` (`WindowOptions`) reads the documents of `run_classifier`, `run_tagger` and
`extract_features` so: windows `[CLS] pieces [SEP]` of `--max_seq_length` - 2 pieces, each
piece's output from its max-context window (`max_context_outputs`), a document's class
probabilities pooled over its windows (`pool_windows`).
"""

import collections
import dataclasses

import numpy as np

from bert_tf.options import option

DocSpan = collections.namedtuple("DocSpan", ["start", "length"])

WINDOW_POOLINGS = ("mean", "max")


@dataclasses.dataclass
class WindowOptions:
    """`--doc_stride`, the flag of every tool that reads long documents as windows (mixed into
    their options)."""

    doc_stride: int = option(
        None,
        "Read a text longer than --max_seq_length as windows of --max_seq_length - 2 WordPieces "
        "(a pair's: those left beside the first text), each starting at most this many after the "
        "previous one, every token's output from the window where it has the most context "
        "(SQuAD's rule); unset: cut it. An export gains the `text_windowed` signature.",
    )

    def validate_windows(self):
        """Raises a ValueError naming `--doc_stride` unless it is unset or at least 1."""
        if self.doc_stride is not None and self.doc_stride < 1:
            raise ValueError(f"--doc_stride must be at least 1, got {self.doc_stride}")


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
    # Window by window, each over its own pieces only (memory linear in the document's length).
    best = np.zeros(num_tokens, np.int64)
    best_scores = np.full(num_tokens, -np.inf)
    for index, span in enumerate(spans):
        left = np.arange(span.length)
        scores = np.minimum(left, span.length - 1 - left) + 0.01 * span.length
        window = slice(span.start, span.start + span.length)
        better = scores > best_scores[window]  # strictly: on a tie the earlier window stays
        best[window][better] = index
        best_scores[window][better] = scores[better]
    return best.tolist()


def window_spans(num_tokens, max_tokens_for_doc, doc_stride):
    """`doc_spans`, with one empty window for a document without WordPieces (its `[CLS]` and
    `[SEP]` still get outputs, as without windows)."""
    return doc_spans(num_tokens, max_tokens_for_doc, doc_stride) or [DocSpan(0, 0)]


def max_context_outputs(window_outputs, spans):
    """A document's per-token outputs from those of its windows, each `[CLS] pieces [SEP]`
    (the window's i-th piece at position 1 + i).

    Args:
      window_outputs: [num_windows, seq_length, ...] array, the windows' outputs in order.
      spans: The windows' `DocSpan`s (`window_spans`).

    Returns:
      [num_tokens + 2, ...] array: the first window's `[CLS]`, each WordPiece of the document
      from its max-context window (`max_context_spans`), the last window's `[SEP]`.
    """
    window_outputs = np.asarray(window_outputs)
    num_tokens = spans[-1].start + spans[-1].length
    best = np.asarray(max_context_spans(spans, num_tokens), dtype=np.int64)
    starts = np.asarray([span.start for span in spans], dtype=np.int64)
    tokens = window_outputs[best, 1 + np.arange(num_tokens) - starts[best]]
    cls, sep = window_outputs[0, 0], window_outputs[-1, spans[-1].length + 1]
    return np.concatenate([cls[None], tokens, sep[None]])


def pool_windows(window_values, document_ids, num_documents, pooling="mean"):
    """Pools the windows' values (e.g. class probabilities) per document.

    Args:
      window_values: [num_windows, ...] array.
      document_ids: Each window's document, in [0, num_documents); every document has one.
      num_documents: The documents.
      pooling: "mean", or "max" (each value's largest over the windows: probabilities so
        pooled no longer sum to 1).

    Returns:
      [num_documents, ...] array; a document of one window gets that window's values as they
      are.

    Raises:
      ValueError: `pooling` is not one of `WINDOW_POOLINGS`.
    """
    if pooling not in WINDOW_POOLINGS:
        raise ValueError(f"--window_pooling: expected one of {', '.join(WINDOW_POOLINGS)}, got {pooling!r}")
    window_values = np.asarray(window_values)
    document_ids = np.asarray(document_ids, dtype=np.int64)
    shape = (num_documents, *window_values.shape[1:])
    if pooling == "max":
        pooled = np.full(shape, -np.inf, window_values.dtype)
        np.maximum.at(pooled, document_ids, window_values)
        return pooled
    pooled = np.zeros(shape, window_values.dtype)
    np.add.at(pooled, document_ids, window_values)
    counts = np.bincount(document_ids, minlength=num_documents).astype(window_values.dtype)
    return pooled / counts.reshape((-1,) + (1,) * (window_values.ndim - 1))

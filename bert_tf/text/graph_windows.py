"""`bert_tf.text.windows` in the graph: the windows over a batch of documents, and the window
each WordPiece is read from, in TensorFlow ops (for the `text_windowed` signature).

The windows are those of `windows.doc_spans`: `max_tokens_for_doc` pieces each, the k-th
starting at `k * min(doc_stride, max_tokens_for_doc)`, the last reaching the document's end. One
difference: an empty document gets one empty window (`doc_spans` gives it none), so that every
document of a batch has outputs.
"""

import tensorflow as tf


def _window_step(max_tokens_for_doc, doc_stride):
    """How far apart the windows start: a window ends where it reaches the document's end, and
    otherwise is `max_tokens_for_doc` long, so the stride is at most that."""
    if max_tokens_for_doc < 1 or doc_stride < 1:
        raise ValueError(
            f"max_tokens_for_doc and doc_stride must be positive, got {max_tokens_for_doc} and {doc_stride}"
        )
    return min(doc_stride, max_tokens_for_doc)


def _num_windows(num_tokens, max_tokens_for_doc, step):
    """Windows per document: one, and one more per `step` the document runs past the first."""
    return 1 + (tf.maximum(num_tokens - max_tokens_for_doc, 0) + step - 1) // step


def doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
    """The windows over each document of a batch, as `windows.doc_spans` cuts them.

    Args:
      num_tokens: int [batch], the WordPieces of each document.
      max_tokens_for_doc: The most pieces in a window (a Python int).
      doc_stride: How far each window starts after the previous one (a Python int).

    Returns:
      (starts, lengths): ragged int64 [batch, (windows)], each window's first piece and its
      number of pieces; at least one window per document.
    """
    step = _window_step(max_tokens_for_doc, doc_stride)
    num_tokens = tf.cast(num_tokens, tf.int64)
    starts = tf.ragged.range(_num_windows(num_tokens, max_tokens_for_doc, step)) * step
    document = tf.gather(num_tokens, starts.value_rowids())
    lengths = tf.minimum(document - starts.flat_values, max_tokens_for_doc)
    return starts, starts.with_flat_values(lengths)


def max_context_spans(num_tokens, max_tokens_for_doc, doc_stride):
    """For each WordPiece of each document, the window (of `doc_spans`) in which it has the most
    context, as `windows.max_context_spans` picks it: the same float64 score, the earlier window
    on a tie.

    A piece lies in at most `ceil(max_tokens_for_doc / step)` windows, the last of them the one
    starting at or before it by less than `step`; only those are scored.

    Args:
      num_tokens, max_tokens_for_doc, doc_stride: As `doc_spans`.

    Returns:
      Ragged int64 [batch, (tokens)]: each piece's window, counted within its document.
    """
    step = _window_step(max_tokens_for_doc, doc_stride)
    num_tokens = tf.cast(num_tokens, tf.int64)
    windows = _num_windows(num_tokens, max_tokens_for_doc, step)
    positions = tf.ragged.range(num_tokens)
    document = positions.value_rowids()
    position = positions.flat_values[:, None]
    candidates = -(-max_tokens_for_doc // step)
    # [tokens, candidates]: the windows that may hold each piece, the earliest first.
    window = position // step - (candidates - 1) + tf.range(candidates, dtype=tf.int64)
    start = window * step
    length = tf.minimum(tf.gather(num_tokens, document)[:, None] - start, max_tokens_for_doc)
    left = position - start
    holds = (window >= 0) & (window < tf.gather(windows, document)[:, None]) & (left < length)
    score = tf.cast(tf.minimum(left, length - 1 - left), tf.float64) + 0.01 * tf.cast(length, tf.float64)
    score = tf.where(holds, score, tf.constant(-float("inf"), tf.float64))
    best = tf.reduce_max(score, axis=1, keepdims=True)
    first_best = tf.reduce_min(
        tf.where(score == best, tf.range(candidates, dtype=tf.int64), candidates), axis=1
    )
    return positions.with_flat_values(tf.gather(window, first_best[:, None], batch_dims=1)[:, 0])

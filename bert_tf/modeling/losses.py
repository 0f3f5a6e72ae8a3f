"""The losses of the original, in `keras.ops`."""

from keras import ops


def negative_log_likelihood(predictions, labels, from_logits=False):
    """`-log p(label)` of every row.

    Args:
      predictions: float [..., C] log-probabilities, or logits with `from_logits`.
      labels: int [...] class ids.
      from_logits: `predictions` are logits: `sparse_softmax_cross_entropy`, the cheaper way to
        train (its gradient is `softmax - one_hot`, with no [..., C] log-probabilities kept).

    Returns:
      float [...].
    """
    labels = ops.cast(labels, "int32")
    if from_logits:
        return sparse_softmax_cross_entropy(predictions, labels)
    return -ops.take_along_axis(predictions, ops.expand_dims(labels, -1), axis=-1)[..., 0]


def sparse_softmax_cross_entropy(logits, labels):
    """`logsumexp(logits) - logits[label]` of every row, with the gradient `softmax - one_hot`.

    The value and the gradient are those of a fused softmax cross-entropy, computed from one
    softmax: the row maximum `m` has probability `exp(m - logsumexp)`, at least 1 / C, so
    `logsumexp = m - log(max(softmax))` stays exact where a probability underflows. On
    TensorFlow's CPU kernels this is faster than `sparse_softmax_cross_entropy_with_logits` over
    the masked-LM logits, forward and backward (BUILD_NOTES.md; benchmarks/RESULTS.md).

    Args:
      logits: float [..., C].
      labels: int [...] class ids.

    Returns:
      float [...].
    """

    @ops.custom_gradient
    def cross_entropy(logits):
        probabilities = ops.softmax(logits, axis=-1)
        log_normaliser = ops.max(logits, axis=-1) - ops.log(ops.max(probabilities, axis=-1))
        label_logits = ops.take_along_axis(logits, ops.expand_dims(labels, -1), axis=-1)[..., 0]

        def gradient(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            one_hot = ops.one_hot(labels, ops.shape(logits)[-1], dtype=logits.dtype)
            return (probabilities - one_hot) * ops.expand_dims(upstream, -1)

        return log_normaliser - label_logits, gradient

    return cross_entropy(logits)


def masked_lm_loss(masked_lm_log_probs, masked_lm_ids, masked_lm_weights, from_logits=False):
    """Weighted mean of `-log p(label)` over the real predictions.

    Args:
      masked_lm_log_probs: float [batch * P, V] (logits with `from_logits`).
      masked_lm_ids: int [batch, P] labels.
      masked_lm_weights: float [batch, P], 1.0 for real predictions and 0.0 for padding.
      from_logits: See `negative_log_likelihood`.

    Returns:
      (loss, example_loss): `sum(w * nll) / (sum(w) + 1e-5)` and the unweighted
      per-slot `nll` [batch * P], padding slots included.
    """
    weights = ops.cast(ops.reshape(masked_lm_weights, (-1,)), "float32")
    example_loss = negative_log_likelihood(
        masked_lm_log_probs, ops.reshape(masked_lm_ids, (-1,)), from_logits
    )
    loss = ops.sum(weights * example_loss) / (ops.sum(weights) + 1e-5)
    return loss, example_loss


def next_sentence_loss(next_sentence_log_probs, next_sentence_labels, from_logits=False):
    """Mean cross entropy of the next-sentence prediction.

    Args:
      next_sentence_log_probs: float [batch, 2] (logits with `from_logits`).
      next_sentence_labels: int [batch, 1] or [batch]; 0 = B follows A, 1 = B is random.
      from_logits: See `negative_log_likelihood`.

    Returns:
      (loss, example_loss [batch]).
    """
    example_loss = negative_log_likelihood(
        next_sentence_log_probs, ops.reshape(next_sentence_labels, (-1,)), from_logits
    )
    return ops.mean(example_loss), example_loss

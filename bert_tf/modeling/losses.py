"""The losses of the original, in `keras.ops`."""

from keras import ops


def negative_log_likelihood(log_probs, labels):
    """`-log p(label)` of every row.

    Args:
      log_probs: float [..., C].
      labels: int [...] class ids.

    Returns:
      float [...].
    """
    labels = ops.expand_dims(ops.cast(labels, "int32"), -1)
    return -ops.take_along_axis(log_probs, labels, axis=-1)[..., 0]


def masked_lm_loss(masked_lm_log_probs, masked_lm_ids, masked_lm_weights):
    """Weighted mean of `-log p(label)` over the real predictions.

    Args:
      masked_lm_log_probs: float [batch * P, V].
      masked_lm_ids: int [batch, P] labels.
      masked_lm_weights: float [batch, P], 1.0 for real predictions and 0.0 for padding.

    Returns:
      (loss, example_loss): `sum(w * nll) / (sum(w) + 1e-5)` and the unweighted
      per-slot `nll` [batch * P], padding slots included.
    """
    weights = ops.cast(ops.reshape(masked_lm_weights, (-1,)), "float32")
    example_loss = negative_log_likelihood(masked_lm_log_probs, ops.reshape(masked_lm_ids, (-1,)))
    loss = ops.sum(weights * example_loss) / (ops.sum(weights) + 1e-5)
    return loss, example_loss


def next_sentence_loss(next_sentence_log_probs, next_sentence_labels):
    """Mean cross entropy of the next-sentence prediction.

    Args:
      next_sentence_log_probs: float [batch, 2].
      next_sentence_labels: int [batch, 1] or [batch]; 0 = B follows A, 1 = B is random.

    Returns:
      (loss, example_loss [batch]).
    """
    example_loss = negative_log_likelihood(next_sentence_log_probs, ops.reshape(next_sentence_labels, (-1,)))
    return ops.mean(example_loss), example_loss

"""The pretraining task of the original's `run_pretraining.py`: model, losses and metrics.

The loss is the original's `total_loss = masked_lm_loss + next_sentence_loss`, with
`masked_lm_loss = sum(w * nll) / (sum(w) + 1e-5)` over the masked positions and
`next_sentence_loss` the mean over the batch. The step (`bert_tf.training.step`) needs it as
terms `numerator / (denominator + epsilon)` to normalise over the global batch; the eval metrics
are the original's `metric_fn`: masked-LM accuracy and mean loss weighted by `masked_lm_weights`,
next-sentence accuracy and mean loss. Written in `keras.ops` (they run on the JAX backend too).
"""

from keras import ops

from bert_tf.modeling import BertPretrainer, masked_lm_loss, next_sentence_loss

METRIC_NAMES = ("masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss", "next_sentence_accuracy")


class PretrainingTask:
    """The masked-LM and next-sentence task on a `BertPretrainer` (with `heads_only`: the model
    computes what the losses read).

    Args:
      config: A `BertConfig`.
      dtype: The model's dtype policy (e.g. "mixed_bfloat16"); None for the global policy.
    """

    metric_names = METRIC_NAMES
    # Added to each global denominator: the original's 1e-5 for the masked LM, none for the mean.
    loss_epsilons = (1e-5, 0.0)

    def __init__(self, config, dtype=None):
        self.config = config
        self.model = BertPretrainer(config, heads_only=True, dtype=dtype)

    @staticmethod
    def loss_denominators(batch):
        """`[sum(masked_lm_weights), rows]`: what the loss terms are divided by."""
        weights = ops.cast(batch["masked_lm_weights"], "float32")
        rows = ops.cast(ops.shape(batch["next_sentence_labels"])[0], "float32")
        return [ops.sum(weights), rows]

    @staticmethod
    def loss_terms(outputs, batch):
        """The loss numerators and the metric terms of one batch.

        Args:
          outputs: `BertPretrainer` outputs.
          batch: The features of `bert_tf.data.make_pretraining_dataset`.

        Returns:
          (`[sum(w * mlm_nll), sum(nsp_nll)]`, `{metric: (numerator, denominator)}`).
        """
        weights = ops.cast(ops.reshape(batch["masked_lm_weights"], (-1,)), "float32")
        mlm_logits, nsp_logits = outputs["masked_lm_logits"], outputs["next_sentence_logits"]
        _, mlm_nll = masked_lm_loss(mlm_logits, batch["masked_lm_ids"], weights, from_logits=True)
        _, nsp_nll = next_sentence_loss(nsp_logits, batch["next_sentence_labels"], from_logits=True)

        mlm_correct = _is_top_prediction(mlm_logits, batch["masked_lm_ids"])
        nsp_correct = _is_top_prediction(nsp_logits, batch["next_sentence_labels"])
        rows = ops.cast(ops.shape(nsp_nll)[0], "float32")

        mlm_sum, nsp_sum = ops.sum(weights * mlm_nll), ops.sum(nsp_nll)
        metrics = {
            "masked_lm_loss": (mlm_sum, ops.sum(weights)),
            "masked_lm_accuracy": (ops.sum(weights * mlm_correct), ops.sum(weights)),
            "next_sentence_loss": (nsp_sum, rows),
            "next_sentence_accuracy": (ops.sum(nsp_correct), rows),
        }
        return [mlm_sum, nsp_sum], metrics


def _is_top_prediction(logits, labels):
    """1.0 where the label's logit is the largest of its row (the original's `argmax == label`).

    Comparing with the row's maximum is a single reduction; `keras.ops.argmax` on TensorFlow
    first rewrites negative zeros over the whole [batch * P, vocab] tensor, which made it as
    costly as the loss. They differ only when another logit exactly equals the label's.
    """
    labels = ops.expand_dims(ops.reshape(ops.cast(labels, "int32"), (-1,)), -1)
    label_logits = ops.take_along_axis(logits, labels, axis=-1)[:, 0]
    return ops.cast(label_logits >= ops.max(logits, axis=-1), "float32")

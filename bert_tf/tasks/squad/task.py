"""SQuAD's span loss: the original's `create_model` in `run_squad.py` on
`bert_tf.modeling.finetuning.BertSquad` (a start and an end logit per token): a softmax over the
sequence positions, and the loss is `(start_loss + end_loss) / 2`, each the mean over the batch
of the labelled position's cross entropy.
"""

from keras import ops

from bert_tf.modeling.finetuning import BertSquad
from bert_tf.modeling.losses import negative_log_likelihood


class SquadTask:
    """The span loss for `bert_tf.training.step`: the original's `(start_loss + end_loss) / 2`,
    each the mean over the batch of `-log softmax(logits)[labelled position]`; the start and
    end losses and accuracies (argmax = label) as metrics.

    Args:
      config: A `BertConfig`.
      dtype: The model's dtype policy.
    """

    metric_names = ("start_loss", "end_loss", "start_accuracy", "end_accuracy")
    loss_epsilons = (0.0,)

    def __init__(self, config, dtype=None):
        self.model = BertSquad(config, dtype=dtype)

    @staticmethod
    def loss_denominators(batch):
        """`[rows]`: the losses are means over the batch."""
        return [ops.cast(ops.shape(batch["start_positions"])[0], "float32")]

    @staticmethod
    def loss_terms(outputs, batch):
        """(`[(sum(start_nll) + sum(end_nll)) / 2]`, the start/end loss and accuracy terms)."""
        rows = ops.cast(ops.shape(batch["start_positions"])[0], "float32")
        metrics, nll_sums = {}, []
        for side in ("start", "end"):
            logits = outputs[f"{side}_logits"]
            positions = ops.reshape(ops.cast(batch[f"{side}_positions"], "int32"), (-1,))
            nll_sum = ops.sum(negative_log_likelihood(ops.log_softmax(logits, axis=-1), positions))
            correct = ops.cast(ops.argmax(logits, axis=-1) == positions, "float32")
            metrics[f"{side}_loss"] = (nll_sum, rows)
            metrics[f"{side}_accuracy"] = (ops.sum(correct), rows)
            nll_sums.append(nll_sum)
        return [(nll_sums[0] + nll_sums[1]) / 2.0], metrics

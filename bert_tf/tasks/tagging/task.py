"""The tagger's loss on `bert_tf.modeling.finetuning.BertTagger`: `sum(w * nll) / (sum(w) + 1e-5)`
over the labelled pieces, as the masked LM's.
"""

from keras import ops

from bert_tf.modeling.finetuning import BertTagger
from bert_tf.modeling.losses import negative_log_likelihood


class TaggingTask:
    """The tagger's loss and metrics for `bert_tf.training.step`: the weighted mean of the
    labelled pieces' cross entropy (module docstring); `accuracy` and `word_loss` over them,
    written as `eval_accuracy` and `eval_loss`.

    Args:
      config: A `BertConfig`.
      num_labels: The number of tags.
      dtype: The model's dtype policy.
    """

    metric_names = ("accuracy", "word_loss")
    eval_keys = {"accuracy": "eval_accuracy", "word_loss": "eval_loss"}
    loss_epsilons = (1e-5,)

    def __init__(self, config, num_labels, dtype=None):
        self.model = BertTagger(config, num_labels, dtype=dtype)

    @staticmethod
    def loss_denominators(batch):
        """`[sum(label_weights)]`."""
        return [ops.sum(batch["label_weights"])]

    @staticmethod
    def loss_terms(outputs, batch):
        """(`[sum(w * nll)]`, `{"accuracy": ..., "word_loss": ...}`) with w = `label_weights`."""
        weights = batch["label_weights"]
        labels = ops.cast(batch["label_ids"], "int32")
        weighted_nll = ops.sum(weights * negative_log_likelihood(outputs["log_probs"], labels))
        correct = ops.cast(outputs["predictions"] == labels, "float32")
        words = ops.sum(weights)
        return [weighted_nll], {
            "accuracy": (ops.sum(weights * correct), words),
            "word_loss": (weighted_nll, words),
        }

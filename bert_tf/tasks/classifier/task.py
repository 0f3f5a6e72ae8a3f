"""The classifier's loss: the original's `create_model` in `run_classifier.py` on
`bert_tf.modeling.finetuning.BertClassifier`: the mean cross entropy over the real examples;
`eval_accuracy` and `eval_loss` weighted by `is_real_example`, as the original's `metric_fn`. A
regression (`BertRegressor`): the mean squared error over the real examples.
"""

from keras import ops

from bert_tf.modeling.finetuning import BertClassifier, BertRegressor
from bert_tf.modeling.losses import negative_log_likelihood


class ClassifierTask:
    """The classifier's loss and metrics for `bert_tf.training.step`.

    The loss is the mean cross entropy over the real examples (all of a training batch, as the
    original's `reduce_mean`); `accuracy` and `example_loss` are weighted by `is_real_example`,
    written to `eval_results.txt` as the original's `eval_accuracy` and `eval_loss`.

    Args:
      config: A `BertConfig`.
      num_labels: The number of classes.
      dtype: The model's dtype policy.
    """

    metric_names = ("accuracy", "example_loss")
    eval_keys = {"accuracy": "eval_accuracy", "example_loss": "eval_loss"}
    loss_epsilons = (0.0,)

    def __init__(self, config, num_labels, dtype=None):
        self.model = BertClassifier(config, num_labels, dtype=dtype)

    @staticmethod
    def loss_denominators(batch):
        """`[sum(is_real_example)]`."""
        return [ops.sum(ops.cast(batch["is_real_example"], "float32"))]

    @staticmethod
    def loss_terms(outputs, batch):
        """(`[sum(w * nll)]`, `{"accuracy": ..., "example_loss": ...}`) with w = `is_real_example`."""
        weights = ops.cast(batch["is_real_example"], "float32")
        labels = ops.cast(batch["label_ids"], "int32")
        weighted_nll = ops.sum(weights * negative_log_likelihood(outputs["log_probs"], labels))
        correct = ops.cast(ops.argmax(outputs["logits"], axis=-1) == labels, "float32")
        real = ops.sum(weights)
        return [weighted_nll], {
            "accuracy": (ops.sum(weights * correct), real),
            "example_loss": (weighted_nll, real),
        }


class RegressionTask:
    """A regression's loss and metric for `bert_tf.training.step` (GLUE's STS-B; transformers'
    `problem_type="regression"`): the mean squared error of the score over the real examples,
    written to `eval_results.txt` as `eval_loss`.

    Args:
      config: A `BertConfig`.
      dtype: The model's dtype policy.
    """

    metric_names = ("example_loss",)
    eval_keys = {"example_loss": "eval_loss"}
    loss_epsilons = (0.0,)

    def __init__(self, config, dtype=None):
        self.model = BertRegressor(config, dtype=dtype)

    loss_denominators = staticmethod(ClassifierTask.loss_denominators)

    @staticmethod
    def loss_terms(outputs, batch):
        """(`[sum(w * (score - label)^2)]`, `{"example_loss": ...}`) with w = `is_real_example`."""
        weights = ops.cast(batch["is_real_example"], "float32")
        errors = ops.square(outputs["scores"] - ops.cast(batch["label_ids"], "float32"))
        weighted = ops.sum(weights * errors)
        return [weighted], {"example_loss": (weighted, ops.sum(weights))}

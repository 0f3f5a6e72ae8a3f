"""The classifier's model and loss: the original's `create_model` in `run_classifier.py`.

- Model: `BertClassifier`, the original's head: dropout 0.1 on the pooled output in training,
  `logits = pooled @ output_weights^T + output_bias` with `output_weights` [num_labels, H] and
  `output_bias` [num_labels] at the top level of the checkpoint (no scope), as the original's.
- Task: the mean cross entropy over the real examples; `eval_accuracy` and `eval_loss` weighted
  by `is_real_example`, as the original's `metric_fn`.
"""

import keras
from keras import ops

from bert_tf.modeling import BertModel
from bert_tf.modeling.dropout import Dropout
from bert_tf.modeling.heads import create_output_weights, output_logits
from bert_tf.modeling.losses import negative_log_likelihood
from bert_tf.modeling.serialization import BertConfigured
from bert_tf.modeling.training_forms import TrainingForms

# The original's dropout on the pooled output (keep_prob 0.9), whatever the config says.
CLASSIFIER_DROPOUT = 0.1


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(BertConfigured, TrainingForms, keras.Model):
    """`BertModel` plus the original's classification head (module docstring).

    Inputs: the dict of int [batch, seq] `input_ids`, `input_mask`, `segment_ids` (other
    features are ignored).
    Outputs: float32 `logits`, `probabilities` and `log_probs` [batch, num_labels].

    Args:
      config: A `BertConfig` (or its dict).
      num_labels: The number of classes.
      dtype: The dtype policy (e.g. "mixed_bfloat16"); the head computes in float32.
    """

    def __init__(self, config, num_labels, name="bert_classifier", dtype=None, **kwargs):
        super().__init__(config, name=name, dtype=dtype, **kwargs)
        config = self.config
        self.num_labels = num_labels
        self.bert = BertModel(config, dtype=self.dtype_policy)
        # Created here, outside any layer's scope: the original's top-level names.
        self.output_weights, self.output_bias = create_output_weights(num_labels, config.hidden_size)
        self.dropout = Dropout(CLASSIFIER_DROPOUT, dtype=self.dtype_policy)
        self.built = True

    def get_config(self):
        config = super().get_config()
        config["num_labels"] = self.num_labels
        return config

    def call(self, inputs, training=False):
        pooled_output = self.dropout(self.bert(inputs, training=training)["pooled_output"], training=training)
        logits = output_logits(pooled_output, self.output_weights, self.output_bias)
        return {
            "logits": logits,
            "probabilities": ops.softmax(logits, axis=-1),
            "log_probs": ops.log_softmax(logits, axis=-1),
        }


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

"""The tagger's model and loss.

- Model: `BertTagger`: dropout 0.1 on the sequence output in training (as the original's
  classifier does on the pooled output), then `cls/tagging/output_weights` [num_labels, H] and
  `cls/tagging/output_bias` [num_labels].
- Loss: `sum(w * nll) / (sum(w) + 1e-5)` over the labelled pieces, as the masked LM's.
"""

import keras
from keras import ops

from bert_tf.modeling import BertModel
from bert_tf.modeling.dropout import Dropout
from bert_tf.modeling.heads import ClsOutput
from bert_tf.modeling.losses import negative_log_likelihood
from bert_tf.modeling.serialization import BertConfigured
from bert_tf.modeling.training_forms import TrainingForms

TAGGING_DROPOUT = 0.1


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTagger(BertConfigured, TrainingForms, keras.Model):
    """`BertModel` plus a tagging head (module docstring).

    Inputs: the dict of int [batch, seq] `input_ids`, `input_mask`, `segment_ids`.
    Outputs: float32 `logits`, `probabilities` and `log_probs` [batch, seq, num_labels], int32
    `predictions` [batch, seq].

    Args:
      config: A `BertConfig` (or its dict).
      num_labels: The number of tags.
      dtype: The dtype policy; the head computes in float32.
    """

    def __init__(self, config, num_labels, name="bert_tagger", dtype=None, **kwargs):
        super().__init__(config, name=name, dtype=dtype, **kwargs)
        config = self.config
        self.num_labels = num_labels
        self.bert = BertModel(config, dtype=self.dtype_policy)
        # The loss does not reach the pooler; the original's optimizer leaves such variables
        # alone (no update, no Adam slots), and so does training them not at all.
        self.bert.pooler.trainable = False
        self.cls = ClsOutput("tagging", num_labels, config.hidden_size, dtype=self.dtype_policy)
        self.cls.build()
        self.dropout = Dropout(TAGGING_DROPOUT, dtype=self.dtype_policy)
        self.built = True

    def get_config(self):
        config = super().get_config()
        config["num_labels"] = self.num_labels
        return config

    def call(self, inputs, training=False):
        sequence_output = self.bert(inputs, training=training)["sequence_output"]
        logits = self.cls(self.dropout(sequence_output, training=training))
        return {
            "logits": logits,
            "probabilities": ops.softmax(logits, axis=-1),
            "log_probs": ops.log_softmax(logits, axis=-1),
            "predictions": ops.cast(ops.argmax(logits, axis=-1), "int32"),
        }


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

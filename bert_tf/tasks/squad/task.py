"""SQuAD's span model and loss: the original's `create_model` in `run_squad.py`.

Head (`BertSquad`, `SquadTask`): `cls/squad/output_weights` [2, H] and `cls/squad/output_bias`
[2] on the last encoder layer give each token a start and an end logit; a softmax over the
sequence positions, and the loss is `(start_loss + end_loss) / 2`, each the mean over the batch
of the labelled position's cross entropy.
"""

import keras
from keras import ops

from bert_tf.modeling import BertModel
from bert_tf.modeling.heads import ClsOutput
from bert_tf.modeling.losses import negative_log_likelihood
from bert_tf.modeling.serialization import BertConfigured
from bert_tf.modeling.training_forms import TrainingForms


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSquad(BertConfigured, TrainingForms, keras.Model):
    """`BertModel` plus the span head: the original's `run_squad.create_model`.

    Variables: `BertModel`'s, then `cls/squad/output_weights` [2, H] (row 0 start, row 1 end;
    truncated normal, stddev 0.02) and `cls/squad/output_bias` [2]. The loss does not reach the
    pooler, which is therefore not trained (the original's optimizer skips a variable without
    a gradient: no update, no Adam slots); it is still saved and loaded.

    Inputs: the dict of int [batch, seq] `input_ids`, `input_mask`, `segment_ids` (other
    features are ignored).
    Outputs: float32 [batch, seq] `start_logits` and `end_logits`.

    Args:
      config: A `BertConfig` (or its dict).
      dtype: The dtype policy (e.g. "mixed_bfloat16"); the head computes in float32.
    """

    def __init__(self, config, name="bert_squad", dtype=None, **kwargs):
        super().__init__(config, name=name, dtype=dtype, **kwargs)
        config = self.config
        self.bert = BertModel(config, dtype=self.dtype_policy)
        self.bert.pooler.trainable = False
        self.cls = ClsOutput("squad", 2, config.hidden_size, dtype=self.dtype_policy)
        self.cls.build()
        self.built = True

    def call(self, inputs, training=False):
        logits = self.cls(self.bert(inputs, training=training)["sequence_output"])
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}


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

"""The fine-tuning models: one output layer on the shared `BertModel`, as the original's
`create_model` of `run_classifier.py` and `run_squad.py` builds them.

Every model here is `BertWithHead`: the backbone `bert` (every `bert/...` variable, in the
original's order), then its head's `output_weights` [width, H] and `output_bias` [width] (see
`bert_tf.modeling.heads.create_output_weights`), at the top level (the original's classifier) or
under `cls/<scope>/`. A head reads the pooled output (the `[CLS]` vector after the pooler) or
the last layer's sequence output, through dropout 0.1 in training where the head has it (the
original's classifier's `keep_prob=0.9`, whatever the config's dropout). A head that reads the
sequence output leaves the pooler untrained (`trainable = False`): the original's optimizer
skips a variable without a gradient (no update, no Adam slots).

- `BertClassifier`: the pooled output, dropout, top-level `output_weights` [labels, H]; `logits`,
  `probabilities`, `log_probs` [batch, labels].
- `BertRegressor`: the same with one output; `scores` [batch].
- `BertMultipleChoice`: each choice's pooled output, dropout, `cls/multiple_choice/output_weights`
  [1, H]; `logits`, `probabilities`, `log_probs` [batch, choices] (a softmax across the choices).
- `BertTagger`: the sequence output, dropout, `cls/tagging/output_weights` [labels, H]; `logits`,
  `probabilities`, `log_probs` [batch, seq, labels], `predictions` [batch, seq].
- `BertSquad`: the sequence output, `cls/squad/output_weights` [2, H]; `start_logits`, `end_logits`
  [batch, seq].

The outputs are float32 whatever the dtype policy. `bert_tf.modeling.head_table` lists the heads
with their names in checkpoints, in Hugging Face's models and in exports.
"""

import keras
from keras import ops

from bert_tf.modeling.dropout import Dropout
from bert_tf.modeling.heads import ClsOutput, create_output_weights, output_logits
from bert_tf.modeling.models import BertModel
from bert_tf.modeling.serialization import BertConfigured
from bert_tf.modeling.training_forms import TrainingForms

# The original's dropout before a fine-tuning output layer (keep_prob 0.9), whatever the config says.
HEAD_DROPOUT = 0.1


class BertWithHead(BertConfigured, TrainingForms, keras.Model):
    """`BertModel` plus one fine-tuning output layer (module docstring).

    A subclass sets the class attributes and `head_outputs`:

    - `scope`: None for top-level `output_weights`/`output_bias`, else their scope under `cls`.
    - `reads`: "pooled_output" or "sequence_output".
    - `dropout_rate`: the dropout on the head's input in training (0: none).
    - `width`: the output layer's rows, None for `num_labels`.

    Inputs: the dict of int [batch, seq] `input_ids`, `input_mask`, `segment_ids` (other
    features are ignored).

    Args:
      config: A `BertConfig` (or its dict).
      num_labels: The number of classes or tags of a head whose `width` is None; None otherwise.
      name: The model's name (no variable path includes it).
      dtype: The dtype policy (e.g. "mixed_bfloat16"); the head computes in float32.
    """

    scope = None
    reads = "pooled_output"
    dropout_rate = HEAD_DROPOUT
    width = None

    def __init__(self, config, num_labels=None, name=None, dtype=None, **kwargs):
        super().__init__(config, name=name, dtype=dtype, **kwargs)
        if (num_labels is None) != (self.width is not None):
            wanted = "no num_labels" if self.width is not None else "num_labels"
            raise ValueError(f"{type(self).__name__} takes {wanted}, got num_labels={num_labels}")
        self.num_labels = num_labels
        hidden_size = self.config.hidden_size
        self.bert = BertModel(self.config, dtype=self.dtype_policy)
        if self.reads == "sequence_output":
            self.bert.pooler.trainable = False
        # Created here, outside this model's own scope: the top-level names, or `cls/<scope>/...`.
        if self.scope is None:
            self.output_weights, self.output_bias = create_output_weights(self.num_outputs, hidden_size)
        else:
            self.cls = ClsOutput(self.scope, self.num_outputs, hidden_size, dtype=self.dtype_policy)
            self.cls.build()
        self.dropout = Dropout(self.dropout_rate, dtype=self.dtype_policy) if self.dropout_rate else None
        self.built = True

    @property
    def num_outputs(self):
        """The rows of `output_weights`."""
        return self.width if self.width is not None else self.num_labels

    def get_config(self):
        config = super().get_config()
        if self.num_labels is not None:
            config["num_labels"] = self.num_labels
        return config

    def logits(self, inputs, training):
        """The output layer's float32 logits [..., width] on the head's input."""
        x = self.bert(inputs, training=training)[self.reads]
        if self.dropout is not None:
            x = self.dropout(x, training=training)
        if self.scope is None:
            return output_logits(x, self.output_weights, self.output_bias)
        return self.cls(x)

    def call(self, inputs, training=False):
        return self.head_outputs(self.logits(inputs, training))

    def head_outputs(self, logits):
        """The model's outputs by name, from the output layer's logits."""
        raise NotImplementedError


def _class_outputs(logits):
    return {
        "logits": logits,
        "probabilities": ops.softmax(logits, axis=-1),
        "log_probs": ops.log_softmax(logits, axis=-1),
    }


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(BertWithHead):
    """The original's classifier: `pooled @ output_weights^T + output_bias`, the variables at the
    top level of the checkpoint (no scope). Outputs `logits`, `probabilities`, `log_probs`
    [batch, num_labels]."""

    def __init__(self, config, num_labels, name="bert_classifier", dtype=None, **kwargs):
        super().__init__(config, num_labels, name=name, dtype=dtype, **kwargs)

    def head_outputs(self, logits):
        return _class_outputs(logits)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertRegressor(BertWithHead):
    """The classifier's layout with one output, a score (GLUE's STS-B; Hugging Face's
    `BertForSequenceClassification` with `num_labels=1`). Outputs `scores` [batch]."""

    width = 1

    def __init__(self, config, name="bert_regressor", dtype=None, **kwargs):
        super().__init__(config, name=name, dtype=dtype, **kwargs)

    def head_outputs(self, logits):
        return {"scores": logits[..., 0]}


@keras.saving.register_keras_serializable(package="bert_tf")
class BertMultipleChoice(BertWithHead):
    """Multiple choice (SWAG), as the BERT paper's: each choice's pooled output scored by
    `cls/multiple_choice/output_weights` [1, H] (+ `output_bias` [1]), a softmax across the
    choices.

    Inputs: `input_ids`, `input_mask`, `segment_ids`, int [batch, choices, seq] (each choice
    packed as a sequence pair). Outputs `logits`, `probabilities`, `log_probs` [batch, choices].
    """

    scope = "multiple_choice"
    width = 1

    def __init__(self, config, name="bert_multiple_choice", dtype=None, **kwargs):
        super().__init__(config, name=name, dtype=dtype, **kwargs)

    def call(self, inputs, training=False):
        shape = ops.shape(inputs["input_ids"])
        flat = {
            key: ops.reshape(inputs[key], (-1, shape[-1]))
            for key in ("input_ids", "input_mask", "segment_ids")
        }
        logits = ops.reshape(self.logits(flat, training), (shape[0], shape[1]))
        return _class_outputs(logits)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTagger(BertWithHead):
    """A tag for every token: `cls/tagging/output_weights` [num_labels, H] on the sequence output
    after dropout (bert_tf's head, the classifier's on every position). Outputs `logits`,
    `probabilities`, `log_probs` [batch, seq, num_labels], int32 `predictions` [batch, seq]."""

    scope = "tagging"
    reads = "sequence_output"

    def __init__(self, config, num_labels, name="bert_tagger", dtype=None, **kwargs):
        super().__init__(config, num_labels, name=name, dtype=dtype, **kwargs)

    def head_outputs(self, logits):
        return dict(_class_outputs(logits), predictions=ops.cast(ops.argmax(logits, axis=-1), "int32"))


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSquad(BertWithHead):
    """The original's SQuAD span head: `cls/squad/output_weights` [2, H] (row 0 start, row 1 end)
    on the sequence output, no dropout. Outputs `start_logits`, `end_logits` [batch, seq]."""

    scope = "squad"
    reads = "sequence_output"
    dropout_rate = 0.0
    width = 2

    def __init__(self, config, name="bert_squad", dtype=None, **kwargs):
        super().__init__(config, name=name, dtype=dtype, **kwargs)

    def head_outputs(self, logits):
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}

"""`BertModel` and `BertPretrainer`: the layers assembled in the original's checkpoint layout."""

import keras
from keras import ops

from bert_tf.modeling.embeddings import Embeddings
from bert_tf.modeling.encoder import Encoder
from bert_tf.modeling.heads import PretrainingHeads
from bert_tf.modeling.pooler import Pooler
from bert_tf.modeling.serialization import BertConfigured
from bert_tf.modeling.training_forms import TrainingForms


@keras.saving.register_keras_serializable(package="bert_tf")
class BertModel(BertConfigured, TrainingForms, keras.Model):
    """The `bert` scope of the original: embeddings, encoder and pooler.

    Every variable's `path` is its name in a Google checkpoint
    (`bert/encoder/layer_3/attention/self/query/kernel`, ...), and `model.weights` lists them in
    the order the original creates them. The variables depend only on the config, so the model
    is built when it is constructed.

    Inputs: a dict of int [batch, seq] tensors `input_ids`, `input_mask` (1 real, 0 padding)
    and `segment_ids`.
    Outputs: a dict with `embedding_output` [batch, seq, H], `all_encoder_layers` (a list of L
    [batch, seq, H]), `sequence_output` (the last of them) and `pooled_output` [batch, H].
    """

    def __init__(self, config, name="bert", **kwargs):
        """Args:
        config: A `BertConfig` (or its dict).
        name: Top-level scope; "bert" gives the original's variable names.
        """
        super().__init__(config, name=name, **kwargs)
        self.embeddings = Embeddings(self.config, dtype=self.dtype_policy)
        self.encoder = Encoder(self.config, dtype=self.dtype_policy)
        self.pooler = Pooler(self.config, dtype=self.dtype_policy)
        self.build()

    def build(self, input_shape=None):
        self.embeddings.build()
        self.encoder.build()
        self.pooler.build()

    def call(self, inputs, training=False):
        embedding_output = self.embeddings(inputs["input_ids"], inputs["segment_ids"], training=training)
        all_encoder_layers = self.encoder(embedding_output, inputs["input_mask"], training=training)
        sequence_output = all_encoder_layers[-1]
        return {
            "embedding_output": embedding_output,
            "all_encoder_layers": all_encoder_layers,
            "sequence_output": sequence_output,
            "pooled_output": self.pooler(sequence_output),
        }


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPretrainer(BertConfigured, TrainingForms, keras.Model):
    """`BertModel` plus the two pretraining heads of the original (`cls/predictions`,
    `cls/seq_relationship`).

    Inputs: `BertModel`'s, plus int [batch, P] `masked_lm_positions`.
    Outputs: `BertModel`'s (not with `heads_only`), plus float32 `masked_lm_logits` and
    `masked_lm_log_probs` [batch * P, V] (the original's flattened order), `next_sentence_logits`
    and `next_sentence_log_probs` [batch, 2]. Losses take the logits (`sparse_softmax_cross_entropy`);
    inside a `tf.function` the log-probabilities cost nothing when unused.
    """

    def __init__(self, config, heads_only=False, name="bert_pretrainer", **kwargs):
        """Args:
        config: A `BertConfig` (or its dict).
        heads_only: Output the heads' four tensors only. The last encoder layer is then
          computed at [CLS] and the masked positions alone (every position still serves as its
          keys and values), which is all the heads read: the same values, and less work for
          the last layer. The pretraining task trains this way.
        name: Top-level scope (no variable path includes it).
        """
        super().__init__(config, name=name, **kwargs)
        self.heads_only = heads_only
        self.bert = BertModel(self.config, dtype=self.dtype_policy)
        self.cls = PretrainingHeads(self.config, dtype=self.dtype_policy)
        # Built here, outside this model's own scope, so the paths start with `cls/` as the
        # original's do (`bert/` comes from BertModel, built the same way).
        self.cls.build()
        self.built = True

    def get_config(self):
        config = super().get_config()
        config["heads_only"] = self.heads_only
        return config

    def call(self, inputs, training=False):
        masked_lm_positions = inputs["masked_lm_positions"]
        if self.heads_only:
            outputs = {}
            sequence_output = self._rows_read_by_heads(inputs, training)
            pooled_output = self.bert.pooler(sequence_output)
            # Rows 1..P of sequence_output are the masked positions, in their order.
            predictions = ops.shape(masked_lm_positions)[1]
            rows = ops.arange(1, predictions + 1, dtype=masked_lm_positions.dtype)
            masked_lm_positions = ops.broadcast_to(rows[None, :], ops.shape(masked_lm_positions))
        else:
            outputs = self.bert(inputs, training=training)
            sequence_output, pooled_output = outputs["sequence_output"], outputs["pooled_output"]
        masked_lm_logits, next_sentence_logits = self.cls(
            sequence_output, pooled_output, masked_lm_positions, self.bert.embeddings.word_embeddings
        )
        return dict(
            outputs,
            masked_lm_logits=masked_lm_logits,
            masked_lm_log_probs=ops.log_softmax(masked_lm_logits, axis=-1),
            next_sentence_logits=next_sentence_logits,
            next_sentence_log_probs=ops.log_softmax(next_sentence_logits, axis=-1),
        )

    def _rows_read_by_heads(self, inputs, training):
        """The last layer's output at [CLS] and the masked positions: float [batch, 1 + P, H]."""
        masked_lm_positions = inputs["masked_lm_positions"]
        positions = ops.concatenate([ops.zeros_like(masked_lm_positions[:, :1]), masked_lm_positions], axis=1)
        bert = self.bert
        embedding_output = bert.embeddings(inputs["input_ids"], inputs["segment_ids"], training=training)
        layers = bert.encoder(
            embedding_output, inputs["input_mask"], training=training, last_layer_positions=positions
        )
        return layers[-1]

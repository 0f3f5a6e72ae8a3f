"""The pretraining heads under `cls`: masked LM (`predictions`) and next sentence (`seq_relationship`)."""

import keras
from keras import ops

from bert_tf.modeling.activations import get_activation
from bert_tf.modeling.initializers import create_initializer, dense
from bert_tf.modeling.layer_norm import LayerNorm


def gather_indexes(sequence_tensor, positions):
    """Gathers the vectors at `positions` of each sequence.

    Args:
      sequence_tensor: float [batch, seq, H].
      positions: int [batch, P] positions in each sequence.

    Returns:
      float [batch * P, H], rows in batch-major order as the original flattens them.
    """
    gathered = ops.take_along_axis(sequence_tensor, ops.expand_dims(positions, -1), axis=1)
    return ops.reshape(gathered, (-1, ops.shape(sequence_tensor)[-1]))


class MaskedLMTransform(keras.layers.Layer):
    """`transform`: dense [H, H] with `hidden_act`, then LayerNorm."""

    def __init__(self, config, name="transform", **kwargs):
        super().__init__(name=name, **kwargs)
        self.hidden_size = config.hidden_size
        self.dense = dense(config.hidden_size, config, self.dtype_policy, get_activation(config.hidden_act))
        self.layer_norm = LayerNorm(config.hidden_size, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.dense.build((None, self.hidden_size))
        self.layer_norm.build()

    def call(self, x):
        return self.layer_norm(self.dense(x))


class TiedOutputLogits(keras.layers.Layer):
    """`x @ word_embeddings^T + output_bias`: the MLM output layer, tied to the input embeddings.

    It holds `output_bias` but does not create it: `MaskedLMHead` creates it in its own scope
    (so the path is `cls/predictions/output_bias`) after the transform, and hands it over, so
    that Keras lists it after `transform/*`, in the original's creation order.
    """

    def __init__(self, output_bias, name="output_logits", **kwargs):
        super().__init__(name=name, **kwargs)
        self.output_bias = output_bias
        self.built = True

    def call(self, x, word_embeddings):
        """Args:
          x: float [N, H].
          word_embeddings: the [V, H] table of `bert/embeddings`.

        Returns:
          float [N, V] logits.
        """
        return ops.matmul(x, ops.transpose(word_embeddings)) + self.output_bias


class MaskedLMHead(keras.layers.Layer):
    """`predictions`: log-probabilities over the vocabulary at the masked positions."""

    def __init__(self, config, name="predictions", **kwargs):
        """Args:
        config: A `BertConfig`.
        name: Variable scope; the original's is "predictions".
        """
        super().__init__(name=name, **kwargs)
        self.vocab_size = config.vocab_size
        self.transform = MaskedLMTransform(config, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.transform.build()
        output_bias = keras.Variable(
            initializer="zeros",
            shape=(self.vocab_size,),
            dtype=self.variable_dtype,
            name="output_bias",
        )
        self.output_logits = TiedOutputLogits(output_bias, dtype=self.dtype_policy)

    def call(self, sequence_output, masked_lm_positions, word_embeddings):
        """Args:
          sequence_output: float [batch, seq, H].
          masked_lm_positions: int [batch, P].
          word_embeddings: the [V, H] word embedding table (the tied output weights).

        Returns:
          float32 [batch * P, V] log-probabilities.
        """
        x = self.transform(gather_indexes(sequence_output, masked_lm_positions))
        logits = self.output_logits(x, word_embeddings)
        return ops.log_softmax(ops.cast(logits, "float32"), axis=-1)


class NextSentenceHead(keras.layers.Layer):
    """`seq_relationship`: `log_softmax(pooled @ output_weights^T + output_bias)`.

    `output_weights` is [2, H] (transposed relative to a Keras Dense kernel). Class 0 means
    "B is the real next sentence", class 1 "B is random".
    """

    def __init__(self, config, name="seq_relationship", **kwargs):
        super().__init__(name=name, **kwargs)
        self.hidden_size = config.hidden_size
        self.initializer = create_initializer(config.initializer_range)

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(2, self.hidden_size), initializer=self.initializer
        )
        self.output_bias = self.add_weight(name="output_bias", shape=(2,), initializer="zeros")

    def call(self, pooled_output):
        """Args:
          pooled_output: float [batch, H].

        Returns:
          float32 [batch, 2] log-probabilities.
        """
        logits = ops.matmul(pooled_output, ops.transpose(self.output_weights)) + self.output_bias
        return ops.log_softmax(ops.cast(logits, "float32"), axis=-1)


class PretrainingHeads(keras.layers.Layer):
    """`cls`: the masked LM head, then the next-sentence head."""

    def __init__(self, config, name="cls", **kwargs):
        super().__init__(name=name, **kwargs)
        self.predictions = MaskedLMHead(config, dtype=self.dtype_policy)
        self.seq_relationship = NextSentenceHead(config, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.predictions.build()
        self.seq_relationship.build()

    def call(self, sequence_output, pooled_output, masked_lm_positions, word_embeddings):
        """Returns:
        (masked_lm_log_probs [batch * P, V], next_sentence_log_probs [batch, 2]).
        """
        masked_lm_log_probs = self.predictions(sequence_output, masked_lm_positions, word_embeddings)
        return masked_lm_log_probs, self.seq_relationship(pooled_output)


def create_output_weights(num_outputs, hidden_size, initializer_range=0.02):
    """The variables of a fine-tuning output layer of the original, in the current name scope.

    The original's classifier (at the top level), SQuAD (`cls/squad`) and tagging
    (`cls/tagging`, bert_tf's) heads each create `output_weights` [num_outputs, H] (truncated
    normal, stddev 0.02) and `output_bias` [num_outputs] (zeros); see `output_logits`.

    Returns:
      (output_weights, output_bias) as `keras.Variable`s.
    """
    # Not autocast under mixed precision: the logits are computed in float32.
    output_weights = keras.Variable(
        initializer=create_initializer(initializer_range),
        shape=(num_outputs, hidden_size),
        name="output_weights",
        autocast=False,
    )
    output_bias = keras.Variable(
        initializer="zeros", shape=(num_outputs,), name="output_bias", autocast=False
    )
    return output_weights, output_bias


def output_logits(x, output_weights, output_bias):
    """`x @ output_weights^T + output_bias`, in float32 (as the variables).

    Args:
      x: float [..., H] (any compute dtype).
      output_weights: [num_outputs, H].
      output_bias: [num_outputs].

    Returns:
      float32 [..., num_outputs] logits.
    """
    return ops.matmul(ops.cast(x, "float32"), ops.transpose(output_weights)) + output_bias


class ClsOutput(keras.layers.Layer):
    """A fine-tuning output layer under `cls/<scope>`: `cls/squad/output_weights` [2, H] and
    `cls/squad/output_bias` [2] for the original's SQuAD head, `cls/tagging/...` for tagging.

    Args:
      scope: The scope under `cls` ("squad", "tagging").
      num_outputs: Rows of `output_weights`.
      hidden_size: H.

    Build it in the owning model's `__init__` (outside the model's own scope), as
    `BertPretrainer` builds `cls`, so that the paths start with `cls/`.
    """

    def __init__(self, scope, num_outputs, hidden_size, **kwargs):
        super().__init__(name="cls", **kwargs)
        self.scope = scope
        self.num_outputs = num_outputs
        self.hidden_size = hidden_size

    def build(self, input_shape=None):
        with keras.name_scope(self.scope):
            self.output_weights, self.output_bias = create_output_weights(self.num_outputs, self.hidden_size)

    def call(self, x):
        """Returns float32 [..., num_outputs] logits of x [..., H]."""
        return output_logits(x, self.output_weights, self.output_bias)

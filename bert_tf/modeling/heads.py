"""The pretraining heads under `cls`: masked LM (`predictions`) and next sentence (`seq_relationship`)."""

import keras
from keras import ops

from bert_tf.modeling.activations import get_activation
from bert_tf.modeling.gather import gather_indexes
from bert_tf.modeling.initializers import create_initializer, dense
from bert_tf.modeling.layer_norm import LayerNorm
from bert_tf.modeling.serialization import BertConfigured


def matmul_transposed(x, weights):
    """`x @ weights^T`, for output layers whose weights are stored [K, H] (as the original's).

    The gradient of `weights` is computed in its own [K, H] layout, `upstream^T @ x`; autodiff
    through a transpose computes it [H, K] and then transposes it, which for the tied
    [30522, 768] word embeddings is an extra 94 MB copy every step on a CPU.

    Args:
      x: float [..., H].
      weights: float [K, H] (a variable or tensor; cast to x's dtype).

    Returns:
      float [..., K], of x's dtype.
    """

    @ops.custom_gradient
    def product(x, weights):
        rows = ops.reshape(x, (-1, ops.shape(x)[-1]))

        def gradient(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            upstream_rows = ops.reshape(upstream, (-1, ops.shape(weights)[0]))
            x_gradient = ops.reshape(ops.matmul(upstream_rows, weights), ops.shape(x))
            return x_gradient, ops.matmul(ops.transpose(upstream_rows), rows)

        return ops.matmul(x, ops.transpose(weights)), gradient

    return product(x, ops.cast(weights, x.dtype))


@keras.saving.register_keras_serializable(package="bert_tf")
class MaskedLMTransform(BertConfigured, keras.layers.Layer):
    """`transform`: dense [H, H] with `hidden_act`, then LayerNorm."""

    def __init__(self, config, name="transform", **kwargs):
        super().__init__(config, name=name, **kwargs)
        config = self.config
        self.hidden_size = config.hidden_size
        self.dense = dense(config.hidden_size, config, self.dtype_policy, get_activation(config.hidden_act))
        self.layer_norm = LayerNorm(config.hidden_size, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.dense.build((None, self.hidden_size))
        self.layer_norm.build()

    def call(self, x):
        return self.layer_norm(self.dense(x))


@keras.saving.register_keras_serializable(package="bert_tf")
class TiedOutputLogits(keras.layers.Layer):
    """`x @ word_embeddings^T + output_bias`: the MLM output layer, tied to the input embeddings.

    Its only variable, `output_bias` [vocab_size], is created with the layer, in the name scope
    open at that moment rather than a scope of its own. `MaskedLMHead` constructs this layer in
    its `build`, after the transform, so the bias is `cls/predictions/output_bias` and Keras
    lists it after `transform/*`, both as in the original.
    """

    def __init__(self, vocab_size, name="output_logits", **kwargs):
        """Args:
        vocab_size: Number of logits, the rows of the word embedding table.
        name: Layer name (no variable path includes it).
        """
        super().__init__(name=name, **kwargs)
        self.vocab_size = vocab_size
        self.output_bias = keras.Variable(
            initializer="zeros",
            shape=(vocab_size,),
            dtype=self.variable_dtype,
            trainable=self.trainable,
            name="output_bias",
            autocast=False,
        )
        self.built = True

    def get_config(self):
        config = super().get_config()
        config["vocab_size"] = self.vocab_size
        return config

    def call(self, x, word_embeddings):
        """Args:
          x: float [N, H].
          word_embeddings: the [V, H] table of `bert/embeddings`.

        Returns:
          float32 [N, V] logits.
        """
        # The float32 table (not autocast, see Embeddings) is cast once, to x's dtype. The bias
        # is added in float32, after the product: a float16 matmul with its bias and a
        # transposed operand is what TensorFlow's oneDNN fuses into one kernel, which runs
        # this [N, H] x [H, V] product about 500x slower than the matmul alone (4.4 s against
        # 7.7 ms at 60 x 128 x 30522 on an AVX-512 Xeon; BUILD_NOTES "Mixed precision").
        logits = ops.cast(matmul_transposed(x, word_embeddings), "float32")
        return logits + self.output_bias


@keras.saving.register_keras_serializable(package="bert_tf")
class MaskedLMHead(BertConfigured, keras.layers.Layer):
    """`predictions`: logits over the vocabulary at the masked positions."""

    def __init__(self, config, name="predictions", **kwargs):
        """Args:
        config: A `BertConfig` (or its dict).
        name: Variable scope; the original's is "predictions".
        """
        super().__init__(config, name=name, **kwargs)
        self.transform = MaskedLMTransform(self.config, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.transform.build()
        # Constructed here, in this layer's scope, after the transform: see TiedOutputLogits.
        self.output_logits = TiedOutputLogits(
            self.config.vocab_size, dtype=self.dtype_policy, trainable=self.trainable
        )

    def call(self, sequence_output, masked_lm_positions, word_embeddings):
        """Args:
          sequence_output: float [batch, seq, H].
          masked_lm_positions: int [batch, P].
          word_embeddings: the [V, H] word embedding table (the tied output weights).

        Returns:
          float32 [batch * P, V] logits.
        """
        x = self.transform(gather_indexes(sequence_output, masked_lm_positions))
        return self.output_logits(x, word_embeddings)


@keras.saving.register_keras_serializable(package="bert_tf")
class NextSentenceHead(BertConfigured, keras.layers.Layer):
    """`seq_relationship`: the logits `pooled @ output_weights^T + output_bias`.

    `output_weights` is [2, H] (transposed relative to a Keras Dense kernel). Class 0 means
    "B is the real next sentence", class 1 "B is random".
    """

    def __init__(self, config, name="seq_relationship", **kwargs):
        super().__init__(config, name=name, **kwargs)
        self.hidden_size = self.config.hidden_size
        self.initializer = create_initializer(self.config.initializer_range)

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(2, self.hidden_size), initializer=self.initializer
        )
        self.output_bias = self.add_weight(name="output_bias", shape=(2,), initializer="zeros")

    def call(self, pooled_output):
        """Args:
          pooled_output: float [batch, H].

        Returns:
          float32 [batch, 2] logits.
        """
        logits = matmul_transposed(pooled_output, self.output_weights) + self.output_bias
        return ops.cast(logits, "float32")


@keras.saving.register_keras_serializable(package="bert_tf")
class PretrainingHeads(BertConfigured, keras.layers.Layer):
    """`cls`: the masked LM head, then the next-sentence head."""

    def __init__(self, config, name="cls", **kwargs):
        super().__init__(config, name=name, **kwargs)
        self.predictions = MaskedLMHead(self.config, dtype=self.dtype_policy)
        self.seq_relationship = NextSentenceHead(self.config, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.predictions.build()
        self.seq_relationship.build()

    def call(self, sequence_output, pooled_output, masked_lm_positions, word_embeddings):
        """Returns:
        (masked_lm_logits [batch * P, V], next_sentence_logits [batch, 2]), float32.
        """
        masked_lm_logits = self.predictions(sequence_output, masked_lm_positions, word_embeddings)
        return masked_lm_logits, self.seq_relationship(pooled_output)


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
    return matmul_transposed(ops.cast(x, "float32"), output_weights) + output_bias


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

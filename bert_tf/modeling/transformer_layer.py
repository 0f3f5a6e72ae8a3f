"""One `encoder/layer_{i}`: attention, then the feed-forward block, both post-LN."""

import functools

import keras
from keras import ops

from bert_tf.modeling.activations import get_activation
from bert_tf.modeling.attention import Attention
from bert_tf.modeling.dense_output import DenseOutput
from bert_tf.modeling.initializers import dense
from bert_tf.modeling.serialization import BertConfigured


@keras.saving.register_keras_serializable(package="bert_tf")
class TransformerLayer(BertConfigured, keras.layers.Layer):
    """`attention` -> `intermediate` (dense to I with `hidden_act`) -> `output`.

    Creates, in order: `attention/self/{query,key,value}`, `attention/output/{dense,LayerNorm}`,
    `intermediate/dense`, `output/dense`, `output/LayerNorm`.
    """

    def __init__(self, config, name, **kwargs):
        """Args:
        config: A `BertConfig` (or its dict).
        name: Variable scope, `layer_{i}` in the original.
        """
        # Not autocast: the residual stream passes through in its own dtype (see LayerNorm).
        super().__init__(config, name=name, autocast=False, **kwargs)
        config = self.config
        self.hidden_size = config.hidden_size
        self.attention = Attention(config, dtype=self.dtype_policy)
        self.intermediate = Intermediate(config, dtype=self.dtype_policy)
        self.output_block = DenseOutput(config, config.intermediate_size, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.attention.build()
        self.intermediate.build()
        self.output_block.build()

    def call(self, hidden_states, input_mask, training=False, from_states=None, packing=None):
        """Args:
          hidden_states: float [batch, seq, H] (or [batch * seq, H], or with `packing` the
            real tokens' [tokens, H]).
          input_mask: [batch, seq] padding mask.
          training: Whether dropout is on.
          from_states: None, or float [batch, R, H], the rows of `hidden_states` to compute the
            output at (all positions still serve as keys and values).
          packing: None, or the `Packing` of `input_mask` that packed `hidden_states`.

        Returns:
          float, in the shape of `from_states` (by default `hidden_states`).
        """
        attention_output = self.attention(
            hidden_states, input_mask, training=training, from_states=from_states, packing=packing
        )
        intermediate_output = self.intermediate(attention_output, training=training)
        return self.output_block(intermediate_output, attention_output, training=training)


@keras.saving.register_keras_serializable(package="bert_tf")
class Intermediate(BertConfigured, keras.layers.Layer):
    """`intermediate/dense`: the widening dense layer [H, I] with `hidden_act`."""

    def __init__(self, config, name="intermediate", **kwargs):
        super().__init__(config, name=name, **kwargs)
        config = self.config
        self.hidden_size = config.hidden_size
        # The activation inside the Dense layer: TensorFlow's oneDNN rewrite fuses GELU into the
        # matmul before it only when both are in one name scope, the layer's.
        self.dense = dense(
            config.intermediate_size, config, self.dtype_policy, get_activation(config.hidden_act)
        )
        self.training_activation = get_activation(config.hidden_act, training=True)
        # What the training pass's input gradient multiplies the upstream gradient by: None for
        # automatic differentiation's `upstream @ kernel^T`, or a function giving the kernel's
        # transpose (`compile_training_form`; see `matmul_with_kernel_transpose`).
        self.kernel_transpose = None

    def build(self, input_shape=None):
        self.dense.build((None, self.hidden_size))

    def compile_training_form(self, compile_fn):
        """Has the activation's training form run its computations as `compile_fn` compiles
        them (the TensorFlow trainer: with XLA, one pass over memory each way), and the input
        gradient multiply by the kernel's transpose made by `compile_fn`.

        Args:
          compile_fn: Maps a function of tensors to a compiled one.
        """
        self.training_activation = get_activation(
            self.config.hidden_act, training=True, compile_fn=compile_fn
        )
        self.kernel_transpose = compiled_transpose(compile_fn)

    def call(self, x, training=False):
        """Args:
          x: float [..., H].
          training: Whether this pass is differentiated: the dense layer's matmul and bias, then
            the activation's training form (`get_activation`).

        Returns:
          float [..., I].
        """
        if not training:
            return self.dense(x)
        if self.kernel_transpose is None:
            product = ops.matmul(x, self.dense.kernel)
        else:
            kernel = ops.cast(self.dense.kernel, x.dtype)
            product = matmul_with_kernel_transpose(x, kernel, self.kernel_transpose)
        return self.training_activation(ops.add(product, self.dense.bias))


@functools.cache  # one function (and one set of compiled traces) for every layer
def compiled_transpose(compile_fn):
    """`compile_fn(ops.transpose)`, shared by the layers trained with one `compile_fn`.

    Args:
      compile_fn: Maps a function of tensors to a compiled one.

    Returns:
      The compiled transpose of a matrix.
    """
    return compile_fn(ops.transpose)


def matmul_with_kernel_transpose(x, kernel, transpose):
    """`x @ kernel`, whose gradient of `x` is `upstream @ transpose(kernel)`: a product with the
    kernel's transpose as a tensor of its own, where automatic differentiation multiplies by the
    kernel read transposed.

    For the feed-forward block's [1024, 3072] x [3072, 768] input gradient, TensorFlow's oneDNN
    runs the product with a transposed right operand slower than the same product with a
    contiguous one (BUILD_NOTES.md, "Training"). TensorFlow's graph optimizer
    folds a `tf.transpose` feeding a matmul back into the matmul, so `transpose` must be compiled
    apart from the graph (the trainer passes an XLA-compiled one).

    Args:
      x: float [..., K].
      kernel: float [K, N], a tensor of x's dtype.
      transpose: Maps `kernel` to its [N, K] transpose.

    Returns:
      float [..., N].
    """

    @ops.custom_gradient
    def product(x, kernel):
        rows = ops.reshape(x, (-1, ops.shape(x)[-1]))

        def gradient(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            upstream_rows = ops.reshape(upstream, (-1, ops.shape(kernel)[-1]))
            x_gradient = ops.reshape(ops.matmul(upstream_rows, transpose(kernel)), ops.shape(x))
            return x_gradient, ops.matmul(ops.transpose(rows), upstream_rows)

        return ops.matmul(x, kernel), gradient

    return product(x, kernel)

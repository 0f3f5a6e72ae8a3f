"""The sub-layer output block the original uses twice: dense, dropout, residual, LayerNorm."""

import keras
from keras import ops

from bert_tf.modeling.dropout import Dropout
from bert_tf.modeling.initializers import dense
from bert_tf.modeling.layer_norm import LayerNorm
from bert_tf.modeling.serialization import BertConfigured


@keras.saving.register_keras_serializable(package="bert_tf")
class DenseOutput(BertConfigured, keras.layers.Layer):
    """`LayerNorm(dropout(dense(x)) + residual)`: the post-LN end of a Transformer sub-layer.

    It is `attention/output` (input width H) and `output` (input width I) in the original;
    both create `dense/kernel`, `dense/bias`, `LayerNorm/beta`, `LayerNorm/gamma`.
    """

    def __init__(self, config, input_size, name="output", **kwargs):
        """Args:
        config: A `BertConfig` (or its dict).
        input_size: Width of the dense layer's input.
        name: Variable scope; the original's is "output".
        """
        # Not autocast: the residual reaches the LayerNorm in its own dtype (see LayerNorm).
        super().__init__(config, name=name, autocast=False, **kwargs)
        config = self.config
        self.input_size = input_size
        self.dense = dense(config.hidden_size, config, self.dtype_policy)
        self.dropout = Dropout(config.hidden_dropout_prob, dtype=self.dtype_policy)
        self.layer_norm = LayerNorm(config.hidden_size, dtype=self.dtype_policy)
        # In inference the bias is added with the residual, not by the matmul (see
        # `SelfAttention.fold_biases`).
        self.fold_bias = True

    def get_config(self):
        config = super().get_config()
        config["input_size"] = self.input_size
        return config

    def build(self, input_shape=None):
        self.dense.build((None, self.input_size))
        self.layer_norm.build()

    def call(self, x, residual, training=False, input_offset=None):
        """Args:
          x: float [..., input_size], the sub-layer's output.
          residual: float [..., hidden], the sub-layer's input (float32 under mixed precision:
            the LayerNorm's output, or the embeddings').
          training: Whether dropout is on.
          input_offset: None, or float [input_size], a vector the sub-layer left out of every
            row of `x` (`SelfAttention`'s deferred value bias).

        Returns:
          float [..., hidden], in the variable dtype (LayerNorm's).
        """
        if training or not self.fold_bias:
            if input_offset is not None:
                x = x + ops.cast(input_offset, x.dtype)
            y = self.dropout(self.dense(x), training=training)
            return self.layer_norm(y, residual, training=training)
        # The matmul alone (see `SelfAttention.fold_biases`); the bias, and what the offset
        # becomes through the kernel, join the sum the LayerNorm takes in float32 anyway.
        kernel = ops.cast(self.dense.kernel, self.compute_dtype)
        bias = ops.cast(self.dense.bias, residual.dtype)
        if input_offset is not None:
            offset = ops.matmul(ops.cast(input_offset, self.compute_dtype)[None], kernel)[0]
            bias = bias + ops.cast(offset, residual.dtype)
        y = ops.matmul(ops.cast(x, self.compute_dtype), kernel)
        return self.layer_norm(y, residual + bias)

"""The `bert/encoder` stack: `num_hidden_layers` Transformer layers."""

import keras
from keras import ops

from bert_tf.modeling.gather import gather_indexes
from bert_tf.modeling.serialization import BertConfigured
from bert_tf.modeling.token_packing import Packing
from bert_tf.modeling.transformer_layer import TransformerLayer


@keras.saving.register_keras_serializable(package="bert_tf")
class Encoder(BertConfigured, keras.layers.Layer):
    """`layer_0` ... `layer_{L-1}` applied in turn; returns every layer's output.

    As the original's `transformer_model`, the layers work on the sequence flattened to a
    [batch * seq, H] matrix (a dense layer is then one matmul, which oneDNN fuses with its bias
    and activation), and each layer's output is reshaped back to [batch, seq, H].
    """

    def __init__(self, config, name="encoder", **kwargs):
        """Args:
        config: A `BertConfig` (or its dict).
        name: Variable scope; the original's is "encoder".
        """
        # Not autocast: the residual stream passes through in its own dtype (see LayerNorm).
        super().__init__(config, name=name, autocast=False, **kwargs)
        self.transformer_layers = [
            TransformerLayer(self.config, name=f"layer_{i}", dtype=self.dtype_policy)
            for i in range(self.config.num_hidden_layers)
        ]
        self.pack_tokens = False

    def build(self, input_shape=None):
        for layer in self.transformer_layers:
            layer.build()

    def call(self, hidden_states, input_mask, training=False, last_layer_positions=None):
        """Args:
          hidden_states: float [batch, seq, H], the embedding output.
          input_mask: [batch, seq] padding mask.
          training: Whether dropout is on.
          last_layer_positions: None, or int [batch, R]: the last layer's output is computed at
            these positions of each sequence only, and is [batch, R, H] (the values are those
            of the whole layer at these positions). A loss that reads a few positions (the
            pretraining heads: [CLS] and the masked tokens) then skips most of the last layer.

        Returns:
          A list of L float [batch, seq, H] tensors, the output of each layer.
        """
        shape = ops.shape(hidden_states)
        hidden_states = ops.reshape(hidden_states, (-1, shape[-1]))
        packing = None
        if self.pack_tokens and not training and last_layer_positions is None:
            packing = Packing(input_mask)
            hidden_states = packing.pack(hidden_states)

        def unpacked(x):
            return ops.reshape(x if packing is None else packing.unpack(x), shape)

        all_layer_outputs = []
        *layers, last_layer = self.transformer_layers
        for layer in layers:
            hidden_states = layer(hidden_states, input_mask, training=training, packing=packing)
            all_layer_outputs.append(unpacked(hidden_states))
        if last_layer_positions is None:
            output = last_layer(hidden_states, input_mask, training=training, packing=packing)
            all_layer_outputs.append(unpacked(output))
        else:
            rows = gather_indexes(ops.reshape(hidden_states, shape), last_layer_positions)
            rows = ops.reshape(rows, (-1, ops.shape(last_layer_positions)[1], shape[-1]))
            output = last_layer(hidden_states, input_mask, training=training, from_states=rows)
            all_layer_outputs.append(output)
        return all_layer_outputs

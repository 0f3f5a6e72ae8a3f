"""The `bert/pooler`: `tanh(dense(sequence_output[:, 0]))`."""

import keras
from keras import ops

from bert_tf.modeling.initializers import create_initializer


class Pooler(keras.layers.Layer):
    """Pools a sequence into the hidden state of its first ([CLS]) token, through a tanh dense."""

    def __init__(self, config, name="pooler", **kwargs):
        """Args:
        config: A `BertConfig`.
        name: Variable scope; the original's is "pooler".
        """
        super().__init__(name=name, **kwargs)
        self.hidden_size = config.hidden_size
        self.dense = keras.layers.Dense(
            config.hidden_size,
            activation=ops.tanh,
            kernel_initializer=create_initializer(config.initializer_range),
            name="dense",
            dtype=self.dtype_policy,
        )

    def build(self, input_shape=None):
        self.dense.build((None, self.hidden_size))

    def call(self, sequence_output):
        """Args:
          sequence_output: float [batch, seq, H].

        Returns:
          float [batch, H].
        """
        return self.dense(sequence_output[:, 0])

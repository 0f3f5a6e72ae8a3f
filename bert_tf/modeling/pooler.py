"""The `bert/pooler`: `tanh(dense(sequence_output[:, 0]))`."""

import keras
from keras import ops

from bert_tf.modeling.initializers import dense
from bert_tf.modeling.serialization import BertConfigured


@keras.saving.register_keras_serializable(package="bert_tf")
class Pooler(BertConfigured, keras.layers.Layer):
    """Pools a sequence into the hidden state of its first ([CLS]) token, through a tanh dense.

    Not autocast: under mixed precision the [CLS] rows are taken from the float32 sequence
    output first, and only they are cast (by the dense layer), not the whole [batch, seq, H].
    """

    def __init__(self, config, name="pooler", **kwargs):
        """Args:
        config: A `BertConfig` (or its dict).
        name: Variable scope; the original's is "pooler".
        """
        super().__init__(config, name=name, autocast=False, **kwargs)
        config = self.config
        self.hidden_size = config.hidden_size
        self.dense = dense(config.hidden_size, config, self.dtype_policy, ops.tanh)

    def build(self, input_shape=None):
        self.dense.build((None, self.hidden_size))

    def call(self, sequence_output):
        """Args:
          sequence_output: float [batch, seq, H].

        Returns:
          float [batch, H].
        """
        return self.dense(sequence_output[:, 0])

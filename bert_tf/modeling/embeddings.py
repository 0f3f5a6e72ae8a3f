"""The `bert/embeddings` block: word + token type + position, LayerNorm, dropout."""

import keras
from keras import ops

from bert_tf.modeling.dropout import Dropout
from bert_tf.modeling.initializers import create_initializer
from bert_tf.modeling.layer_norm import LayerNorm
from bert_tf.modeling.serialization import BertConfigured


@keras.saving.register_keras_serializable(package="bert_tf")
class Embeddings(BertConfigured, keras.layers.Layer):
    """`LayerNorm(word[input_ids] + token_type[segment_ids] + position[0..S-1])`, then dropout.

    Creates, in the original's order, `word_embeddings` [V, H], `token_type_embeddings` [T, H],
    `position_embeddings` [P, H], then `LayerNorm/beta` and `LayerNorm/gamma`.

    Under mixed precision the tables are not autocast (a read would cast all V x H entries):
    the rows are gathered and summed in float32, where the LayerNorm computes anyway.
    """

    def __init__(self, config, name="embeddings", **kwargs):
        """Args:
        config: A `BertConfig` (or its dict).
        name: Variable scope; the original's is "embeddings".
        """
        super().__init__(config, name=name, **kwargs)
        config = self.config
        self.layer_norm = LayerNorm(config.hidden_size, dtype=self.dtype_policy)
        # On the LayerNorm's output, in its dtype (see LayerNorm).
        self.dropout = Dropout(config.hidden_dropout_prob, dtype=self.dtype_policy, autocast=False)

    def build(self, input_shape=None):
        config = self.config
        initializer = create_initializer(config.initializer_range)
        self.word_embeddings = self.add_weight(
            name="word_embeddings",
            autocast=False,
            shape=(config.vocab_size, config.hidden_size),
            initializer=initializer,
        )
        self.token_type_embeddings = self.add_weight(
            name="token_type_embeddings",
            autocast=False,
            shape=(config.type_vocab_size, config.hidden_size),
            initializer=initializer,
        )
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            autocast=False,
            shape=(config.max_position_embeddings, config.hidden_size),
            initializer=initializer,
        )
        self.layer_norm.build()

    def call(self, input_ids, segment_ids, training=False):
        """Args:
          input_ids: int [batch, seq] WordPiece ids.
          segment_ids: int [batch, seq] token type ids.
          training: Whether dropout is on.

        Returns:
          float [batch, seq, hidden] embedding output.

        Raises:
          ValueError: `seq` (where known when the call is traced) is above
            `max_position_embeddings`, the rows of the position table.
        """
        seq_length = ops.shape(input_ids)[1]
        max_positions = self.position_embeddings.shape[0]
        if isinstance(seq_length, int) and seq_length > max_positions:
            raise ValueError(
                f"input_ids has {seq_length} tokens per row, more than "
                f"max_position_embeddings={max_positions}"
            )
        embeddings = (
            ops.take(self.word_embeddings, input_ids, axis=0)
            + ops.take(self.token_type_embeddings, segment_ids, axis=0)
            + self.position_embeddings[None, :seq_length]
        )
        return self.dropout(self.layer_norm(embeddings), training=training)

"""Sentence vectors: the last layer's token vectors pooled into one per sequence, as
sentence-transformers' `Pooling` and `Normalize` modules compute them (`keras.ops` only).

- `pool_tokens`: the pooling itself, over the real tokens of each row (`input_mask`), then, with
  `normalize`, a division by the vector's L2 norm (at least 1e-12).
- `SentencePooling`: that as a Keras layer, without variables.
- `BertSentenceEncoder`: `BertModel` plus a `SentencePooling` on its last layer, whose
  `sentence_embedding` is what sentence-transformers' `encode()` gives for the same weights.

The poolings (`bert_tf.model_settings.POOLINGS`):
- `cls`: the first token's vector ([CLS]; sentence-transformers takes the first real token,
  the same for the right-padded rows here);
- `mean`: the real tokens' sum over their count;
- `max`: each component's largest value over the real tokens;
- `mean_sqrt_len_tokens`: the real tokens' sum over the square root of their count.
"""

import keras
from keras import ops

from bert_tf.model_settings import POOLINGS
from bert_tf.modeling.models import BertModel
from bert_tf.modeling.serialization import BertConfigured

# sentence-transformers' floors: of the token count (mean pooling) and of the norm (Normalize).
_MIN_COUNT = 1e-9
_MIN_NORM = 1e-12


def check_pooling(pooling):
    """Raises ValueError, naming the poolings, when `pooling` is not one of `POOLINGS`."""
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")


def pool_tokens(sequence_output, input_mask, pooling, normalize=False):
    """One vector per row of `sequence_output`, from its real tokens (module docstring).

    Args:
      sequence_output: float [batch, seq, H], the last layer's output.
      input_mask: int or float [batch, seq], 1 for a real token, 0 for padding; each row's
        first position real where any is (right padding, [CLS] first: every caller's), which
        `max` pooling relies on.
      pooling: One of `POOLINGS`.
      normalize: Scale each vector to unit L2 norm.

    Returns:
      float32 [batch, H].

    Raises:
      ValueError: An unknown `pooling`.
    """
    check_pooling(pooling)
    tokens = ops.cast(sequence_output, "float32")
    # `expand_dims`, not `[:, :, None]`: LiteRT's strided slice has no new axes (an edge export
    # would need TensorFlow's own kernel for it).
    mask = ops.expand_dims(ops.cast(input_mask, "float32"), -1)
    if pooling == "cls":
        vector = tokens[:, 0]
    elif pooling == "max":
        # The padding takes the first token's values ([CLS], real in the right-padded rows here),
        # which leave the maximum as it is, rather than sentence-transformers' -inf: LiteRT's int8
        # calibration gives a select's inputs the range of its output, and -inf there spread to
        # the last layer (and to the pooler's int8 input read from it).
        vector = ops.max(ops.where(mask > 0, tokens, tokens[:, :1]), axis=1)
    else:
        total = ops.sum(tokens * mask, axis=1)
        count = ops.maximum(ops.sum(mask, axis=1), _MIN_COUNT)
        vector = total / (count if pooling == "mean" else ops.sqrt(count))
    if normalize:
        norm = ops.sqrt(ops.sum(ops.square(vector), axis=-1, keepdims=True))
        vector = vector / ops.maximum(norm, _MIN_NORM)
    return vector


@keras.saving.register_keras_serializable(package="bert_tf")
class SentencePooling(keras.layers.Layer):
    """`pool_tokens` as a layer: `(sequence_output, input_mask)` -> float32 [batch, H]."""

    def __init__(self, pooling="mean", normalize=False, name="sentence_pooling", **kwargs):
        """Args:
        pooling: One of `POOLINGS`.
        normalize: Scale each vector to unit L2 norm.
        name: The layer's name.

        Raises:
          ValueError: An unknown `pooling`.
        """
        super().__init__(name=name, autocast=False, **kwargs)
        check_pooling(pooling)
        self.pooling = pooling
        self.normalize = bool(normalize)
        self.built = True

    def call(self, sequence_output, input_mask):
        return pool_tokens(sequence_output, input_mask, self.pooling, self.normalize)

    def get_config(self):
        return dict(super().get_config(), pooling=self.pooling, normalize=self.normalize)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSentenceEncoder(BertConfigured, keras.Model):
    """`BertModel` (`bert/...`, the original's names) and a `SentencePooling` of its last layer.

    It has no variables beyond `BertModel`'s, so a Google checkpoint of any BERT loads into it.

    Inputs: `BertModel`'s dict of int [batch, seq] `input_ids`, `input_mask`, `segment_ids`.
    Outputs: `BertModel`'s, plus float32 `sentence_embedding` [batch, H].
    """

    def __init__(
        self, config, pooling="mean", normalize=False, bert=None, name="bert_sentence_encoder", **kwargs
    ):
        """Args:
        config: A `BertConfig` (or its dict).
        pooling: One of `POOLINGS`.
        normalize: Scale each vector to unit L2 norm.
        bert: A `BertModel` of `config` to pool (its weights shared), or None for a new one.
        name: The model's name (no variable path includes it).

        Raises:
          ValueError: An unknown `pooling`.
        """
        super().__init__(config, name=name, **kwargs)
        self.bert = bert if bert is not None else BertModel(self.config, dtype=self.dtype_policy)
        self.sentence_pooling = SentencePooling(pooling, normalize)
        self.built = True

    @property
    def pooling(self):
        return self.sentence_pooling.pooling

    @property
    def normalize(self):
        return self.sentence_pooling.normalize

    def get_config(self):
        return dict(super().get_config(), pooling=self.pooling, normalize=self.normalize)

    def call(self, inputs, training=False):
        outputs = self.bert(inputs, training=training)
        embedding = self.sentence_pooling(outputs["sequence_output"], inputs["input_mask"])
        return dict(outputs, sentence_embedding=embedding)

"""The BERT model in Keras 3, one module per concept of the original (`keras.ops` only), and the
trainer's hook into the layers' compiled training forms (`training_forms`).

Importing it registers every model with Keras (a `.keras` file of any of them then loads).
"""

from bert_tf.modeling.finetuning import (
    BertClassifier,
    BertMultipleChoice,
    BertRegressor,
    BertSquad,
    BertTagger,
    BertWithHead,
)
from bert_tf.modeling.losses import masked_lm_loss, next_sentence_loss
from bert_tf.modeling.models import BertModel, BertPretrainer
from bert_tf.modeling.pooling import BertSentenceEncoder, SentencePooling

__all__ = [
    "BertClassifier",
    "BertModel",
    "BertMultipleChoice",
    "BertPretrainer",
    "BertRegressor",
    "BertSentenceEncoder",
    "BertSquad",
    "BertTagger",
    "SentencePooling",
    "BertWithHead",
    "masked_lm_loss",
    "next_sentence_loss",
]

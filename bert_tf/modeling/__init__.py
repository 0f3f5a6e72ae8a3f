"""The BERT model in Keras 3, one module per concept of the original (`keras.ops` only), and the
trainer's hook into the layers' compiled training forms (`training_forms`)."""

from bert_tf.modeling.losses import masked_lm_loss, next_sentence_loss
from bert_tf.modeling.models import BertModel, BertPretrainer

__all__ = ["BertModel", "BertPretrainer", "masked_lm_loss", "next_sentence_loss"]

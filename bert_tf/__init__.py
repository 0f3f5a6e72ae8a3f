"""bert_tf: Google's original BERT in TensorFlow 2 / Keras 3, in the original checkpoint layout.

The names below are imported on first use, so `import bert_tf` (and the data and tokenizer
modules, which pretraining-data workers import) does not load Keras or TensorFlow.
"""

import importlib

_EXPORTS = {
    "BertConfig": "bert_tf.config",
    "BertModel": "bert_tf.modeling",
    "BertPretrainer": "bert_tf.modeling",
    "BertSentenceEncoder": "bert_tf.modeling",
    "masked_lm_loss": "bert_tf.modeling",
    "next_sentence_loss": "bert_tf.modeling",
    "LoadReport": "bert_tf.checkpoints",
    "load_google_checkpoint": "bert_tf.checkpoints",
    "save_google_checkpoint": "bert_tf.checkpoints",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'bert_tf' has no attribute {name!r}")

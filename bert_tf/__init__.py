"""bert_tf: Google's original BERT in TensorFlow 2 / Keras 3, in the original checkpoint layout."""

from bert_tf.config import BertConfig
from bert_tf.modeling import BertModel, BertPretrainer, masked_lm_loss, next_sentence_loss


def __getattr__(name):
    # The checkpoint functions need TensorFlow; import it only when they are asked for, so the
    # model itself can be used on the JAX backend without loading TensorFlow.
    if name in ("load_google_checkpoint", "save_google_checkpoint", "LoadReport"):
        from bert_tf import checkpoints

        return getattr(checkpoints, name)
    raise AttributeError(f"module 'bert_tf' has no attribute {name!r}")


__all__ = [
    "BertConfig",
    "BertModel",
    "BertPretrainer",
    "LoadReport",
    "load_google_checkpoint",
    "masked_lm_loss",
    "next_sentence_loss",
    "save_google_checkpoint",
]

"""sentence-transformers' poolings written out in NumPy: the reference the sentence-vector tests
(`test_sentence_embeddings.py`, `test_edge.py`) hold `bert_tf.modeling.pooling` and the exports to."""

import numpy as np


def numpy_pooling(tokens, mask, pooling, normalize=False):
    """sentence-transformers' pooling of each row's real tokens (`mask` > 0), in float64.

    Args:
      tokens: float [batch, seq, H].
      mask: [batch, seq], 1 for a real token, 0 for padding.
      pooling: One of `bert_tf.model_settings.POOLINGS`.
      normalize: Scale each vector to unit L2 norm.

    Returns:
      float64 [batch, H].
    """
    rows = []
    for row, row_mask in zip(np.asarray(tokens, np.float64), np.asarray(mask), strict=True):
        real = row[row_mask > 0]
        vector = {
            "cls": row[0],
            "mean": real.sum(0) / len(real),
            "max": real.max(0),
            "mean_sqrt_len_tokens": real.sum(0) / np.sqrt(len(real)),
        }[pooling]
        rows.append(vector / np.linalg.norm(vector) if normalize else vector)
    return np.stack(rows)

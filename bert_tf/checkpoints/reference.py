"""BERT's forward pass in float64 NumPy, written from the original's math, not from the Keras code.

It is the independent yardstick the converter and the tests hold the Keras model against. Weights
come as a dict from Google checkpoint names to arrays; nothing here depends on Keras. Inference
only (no dropout).
"""

import collections.abc
import math

import numpy as np


def gelu_tanh(x):
    """`0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, the original code's "gelu"."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def gelu_erf(x):
    """`x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2)))`, the exact form ("gelu_exact")."""
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


ACTIVATIONS = {
    "gelu": gelu_tanh,
    "gelu_exact": gelu_erf,
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "linear": lambda x: x,
}


def layer_norm(x, gamma, beta, epsilon=1e-12):
    """Normalises each vector over its last axis: `gamma (x - mu) / sqrt(sigma^2 + eps) + beta`."""
    mu = x.mean(axis=-1, keepdims=True)
    sigma2 = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(sigma2 + epsilon) + beta


def log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def softmax(x):
    return np.exp(log_softmax(x))


class _Weights:
    """Looks up Google-named weights as float64 arrays."""

    def __init__(self, weights):
        self._weights = weights

    def __call__(self, name):
        return np.asarray(self._weights[name], dtype=np.float64)

    def __contains__(self, name):
        return name in self._weights

    def dense(self, scope, x):
        """`x K + b` for the kernel [in, out] and bias [out] under `scope`."""
        kernel = self(f"{scope}/kernel")
        # One product of all the rows (NumPy multiplies a [B, S, in] array by a matrix one
        # [S, in] block at a time, at half the rate for BERT-Large's shapes).
        rows = x.reshape(-1, x.shape[-1]) @ kernel
        return rows.reshape(*x.shape[:-1], kernel.shape[-1]) + self(f"{scope}/bias")

    def layer_norm(self, scope, x):
        return layer_norm(x, self(f"{scope}/LayerNorm/gamma"), self(f"{scope}/LayerNorm/beta"))


def embeddings(w, input_ids, segment_ids):
    """`LN(E_word[ids] + E_type[segments] + E_pos[0..S-1])`: [B, S, H]."""
    seq_length = input_ids.shape[1]
    x = (
        w("bert/embeddings/word_embeddings")[input_ids]
        + w("bert/embeddings/token_type_embeddings")[segment_ids]
        + w("bert/embeddings/position_embeddings")[:seq_length][None]
    )
    return w.layer_norm("bert/embeddings", x)


def self_attention(w, scope, x, input_mask, num_heads):
    """Multi-head attention of every position over the real positions: [B, S, H].

    Per head h: `softmax(Q_h K_h^T / sqrt(d) + (1 - mask) * -10000) V_h`, with
    `mask[b, i, j] = input_mask[b, j]`; the heads are concatenated.
    """
    batch, seq_length, hidden = x.shape
    d = hidden // num_heads

    def heads(name):  # [B, S, H] -> [B, A, S, d]
        y = w.dense(f"{scope}/{name}", x)
        return y.reshape(batch, seq_length, num_heads, d).transpose(0, 2, 1, 3)

    q, k, v = heads("query"), heads("key"), heads("value")
    adder = (1.0 - input_mask[:, None, None, :].astype(np.float64)) * -10000.0
    probs = softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + adder)
    return (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq_length, hidden)


def transformer_layer(w, scope, x, input_mask, config):
    """Post-LN block: `A = LN(x + Wo attn(x))`, `y = LN(A + W2 act(W1 A))`."""
    act = ACTIVATIONS[config.hidden_act]
    context = self_attention(w, f"{scope}/attention/self", x, input_mask, config.num_attention_heads)
    attention = w.layer_norm(
        f"{scope}/attention/output", w.dense(f"{scope}/attention/output/dense", context) + x
    )
    hidden = act(w.dense(f"{scope}/intermediate/dense", attention))
    return w.layer_norm(f"{scope}/output", w.dense(f"{scope}/output/dense", hidden) + attention)


def pooler(w, sequence_output):
    """`tanh(W h_[CLS] + b)`: [B, H]."""
    return np.tanh(w.dense("bert/pooler/dense", sequence_output[:, 0]))


def masked_lm_log_probs(w, sequence_output, positions, config):
    """Log-probabilities over the vocabulary at the gathered positions: [B * P, V].

    `h = LN(act(W x + b))`, `logits = h E_word^T + b_out`.
    """
    act = ACTIVATIONS[config.hidden_act]
    batch = np.arange(sequence_output.shape[0])[:, None]
    x = sequence_output[batch, positions].reshape(-1, sequence_output.shape[-1])
    h = w.layer_norm("cls/predictions/transform", act(w.dense("cls/predictions/transform/dense", x)))
    logits = h @ w("bert/embeddings/word_embeddings").T + w("cls/predictions/output_bias")
    return log_softmax(logits)


def next_sentence_log_probs(w, pooled_output):
    """`log_softmax(pooled W^T + b)` with W of shape [2, H]: [B, 2]."""
    logits = pooled_output @ w("cls/seq_relationship/output_weights").T
    return log_softmax(logits + w("cls/seq_relationship/output_bias"))


def reference_forward(
    weights,
    config,
    input_ids,
    input_mask,
    segment_ids,
    masked_lm_positions=None,
    masked_lm_ids=None,
    masked_lm_weights=None,
    next_sentence_labels=None,
):
    """Runs BERT (and its pretraining heads) in float64.

    Args:
      weights: Google checkpoint name -> array (any float dtype).
      config: A `BertConfig`.
      input_ids, input_mask, segment_ids: int [B, S].
      masked_lm_positions: int [B, P]; with it (and the `cls/*` weights) the heads run.
      masked_lm_ids, masked_lm_weights: [B, P] labels and weights for the MLM loss.
      next_sentence_labels: [B] or [B, 1]; 0 means B follows A, 1 that B is random.

    Returns:
      A dict of float64 arrays keyed as the fixture `reference_outputs.npz`:
      `embedding_output`, `encoder_layer_{i}`, `sequence_output`, `pooled_output` (where the
      weights have a pooler), and as the optional inputs allow `masked_lm_log_probs`,
      `next_sentence_log_probs`, `masked_lm_example_loss`, `masked_lm_loss`,
      `next_sentence_example_loss`, `next_sentence_loss`, `total_loss`.
    """
    w = _Weights(weights)
    input_ids = np.asarray(input_ids)
    input_mask = np.asarray(input_mask)
    segment_ids = np.asarray(segment_ids)

    x = embeddings(w, input_ids, segment_ids)
    out = {"embedding_output": x}
    for i in range(config.num_hidden_layers):
        x = transformer_layer(w, f"bert/encoder/layer_{i}", x, input_mask, config)
        out[f"encoder_layer_{i}"] = x
    out["sequence_output"] = x
    if "bert/pooler/dense/kernel" not in w:  # a checkpoint without a pooler
        return out
    out["pooled_output"] = pooler(w, x)

    if masked_lm_positions is None or "cls/predictions/output_bias" not in w:
        return out
    out["masked_lm_log_probs"] = masked_lm_log_probs(w, x, np.asarray(masked_lm_positions), config)
    out["next_sentence_log_probs"] = next_sentence_log_probs(w, out["pooled_output"])
    if masked_lm_ids is not None and masked_lm_weights is not None:
        labels = np.asarray(masked_lm_ids).reshape(-1)
        example = -out["masked_lm_log_probs"][np.arange(labels.size), labels]
        weight = np.asarray(masked_lm_weights, dtype=np.float64).reshape(-1)
        out["masked_lm_example_loss"] = example
        out["masked_lm_loss"] = (weight * example).sum() / (weight.sum() + 1e-5)
    if next_sentence_labels is not None:
        labels = np.asarray(next_sentence_labels).reshape(-1)
        example = -out["next_sentence_log_probs"][np.arange(labels.size), labels]
        out["next_sentence_example_loss"] = example
        out["next_sentence_loss"] = example.mean()
    if "masked_lm_loss" in out and "next_sentence_loss" in out:
        out["total_loss"] = out["masked_lm_loss"] + out["next_sentence_loss"]
    return out


def checkpoint_variable_names(path):
    """The variable names of a Google checkpoint (a prefix), without reading the tensors."""
    from bert_tf.checkpoints.google import open_checkpoint  # only the readers need TensorFlow

    return set(open_checkpoint(path).get_variable_to_shape_map())


class CheckpointWeights(collections.abc.Mapping):
    """Variables of a Google checkpoint by name, each read when it is looked up: a model's
    weights are never all in memory (`reference_forward` uses one at a time).

    Args:
      path: The checkpoint prefix (e.g. `.../bert_model.ckpt`).
      names: The variables it holds for the lookup; None: every one.
    """

    def __init__(self, path, names=None):
        from bert_tf.checkpoints.google import open_checkpoint  # only the readers need TensorFlow

        self._reader = open_checkpoint(path)
        self._names = list(self._reader.get_variable_to_shape_map() if names is None else names)

    def __getitem__(self, name):
        if name not in self._names:
            raise KeyError(name)
        return self._reader.get_tensor(name)

    def __iter__(self):
        return iter(self._names)

    def __len__(self):
        return len(self._names)


def load_checkpoint_weights(path, names=None):
    """Variables of a Google checkpoint, as `{name: np.ndarray}`.

    Args:
      path: The checkpoint prefix (e.g. `.../bert_model.ckpt`).
      names: The variables to read; None: every one.
    """
    return dict(CheckpointWeights(path, names))

"""NumPy re-derivations of the original's training arithmetic, for the trainer's tests.

Written from the original's formulas (`optimization.py`), not from bert_tf's code: the learning
rate schedule, global-norm clipping, and the AdamWeightDecay update. Gradients of the model come
from a plain `tf.GradientTape` on one device.
"""

import re

import numpy as np

EXCLUDED = ("LayerNorm", "layer_norm", "bias")


def learning_rate(step, init_lr, num_train_steps, num_warmup_steps):
    if num_warmup_steps and step < num_warmup_steps:
        return init_lr * step / num_warmup_steps
    return init_lr * (1.0 - min(step, num_train_steps) / num_train_steps)


def clip(gradients, clip_norm=1.0):
    """`tf.clip_by_global_norm` in float64: (clipped dict, norm)."""
    norm = np.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64))) for g in gradients.values()))
    scale = clip_norm / max(norm, clip_norm)
    return {name: g * scale for name, g in gradients.items()}, norm


class AdamWeightDecay:
    """The original's update, on `{name: array}` parameters (float64)."""

    def __init__(self, params, weight_decay_rate=0.01):
        self.weight_decay_rate = weight_decay_rate
        self.m = {name: np.zeros_like(p, dtype=np.float64) for name, p in params.items()}
        self.v = {name: np.zeros_like(p, dtype=np.float64) for name, p in params.items()}

    def apply(self, params, gradients, lr):
        out = {}
        for name, p in params.items():
            g = gradients[name]
            self.m[name] = 0.9 * self.m[name] + 0.1 * g
            self.v[name] = 0.999 * self.v[name] + 0.001 * g * g
            update = self.m[name] / (np.sqrt(self.v[name]) + 1e-6)
            if not any(re.search(pattern, name) for pattern in EXCLUDED):
                update = update + self.weight_decay_rate * p
            out[name] = p - lr * update
        return out


def model_gradients(model, batch, loss_fn):
    """`{path: dense float64 gradient}` and the loss of `loss_fn(outputs, batch)` on one device."""
    import tensorflow as tf

    with tf.GradientTape() as tape:
        loss = loss_fn(model(batch, training=True), batch)
    gradients = tape.gradient(loss, model.trainable_variables)
    return (
        {
            v.path: np.asarray(tf.convert_to_tensor(g), np.float64)
            for v, g in zip(model.trainable_variables, gradients, strict=True)
        },
        float(loss),
    )


def pretraining_loss(outputs, batch):
    """The original's `total_loss` (masked LM + next sentence)."""
    from bert_tf.modeling import masked_lm_loss, next_sentence_loss

    mlm, _ = masked_lm_loss(
        outputs["masked_lm_log_probs"], batch["masked_lm_ids"], batch["masked_lm_weights"]
    )
    nsp, _ = next_sentence_loss(outputs["next_sentence_log_probs"], batch["next_sentence_labels"])
    return mlm + nsp

"""Gradients of the pretraining loss against finite differences of the float64 reference.

The word embeddings are used twice (input lookup and MLM output projection, tied) and
`cls/predictions/output_bias` is created in an unusual way (see TiedOutputLogits): both must get
the gradient of the whole loss, on TensorFlow and on JAX.
"""

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertConfig, BertPretrainer, load_google_checkpoint, masked_lm_loss, next_sentence_loss
from bert_tf.checkpoints import reference
from tests import model_fixtures as mf

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"
OUTPUT_BIAS = "cls/predictions/output_bias"
STEP = 1e-4  # central differences in float64: truncation and rounding both far below 1e-8


def coordinates(batch):
    """`{variable: [index, ...]}`: the word embedding rows of ids that are inputs only, labels
    only, both or neither (two of each but one), and the output biases of labels and non-labels."""
    inputs = set(batch["input_ids"][batch["input_mask"] == 1].tolist())
    labels = set(batch["masked_lm_ids"][batch["masked_lm_weights"] > 0].tolist())
    neither = min(set(range(5000, 6000)) - inputs - labels)
    rows = sorted(inputs - labels)[:2] + sorted(labels - inputs)[:2] + sorted(inputs & labels)[:2] + [neither]
    return {
        WORD_EMBEDDINGS: [[row, column] for row, column in zip(rows, itertools.cycle((3, 77)))],
        OUTPUT_BIAS: [[label] for label in sorted(labels)[:2]] + [[min(inputs - labels)], [neither]],
    }


@pytest.fixture(scope="module")
def batch():
    return mf.train_batch()


@pytest.fixture(scope="module")
def config():
    return BertConfig.from_json_file(mf.GOOGLE_TINY_TRAIN_CONFIG)


@pytest.fixture(scope="module")
def finite_differences(fixtures_dir, batch, config):
    """`{variable: [d total_loss / d weight[index], ...]}` of the float64 reference.

    22 reference passes over the batch (a few seconds).
    """
    weights = {
        name: value.astype(np.float64)
        for name, value in reference.load_checkpoint_weights(mf.GOOGLE_TINY_CKPT).items()
    }

    def total_loss():
        return reference.reference_forward(weights, config, **batch)["total_loss"]

    derivatives = {}
    for name, indexes in coordinates(batch).items():
        values = weights[name]
        derivatives[name] = []
        for index in map(tuple, indexes):
            original = values[index]
            values[index] = original + STEP
            up = total_loss()
            values[index] = original - STEP
            down = total_loss()
            values[index] = original
            derivatives[name].append((up - down) / (2 * STEP))
    return derivatives


def check(gradients, finite_differences):
    for name, want in finite_differences.items():
        # Each coordinate's derivative is far from 0: a gradient missing one of the two uses of
        # the table (or the bias) is off by much more than the tolerance.
        assert min(abs(d) for d in want) > 5e-6
        np.testing.assert_allclose(gradients[name], want, rtol=1e-4, atol=1e-7, err_msg=name)


def test_tensorflow_gradients(batch, config, finite_differences):
    model = BertPretrainer(config)
    load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
    variables = {w.path: w for w in model.trainable_weights}
    with tf.GradientTape() as tape:
        out = model(mf.model_inputs(batch), training=True)
        mlm, _ = masked_lm_loss(
            out["masked_lm_log_probs"], batch["masked_lm_ids"], batch["masked_lm_weights"]
        )
        nsp, _ = next_sentence_loss(out["next_sentence_log_probs"], batch["next_sentence_labels"])
        total = mlm + nsp
    names = list(finite_differences)
    grads = tape.gradient(total, [variables[name] for name in names])
    gradients = {}
    for name, grad in zip(names, grads, strict=True):
        grad = np.asarray(tf.convert_to_tensor(grad))  # the table's gradient sums slices and a dense part
        gradients[name] = [grad[tuple(index)] for index in coordinates(batch)[name]]
    check(gradients, finite_differences)


_JAX_SCRIPT = """
import json, sys
import jax
import keras
assert keras.backend.backend() == "jax", keras.backend.backend()
sys.path.insert(0, {repo!r})
from bert_tf import BertConfig, BertPretrainer, load_google_checkpoint, masked_lm_loss, next_sentence_loss
from tests import model_fixtures as mf

model = BertPretrainer(BertConfig.from_json_file(mf.GOOGLE_TINY_TRAIN_CONFIG))
load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
batch = mf.train_batch()


def total_loss(trainable, non_trainable, batch):
    out, _ = model.stateless_call(trainable, non_trainable, mf.model_inputs(batch), training=True)
    mlm, _ = masked_lm_loss(out["masked_lm_log_probs"], batch["masked_lm_ids"], batch["masked_lm_weights"])
    nsp, _ = next_sentence_loss(out["next_sentence_log_probs"], batch["next_sentence_labels"])
    return mlm + nsp


grads = jax.jit(jax.grad(total_loss))(
    [v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables], batch
)
position = {{v.path: i for i, v in enumerate(model.trainable_variables)}}
wanted = json.loads(sys.argv[1])
print("GRADIENTS", json.dumps({{
    name: [float(grads[position[name]][tuple(index)]) for index in indexes]
    for name, indexes in wanted.items()
}}))
"""


def test_jax_gradients_under_jit(batch, finite_differences):
    # About 20 s: a fresh process imports JAX and TensorFlow and compiles the gradient.
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    result = subprocess.run(
        [sys.executable, "-c", _JAX_SCRIPT.format(repo=REPO), json.dumps(coordinates(batch))],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    check(json.loads(result.stdout.split("GRADIENTS")[-1]), finite_differences)

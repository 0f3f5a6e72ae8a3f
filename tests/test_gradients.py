"""Gradients of the pretraining loss against finite differences of the float64 reference.

The word embeddings are used twice (input lookup and MLM output projection, tied) and
`cls/predictions/output_bias` is created in an unusual way (see TiedOutputLogits): both must get
the gradient of the whole loss, on TensorFlow and on JAX.
"""

import itertools
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertConfig, BertPretrainer, load_google_checkpoint, masked_lm_loss, next_sentence_loss
from bert_tf.checkpoints import reference
from tests import model_fixtures as mf
from tests import tool_runs

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


# The losses on the log-probabilities, and on the logits as the trainer takes them (the
# cross-entropy's own gradient, `softmax - one_hot`, see `sparse_softmax_cross_entropy`).
OUTPUTS = {False: "log_probs", True: "logits"}


@pytest.mark.parametrize("from_logits", list(OUTPUTS), ids=list(OUTPUTS.values()))
def test_tensorflow_gradients(batch, config, finite_differences, from_logits):
    model = BertPretrainer(config)
    load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
    variables = {w.path: w for w in model.trainable_weights}
    outputs = OUTPUTS[from_logits]
    with tf.GradientTape() as tape:
        out = model(mf.model_inputs(batch), training=True)
        mlm, _ = masked_lm_loss(
            out[f"masked_lm_{outputs}"], batch["masked_lm_ids"], batch["masked_lm_weights"], from_logits
        )
        nsp, _ = next_sentence_loss(
            out[f"next_sentence_{outputs}"], batch["next_sentence_labels"], from_logits
        )
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


def gradients(trainable, non_trainable, batch):
    # {{outputs: gradients of the trainable variables}}: one forward pass, pulled back from the
    # loss on the log-probabilities and from the loss on the logits.
    def forward(trainable):
        return model.stateless_call(trainable, non_trainable, mf.model_inputs(batch), training=True)[0]

    out, pull_back = jax.vjp(forward, trainable)
    grads = {{}}
    for outputs in ("log_probs", "logits"):
        from_logits = outputs == "logits"

        def total_loss(out):
            mlm, _ = masked_lm_loss(
                out["masked_lm_" + outputs], batch["masked_lm_ids"], batch["masked_lm_weights"], from_logits
            )
            nsp, _ = next_sentence_loss(
                out["next_sentence_" + outputs], batch["next_sentence_labels"], from_logits
            )
            return mlm + nsp

        grads[outputs] = pull_back(jax.grad(total_loss)(out))[0]
    return grads


position = {{v.path: i for i, v in enumerate(model.trainable_variables)}}
wanted = json.loads(sys.argv[1])
found = {{}}
grads = jax.jit(gradients)(
    [v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables], batch
)
for outputs in ("log_probs", "logits"):
    found[outputs] = {{
        name: [float(grads[outputs][position[name]][tuple(index)]) for index in indexes]
        for name, indexes in wanted.items()
    }}
print("GRADIENTS", json.dumps(found))
"""


def test_jax_gradients_under_jit(batch, finite_differences):
    # A process of tool_runs' JAX server (JAX, Keras on JAX and bert_tf imported, as the script
    # imports them first) compiles the gradient.
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    result = tool_runs.run(
        [sys.executable, "-c", _JAX_SCRIPT.format(repo=REPO), json.dumps(coordinates(batch))],
        env=env,
        cwd=REPO,
        timeout=600,
        server=tool_runs.JAX,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.split("GRADIENTS")[-1])
    assert list(found) == list(OUTPUTS.values())
    for gradients in found.values():
        check(gradients, finite_differences)

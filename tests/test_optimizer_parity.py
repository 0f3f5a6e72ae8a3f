"""Three steps of the original's AdamWeightDecay (google_tiny_train), through the tool's train step.

From google_tiny's weights with the dropout-0 config, `TrainStep` (the step `run_pretraining.py`
runs) with `create_optimizer("adamw", 1e-4, num_train_steps=10, num_warmup_steps=2)` takes three
steps on `batch.npz`; the learning rates, losses and gradient norms of each step, and the
weights, `adam_m`, `adam_v` and `global_step` of `model.ckpt-3` (the original's checkpoint after
step 3) are compared.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertConfig
from bert_tf.checkpoints import reference
from tests import model_fixtures as mf
from tests import train_step_fixtures
from tests.train_step_fixtures import NSP_WEIGHTS, TRAIN, default_three_steps


@pytest.fixture(scope="module")
def trained(fixtures_dir):
    """The three steps (`tests.train_step_fixtures`, made once per process): (task, optimizer,
    per-step records: metrics, the learning rate before the step, the NSP weights' slots after
    it)."""
    return default_three_steps()


def test_learning_rates_losses_and_gradient_norms_per_step(trained):
    with open(os.path.join(TRAIN, "train_log.json")) as f:
        log = json.load(f)["steps"]
    _, optimizer, records = trained
    for want, got in zip(log, records, strict=True):
        assert got["learning_rate"] == pytest.approx(want["learning_rate"], abs=1e-12), want["step"]
        assert abs(got["loss"] - want["total_loss"]) <= 1e-5, want["step"]
        assert abs(got["grad_norm"] - want["grad_global_norm_before_clip"]) <= 1e-5, want["step"]
    assert int(optimizer.iterations.numpy()) == 3


def test_weights_and_step_after_three_steps(trained):
    task, optimizer, _ = trained
    reader = tf.train.load_checkpoint(os.path.join(TRAIN, "model.ckpt-3"))
    assert int(reader.get_tensor("global_step")) == int(optimizer.iterations.numpy()) == 3
    for weight in task.model.weights:
        np.testing.assert_allclose(
            weight.numpy(), reader.get_tensor(weight.path), rtol=0, atol=1e-6, err_msg=weight.path
        )


def _float32_noise_only(name):
    """The attention key biases: softmax ignores a constant added to every score of a row, so
    their gradient is exactly zero and both runs' moments hold rounding noise (about 1e-12)."""
    return name.endswith("attention/self/key/bias")


def test_adam_slots_after_three_steps(trained):
    task, optimizer, _ = trained
    reader = tf.train.load_checkpoint(os.path.join(TRAIN, "model.ckpt-3"))
    for variable in task.model.trainable_variables:
        for index, slot_name in enumerate(optimizer.slot_names):
            got = optimizer.slots(variable)[index].numpy()
            want = reader.get_tensor(f"{variable.path}/{slot_name}")
            scale = np.abs(want).max()
            if _float32_noise_only(variable.path):
                # Noise on both sides: tiny against the slot of the query bias beside it.
                neighbour = reader.get_tensor(f"{variable.path.replace('/key/', '/query/')}/{slot_name}")
                bound = 1e-4 * np.abs(neighbour).max()
                assert np.abs(got).max() <= bound and scale <= bound, variable.path
                continue
            # The NSP weights' gradient is a sum of terms of opposite sign over the batch;
            # both runs carry about 4e-6 of its scale in float32 rounding
            # (test_nsp_weight_gradient_is_as_exact_as_the_original's).
            relative = 1e-5 if variable.path == NSP_WEIGHTS else 1e-6
            tolerance = 1e-4 * np.abs(want) + relative * scale
            assert (np.abs(got - want) <= tolerance).all(), f"{variable.path}/{slot_name}"


def test_nsp_weight_gradient_is_as_exact_as_the_originals(trained):
    """After step 1, adam_m = 0.1 * clipped gradient. Against that gradient in float64 (from
    the float64 reference's pooled output), bert_tf's error is no larger than twice the
    original's own."""
    config = BertConfig.from_json_file(os.path.join(TRAIN, "bert_config.json"))
    batch = train_step_fixtures.batch()
    _, _, records = trained
    with open(os.path.join(TRAIN, "train_log.json")) as f:
        norm = json.load(f)["steps"][0]["grad_global_norm_before_clip"]  # the clipping divisor

    weights = reference.load_checkpoint_weights(mf.GOOGLE_TINY_CKPT)
    pooled = reference.reference_forward(
        weights, config, batch["input_ids"], batch["input_mask"], batch["segment_ids"]
    )["pooled_output"]
    logits = pooled @ weights[NSP_WEIGHTS].astype(np.float64).T + weights["cls/seq_relationship/output_bias"]
    probabilities = reference.softmax(logits)
    labels = np.eye(2)[batch["next_sentence_labels"].ravel()]
    exact_m = 0.1 * ((probabilities - labels).T @ pooled) / len(labels) / norm

    ours = records[0]["slots"][NSP_WEIGHTS][0]  # adam_m after step 1
    original = np.load(os.path.join(TRAIN, "per_step_small_variables.npz"))[f"step1/{NSP_WEIGHTS}/adam_m"]
    original_error = np.abs(original - exact_m).max()
    assert np.abs(ours - exact_m).max() <= 2 * original_error
    assert original_error <= 1e-5 * np.abs(exact_m).max()

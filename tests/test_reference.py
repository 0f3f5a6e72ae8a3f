"""The float64 NumPy reference against the original code's outputs."""

import math

import numpy as np
import pytest

from bert_tf import BertConfig
from bert_tf.checkpoints import reference
from tests import model_fixtures as mf


@pytest.fixture(scope="module")
def weights():
    return reference.load_checkpoint_weights(mf.GOOGLE_TINY_CKPT)


@pytest.fixture(scope="module")
def config():
    return BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)


@pytest.mark.parametrize("batch_name", mf.BATCHES)
def test_reference_matches_the_original(fixtures_dir, weights, config, batch_name):
    batch = mf.reference_arrays()[batch_name]
    out = reference.reference_forward(
        weights,
        config,
        batch["input_ids"],
        batch["input_mask"],
        batch["segment_ids"],
        masked_lm_positions=batch["masked_lm_positions"],
        masked_lm_ids=batch["masked_lm_ids"],
        masked_lm_weights=batch["masked_lm_weights"],
        next_sentence_labels=batch["next_sentence_labels"],
    )
    for key in mf.OUTPUT_KEYS:
        np.testing.assert_allclose(out[key], batch[key], rtol=0, atol=1e-5, err_msg=key)


def test_gelu_forms():
    x = np.array([1.0])
    assert reference.gelu_erf(x)[0] == pytest.approx(0.8413447460685429, abs=1e-15)
    assert reference.gelu_tanh(x)[0] == pytest.approx(0.8411919906082768, abs=1e-15)
    grid = np.linspace(-4, 4, 81)
    assert np.abs(reference.gelu_erf(grid) - reference.gelu_tanh(grid)).max() > 1e-4


def test_layer_norm_normalises_each_token_over_its_features():
    x = np.array([[1.0, 2.0, 3.0, 6.0], [10.0, 10.0, 10.0, 14.0]])
    y = reference.layer_norm(x, np.ones(4), np.zeros(4))
    np.testing.assert_allclose(y.mean(-1), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(-1), 1, atol=1e-9)
    np.testing.assert_allclose(y[1], [-1 / math.sqrt(3)] * 3 + [math.sqrt(3)], atol=1e-9)


def test_padding_does_not_change_real_positions(fixtures_dir, weights, config):
    batch = mf.reference_arrays()["b0"]
    row, real = 1, int(batch["input_mask"][1].sum())
    changed = batch["input_ids"].copy()
    changed[row, real:] = 2000
    a = reference.reference_forward(
        weights, config, batch["input_ids"], batch["input_mask"], batch["segment_ids"]
    )
    b = reference.reference_forward(weights, config, changed, batch["input_mask"], batch["segment_ids"])
    np.testing.assert_allclose(a["sequence_output"][row, :real], b["sequence_output"][row, :real], atol=1e-12)
    assert np.abs(a["sequence_output"][row, real:] - b["sequence_output"][row, real:]).max() > 1e-3

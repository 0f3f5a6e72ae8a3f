"""Dropout: the keep decisions from 15 bits of each draw, the scale, the rate and the gradient."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling.dropout import Dropout, drop_threshold, dropout_training_form


def expected_keep(draws, width, threshold):
    """NumPy: the documented mapping of int32 draws [rows, 1, d] to keep decisions [rows, width]."""
    draws = draws[:, 0, :].astype(np.int64)
    if draws.shape[-1] == width:
        bits = draws & 0x7FFF
    else:
        bits = np.concatenate([draws & 0x7FFF, draws >> 15], axis=-1)
    return bits >= threshold


@pytest.mark.parametrize("width", [8, 7], ids=["two_per_draw", "one_per_draw"])
@pytest.mark.parametrize("compiled", [False, True], ids=["keras_ops", "xla"])
def test_training_form_keeps_where_the_draws_bits_reach_the_threshold(width, compiled):
    rng = np.random.default_rng(0)
    rows, threshold = 300, drop_threshold(0.3)
    draws = rng.integers(0, 1 << 30, size=(rows, 1, width // 2 if width % 2 == 0 else width), dtype=np.int32)
    # Draws at the edges of the decision: bits just below and at the threshold, in both halves.
    draws[0, 0, 0] = threshold - 1 + (threshold << 15)
    draws[1, 0, 0] = threshold + ((threshold - 1) << 15)
    x = rng.normal(size=(rows, width)).astype(np.float32)
    upstream = rng.normal(size=(rows, width)).astype(np.float32)
    compile_fn = (lambda f: tf.function(f, jit_compile=True)) if compiled else None
    form = dropout_training_form(threshold, compile_fn)
    x_tensor = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x_tensor)
        y = form(x_tensor, tf.constant(draws))
    gradient = tape.gradient(y, x_tensor, output_gradients=tf.constant(upstream))

    keep = expected_keep(draws, width, threshold)
    if width % 2 == 0:
        assert not keep[0, 0] and keep[0, width // 2] and keep[1, 0] and not keep[1, width // 2]
    scale = 32768 / (32768 - threshold)
    np.testing.assert_allclose(y.numpy(), np.where(keep, x * scale, 0.0), rtol=1e-6, atol=0)
    np.testing.assert_allclose(gradient.numpy(), np.where(keep, upstream * scale, 0.0), rtol=1e-6, atol=0)


@pytest.mark.parametrize("rate", [0.1, 0.5])
@pytest.mark.parametrize("compiled", [False, True], ids=["keras_ops", "xla"])
def test_layer_drops_at_the_rate_and_keeps_the_expectation(rate, compiled):
    layer = Dropout(rate, seed=7)
    if compiled:  # as the trainer's `TrainStep` compiles it
        layer.compile_training_form(lambda f: tf.function(f, jit_compile=True))
    ones = tf.ones([256, 768])
    first, second = (layer(ones, training=True).numpy() for _ in range(2))
    keep_probability = 1 - drop_threshold(rate) / 32768
    assert abs(keep_probability - (1 - rate)) < 2e-5
    count = first.size
    sigma = np.sqrt(keep_probability * (1 - keep_probability) / count)
    assert abs((first != 0).mean() - keep_probability) < 5 * sigma
    # Unbiased: the kept values are 1 / keep_probability, so the mean is 1 up to the sampling error.
    assert set(np.unique(first)) == {0.0, np.float32(1 / keep_probability)}
    assert abs(first.mean() - 1) < 5 * sigma / keep_probability
    # The seed generator advances: the next call draws another mask.
    assert 0.5 * (1 - keep_probability) < ((first != 0) != (second != 0)).mean()


def test_identity_out_of_training_and_at_rates_that_round_to_zero():
    """Rates below 2^-16 round to a threshold of 0: nothing dropped, and `drops` says so (the
    attention then may take the backend's fused kernel)."""
    x = tf.random.normal([4, 6])
    np.testing.assert_array_equal(Dropout(0.1)(x).numpy(), x.numpy())
    assert Dropout(0.1).drops(True) and not Dropout(0.1).drops(False)
    for rate in [0.0, 1e-5]:
        np.testing.assert_array_equal(Dropout(rate)(x, training=True).numpy(), x.numpy())
        assert not Dropout(rate).drops(True)


@pytest.mark.parametrize("rate", [-0.1, 1.0])
def test_rate_outside_zero_to_one_is_an_error(rate):
    with pytest.raises(ValueError, match="dropout rate"):
        Dropout(rate)

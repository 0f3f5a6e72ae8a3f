"""Dropout: the keep decisions from 15 bits of each draw, the scale, the rate and the gradient;
the keyed draws against a NumPy reference of their hash, and their statistics."""

import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling.dropout import Dropout, drop_threshold, dropout_training_form, keyed_draws
from tests import tool_runs


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
@pytest.mark.parametrize("keyed", [False, True], ids=["drawn", "keyed"])
def test_layer_drops_at_the_rate_and_keeps_the_expectation(rate, compiled, keyed):
    layer = Dropout(rate, seed=7, keyed=keyed)
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


def lowbias32(x):
    """NumPy reference of the documented hash, on uint64 holding uint32 values."""
    mask = 0xFFFFFFFF
    x = ((x ^ (x >> 16)) * 0x7FEB352D) & mask
    x = ((x ^ (x >> 15)) * 0x846CA68B) & mask
    return x ^ (x >> 16)


def reference_keyed_draws(shape, key):
    index = np.arange(np.prod(shape), dtype=np.uint64).reshape(shape)
    key = np.asarray(key, np.uint64)
    return (lowbias32(lowbias32(index ^ key[0]) ^ key[1]) & ((1 << 30) - 1)).astype(np.int32)


@pytest.mark.parametrize("key", [(0, 0), (1, 2), ((1 << 30) - 1, 12345)])
def test_keyed_draws_are_the_documented_hash_of_index_and_key(key):
    shape = (3, 4, 1, 5)
    got = keyed_draws(shape, tf.constant(key, tf.int32))
    np.testing.assert_array_equal(np.asarray(got), reference_keyed_draws(shape, key))


def test_keyed_draws_look_uniform_and_independent():
    """Each 15-bit half is uniform (chi-square over 64 buckets), neighbours and the two halves
    of a draw are uncorrelated, and keys one apart give unrelated draws: an identity or a weak
    mix of the index fails these."""
    count = 1 << 20
    draws = np.asarray(keyed_draws((count,), tf.constant([7, 8], tf.int32))).astype(np.int64)
    halves = (draws & 0x7FFF, draws >> 15)
    expected = count / 64
    for half in halves:
        histogram = np.bincount(half >> 9, minlength=64)
        chi2 = ((histogram - expected) ** 2 / expected).sum()
        assert chi2 < 130, chi2  # 63 degrees of freedom: the 0.99999 quantile is about 120
    uniform = [h / 32768.0 - 0.5 for h in halves]
    sigma = 1 / np.sqrt(count)
    assert abs(np.corrcoef(uniform[0], uniform[1])[0, 1]) < 5 * sigma
    assert abs(np.corrcoef(uniform[0][1:], uniform[0][:-1])[0, 1]) < 5 * sigma
    # Both neighbours dropped at rate 0.1: p^2, not p.
    dropped = halves[0] < drop_threshold(0.1)
    both = (dropped[1:] & dropped[:-1]).mean()
    p = dropped.mean()
    assert abs(both - p * p) < 5 * np.sqrt(p * p / count)
    other = np.asarray(keyed_draws((count,), tf.constant([7, 9], tf.int32))).astype(np.int64)
    assert abs(np.mean((draws ^ other) >> 29 & 1) - 0.5) < 5 * sigma


def test_keyed_draws_of_a_shape_known_when_the_graph_runs():
    """In a TensorFlow graph whose batch is unknown at tracing (`Dropout(keyed=True)` on
    TensorFlow), the draws are the same as with the static shape."""
    key = tf.constant([5, 6], tf.int32)
    draws = tf.function(
        lambda x: keyed_draws((tf.shape(x)[0], 1, 4), key),
        input_signature=[tf.TensorSpec([None, 8], tf.float32)],
    )
    np.testing.assert_array_equal(draws(tf.zeros([3, 8])).numpy(), reference_keyed_draws((3, 1, 4), (5, 6)))


@pytest.mark.parametrize("compiled", [False, True], ids=["keras_ops", "xla"])
def test_keyed_training_form_recomputes_the_forward_mask_for_the_gradient(compiled):
    rng = np.random.default_rng(1)
    rows, width, threshold, key = 64, 10, drop_threshold(0.2), (3, 4)
    x = rng.normal(size=(rows, width)).astype(np.float32)
    upstream = rng.normal(size=(rows, width)).astype(np.float32)
    compile_fn = (lambda f: tf.function(f, jit_compile=True)) if compiled else None
    form = dropout_training_form(threshold, compile_fn, keyed=True)
    x_tensor = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x_tensor)
        y = form(x_tensor, tf.constant(key, tf.int32))
    gradient = tape.gradient(y, x_tensor, output_gradients=tf.constant(upstream))
    keep = expected_keep(reference_keyed_draws((rows, 1, width // 2), key), width, threshold)
    scale = 32768 / (32768 - threshold)
    np.testing.assert_allclose(y.numpy(), np.where(keep, x * scale, 0.0), rtol=1e-6, atol=0)
    np.testing.assert_allclose(gradient.numpy(), np.where(keep, upstream * scale, 0.0), rtol=1e-6, atol=0)


_JAX_SCRIPT = """
import json, sys
import jax, keras, numpy as np
assert keras.backend.backend() == "jax", keras.backend.backend()
sys.path.insert(0, {repo!r})
from bert_tf.modeling.dropout import Dropout, drop_threshold, dropout_training_form
threshold = drop_threshold(0.2)
form = dropout_training_form(threshold, keyed=True)
x = np.random.default_rng(0).normal(size=(64, 10)).astype(np.float32)
upstream = np.random.default_rng(1).normal(size=(64, 10)).astype(np.float32)
key = np.array([3, 4], np.int32)
y = jax.jit(form)(x, key)
gradient = jax.jit(jax.grad(lambda x: (form(x, key) * upstream).sum()))(x)
layer = Dropout(0.1, seed=5)
ones = np.ones((256, 768), np.float32)
kept = float((np.asarray(jax.jit(lambda o: layer(o, training=True))(ones)) != 0).mean())
y, gradient = np.asarray(y).tolist(), np.asarray(gradient).tolist()
print(json.dumps(dict(keyed=layer.keyed, y=y, gradient=gradient, kept=kept)))
"""


def test_keyed_dropout_is_the_default_on_jax_and_matches_the_reference_under_jit():
    """On JAX (its default there), the jitted training form's output and gradient keep exactly
    the elements the NumPy reference of the keyed draws keeps, and the layer keeps ~90%."""
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # Forked from tool_runs' JAX server: the script imports JAX and Keras on JAX, then bert_tf.
    result = tool_runs.run(
        [sys.executable, "-c", _JAX_SCRIPT.format(repo=repo)], env=env, timeout=600, server=tool_runs.JAX
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["keyed"] is True
    threshold = drop_threshold(0.2)
    x = np.random.default_rng(0).normal(size=(64, 10)).astype(np.float32)
    upstream = np.random.default_rng(1).normal(size=(64, 10)).astype(np.float32)
    keep = expected_keep(reference_keyed_draws((64, 1, 5), (3, 4)), 10, threshold)
    scale = 32768 / (32768 - threshold)
    np.testing.assert_allclose(out["y"], np.where(keep, x * scale, 0.0), rtol=1e-6, atol=0)
    np.testing.assert_allclose(out["gradient"], np.where(keep, upstream * scale, 0.0), rtol=1e-6, atol=0)
    p = 1 - drop_threshold(0.1) / 32768
    assert abs(out["kept"] - p) < 5 * np.sqrt(p * (1 - p) / (256 * 768))

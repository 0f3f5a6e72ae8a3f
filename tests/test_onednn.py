"""`bert_tf.onednn`: the LayerNorm that TensorFlow's oneDNN runs as one kernel, against the
float64 reference, and where the model uses it (traced inference on a CPU, not in exports).

Where this TensorFlow runs without oneDNN (its default on CPUs without AVX-512 or AMX), the
form is TensorFlow's batch normalisation, and the model uses the generic ops everywhere."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import onednn
from bert_tf.checkpoints import reference as ref
from bert_tf.modeling.layer_norm import LayerNorm
from tests.op_trace import op_types_run

HIDDEN = 64
# The generic form's ops; none of them runs when the LayerNorm is oneDNN's kernel.
GENERIC_OPS = {"Mean", "Rsqrt", "Square"}
BATCH_NORM_OPS = {"FusedBatchNormV3", "_MklFusedBatchNormV3", "_MklNativeFusedBatchNormV3"}


ONEDNN = onednn.onednn_enabled()


def _weights(rng):
    return (1.0 + 0.2 * rng.standard_normal(HIDDEN)), rng.standard_normal(HIDDEN)


def _layer_norm(gamma, beta):
    layer = LayerNorm(HIDDEN)
    layer.build()
    layer.gamma.assign(gamma.astype("float32"))
    layer.beta.assign(beta.astype("float32"))
    return layer


@pytest.mark.parametrize("shape", [(48, HIDDEN), (3, 16, HIDDEN)], ids=["tokens", "batch_seq"])
@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_layer_norm_form_is_the_reference(shape, jit_compile):
    """One `_MklLayerNorm` in a graph; under XLA (no oneDNN there) the same function."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape) * 3.0 + 1.0
    gamma, beta = _weights(rng)
    form = tf.function(
        lambda x: onednn.layer_norm(x, tf.constant(gamma, tf.float32), tf.constant(beta, tf.float32), 1e-12),
        jit_compile=jit_compile,
    )
    x32 = tf.constant(x, tf.float32)
    got = np.asarray(form(x32), np.float64)
    np.testing.assert_allclose(got, ref.layer_norm(x, gamma, beta), rtol=0, atol=1e-5)
    if not jit_compile:
        op_types = op_types_run(lambda: form(x32).numpy())
        if ONEDNN:
            assert op_types["_MklLayerNorm"] == 1, sorted(op_types.items())
            assert not (GENERIC_OPS | BATCH_NORM_OPS) & set(op_types), sorted(op_types.items())
        else:  # unfused, as TensorFlow's batch normalisation
            assert "FusedBatchNormV3" in op_types and not GENERIC_OPS & set(op_types), sorted(
                op_types.items()
            )


def test_layer_norm_layer_uses_the_kernel_in_traced_inference_only():
    """Traced inference on this CPU: oneDNN's kernel. Eagerly, in training and inside
    `portable()` (export): the generic ops. The same function every time, from a float32 input
    and a bfloat16 summand (the residual stream under mixed precision)."""
    rng = np.random.default_rng(1)
    gamma, beta = _weights(rng)
    layer = _layer_norm(gamma, beta)
    x = tf.constant(rng.standard_normal((2, 24, HIDDEN)) * 3.0 + 1.0, tf.float32)
    residual = tf.constant(rng.standard_normal((2, 24, HIDDEN)), tf.bfloat16)
    want = ref.layer_norm(np.asarray(x, np.float64) + np.asarray(tf.cast(residual, tf.float64)), gamma, beta)

    def check(got):
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=0, atol=1e-5)

    traced = tf.function(lambda x, residual: layer(x, residual))
    check(traced(x, residual))
    op_types = op_types_run(lambda: traced(x, residual).numpy())
    if ONEDNN:
        assert op_types["_MklLayerNorm"] == 1 and not GENERIC_OPS & set(op_types), sorted(op_types.items())
    else:  # no rewrite to expect: the generic ops
        assert not onednn.applies() and set(op_types) >= GENERIC_OPS, sorted(op_types.items())

    check(layer(x, residual))  # eagerly: Grappler rewrites graphs only
    check(tf.function(lambda x, residual: layer(x, residual, training=True))(x, residual))
    with onednn.portable():
        assert not onednn.applies()
        portable = tf.function(lambda x, residual: layer(x, residual))
        graph_ops = {op.type for op in portable.get_concrete_function(x, residual).graph.get_operations()}
    assert graph_ops >= GENERIC_OPS and not BATCH_NORM_OPS & graph_ops, sorted(graph_ops)
    check(portable(x, residual))


def test_gradients_through_the_kernel_form_are_the_generic_forms():
    """An inference pass may still be differentiated (attributions, a frozen-dropout fine-tune):
    TensorFlow's batch-norm gradient gives what differentiating the generic ops gives."""
    rng = np.random.default_rng(2)
    gamma, beta = _weights(rng)
    layer = _layer_norm(gamma, beta)
    x = tf.constant(rng.standard_normal((40, HIDDEN)) * 3.0 + 1.0, tf.float32)
    upstream = tf.constant(rng.standard_normal((40, HIDDEN)), tf.float32)

    def gradients(layer_norm):
        def of(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(layer_norm(x) * upstream)
            return tape.gradient(loss, [x, layer.gamma, layer.beta])

        return tf.function(of)(x)

    # The form itself (`_MklLayerNorm` with oneDNN, TensorFlow's batch normalisation without).
    with_kernel = gradients(lambda x: onednn.layer_norm(x, layer.gamma, layer.beta, layer.epsilon))
    with onednn.portable():
        generic = gradients(layer)
    for got, want, name in zip(with_kernel, generic, ["x", "gamma", "beta"], strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5, err_msg=name)

"""TensorFlow graph forms that oneDNN's graph rewrite runs as one kernel, for inference on a CPU.

The model layers are written in `keras.ops`. Where TensorFlow's oneDNN build has a fused kernel
that no `keras.ops` form reaches, this module writes the TensorFlow ops that Grappler's remapper
replaces with it. The graph holds only public TensorFlow ops, so it runs without oneDNN too,
only slower; the forms are therefore used only where the rewrite happens (`applies`), and
`portable()` turns them off while graphs that will run elsewhere are traced (SavedModel export).
"""

import contextlib
import contextvars

import tensorflow as tf

_portable = contextvars.ContextVar("bert_tf_onednn_portable", default=False)


def onednn_enabled():
    """Whether this TensorFlow runs oneDNN's kernels and graph rewrites.

    True for TensorFlow's x86 builds unless `TF_ENABLE_ONEDNN_OPTS=0` is set.
    """
    try:
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:  # a TensorFlow without the query: assume no rewrite
        return False
    return bool(_pywrap_util_port.IsMklEnabled())


def applies():
    """Whether the graph being traced now gets the oneDNN forms.

    Only graphs (a `tf.function` being traced; Grappler does not rewrite eager ops), only with
    oneDNN, only on a machine whose devices are all CPUs (a GPU or TPU would run the same graph
    on its own kernels), and not inside `portable()`.
    """
    return tf.inside_function() and not _portable.get() and runs_on_onednn_cpus()


def runs_on_onednn_cpus():
    """Whether this process computes on oneDNN's CPU kernels: oneDNN on, and no device but CPUs
    (a GPU or TPU would run the graphs on its own kernels)."""
    return onednn_enabled() and all(
        device.device_type == "CPU" for device in tf.config.list_logical_devices()
    )


@contextlib.contextmanager
def portable():
    """Graphs traced inside use the generic `keras.ops` forms.

    For graphs saved to run on other machines: a TensorFlow Serving build without oneDNN would
    run `layer_norm`'s form as an unfused batch normalisation, slower than the generic one
    (benchmarks/RESULTS.md).
    """
    token = _portable.set(True)
    try:
        yield
    finally:
        _portable.reset(token)


def layer_norm(x, gamma, beta, epsilon):
    """`gamma * (x - mean) / sqrt(var + epsilon) + beta` over the last axis, as `_MklLayerNorm`.

    The remapper fuses the graph of TensorFlow 1's Keras `LayerNormalization`: each row of `x`
    made a channel of a [1, rows, H, 1] NCHW batch normalised in training mode (its statistics
    over the H features), with unit scale and zero offset made by `Fill`, then `* gamma + beta`.
    Constant folding would turn the `Fill`s of a statically shaped input into constants, which
    the pattern does not match; the row count passes through `placeholder_with_default`, which
    constant folding leaves alone. One oneDNN kernel is faster than TensorFlow's element-wise
    ops (BUILD_NOTES.md, "Performance"; the figures in benchmarks/RESULTS.md).

    Args:
      x: float32 [..., H] of rank 2 or 3 (the rewrite's condition).
      gamma: float32 [H].
      beta: float32 [H].
      epsilon: Added to the variance.

    Returns:
      float32, the shape of `x`.
    """
    rows = tf.reduce_prod(tf.shape(x)[:-1], keepdims=True)
    rows = tf.compat.v1.placeholder_with_default(rows, rows.shape)
    channels = tf.reshape(x, [1, -1, x.shape[-1], 1])
    normalized = tf.raw_ops.FusedBatchNormV3(
        x=channels,
        scale=tf.fill(rows, 1.0),
        offset=tf.fill(rows, 0.0),
        mean=tf.constant([], tf.float32),
        variance=tf.constant([], tf.float32),
        epsilon=epsilon,
        is_training=True,
        data_format="NCHW",
    )[0]
    return tf.reshape(normalized, tf.shape(x)) * gamma + beta

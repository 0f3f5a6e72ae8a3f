"""The original's weight initializer."""

import keras


def create_initializer(initializer_range):
    """Truncated normal with `stddev=initializer_range`, cut at two standard deviations.

    Biases and LayerNorm betas start at zero and LayerNorm gammas at one; those are the
    layers' own defaults.
    """
    return keras.initializers.TruncatedNormal(stddev=initializer_range)


def dense(units, config, dtype, activation=None, name="dense"):
    """The original's `tf.layers.dense`: kernel [in, units] from `create_initializer`, zero bias.

    Args:
      units: Output width.
      config: The `BertConfig` (for `initializer_range`).
      dtype: The owning layer's dtype policy, so mixed precision reaches the kernel's matmul.
      activation: Optional callable applied to the output.
      name: Variable scope of the kernel and bias.

    Returns:
      A `keras.layers.Dense`.
    """
    return keras.layers.Dense(
        units,
        activation=activation,
        kernel_initializer=create_initializer(config.initializer_range),
        name=name,
        dtype=dtype,
    )

"""The original's weight initializer."""

import keras


def create_initializer(initializer_range):
    """Truncated normal with `stddev=initializer_range`, cut at two standard deviations.

    Biases and LayerNorm betas start at zero and LayerNorm gammas at one; those are the
    layers' own defaults.
    """
    return keras.initializers.TruncatedNormal(stddev=initializer_range)

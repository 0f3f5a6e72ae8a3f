"""Activation functions a `BertConfig.hidden_act` can name, in `keras.ops`."""

from keras import ops


def gelu(x):
    """GELU as the original code computes it: the tanh approximation.

    `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, as the backend's own op
    (`tf.nn.gelu(approximate=True)`, `jax.nn.gelu`), which oneDNN fuses into the matmul before
    it on CPU and XLA into its neighbours.

    Args:
      x: A float tensor.

    Returns:
      `x` with the activation applied.
    """
    return ops.gelu(x, approximate=True)


def gelu_exact(x):
    """GELU in its exact erf form, `0.5 x (1 + erf(x / sqrt(2)))` (the backend's op).

    The original code used this form before 2019-02-07; the 2018 checkpoints were trained with it.
    """
    return ops.gelu(x, approximate=False)


def linear(x):
    """The identity."""
    return x


_ACTIVATIONS = {
    "gelu": gelu,
    "gelu_exact": gelu_exact,
    "relu": ops.relu,
    "tanh": ops.tanh,
    "linear": linear,
}


def get_activation(name):
    """Maps a `hidden_act` string to its function.

    Args:
      name: One of `bert_tf.config.ACTIVATIONS`.

    Returns:
      A function of one tensor.

    Raises:
      ValueError: `name` is not a known activation.
    """
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; expected one of {', '.join(_ACTIVATIONS)}") from None

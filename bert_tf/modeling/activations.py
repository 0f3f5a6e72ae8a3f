"""Activation functions a `BertConfig.hidden_act` can name, in `keras.ops`."""

import math

from keras import ops

# The tanh-form GELU's constants: u = sqrt(2/pi) (x + 0.044715 x^3).
_GELU_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715


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


@ops.custom_gradient
def gelu_for_training(x):
    """The tanh-form GELU of `gelu`, with its derivative written out, for training.

    With `u = sqrt(2/pi) (x + 0.044715 x^3)`, `0.5 (1 + tanh(u)) = sigmoid(2u) = s`, so
    `gelu(x) = x s` and `gelu'(x) = s (1 + x (1 - s) 2u')`, where
    `2u' = 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2)`. The same function as `gelu` (within
    float32 rounding); its forward pass is 6 element-wise ops and its backward pass 9, against
    about 9 and 12 for automatic differentiation through the tanh form: on TensorFlow without
    XLA each is a pass over the [tokens, intermediate_size] activations. Inference keeps
    `gelu`, the backend's op, which oneDNN fuses into the matmul before it (a custom gradient
    hides the pattern it fuses).

    Args:
      x: A float tensor.

    Returns:
      `gelu(x)`, and the function that maps its upstream gradient to `x`'s.
    """
    two_c = 2.0 * _GELU_SQRT_2_OVER_PI
    s = ops.sigmoid(x * (two_c + (two_c * _GELU_CUBIC) * ops.square(x)))

    def gradient(*args, upstream=None):
        upstream = args[0] if upstream is None else upstream
        slope = two_c + (3.0 * two_c * _GELU_CUBIC) * ops.square(x)
        return upstream * (s * (1.0 + x * (1.0 - s) * slope))

    return x * s, gradient


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


# Training forms of the activations: the same function, with a gradient that is cheaper to run.
_TRAINING_ACTIVATIONS = {"gelu": gelu_for_training}


def get_activation(name, training=False):
    """Maps a `hidden_act` string to its function.

    Args:
      name: One of `bert_tf.config.ACTIVATIONS`.
      training: Whether the function is for a training pass (differentiated); some activations
        have a form whose gradient costs fewer passes over memory (`gelu_for_training`).

    Returns:
      A function of one tensor.

    Raises:
      ValueError: `name` is not a known activation.
    """
    if training and name in _TRAINING_ACTIVATIONS:
        return _TRAINING_ACTIVATIONS[name]
    try:
        return _ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; expected one of {', '.join(_ACTIVATIONS)}") from None
